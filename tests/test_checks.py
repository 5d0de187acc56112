"""Each checker accepts the reference, and names the classic mistakes."""

import math

import pytest
import torch
import torch.nn.functional as F

from course_utils import causal_mask, padding_mask, scaled_dot_product_attention, sinusoidal_encoding
from course_utils.checks import (
    check_causal_mask,
    check_cross_attention,
    check_feed_forward,
    check_label_smoothing,
    check_layer_norm,
    check_merge_heads,
    check_mha_parameter_count,
    check_next_token_targets,
    check_noam_lr,
    check_padding_mask,
    check_position_shift,
    check_pre_norm_layer,
    check_scaled_dot_product_attention,
    check_shift_right,
    check_sinusoidal_encoding,
    check_split_heads,
    check_target_mask,
    check_temperature,
    check_top_k,
)


def rotation(k, d_model):
    """The reference M_k: a 2x2 rotation by k * omega_i for every (sin, cos) pair."""
    M = torch.zeros(d_model, d_model)
    for j, omega in enumerate(1 / 10000 ** (torch.arange(0, d_model, 2) / d_model)):
        c, s = math.cos(k * omega), math.sin(k * omega)
        M[2 * j : 2 * j + 2, 2 * j : 2 * j + 2] = torch.tensor([[c, s], [-s, c]])
    return M


def pre_norm(layer, x, mask):
    x = x + layer.self_attn(*(layer.norm1(x),) * 3, mask)[0]
    return x + layer.feed_forward(layer.norm2(x))


def verdict(check, fn, capsys):
    ok = check(fn)
    return ok, capsys.readouterr().out


def test_an_unfinished_exercise_is_reported_not_raised(capsys):
    def todo(*args):
        raise NotImplementedError

    ok, out = verdict(check_causal_mask, todo, capsys)
    assert not ok and "not written yet" in out


def test_a_crashing_answer_is_reported_with_its_error(capsys):
    ok, out = verdict(check_causal_mask, lambda size: torch.ones(size).tril(5, 3), capsys)
    assert not ok and "raised" in out


@pytest.mark.parametrize(
    "check, reference",
    [
        (check_scaled_dot_product_attention, scaled_dot_product_attention),
        (check_causal_mask, causal_mask),
        (check_padding_mask, padding_mask),
        (check_split_heads, lambda x, h: x.view(x.size(0), x.size(1), h, -1).transpose(1, 2)),
        (check_sinusoidal_encoding, sinusoidal_encoding),
        (check_layer_norm, lambda x, w, b, eps: F.layer_norm(x, x.shape[-1:], w, b, eps)),
        (check_shift_right, lambda tgt: (tgt[:, :-1], tgt[:, 1:])),
        (check_merge_heads, lambda x: x.transpose(1, 2).reshape(x.size(0), x.size(2), -1)),
        (check_mha_parameter_count, lambda d, h: 4 * d * d + 4 * d),
        (check_position_shift, rotation),
        (check_feed_forward, lambda x, w1, b1, w2, b2: torch.relu(x @ w1.T + b1) @ w2.T + b2),
        (check_pre_norm_layer, pre_norm),
        (
            check_target_mask,
            lambda tgt, pad: (tgt != pad)[:, None, None, :] & torch.ones(tgt.size(1), tgt.size(1)).tril().bool(),
        ),
        (check_noam_lr, lambda s, d, w: d**-0.5 * min(s**-0.5, s * w**-1.5)),
        (check_next_token_targets, lambda w: (w[:, :-1], w[:, 1:])),
        (check_temperature, lambda logits, t: (logits / t).softmax(-1)),
        (check_top_k, lambda logits, k: logits.masked_fill(logits < logits.topk(k).values[:, -1:], float("-inf"))),
        (check_cross_attention, lambda attn, x, memory, mask: attn(x, memory, memory, mask)[0]),
        (check_label_smoothing, lambda logits, target, eps: F.cross_entropy(logits, target, label_smoothing=eps)),
    ],
)
def test_the_reference_passes(check, reference, capsys):
    ok, out = verdict(check, reference, capsys)
    assert ok and out.startswith("✅")


def test_attention_without_scaling_is_named(capsys):
    ok, out = verdict(
        check_scaled_dot_product_attention, lambda q, k, v, m=None: (q @ k.transpose(-2, -1)).softmax(-1) @ v, capsys
    )
    assert not ok and "sqrt(d_k)" in out


def test_attention_ignoring_the_mask_is_caught(capsys):
    def no_mask(q, k, v, mask=None):
        return ((q @ k.transpose(-2, -1)) / math.sqrt(q.size(-1))).softmax(-1) @ v

    ok, out = verdict(check_scaled_dot_product_attention, no_mask, capsys)
    assert not ok and "with a mask" in out


