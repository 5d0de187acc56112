"""Checkers for language modelling and sampling (chapter 07)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from ._core import NotYet, Verdict, call, same, verdict

__all__ = ["check_next_token_targets", "check_temperature", "check_top_k"]


def check_next_token_targets(fn: Callable[..., Any]) -> Verdict:
    """``fn(window (B, T + 1))`` returns ``(x, y)``: inputs and next-token targets, each ``(B, T)``."""

    def run() -> str:
        window = torch.arange(12).view(2, 6)
        got = call(fn, window)
        if not (isinstance(got, tuple) and len(got) == 2):
            raise NotYet("return a pair (x, y)")
        if isinstance(got[0], Tensor) and torch.equal(got[0], window[:, 1:]):
            raise NotYet("x and y are swapped: the model reads window[:, :-1] and predicts window[:, 1:]")
        same(got[0], window[:, :-1], "x")
        same(got[1], window[:, 1:], "y")
        return "right: position t reads tokens up to t and is trained to predict token t + 1."

    return verdict(run)


def check_temperature(fn: Callable[..., Any]) -> Verdict:
    """``fn(logits (B, V), temperature)`` returns the sampling probabilities softmax(logits / temperature)."""

    def run() -> str:
        logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]])
        for t in (0.5, 1.0, 2.0):
            got = call(fn, logits, t)
            if t != 1.0 and isinstance(got, Tensor) and torch.allclose(got, (logits * t).softmax(-1)):
                raise NotYet("multiplied by the temperature: divide the logits by it (low temperature = sharper)")
            same(got, (logits / t).softmax(-1), f"the probabilities at temperature {t}")
        return "right: below 1 the distribution sharpens, above 1 it flattens."

    return verdict(run)


def check_top_k(fn: Callable[..., Any]) -> Verdict:
    """``fn(logits (B, V), k)`` keeps the ``k`` largest logits of each row and sets the others to -inf."""

    def run() -> str:
        logits = torch.tensor([[0.1, 3.0, -1.0, 2.0, 0.5], [5.0, 4.0, 3.0, 2.0, 1.0]])
        for k in (1, 2, 5):
            got = call(fn, logits, k)
            kth = torch.topk(logits, k).values[:, -1:]
            expected = logits.masked_fill(logits < kth, float("-inf"))
            if isinstance(got, Tensor) and got.shape == logits.shape and torch.equal(got.isinf(), ~(logits < kth)):
                raise NotYet("the mask is inverted: keep the k largest logits, set the rest to -inf")
            if isinstance(got, Tensor) and got.shape == logits.shape and (got == 0).any() and not (expected == 0).any():
                raise NotYet("the dropped logits must become -inf (probability 0), not 0")
            same(got, expected, f"the filtered logits for k={k}")
        return "right: only the k most likely tokens can be sampled."

    return verdict(run)
