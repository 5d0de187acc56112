"""Each checker accepts the reference, and names the classic mistakes."""

import math
from math import pi

import pytest
import torch
import torch.nn.functional as F
from helpers import attention_steps, verdict

from course_utils import IGNORE, MultiHeadAttention, causal_mask, padding_mask, sinusoidal_encoding
from course_utils.checks import (
    check_causal_mask,
    check_label_smoothing,
    check_layer_norm,
    check_merge_heads,
    check_padding_mask,
    check_pre_norm_layer,
    check_scaled_dot_product_attention,
    check_sinusoidal_encoding,
    check_split_heads,
)


def pre_norm(layer, x, mask):
    x = x + layer.self_attn(*(layer.norm1(x),) * 3, mask)[0]
    return x + layer.feed_forward(layer.norm2(x))


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
        (check_scaled_dot_product_attention, attention_steps),
        (check_causal_mask, causal_mask),
        (check_padding_mask, padding_mask),
        (check_split_heads, lambda x, h: x.view(x.size(0), x.size(1), h, -1).transpose(1, 2)),
        (check_sinusoidal_encoding, sinusoidal_encoding),
        (check_layer_norm, lambda x, w, b, eps: F.layer_norm(x, x.shape[-1:], w, b, eps)),
        (check_merge_heads, lambda x: x.transpose(1, 2).reshape(x.size(0), x.size(2), -1)),
        (check_pre_norm_layer, pre_norm),
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


def test_label_smoothing_without_smoothing_is_caught(capsys):
    ok, out = verdict(check_label_smoothing, lambda logits, target, eps: F.cross_entropy(logits, target), capsys)
    assert not ok and "smoothing=0.1" in out


def test_merge_heads_without_transpose_is_named(capsys):
    ok, out = verdict(check_merge_heads, lambda x: x.reshape(x.size(0), x.size(2), -1), capsys)
    assert not ok and "transpose(1, 2) back" in out


def test_post_norm_given_for_pre_norm_is_named(capsys):
    def post_norm(layer, x, mask):
        x = layer.norm1(x + layer.self_attn(x, x, x, mask)[0])
        return layer.norm2(x + layer.feed_forward(x))

    ok, out = verdict(check_pre_norm_layer, post_norm, capsys)
    assert not ok and "post-norm" in out


def test_a_prediction_needs_an_answer_from_its_choices_and_explains_each_one(capsys):
    from course_utils.checks import check_prediction
    from course_utils.checks.predictions import QUESTIONS, Question

    with pytest.raises(ValueError):
        Question(chapter="01", choices={"a": "x", "b": "y"}, answer="c", why={"a": "", "b": ""})
    with pytest.raises(KeyError):
        check_prediction("no-such-question", "a")
    for name, question in QUESTIONS.items():
        assert not check_prediction(name, None) and "make your prediction first" in capsys.readouterr().out
        assert not check_prediction(name, "z") and "is not one of the choices" in capsys.readouterr().out
        for letter, why in question.why.items():
            assert bool(check_prediction(name, f"({letter.upper()})")) == (letter == question.answer)
            assert why in capsys.readouterr().out


def test_attention_with_the_mask_convention_flipped_is_named(capsys):
    def flipped(q, k, v, mask=None):
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
        return (scores if mask is None else scores.masked_fill(mask, float("-inf"))).softmax(-1) @ v

    ok, out = verdict(check_scaled_dot_product_attention, flipped, capsys)
    assert not ok and "convention is flipped" in out


def test_pre_norm_that_normalises_the_stream_or_its_output_is_named(capsys):
    def stream_normalised(layer, x, mask):
        x = layer.norm1(x)
        x = x + layer.self_attn(x, x, x, mask)[0]
        return x + layer.feed_forward(layer.norm2(x))

    ok, out = verdict(check_pre_norm_layer, stream_normalised, capsys)
    assert not ok and "the residual stream itself is normalised" in out
    ok, out = verdict(check_pre_norm_layer, lambda layer, x, mask: layer.norm2(pre_norm(layer, x, mask)), capsys)
    assert not ok and "a norm is applied to the layer's output" in out


