"""Checkers for sampling the next token (chapter 07): temperature and top-k, and top-p."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from ._core import (
    NotWritten,
    NotYet,
    Verdict,
    call,
    differs,
    name_mistake,
    off_the_cpu,
    on_meta,
    same,
    verdict,
    wrong_device,
)

__all__ = ["check_sampling_step", "check_top_p"]


_LOGITS_DEVICE = "create new tensors on the inputs' device (device=logits.device) and do not move the result"


def _on_logits_device(got: object, logits: Tensor) -> None:
    if isinstance(got, Tensor) and got.device != logits.device:
        raise wrong_device("the token ids", got.device, logits.device, "the logits were", _LOGITS_DEVICE)


def _draw_frequencies(fn: Callable[..., Any], rows: Tensor, n: int, temperature: float, top_k: int | None) -> Tensor:
    """Call the student's sampler on ``n`` copies of each row of ``rows`` ``(R, V)``, one after the other; return
    the frequency of each token for each row, ``(R, V)``."""
    R, V = rows.shape
    logits = rows.repeat_interleave(n, dim=0)  # (R * n, V): n copies of the first row, then of the next
    got = call(fn, logits, temperature, top_k, torch.Generator().manual_seed(0))
    _on_logits_device(got, logits)
    if isinstance(got, Tensor) and got.shape == logits.shape:
        raise NotYet("this returns a (B, V) tensor: return one sampled token id per row, (B, 1), e.g. with "
                     "torch.multinomial(probs, num_samples=1, generator=generator)")  # fmt: skip
    if not isinstance(got, Tensor) or got.shape != (R * n, 1):
        shape = tuple(got.shape) if isinstance(got, Tensor) else type(got).__name__
        raise NotYet(f"return token ids of shape (B, 1) = ({R * n}, 1); got {shape}")
    if got.is_floating_point():
        raise NotYet(f"return integer token ids (torch.long), not {got.dtype}")
    if got.min() < 0 or got.max() >= V:
        raise NotYet(f"token ids must lie in 0 ... {V - 1}")
    ids = got.view(R, n) + V * torch.arange(R).unsqueeze(1)  # (R, n): row r's tokens counted in bins r * V ...
    return torch.bincount(ids.view(-1), minlength=R * V).view(R, V).double() / n  # (R, V)


def _filtered_probs(
    logits: Tensor, temperature: float, top_k: int | None, keep_k: int | None = None, kth_of_first: bool = False
) -> Tensor:
    """softmax(top-k(logits / temperature)) for each row of ``(R, V)``; ``keep_k`` keeps that many instead of k;
    ``kth_of_first`` cuts every row at the first row's k-th largest logit."""
    z = logits / temperature
    k = keep_k if keep_k is not None else top_k
    if k is not None:
        kth = torch.topk(z, k).values[:, -1:]  # (R, 1)
        z = z.masked_fill(z < (kth[:1] if kth_of_first else kth), float("-inf"))
    return z.softmax(-1)


def _distance(freq: Tensor, probs: Tensor) -> float:
    """The largest total variation distance between the rows of ``freq`` and of ``probs``, ``(R, V)`` each."""
    return float(((freq - probs).abs().sum(-1) / 2).max())


def check_sampling_step(fn: Callable[..., Any]) -> Verdict:
    """``fn(logits (B, V), temperature, top_k, generator)`` samples one token per row, ``(B, 1)``: the argmax
    at temperature 0; otherwise from softmax(logits / temperature), restricted to the ``top_k`` largest logits
    (None: all), drawn with ``generator``."""

    def run() -> str:
        row = torch.tensor([0.5, 2.0, -1.0, 1.0, 0.0, -2.0])  # V = 6, the largest not first
        rows = torch.stack([row, torch.tensor([-1.0, 0.5, -2.0, 1.5, 0.0, -0.5])])  # (2, V): two orders, two scales
        _check_greedy_step(fn, row)
        _check_draws(fn, rows)
        _check_generator_is_used(fn, rows)
        return (
            "sampling step is right: argmax at temperature 0, otherwise draws from softmax(top-k(logits / T)), "
            "as GPT.generate does."
        )

    return verdict(run)


# The settings the draws are checked at, (temperature, top_k), and the draws per row at each: the frequencies lie
# within about 0.01 of the probabilities.
_SETTINGS = ((1.0, None), (0.5, None), (2.0, None), (2.0, 3), (0.8, 1))
_DRAWS = 20_000


