"""The names of our parameters in PyTorch's own Transformer modules, in one table used both ways.

``course_state_dict`` reads the weights of ``nn.MultiheadAttention``, ``nn.TransformerEncoderLayer`` or
``nn.TransformerDecoderLayer`` into ours (the modules' ``from_torch``); ``torch_state_dict`` writes ours into
PyTorch's (``TorchTransformer.from_course``). Renaming a submodule of ours (``w_o``, say) means, for these
conversions, editing its entry in ``NAMES`` and nothing else. Saved state dicts keep the old name, though: the
shipped checkpoints (``make checkpoints`` rebuilds them) and any file a reader saved.

Two kinds of difference:

- **Renamed submodules** (``NAMES``): ``w_o`` is PyTorch's ``out_proj``, ``cross_attn`` its ``multihead_attn``...
  Names are compared a dotted segment at a time, so ``w_o`` never matches inside ``w_out``.
- **Packed projections** (``PACKED``): PyTorch stores W^Q, W^K, W^V of an attention module as one
  ``in_proj_weight`` ``(3 d_model, d_model)`` (and one ``in_proj_bias`` ``(3 d_model,)``), in that order; we
  keep three ``nn.Linear`` layers, ``w_q``, ``w_k``, ``w_v``.
"""

from __future__ import annotations

from typing import Any, TypeVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["NAMES", "PACKED", "course_state_dict", "layer_from_torch", "rename", "torch_state_dict"]

# (our name, PyTorch's name) for every submodule named differently. Names not listed are the same in both
# (norm1, norm2, norm3, self_attn, layers, and the parameters weight and bias).
NAMES: list[tuple[str, str]] = [
    ("w_o", "out_proj"),  # an attention's output projection W^O
    ("cross_attn", "multihead_attn"),  # a decoder layer's cross-attention
    ("feed_forward.w_1", "linear1"),  # the feed-forward network's two layers
    ("feed_forward.w_2", "linear2"),
    ("encoder", "encoder.stack"),  # TorchTransformer keeps PyTorch's stacks one level down (TorchEncoder.stack)
    ("decoder", "decoder.stack"),
]

# PyTorch's packed projection, and our three layers it holds, in its order.
PACKED: tuple[str, tuple[str, str, str]] = ("in_proj", ("w_q", "w_k", "w_v"))


def rename(name: str, table: list[tuple[str, str]]) -> str:
    """``name`` with each run of dotted segments that is the left side of a ``table`` entry replaced by its right
    side, read left to right: ``"layers.0.feed_forward.w_1.weight"`` -> ``"layers.0.linear1.weight"``."""
    entries = [(old.split("."), new.split(".")) for old, new in table]
    entries.sort(key=lambda entry: len(entry[0]), reverse=True)  # the longest match first
    rest, out = name.split("."), []
    while rest:
        match = next(((old, new) for old, new in entries if rest[: len(old)] == old), None)
        if match is None:
            out.append(rest.pop(0))  # a segment both sides name alike
        else:
            old, new = match
            out += new
            rest = rest[len(old) :]
    return ".".join(out)


def torch_state_dict(state: dict[str, Tensor]) -> dict[str, Tensor]:
    """Our state dict with PyTorch's names: ``NAMES`` left to right, and each attention's ``w_q``, ``w_k``, ``w_v``
    ``(d_model, d_model)`` stacked into one ``in_proj_weight`` ``(3 d_model, d_model)`` (biases alike)."""
    packed_name, projections = PACKED
    out: dict[str, Tensor] = {}
    parts: dict[str, dict[str, Tensor]] = {}  # packed name -> {"w_q": tensor, ...}
    for name, tensor in state.items():
        renamed = rename(name, NAMES)
        path, _, kind = renamed.rpartition(".")  # "encoder.stack.layers.0.self_attn.w_q", "weight"
        owner, _, projection = path.rpartition(".")  # "encoder.stack.layers.0.self_attn", "w_q"
        if projection in projections:
            packed = f"{owner}.{packed_name}_{kind}" if owner else f"{packed_name}_{kind}"
            parts.setdefault(packed, {})[projection] = tensor
        else:
            out[renamed] = tensor
    for name, three in parts.items():
        out[name] = torch.cat([three[p] for p in projections])  # (3 d_model, ...): queries, keys, values
    return out


def course_state_dict(state: dict[str, Tensor]) -> dict[str, Tensor]:
    """A PyTorch state dict with our names: the inverse of ``torch_state_dict``."""
    packed_name, projections = PACKED
    reverse = [(theirs, ours) for ours, theirs in NAMES]
    out: dict[str, Tensor] = {}
    for name, tensor in state.items():
        owner, _, last = name.rpartition(".")  # "encoder.stack.layers.0.self_attn", "in_proj_weight"
        if last.startswith(f"{packed_name}_"):  # in_proj_weight (3 d_model, d_model) or in_proj_bias (3 d_model,)
            kind = last.removeprefix(f"{packed_name}_")
            for projection, part in zip(projections, tensor.chunk(3)):
                path = f"{owner}.{projection}.{kind}" if owner else f"{projection}.{kind}"
                out[rename(path, reverse)] = part
        else:
            out[rename(name, reverse)] = tensor
    return out


TorchLayer = nn.TransformerEncoderLayer | nn.TransformerDecoderLayer
Layer = TypeVar("Layer", bound=nn.Module)


def _layer_config(layer: TorchLayer, expected: type[TorchLayer]) -> dict[str, Any]:
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
    """A course layer ``cls`` (``EncoderLayer`` or ``DecoderLayer``) with the sizes, weights, device, dtype and mode
    of ``layer``, an ``expected`` (``nn.TransformerEncoderLayer`` or ``nn.TransformerDecoderLayer``)."""
    ours = cls(**_layer_config(layer, expected))
    ours.to(device=layer.linear1.weight.device, dtype=layer.linear1.weight.dtype)
    ours.load_state_dict(course_state_dict(layer.state_dict()))  # strict: every weight found, none left over
    return ours.train(layer.training)
