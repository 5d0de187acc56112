"""Copying weights from PyTorch's own Transformer layers (the layers' ``from_torch``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

import torch
import torch.nn.functional as F
from torch import nn

from .attention import MultiHeadAttention

if TYPE_CHECKING:
    from .decoder import DecoderLayer
    from .encoder import EncoderLayer

TorchLayer = nn.TransformerEncoderLayer | nn.TransformerDecoderLayer
Layer = TypeVar("Layer", "EncoderLayer", "DecoderLayer")


def _config(layer: TorchLayer, expected: type[TorchLayer]) -> dict[str, Any]:
    """The constructor arguments of ``layer`` (a torch Transformer layer), or a clear error."""
    name = expected.__name__
    if not isinstance(layer, expected):
        raise TypeError(f"from_torch expects nn.{name}; got {type(layer).__name__}")
    if not (layer.activation is F.relu or isinstance(layer.activation, nn.ReLU)):
        raise ValueError(
            f"cannot mirror nn.{name} with activation={layer.activation!r}: the course's layers use "
            f"the paper's ReLU. Build it with activation='relu'."
        )
    if not layer.self_attn.batch_first:
        raise ValueError(
            f"cannot mirror nn.{name} with batch_first=False: it reads (T, B, d_model) while the "
            f"course's layers read (B, T, d_model). Build it with batch_first=True."
        )
    norms = [m for m in layer.children() if isinstance(m, nn.LayerNorm)]
    if layer.linear1.bias is None or any(n.weight is None or n.bias is None for n in norms):  # pyright: ignore[reportUnnecessaryComparison]
        raise ValueError(f"cannot mirror nn.{name} built with bias=False or without affine norms")
    return dict(
        d_model=layer.linear1.in_features,
        n_heads=layer.self_attn.num_heads,
        d_ff=layer.linear1.out_features,
        dropout=layer.dropout.p,
        norm_first=layer.norm_first,
        eps=layer.norm1.eps,
    )


@torch.no_grad()
def layer_from_torch(cls: type[Layer], layer: TorchLayer, expected: type[TorchLayer]) -> Layer:
    """A course layer ``cls`` with the sizes and weights of ``layer``, a ``nn.TransformerEncoderLayer`` or
    ``nn.TransformerDecoderLayer`` (``expected``): attention by ``MultiHeadAttention.from_torch``, then the
    feed-forward network and every norm, pair by pair."""
    ours = cls(**_config(layer, expected))
    ours.to(device=layer.linear1.weight.device, dtype=layer.linear1.weight.dtype)
    ours.self_attn = MultiHeadAttention.from_torch(layer.self_attn)
    pairs: list[tuple[nn.Module, nn.Module]] = [
        (ours.feed_forward.w_1, layer.linear1),
        (ours.feed_forward.w_2, layer.linear2),
        (ours.norm1, layer.norm1),
        (ours.norm2, layer.norm2),
    ]
    from .decoder import DecoderLayer  # here, not at the top: decoder.py imports this module

    if isinstance(ours, DecoderLayer) and isinstance(layer, nn.TransformerDecoderLayer):
        ours.cross_attn = MultiHeadAttention.from_torch(layer.multihead_attn)  # torch's name for cross-attention
        pairs.append((ours.norm3, layer.norm3))
    for dst, src in pairs:
        for name in ("weight", "bias"):
            getattr(dst, name).copy_(getattr(src, name))
    return ours.train(layer.training)
