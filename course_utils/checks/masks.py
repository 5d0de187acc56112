"""Checkers for attention masks (chapters 01 and 05)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from ..model.masks import causal_mask, padding_mask
from ._core import (
    MISTAKES,
    NotYet,
    Verdict,
    any_device,
    backpropagates,
    call,
    each_case,
    name_mistake,
    off_the_cpu,
    on_meta,
    same,
    verdict,
    wrong_device,
)

__all__ = [
    "check_causal_mask",
    "check_masked_mean",
    "check_padding_mask",
    "check_sliding_window_mask",
]

# The first half of MISTAKES["flipped mask"], the same words for a function that builds a mask (the second half
# is about using one in attention).
FLIPPED = MISTAKES["flipped mask"].split(", so ")[0]  # "the mask's convention is flipped: ... *may attend*"


def _mask_basics(got: object, expected: Tensor, what: str, hidden: str, device_hint: str) -> None:
    """The mistakes every mask builder meets, named before the values are compared: the device, a float or int mask
    (0/1, or an additive 0/-inf one) instead of a bool one, and the convention flipped (True where ``hidden``)."""
    if not isinstance(got, Tensor):
        return  # same() names it
    if got.device != expected.device:
        raise wrong_device(what, got.device, expected.device, "it was expected", device_hint)
    if got.shape != expected.shape:
        return
    if got.dtype != torch.bool:
        numbers = got.detach().double()
        additive = bool(((numbers == 0) | (numbers <= -1e4)).all()) and bool((numbers < 0).any())
        if got.is_floating_point() and additive:
            raise NotYet(
                f"{what} is an additive float mask (0 where allowed, {numbers.min().item():g} where hidden): in this "
                "course a mask is bool, True = may attend; return the comparison itself (no .float(), no "
                "masked_fill): attention turns it into -inf with masked_fill(~mask, float('-inf'))"
            )
        if bool(((numbers == 0) | (numbers == 1)).all()):
            flipped = torch.equal(numbers.bool(), ~expected)
            raise NotYet(
                f"{what} holds the numbers 0 and 1 (dtype {got.dtype}), not bools: return a bool tensor "
                "(dtype=torch.bool, or .bool()), True = may attend"
                + (f". Also, {FLIPPED}, and here 1 marks {hidden}" if flipped else "")
            )
        raise NotYet(f"{what} has dtype {got.dtype}: a mask is bool, True = may attend (dtype=torch.bool)")
    if torch.equal(got, ~expected):
        raise NotYet(f"{FLIPPED}; here True marks {hidden}: return the opposite mask (~ in front, or flip the test)")


NO_TENSOR_ARGUMENT = "with no tensor argument to take a device from, create it on the default device (no device=...)"


def _diagonal_hidden(got: object, expected: Tensor) -> None:
    if (
        isinstance(got, Tensor)
        and got.dtype == torch.bool
        and got.shape == expected.shape
        and not bool(got.diagonal().any())
        and bool(expected.diagonal().all())
    ):
        raise NotYet("the diagonal is False: each position must also attend to itself, j <= i (not j < i)")


def check_causal_mask(fn: Callable[..., Any]) -> Verdict:
    """``fn(size)`` returns a bool ``(size, size)`` mask, True where position i may attend to j."""

    def one(size: int) -> str:
        got = call(fn, size)
        expected = causal_mask(size)
        got = any_device(got, expected, f"the causal mask of size {size}")
        _mask_basics(got, expected, f"the causal mask of size {size}", "the future", NO_TENSOR_ARGUMENT)
        if size > 1 and isinstance(got, Tensor) and got.shape == (size, size) and torch.equal(got, expected.T):
            raise NotYet("the mask is transposed: row i (the query) must allow columns j <= i, i.e. tril")
        _diagonal_hidden(got, expected)
        ones = torch.ones(size, size, dtype=torch.bool)
        mistakes = [
            (ones, MISTAKES["no causal mask"] + ": keep only j <= i (tril)"),
            (ones.tril(1), "one future position is allowed: tril with diagonal=0, j <= i"),
        ]
        name_mistake(got, expected, mistakes)
        same(got, expected, f"causal mask of size {size}")
        return "your causal mask is right: each position sees itself and the past, never the future."

    def run() -> str:
        return each_case(one, [dict(size=4), dict(size=1), dict(size=7)])

    return verdict(run)


# Token ids for each test case of check_padding_mask, by pad_id: real ids below and above pad_id, 0 a real id
# where pad_id is not 0, a row with no padding, padding on the left and in the middle.
_PADDED_TOKENS = {
    0: [[5, 6, 7, 0, 0], [8, 0, 0, 0, 0], [4, 4, 4, 4, 4]],
    3: [[0, 5, 2, 1, 3, 3, 3], [3, 3, 9, 0, 4, 3, 8]],
    1: [[2, 1, 1], [0, 2, 1], [1, 0, 0], [7, 7, 7]],
}


def check_padding_mask(fn: Callable[..., Any]) -> Verdict:
    """``fn(tokens (B, T), pad_id)`` returns a bool ``(B, 1, 1, T)`` mask, True at real tokens."""

    def one(pad_id: int, B: int, T: int) -> str:
        tokens = torch.tensor(_PADDED_TOKENS[pad_id])
        assert tokens.shape == (B, T)
        got = call(fn, tokens, pad_id)
        expected = padding_mask(tokens, pad_id)  # (B, 1, 1, T)
        real = tokens != pad_id  # (B, T)
        _mask_basics(got, expected, "the padding mask", "the padding", "create it on the tokens' device")
        if isinstance(got, Tensor) and got.shape == (B, T):
            raise NotYet("shape (B, T): add two axes, mask[:, None, None, :], so it broadcasts over heads and queries")
        if (
            isinstance(got, Tensor)
            and got.dtype == torch.bool
            and got.numel() == B * T * T
            and got.shape[-2:] == (T, T)
        ):
            square = got.reshape(B, T, T)
            if torch.equal(square, real[:, :, None] & real[:, None, :]):
                raise NotYet(MISTAKES["padded query"])
            if torch.equal(square, real[:, None, :].expand(B, T, T)):
                raise NotYet(
                    f"shape {tuple(got.shape)}: the values are right, but keep the two singleton axes, (B, 1, 1, T); "
                    "broadcasting spreads it over the heads and queries"
                )
        if (
            isinstance(got, Tensor)
            and got.dtype == torch.bool
            and got.shape == (B, 1, T, 1)
            and torch.equal(got.reshape(B, T), real)
        ):
            raise NotYet(
                "shape (B, 1, T, 1) masks the padded *queries* (rows), not the keys: no query may attend to a pad "
                "key, so put T last, mask[:, None, None, :]"
            )
        if (
            isinstance(got, Tensor)
            and got.shape != expected.shape
            and got.numel() == B * T
            and torch.equal(got.reshape(B, T), real)
        ):
            raise NotYet(f"shape {tuple(got.shape)}: the values are right; the axes must be (B, 1, 1, T)")
        mistakes = [
            (
                (tokens > pad_id)[:, None, None, :],
                f"tokens > pad_id takes the real ids below pad_id = {pad_id} for padding: a real token is any id "
                "!= pad_id",
            ),
            (
                (torch.arange(T) < real.sum(dim=1, keepdim=True))[:, None, None, :],
                "the mask is built from each sequence's length, which assumes the padding is all at the end: here "
                f"a sequence has pad_id = {pad_id} elsewhere (tokens {tokens.tolist()}); compare each token, "
                "tokens != pad_id",
            ),
        ]
        name_mistake(got, expected, mistakes)
        if isinstance(got, Tensor) and got.dtype == torch.bool and got.shape == expected.shape:
            wrong = (got != expected).nonzero()
            if len(wrong):
                b, t = int(wrong[0, 0]), int(wrong[0, 3])
                raise NotYet(
                    f"padding mask differs at index {(b, 0, 0, t)}: got {got[b, 0, 0, t].item()}, expected "
                    f"{expected[b, 0, 0, t].item()}, where tokens[{b}, {t}] = {tokens[b, t].item()} and pad_id = "
                    f"{pad_id}: True exactly where tokens != pad_id"
                )
        same(got, expected, "padding mask")
        return "your padding mask is right: (B, 1, 1, T), True at real tokens."

    cases = [dict(pad_id=0, B=3, T=5), dict(pad_id=3, B=2, T=7), dict(pad_id=1, B=4, T=3)]

    def run() -> str:
        message = each_case(one, cases)
        off_the_cpu("the mask", on_meta(fn, torch.tensor(_PADDED_TOKENS[0]), 0), getattr(fn, "__name__", "it"))
        return message

    return verdict(run)


def _negative_slices(size: int, window: int) -> Tensor:
    """The sliding window filled row by row with mask[i, i - window + 1 : i + 1] = True, a negative start unclamped."""
    mask = torch.zeros(size, size, dtype=torch.bool)
    for i in range(size):
        mask[i, i - window + 1 : i + 1] = True
    return mask


def check_sliding_window_mask(fn: Callable[..., Any]) -> Verdict:
    """``fn(size, window)`` returns a bool ``(size, size)`` mask: query i may attend to key j when
    ``i - window < j <= i``, itself and the ``window - 1`` positions before it."""

    def one(size: int, window: int) -> str:
        got = call(fn, size, window)
        i, j = torch.arange(size)[:, None], torch.arange(size)  # (size, 1) queries, (size,) keys
        expected = (j <= i) & (j > i - window)  # (size, size)
        what = f"the mask with size={size}, window={window}"
        got = any_device(got, expected, what)
        _mask_basics(got, expected, what, "the hidden positions", NO_TENSOR_ARGUMENT)
        mistakes = {
            "the mask is transposed: row i (the query) may see the columns i - window < j <= i": expected.T,
            f"off by one: with window={window} each query sees {window + 1} positions; it must see itself and "
            "the window - 1 before it: j > i - window": (j <= i) & (j >= i - window),
            f"off by one: with window={window} each query sees only {window - 1} positions; it must see itself "
            "and the window - 1 before it: j > i - window": (j <= i) & (j > i - window + 1),
            "the future is allowed: a band around the diagonal; keep only j <= i (causal)": (i - j).abs() < window,
            "the two conditions are joined by | (or): a key must be in the past AND inside the window, "
            "(j <= i) & (j > i - window)": (j <= i) | (j > i - window),
            f"this is the plain causal mask: the window={window} is ignored": j <= i,
            "the first rows are empty: a slice that starts at i - window + 1 < 0 counts from the end (mask[i, -1:2] "
            "selects nothing), so the first queries see nothing, not even themselves; start at "
            "max(0, i - window + 1)": _negative_slices(size, window),
        }
        for message, buggy in mistakes.items():
            if isinstance(got, Tensor) and not torch.equal(buggy, expected) and torch.equal(got, buggy):
                raise NotYet(message)
        _diagonal_hidden(got, expected)
        same(got, expected, what)
        return "sliding_window_mask is right: each query sees itself and the window - 1 positions before it."

    cases = [dict(size=6, window=3), dict(size=5, window=1), dict(size=7, window=2), dict(size=4, window=9)]

    def run() -> str:
        return each_case(one, cases)

    return verdict(run)


# The masks of check_masked_mean's test cases, by (B, T): 1 a real token. Some sequences are padded on the left, so
# that an answer averaging the first mask.sum() positions fails.
_MEAN_MASKS = {
    (3, 5): ["11111", "11000", "00111"],
    (2, 7): ["0011111", "1111000"],
    (4, 3): ["100", "111", "110", "111"],
}


def check_masked_mean(fn: Callable[..., Any]) -> Verdict:
    """``fn(x (B, T, d), mask (B, T))`` returns ``(B, d)``: each sequence's mean over its real tokens
    (``mask`` True), padding left out."""

    def one(B: int, T: int, d: int, seed: int) -> str:
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(B, T, d, generator=g) + 1.0  # (B, T, d); padding holds values too, as real tensors do
        mask = torch.tensor([[c == "1" for c in row] for row in _MEAN_MASKS[B, T]])  # (B, T): True at real tokens
        try:
            got = call(fn, x, mask)
        except NotYet as e:
            if "must match the size of tensor" not in str(e):
                raise
            raise NotYet(
                f"{e}. A (B, T) mask, or a (B,) count, needs a trailing axis to broadcast against (B, T, d) or "
                "(B, d): mask.unsqueeze(-1), mask.sum(dim=1, keepdim=True)"
            ) from None
        lengths = mask.sum(dim=1, keepdim=True)  # (B, 1)
        keep = mask.unsqueeze(-1).float()  # (B, T, 1)
        total = (x * keep).sum(dim=1)  # (B, d)
        expected = total / lengths
        prefix = torch.stack([x[b, : int(lengths[b])].mean(dim=0) for b in range(B)])  # (B, d)
        count = "mask.sum(dim=1, keepdim=True)"
        mistakes = [
            (x.mean(1), "the padding is averaged in: x.mean(dim=1) counts every position; weight by the mask first"),
            (
                total / T,
                f"divided by T: a padded sequence's mean shrinks; divide by its number of real tokens, {count}",
            ),
            (total, f"a sum, not a mean: divide by the number of real tokens, {count}"),
            (x.sum(1) / lengths, "the padding is summed in: multiply x by mask.unsqueeze(-1) before the sum"),
            (
                total / lengths.sum(),
                f"divided by the whole batch's number of real tokens, mask.sum(): divide each sequence by its own, "
                f"{count}",
            ),
            (
                prefix,
                "the mean of the first mask.sum() positions: the real tokens are where mask is True, not always at "
                "the start (here a sequence is padded on the left); weight x by the mask",
            ),
        ]
        if isinstance(got, Tensor) and got.device != expected.device:
            same(got, expected, "the mean")  # names the device
        name_mistake(got, expected, mistakes)
        padded = (lengths[:, 0] < T).nonzero()[:, 0]  # the rows with padding (0/0 over the padding of the others)
        over_padding = (x * (1 - keep)).sum(1)[padded] / (T - lengths[padded])  # (rows, d)
        if (
            isinstance(got, Tensor)
            and got.shape == expected.shape
            and got.is_floating_point()
            and torch.allclose(got[padded].double(), over_padding.double(), atol=1e-5)
        ):
            raise NotYet(
                "this is the mean over the padding, as if True marked the padding; in this course True means "
                "*may attend*, a real token: average where mask is True"
            )
        if isinstance(got, Tensor) and got.shape == (B, 1, d):
            raise NotYet("shape (B, 1, d): pool over dim=1 without keepdim=True, so that the T axis goes away")
        if isinstance(got, Tensor) and got.shape == (B, T) != expected.shape:
            raise NotYet(
                f"shape (B, T) = {(B, T)}: the sum or mean ran over the features, the last axis; a sequence's mean "
                "runs over its tokens, dim=1, and keeps the d features: (B, d)"
            )
        if isinstance(got, Tensor) and got.shape == (d,):
            raise NotYet(
                f"shape ({d},): one mean over the whole batch (x[mask] puts every sequence's tokens together); "
                "average each sequence separately, (B, d)"
            )
        same(got, expected, "the mean")
        backpropagates(
            fn, x, mask, what="the mean", reference=lambda x, m: (x * m.unsqueeze(-1)).sum(1) / m.sum(1, keepdim=True)
        )
        return "masked_mean is right: each sequence's mean over its real tokens only."

    cases = [dict(B=3, T=5, d=4, seed=0), dict(B=2, T=7, d=3, seed=1), dict(B=4, T=3, d=5, seed=2)]

    def run() -> str:
        message = each_case(one, cases)
        mask = torch.tensor([[c == "1" for c in row] for row in _MEAN_MASKS[3, 5]])
        off_the_cpu("the mean", on_meta(fn, torch.randn(3, 5, 4), mask), getattr(fn, "__name__", "it"))
        return message

    return verdict(run)
