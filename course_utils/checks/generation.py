"""Checkers for language modelling and sampling (chapter 07)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from ._core import NotWritten, NotYet, Verdict, call, differs, same, verdict

__all__ = [
    "check_gpt_block",
    "check_kv_cache_step",
    "check_sampling_step",
    "check_top_p",
]


def check_gpt_block(fn: Callable[..., Any]) -> Verdict:
    """``fn(block, x (B, T, d_model))`` computes a ``GPTBlock``'s forward from its submodules ``norm1``,
    ``self_attn``, ``norm2`` and ``feed_forward``: x + CausalSelfAttn(LN1(x)), then x + FFN(LN2(x))."""

    def run() -> str:
        from ..gpt import GPTBlock

        torch.manual_seed(0)
        block = GPTBlock(16, 4, 32, dropout=0.0).eval()
        with torch.no_grad():
            for norm in (block.norm1, block.norm2):
                for parameter in norm.parameters():  # a non-trivial scale and shift, so that which norm shows
                    parameter.normal_()
        x = torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(0))
        with torch.no_grad():
            got = call(fn, block, x)
            ln1, ln2, ffn = block.norm1, block.norm2, block.feed_forward

            def attend(h: Tensor, causal: bool = True) -> Tensor:
                return block.self_attn(query=h, key=h, value=h, is_causal=causal)[0]

            y = x + attend(ln1(x))
            expected = block(x)
            post = ln1(x + attend(x))
            mistakes = [
                (
                    x + attend(ln1(x), causal=False) + ffn(ln2(x + attend(ln1(x), causal=False))),
                    "no causal mask: every position also reads the future; pass is_causal=True to self_attn",
                ),
                (
                    ln2(post + ffn(post)),
                    "this is post-norm (LayerNorm after the residual add); a GPT block is pre-norm: "
                    "x + SelfAttn(LN1(x)), then x + FFN(LN2(x))",
                ),
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
            for buggy, message in mistakes:
                if not differs(got, buggy):
                    raise NotYet(message)
        same(got, expected, "the block's output")
        return "GPT block is right: it matches course_utils.GPTBlock (pre-norm, causal, two residuals)."

    return verdict(run)


def _draw_frequencies(fn: Callable[..., Any], logits: Tensor, temperature: float, top_k: int | None) -> Tensor:
    """Call the student's sampler on ``n`` copies of one row of logits; return the frequency of each token."""
    n = logits.size(0)
    got = call(fn, logits, temperature, top_k, torch.Generator().manual_seed(0))
    if isinstance(got, Tensor) and got.shape == logits.shape:
        raise NotYet("this returns a (B, V) tensor: return one sampled token id per row, (B, 1), e.g. with "
                     "torch.multinomial(probs, num_samples=1, generator=generator)")  # fmt: skip
    if not isinstance(got, Tensor) or got.shape != (n, 1):
        shape = tuple(got.shape) if isinstance(got, Tensor) else type(got).__name__
        raise NotYet(f"return token ids of shape (B, 1) = ({n}, 1); got {shape}")
    if got.is_floating_point():
        raise NotYet(f"return integer token ids (torch.long), not {got.dtype}")
    if got.min() < 0 or got.max() >= logits.size(1):
        raise NotYet(f"token ids must lie in 0 ... {logits.size(1) - 1}")
    return torch.bincount(got.view(-1), minlength=logits.size(1)).double() / n  # (V,)


def _filtered_probs(logits: Tensor, temperature: float, top_k: int | None, keep_k: int | None = None) -> Tensor:
    """softmax(top-k(logits / temperature)) for one row ``(V,)``; ``keep_k`` keeps that many instead of k."""
    z = logits / temperature
    k = keep_k if keep_k is not None else top_k
    if k is not None:
        z = z.masked_fill(z < torch.topk(z, k).values[-1], float("-inf"))
    return z.softmax(-1)


