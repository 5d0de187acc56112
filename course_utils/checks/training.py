"""Checkers for teacher forcing and the loss (chapters 05 and 06)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from ._core import NotYet, Verdict, call, same, verdict

__all__ = ["check_label_smoothing", "check_noam_lr", "check_shift_right"]


def check_shift_right(fn: Callable[..., Any]) -> Verdict:
    """``fn(tgt (B, T))`` returns ``(decoder_input, labels)`` for teacher forcing, each ``(B, T - 1)``."""

    def run() -> str:
        tgt = torch.tensor([[1, 7, 8, 9, 2], [1, 5, 2, 0, 0]])  # <bos>=1 ... <eos>=2, <pad>=0
        got = call(fn, tgt)
        if not (isinstance(got, tuple) and len(got) == 2):
            raise NotYet("return a pair (decoder_input, labels)")
        if isinstance(got[0], Tensor) and torch.equal(got[0], tgt[:, 1:]):
            raise NotYet("input and labels are swapped: the decoder reads tgt[:, :-1] and predicts tgt[:, 1:]")
        same(got[0], tgt[:, :-1], "decoder input")
        same(got[1], tgt[:, 1:], "labels")
        return "shift_right is right: the decoder reads <bos> y1 ... and learns to predict y1 ... <eos>."

    return verdict(run)


def check_label_smoothing(fn: Callable[..., Any]) -> Verdict:
    """``fn(logits (N, V), target (N,), smoothing)`` returns the mean label-smoothed cross-entropy."""

    def run() -> str:
        g = torch.Generator().manual_seed(0)
        logits, target = torch.randn(6, 5, generator=g), torch.randint(0, 5, (6,), generator=g)
        for smoothing in (0.0, 0.1, 0.3):
            got = call(fn, logits, target, smoothing)
            same(
                torch.as_tensor(got),
                F.cross_entropy(logits, target, label_smoothing=smoothing),
                f"the loss at smoothing={smoothing}",
            )
        return "label-smoothed cross-entropy matches F.cross_entropy(label_smoothing=...)."

    return verdict(run)


def check_noam_lr(fn: Callable[..., Any]) -> Verdict:
    """``fn(step, d_model, warmup_steps)`` returns the paper's learning rate at ``step`` (counted from 1)."""

    def run() -> str:
        from ..train import noam_lr

        for step in (1, 10, 399, 400, 401, 4000, 100_000):
            got = call(fn, step, 512, 400)
            expected = noam_lr(step, 512, 400)
            if not isinstance(got, (int, float, Tensor)):
                raise NotYet(f"return a number; got {type(got).__name__}")
            if math.isclose(float(got), expected * 512**0.5, rel_tol=1e-6):
                raise NotYet("the factor d_model ** -0.5 is missing")
            if not math.isclose(float(got), expected, rel_tol=1e-6):
                raise NotYet(f"at step {step} (d_model=512, warmup=400): got {float(got):.6g}, expected {expected:.6g}")
        return "noam_lr is right: linear warm-up to step 400, then decay as 1/sqrt(step)."

    return verdict(run)
