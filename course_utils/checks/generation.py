"""Checkers for the GPT's forward pass (chapter 07): its block, and one step with a key/value cache."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from ._core import (
    MISTAKES,
    NotWritten,
    NotYet,
    Verdict,
    backpropagates,
    call,
    call_layer,
    differs,
    each_case,
    name_mistake,
    not_called,
    off_the_cpu,
    on_meta,
    same,
    verdict,
)

__all__ = ["check_gpt_block", "check_kv_cache_step"]


def check_gpt_block(fn: Callable[..., Any]) -> Verdict:
    """``fn(block, x (B, T, d_model))`` computes a ``GPTBlock``'s forward from its submodules ``norm1``,
    ``self_attn``, ``norm2`` and ``feed_forward``: x + CausalSelfAttn(LN1(x)), then x + FFN(LN2(x))."""

    def one(B: int, T: int, seed: int) -> str:
        from ..model.gpt import GPTBlock

        torch.manual_seed(seed)
        block = GPTBlock(16, 4, 32, dropout=0.0).eval()
        with torch.no_grad():
            for norm in (block.norm1, block.norm2):
                for parameter in norm.parameters():  # a non-trivial scale and shift, so that which norm shows
                    parameter.normal_()
        x = torch.randn(B, T, 16, generator=torch.Generator().manual_seed(seed))
        with not_called(block), torch.no_grad():
            got = call_layer(fn, block, x)
        ln1, ln2, ffn = block.norm1, block.norm2, block.feed_forward
        flipped = torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)  # PyTorch's convention: True = hidden

        def attend(h: Tensor, causal: bool = True, mask: Tensor | None = None) -> Tensor:
            return block.self_attn(query=h, key=h, value=h, mask=mask, is_causal=causal)[0]

        def pre_norm(attention: Callable[[Tensor], Tensor], x: Tensor = x) -> Tensor:
            y = x + attention(ln1(x))
            return y + ffn(ln2(y))

        with torch.no_grad():
            y = x + attend(ln1(x))
            expected = block(x)
            post = ln1(x + attend(x))
            h = ln1(x)  # the stream itself normalised, then the residual taken from it
            z = h + attend(h)
            mistakes = [
                (
                    pre_norm(lambda h: attend(h, causal=False)),
                    f"{MISTAKES['no causal mask']}; pass is_causal=True to self_attn",
                ),
                (pre_norm(lambda h: attend(h, causal=False, mask=flipped)), MISTAKES["flipped mask"]),
                (
                    ln2(post + ffn(post)),
                    "this is post-norm (LayerNorm after the residual add); a GPT block is pre-norm: "
                    "x + SelfAttn(LN1(x)), then x + FFN(LN2(x))",
                ),
                (z + ffn(ln2(z)), MISTAKES["normalised stream"]),
                (ln2(z) + ffn(ln2(z)), MISTAKES["normalised stream"]),
                (ln2(y) + ffn(ln2(y)), MISTAKES["normalised stream"]),
                (
                    ffn(ln2(attend(ln1(x)))),
                    "both residual connections are missing: add each sublayer's output to its input (x = x + ...)",
                ),
                (
                    attend(ln1(x)) + ffn(ln2(attend(ln1(x)))),
                    "the residual connection around attention is missing: x = x + SelfAttn(LN1(x))",
                ),
                (ffn(ln2(y)), "the residual connection around the feed-forward network is missing: x + FFN(LN2(x))"),
                (
                    x + attend(ln1(x)) + ffn(ln2(x)),
                    "the feed-forward network reads the block's input; it must read x after the attention residual",
                ),
                (y + ffn(ln1(y)), "norm1 is used twice: the feed-forward network has its own LayerNorm, norm2"),
            ]
        name_mistake(got, expected, mistakes)
        same(got, expected, "the block's output")
        with not_called(block):
            backpropagates(fn, block, x, what="the block's output", reference=lambda _block, x: pre_norm(attend, x))
        return "GPT block is right: it matches course_utils.GPTBlock (pre-norm, causal, two residuals)."

    def run() -> str:
        return each_case(one, [dict(B=2, T=5, seed=0), dict(B=3, T=7, seed=1)])

    return verdict(run)


def check_kv_cache_step(fn: Callable[..., Any]) -> Verdict:
    """``fn(cache_k, cache_v (B, h, T, d_k), q, k, v (B, h, 1, d_k))`` returns ``(out (B, h, 1, d_k), cache_k,
    cache_v (B, h, T + 1, d_k))``: the new token's key and value appended along the position axis, then its
    query attending over every cached key, its own included."""

    def one(B: int, h: int, d_k: int, seed: int) -> str:
        g = torch.Generator().manual_seed(seed)
        for T in (5, 1):
            cache_k, cache_v = torch.randn(B, h, T, d_k, generator=g), torch.randn(B, h, T, d_k, generator=g)
            q, k, v = (torch.randn(B, h, 1, d_k, generator=g) * 2 for _ in range(3))
            try:
                got = call(fn, cache_k.clone(), cache_v.clone(), q, k, v)
            except NotWritten:
                raise
            except NotYet as e:
                if "Sizes of tensors must match" in str(e):
                    raise NotYet(
                        f"{str(e).rstrip('.')}. The cache grows along the position axis: torch.cat([cache_k, k], dim=2)"
                    ) from None
                raise
            if not (isinstance(got, tuple | list) and len(got) == 3):
                raise NotYet("return a triple (out, cache_k, cache_v)")
            out, new_k, new_v = got
            keys, values = torch.cat([cache_k, k], dim=2), torch.cat([cache_v, v], dim=2)  # (B, h, T + 1, d_k)
            for name, got_cache, old, new in (("cache_k", new_k, cache_k, k), ("cache_v", new_v, cache_v, v)):
                if isinstance(got_cache, Tensor) and got_cache.shape == old.shape:
                    raise NotYet(f"{name} has not grown: append the new position, torch.cat([{name}, ...], dim=2)")
                if isinstance(got_cache, Tensor) and got_cache.shape != (B, h, T + 1, d_k):
                    raise NotYet(f"{name} has shape {tuple(got_cache.shape)}; expected (B, h, T + 1, d_k) = "
                                 f"{(B, h, T + 1, d_k)}: concatenate along the position axis, dim=2")  # fmt: skip
                if not differs(got_cache, torch.cat([new, old], dim=2)):
                    raise NotYet(f"the new position is put first in {name}: append it at the end, "
                                 f"torch.cat([{name}, new], dim=2)")  # fmt: skip
                same(got_cache, torch.cat([old, new], dim=2), f"the grown {name}")
            expected = F.scaled_dot_product_attention(q, keys, values)  # PyTorch's own, no mask
            if isinstance(out, Tensor) and out.device == q.device and out.isnan().any():
                raise NotYet("the output is NaN: a causal mask hid every key from the new query. "
                             "The new token is the last position: it may attend to every cached key and itself")  # fmt: skip
            scores = q @ keys.transpose(-2, -1)  # (B, h, 1, T + 1), not scaled
            mistakes = [
                (F.scaled_dot_product_attention(q, cache_k, cache_v),
                 "the query attended before its own key was appended: append k and v first, then attend over all"),
                (values[:, :, :1],
                 "a causal mask let the new query see only the first position: a (1, T + 1) tril, which is also "
                 "what F.scaled_dot_product_attention's is_causal=True builds (aligned to the first key), is not the "
                 "causal mask of the last position; the new token may attend to every cached key, so use no mask"),
                (v, "the new query sees only itself: it may attend to every cached key too, so use no mask"),
                (torch.zeros_like(expected),
                 "the output is 0: a mask hid every key from the new query; the new token may attend to all of them"),
                (scores.softmax(-1) @ values, MISTAKES["not scaled"]),
                ((scores / math.sqrt(T + 1)).softmax(-1) @ values,
                 "the scores are divided by sqrt(T + 1), the square root of the number of positions: divide by "
                 "sqrt(d_k), the square root of each key's size, q.size(-1)"),
            ]  # fmt: skip
            name_mistake(out, expected, mistakes)
            same(out, expected, "the output")
        return "key/value cache step is right: it matches F.scaled_dot_product_attention over the grown cache."

    def run() -> str:
        message = each_case(one, [dict(B=2, h=3, d_k=4, seed=0), dict(B=1, h=2, d_k=8, seed=1)])
        cache = [torch.randn(1, 2, 3, 4) for _ in range(2)]  # (B, h, T, d_k): keys, values
        new = [torch.randn(1, 2, 1, 4) for _ in range(3)]  # the new token's query, key, value
        off_the_cpu("a result", on_meta(fn, *cache, *new), getattr(fn, "__name__", "it"))
        return message

    return verdict(run)
