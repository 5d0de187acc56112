"""The checkers of ``course_utils.checks.positional``, positions (chapter 03), against students' answers: right
answers written in other styles pass, each classic mistake fails with a message that names it, and an unwritten stub
is reported as not attempted.
"""

import math

import numpy as np
import pytest
import torch
from helpers import rope_reference, rotary, verdict, verdict_rows, verdict_table_test

from course_utils.checks import (
    check_alibi_bias,
    check_rotary_embedding,
    check_rotary_halves,
    check_sinusoidal_encoding,
)
from course_utils.model.positional import sinusoidal_encoding

HARD_CODED = "is a value written into the code"
GRADIENT = "cannot be trained through"


IN_PLACE = "changed its input"
DEVICE = "is on meta"


def ids(cases):
    return [name for name, *_ in cases]


# --- chapter 03: the sinusoidal table ----------------------------------------------------------------------------


def sin_solution(max_len, d_model):  # the notebook's solution
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]  # (max_len, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)  # (d_model / 2,): 0, 2, 4, ... = 2i
    angle = pos / 10000 ** (two_i / d_model)  # (max_len, d_model / 2), by broadcasting
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(angle)  # even dimensions
    pe[:, 1::2] = torch.cos(angle)  # odd dimensions
    return pe  # (max_len, d_model)


def sin_loops(max_len, d_model):
    pe = torch.zeros(max_len, d_model)
    for pos in range(max_len):
        for i in range(0, d_model, 2):
            pe[pos, i] = math.sin(pos / 10000 ** (i / d_model))
            pe[pos, i + 1] = math.cos(pos / 10000 ** (i / d_model))
    return pe


def sin_exp_log(max_len, d_model):  # the PyTorch tutorial's form, pair index i doubled once
    i = torch.arange(d_model // 2)
    div_term = torch.exp(2 * i * (-math.log(10000.0) / d_model))
    angle = torch.arange(max_len).unsqueeze(1) * div_term
    return torch.stack([angle.sin(), angle.cos()], dim=-1).flatten(1)  # (max_len, d/2, 2) -> interleaved


def sin_float64(max_len, d_model):
    pe = np.zeros((max_len, d_model))
    angle = np.arange(max_len)[:, None] / np.power(10000.0, np.arange(0, d_model, 2) / d_model)
    pe[:, 0::2], pe[:, 1::2] = np.sin(angle), np.cos(angle)
    return torch.from_numpy(pe).float()


def sin_keywords(max_len, d_model):
    two_i = torch.arange(start=0, end=d_model, step=2, dtype=torch.float64)
    angle = torch.outer(torch.arange(end=max_len, dtype=torch.float64), torch.pow(10000.0, -two_i / d_model))
    return torch.cat([angle.sin()[..., None], angle.cos()[..., None]], dim=-1).reshape(max_len, d_model).float()


def sinusoidal(max_len, d_model, *, exponent=1.0, start=0, layout="interleaved", precedence=False, d=None, T=None):
    """The table, with one switch per classic mistake."""
    T, d = T or max_len, d or d_model
    pos = torch.arange(start, start + T, dtype=torch.float32)[:, None]
    two_i = torch.arange(0, d, 2, dtype=torch.float32)
    angle = pos / (10000**two_i / d) if precedence else pos / 10000 ** (exponent * two_i / d)
    sin, cos = angle.sin(), angle.cos()
    if layout == "halves":
        return torch.cat([sin, cos], dim=1)
    if layout == "cos halves":
        return torch.cat([cos, sin], dim=1)
    first, second = (cos, sin) if layout == "swapped" else (sin, cos)
    return torch.stack([first, second], dim=-1).flatten(1)


def sin_inline_precedence(max_len, d_model):  # the typo written in one line
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)
    angle = pos / 10000**two_i / d_model
    return torch.stack([angle.sin(), angle.cos()], dim=-1).flatten(1)


def sin_own_index(max_len, d_model):  # every column j with 10000 ** (j / d_model)
    pe = torch.zeros(max_len, d_model)
    for pos in range(max_len):
        for j in range(d_model):
            angle = pos / 10000 ** (j / d_model)
            pe[pos, j] = math.sin(angle) if j % 2 == 0 else math.cos(angle)
    return pe


