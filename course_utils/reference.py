"""The course's ``Transformer`` with PyTorch's encoder and decoder inside, for side-by-side comparison.

Same embeddings, scaling, positional encoding, output projection and initialisation; only the
encoder-decoder core is ``nn.Transformer``'s. It takes the course's masks (bool, True = may attend)
and converts them at this border to torch's convention (True = blocked).
"""

from __future__ import annotations

from torch import Tensor, nn

from .masks import causal_mask
from .model import Transformer

__all__ = ["TorchTransformer"]


def _key_padding(mask: Tensor | None) -> Tensor | None:
    """Our ``(B, 1, 1, S)`` padding mask -> torch's ``(B, S)`` key_padding_mask (True = pad)."""
    if mask is None:
        return None
    if mask.dim() != 4 or mask.size(1) != 1 or mask.size(2) != 1:
        raise ValueError(f"expected a padding mask of shape (B, 1, 1, S); got {tuple(mask.shape)}")
    return ~mask[:, 0, 0, :]


class _TorchEncoder(nn.Module):
    def __init__(self, stack: nn.TransformerEncoder) -> None:
        super().__init__()
        self.stack = stack

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        return self.stack(x, src_key_padding_mask=_key_padding(mask))


class _TorchDecoder(nn.Module):
    def __init__(self, stack: nn.TransformerDecoder) -> None:
        super().__init__()
        self.stack = stack

    def forward(
        self, x: Tensor, memory: Tensor, src_mask: Tensor | None = None, tgt_mask: Tensor | None = None
    ) -> Tensor:
        # Always causal. A target_mask (B, 1, T, T) adds padding: its last row is the padding pattern.
        tgt_padding = ~tgt_mask[:, 0, -1, :] if tgt_mask is not None and tgt_mask.dim() == 4 else None
        return self.stack(
            x,
            memory,
            tgt_mask=~causal_mask(x.size(1), device=x.device),  # torch: True = blocked
            tgt_is_causal=True,
            tgt_key_padding_mask=tgt_padding,
            memory_key_padding_mask=_key_padding(src_mask),
        )


class TorchTransformer(Transformer):
    """Same constructor and ``encode``/``decode``/``forward`` as ``course_utils.Transformer``.

    Masks must be the course's: ``padding_mask`` for the source, and ``causal_mask`` or
    ``target_mask`` for the target (the decoder is always causal). Note that ``nn.Transformer``
    ends both stacks with a final LayerNorm even in post-norm mode.
    """

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        d_model: int = 512,
        n_heads: int = 8,
        n_layers: int = 6,
        d_ff: int = 2048,
        dropout: float = 0.1,
        max_len: int = 5000,
        norm_first: bool = False,
    ) -> None:
        super().__init__(src_vocab_size, tgt_vocab_size, d_model, n_heads, 0, d_ff, dropout, max_len, norm_first)
        core = nn.Transformer(
            d_model, n_heads, n_layers, n_layers, d_ff, dropout, batch_first=True, norm_first=norm_first
        )
        # The nested-tensor fast path (evaluation with padding) is a prototype that warns; the course does without.
        core.encoder.enable_nested_tensor = core.encoder.use_nested_tensor = False
        self.encoder, self.decoder = _TorchEncoder(core.encoder), _TorchDecoder(core.decoder)
        self.reset_parameters()
