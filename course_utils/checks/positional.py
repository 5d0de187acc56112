"""Checkers for positional encoding (chapter 03)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from ..model.positional import sinusoidal_encoding
from ._core import NotYet, Verdict, any_device, backpropagates, call, each_case, off_the_cpu, on_meta, same, verdict

__all__ = ["check_alibi_bias", "check_rotary_embedding", "check_sinusoidal_encoding"]

# The two ways of pairing the d dimensions into d/2 (sin, cos) or rotated pairs, worded once for every checker that
# names one (the sinusoidal table and rotary embeddings here, Llama's rotary pairing in chapter 10).
PAIRINGS = {
    "halves": "dimension i with i + d/2 (the first half with the second)",
    "interleaved": "neighbours (2i, 2i+1) (the even dimensions with the odd ones)",
}


def frequency_mistakes(power: str, d: str, angle: str) -> dict[str, str]:
    """The classic mistakes of the frequencies 10000^(-2i/d) (or theta^(-2i/d)), keyed by the exponent a buggy answer
    computes with (``exponent`` times 2i / d, or ``"precedence"``), in the chapter's names: ``power`` how it writes
    the power without parentheses (``10000 ** two_i``), ``d`` the width (``d_model``), ``angle`` the right formula."""
    base = power.split(" ")[0]  # 10000, theta
    return {
        "2": f"2i is applied twice: arange(0, {d}, 2) already steps by 2 (two_i is 2i), so {angle}",
        "0.5": f"the exponent uses the pair index i where the formula has 2i: with two_i = arange(0, {d}, 2) (or "
        f"2 * arange({d} // 2)), {angle}",
        "-1": f"the frequencies are inverted (the position multiplied by {base}^(2i/{d}) where it is divided): {angle}",
        "precedence": f"{power} / {d} is ({power}) / {d}, as ** binds tighter than /: {angle}",
    }


def like(got: object, buggy: Tensor, reference: Tensor, atol: float = 0.05) -> bool:
    """``got`` is what a classic bug computes (``buggy``), which the right answer is not. Loosely: float32 angles of
    thousands of radians are inexact, and a bug's result is far from the right one."""
    return bool(
        isinstance(got, Tensor)
        and got.device == buggy.device
        and got.shape == buggy.shape
        and torch.allclose(got.double(), buggy.double(), atol=atol)
        and not torch.allclose(reference.double(), buggy.double(), atol=2 * atol)
    )


def _table(max_len: int, d: int, *, exponent: float = 1.0, start: int = 0, layout: str = "interleaved") -> Tensor:
    """The sinusoidal table in float64, and its classic variants: ``exponent`` as in ``_rope`` (or 0: the
    precedence bug), positions from ``start``, ``layout`` interleaved, swapped (cos first), halves or cos halves."""
    pos = torch.arange(start, start + max_len, dtype=torch.float64)[:, None]  # (max_len, 1)
    two_i = torch.arange(0, d, 2, dtype=torch.float64)  # (d / 2,)
    angle = pos / (10000**two_i / d) if exponent == 0 else pos / 10000 ** (exponent * two_i / d)  # (max_len, d / 2)
    sin, cos = angle.sin(), angle.cos()
    if layout in ("halves", "cos halves"):
        return torch.cat([sin, cos] if layout == "halves" else [cos, sin], dim=1)
    first, second = (cos, sin) if layout == "swapped" else (sin, cos)
    return torch.stack([first, second], dim=-1).flatten(1)  # (max_len, d / 2, 2) -> interleaved


def _inline_precedence(max_len: int, d: int) -> Tensor:
    """The table with the angle written pos / 10000 ** two_i / d: (pos / 10000^(2i)) / d."""
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]  # (max_len, 1)
    two_i = torch.arange(0, d, 2, dtype=torch.float64)  # (d / 2,)
    angle = pos / 10000**two_i / d  # (max_len, d / 2)
    return torch.stack([angle.sin(), angle.cos()], dim=-1).flatten(1)


def _own_index(max_len: int, d: int) -> Tensor:
    """The table with column j's frequency 10000^(-j/d), j odd for the cosines: not their sines' frequency."""
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]  # (max_len, 1)
    j = torch.arange(d, dtype=torch.float64)  # (d,)
    angle = pos / 10000 ** (j / d)  # (max_len, d)
    return torch.where(j.long() % 2 == 0, angle.sin(), angle.cos())


