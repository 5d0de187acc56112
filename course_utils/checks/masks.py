"""Checkers for attention masks (chapters 01 and 05)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from ..masks import causal_mask, padding_mask
from ._core import NotYet, Verdict, call, same, verdict

__all__ = ["check_causal_mask", "check_padding_mask", "check_target_mask"]


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


def check_target_mask(fn: Callable[..., Any]) -> Verdict:
    """``fn(tgt (B, T), pad_id)`` returns the decoder's ``(B, 1, T, T)`` mask: causal and not padding."""

    def run() -> str:
        tgt = torch.tensor([[1, 5, 6, 2, 0], [1, 7, 2, 0, 0]])
        got = call(fn, tgt, 0)
        expected = padding_mask(tgt, 0) & causal_mask(5)
        if (
            isinstance(got, Tensor)
            and got.shape == expected.shape
            and torch.equal(got, causal_mask(5).expand(2, 1, 5, 5))
        ):
            raise NotYet("causal, but padded target positions are still visible: combine with padding_mask using &")
        if (
            isinstance(got, Tensor)
            and got.shape == expected.shape
            and torch.equal(got, padding_mask(tgt, 0).expand(2, 1, 5, 5))
        ):
            raise NotYet("padding is hidden but the future is not: combine with causal_mask using &")
        same(got, expected, "target mask")
        return "target mask is right: (B, 1, T, T), causal and blind to padding."

    return verdict(run)