def test_every_checker_leaves_the_students_random_state_as_it_found_it(capsys):
    """Checkers seed their own test data; the notebook's later draws must not depend on how far a check got."""
    import random

    import numpy as np

    from course_utils import checks

    def state():
        return torch.get_rng_state(), random.getstate(), np.random.get_state()[1].copy()

    def garbage(*args, **kwargs):
        return torch.zeros(1)

    def unwritten(*args, **kwargs):
        raise NotImplementedError

    torch.manual_seed(1234), random.seed(1234), np.random.seed(1234)
    before = state()
    for name in checks.__all__:
        if not name.startswith("check_"):
            continue
        for answer in (garbage, unwritten):
            if name == "check_prediction":
                checks.check_prediction("unscaled-scores", "a")
            elif name == "check_diagnosis":
                checks.check_diagnosis(answer, "A")
            else:
                getattr(checks, name)(answer)
            after = state()
            assert torch.equal(after[0], before[0]) and after[1] == before[1], name
            assert (after[2] == before[2]).all(), name
    capsys.readouterr()


# A size left in the notebook by a cell above the exercise, and a tensor: what an answer may read by mistake.
d_k = 4
demo_queries = torch.ones(2, 5, 4)


def attention_with_the_notebooks_d_k(query, key, value, mask=None):
    scores = query @ key.transpose(-2, -1) / math.sqrt(d_k)  # d_k of the notebook, not query.size(-1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return scores.softmax(-1) @ value


def attention_through_a_helper(query, key, value, mask=None):
    return attention_with_the_notebooks_d_k(query, key, value, mask)  # the stale d_k is in the helper it calls


def causal_mask_reading_a_course_constant(size):
    return torch.ones(size, size).tril() * IGNORE  # wrong, and IGNORE is the course's: not the notebook's to blame


class SplitWithTheNotebooksTensor(torch.nn.Module):
    def forward(self, x, n_heads):
        return demo_queries.view(2, 5, n_heads, -1).transpose(1, 2)


def test_a_failed_answer_that_reads_the_notebooks_numbers_is_told_which(capsys):
    """A checker's failure names the numbers and tensors the answer read from the notebook's variables (here: the
    test module's), in the notebook and across the grader's link; an answer that reads none gets no such note, nor
    does one that passes."""
    ok, out = verdict(check_scaled_dot_product_attention, attention_with_the_notebooks_d_k, capsys)
    assert not ok and ". Your code reads d_k = 4 from the notebook rather than from its arguments" in out, out
    ok, out = verdict(check_scaled_dot_product_attention, attention_through_a_helper, capsys)
    assert not ok and "reads d_k = 4 from the notebook" in out, out
    ok, out = verdict(check_causal_mask, causal_mask_reading_a_course_constant, capsys)
    assert not ok and "from the notebook" not in out, out
    ok, out = verdict(check_split_heads, SplitWithTheNotebooksTensor(), capsys)
    assert not ok and "demo_queries (a tensor of shape (2, 5, 4))" in out, out
    ok, out = verdict(check_scaled_dot_product_attention, lambda q, k, v, mask=None: q, capsys)
    assert not ok and "from the notebook" not in out, out
    ok, out = verdict(check_scaled_dot_product_attention, attention_steps, capsys)
    assert ok and "from the notebook" not in out, out


@torch.no_grad()
def decorated_reader(x):
    return x * d_k


class OwnAttention(MultiHeadAttention):  # a subclass of the course's module, with methods of its own
    def split(self, x):
        return x.view(*x.shape[:2], -1, d_k)

    @staticmethod
    def scale():
        return pi * demo_queries.sum() + zero_d  # pi is imported: not the notebook's


zero_d = torch.tensor(0.5)


def test_the_values_read_are_found_through_decorators_subclasses_and_static_methods():
    """Whatever way the answer is written, its reads of the notebook's variables are found in its own code (with the
    module's globals it was written in), and values imported from elsewhere (math.pi, the course's IGNORE) are not."""
    from course_utils.utils import notebook_values_read

    assert notebook_values_read(decorated_reader) == {"d_k": "= 4"}
    assert notebook_values_read(OwnAttention(16, 4)) == {
        "d_k": "= 4",
        "demo_queries": "(a tensor of shape (2, 5, 4))",
        "zero_d": "= 0.5 (a 0-d tensor)",
    }
    assert notebook_values_read(lambda: pi + IGNORE) == {}
    assert notebook_values_read(MultiHeadAttention(16, 4)) == {}  # the course's own class
