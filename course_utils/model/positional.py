"""Sinusoidal positional encoding (Vaswani et al. 2017, section 3.5).

Shape letters: B batch, T sequence length.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["PositionalEncoding", "sinusoidal_encoding"]


def sinusoidal_encoding(max_len: int, d_model: int) -> Tensor:
    r"""The ``(max_len, d_model)`` table of the paper, in float32:

    PE(pos, 2i) = sin(pos / 10000^(2i / d_model)),  PE(pos, 2i+1) = cos(pos / 10000^(2i / d_model)).

    ``two_i`` below *is* 2i (0, 2, 4, ...): it is not multiplied by 2 again, the classic bug
    that stretches every wavelength (lowers every frequency). Computed in float64, then rounded once to float32.
    """
    if not (isinstance(max_len, int) and isinstance(d_model, int) and max_len > 0 and d_model > 0):
        raise ValueError(f"max_len and d_model must be positive ints; got {max_len!r}, {d_model!r}")
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]  # (max_len, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (ceil(d_model / 2),)
    angle = pos / 10000 ** (two_i / d_model)  # (max_len, ceil(d_model / 2))
    pe = torch.empty(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : d_model // 2])  # an odd d_model has one sine column more
    return pe.float()


class PositionalEncoding(nn.Module):
    """Adds the sinusoidal encoding to ``(B, T, d_model)`` embeddings, then applies dropout.

    The table is a non-persistent buffer ``pe`` of shape ``(max_len, d_model)``: it follows
    ``.to(device)`` but is not saved in the state dict (it is recomputed, never learned).
    """

    def __init__(self, d_model: int, dropout: float = 0.0, max_len: int = 5000) -> None:
        super().__init__()
        self.d_model, self.max_len = d_model, max_len
        self.dropout = nn.Dropout(dropout)
        self.pe: Tensor
        self.register_buffer("pe", sinusoidal_encoding(max_len, d_model), persistent=False)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """``offset``: the position of ``x``'s first row (decoding one new token after ``offset`` earlier ones)."""
        if x.dim() != 3 or x.size(-1) != self.d_model:
            raise ValueError(f"expected input (B, T, d_model={self.d_model}); got {tuple(x.shape)}")
        end = offset + x.size(1)
        if end > self.max_len:
            raise ValueError(
                f"sequence length T={end} exceeds max_len={self.max_len}; build the model with max_len >= {end}"
            )
        return self.dropout(x + self.pe[offset:end].to(x.dtype))  # (B, T, d_model) + (T, d_model)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, max_len={self.max_len}"
