"""Attention masks.

One convention throughout the course, the one of ``F.scaled_dot_product_attention``: a mask is a
bool tensor and **True means "may attend"**. (``nn.MultiheadAttention`` and ``nn.Transformer``
use the opposite, True = blocked; convert with ``~mask`` at that border only.)

Shape letters: B batch, T sequence length.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["causal_mask", "padding_mask", "target_mask"]


def causal_mask(size: int, device: torch.device | str | None = None) -> Tensor:
    """Bool ``(size, size)`` mask, True on and below the diagonal: position i sees positions <= i.

    >>> causal_mask(3).int()
    tensor([[1, 0, 0],
            [1, 1, 0],
            [1, 1, 1]], dtype=torch.int32)
    """
    if not isinstance(size, int) or isinstance(size, bool) or size < 1:
        raise ValueError(f"causal_mask needs a positive int size (the sequence length); got {size!r}")
    return torch.ones(size, size, dtype=torch.bool, device=device).tril()


def padding_mask(tokens: Tensor, pad_id: int) -> Tensor:
    """Bool ``(B, 1, 1, T)`` mask, True at real tokens and False at padding.

    The two singleton axes broadcast over heads and query positions, so the same mask serves
    attention scores of shape ``(B, n_heads, T_q, T)``: no query ever attends to a pad key.
    """
    if tokens.dim() != 2:
        raise ValueError(
            f"padding_mask expects token ids of shape (B, T); got shape {tuple(tokens.shape)}. "
            "For a single sequence use tokens.unsqueeze(0)."
        )
    if tokens.is_floating_point():
        raise TypeError(f"padding_mask expects integer token ids; got dtype {tokens.dtype}")
    return (tokens != pad_id)[:, None, None, :]  # (B, 1, 1, T)


def target_mask(tgt: Tensor, pad_id: int) -> Tensor:
    """Bool ``(B, 1, T, T)`` decoder self-attention mask: causal *and* not padding.

    Query position i may attend to key position j when j <= i and token j is not padding.
    """
    return padding_mask(tgt, pad_id) & causal_mask(tgt.size(1), device=tgt.device)  # (B, 1, T, T)
