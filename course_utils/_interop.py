"""Copying weights from PyTorch's own Transformer layers (used by the ``from_torch`` methods)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def torch_layer_config(layer: nn.Module, expected: type) -> dict:
    """The constructor arguments of ``layer`` (a torch Transformer layer), or a clear error."""
    name = expected.__name__
    if not isinstance(layer, expected):
        raise TypeError(f"from_torch expects nn.{name}; got {type(layer).__name__}")
    if not (layer.activation is F.relu or isinstance(layer.activation, nn.ReLU)):
        raise ValueError(
            f"cannot mirror nn.{name} with activation={layer.activation!r}: the course's layers use "
            f"the paper's ReLU. Build it with activation='relu'."
        )
    if not getattr(layer.self_attn, "batch_first", False):
        raise ValueError(
            f"cannot mirror nn.{name} with batch_first=False: it reads (T, B, d_model) while the "
            f"course's layers read (B, T, d_model). Build it with batch_first=True."
        )
    norms = [m for m in layer.children() if isinstance(m, nn.LayerNorm)]
    if layer.linear1.bias is None or any(n.weight is None or n.bias is None for n in norms):
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
def copy_params(dst: nn.Module, src: nn.Module) -> None:
    """Copy weight and bias of an ``nn.Linear`` or ``nn.LayerNorm`` into its course twin."""
    dst.weight.copy_(src.weight)
    dst.bias.copy_(src.bias)
