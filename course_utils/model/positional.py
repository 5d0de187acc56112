"""Sinusoidal positional encoding (Vaswani et al. 2017, section 3.5) and rotary position embeddings (Su et al. 2021).

Shape letters: B batch, T sequence length, h heads, d_k the dimensions of one head.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["PositionalEncoding", "apply_rotary", "rotary_angles", "rotate", "sinusoidal_encoding"]


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


def apply_rotary(x: Tensor, positions: Tensor, theta: float = 10000.0, pairing: str = "halves") -> Tensor:
    r"""Rotary position embedding (RoPE): each pair of dimensions of ``x`` at position m turned by the angle
    m * omega_i, with omega_i = theta^(-2i / d_k) for the pair i = 0 ... d_k/2 - 1.

    ``x``: queries or keys ``(..., T, d_k)``; ``positions``: ``(T,)`` ints, the positions of those T rows.
    Returns the shape of ``x``. The dot product of a rotated query and a rotated key depends on their positions
    only through their distance.

    ``pairing`` says which dimensions form pair i:

    - ``"halves"``: (i, i + d_k/2), as GPT-NeoX and Hugging Face's Llama compute it (x rotated by "rotate half");
    - ``"interleaved"``: (2i, 2i + 1), as the RoFormer paper, Meta's original Llama code and chapter 03 write it.

    Both encode positions equally well; they differ by a fixed permutation of the d_k dimensions, so weights
    trained for one give other outputs under the other (unless the rows of W^Q and W^K are permuted to match).
    Angles are computed in float32, their cosines and sines rounded to ``x``'s dtype, and the rotation done in that
    dtype, as Llama does.
    """
    if pairing not in ("halves", "interleaved"):
        raise ValueError(f'pairing must be "halves" or "interleaved"; got {pairing!r}')
    d_k = x.size(-1)
    if d_k % 2:
        raise ValueError(f"rotary embeddings turn pairs of dimensions: the last dimension d_k={d_k} must be even")
    if positions.dim() != 1 or positions.size(0) != x.size(-2):
        raise ValueError(
            f"positions must have shape (T,) = ({x.size(-2)},), one position per row of x {tuple(x.shape)}; "
            f"got {tuple(positions.shape)}"
        )
    return rotate(x, *rotary_angles(positions, d_k, theta), pairing)


def rotary_angles(positions: Tensor, d_k: int, theta: float = 10000.0) -> tuple[Tensor, Tensor]:
    r"""The cosines and sines ``(T, d_k/2)`` each, in float32, of the angles m * omega_i by which ``apply_rotary``
    turns pair i at position m (``positions`` ``(T,)``). They depend on the positions only, not on the layer: a
    model computes them once per forward and hands them to every layer (``rotate``), as Hugging Face's
    ``LlamaRotaryEmbedding`` does, instead of one table per layer."""
    omega = 1.0 / theta ** (torch.arange(0, d_k, 2, device=positions.device, dtype=torch.float32) / d_k)  # (d_k/2,)
    angles = positions.to(torch.float32)[:, None] * omega[None, :]  # (T, d_k/2): pair i at position m turns m*omega_i
    return angles.cos(), angles.sin()


def rotate(x: Tensor, cos: Tensor, sin: Tensor, pairing: str = "halves") -> Tensor:
    """``x`` ``(..., T, d_k)`` with each pair of dimensions turned by the angles whose ``cos`` and ``sin``
    ``(T, d_k/2)`` are given (``rotary_angles``): ``apply_rotary`` once the angles are known."""
    d_k = x.size(-1)
    if cos.shape != (x.size(-2), d_k // 2) or sin.shape != cos.shape:
        raise ValueError(
            f"cos and sin must have shape (T, d_k/2) = ({x.size(-2)}, {d_k // 2}) for x {tuple(x.shape)}; got "
            f"{tuple(cos.shape)} and {tuple(sin.shape)} (rotary_angles(positions, d_k) gives them)"
        )
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)  # rounded to x's dtype, as Llama does
    if pairing == "halves":
        first, second = x[..., : d_k // 2], x[..., d_k // 2 :]  # (..., T, d_k/2) each: pair i = (i, i + d_k/2)
    else:
        first, second = x[..., 0::2], x[..., 1::2]  # pair i = (2i, 2i + 1)
    turned_first = first * cos - second * sin  # the 2-D rotation of each pair
    turned_second = first * sin + second * cos
    if pairing == "halves":
        return torch.cat([turned_first, turned_second], dim=-1)  # (..., T, d_k)
    return torch.stack([turned_first, turned_second], dim=-1).flatten(-2)  # (..., T, d_k/2, 2) -> (..., T, d_k)
