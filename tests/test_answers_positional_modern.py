"""Students' answers to the exercises of chapters 03 (sinusoidal table, rotary embeddings, ALiBi) and 10 (Llama's
rotary pairing, key/value heads, one GPT-2 block's weights): right answers written in other styles pass; the classic
wrong ones fail, each with a message that names its mistake."""

import math
import re

import numpy as np
import pytest
import torch
from helpers import verdict

from course_utils.checks import (
    check_alibi_bias,
    check_expand_kv,
    check_gpt2_block_weights,
    check_rotary_embedding,
    check_rotary_halves,
    check_sinusoidal_encoding,
)

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
    ("integers", sin_int, "dtype torch.int64"),
    ("meta", lambda n, d: sin_solution(n, d).to("meta"), "the encoding is on the meta device"),
]


@pytest.mark.parametrize("fn", [sin_solution, sin_loops, sin_exp_log, sin_float64, sin_keywords],
                         ids=lambda f: f.__name__)  # fmt: skip
def test_sinusoidal_right_answers_pass(fn, capsys):
    ok, out = verdict(check_sinusoidal_encoding, fn, capsys)
    assert ok and out.startswith("✅ sinusoidal_encoding matches the paper's formula."), out


@pytest.mark.parametrize("name, fn, words", SINUSOIDAL_WRONG, ids=ids(SINUSOIDAL_WRONG))
def test_sinusoidal_wrong_answers_are_named(name, fn, words, capsys):
    ok, out = verdict(check_sinusoidal_encoding, fn, capsys)
    assert not ok and words in out, out


# --- chapter 03: rotary embeddings, pairs (2i, 2i+1) ---------------------------------------------------------------


def rope_solution(x):  # the notebook's solution
    T, d_k = x.shape[-2], x.shape[-1]
    pos = torch.arange(T, dtype=torch.float32)[:, None]  # (T, 1)
    two_i = torch.arange(0, d_k, 2, dtype=torch.float32)  # (d_k / 2,): 2i
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
    angle = torch.arange(T)[:, None] * 10000 ** (-torch.arange(0, d, 2) / d)
    cos, sin = angle.cos().repeat_interleave(2, dim=-1), angle.sin().repeat_interleave(2, dim=-1)  # (T, d)
    rotated = torch.stack([-x[..., 1::2], x[..., 0::2]], dim=-1).flatten(-2)  # (-b, a) for each pair (a, b)
    return x * cos + rotated * sin