def check_sampling_step(fn: Callable[..., Any]) -> Verdict:
    """``fn(logits (B, V), temperature, top_k, generator)`` samples one token per row, ``(B, 1)``: the argmax
    at temperature 0; otherwise from softmax(logits / temperature), restricted to the ``top_k`` largest logits
    (None: all), drawn with ``generator``."""

    def run() -> str:
        row = torch.tensor([0.5, 2.0, -1.0, 1.0, 0.0, -2.0])  # V = 6, the largest not first
        logits = row.expand(2, -1).clone()
        try:
            got = call(fn, torch.stack([row, row.flip(0)]), 0.0, None, torch.Generator().manual_seed(0))
        except NotWritten:
            raise
        except NotYet as e:
            raise NotYet(f"at temperature 0: {str(e).rstrip('.')}. Temperature 0 means no randomness (and no division by 0): "
                         "return logits.argmax(dim=-1, keepdim=True)") from None  # fmt: skip
        greedy = torch.tensor([[1], [4]])  # the most likely token of each row
        if isinstance(got, Tensor) and got.shape == (2, row.numel()):
            raise NotYet(
                "this returns a (B, V) tensor: return one token id per row, (B, 1); at temperature 0 the most "
                "likely one, logits.argmax(dim=-1, keepdim=True)"
            )
        if isinstance(got, Tensor) and got.shape == (2, 1) and not got.is_floating_point():
            if not torch.equal(got, greedy):
                raise NotYet("at temperature 0 return the most likely token of each row: "
                             "logits.argmax(dim=-1, keepdim=True), with no sampling")  # fmt: skip
        else:
            same(got, greedy, "the tokens at temperature 0")
        n = 20_000  # draws: the frequencies lie within about 0.01 of the probabilities
        batch = row.expand(n, -1).clone()  # (n, V): n copies of one row, one draw each
        for temperature, top_k in ((1.0, None), (0.5, None), (2.0, None), (2.0, 3), (0.8, 1)):
            freq = _draw_frequencies(fn, batch, temperature, top_k)
            expected = _filtered_probs(row, temperature, top_k).double()
            setting = f"at temperature {temperature} with top_k={top_k}"
            mistakes = [
                (F.one_hot(row.argmax(), row.numel()).double(),
                 "always the most likely token: sample from the probabilities with torch.multinomial"),
                (_filtered_probs(row * temperature * temperature, temperature, top_k).double(),
                 "multiplied by the temperature: divide the logits by it (low temperature = sharper)"),
                (_filtered_probs(row, 1.0, top_k).double(), "the temperature is ignored: softmax(logits / temperature)"),
                (_filtered_probs(row, temperature, None).double(),
                 "top_k is ignored: keep only the k largest logits, set the others to -inf"),
            ]  # fmt: skip
            if top_k is not None:
                z = row / temperature
                kth = torch.topk(z, top_k).values[-1]
                mistakes += [
                    (z.masked_fill(z >= kth, float("-inf")).softmax(-1).double(),
                     "the top-k mask is inverted: keep the k largest logits, set the rest to -inf"),
                    (z.masked_fill(z < kth, 0.0).softmax(-1).double(),
                     "the dropped logits must become -inf (probability 0), not 0"),
                ]  # fmt: skip
                if top_k > 1:
                    mistakes.append((_filtered_probs(row, temperature, top_k, keep_k=top_k - 1).double(),
                                     "keeps k - 1 tokens: drop the logits < the k-th largest, not <="))  # fmt: skip
            if (freq - expected).abs().sum() / 2 < 0.02 and not (freq[expected == 0] > 0).any():
                continue
            for buggy, message in mistakes:
                if not torch.allclose(buggy, expected, atol=0.05) and (freq - buggy).abs().sum() / 2 < 0.02:
                    raise NotYet(f"{setting}: {message}")
            shown = ", ".join(f"{f:.3f}" for f in freq.tolist())
            wanted = ", ".join(f"{p:.3f}" for p in expected.tolist())
            raise NotYet(f"{setting}, the tokens' frequencies over {n:,} draws are {shown}; expected about {wanted}")
        again = [call(fn, logits, 1.0, None, torch.Generator().manual_seed(seed)) for seed in (1, 1)]
        if not torch.equal(again[0], again[1]):
            raise NotYet("the same seed gives different tokens: draw with the generator, "
                         "torch.multinomial(probs, num_samples=1, generator=generator)")  # fmt: skip
        return (
            "sampling step is right: argmax at temperature 0, otherwise draws from softmax(top-k(logits / T)), "
            "as GPT.generate does."
        )

    return verdict(run)


def _nucleus(probs: Tensor, p: float, *, crossing: bool = True, sort: bool = True, never_empty: bool = True) -> Tensor:
    """The bool mask ``(B, V)`` of the nucleus: the most likely tokens whose probabilities first reach ``p``
    (``crossing=False``: without the token that crosses ``p``, yet with the most likely one if ``never_empty``;
    ``sort=False``: accumulated in vocabulary order)."""
    if not sort:
        cumulative = probs.cumsum(-1)
        return cumulative - probs < p if crossing else cumulative < p
    sorted_probs, order = probs.sort(dim=-1, descending=True)  # (B, V) each
    cumulative = sorted_probs.cumsum(-1)  # (B, V): the mass of this token and every more likely one
    keep_sorted = cumulative - sorted_probs < p if crossing else cumulative < p
    keep_sorted[:, 0] |= never_empty  # the most likely token, even where it alone crosses p
    return keep_sorted.scatter(-1, order, keep_sorted)  # back to vocabulary order


def _renormalised(probs: Tensor, keep: Tensor) -> Tensor:
    kept = probs * keep
    return kept / kept.sum(-1, keepdim=True)


