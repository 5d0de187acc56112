"""Chapters 03-04: each new checker accepts the reference, names the classic mistakes, and reports an unwritten
stub as not attempted; each prediction accepts its answer and explains every wrong one."""

import pytest
import torch
import torch.nn.functional as F
from helpers import todo, verdict

from course_utils.checks import (
    check_alibi_bias,
    check_encoder_layer,
    check_pre_norm_layer,
    check_rms_norm,
    check_rotary_embedding,
    check_sinusoidal_encoding,
)
from course_utils.checks.predictions import QUESTIONS
from course_utils.model.positional import sinusoidal_encoding

# --- references and their classic variants --------------------------------------------------------------------


def rope(x, exponent=1.0, halves=False, direction=1.0, start=0):
    """Rotary embedding of x (..., T, d): pairs (2i, 2i+1), or (i, i + d/2) with ``halves``."""
    T, d = x.shape[-2:]
    pos = torch.arange(start, start + T, dtype=torch.float32)[:, None]  # (T, 1)
    two_i = torch.arange(0, d, 2, dtype=torch.float32)  # (d / 2,)
    angle = direction * pos / 10000 ** (exponent * two_i / d)  # (T, d / 2)
    cos, sin = angle.cos(), angle.sin()
    first, second = (slice(0, d // 2), slice(d // 2, d)) if halves else (slice(0, d, 2), slice(1, d, 2))
    a, b = x[..., first], x[..., second]
    out = torch.empty_like(x)
    out[..., first], out[..., second] = a * cos - b * sin, a * sin + b * cos
    return out


def alibi(T, slope, sign=-1.0, absolute=True):
    distance = torch.arange(T)[:, None] - torch.arange(T)[None, :]  # (T, T): i - j
    return sign * slope * (distance.abs() if absolute else distance).float()


def post_norm(layer, x, mask, *, pre=False, residual=True, use_mask=True, swap=False):
    n1, n2 = (layer.norm2, layer.norm1) if swap else (layer.norm1, layer.norm2)
    attend = lambda h: layer.self_attn(h, h, h, mask if use_mask else None)[0]  # noqa: E731
    if pre:
        x = x + attend(n1(x))
        return x + layer.feed_forward(n2(x))
    h = n1((x if residual else 0) + attend(x))
    return n2((h if residual else 0) + layer.feed_forward(h))


def rms_norm(x, weight, eps):
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


# --- every checker: the reference passes, a stub is not attempted ----------------------------------------------

REFERENCES = [
    (check_sinusoidal_encoding, sinusoidal_encoding),
    (check_rotary_embedding, rope),
    (check_alibi_bias, alibi),
    (check_encoder_layer, post_norm),
    (check_pre_norm_layer, lambda layer, x, mask: post_norm(layer, x, mask, pre=True)),
    (check_rms_norm, rms_norm),
]


@pytest.mark.parametrize("check, reference", REFERENCES, ids=lambda v: getattr(v, "__name__", ""))
def test_the_reference_passes(check, reference, capsys):
    ok, out = verdict(check, reference, capsys)
    assert ok and out.startswith("✅"), out


@pytest.mark.parametrize("check", [check for check, _ in REFERENCES], ids=lambda c: c.__name__)
def test_an_unwritten_stub_is_not_attempted(check, capsys):
    ok, out = verdict(check, todo, capsys)
    assert not ok and "not written yet" in out


def test_the_encoder_layer_checker_compares_with_torch(capsys):
    ok, out = verdict(check_encoder_layer, post_norm, capsys)
    assert ok and "nn.TransformerEncoderLayer" in out


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
    ok, out = verdict(check_rotary_embedding, lambda x: rope(x, **variant), capsys)
    assert not ok and named in out, out


def test_rotary_embedding_that_depends_on_absolute_positions_is_caught(capsys):
    def added(x):  # adds the sinusoidal table instead of rotating
        return x + sinusoidal_encoding(x.size(-2), x.size(-1))

    ok, out = verdict(check_rotary_embedding, added, capsys)
    assert not ok and "absolute positions" in out


def test_rotary_embedding_that_changes_lengths_is_caught(capsys):
    ok, out = verdict(check_rotary_embedding, lambda x: 2 * rope(x), capsys)
    assert not ok and "lengths changed" in out


# --- 03: ALiBi ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fn, named",
    [
        (lambda T, s: alibi(T, s, sign=1.0), "sign is flipped"),
        (lambda T, s: alibi(T, s, absolute=False), "keys after the query"),
        (lambda T, s: -alibi(T, s, absolute=False), "keys before the query"),
        (lambda T, s: alibi(T, 1 / s), "divided by the slope"),
        (lambda T, s: alibi(T, 1.0), "slope is missing"),
    ],
)
def test_alibi_mistakes_are_named(fn, named, capsys):
    ok, out = verdict(check_alibi_bias, fn, capsys)
    assert not ok and named in out, out


def test_alibi_as_an_integer_tensor_is_named(capsys):
    ok, out = verdict(check_alibi_bias, lambda T, s: (-2 * alibi(T, s)).long(), capsys)
    assert not ok and "dtype" in out


# --- 04: the encoder layer ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "variant, named",
    [
        (dict(pre=True), "this is pre-norm"),
        (dict(residual=False), "residual connections are missing"),
        (dict(use_mask=False), "mask is ignored"),
        (dict(swap=True), "norm1 and norm2 are swapped"),
    ],
)
def test_encoder_layer_mistakes_are_named(variant, named, capsys):
    ok, out = verdict(check_encoder_layer, lambda layer, x, mask: post_norm(layer, x, mask, **variant), capsys)
    assert not ok and named in out, out