def rope_loops(x):
    T, d = x.shape[-2:]
    columns = []
    for i in range(d // 2):
        angle = torch.arange(T, dtype=torch.float64) / 10000 ** (2 * i / d)  # i counts pairs: 2 * i is 2i
        a, b = x[..., 2 * i].double(), x[..., 2 * i + 1].double()
        columns += [a * angle.cos() - b * angle.sin(), a * angle.sin() + b * angle.cos()]
    return torch.stack(columns, dim=-1).to(x.dtype)


def rope_einsum(x):  # a (T, d/2, 2, 2) stack of rotation matrices
    T, d = x.shape[-2:]
    angle = torch.arange(T, device=x.device)[:, None] / torch.tensor(10000.0) ** (torch.arange(0, d, 2) / d)
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


ROTARY_WRONG = [
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


@pytest.mark.parametrize("fn", [rope_solution, rope_complex, rope_rotate_every_two, rope_loops, rope_einsum],
                         ids=lambda f: f.__name__)  # fmt: skip
def test_rotary_right_answers_pass(fn, capsys):
    ok, out = verdict(check_rotary_embedding, fn, capsys)
    assert ok and out.startswith("✅ rotary embedding is right: q_m . k_n depends on m - n only."), out


@pytest.mark.parametrize("name, fn, words", ROTARY_WRONG, ids=ids(ROTARY_WRONG))
def test_rotary_wrong_answers_are_named(name, fn, words, capsys):
    ok, out = verdict(check_rotary_embedding, fn, capsys)
    assert not ok and words in out, out


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


@pytest.mark.parametrize("fn", [alibi_solution, alibi_loops, alibi_cdist, alibi_float64], ids=lambda f: f.__name__)
def test_alibi_right_answers_pass(fn, capsys):
    ok, out = verdict(check_alibi_bias, fn, capsys)
    assert ok and out.startswith("✅ ALiBi bias is right"), out


@pytest.mark.parametrize("name, fn, words", ALIBI_WRONG, ids=ids(ALIBI_WRONG))
def test_alibi_wrong_answers_are_named(name, fn, words, capsys):
    ok, out = verdict(check_alibi_bias, fn, capsys)
    assert not ok and words in out, out


# --- chapter 10: rotary embeddings, Llama's pairs (i, i + d/2) ------------------------------------------------------


def rotary_solution(x, positions, theta):  # the notebook's solution
    d = x.size(-1)
    omega = theta ** (-torch.arange(0, d, 2, dtype=torch.float32) / d)  # (d/2,): arange already gives 2i
    angles = positions.float()[:, None] * omega  # (T, d/2)
    cos, sin = angles.cos(), angles.sin()
    a, b = x[..., : d // 2], x[..., d // 2 :]  # (B, h, T, d/2) each: pair i = (i, i + d/2)
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)  # (B, h, T, d)


def rotary_rotate_half(x, positions, theta):  # Hugging Face's form
    d = x.shape[-1]
    inv_freq = 1.0 / (theta ** (torch.arange(0, d, 2, device=x.device).float() / d))
    freqs = torch.einsum("t,f->tf", positions.to(x.device).float(), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)  # (T, d)
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return x * emb.cos() + torch.cat((-x2, x1), dim=-1) * emb.sin()


def rotary_float64(x, positions, theta):
    half = x.shape[-1] // 2
    i = torch.arange(half, dtype=torch.float64)
    angles = positions.double().unsqueeze(-1) / torch.tensor(theta, dtype=torch.float64) ** (2 * i / (2 * half))
    a, b = x.double().split(half, dim=-1)
    return torch.cat((a * angles.cos() - b * angles.sin(), b * angles.cos() + a * angles.sin()), -1).float()


def rotary_complex(x, positions, theta):
    d = x.size(-1)
    angles = torch.outer(positions.float(), theta ** (-torch.arange(0, d, 2).float() / d))
    z = torch.complex(x[..., : d // 2], x[..., d // 2 :]) * torch.exp(1j * angles)
    return torch.cat([z.real, z.imag], dim=-1)


def rotary(x, positions, theta, *, pairing="halves", exponent=1.0, sign=1.0, theta_=None, ignore_positions=False,
           precedence=False, d_=None):  # fmt: skip
    """A rotary embedding of pairs (i, i + d/2), with one switch per classic mistake."""
    d, theta = d_ or x.size(-1), theta_ or theta
    pos = torch.arange(x.size(-2)) if ignore_positions else positions
    two_i = torch.arange(0, d, 2, dtype=torch.float32)
    omega = (theta**-two_i) / d if precedence else theta ** (-exponent * two_i / d)
    angles = sign * pos.float()[:, None] * omega
    cos, sin = angles.cos(), angles.sin()
    if pairing == "interleaved":
        a, b = x[..., 0::2], x[..., 1::2]
        return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)
    a, b = x[..., : d // 2], x[..., d // 2 :]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)


def rotary_in_place(x, positions, theta):
    x[...] = rotary_solution(x, positions, theta)
    return x


def rotary_detached(x, positions, theta):
    return rotary_solution(x, positions, theta).detach()


def rotary_meta(x, positions, theta):
    return rotary_solution(x, positions, theta).to("meta")


def rotary_second_half_detached(x, positions, theta):
    d = x.size(-1)
    return rotary_solution(torch.cat([x[..., : d // 2], x[..., d // 2 :].detach()], dim=-1), positions, theta)


ROTARY_HALVES_WRONG = [
    ("interleaved", lambda x, p, t: rotary(x, p, t, pairing="interleaved"), "pairs neighbours (2i, 2i+1)"),
    ("positions-ignored", lambda x, p, t: rotary(x, p, t, ignore_positions=True), "positions are 0 .. T-1"),
    ("theta-10000", lambda x, p, t: rotary(x, p, t, theta_=10000.0), "theta is 10000"),
    ("theta-500000", lambda x, p, t: rotary(x, p, t, theta_=500000.0), "theta is 500000"),
    ("theta-hard-coded", lambda x, p, t: rotary(x, p, t, theta_=500.0), HARD_CODED),
    ("2i-twice", lambda x, p, t: rotary(x, p, t, exponent=2.0), "2i is applied twice"),
    ("pair-index-i", lambda x, p, t: rotary(x, p, t, exponent=0.5), "pair index i where the formula has 2i"),
    ("inverted", lambda x, p, t: rotary(x, p, t, exponent=-1.0), "the frequencies are inverted"),
    ("precedence", lambda x, p, t: rotary(x, p, t, precedence=True), "theta ** -two_i / d is (theta ** -two_i)"),
    ("other-way", lambda x, p, t: rotary(x, p, t, sign=-1.0), "rotates the other way"),
    ("d-hard-coded", lambda x, p, t: rotary(x, p, t, d_=8), HARD_CODED),
    ("in-place", rotary_in_place, IN_PLACE),
    ("detach", rotary_detached, GRADIENT),
    ("half-detached", rotary_second_half_detached, "right values but not the right gradient with respect to x"),
    ("meta", rotary_meta, DEVICE),
]


@pytest.mark.parametrize("fn", [rotary_solution, rotary_rotate_half, rotary_float64, rotary_complex],
                         ids=lambda f: f.__name__)  # fmt: skip
def test_rotary_halves_right_answers_pass(fn, capsys):
    ok, out = verdict(check_rotary_halves, fn, capsys)
    assert ok and out.startswith("✅ rotary embedding with Llama's pairing (i, i + d/2) is right."), out


@pytest.mark.parametrize("name, fn, words", ROTARY_HALVES_WRONG, ids=ids(ROTARY_HALVES_WRONG))
def test_rotary_halves_wrong_answers_are_named(name, fn, words, capsys):
    ok, out = verdict(check_rotary_halves, fn, capsys)
    assert not ok and words in out, out


def test_the_pairings_are_named_alike_in_both_chapters(capsys):
    """Chapter 03's checker names the halves pairing, chapter 10's the interleaved one, in the same words."""
    _, halves = verdict(check_rotary_embedding, lambda x: rope(x, halves=True), capsys)
    _, interleaved = verdict(check_rotary_halves, lambda x, p, t: rotary(x, p, t, pairing="interleaved"), capsys)
    _, table = verdict(check_sinusoidal_encoding, lambda n, d: sinusoidal(n, d, layout="halves"), capsys)
    for words in ("dimension i with i + d/2 (the first half with the second)", "neighbours (2i, 2i+1)"):
        assert words in halves and words in interleaved, (halves, interleaved)
    assert "(the first half with the second)" in table, table


# --- chapter 10: key/value heads ----------------------------------------------------------------------------------


def expand_solution(x, n_rep):  # the notebook's solution
    B, g, T, d = x.shape
    return x[:, :, None].expand(B, g, n_rep, T, d).reshape(B, g * n_rep, T, d)  # (B, g, n_rep, T, d) -> merged


def expand_index(x, n_rep):
    heads = torch.arange(x.size(1) * n_rep, device=x.device) // n_rep  # query head j reads key head j // n_rep
    return x[:, heads]


def expand_loop(x, n_rep):
    return torch.cat([x[:, j : j + 1] for j in range(x.shape[1]) for _ in range(n_rep)], dim=1)


def expand_stack(x, n_rep):
    return torch.stack([x] * n_rep, dim=2).flatten(1, 2)


def expand_interleave(x, n_rep):
    return torch.repeat_interleave(x, repeats=n_rep, dim=1)


def expand_in_place(x, n_rep):
    B, g, T, d = x.shape
    return x.unsqueeze_(2).expand(B, g, n_rep, T, d).reshape(B, g * n_rep, T, d)


def expand_axis_after_t(x, n_rep):
    B, g, T, d = x.shape
    return x[:, :, :, None].expand(B, g, T, n_rep, d).reshape(B, g * n_rep, T, d)  # positions mixed into heads


EXPAND_WRONG = [
    ("repeat", lambda x, n: x.repeat(1, n, 1, 1), "tiled"),
    ("expand-before-heads", lambda x, n: x[:, None].expand(-1, n, -1, -1, -1).flatten(1, 2), "tiled"),
    ("axis-after-T", expand_axis_after_t, "right after the heads"),
    ("positions-repeated", lambda x, n: x.repeat_interleave(n, dim=2), "shape"),
    ("n_rep-hard-coded", lambda x, n: x.repeat_interleave(2, dim=1), HARD_CODED),
    ("B-hard-coded", lambda x, n: x[:, :, None].expand(-1, -1, n, -1, -1).reshape(2, -1, *x.shape[2:]), HARD_CODED),
    ("in-place", expand_in_place, IN_PLACE),
    ("detach", lambda x, n: x.detach().repeat_interleave(n, dim=1), GRADIENT),
    ("meta", lambda x, n: x.repeat_interleave(n, dim=1).to("meta"), DEVICE),
]


@pytest.mark.parametrize("fn", [expand_solution, expand_index, expand_loop, expand_stack, expand_interleave],
                         ids=lambda f: f.__name__)  # fmt: skip
def test_expand_kv_right_answers_pass(fn, capsys):
    ok, out = verdict(check_expand_kv, fn, capsys)
    assert ok and out.startswith("✅ expand_kv is right: query head j reads key head j // n_rep, as in Llama."), out


@pytest.mark.parametrize("name, fn, words", EXPAND_WRONG, ids=ids(EXPAND_WRONG))
def test_expand_kv_wrong_answers_are_named(name, fn, words, capsys):
    ok, out = verdict(check_expand_kv, fn, capsys)
    assert not ok and words in out, out


# --- chapter 10: one GPT-2 block's weights --------------------------------------------------------------------------

PAIRS = [("norm1", "ln_1"), ("norm2", "ln_2"), ("self_attn.w_o", "attn.c_proj"), ("feed_forward.w_1", "mlp.c_fc"),
         ("feed_forward.w_2", "mlp.c_proj")]  # fmt: skip


def gpt2_solution(block_state):  # the notebook's solution
    state = {}
    for ours_name, theirs in [("norm1", "ln_1"), ("norm2", "ln_2"), ("self_attn.w_o", "attn.c_proj"),
                              ("feed_forward.w_1", "mlp.c_fc"), ("feed_forward.w_2", "mlp.c_proj")]:  # fmt: skip
        weight = block_state[f"{theirs}.weight"]
        state[f"{ours_name}.weight"] = weight.t() if theirs.startswith(("attn", "mlp")) else weight  # Conv1D: (in, out)
        state[f"{ours_name}.bias"] = block_state[f"{theirs}.bias"]
    qkv_weight = block_state["attn.c_attn.weight"].t()  # (d, 3d) -> (3d, d)
    qkv_bias = block_state["attn.c_attn.bias"]  # (3d,)
    for i, part in enumerate(("w_q", "w_k", "w_v")):
        state[f"self_attn.{part}.weight"] = qkv_weight.chunk(3, dim=0)[i]
        state[f"self_attn.{part}.bias"] = qkv_bias.chunk(3)[i]
    return state


def gpt2_split_then_transpose(block_state):
    d = block_state["ln_1.weight"].numel()
    out = {}
    for ours, theirs in PAIRS:
        w = block_state[theirs + ".weight"]
        out[ours + ".weight"] = w.T.contiguous() if w.dim() == 2 else w.clone()
        out[ours + ".bias"] = block_state[theirs + ".bias"].clone()
    w_q, w_k, w_v = torch.split(block_state["attn.c_attn.weight"], d, dim=1)  # (d, d) each, still (in, out)
    b_q, b_k, b_v = block_state["attn.c_attn.bias"].split(d)
    for name, w, b in (("w_q", w_q, b_q), ("w_k", w_k, b_k), ("w_v", w_v, b_v)):
        out[f"self_attn.{name}.weight"], out[f"self_attn.{name}.bias"] = w.transpose(0, 1), b
    return out


def gpt2_regex(block_state):
    table = {"ln_1": "norm1", "ln_2": "norm2", "attn.c_proj": "self_attn.w_o", "mlp.c_fc": "feed_forward.w_1",
             "mlp.c_proj": "feed_forward.w_2"}  # fmt: skip
    out = {}
    for key, value in block_state.items():
        module, kind = re.fullmatch(r"(.+)\.(weight|bias)", key).groups()
        if module == "attn.c_attn":
            parts = value.t().reshape(3, -1, value.size(0)) if kind == "weight" else value.view(3, -1)
            out.update({f"self_attn.w_{p}.{kind}": part for p, part in zip("qkv", parts)})
        else:
            out[f"{table[module]}.{kind}"] = value.t() if kind == "weight" and value.dim() == 2 else value
    return out


def gpt2_float64(block_state):
    return {name: t.double() for name, t in gpt2_solution(block_state).items()}


def gpt2(*, transpose_c_proj=True, transpose_c_fc=True, split="right", order="qkv", bias_order="qkv",
         swap_norms=False, d_model=None):  # fmt: skip
    """A GPT-2 block's state dict in the course's names, with one switch per classic mistake."""

    def fn(block_state):
        out = gpt2_solution(block_state)
        if not transpose_c_proj:
            out["self_attn.w_o.weight"] = block_state["attn.c_proj.weight"]
        if not transpose_c_fc:
            out["feed_forward.w_1.weight"] = block_state["mlp.c_fc.weight"]
        w, b = block_state["attn.c_attn.weight"], block_state["attn.c_attn.bias"]
        d = d_model or w.size(0)
        pieces = {
            "right": lambda: w.t().split(d, dim=0),
            "untransposed": lambda: w.split(d, dim=1),  # the right columns, left (in, out)
            "rows": lambda: w.split(d // 3, dim=0),  # three slices of the input dimension
            "view": lambda: w.reshape(3, d, d),  # the packed (d, 3d) read as three (d, d) blocks
        }[split]()
        biases = b.split(d)
        for p, source in zip("qkv", order):
            out[f"self_attn.w_{p}.weight"] = pieces["qkv".index(source)]
        for p, source in zip("qkv", bias_order):
            out[f"self_attn.w_{p}.bias"] = biases["qkv".index(source)]
        if swap_norms:
            for kind in ("weight", "bias"):
                out[f"norm1.{kind}"], out[f"norm2.{kind}"] = out[f"norm2.{kind}"], out[f"norm1.{kind}"]
        return out

    return fn


def gpt2_in_place(block_state):
    block_state["attn.c_attn.weight"].t_()  # transposed where it lies
    w = block_state["attn.c_attn.weight"]
    out = gpt2_solution({**block_state, "attn.c_attn.weight": w.t()})
    return out


def gpt2_meta(block_state):
    return {name: t.to("meta") for name, t in gpt2_solution(block_state).items()}


GPT2_WRONG = [
    ("c_proj-untransposed", gpt2(transpose_c_proj=False), "self_attn.w_o.weight is square"),
    ("c_fc-untransposed", gpt2(transpose_c_fc=False), "Conv1D stores its weight as (in, out)"),
    ("c_attn-untransposed", gpt2(split="untransposed"), "c_attn's pieces untransposed"),
    ("c_attn-split-rows", gpt2(split="rows"), "transpose it to (3 d_model, d_model)"),
    ("c_attn-viewed", gpt2(split="view"), "c_attn's weight"),
    ("kqv-order", gpt2(order="kqv"), "queries, keys and values are in the wrong order"),
    ("bias-order", gpt2(bias_order="qvk"), "biases of queries, keys and values are in the wrong order"),
    ("norms-swapped", gpt2(swap_norms=True), "ln_1 and ln_2 are swapped"),
    ("d_model-hard-coded", gpt2(d_model=24), HARD_CODED),
    ("in-place", gpt2_in_place, IN_PLACE),
    ("meta", gpt2_meta, "is on meta"),
]


@pytest.mark.parametrize("fn", [gpt2_solution, gpt2_split_then_transpose, gpt2_regex, gpt2_float64],
                         ids=lambda f: f.__name__)  # fmt: skip
def test_gpt2_block_right_answers_pass(fn, capsys):
    pytest.importorskip("transformers")
    ok, out = verdict(check_gpt2_block_weights, fn, capsys)
    assert ok and out.startswith("✅ the block's weights are right"), out


@pytest.mark.parametrize("name, fn, words", GPT2_WRONG, ids=ids(GPT2_WRONG))
def test_gpt2_block_wrong_answers_are_named(name, fn, words, capsys):
    pytest.importorskip("transformers")
    ok, out = verdict(check_gpt2_block_weights, fn, capsys)
    assert not ok and words in out, out