def check_top_p(fn: Callable[..., Any]) -> Verdict:
    """``fn(logits (B, V), p)`` returns the top-p (nucleus) sampling probabilities ``(B, V)``: the smallest set
    of most likely tokens whose probabilities sum to at least ``p`` keeps its probabilities, renormalised to
    sum to 1; every other token gets 0."""

    def run() -> str:
        logits = torch.tensor(
            [[1.0, 0.0, 2.5, -1.0, 1.5, 0.5], [0.0, 3.5, 1.0, 2.0, -0.5, 0.5], [-1.0, 0.3, 0.0, 1.2, 0.8, 0.6]]
        )  # (B=3, V=6): the most likely tokens not in order, no ties
        probs = logits.softmax(-1)
        for p in (0.5, 0.75, 0.9):
            got = call(fn, logits.clone(), p)
            keep = _nucleus(probs, p)
            expected = _renormalised(probs, keep)
            if isinstance(got, Tensor) and got.shape == probs.shape and got.isinf().any():
                raise NotYet("return probabilities (0 outside the nucleus), not logits set to -inf: "
                             "take the softmax of the filtered logits")  # fmt: skip
            if isinstance(got, Tensor) and got.shape == probs.shape and got.isnan().any():
                raise NotYet(f"NaN at p={p}: a row kept no token. The token that crosses p belongs to the nucleus, "
                             "so the most likely token is always kept")  # fmt: skip
            mistakes = [
                (_renormalised(probs, _nucleus(probs, p, crossing=False)),
                 "the token that crosses p is dropped: keep a token while the mass *before* it is < p, "
                 "i.e. cumulative - probs < p"),
                (_renormalised(probs, _nucleus(probs, p, sort=False)),
                 "the probabilities are accumulated in vocabulary order: sort them in descending order first "
                 "(torch.sort(..., descending=True)), and scatter the mask back"),
                (_renormalised(probs, _nucleus(probs, p, sort=False, crossing=False)),
                 "the probabilities are accumulated in vocabulary order: sort them in descending order first"),
                (_renormalised(probs, ~keep), "the mask is inverted: this keeps the tail; keep the most likely tokens"),
                (_renormalised(probs, ~_nucleus(probs, p, crossing=False, never_empty=False)),
                 "the mask is inverted: this keeps the tail; keep the most likely tokens"),
                (probs * keep, "the kept probabilities do not sum to 1: divide them by their sum (renormalise)"),
                (probs, "nothing is cut off: set the probabilities outside the nucleus to 0"),
            ]  # fmt: skip
            for buggy, message in mistakes:
                if not differs(got, buggy) and differs(buggy, expected):
                    raise NotYet(f"p={p}: {message}")
            same(got, expected, f"the probabilities for p={p}")
        return "top-p is right: the most likely tokens up to and including the one that crosses p, renormalised."

    return verdict(run)


def check_kv_cache_step(fn: Callable[..., Any]) -> Verdict:
    """``fn(cache_k, cache_v (B, h, T, d_k), q, k, v (B, h, 1, d_k))`` returns ``(out (B, h, 1, d_k), cache_k,
    cache_v (B, h, T + 1, d_k))``: the new token's key and value appended along the position axis, then its
    query attending over every cached key, its own included."""

    def run() -> str:
        g = torch.Generator().manual_seed(0)
        B, h, d_k = 2, 3, 4
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
            if not (isinstance(got, tuple) and len(got) == 3):
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
            if isinstance(out, Tensor) and out.isnan().any():
                raise NotYet("the output is NaN: a causal mask hid every key from the new query. "
                             "The new token is the last position: it may attend to every cached key and itself")  # fmt: skip
            expected = F.scaled_dot_product_attention(q, keys, values)  # PyTorch's own, no mask
            mistakes = [
                (F.scaled_dot_product_attention(q, cache_k, cache_v),
                 "the query attended before its own key was appended: append k and v first, then attend over all"),
                (values[:, :, :1],
                 "a causal mask let the new query see only the first position: a (1, T + 1) tril is not the causal "
                 "mask of the last position; the new token may attend to every cached key, so use no mask"),
                (v, "the new query sees only itself: it may attend to every cached key too, so use no mask"),
                (torch.zeros_like(expected),
                 "the output is 0: a mask hid every key from the new query; the new token may attend to all of them"),
                ((q @ keys.transpose(-2, -1)).softmax(-1) @ values,
                 "the scores are not scaled: divide q @ K^T by sqrt(d_k)"),
            ]  # fmt: skip
            for buggy, message in mistakes:
                if not differs(out, buggy) and differs(buggy, expected):
                    raise NotYet(message)
            same(out, expected, "the output")
        return "key/value cache step is right: it matches F.scaled_dot_product_attention over the grown cache."

    return verdict(run)
