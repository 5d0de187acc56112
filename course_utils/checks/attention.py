"""Checkers for attention and multi-head attention (chapters 01, 02 and 05)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from ..model.attention import scaled_dot_product_attention
from ..model.masks import causal_mask
from ._core import NotYet, Verdict, backpropagates, call, differs, same, verdict

__all__ = [
    "check_attention_with_bias",
    "check_fused_head_projections",
    "check_grouped_query_attention",
    "check_merge_heads",
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
            torch.testing.assert_close(expected, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
            if mask is None and not differs(out, (q @ k.transpose(-2, -1)).softmax(-1) @ v):
                raise NotYet("the scores are not divided by sqrt(d_k): use q @ k.transpose(-2, -1) / math.sqrt(d_k)")
            if mask is None and not differs(out, (q @ k.transpose(-2, -1) / math.sqrt(8)).softmax(-2) @ v):
                raise NotYet(
                    "softmax runs over the queries (dim=-2); each query's weights over the keys must sum to 1: dim=-1"
                )
            if mask is not None:
                flipped = (q @ k.transpose(-2, -1) / math.sqrt(8)).masked_fill(mask, float("-inf")).softmax(-1) @ v
                if (
                    isinstance(out, Tensor)
                    and out.shape == flipped.shape
                    and torch.allclose(out, flipped, equal_nan=True)
                ):
                    raise NotYet(
                        "the mask's convention is flipped: True means *may attend*, so hide the scores where the mask "
                        'is False, scores.masked_fill(~mask, float("-inf"))'
                    )
            same(out, expected, "the output" + (" with a mask" if mask is not None else ""))
        backpropagates(fn, q, k, v, None, what="the attention output")
        return (
            "your attention equals course_utils.scaled_dot_product_attention and PyTorch's "
            "F.scaled_dot_product_attention, with and without masks."
        )

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


def check_attention_with_bias(fn: Callable[..., Any]) -> Verdict:
    """``fn(query, key, value, bias)`` returns ``softmax(Q K^T / sqrt(d_k) + bias) V``, or ``(output, weights)``;
    ``bias`` is a float ``(T_q, T_k)`` added to the scaled scores."""

    def run() -> str:
        g = torch.Generator().manual_seed(0)
        q, k, v = (torch.randn(2, n, 8, generator=g) for n in (3, 5, 5))  # T_q = 3, T_k = 5, d_k = 8
        distance = (torch.arange(3)[:, None] + 2 - torch.arange(5)).abs()  # (3, 5): queries sit at positions 2-4
        bias = -0.75 * distance.float()  # (T_q, T_k): far keys are penalised, as ALiBi does
        out = call(fn, q, k, v, bias)
        out = out[0] if isinstance(out, tuple) else out
        scores = q @ k.transpose(-2, -1)  # (2, T_q, T_k), not yet scaled
        mistakes = {
            "the bias is added after the softmax: add it to the scores, before .softmax(dim=-1)": (
                (scores / math.sqrt(8)).softmax(-1) + bias
            )
            @ v,
            "the bias is divided by sqrt(d_k) with the scores: scale Q K^T first, then add the bias": (
                (scores + bias) / math.sqrt(8)
            ).softmax(-1)
            @ v,
            "the bias is ignored: add it to the scaled scores": (scores / math.sqrt(8)).softmax(-1) @ v,
            "the bias multiplies the scores; it is additive: scores + bias": (scores / math.sqrt(8) * bias).softmax(-1)
            @ v,
        }
        for message, buggy in mistakes.items():
            if not differs(out, buggy):
                raise NotYet(message)
        expected = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)  # PyTorch adds a float attn_mask
        same(out, expected, "the output")
        return "right: softmax(Q K^T / sqrt(d_k) + bias) V, as F.scaled_dot_product_attention with a float attn_mask."

    return verdict(run)


def check_fused_head_projections(fn: Callable[..., Any]) -> Verdict:
    """``fn(head_weights)``: ``h`` matrices ``W_i`` of shape ``(d_model, d_k)`` (the paper's layout,
    ``q_i = x @ W_i``) -> the ``(h * d_k, d_model)`` weight of one ``nn.Linear`` that computes every head."""

    def run() -> str:
        g = torch.Generator().manual_seed(0)
        d_model, n_heads, d_k = 8, 2, 4
        heads = [torch.randn(d_model, d_k, generator=g) for _ in range(n_heads)]
        got = call(fn, heads)
        expected = torch.cat(heads, dim=1).T  # (h * d_k, d_model): nn.Linear's (out, in)
        interleaved = torch.stack(heads, dim=-1).reshape(d_model, n_heads * d_k)  # column j * h + i: head i's j
        if not differs(got, expected.T):
            raise NotYet(
                "this is the paper's W^Q, (d_model, h * d_k) = (in, out); nn.Linear stores its weight as "
                "(out, in): transpose it, torch.cat(head_weights, dim=1).T"
            )
        if not differs(got, interleaved.T) or not differs(got, interleaved):
            raise NotYet(
                "right shape, but the heads' features are interleaved (feature j of head i at j * h + i): "
                "each head must own one block of d_k features: concatenate, don't stack"
            )
        if isinstance(got, Tensor) and got.shape in ((n_heads * d_model, d_k), (d_k, n_heads * d_model)):
            raise NotYet(
                f"shape {tuple(got.shape)}: the heads are concatenated along the input axis; each head adds "
                "d_k output features: concatenate the W_i along dim=1, then transpose"
            )
        same(got, expected, "the fused weight")
        linear = torch.nn.Linear(d_model, d_model, bias=False)
        with torch.no_grad():
            linear.weight.copy_(got)
            x = torch.randn(3, d_model, generator=g)
            for i, w in enumerate(heads):
                same(linear(x)[:, i * d_k : (i + 1) * d_k], x @ w, f"head {i}'s block of the fused Linear")
        return (
            "right: loaded into nn.Linear(d_model, d_model), head i's queries are output features i*d_k to (i+1)*d_k."
        )

    return verdict(run)


def check_grouped_query_attention(fn: Callable[..., Any]) -> Verdict:
    """``fn(query (B, h, T_q, d_k), key (B, g, T_k, d_k), value (B, g, T_k, d_k))`` returns ``(B, h, T_q, d_k)``
    (or ``(output, weights)``): query heads ``i * h // g`` to ``(i + 1) * h // g - 1`` share key/value head ``i``."""

    def run() -> str:
        g = torch.Generator().manual_seed(0)
        for n_heads, n_kv_heads in ((4, 2), (6, 3), (4, 1), (2, 2)):
            q = torch.randn(2, n_heads, 3, 8, generator=g)  # (B, h, T_q = 3, d_k)
            k, v = (torch.randn(2, n_kv_heads, 5, 8, generator=g) for _ in range(2))  # (B, g, T_k = 5, d_k)
            out = call(fn, q, k, v)
            out = out[0] if isinstance(out, tuple) else out
            group = n_heads // n_kv_heads
            expand = (k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1))  # (B, h, T_k, d_k)
            expected, _ = scaled_dot_product_attention(q, *expand)
            if group > 1 and n_kv_heads > 1:
                tiled, _ = scaled_dot_product_attention(q, k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1))
                if not differs(out, tiled):
                    raise NotYet(
                        "query head i uses key/value head i % g: .repeat tiles the groups; neighbouring query heads "
                        "share one key/value head: k.repeat_interleave(h // g, dim=1)"
                    )
                first, _ = scaled_dot_product_attention(q, k[:, :1], v[:, :1])
                if not differs(out, first):
                    raise NotYet("every query head uses key/value head 0; that is multi-query attention (g = 1)")
            same(out, expected, f"the output with h={n_heads}, g={n_kv_heads}")
        return "grouped-query attention is right: h // g neighbouring query heads share each key/value head."

    return verdict(run)