def sin_int(max_len, d_model):
    return (sin_solution(max_len, d_model) * 1000).long()


SINUSOIDAL_WRONG = [
    ("2i-twice", lambda n, d: sinusoidal(n, d, exponent=2.0), "2i is applied twice"),
    ("pair-index-i", lambda n, d: sinusoidal(n, d, exponent=0.5), "pair index i where the formula has 2i"),
    ("inverted", lambda n, d: sinusoidal(n, d, exponent=-1.0), "the frequencies are inverted"),
    ("precedence", lambda n, d: sinusoidal(n, d, precedence=True), "10000 ** two_i / d_model is (10000 ** two_i)"),
    ("sin-cos-swapped", lambda n, d: sinusoidal(n, d, layout="swapped"), "sin and cos are swapped"),
    ("halves", lambda n, d: sinusoidal(n, d, layout="halves"), "first half and the cosines the second"),
    ("cos-sin-halves", lambda n, d: sinusoidal(n, d, layout="cos halves"), "first half"),
    ("positions-from-1", lambda n, d: sinusoidal(n, d, start=1), "positions start at 1"),
    ("d-hard-coded", lambda n, d: sinusoidal(n, d, d=16), HARD_CODED),
    ("max-len-hard-coded", lambda n, d: sinusoidal(n, d, T=50), HARD_CODED),
    ("inline-precedence", sin_inline_precedence, "(pos / 10000 ** two_i) / d_model"),
    ("own-index-exponent", sin_own_index, "each column uses its own index j"),
    ("float16", lambda n, d: sin_solution(n, d).half(), "build it in float32"),
    ("integers", sin_int, "dtype torch.int64"),
    ("meta", lambda n, d: sin_solution(n, d).to("meta"), "the encoding is on the meta device"),
]


# --- chapter 03: rotary embeddings, pairs (2i, 2i+1) ---------------------------------------------------------------


def rope_solution(x):  # the notebook's solution
    T, d_k = x.shape[-2], x.shape[-1]
    pos = torch.arange(T, dtype=torch.float32, device=x.device)[:, None]  # (T, 1)
    two_i = torch.arange(0, d_k, 2, dtype=torch.float32, device=x.device)  # (d_k / 2,): 2i
    angle = pos / 10000 ** (two_i / d_k)  # (T, d_k / 2): m * omega_i
    cos, sin = torch.cos(angle), torch.sin(angle)
    a, b = x[..., 0::2], x[..., 1::2]  # (B, n_heads, T, d_k / 2) each: the pairs' two features
    out = torch.empty_like(x)
    out[..., 0::2] = a * cos - b * sin
    out[..., 1::2] = a * sin + b * cos
    return out  # (B, n_heads, T, d_k)