def _check_greedy_step(fn: Callable[..., Any], row: Tensor) -> None:
    """At temperature 0: the most likely token of each row, (B, 1), with no sampling."""
    try:
        got = call(fn, torch.stack([row, row.flip(0)]), 0.0, None, torch.Generator().manual_seed(0))
    except NotWritten:
        raise
    except NotYet as e:
        raise NotYet(f"at temperature 0: {str(e).rstrip('.')}. Temperature 0 means no randomness (and no division by 0): "
                     "return logits.argmax(dim=-1, keepdim=True)") from None  # fmt: skip
    _on_logits_device(got, row)
    greedy = torch.tensor([[1], [4]])  # the most likely token of each row
    if isinstance(got, Tensor) and got.shape == (2, row.numel()):
        raise NotYet(
            "this returns a (B, V) tensor: return one token id per row, (B, 1); at temperature 0 the most "
            "likely one, logits.argmax(dim=-1, keepdim=True)"
        )
    if isinstance(got, Tensor) and got.shape == (2,):
        raise NotYet("return token ids of shape (B, 1) = (2, 1); got (2,): keep the last dimension, "
                     "logits.argmax(dim=-1, keepdim=True) at temperature 0, num_samples=1 otherwise")  # fmt: skip
    if isinstance(got, Tensor) and got.shape == (2, 1) and not got.is_floating_point():
        if not torch.equal(got, greedy):
            raise NotYet("at temperature 0 return the most likely token of each row: "
                         "logits.argmax(dim=-1, keepdim=True), with no sampling")  # fmt: skip
    else:
        same(got, greedy, "the tokens at temperature 0")


def _sampling_mistakes(rows: Tensor, temperature: float, top_k: int | None) -> list[tuple[Tensor, str]]:
    """The classic mistakes of one sampling step at one setting: (the probabilities they draw from, its message)."""
    mistakes = [
        (F.one_hot(rows.argmax(-1), rows.size(-1)).double(),
         "always the most likely token: sample from the probabilities with torch.multinomial"),
    ] if top_k is None else []  # fmt: skip
    mistakes += [
        (_filtered_probs(rows * temperature * temperature, temperature, top_k).double(),
         "multiplied by the temperature: divide the logits by it (low temperature = sharper)"),
        (_filtered_probs(rows, 1.0, top_k).double(),
         "the temperature has no effect on the draws: divide the logits by it before the softmax, "
         "softmax(logits / temperature) (probabilities divided after the softmax are renormalised by "
         "torch.multinomial, so that changes nothing)"),
        (_filtered_probs(rows.softmax(-1), temperature, top_k).double(),
         "the softmax is taken twice, the second of the probabilities: divide the logits by the "
         "temperature and take one softmax, softmax(logits / temperature)"),
        (_filtered_probs(rows, temperature, None).double(),
         "top_k is ignored: keep only the k largest logits, set the others to -inf"),
    ]  # fmt: skip
    if top_k is not None:
        z = rows / temperature
        kth = torch.topk(z, top_k).values[:, -1:]
        mistakes += [
            (z.masked_fill(z >= kth, float("-inf")).softmax(-1).double(),
             "the top-k mask is inverted: keep the k largest logits, set the rest to -inf"),
            (z.masked_fill(z < kth, 0.0).softmax(-1).double(),
             "the dropped logits must become -inf (probability 0), not 0"),
            (_filtered_probs(rows, temperature, top_k, kth_of_first=True).double(),
             "every row is cut at the first row's k-th largest logit: take each row's own, "
             "torch.topk(z, k).values[:, -1:], of shape (B, 1)"),
        ]  # fmt: skip
        if top_k > 1:
            mistakes.append((_filtered_probs(rows, temperature, top_k, keep_k=top_k - 1).double(),
                             "keeps k - 1 tokens: drop the logits < the k-th largest, not <="))  # fmt: skip
        if top_k + 1 < rows.size(-1):
            mistakes.append((_filtered_probs(rows, temperature, top_k, keep_k=top_k + 1).double(),
                             "keeps k + 1 tokens: the k-th largest logit is sorted[:, k - 1] (indices start at 0), "
                             "or torch.topk(z, k).values[:, -1:]; sorted[:, k] is the (k + 1)-th"))  # fmt: skip
        mistakes += [
            (_filtered_probs(rows, temperature, top_k, keep_k=k).double(),
             f"the draws keep {'only the largest logit' if k == 1 else f'the {k} largest logits'}, not top_k = {top_k}: is a value written into the "
             "code that should come from the argument top_k?")
            for k in range(1, rows.size(-1)) if k not in (top_k, top_k - 1, top_k + 1)
        ]  # fmt: skip
    mistakes += [
        (_filtered_probs(rows, other, top_k).double(),
         f"the draws follow temperature {other}, not {temperature}: is a value written into the code that "
         "should come from the argument temperature?")
        for other in dict.fromkeys(t for t, _ in _SETTINGS) if other not in (temperature, 1.0)
    ]  # fmt: skip
    return mistakes