def test_transposed_causal_mask_is_named(capsys):
    ok, out = verdict(check_causal_mask, lambda n: torch.ones(n, n, dtype=torch.bool).triu(), capsys)
    assert not ok and "transposed" in out


def test_inverted_padding_mask_is_named(capsys):
    ok, out = verdict(check_padding_mask, lambda t, p: (t == p)[:, None, None, :], capsys)
    assert not ok and "True marks the padding" in out


def test_split_heads_with_a_plain_view_is_named(capsys):
    ok, out = verdict(check_split_heads, lambda x, h: x.view(x.size(0), h, x.size(1), -1), capsys)
    assert not ok and "mixes positions" in out


def test_positional_encoding_with_2i_twice_is_named(capsys):
    def buggy(max_len, d_model):
        pe = torch.zeros(max_len, d_model)
        pos = torch.arange(max_len)[:, None].float()
        i = torch.arange(0, d_model, 2)
        pe[:, 0::2] = torch.sin(pos / 10000 ** (2 * i / d_model))
        pe[:, 1::2] = torch.cos(pos / 10000 ** (2 * i / d_model))
        return pe

    ok, out = verdict(check_sinusoidal_encoding, buggy, capsys)
    assert not ok and "2i is applied twice" in out


def test_layer_norm_with_unbiased_std_and_eps_outside_is_named(capsys):
    def tutorial(x, w, b, eps):
        return w * (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + eps) + b

    ok, out = verdict(check_layer_norm, tutorial, capsys)
    assert not ok and "unbiased std" in out


def test_swapped_teacher_forcing_is_named(capsys):
    ok, out = verdict(check_shift_right, lambda tgt: (tgt[:, 1:], tgt[:, :-1]), capsys)
    assert not ok and "swapped" in out


def test_label_smoothing_without_smoothing_is_caught(capsys):
    ok, out = verdict(check_label_smoothing, lambda logits, target, eps: F.cross_entropy(logits, target), capsys)
    assert not ok and "smoothing=0.1" in out


def test_merge_heads_without_transpose_is_named(capsys):
    ok, out = verdict(check_merge_heads, lambda x: x.reshape(x.size(0), x.size(2), -1), capsys)
    assert not ok and "transpose(1, 2) back" in out


def test_parameter_count_without_biases_is_named(capsys):
    ok, out = verdict(check_mha_parameter_count, lambda d, h: 4 * d * d, capsys)
    assert not ok and "biases" in out


def test_transposed_position_shift_is_named(capsys):
    ok, out = verdict(check_position_shift, lambda k, d: rotation(k, d).T, capsys)
    assert not ok and "transposed" in out


def test_feed_forward_without_relu_is_named(capsys):
    ok, out = verdict(check_feed_forward, lambda x, w1, b1, w2, b2: (x @ w1.T + b1) @ w2.T + b2, capsys)
    assert not ok and "ReLU is missing" in out


def test_post_norm_given_for_pre_norm_is_named(capsys):
    def post_norm(layer, x, mask):
        x = layer.norm1(x + layer.self_attn(x, x, x, mask)[0])
        return layer.norm2(x + layer.feed_forward(x))

    ok, out = verdict(check_pre_norm_layer, post_norm, capsys)
    assert not ok and "post-norm" in out


def test_target_mask_without_padding_is_named(capsys):
    ok, out = verdict(
        check_target_mask, lambda tgt, pad: causal_mask(tgt.size(1)).expand(tgt.size(0), 1, -1, -1), capsys
    )
    assert not ok and "padded target positions" in out


def test_cross_attention_with_queries_from_the_encoder_is_named(capsys):
    ok, out = verdict(check_cross_attention, lambda attn, x, memory, mask: attn(memory, x, x)[0], capsys)
    assert not ok and "queries must come from the decoder" in out


def test_noam_lr_without_the_model_size_factor_is_named(capsys):
    ok, out = verdict(check_noam_lr, lambda s, d, w: min(s**-0.5, s * w**-1.5), capsys)
    assert not ok and "d_model ** -0.5" in out


def test_temperature_multiplied_is_named(capsys):
    ok, out = verdict(check_temperature, lambda logits, t: (logits * t).softmax(-1), capsys)
    assert not ok and "divide the logits" in out


def test_top_k_that_zeroes_instead_of_minus_infinity_is_named(capsys):
    ok, out = verdict(
        check_top_k, lambda logits, k: logits.masked_fill(logits < logits.topk(k).values[:, -1:], 0.0), capsys
    )
    assert not ok and "-inf" in out
