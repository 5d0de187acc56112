"""Checkers for sampling the next token (chapter 07): temperature and top-k, and top-p."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from ._core import NotWritten, NotYet, Verdict, call, name_mistake, same, verdict

__all__ = ["check_sampling_step", "check_top_p"]


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


def _nucleus(
    probs: Tensor, p: float, *, crossing: bool = True, sort: bool = True, never_empty: bool = True, back: bool = True
) -> Tensor:
    """The bool mask ``(B, V)`` of the nucleus: the most likely tokens whose probabilities first reach ``p``
    (``crossing=False``: without the token that crosses ``p``, yet with the most likely one if ``never_empty``;
    ``sort=False``: accumulated in vocabulary order; ``back=False``: left in sorted order)."""
    if not sort:
        cumulative = probs.cumsum(-1)
        return cumulative - probs < p if crossing else cumulative < p
    sorted_probs, order = probs.sort(dim=-1, descending=True)  # (B, V) each
    cumulative = sorted_probs.cumsum(-1)  # (B, V): the mass of this token and every more likely one
    keep_sorted = cumulative - sorted_probs < p if crossing else cumulative < p
    keep_sorted[:, 0] |= never_empty  # the most likely token, even where it alone crosses p
    if not back:
        return keep_sorted
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
                (_renormalised(probs, _nucleus(probs, p, back=False)),
                 "the mask is still in sorted order: put it back in vocabulary order with "
                 "mask.scatter(-1, order, mask), order being the indices torch.sort returned"),
                (_renormalised(probs, ~keep), "the mask is inverted: this keeps the tail; keep the most likely tokens"),
                (_renormalised(probs, ~_nucleus(probs, p, crossing=False, never_empty=False)),
                 "the mask is inverted: this keeps the tail; keep the most likely tokens"),
                (probs * keep, "the kept probabilities do not sum to 1: divide them by their sum (renormalise)"),
                (probs, "nothing is cut off: set the probabilities outside the nucleus to 0"),
            ]  # fmt: skip
            name_mistake(got, expected, mistakes, f"p={p}")
            same(got, expected, f"the probabilities for p={p}")
        return "top-p is right: the most likely tokens up to and including the one that crosses p, renormalised."

    return verdict(run)
