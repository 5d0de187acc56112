"""Checkers for attention and multi-head attention (chapters 01, 02 and 05)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from ..attention import scaled_dot_product_attention
from ..masks import causal_mask, padding_mask
from ._core import NotYet, Verdict, call, differs, same, verdict

__all__ = [
    "check_cross_attention",
    "check_merge_heads",
    "check_mha_parameter_count",
    "check_scaled_dot_product_attention",
    "check_split_heads",
]


def check_scaled_dot_product_attention(fn: Callable[..., Any]) -> Verdict:
    """``fn(query, key, value, mask=None)`` returns the output, or ``(output, weights)``."""

    def run() -> str:
        g = torch.Generator().manual_seed(0)
        q, k, v = (torch.randn(2, n, 8, generator=g) for n in (3, 5, 5))  # T_q = 3, T_k = 5
        for mask in (None, torch.rand(3, 5, generator=g) > 0.3, causal_mask(5)[-3:]):
            mask = None if mask is None else mask | torch.eye(3, 5, dtype=torch.bool)  # no empty rows
            out = call(fn, q, k, v, mask)
            out = out[0] if isinstance(out, tuple) else out
            expected, _ = scaled_dot_product_attention(q, k, v, mask)
            if mask is None and not differs(out, (q @ k.transpose(-2, -1)).softmax(-1) @ v):
                raise NotYet("the scores are not divided by sqrt(d_k): use q @ k.transpose(-2, -1) / math.sqrt(d_k)")
            if mask is None and not differs(out, (q @ k.transpose(-2, -1) / math.sqrt(8)).softmax(-2) @ v):
                raise NotYet(
                    "softmax runs over the queries (dim=-2); each query's weights over the keys must sum to 1: dim=-1"
                )
            same(out, expected, "the output" + (" with a mask" if mask is not None else ""))
        return "scaled_dot_product_attention matches the reference, with and without masks."

    return verdict(run)


def check_split_heads(fn: Callable[..., Any]) -> Verdict:
    """``fn(x (B, T, d_model), n_heads)`` returns ``(B, n_heads, T, d_k)``."""

    def run() -> str:
        x = torch.arange(2 * 3 * 8, dtype=torch.float32).reshape(2, 3, 8)
        got = call(fn, x, 4)
        expected = x.view(2, 3, 4, 2).transpose(1, 2)
        if isinstance(got, Tensor) and got.shape == (2, 3, 4, 2):
            raise NotYet("shape (B, T, h, d_k): the heads axis must come before T, so add .transpose(1, 2)")
        if isinstance(got, Tensor) and got.shape == expected.shape and torch.equal(got, x.view(2, 4, 3, 2)):
            raise NotYet(
                "right shape, wrong values: x.view(B, h, T, d_k) mixes positions; view(B, T, h, d_k) then transpose(1, 2)"
            )
        same(got, expected, "split heads")
        return "split_heads is right: (B, T, d_model) -> (B, T, h, d_k) -> (B, h, T, d_k)."

    return verdict(run)


def check_merge_heads(fn: Callable[..., Any]) -> Verdict:
    """``fn(x (B, n_heads, T, d_k))`` returns ``(B, T, n_heads * d_k)``, the heads side by side."""

    def run() -> str:
        x = torch.arange(2 * 4 * 3 * 2, dtype=torch.float32).reshape(2, 4, 3, 2)
        got = call(fn, x)
        expected = x.transpose(1, 2).reshape(2, 3, 8)
        if isinstance(got, Tensor) and got.shape == expected.shape and torch.equal(got, x.reshape(2, 3, 8)):
            raise NotYet("right shape, wrong values: transpose(1, 2) back to (B, T, h, d_k) before the reshape")
        same(got, expected, "merged heads")
        return "merge_heads is right: (B, h, T, d_k) -> (B, T, h, d_k) -> (B, T, h * d_k)."

    return verdict(run)


def check_mha_parameter_count(fn: Callable[..., Any]) -> Verdict:
    """``fn(d_model, n_heads)`` returns the number of parameters of multi-head attention (with biases)."""

    def run() -> str:
        from ..attention import MultiHeadAttention

        for d_model, n_heads in ((8, 2), (64, 4), (512, 8), (512, 1)):
            expected = sum(p.numel() for p in MultiHeadAttention(d_model, n_heads).parameters())
            got = call(fn, d_model, n_heads)
            if got != expected:
                hint = " (did you forget the biases?)" if got == 4 * d_model**2 else ""
                raise NotYet(f"for d_model={d_model}, n_heads={n_heads}: got {got}, expected {expected}{hint}")
        return "right: 4 * d_model**2 + 4 * d_model, whatever the number of heads."

    return verdict(run)


def check_cross_attention(fn: Callable[..., Any]) -> Verdict:
    """``fn(attn, x, memory, src_mask)`` applies ``attn`` (a MultiHeadAttention) as cross-attention."""

    def run() -> str:
        from ..attention import MultiHeadAttention

        torch.manual_seed(0)
        attn = MultiHeadAttention(16, 4).eval()
        x, memory = torch.randn(2, 3, 16), torch.randn(2, 6, 16)  # T = 3 target, S = 6 source
        src_mask = padding_mask(torch.tensor([[4, 5, 6, 7, 0, 0], [4, 5, 6, 7, 8, 9]]), 0)
        with torch.no_grad():
            got = call(fn, attn, x, memory, src_mask)
            if isinstance(got, tuple):
                raise NotYet("MultiHeadAttention returns (output, weights): return the output alone")
            if isinstance(got, Tensor) and got.shape == (2, 6, 16):
                raise NotYet(
                    "the output has the source's length: the queries must come from the decoder (x), keys and values from memory"
                )
            if not differs(got, attn(x, memory, memory)[0]):
                raise NotYet("the source padding mask is not applied: pass src_mask")
            expected, _ = attn(query=x, key=memory, value=memory, mask=src_mask)
        same(got, expected, "cross-attention output")
        return "cross-attention is right: queries from the decoder, keys and values from the encoder's memory."

    return verdict(run)
