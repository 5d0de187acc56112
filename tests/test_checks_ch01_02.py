"""Chapters 01 and 02: the transfer exercises' checkers accept the reference and name each classic mistake;
the predictions explain every wrong letter."""

import math

import pytest
import torch
import torch.nn.functional as F
from helpers import todo, verdict

from course_utils import scaled_dot_product_attention
from course_utils.checks import (
    check_attention_with_bias,
    check_fused_head_projections,
    check_grouped_query_attention,
    check_masked_mean,
    check_scaled_dot_product_attention,
    check_sliding_window_mask,
)


def sliding_window(size, window):
    i, j = torch.arange(size)[:, None], torch.arange(size)
    return (j <= i) & (j > i - window)


def masked_mean(x, mask):
    keep = mask.unsqueeze(-1).float()  # (B, T, 1)
    return (x * keep).sum(dim=1) / keep.sum(dim=1)


def biased(q, k, v, bias):
    return ((q @ k.transpose(-2, -1)) / math.sqrt(q.size(-1)) + bias).softmax(-1) @ v


def fused(heads):
    return torch.cat(heads, dim=1).T


def gqa(q, k, v):
    group = q.size(1) // k.size(1)
    return scaled_dot_product_attention(q, k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1))


CHECKS = [
    (check_sliding_window_mask, sliding_window),
    (check_masked_mean, masked_mean),
    (check_attention_with_bias, biased),
    (check_fused_head_projections, fused),
    (check_grouped_query_attention, gqa),
]


@pytest.mark.parametrize("check, reference", CHECKS)
def test_the_reference_passes(check, reference, capsys):
    ok, out = verdict(check, reference, capsys)
    assert ok and out.startswith("✅")


@pytest.mark.parametrize("check", [check for check, _ in CHECKS])
def test_an_unwritten_stub_is_not_attempted(check, capsys):
    ok, out = verdict(check, todo, capsys)
    assert not ok and "not written yet" in out


def test_the_attention_checker_says_it_compared_with_pytorch(capsys):
    ok, out = verdict(check_scaled_dot_product_attention, scaled_dot_product_attention, capsys)
    assert ok and "F.scaled_dot_product_attention" in out


@pytest.mark.parametrize(
    "buggy, named",
    [
        (lambda n, w: sliding_window(n, w + 1), "off by one"),
        (lambda n, w: sliding_window(n, w - 1), "sees only"),
        (lambda n, w: (torch.arange(n)[:, None] - torch.arange(n)).abs() < w, "future is allowed"),
        (lambda n, w: sliding_window(n, w).T, "transposed"),
        (lambda n, w: torch.ones(n, n, dtype=torch.bool).tril(), "window="),
    ],
)  # fmt: skip
def test_sliding_window_mistakes_are_named(buggy, named, capsys):
    ok, out = verdict(check_sliding_window_mask, buggy, capsys)
    assert not ok and named in out


def test_sliding_window_off_by_one_says_how_many_positions(capsys):
    _, out = verdict(check_sliding_window_mask, lambda n, w: sliding_window(n, w + 1), capsys)
    assert "sees 4 positions" in out


@pytest.mark.parametrize(
    "buggy, named",
    [
        (lambda x, m: x.mean(dim=1), "padding is averaged in"),
        (lambda x, m: (x * m.unsqueeze(-1)).sum(dim=1) / x.size(1), "divided by T"),
        (lambda x, m: (x * m.unsqueeze(-1)).sum(dim=1), "a sum, not a mean"),
        (lambda x, m: masked_mean(x, ~m), "mean over the padding"),
        (lambda x, m: masked_mean(x, m)[:, None], "keepdim"),
    ],
)
def test_masked_mean_mistakes_are_named(buggy, named, capsys):
    ok, out = verdict(check_masked_mean, buggy, capsys)
    assert not ok and named in out


@pytest.mark.parametrize(
    "buggy, named",
    [
        (lambda q, k, v, b: ((q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))).softmax(-1) + b) @ v, "after the softmax"),
        (lambda q, k, v, b: ((q @ k.transpose(-2, -1) + b) / math.sqrt(q.size(-1))).softmax(-1) @ v, "divided by sqrt"),
        (lambda q, k, v, b: scaled_dot_product_attention(q, k, v)[0], "ignored"),
        (lambda q, k, v, b: (q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)) * b).softmax(-1) @ v, "multiplies"),
    ],
)  # fmt: skip
def test_attention_bias_mistakes_are_named(buggy, named, capsys):
    ok, out = verdict(check_attention_with_bias, buggy, capsys)
    assert not ok and named in out


@pytest.mark.parametrize(
    "buggy, named",
    [
        (lambda heads: torch.cat(heads, dim=1), "(out, in)"),
        (lambda heads: torch.stack(heads, dim=-1).flatten(1).T, "interleaved"),
        (lambda heads: torch.cat(heads, dim=0), "input axis"),
        (lambda heads: torch.cat([w.T for w in heads], dim=1), "input axis"),
    ],
)
def test_fused_projection_mistakes_are_named(buggy, named, capsys):
    ok, out = verdict(check_fused_head_projections, buggy, capsys)
    assert not ok and named in out


def test_grouped_query_attention_tiled_with_repeat_is_named(capsys):
    def tiled(q, k, v):
        group = q.size(1) // k.size(1)
        return scaled_dot_product_attention(q, k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1))

    ok, out = verdict(check_grouped_query_attention, tiled, capsys)
    assert not ok and "repeat_interleave" in out


def test_grouped_query_attention_with_one_shared_head_is_named(capsys):
    def first_only(q, k, v):
        return scaled_dot_product_attention(q, k[:, :1], v[:, :1])

    ok, out = verdict(check_grouped_query_attention, first_only, capsys)
    assert not ok and "multi-query" in out


def test_the_grouped_query_reference_is_pytorchs():
    q, k, v = torch.randn(2, 6, 3, 8), torch.randn(2, 2, 5, 8), torch.randn(2, 2, 5, 8)
    torch.testing.assert_close(gqa(q, k, v)[0], F.scaled_dot_product_attention(q, k, v, enable_gqa=True))