def check_sinusoidal_encoding(fn: Callable[..., Any]) -> Verdict:
    """``fn(max_len, d_model)`` returns the ``(max_len, d_model)`` sinusoidal table."""
    frequencies = frequency_mistakes("10000 ** two_i", "d_model", "the angle is pos / 10000 ** (two_i / d_model)")
    interleave = (
        f"the paper pairs {PAIRINGS['interleaved']}: interleave them, sines in pe[:, 0::2], cosines in pe[:, 1::2]"
    )

    def one(max_len: int, d_model: int) -> str:
        got = call(fn, max_len, d_model)
        reference = sinusoidal_encoding(max_len, d_model)  # what the chapter uses
        got = any_device(got, reference, "the encoding")
        named = {
            frequencies["2"]: _table(max_len, d_model, exponent=2.0),
            frequencies["0.5"]: _table(max_len, d_model, exponent=0.5),
            frequencies["-1"]: _table(max_len, d_model, exponent=-1.0),
            frequencies["precedence"]: _table(max_len, d_model, exponent=0.0),
            "sin and cos are swapped: even dimensions get sin, odd ones cos": _table(
                max_len, d_model, layout="swapped"
            ),
            "the sines fill the first half and the cosines the second, so each (sin, cos) pair is "
            f"{PAIRINGS['halves']}; {interleave}": _table(max_len, d_model, layout="halves"),
            "the cosines fill the first half and the sines the second, so each (sin, cos) pair is "
            f"{PAIRINGS['halves']}; {interleave}": _table(max_len, d_model, layout="cos halves"),
            "positions start at 1: the first row is position 0 (sin 0 = 0, cos 0 = 1), pos = arange(max_len)": _table(
                max_len, d_model, start=1
            ),
            "pos / 10000 ** two_i / d_model is (pos / 10000 ** two_i) / d_model, as ** binds tighter than / and "
            "/ runs left to right: the angle is pos / 10000 ** (two_i / d_model)": _inline_precedence(max_len, d_model),
            "each column uses its own index j in the exponent, 10000 ** (j / d_model): the cosine of a pair must "
            "share its sine's frequency, 10000 ** (2i / d_model) with 2i the even column of the pair": _own_index(
                max_len, d_model
            ),
        }
        if isinstance(got, Tensor) and got.dtype in (torch.float16, torch.bfloat16):
            raise NotYet(
                f"the table is {got.dtype}: build it in float32, PyTorch's default (16 bits keep about 3 digits, "
                "and cannot tell positions above 2,048 apart)"
            )
        for mistake, buggy in named.items():
            if like(got, buggy, reference):
                raise NotYet(mistake)
        same(got, reference, "the encoding", atol=1e-4)
        return "sinusoidal_encoding matches the paper's formula."

    def run() -> str:
        return each_case(one, [dict(max_len=50, d_model=16), dict(max_len=9, d_model=10)])

    return verdict(run)


