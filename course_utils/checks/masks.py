"""Checkers for attention masks (chapters 01 and 05)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from ..model.masks import causal_mask, padding_mask
from ._core import NotYet, Verdict, call, differs, same, verdict

__all__ = [
    "check_causal_mask",
    "check_masked_mean",
    "check_padding_mask",
    "check_sliding_window_mask",
]


def check_causal_mask(fn: Callable[..., Any]) -> Verdict:
    """``fn(size)`` returns a bool ``(size, size)`` mask, True where position i may attend to j."""

    def run() -> str:
        for size in (1, 4, 7):
            got = call(fn, size)
            if (
                size > 1
                and isinstance(got, Tensor)
                and got.shape == (size, size)
                and torch.equal(got.bool(), causal_mask(size).T)
            ):
                raise NotYet("the mask is transposed: row i (the query) must allow columns j <= i, i.e. tril")
            same(got, causal_mask(size), f"causal mask of size {size}")
        return "causal_mask is right: each position sees itself and the past, never the future."

    return verdict(run)


def check_padding_mask(fn: Callable[..., Any]) -> Verdict:
    """``fn(tokens (B, T), pad_id)`` returns a bool ``(B, 1, 1, T)`` mask, True at real tokens."""

    def run() -> str:
        tokens = torch.tensor([[5, 6, 7, 0, 0], [8, 0, 0, 0, 0], [4, 4, 4, 4, 4]])
        got = call(fn, tokens, 0)
        if isinstance(got, Tensor) and got.shape == (3, 5):
            raise NotYet("shape (B, T): add two axes, mask[:, None, None, :], so it broadcasts over heads and queries")
        if isinstance(got, Tensor) and got.shape == (3, 1, 1, 5) and torch.equal(got, ~padding_mask(tokens, 0)):
            raise NotYet("True marks the padding; in this course True means 'may attend' (a real token)")
        same(got, padding_mask(tokens, 0), "padding mask")
        return "padding_mask is right: (B, 1, 1, T), True at real tokens."

    return verdict(run)


def check_sliding_window_mask(fn: Callable[..., Any]) -> Verdict:
    """``fn(size, window)`` returns a bool ``(size, size)`` mask: query i may attend to key j when
    ``i - window < j <= i``, itself and the ``window - 1`` positions before it."""

    def run() -> str:
        for size, window in ((6, 3), (5, 1), (7, 2), (4, 9)):
            got = call(fn, size, window)
            i, j = torch.arange(size)[:, None], torch.arange(size)  # (size, 1) queries, (size,) keys
            expected = (j <= i) & (j > i - window)  # (size, size)
            mistakes = {
                "the mask is transposed: row i (the query) may see the columns i - window < j <= i": expected.T,
                f"off by one: with window={window} each query sees {window + 1} positions; it must see itself and "
                "the window - 1 before it: j > i - window": (j <= i) & (j >= i - window),
                f"off by one: with window={window} each query sees only {window - 1} positions; it must see itself "
                "and the window - 1 before it: j > i - window": (j <= i) & (j > i - window + 1),
                "the future is allowed: a band around the diagonal; keep only j <= i (causal)": (i - j).abs() < window,
                f"this is the plain causal mask: the window={window} is ignored": j <= i,
            }
            for message, buggy in mistakes.items():
                if isinstance(got, Tensor) and not torch.equal(buggy, expected) and torch.equal(got, buggy):
                    raise NotYet(message)
            same(got, expected, f"the mask with size={size}, window={window}")
        return "sliding_window_mask is right: each query sees itself and the window - 1 positions before it."

    return verdict(run)


def check_masked_mean(fn: Callable[..., Any]) -> Verdict:
    """``fn(x (B, T, d), mask (B, T))`` returns ``(B, d)``: each sequence's mean over its real tokens
    (``mask`` True), padding left out."""

    def run() -> str:
        g = torch.Generator().manual_seed(0)
        x = torch.randn(3, 5, 4, generator=g) + 1.0  # (B, T, d); padding holds values too, as real tensors do
        lengths = torch.tensor([5, 2, 3])
        mask = torch.arange(5) < lengths[:, None]  # (B, T): True at the real tokens
        got = call(fn, x, mask)
        keep = mask.unsqueeze(-1).float()  # (B, T, 1)
        total = (x * keep).sum(dim=1)  # (B, d)
        expected = total / lengths[:, None]
        mistakes = {
            "the padding is averaged in: x.mean(dim=1) counts every position; weight by the mask first": x.mean(1),
            "divided by T: a padded sequence's mean shrinks; divide by its number of real tokens, "
            "mask.sum(dim=1, keepdim=True)": total / 5,
            "a sum, not a mean: divide by the number of real tokens, mask.sum(dim=1, keepdim=True)": total,
        }
        for message, buggy in mistakes.items():
            if not differs(got, buggy):
                raise NotYet(message)
        over_padding = (x * (1 - keep)).sum(1) / (5 - lengths[:, None])  # (B, d); row 0, no padding: 0/0
        if isinstance(got, Tensor) and got.shape == expected.shape and not differs(got[1:], over_padding[1:]):
            raise NotYet("this is the mean over the padding: True in mask marks the real tokens")
        if isinstance(got, Tensor) and got.shape == (3, 1, 4):
            raise NotYet("shape (B, 1, d): pool over dim=1 without keepdim=True, so that the T axis goes away")
        same(got, expected, "the pooled vectors")
        return "masked_mean is right: each sequence's mean over its real tokens only."

    return verdict(run)