def test_encoder_layer_with_one_residual_missing_is_named(capsys):
    def second_missing(layer, x, mask):
        h = layer.norm1(x + layer.self_attn(x, x, x, mask)[0])
        return layer.norm2(layer.feed_forward(h))

    ok, out = verdict(check_encoder_layer, second_missing, capsys)
    assert not ok and "second residual connection is missing" in out


def test_encoder_layer_whose_ffn_reads_x_is_named(capsys):
    def reads_x(layer, x, mask):
        h = layer.norm1(x + layer.self_attn(x, x, x, mask)[0])
        return layer.norm2(h + layer.feed_forward(x))

    ok, out = verdict(check_encoder_layer, reads_x, capsys)
    assert not ok and "feed-forward network reads x" in out


def test_encoder_layer_adding_the_attention_tuple_gets_a_hint(capsys):
    def tuple_added(layer, x, mask):
        return layer.norm1(x + layer.self_attn(x, x, x, mask))

    ok, out = verdict(check_encoder_layer, tuple_added, capsys)
    assert not ok and "take its [0]" in out


def test_pre_norm_layer_ignoring_the_mask_is_named(capsys):
    ok, out = verdict(
        check_pre_norm_layer, lambda layer, x, mask: post_norm(layer, x, mask, pre=True, use_mask=False), capsys
    )
    assert not ok and "mask is ignored" in out


# --- 04: RMSNorm -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fn, named",
    [
        (lambda x, w, eps: F.layer_norm(x, x.shape[-1:], w, None, eps), "mean is subtracted"),
        (lambda x, w, eps: x / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + eps) * w, "variance is used"),
        (lambda x, w, eps: x / (x.pow(2).mean(-1, keepdim=True).sqrt() + eps) * w, "eps is outside"),
        (lambda x, w, eps: x / torch.sqrt(x.pow(2).sum(-1, keepdim=True) / (x.size(-1) - 1) + eps) * w, "d - 1"),
        (lambda x, w, eps: rms_norm(x, torch.ones_like(w), eps), "scale is missing"),
    ],
)
def test_rms_norm_mistakes_are_named(fn, named, capsys):
    ok, out = verdict(check_rms_norm, fn, capsys)
    assert not ok and named in out, out


# --- predictions -------------------------------------------------------------------------------------------------

OURS = ["shuffled-tokens", "post-norm-warmup"]


def test_our_questions_belong_to_our_chapters():
    assert QUESTIONS["shuffled-tokens"].chapter == "03" and QUESTIONS["post-norm-warmup"].chapter == "04"
