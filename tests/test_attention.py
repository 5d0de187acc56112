"""scaled_dot_product_attention against torch.nn.functional.scaled_dot_product_attention."""

import math

import pytest
import torch
import torch.nn.functional as F
from helpers import no_empty_rows
from torch.testing import assert_close

from course_utils import MultiHeadAttention, causal_mask, scaled_dot_product_attention


@pytest.mark.parametrize("shape_q, shape_k", [((5, 8), (5, 8)), ((2, 3, 8), (2, 7, 8)), ((2, 4, 6, 16), (2, 4, 9, 16))])
def test_output_matches_torch_without_mask(shape_q, shape_k):
    q, k = torch.randn(shape_q), torch.randn(shape_k)
    v = torch.randn(*shape_k[:-1], 5)  # d_v != d_k
    out, weights = scaled_dot_product_attention(q, k, v)
    assert out.shape == (*shape_q[:-1], 5)
    assert weights.shape == (*shape_q[:-1], shape_k[-2])
    assert_close(out, F.scaled_dot_product_attention(q, k, v))


def test_output_matches_torch_with_a_broadcast_bool_mask():
    q, k, v = torch.randn(2, 4, 6, 8), torch.randn(2, 4, 9, 8), torch.randn(2, 4, 9, 8)
    mask = no_empty_rows(torch.rand(2, 1, 6, 9) > 0.5)  # broadcasts over heads
    out, _ = scaled_dot_product_attention(q, k, v, mask)
    assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))


def test_weights_are_the_softmax_of_scaled_scores():
    q, k, v = torch.randn(3, 8), torch.randn(4, 8), torch.randn(4, 2)
    _, weights = scaled_dot_product_attention(q, k, v)
    assert_close(weights, torch.softmax(q @ k.T / math.sqrt(8), dim=-1))


def test_masked_weights_are_exactly_zero_and_rows_sum_to_one():
    q, k, v = torch.randn(2, 5, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 4)
    mask = causal_mask(5)
    _, weights = scaled_dot_product_attention(q, k, v, mask)
    assert torch.all(weights[:, ~mask] == 0)
    assert_close(weights.sum(-1), torch.ones(2, 5))


def test_a_query_with_no_allowed_key_gets_zeros_not_nan_like_torch():
    q, k, v = torch.randn(3, 4, requires_grad=True), torch.randn(5, 4), torch.randn(5, 4)
    mask = torch.ones(3, 5, dtype=torch.bool)
    mask[1] = False
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    assert torch.all(weights[1] == 0) and torch.all(out[1] == 0)
    assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    out.sum().backward()
    assert torch.isfinite(q.grad).all()


def test_dropout_zeroes_some_weights_only_when_asked():
    q = k = v = torch.randn(1, 50, 8)
    out, _ = scaled_dot_product_attention(q, k, v)
    assert_close(scaled_dot_product_attention(q, k, v, dropout_p=0.0)[0], out)
    dropped, _ = scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    assert not torch.allclose(dropped, out)


def test_a_non_bool_mask_is_rejected_with_the_fix():
    q = torch.randn(3, 4)
    with pytest.raises(TypeError, match=r"True = may attend.*mask\.bool\(\).*mask == 0"):
        scaled_dot_product_attention(q, q, q, torch.ones(3, 3))


def test_a_mask_that_does_not_broadcast_is_rejected():
    q = torch.randn(2, 3, 4)
    with pytest.raises(ValueError, match="does not broadcast"):
        scaled_dot_product_attention(q, q, q, torch.ones(2, 3, dtype=torch.bool))  # (B, T): missing axes
    with pytest.raises(ValueError, match="does not broadcast"):
        scaled_dot_product_attention(q, q, q, torch.ones(5, 2, 3, 3, dtype=torch.bool))  # would grow the output


@pytest.mark.parametrize("need_weights", [False, True])
def test_multi_head_attention_refuses_a_mask_whose_batch_axis_would_meet_the_heads(need_weights):
    """A (B, T, T) mask lines B up with the heads of (B, h, T, T): with B == h it would broadcast, each sequence's
    mask applied to one head of every sequence. The module refuses a 3-axis mask whose first axis is the batch's (B > 1),
    naming both fixes; (1, T, T) and a per-head (h, T, T) with B != h broadcast as they should."""
    mha = MultiHeadAttention(16, 4)
    x = torch.randn(4, 5, 16)  # B = h = 4
    per_sequence = torch.rand(4, 5, 5) > 0.3
    with pytest.raises(ValueError, match=r"mask\[:, None\], \(B, 1, T_q, T_k\).*mask\[None\], \(1, h, T_q, T_k\)"):
        mha(x, x, x, per_sequence, need_weights=need_weights)
    per_sequence[..., 0] = True  # no query without a key
    out, _ = mha(x, x, x, per_sequence[:, None], need_weights=need_weights)
    shared, _ = mha(x, x, x, per_sequence[:1], need_weights=need_weights)  # one mask for every sequence: (1, T, T)
    torch.testing.assert_close(shared[:1], out[:1])
    x3 = torch.randn(3, 5, 16)  # B = 3 != h: a (h, T, T) mask is one per head, as broadcasting reads it
    per_head, _ = mha(x3, x3, x3, per_sequence, need_weights=need_weights)
    torch.testing.assert_close(per_head, mha(x3, x3, x3, per_sequence[None], need_weights=need_weights)[0])


def test_mismatched_shapes_are_rejected():
    with pytest.raises(ValueError, match="last dimension d_k"):
        scaled_dot_product_attention(torch.randn(3, 4), torch.randn(3, 5), torch.randn(3, 5))
    with pytest.raises(ValueError, match="same length T_k"):
        scaled_dot_product_attention(torch.randn(3, 4), torch.randn(3, 4), torch.randn(6, 4))