def rope_complex(x):  # Meta's original Llama code: pairs as complex numbers
    T, d = x.shape[-2:]
    freqs = 1.0 / (10000 ** (torch.arange(0, d, 2, device=x.device)[: d // 2].float() / d))
    angles = torch.outer(torch.arange(T, device=x.device).float(), freqs)
    z = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(z * torch.polar(torch.ones_like(angles), angles)).flatten(-2).type_as(x)


def rope_rotate_every_two(x):  # GPT-J's form: x * cos + rotate_every_two(x) * sin
    T, d = x.size(-2), x.size(-1)
    angle = torch.arange(T, device=x.device)[:, None] * 10000 ** (-torch.arange(0, d, 2, device=x.device) / d)
    cos, sin = angle.cos().repeat_interleave(2, dim=-1), angle.sin().repeat_interleave(2, dim=-1)  # (T, d)
    rotated = torch.stack([-x[..., 1::2], x[..., 0::2]], dim=-1).flatten(-2)  # (-b, a) for each pair (a, b)
    return x * cos + rotated * sin


def rope_loops(x):
    T, d = x.shape[-2:]
    columns = []
    for i in range(d // 2):
        angle = torch.arange(T, dtype=torch.float64, device=x.device) / 10000 ** (
            2 * i / d
        )  # i counts pairs: 2 * i is 2i
        a, b = x[..., 2 * i].double(), x[..., 2 * i + 1].double()
        columns += [a * angle.cos() - b * angle.sin(), a * angle.sin() + b * angle.cos()]
    return torch.stack(columns, dim=-1).to(x.dtype)


def rope_einsum(x):  # a (T, d/2, 2, 2) stack of rotation matrices
    T, d = x.shape[-2:]
    angle = torch.arange(T, device=x.device)[:, None] / torch.tensor(10000.0) ** (
        torch.arange(0, d, 2, device=x.device) / d
    )
    c, s = angle.cos(), angle.sin()
    rotation = torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)  # (T, d/2, 2, 2)
    pairs = x.unflatten(-1, (d // 2, 2))  # (B, h, T, d/2, 2)
    return torch.einsum("tpij,...tpj->...tpi", rotation, pairs).flatten(-2)


def rope(x, *, exponent=1.0, halves=False, direction=1.0, start=0, precedence=False, T=None, d=None):
    """A rotary embedding of pairs (2i, 2i+1), with one switch per classic mistake."""
    T, d = T or x.size(-2), d or x.size(-1)
    pos = torch.arange(start, start + T, dtype=torch.float32)[:, None]
    two_i = torch.arange(0, d, 2, dtype=torch.float32)
    angle = direction * (pos / (10000**two_i / d) if precedence else pos / 10000 ** (exponent * two_i / d))
    cos, sin = angle.cos(), angle.sin()
    if halves:
        a, b = x[..., : d // 2], x[..., d // 2 :]
        return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)


def rope_in_place(x):
    a, b = rope_solution(x)[..., 0::2], rope_solution(x)[..., 1::2]
    x[..., 0::2], x[..., 1::2] = a, b  # the caller's queries overwritten
    return x


def rope_detached(x):
    return rope_solution(x.detach())


def rope_no_grad(x):
    with torch.no_grad():
        return rope_solution(x)


def rope_numpy(x):
    return torch.from_numpy(rope_float64_numpy(x.numpy())).float()


def rope_float64_numpy(x):
    T, d = x.shape[-2:]
    angle = np.arange(T)[:, None] / 10000 ** (np.arange(0, d, 2) / d)
    out = np.empty_like(x, dtype=np.float64)
    a, b = x[..., 0::2], x[..., 1::2]
    out[..., 0::2], out[..., 1::2] = a * np.cos(angle) - b * np.sin(angle), a * np.sin(angle) + b * np.cos(angle)
    return out


def rope_meta(x):
    out = torch.empty(x.shape, device="meta")  # the device not taken from x
    out[..., 0::2], out[..., 1::2] = rope_solution(x)[..., 0::2], rope_solution(x)[..., 1::2]
    return out


def rope_no_sin_term(x):  # each feature scaled by cos only: not a rotation
    T, d = x.shape[-2:]
    angle = torch.arange(T)[:, None] / 10000 ** (torch.arange(0, d, 2) / d)
    return x * angle.cos().repeat_interleave(2, dim=-1)


def rope_second_half_detached(x):
    """The second feature of each pair taken out of the graph: right values, part of the gradient lost."""
    return rope_solution(torch.stack([x[..., 0::2], x[..., 1::2].detach()], dim=-1).flatten(-2))


def rope_mixed(angles):
    """Neighbours rotated with the halves' angles (torch.cat), or the halves rotated with interleaved angles."""

    def fn(x):
        T, d = x.shape[-2], x.shape[-1]
        freqs = torch.arange(T).float()[:, None] / 10000 ** (torch.arange(0, d, 2).float() / d)  # (T, d/2)
        if angles == "halves":
            emb = torch.cat([freqs, freqs], dim=-1)
            rotated = torch.stack([-x[..., 1::2], x[..., 0::2]], dim=-1).flatten(-2)
        else:
            emb = freqs.repeat_interleave(2, dim=-1)
            rotated = torch.cat([-x[..., d // 2 :], x[..., : d // 2]], dim=-1)
        return x * emb.cos() + rotated * emb.sin()

    return fn


def rope_without_device(x):
    """Right on the CPU; its angles are made there whatever x's device (no device=)."""
    T, d = x.shape[-2], x.shape[-1]
    angle = torch.arange(T)[:, None] / 10000 ** (torch.arange(0, d, 2) / d)  # (T, d/2), on the CPU
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * angle.cos() - b * angle.sin(), a * angle.sin() + b * angle.cos()], dim=-1).flatten(-2)


ROTARY_WRONG = [
    ("arange-without-device", rope_without_device, "A tensor made without device= is made on the CPU"),
    ("halves-angles-neighbours", rope_mixed("halves"), "the angles and the pairs follow two layouts"),
    ("interleaved-angles-rotate-half", rope_mixed("interleaved"), "the angles and the pairs follow two layouts"),
    ("halves", lambda x: rope(x, halves=True), "pairs dimension i with i + d/2"),
    ("2i-twice", lambda x: rope(x, exponent=2.0), "2i is applied twice"),
    ("pair-index-i", lambda x: rope(x, exponent=0.5), "pair index i where the formula has 2i"),
    ("inverted", lambda x: rope(x, exponent=-1.0), "the frequencies are inverted"),
    ("precedence", lambda x: rope(x, precedence=True), "10000 ** two_i / d is (10000 ** two_i)"),
    ("other-way", lambda x: rope(x, direction=-1.0), "rotates the other way"),
    ("positions-from-1", lambda x: rope(x, start=1), "positions start at 1"),
    ("T-hard-coded", lambda x: rope(x, T=12), HARD_CODED),
    ("d-hard-coded", lambda x: rope(x, d=8), HARD_CODED),
    ("in-place", rope_in_place, IN_PLACE),
    ("detach", rope_detached, GRADIENT),
    ("no-grad", rope_no_grad, GRADIENT),
    ("numpy", rope_numpy, GRADIENT),
    ("half-detached", rope_second_half_detached, "right values but not the right gradient with respect to x"),
    ("meta", rope_meta, DEVICE),
    ("cos-only", rope_no_sin_term, "the scores depend on the absolute positions"),
]


# --- chapter 03: ALiBi -----------------------------------------------------------------------------------------------


def alibi_solution(T, slope):  # the notebook's solution
    distance = torch.arange(T)[:, None] - torch.arange(T)[None, :]  # (T, T): i - j
    return -slope * distance.abs().float()  # (T, T)


def alibi_loops(T, slope):
    return torch.tensor([[-slope * abs(i - j) for j in range(T)] for i in range(T)])


def alibi_cdist(T, slope):
    positions = torch.arange(T, dtype=torch.float32)[:, None]
    return torch.cdist(positions, positions, p=1) * -slope


def alibi_float64(T, slope):
    i = torch.arange(T, dtype=torch.float64)
    return (-torch.tensor(slope) * (i.unsqueeze(1) - i.unsqueeze(0)).abs()).to(torch.float32)


def alibi(T, slope, *, sign=-1.0, absolute=True, T_fixed=None):
    T = T_fixed or T
    distance = torch.arange(T)[:, None] - torch.arange(T)[None, :]
    return sign * slope * (distance.abs() if absolute else distance).float()


def alibi_long(T, slope):
    bias = torch.zeros(T, T, dtype=torch.long)  # the slope's fractions cut off when written in
    for i in range(T):
        for j in range(T):
            bias[i, j] = -slope * abs(i - j)
    return bias


ALIBI_WRONG = [
    ("sign-flipped", lambda T, s: alibi(T, s, sign=1.0), "the sign is flipped"),
    ("no-abs", lambda T, s: alibi(T, s, absolute=False), "the absolute value is missing"),
    ("no-abs-j-minus-i", lambda T, s: -alibi(T, s, absolute=False), "the absolute value is missing"),
    ("slope-hard-coded", lambda T, s: alibi(T, 0.5), HARD_CODED),
    ("slope-missing", lambda T, s: alibi(T, 1.0), "the slope is missing"),
    ("divided", lambda T, s: alibi(T, 1 / s), "divided by the slope"),
    ("T-hard-coded", lambda T, s: alibi(T, s, T_fixed=6), HARD_CODED),
    ("integers", alibi_long, "dtype torch.int64"),
    ("meta", lambda T, s: alibi(T, s).to("meta"), "the bias is on the meta device"),
]


def test_the_pairings_are_named_alike_in_both_chapters(capsys):
    """Chapter 03's checker names the halves pairing, chapter 10's the interleaved one, in the same words."""
    _, halves = verdict(check_rotary_embedding, lambda x: rope(x, halves=True), capsys)
    _, interleaved = verdict(check_rotary_halves, lambda x, p, t: rotary(x, p, t, pairing="interleaved"), capsys)
    _, table = verdict(check_sinusoidal_encoding, lambda n, d: sinusoidal(n, d, layout="halves"), capsys)
    for words in ("dimension i with i + d/2 (the first half with the second)", "neighbours (2i, 2i+1)"):
        assert words in halves and words in interleaved, (halves, interleaved)
    assert "(the first half with the second)" in table, table


def alibi_reference(T, slope, sign=-1.0, absolute=True):
    distance = torch.arange(T)[:, None] - torch.arange(T)[None, :]  # (T, T): i - j
    return sign * slope * (distance.abs() if absolute else distance).float()


# --- 03: the sinusoidal table ------------------------------------------------------------------------------------


def test_sines_and_cosines_in_two_halves_are_named(capsys):
    def halves(max_len, d_model):
        pe = sinusoidal_encoding(max_len, d_model)
        return torch.cat([pe[:, 0::2], pe[:, 1::2]], dim=1)

    ok, out = verdict(check_sinusoidal_encoding, halves, capsys)
    assert not ok and "interleave" in out


# --- 03: rotary embeddings ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "variant, named",
    [
        (dict(halves=True), "i + d/2"),
        (dict(exponent=2.0), "2i is applied twice"),
        (dict(exponent=0.5), "pair index i"),
        (dict(exponent=-1.0), "frequencies are inverted"),
        (dict(direction=-1.0), "other way"),
        (dict(start=1), "positions start at 1"),
    ],
)
def test_rotary_embedding_mistakes_are_named(variant, named, capsys):
    ok, out = verdict(check_rotary_embedding, lambda x: rope_reference(x, **variant), capsys)
    assert not ok and named in out, out


def test_rotary_embedding_that_depends_on_absolute_positions_is_caught(capsys):
    def added(x):  # adds the sinusoidal table instead of rotating
        return x + sinusoidal_encoding(x.size(-2), x.size(-1))

    ok, out = verdict(check_rotary_embedding, added, capsys)
    assert not ok and "absolute positions" in out


def test_rotary_embedding_that_changes_lengths_is_caught(capsys):
    ok, out = verdict(check_rotary_embedding, lambda x: 2 * rope_reference(x), capsys)
    assert not ok and "lengths changed" in out


# --- 03: ALiBi ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fn, named",
    [
        (lambda T, s: alibi_reference(T, s, sign=1.0), "sign is flipped"),
        (lambda T, s: alibi_reference(T, s, absolute=False), "keys after the query"),
        (lambda T, s: -alibi_reference(T, s, absolute=False), "keys before the query"),
        (lambda T, s: alibi_reference(T, 1 / s), "divided by the slope"),
        (lambda T, s: alibi_reference(T, 1.0), "slope is missing"),
    ],
)
def test_alibi_mistakes_are_named(fn, named, capsys):
    ok, out = verdict(check_alibi_bias, fn, capsys)
    assert not ok and named in out, out


def test_alibi_as_an_integer_tensor_is_named(capsys):
    ok, out = verdict(check_alibi_bias, lambda T, s: (-2 * alibi_reference(T, s)).long(), capsys)
    assert not ok and "dtype" in out


# --- the verdict table: every answer above, the verdict it must get and the words its message must hold ---------

VERDICTS = [
    *verdict_rows(
        check_sinusoidal_encoding,
        [sin_solution, sin_loops, sin_exp_log, sin_float64, sin_keywords],
        SINUSOIDAL_WRONG,
        says="✅ sinusoidal_encoding matches the paper's formula.",
    ),
    *verdict_rows(
        check_rotary_embedding,
        [rope_solution, rope_complex, rope_rotate_every_two, rope_loops, rope_einsum],
        ROTARY_WRONG,
        says="✅ rotary embedding is right: q_m . k_n depends on m - n only.",
    ),
    *verdict_rows(
        check_alibi_bias,
        [alibi_solution, alibi_loops, alibi_cdist, alibi_float64],
        ALIBI_WRONG,
        says="✅ ALiBi bias is right",
    ),
]


test_each_answer_gets_its_verdict = verdict_table_test(VERDICTS)
