"""Checkers for positional encoding (chapter 03)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from ..positional import sinusoidal_encoding
from ._core import NotYet, Verdict, call, differs, same, verdict

__all__ = ["check_position_shift", "check_sinusoidal_encoding"]


def check_sinusoidal_encoding(fn: Callable[..., Any]) -> Verdict:
    """``fn(max_len, d_model)`` returns the ``(max_len, d_model)`` sinusoidal table."""

    def run() -> str:
        got = call(fn, 50, 16)
        pos = torch.arange(50.0)[:, None]
        buggy = torch.zeros(50, 16)
        two_i = torch.arange(0, 16, 2)
        buggy[:, 0::2] = torch.sin(pos / 10000 ** (2 * two_i / 16))
        buggy[:, 1::2] = torch.cos(pos / 10000 ** (2 * two_i / 16))
        if not differs(got, buggy):
            raise NotYet(
                "2i is applied twice: arange(0, d_model, 2) already steps by 2, so use 10000 ** (two_i / d_model)"
            )
        if not differs(got, sinusoidal_encoding(50, 16)[:, [i + 1 - 2 * (i % 2) for i in range(16)]]):
            raise NotYet("sin and cos are swapped: even dimensions get sin, odd ones cos")
        same(got, sinusoidal_encoding(50, 16), "the encoding", atol=1e-4)
        return "sinusoidal_encoding matches the paper's formula."

    return verdict(run)


def check_position_shift(fn: Callable[..., Any]) -> Verdict:
    """``fn(k, d_model)`` returns the ``(d_model, d_model)`` matrix M_k with M_k @ PE[p] = PE[p + k] for every p."""

    def run() -> str:
        pe = sinusoidal_encoding(64, 8).double()
        for k in (1, 3, 10):
            got = call(fn, k, 8)
            if not isinstance(got, Tensor) or got.shape != (8, 8):
                raise NotYet(f"return a (d_model, d_model) tensor; got {getattr(got, 'shape', type(got).__name__)}")
            shifted = pe[: 64 - k] @ got.double().T  # row p: M_k @ PE[p]
            if torch.allclose(shifted, pe[k:], atol=1e-4):
                continue
            if torch.allclose(pe[: 64 - k] @ got.double(), pe[k:], atol=1e-4):
                raise NotYet("this is M_k transposed: the sine row is [cos, sin] and the cosine row [-sin, cos]")
            raise NotYet(
                f"M_k @ PE[p] differs from PE[p + k] for k={k}; build 2x2 rotations by k * omega_i on the diagonal"
            )
        return "right: shifting by k positions is a fixed rotation of each (sin, cos) pair, whatever p."

    return verdict(run)
