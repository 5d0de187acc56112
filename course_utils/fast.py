"""Swap the course's readable implementations for PyTorch's fused kernels, for speed.

The readable versions are what the notebooks teach; the fused ones compute the same functions (the
tests check it) in fewer, larger operations. Training uses them; attention weights are then not kept.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from torch import nn

from .attention import MultiHeadAttention
from .layers import LayerNorm

__all__ = ["fast_kernels"]


@contextlib.contextmanager
def fast_kernels(model: nn.Module) -> Iterator[nn.Module]:
    """Within the block, every ``MultiHeadAttention`` in ``model`` runs ``F.scaled_dot_product_attention``
    (keeping no weights) and every ``LayerNorm`` runs ``F.layer_norm``. On leaving, the previous settings
    are restored.
    """
    attentions = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
    norms = [m for m in model.modules() if isinstance(m, LayerNorm)]
    before = [m.need_weights for m in attentions], [m.fused for m in norms]
    for m in attentions:
        m.need_weights = False
    for m in norms:
        m.fused = True
    try:
        yield model
    finally:
        for m, flag in zip(attentions, before[0]):
            m.need_weights = flag
        for m, flag in zip(norms, before[1]):
            m.fused = flag