def _check_draws(fn: Callable[..., Any], rows: Tensor) -> None:
    """At each setting the tokens' frequencies follow softmax(top-k(logits / T)); a mistake is named by the
    probabilities its draws follow (where two draw alike at one setting, a later setting tells them apart)."""
    ambiguous: list[str] = []
    for temperature, top_k in _SETTINGS:
        freq = _draw_frequencies(fn, rows, _DRAWS, temperature, top_k)  # (2, V)
        expected = _filtered_probs(rows, temperature, top_k).double()
        setting = f"at temperature {temperature} with top_k={top_k}"
        mistakes = _sampling_mistakes(rows, temperature, top_k)
        if _distance(freq, expected) < 0.02 and not (freq[expected == 0] > 0).any():
            continue
        named = list(dict.fromkeys(message for buggy, message in mistakes
                                   if not torch.allclose(buggy, expected, atol=0.05)
                                   and _distance(freq, buggy) < 0.02))  # fmt: skip
        if len(named) > 1:  # two mistakes draw alike here: a later setting tells them apart
            ambiguous.append(f"{setting}: {named[0]}")
            continue
        if named:
            raise NotYet(f"{setting}: {named[0]}")
        r = int(((freq - expected).abs().sum(-1)).argmax())  # the row furthest from its probabilities
        shown = ", ".join(f"{f:.3f}" for f in freq[r].tolist())
        wanted = ", ".join(f"{p:.3f}" for p in expected[r].tolist())
        raise NotYet(f"{setting}, the tokens' frequencies over {_DRAWS:,} draws from the logits "
                     f"{[round(x, 2) for x in rows[r].tolist()]} are {shown}; expected about {wanted}")  # fmt: skip
    if ambiguous:
        raise NotYet(ambiguous[0])


def _check_generator_is_used(fn: Callable[..., Any], rows: Tensor) -> None:
    """The same seed draws the same tokens; different seeds, different ones: the draws use ``generator``."""
    logits = rows.repeat(32, 1)  # (64, V)
    drawn = [call(fn, logits.clone(), 1.0, None, torch.Generator().manual_seed(seed)) for seed in (1, 1, 2)]
    if not torch.equal(drawn[0], drawn[1]):
        raise NotYet("the same seed gives different tokens: draw with the generator, "
                     "torch.multinomial(probs, num_samples=1, generator=generator)")  # fmt: skip
    reference = [torch.multinomial(logits.softmax(-1), 1, generator=torch.Generator().manual_seed(seed))
                 for seed in (1, 2)]  # fmt: skip
    if torch.equal(drawn[0], drawn[2]) and not torch.equal(*reference):
        raise NotYet("generators of different seeds give the same tokens: the draws ignore the generator argument "
                     "(a seed set inside, torch.manual_seed(...), or a torch.Generator of your own?). Set no seed: "
                     "draw with the generator you are given, "
                     "torch.multinomial(probs, num_samples=1, generator=generator)")  # fmt: skip