def _rope(x: Tensor, *, exponent: float = 1.0, halves: bool = False, direction: float = 1.0, start: int = 0) -> Tensor:
    """Rotary embedding of ``x (..., T, d)``, and the classic variants of it (the checker's buggy answers):
    ``exponent`` 2 applies 2i twice, -1 multiplies by 10000^(2i/d), 0.5 uses i for 2i and 0 divides 10000^(2i) by d
    (the precedence bug); ``halves`` pairs feature i with i + d/2; ``direction`` -1 rotates the other way;
    ``start`` 1 counts positions from 1."""
    T, d = x.shape[-2], x.shape[-1]
    pos = torch.arange(start, start + T, dtype=torch.float64)[:, None]  # (T, 1)
    two_i = torch.arange(0, d, 2, dtype=torch.float64)  # (d / 2,)
    omega = 1 / (10000**two_i / d) if exponent == 0 else 10000 ** (-exponent * two_i / d)  # (d / 2,)
    angle = direction * pos * omega  # (T, d / 2)
    cos, sin = angle.cos(), angle.sin()
    x = x.double()
    a, b = (x[..., : d // 2], x[..., d // 2 :]) if halves else (x[..., 0::2], x[..., 1::2])  # (..., T, d / 2) each
    out = torch.empty_like(x)
    first, second = (slice(0, d // 2), slice(d // 2, d)) if halves else (slice(0, d, 2), slice(1, d, 2))
    out[..., first] = a * cos - b * sin
    out[..., second] = a * sin + b * cos
    return out.float()


def mixed_layouts(x: Tensor, positions: Tensor, theta: float, angles: str) -> Tensor:
    """Rotary embedding with the angles laid out for one pairing and the pairs rotated by the other: ``angles``
    "interleaved" (each angle twice in a row, repeat_interleave) with the halves rotated (rotate_half), or "halves"
    (torch.cat([angles, angles])) with neighbours rotated."""
    d = x.size(-1)
    omega = theta ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (d/2,)
    turn = positions.double()[:, None] * omega  # (T, d/2)
    turn = turn.repeat_interleave(2, dim=-1) if angles == "interleaved" else torch.cat([turn, turn], dim=-1)  # (T, d)
    xd = x.double()
    if angles == "interleaved":
        partner = torch.cat([-xd[..., d // 2 :], xd[..., : d // 2]], dim=-1)
    else:
        partner = torch.stack([-xd[..., 1::2], xd[..., 0::2]], dim=-1).flatten(-2)
    return (xd * turn.cos() + partner * turn.sin()).to(x.dtype)


# Said when an answer mixes the two layouts, by the layout of its angles; its pairing's own words are added.
MIXED_LAYOUTS = {
    "interleaved": "the angles and the pairs follow two layouts: the angles are laid out for neighbours (each twice "
    "in a row, repeat_interleave) but the halves are rotated (rotate_half); both must follow one pairing: ",
    "halves": "the angles and the pairs follow two layouts: the angles are laid out for the halves "
    "(torch.cat([a, a])) but neighbours are rotated; both must follow one pairing: ",
}


def check_rotary_embedding(fn: Callable[..., Any]) -> Verdict:
    """``fn(x)`` rotates each pair of features (2i, 2i+1) of ``x (B, n_heads, T, d_k)`` by the angle pos * omega_i,
    omega_i = 1 / 10000^(2i / d_k), pos = 0 .. T-1 along dimension -2."""
    frequencies = frequency_mistakes("10000 ** two_i", "d", "omega_i = 1 / 10000 ** (two_i / d)")

    def one(T: int, d: int, seed: int) -> str:
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(2, 3, T, d, generator=g)  # (B, n_heads, T, d_k)
        got = call(fn, x)
        reference = _rope(x)
        if not isinstance(got, Tensor) or got.device != x.device:
            same(got, reference, "the rotated tensor")  # says what is wrong: not a tensor, or on another device
        named = {
            f"it pairs {PAIRINGS['halves']}, as GPT-NeoX and Hugging Face's Llama do: this exercise pairs "
            f"{PAIRINGS['interleaved']}, as the sinusoidal table does: x[..., 0::2] with x[..., 1::2]": _rope(
                x, halves=True
            ),
            frequencies["2"]: _rope(x, exponent=2.0),
            frequencies["0.5"]: _rope(x, exponent=0.5),
            frequencies["-1"]: _rope(x, exponent=-1.0),
            frequencies["precedence"]: _rope(x, exponent=0.0),
            "it rotates the other way (by -pos * omega_i): map (a, b) to (a cos - b sin, a sin + b cos)": _rope(
                x, direction=-1.0
            ),
            "positions start at 1: the first token is position 0 and is not rotated": _rope(x, start=1),
            **{
                MIXED_LAYOUTS[layout] + f"here {PAIRINGS['interleaved']}, angle i at 2i and 2i+1": mixed_layouts(
                    x, torch.arange(T), 10000.0, layout
                )
                for layout in ("interleaved", "halves")
            },
        }
        for mistake, buggy in named.items():
            if like(got, buggy, reference):
                raise NotYet(mistake)
        same_vector = torch.randn(1, 1, 1, d, generator=g).expand(1, 1, T, d).clone()  # one vector at every position
        other_vector = torch.randn(1, 1, 1, d, generator=g).expand(1, 1, T, d).clone()
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
        same(got, reference, "the rotated tensor", atol=1e-4)
        backpropagates(fn, x, what="the rotated tensor", reference=_rope)
        return "rotary embedding is right: q_m . k_n depends on m - n only."

    def run() -> str:
        message = each_case(one, [dict(T=12, d=8, seed=0), dict(T=5, d=6, seed=1)])
        off_the_cpu("the rotated tensor", on_meta(fn, torch.randn(2, 3, 5, 8)), getattr(fn, "__name__", "it"))
        return message

    return verdict(run)


def check_alibi_bias(fn: Callable[..., Any]) -> Verdict:
    """``fn(T, slope)`` returns the ``(T, T)`` float bias added to the attention scores: ``-slope * |i - j|`` for
    query i and key j (ALiBi, Press et al. 2022, without the causal mask)."""

    def one(T: int, slope: float) -> str:
        got = call(fn, T, slope)
        i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]  # (T, 1), (1, T)
        reference = (-slope * (i - j).abs()).float()
        got = any_device(got, reference, "the bias")
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
            if like(got, buggy.float(), reference, atol=1e-5):
                raise NotYet(mistake)
        if isinstance(got, Tensor) and not got.is_floating_point():
            raise NotYet(f"the bias has dtype {got.dtype}: it is added to float scores, return a float tensor")
        same(got, reference, f"the bias for T={T}, slope={slope}")
        return "ALiBi bias is right: each step of distance costs `slope` in the score, in both directions."

    def run() -> str:
        return each_case(one, [dict(T=6, slope=0.5), dict(T=4, slope=0.25)])

    return verdict(run)
