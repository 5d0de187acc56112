"""Checkers for positional encoding (chapter 03)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from ..model.positional import sinusoidal_encoding
from ._core import NotYet, Verdict, backpropagates, call, differs, same, verdict

__all__ = ["check_alibi_bias", "check_rotary_embedding", "check_sinusoidal_encoding"]


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
        reference = sinusoidal_encoding(50, 16)
        if not differs(got, torch.cat([reference[:, 0::2], reference[:, 1::2]], dim=1)):
            raise NotYet(
                "sines fill the first half and cosines the second: interleave them, pe[:, 0::2] and pe[:, 1::2]"
            )
        same(got, sinusoidal_encoding(50, 16), "the encoding", atol=1e-4)
        return "sinusoidal_encoding matches the paper's formula."

    return verdict(run)


def _rope(x: Tensor, *, exponent: float = 1.0, halves: bool = False, direction: float = 1.0, start: int = 0) -> Tensor:
    """Rotary embedding of ``x (..., T, d)``, and the classic variants of it (the checker's buggy answers):
    ``exponent`` 2 applies 2i twice, -1 multiplies by 10000^(2i/d) and 0.5 uses i for 2i; ``halves`` pairs
    feature i with i + d/2; ``direction`` -1 rotates the other way; ``start`` 1 counts positions from 1."""
    T, d = x.shape[-2], x.shape[-1]
    pos = torch.arange(start, start + T, dtype=torch.float64)[:, None]  # (T, 1)
    two_i = torch.arange(0, d, 2, dtype=torch.float64)  # (d / 2,)
    omega = 10000 ** (-exponent * two_i / d)  # (d / 2,)
    angle = direction * pos * omega  # (T, d / 2)
    cos, sin = angle.cos(), angle.sin()
    x = x.double()
    a, b = (x[..., : d // 2], x[..., d // 2 :]) if halves else (x[..., 0::2], x[..., 1::2])  # (..., T, d / 2) each
    out = torch.empty_like(x)
    first, second = (slice(0, d // 2), slice(d // 2, d)) if halves else (slice(0, d, 2), slice(1, d, 2))
    out[..., first] = a * cos - b * sin
    out[..., second] = a * sin + b * cos
    return out.float()


def check_rotary_embedding(fn: Callable[..., Any]) -> Verdict:
    """``fn(x)`` rotates each pair of features (2i, 2i+1) of ``x (B, n_heads, T, d_k)`` by the angle pos * omega_i,
    omega_i = 1 / 10000^(2i / d_k), pos = 0 .. T-1 along dimension -2."""

    def run() -> str:
        g = torch.Generator().manual_seed(0)
        x = torch.randn(2, 3, 12, 8, generator=g)  # (B, n_heads, T, d_k)
        got = call(fn, x)
        named = {
            "pairs feature i with feature i + d/2 (the GPT-NeoX / Hugging Face LLaMA layout): this exercise pairs "
            "neighbours (2i, 2i+1), as the sinusoidal table does: x[..., 0::2] with x[..., 1::2]": _rope(
                x, halves=True
            ),
            "2i is applied twice: arange(0, d, 2) already steps by 2, so omega_i = 1 / 10000 ** (two_i / d)": _rope(
                x, exponent=2.0
            ),
            "the exponent uses the pair index i where the formula has 2i: two_i = arange(0, d, 2)": _rope(
                x, exponent=0.5
            ),
            "the frequencies are inverted: omega_i = 1 / 10000 ** (two_i / d), not 10000 ** (two_i / d)": _rope(
                x, exponent=-1.0
            ),
            "it rotates the other way (by -pos * omega_i): map (a, b) to (a cos - b sin, a sin + b cos)": _rope(
                x, direction=-1.0
            ),
            "positions start at 1: the first token is position 0 and is not rotated": _rope(x, start=1),
        }
        for mistake, buggy in named.items():  # loosely: float32 angles of thousands of radians are inexact
            if isinstance(got, Tensor) and got.shape == buggy.shape and torch.allclose(got, buggy, atol=0.05):
                raise NotYet(mistake)
        same_vector = torch.randn(1, 1, 1, 8, generator=g).expand(1, 1, 12, 8).clone()  # one vector at every position
        other_vector = torch.randn(1, 1, 1, 8, generator=g).expand(1, 1, 12, 8).clone()
        q, k = call(fn, same_vector), call(fn, other_vector)
        if isinstance(q, Tensor) and isinstance(k, Tensor) and q.shape == k.shape == same_vector.shape:
            scores = (q @ k.transpose(-2, -1))[0, 0].double()  # (T, T): query at m, key at n
            if not torch.allclose(scores[1:, 1:], scores[:-1, :-1], atol=1e-4):
                raise NotYet(
                    "the scores depend on the absolute positions: the same query and key give q_m . k_n != "
                    "q_(m+1) . k_(n+1). Rotate each pair (a, b) to (a cos - b sin, a sin + b cos), nothing else"
                )
            if not torch.allclose(q.norm(dim=-1), same_vector.norm(dim=-1), atol=1e-4):
                raise NotYet("the vectors' lengths changed: a rotation keeps every pair's length (cos² + sin² = 1)")
        same(got, _rope(x), "the rotated tensor", atol=1e-4)
        backpropagates(fn, x, what="the rotated tensor")
        return "rotary embedding is right: q_m . k_n depends on m - n only."

    return verdict(run)


def check_alibi_bias(fn: Callable[..., Any]) -> Verdict:
    """``fn(T, slope)`` returns the ``(T, T)`` float bias added to the attention scores: ``-slope * |i - j|`` for
    query i and key j (ALiBi, Press et al. 2022, without the causal mask)."""

    def run() -> str:
        for T, slope in ((6, 0.5), (4, 0.25)):
            got = call(fn, T, slope)
            i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]  # (T, 1), (1, T)
            named = {
                "the sign is flipped: distant keys must get a lower score, -slope * |i - j|": slope * (i - j).abs(),
                "the absolute value is missing: with -slope * (i - j) keys after the query (j > i) get a bonus; "
                "use (i - j).abs()": -slope * (i - j),
                "the absolute value is missing: with -slope * (j - i) keys before the query get a bonus; "
                "use (i - j).abs()": -slope * (j - i),
                "the distance is divided by the slope: multiply, -slope * |i - j|": -(i - j).abs() / slope,
                "the slope is missing: multiply the distance by it, -slope * |i - j|": -(i - j).abs(),
            }
            for mistake, buggy in named.items():
                if not differs(got, buggy.float()):
                    raise NotYet(mistake)
            if isinstance(got, Tensor) and not got.is_floating_point():
                raise NotYet(f"the bias has dtype {got.dtype}: it is added to float scores, return a float tensor")
            same(got, (-slope * (i - j).abs()).float(), f"the bias for T={T}, slope={slope}")
        return "ALiBi bias is right: each step of distance costs `slope` in the score, in both directions."

    return verdict(run)
