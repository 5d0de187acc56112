"""The course's ``Transformer`` with PyTorch's encoder and decoder inside, for side-by-side comparison.

Same embeddings, scaling, positional encoding, output projection and initialisation; only the
encoder-decoder core is ``nn.Transformer``'s. It takes the course's masks (bool, True = may attend)
and converts them, whole, to torch's convention (True = blocked) at this border.

Shape letters: B batch, S source length, T target length, h heads.
"""

from __future__ import annotations

from torch import Tensor, nn

from .model import Transformer

__all__ = ["TorchTransformer"]


def key_padding_mask(mask: Tensor | None) -> Tensor | None:
    """The course's padding mask ``(B, 1, 1, S)`` -> torch's ``key_padding_mask`` ``(B, S)``, True = padding."""
    if mask is None:
        return None
    if mask.dim() != 4 or mask.size(1) != 1 or mask.size(2) != 1:
        raise ValueError(
            f"a source mask must be a padding mask of shape (B, 1, 1, S), as padding_mask() gives; got {tuple(mask.shape)}"
        )
    return ~mask[:, 0, 0, :]


def per_head_attn_mask(mask: Tensor | None, n_heads: int) -> Tensor | None:
    """The course's ``(T, T)`` or ``(B, 1, T, T)`` mask -> torch's ``attn_mask`` ``(T, T)`` or ``(B * h, T, T)``,
    True = blocked: every entry passes, padding and causality alike; nothing is inferred."""
    if mask is None:
        return None
    if mask.dim() == 2:
        return ~mask
    if mask.dim() != 4 or mask.size(1) != 1:
        raise ValueError(f"a target mask must have shape (T, T) or (B, 1, T, T); got {tuple(mask.shape)}")
    B, _, T_q, T_k = mask.shape
    return (~mask).expand(B, n_heads, T_q, T_k).reshape(B * n_heads, T_q, T_k)  # torch's layout: batch-major


class TorchEncoder(nn.Module):
    """``nn.TransformerEncoder`` behind the course's ``Encoder`` interface: ``forward(x, mask)``."""

    def __init__(self, stack: nn.TransformerEncoder) -> None:
        super().__init__()
        # The nested-tensor fast path (evaluation with padding) is a prototype that warns; the course does without.
        stack.enable_nested_tensor = stack.use_nested_tensor = False
        self.stack = stack

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        out: Tensor = self.stack(x, src_key_padding_mask=key_padding_mask(mask))
        return out


class TorchDecoder(nn.Module):
    """``nn.TransformerDecoder`` behind the course's ``Decoder`` interface: ``forward(x, memory, src_mask, tgt_mask)``."""

    def __init__(self, stack: nn.TransformerDecoder, n_heads: int) -> None:
        super().__init__()
        self.stack, self.n_heads = stack, n_heads

    def forward(
        self, x: Tensor, memory: Tensor, src_mask: Tensor | None = None, tgt_mask: Tensor | None = None
    ) -> Tensor:
        out: Tensor = self.stack(
            x,
            memory,
            tgt_mask=per_head_attn_mask(tgt_mask, self.n_heads),
            memory_key_padding_mask=key_padding_mask(src_mask),
        )
        return out


class TorchTransformer(Transformer):
    """``course_utils.Transformer`` with ``nn.Transformer``'s encoder and decoder: the same constructor,
    ``encode``/``decode``/``forward`` and masks (``padding_mask`` for the source; ``causal_mask`` or
    ``target_mask`` for the target). Note that ``nn.Transformer`` ends both stacks with a final LayerNorm,
    even in post-norm mode, hence a few more parameters.
    """

    def build_stacks(
        self, d_model: int, n_heads: int, n_layers: int, d_ff: int, dropout: float, norm_first: bool
    ) -> tuple[nn.Module, nn.Module]:
        core = nn.Transformer(
            d_model, n_heads, n_layers, n_layers, d_ff, dropout, batch_first=True, norm_first=norm_first
        )
        return TorchEncoder(core.encoder), TorchDecoder(core.decoder, n_heads)