def _nucleus(
    probs: Tensor,
    p: float,
    *,
    crossing: bool = True,
    sort: bool = True,
    never_empty: bool = True,
    back: bool = True,
    descending: bool = True,
    extra: int = 0,
) -> Tensor:
    """The bool mask ``(B, V)`` of the nucleus: the most likely tokens whose probabilities first reach ``p``
    (``crossing=False``: without the token that crosses ``p``, yet with the most likely one if ``never_empty``;
    ``sort=False``: accumulated in vocabulary order; ``back=False``: left in sorted order; ``descending=False``:
    sorted least likely first; ``extra``: that many tokens more after the one that crosses ``p``)."""
    if not sort:
        cumulative = probs.cumsum(-1)
        return cumulative - probs < p if crossing else cumulative < p
    sorted_probs, order = probs.sort(dim=-1, descending=descending)  # (B, V) each
    cumulative = sorted_probs.cumsum(-1)  # (B, V): the mass of this token and every more likely one
    keep_sorted = cumulative - sorted_probs < p if crossing else cumulative < p
    keep_sorted[:, 0] |= never_empty  # the most likely token, even where it alone crosses p
    if extra:
        keep_sorted = keep_sorted | torch.cat([keep_sorted[:, :1].expand(-1, extra), keep_sorted[:, :-extra]], dim=-1)
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

    def one(logits: Tensor, ps: tuple[float, ...]) -> None:
        probs = logits.softmax(-1)
        ambiguous: list[str] = []  # a result that two mistakes give alike at some p: a later p tells them apart
        for p in ps:
            got = call(fn, logits.clone(), p)
            keep = _nucleus(probs, p)
            expected = _renormalised(probs, keep)
            if isinstance(got, Tensor) and got.device != logits.device:
                raise wrong_device("the probabilities", got.device, logits.device, "the logits were", _LOGITS_DEVICE)
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
                (_renormalised(probs, _nucleus(probs, p, extra=1)),
                 "one token too many: the nucleus ends with the token that crosses p; keep a token while the mass "
                 "*before* it is < p, i.e. cumulative - probs < p"),
                (_renormalised(probs, _nucleus(probs, p, sort=False)),
                 "the probabilities are accumulated in vocabulary order: sort them in descending order first "
                 "(torch.sort(..., descending=True)), and scatter the mask back"),
                (_renormalised(probs, _nucleus(probs, p, sort=False, crossing=False)),
                 "the probabilities are accumulated in vocabulary order: sort them in descending order first "
                 "(torch.sort(..., descending=True)), and scatter the mask back"),
                (_renormalised(probs, _nucleus(probs, p, descending=False)),
                 "the probabilities are sorted in ascending order, so the least likely tokens are accumulated "
                 "first: sort with descending=True"),
                (_renormalised(probs, _nucleus(probs, p, descending=False, crossing=False, never_empty=False)),
                 "the probabilities are sorted in ascending order, so the least likely tokens are accumulated "
                 "first: sort with descending=True"),
                (_renormalised(probs, _nucleus(probs, p, back=False)),
                 "the mask is still in sorted order: put it back in vocabulary order with "
                 "mask.scatter(-1, order, mask), order being the indices torch.sort returned"),
                (_renormalised(probs, ~keep), "the mask is inverted: this keeps the tail; keep the most likely tokens"),
                (_renormalised(probs, ~_nucleus(probs, p, crossing=False, never_empty=False)),
                 "the mask is inverted: this keeps the tail; keep the most likely tokens"),
                (probs * keep, "the kept probabilities do not sum to 1: divide them by their sum (renormalise)"),
                (probs, "nothing is cut off: set the probabilities outside the nucleus to 0"),
            ]  # fmt: skip
            sorted_probs, order = probs.sort(dim=-1, descending=True)  # (B, V) each
            keep_sorted = sorted_probs.cumsum(-1) - sorted_probs < p  # (B, V): the nucleus, in sorted order
            sorted_logits = logits.sort(dim=-1, descending=True).values
            by_logits = sorted_logits.cumsum(-1) - sorted_logits < p  # a running sum of logits, not probabilities
            mistakes += [
                (_renormalised(sorted_probs, keep_sorted),
                 "the probabilities are returned in sorted order: token i's probability must stay at column i; "
                 "build the mask in sorted order, scatter it back (mask.scatter(-1, order, mask)), then apply it "
                 "to the probabilities in vocabulary order"),
                (_renormalised(probs, keep_sorted.gather(-1, order)),
                 "the mask is put back with gather: gather(-1, order) applies the sorting once more; scatter undoes "
                 "it, mask.scatter(-1, order, mask)"),
                (_renormalised(probs, by_logits.scatter(-1, order, by_logits)),
                 "the running sum is taken over the logits: p is a share of probability, so accumulate the sorted "
                 "softmax probabilities"),
            ]  # fmt: skip
            mistakes += [
                (_renormalised(probs, _nucleus(probs, other)),
                 f"this is the nucleus for p={other}, not for p={p}: is p written into the code? Use the argument p")
                for other in ps if other != p
            ]  # fmt: skip
            named = list(dict.fromkeys(message for buggy, message in mistakes
                                       if not differs(got, buggy) and differs(buggy, expected)))  # fmt: skip
            if len(named) > 1:
                ambiguous.append(f"p={p}: {named[0]}")
                continue
            name_mistake(got, expected, mistakes, f"p={p}")
            same(got, expected, f"the probabilities for p={p}")
        if ambiguous:
            raise NotYet(ambiguous[0])

    def run() -> str:
        one(
            torch.tensor(
                [[1.0, 0.0, 2.5, -1.0, 1.5, 0.5], [0.0, 3.5, 1.0, 2.0, -0.5, 0.5], [-1.0, 0.3, 0.0, 1.2, 0.8, 0.6]]
            ),  # (B=3, V=6): the most likely tokens not in order, no ties
            (0.5, 0.75, 0.9),
        )
        one(
            torch.tensor(
                [[0.2, -1.0, 2.2, 0.9, 1.6, -0.3, 0.0, 1.1, -2.0], [3.0, 0.5, -0.5, 1.0, 0.1, -1.5, 2.0, 0.3, -0.2]]
            ),  # (B=2, V=9); at p=0.3 the most likely token alone crosses p
            (0.3, 0.6, 0.95),
        )
        off_the_cpu("the probabilities", on_meta(fn, torch.randn(2, 6), 0.9), getattr(fn, "__name__", "it"))
        return "top-p is right: the most likely tokens up to and including the one that crosses p, renormalised."

    return verdict(run)
