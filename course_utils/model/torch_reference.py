"""The course's ``Transformer`` with PyTorch's encoder and decoder layers inside: the same model, built from
``nn.TransformerEncoderLayer`` and ``nn.TransformerDecoderLayer``, for side-by-side comparison.

Same embeddings, scaling, positional encoding, output projection and initialisation, and the same stacks (a final
LayerNorm only in pre-norm mode, as ours). It takes the course's masks (bool, True = may attend) and converts them
at this border to torch's convention (True = blocked): a source padding mask to a key-padding mask, a target mask
to a causal mask plus key padding, checked to be exactly that.

Shape letters: B batch, S source length, T target length.
"""

from __future__ import annotations

from dataclasses import asdict

import torch
from torch import Tensor, nn

from .convert_torch import torch_state_dict
from .masks import causal_mask
from .transformer import Transformer

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


def causal_and_key_padding(mask: Tensor | None, T: int) -> tuple[Tensor | None, Tensor | None]:
    """The course's target mask -> torch's ``(tgt_mask (T, T), tgt_key_padding_mask (B, T))``, True = blocked.

    A target mask is ``causal_mask(T)`` ``(T, T)``, or ``target_mask(tgt, pad_id)`` ``(B, 1, T, T)``: causal *and*
    not padding. The padding is the set of keys no query may see; the split is checked to rebuild the mask exactly,
    so any other mask is refused rather than passed on wrong. (PyTorch then runs its fast causal path.)
    """
    if mask is None:
        return None, None
    causal = causal_mask(T, device=mask.device)
    if mask.shape == (T, T):
        padding, rebuilt = None, causal
    elif mask.dim() == 4 and mask.shape[1:] == (1, T, T):
        keep = mask[:, 0].any(dim=1)  # (B, T): keys that some query may see, i.e. not padding
        padding, rebuilt = ~keep, causal & keep[:, None, None, :]  # (B, T), (B, 1, T, T)
    else:
        raise ValueError(f"a target mask must have shape ({T}, {T}) or (B, 1, {T}, {T}); got {tuple(mask.shape)}")
    if not torch.equal(rebuilt, mask):
        raise ValueError(
            "TorchTransformer gives nn.TransformerDecoder a causal mask plus key padding; this target mask is "
            "not of that form. Use causal_mask(T) or target_mask(tgt, pad_id)."
        )
    return ~causal, padding


class TorchEncoder(nn.Module):
    """``nn.TransformerEncoder`` behind the course's ``Encoder`` interface: ``forward(x, mask)``."""

    def __init__(self, stack: nn.TransformerEncoder) -> None:
        super().__init__()
        self.stack = stack

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        out: Tensor = self.stack(x, src_key_padding_mask=key_padding_mask(mask))
        return out


class TorchDecoder(nn.Module):
    """``nn.TransformerDecoder`` behind the course's ``Decoder`` interface: ``forward(x, memory, src_mask, tgt_mask)``."""

    def __init__(self, stack: nn.TransformerDecoder) -> None:
        super().__init__()
        self.stack = stack

    def forward(
        self, x: Tensor, memory: Tensor, src_mask: Tensor | None = None, tgt_mask: Tensor | None = None
    ) -> Tensor:
        causal, padding = causal_and_key_padding(tgt_mask, x.size(1))
        out: Tensor = self.stack(
            x,
            memory,
            tgt_mask=causal,
            tgt_is_causal=causal is not None,
            tgt_key_padding_mask=padding,
            memory_key_padding_mask=key_padding_mask(src_mask),
        )
        return out


class TorchTransformer(Transformer):
    """``course_utils.Transformer`` with ``nn.TransformerEncoder``/``nn.TransformerDecoder`` stacks inside: the same
    constructor, ``encode``/``decode``/``forward`` and masks (``padding_mask`` for the source; ``causal_mask`` or
    ``target_mask`` for the target), and the same function: ``from_course`` copies a trained ``Transformer``.
    """

    def build_stacks(
        self, d_model: int, n_heads: int, n_layers: int, d_ff: int, dropout: float, norm_first: bool
    ) -> tuple[nn.Module, nn.Module]:
        encoder = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(d_model, n_heads, d_ff, dropout, batch_first=True, norm_first=norm_first),
            n_layers,
            norm=nn.LayerNorm(d_model) if norm_first else None,  # as ours: a final norm for pre-norm stacks only
            enable_nested_tensor=False,  # a prototype fast path for padded evaluation, which warns
        )
        decoder = nn.TransformerDecoder(
            nn.TransformerDecoderLayer(d_model, n_heads, d_ff, dropout, batch_first=True, norm_first=norm_first),
            n_layers,
            norm=nn.LayerNorm(d_model) if norm_first else None,
        )
        return TorchEncoder(encoder), TorchDecoder(decoder)

    @classmethod
    def from_course(cls, model: Transformer) -> TorchTransformer:
        """The same model as ``model`` (sizes, mode and weights), built from PyTorch's layers."""
        twin = cls(model.src_vocab_size, model.tgt_vocab_size, **asdict(model.config))
        twin.load_state_dict(torch_state_dict(model.state_dict()))
        reference = next(model.parameters())
        return twin.to(device=reference.device, dtype=reference.dtype).train(model.training)
