"""The checkers of ``course_utils.checks.attention``, attention (chapters 01-02), against students' answers: right
answers written in other styles pass, each classic mistake fails with a message that names it, and an unwritten stub
is reported as not attempted.
"""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers import todo, verdict, verdict_rows, verdict_table_test

from course_utils import scaled_dot_product_attention
from course_utils.checks import (
    check_attention_with_bias,
    check_fused_head_projections,
    check_grouped_query_attention,
    check_masked_mean,
    check_merge_heads,
    check_scaled_dot_product_attention,
    check_sliding_window_mask,
    check_split_heads,
)


def cases(*answers):
    """pytest.param(fn, ...) with the name the answer has in this module as its id."""
    names = {id(value): name for name, value in globals().items()}
    return [pytest.param(*answer, id=names.get(id(answer[0]), answer[0].__name__)) for answer in answers]


# ---------------------------------------------------------------------------------------------------------------------
# Chapter 01, exercise: attention(query, key, value, mask=None)


def attention_solution(query, key, value, mask=None):  # the notebook's solution
    d_k = query.size(-1)
    scores = query @ key.transpose(-2, -1) / math.sqrt(d_k)  # (..., T_q, T_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)  # (..., T_q, T_k)
    return weights @ value, weights  # (..., T_q, d_v), (..., T_q, T_k)


def attention_einsum_minus_1e9(query, key, value, mask=None):
    scores = torch.einsum("...qd,...kd->...qk", query, key) / query.shape[-1] ** 0.5
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    return torch.einsum("...qk,...kd->...qd", F.softmax(scores, dim=-1), value)  # the output alone


def attention_where_tensor_scale_list(query, key, value, mask=None):
    d_k = torch.tensor(query.size(-1), dtype=query.dtype, device=query.device)
    scores = torch.matmul(query, key.mT) / d_k.sqrt()
    if mask is not None:
        scores = torch.where(mask, scores, torch.tensor(float("-inf"), device=query.device))
    weights = torch.softmax(scores, -1)
    return [weights @ value, weights]  # a list where a tuple is fine


def attention_float64_additive_mask(query, key, value, mask=None, *, dropout_p=0.0):
    q, k, v = query.double(), key.double(), value.double()
    scores = q @ k.transpose(-1, -2) / math.sqrt(key.shape[-1])
    if mask is not None:
        scores = scores + torch.zeros_like(scores).masked_fill(~mask, -math.inf)
    weights = F.dropout(scores.softmax(-1), dropout_p)
    return (weights @ v).to(query.dtype), weights.to(query.dtype)


def attention_renormalised_after_softmax(query, key, value, mask=None):
    weights = (query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))).softmax(-1)
    if mask is not None:  # hide after the softmax, then make each row sum to 1 again: the same weights
        weights = weights * mask
        weights = weights / weights.sum(-1, keepdim=True)
    return weights @ value


def attention_in_place_on_its_own_scores(query, key, value, mask=None):
    scores = query @ key.transpose(-2, -1)
    scores /= math.sqrt(query.size(-1))  # scores is a new tensor: writing into it is fine
    if mask is not None:
        scores.masked_fill_(mask.logical_not(), float("-inf"))
    return scores.softmax(-1) @ value


def attention_loop_over_batch(query, key, value, mask=None):
    lead, T_q, T_k = query.shape[:-2], query.size(-2), key.size(-2)
    q, k, v = (t.reshape(-1, t.size(-2), t.size(-1)) for t in (query, key, value))
    m = None if mask is None else mask.expand(*lead, T_q, T_k).reshape(-1, T_q, T_k)
    outputs = []
    for b in range(q.size(0)):
        scores = q[b] @ k[b].T / math.sqrt(q.size(-1))
        if m is not None:
            scores = scores.masked_fill(~m[b], float("-inf"))
        outputs.append(scores.softmax(-1) @ v[b])
    return torch.stack(outputs).reshape(*lead, T_q, value.size(-1))


def attention_pytorch(query, key, value, mask=None):
    return F.scaled_dot_product_attention(query, key, value, attn_mask=mask)


def attention_scaled_by(scale):
    def answer(query, key, value, mask=None):
        scores = query @ key.transpose(-2, -1) / scale(query, key, value)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        return scores.softmax(-1) @ value

    return answer


def attention_variant(softmax=lambda s: s.softmax(-1), hide=lambda s, m: s.masked_fill(~m, float("-inf")),
                      after=None, transpose=lambda k: k.transpose(-2, -1)):  # fmt: skip
    """The solution with one step changed."""

    def answer(query, key, value, mask=None):
        scores = query @ transpose(key) / math.sqrt(query.size(-1))
        if mask is not None:
            scores = hide(scores, mask)
        weights = softmax(scores)
        if mask is not None and after is not None:
            weights = after(weights, mask)
        return weights @ value, weights

    return answer


def attention_no_scaling(query, key, value, mask=None):
    return attention_scaled_by(lambda q, k, v: 1)(query, key, value, mask)


def attention_divided_by_d_k(query, key, value, mask=None):
    return attention_scaled_by(lambda q, k, v: q.size(-1))(query, key, value, mask)


def attention_sqrt_of_positive_axis_1(query, key, value, mask=None):  # key.shape[1] thinking of (T, d_k)
    return attention_scaled_by(lambda q, k, v: math.sqrt(k.shape[1]))(query, key, value, mask)


def attention_sqrt_d_v(query, key, value, mask=None):
    return attention_scaled_by(lambda q, k, v: math.sqrt(v.size(-1)))(query, key, value, mask)


def attention_sqrt_of_the_papers_d_model(query, key, value, mask=None):
    return attention_scaled_by(lambda q, k, v: math.sqrt(512))(query, key, value, mask)


def attention_sqrt_d_k_hard_coded(query, key, value, mask=None):
    return attention_scaled_by(lambda q, k, v: math.sqrt(8))(query, key, value, mask)


attention_softmax_over_queries = attention_variant(softmax=lambda s: s.softmax(dim=-2))


attention_softmax_without_dim = attention_variant(softmax=lambda s: F.softmax(s))


attention_softmax_dim_2 = attention_variant(softmax=lambda s: s.softmax(dim=2))


attention_transpose_1_2 = attention_variant(transpose=lambda k: k.transpose(1, 2))


attention_flipped_mask = attention_variant(hide=lambda s, m: s.masked_fill(m, float("-inf")))


attention_flipped_mask_minus_1e9 = attention_variant(hide=lambda s, m: s.masked_fill(m == 1, -1e9))


attention_mask_ignored = attention_variant(hide=lambda s, m: s)


attention_mask_after_softmax = attention_variant(hide=lambda s, m: s, after=lambda w, m: w.masked_fill(~m, 0.0))


attention_mask_filled_with_zero = attention_variant(hide=lambda s, m: s.masked_fill(~m, 0))


attention_mask_added = attention_variant(hide=lambda s, m: s + m)


def attention_bmm(query, key, value, mask=None):
    scores = torch.bmm(query, key.transpose(1, 2)) / math.sqrt(query.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.bmm(scores.softmax(-1), value)


def attention_scales_query_in_place(query, key, value, mask=None):
    query /= math.sqrt(query.size(-1))
    return attention_variant()(query, key, value, mask)[0] * 1.0


def attention_detached(query, key, value, mask=None):
    out, weights = attention_solution(query.detach(), key.detach(), value.detach(), mask)
    return out, weights


def attention_numpy(query, key, value, mask=None):
    q, k, v = query.numpy(), key.numpy(), value.numpy()
    scores = q @ np.swapaxes(k, -2, -1) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask.numpy(), scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    return torch.from_numpy(weights / weights.sum(-1, keepdims=True) @ v)


def attention_weights_detached(query, key, value, mask=None):
    """The weights taken out of the graph: the values' gradient is right, the queries' and keys' never arrive."""
    _, weights = attention_solution(query, key, value, mask)
    return weights.detach() @ value, weights


def attention_numpy_denominator(query, key, value, mask=None):
    """exp in torch, the softmax's denominator in NumPy: the right values, a wrong gradient."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    e = (scores - scores.amax(-1, keepdim=True)).exp()
    total = torch.from_numpy(e.detach().numpy().sum(-1, keepdims=True))
    return (e / total) @ value


def attention_on_meta(query, key, value, mask=None):
    out, weights = attention_solution(query, key, value, mask)
    return out.to("meta"), weights


def attention_weights_only(query, key, value, mask=None):
    return attention_solution(query, key, value, mask)[1]


def attention_pair_swapped(query, key, value, mask=None):
    out, weights = attention_solution(query, key, value, mask)
    return weights, out


def attention_softmax_in_float32_cast_back(query, key, value, mask=None):
    """The softmax in float32 whatever the inputs' dtype (chapter 02's advice), cast back before the values."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = F.softmax(scores, dim=-1, dtype=torch.float32).to(value.dtype)
    return weights @ value, weights


def attention_returns(second):
    """The right output, with ``second(scores, mask, weights)`` returned as the weights."""

    def answer(query, key, value, mask=None):
        scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = scores.softmax(-1)
        return weights @ value, second(scores, mask, weights)

    return answer


attention_weights_none = attention_returns(lambda s, m, w: None)


attention_weights_are_the_scores = attention_returns(lambda s, m, w: s)


attention_weights_transposed = attention_returns(lambda s, m, w: w.transpose(-2, -1))


def attention_weights_unmasked(query, key, value, mask=None):
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
    weights = scores.softmax(-1)
    hidden = scores if mask is None else scores.masked_fill(~mask, float("-inf"))
    return hidden.softmax(-1) @ value, weights


attention_fill_minus_10 = attention_variant(hide=lambda s, m: s.masked_fill(~m, -10.0))


attention_sigmoid = attention_variant(softmax=torch.sigmoid)


def attention_key_T(query, key, value, mask=None):
    scores = query @ key.T / math.sqrt(query.size(-1))  # section 2's K^T, on a 3-d key
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return scores.softmax(-1) @ value


attention_mask_unsqueezed = attention_variant(hide=lambda s, m: s.masked_fill(~m.unsqueeze(1), float("-inf")))


def attention_output_divided_unscaled_scores(query, key, value, mask=None):
    scores = query @ key.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(-1)
    return weights @ value / math.sqrt(query.size(-1)), weights


def attention_in_float64(query, key, value, mask=None):
    return attention_solution(query.double(), key.double(), value.double(), mask)


def attention_additive_float_mask(query, key, value, mask=None):
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
    if mask is not None:
        scores = scores + torch.where(mask, 0.0, float("-inf"))  # a float32 tensor: bfloat16 scores become float32
    weights = scores.softmax(-1)
    return weights @ value, weights


def attention_all_in_float32(query, key, value, mask=None):
    return attention_solution(query.float(), key.float(), value.float(), mask)  # and returned so: float32


def attention_softmax_in_float32(query, key, value, mask=None):
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = F.softmax(scores, dim=-1, dtype=torch.float32)
    return weights @ value, weights


ATTENTION_RIGHT = cases(
    (attention_softmax_in_float32_cast_back,),
    (attention_solution,),
    (attention_einsum_minus_1e9,),
    (attention_where_tensor_scale_list,),
    (attention_float64_additive_mask,),
    (attention_renormalised_after_softmax,),
    (attention_in_place_on_its_own_scores,),
    (attention_loop_over_batch,),
)


def attention_d_k_power_one_half(query, key, value, mask=None):
    d_k = query.size(-1)
    return attention_scaled_by(lambda q, k, v: d_k**1 / 2)(query, key, value, mask)


def attention_weights_divided_after_softmax(query, key, value, mask=None):
    scores = query @ key.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return scores.softmax(-1) / math.sqrt(query.size(-1)) @ value


def attention_mask_times_minus_inf(query, key, value, mask=None):
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
    if mask is not None:
        scores = scores + (~mask).float() * float("-inf")
    return scores.softmax(-1) @ value


def attention_through_an_alias(query, key, value, mask=None):
    return SDPA(query, key, value, attn_mask=mask)


SDPA = F.scaled_dot_product_attention


def attention_imported_by_name(query, key, value, mask=None):
    from torch.nn.functional import scaled_dot_product_attention as fused

    return fused(query, key, value, attn_mask=mask)


ATTENTION_WRONG = cases(
    (attention_weights_none, "the second item returned is None"),
    (attention_weights_are_the_scores, "the weights returned are the scores before the softmax"),
    (attention_weights_transposed, "they are transposed"),
    (attention_weights_unmasked, "the weights returned are those without the mask"),
    (attention_fill_minus_10, "keys the mask hides still get weight"),
    (attention_sigmoid, "a query's weights do not sum to 1"),
    (attention_key_T, "key.T reverses every axis"),
    (attention_mask_unsqueezed, "use it without reshaping it"),
    (attention_output_divided_unscaled_scores, "sqrt(d_k) divides after the softmax (the weights, or the output)"),
    (attention_in_float64, "has dtype torch.float64 for torch.float32 inputs"),
    (attention_additive_float_mask, "a mask made as a float32 tensor and added"),
    (attention_softmax_in_float32, "a softmax with dtype=torch.float32"),
    (attention_all_in_float32, "with bfloat16 inputs (what a GPU computes in) the output is torch.float32"),
    (attention_pytorch, "through scaled_dot_product_attention, attention written for you"),
    (scaled_dot_product_attention, "through"),
    (attention_through_an_alias, "through SDPA, attention written for you"),
    (attention_imported_by_name, "through scaled_dot_product_attention"),
    (attention_d_k_power_one_half, "d_k ** 1/2 is (d_k ** 1) / 2"),
    (attention_weights_divided_after_softmax, "sqrt(d_k) divides after the softmax"),
    (attention_mask_times_minus_inf, "0 * inf is NaN"),
    (attention_no_scaling, "not divided by sqrt(d_k)"),
    (attention_divided_by_d_k, "divided by d_k = 8, not by its square root"),
    (attention_sqrt_of_positive_axis_1, "divided by sqrt(5), the number of keys T_k"),
    (attention_sqrt_d_v, "divided by sqrt(d_v) = sqrt(6)"),
    (attention_sqrt_of_the_papers_d_model, "divided by sqrt(512), the paper's d_model"),
    (attention_sqrt_d_k_hard_coded, "right for the first test case but not with B = 3, T_q = 4, T_k = 7, d_k = 16"),
    (attention_softmax_over_queries, "softmax runs over the queries (dim=-2)"),
    (attention_softmax_without_dim, "softmax runs over the batch axis (dim=0, which F.softmax picks"),
    (attention_softmax_dim_2, "right on 3-d inputs (B, T, d_k), not on 4-d ones"),
    (attention_transpose_1_2, "key.transpose(-2, -1)"),
    (attention_bmm, "torch.bmm takes 3-d tensors only: use @ (torch.matmul)"),
    (attention_flipped_mask, "the mask's convention is flipped"),
    (attention_flipped_mask_minus_1e9, "the mask's convention is flipped"),
    (attention_mask_ignored, "the mask is ignored"),
    (attention_mask_after_softmax, "the mask is applied after the softmax"),
    (attention_mask_filled_with_zero, "the hidden scores are set to 0"),
    (attention_mask_added, "the bool mask is added to the scores"),
    (attention_scales_query_in_place, "changed its input query in place"),
    (attention_detached, "cannot be trained through"),
    (attention_numpy, "goes through NumPy"),
    (attention_weights_detached, "no gradient reaches query: a step is cut from the graph"),
    (attention_numpy_denominator, "right values but not the right gradient with respect to query"),
    (attention_on_meta, "is on meta"),
    (attention_weights_only, "this is the weights' shape (2, 3, 5)"),
    (attention_pair_swapped, "the pair is (weights, output)"),
)


def test_a_finite_fill_passes_with_a_note_on_rows_with_nothing_to_see(capsys):
    ok, out = verdict(check_scaled_dot_product_attention, attention_einsum_minus_1e9, capsys)
    assert ok and "section 4's trap of -1e9" in out
    ok, out = verdict(check_scaled_dot_product_attention, attention_solution, capsys)
    assert ok and "A note" not in out


def test_softmax_dim_2_names_the_queries_on_4d_inputs(capsys):
    _, out = verdict(check_scaled_dot_product_attention, attention_softmax_dim_2, capsys)
    assert "softmax runs over the queries (dim=-2)" in out


# ---------------------------------------------------------------------------------------------------------------------
# Chapter 01, exercise 5: attention_with_bias(query, key, value, bias)


def bias_solution(query, key, value, bias):  # the notebook's solution
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1)) + bias  # (..., T_q, T_k)
    weights = scores.softmax(dim=-1)  # (..., T_q, T_k)
    return weights @ value, weights  # (..., T_q, d_v), (..., T_q, T_k)


def bias_pytorch(query, key, value, bias):
    return F.scaled_dot_product_attention(query, key, value, attn_mask=bias)


def bias_einsum_output_only(query, key, value, bias):
    scores = torch.einsum("...id,...jd->...ij", query, key) * query.shape[-1] ** -0.5
    return torch.einsum("...ij,...jd->...id", torch.softmax(scores + bias, dim=-1), value)


def bias_queries_scaled_first_float64(query, key, value, bias):
    q = query.double() / math.sqrt(query.size(-1))  # scaling Q before the product scales the scores alike
    scores = q @ key.double().mT + bias.double()
    return [(scores.softmax(-1) @ value.double()).to(value.dtype)]


def bias_with_a_masked_attention(query, key, value, bias):
    scores = torch.matmul(query, key.transpose(-1, -2)) / query.size(-1) ** 0.5
    scores = scores.add(bias)
    return F.softmax(scores, dim=-1).matmul(value)


def bias_variant(scores_to_weights):
    def answer(query, key, value, bias):
        scores = query @ key.transpose(-2, -1)
        return scores_to_weights(scores, bias, math.sqrt(query.size(-1))) @ value

    return answer


bias_after_softmax = bias_variant(lambda s, b, r: (s / r).softmax(-1) + b)


bias_divided_too = bias_variant(lambda s, b, r: ((s + b) / r).softmax(-1))


bias_ignored = bias_variant(lambda s, b, r: (s / r).softmax(-1))


bias_multiplies = bias_variant(lambda s, b, r: (s / r * b).softmax(-1))


bias_no_scaling = bias_variant(lambda s, b, r: (s + b).softmax(-1))


bias_subtracted = bias_variant(lambda s, b, r: (s / r - b).softmax(-1))


bias_softmax_over_queries = bias_variant(lambda s, b, r: (s / r + b).softmax(-2))


bias_sqrt_8_hard_coded = bias_variant(lambda s, b, r: (s / math.sqrt(8) + b).softmax(-1))


def bias_transpose_1_2(query, key, value, bias):
    return ((query @ key.transpose(1, 2)) / math.sqrt(query.size(-1)) + bias).softmax(-1) @ value


def bias_scales_query_in_place(query, key, value, bias):
    query /= math.sqrt(query.size(-1))
    return ((query @ key.transpose(-2, -1)) + bias).softmax(-1) @ value


def bias_detached(query, key, value, bias):
    return bias_solution(query.detach(), key.detach(), value.detach(), bias.detach())


def bias_on_meta(query, key, value, bias):
    return bias_solution(query, key, value, bias)[0].to("meta")


def bias_pair_swapped(query, key, value, bias):
    out, weights = bias_solution(query, key, value, bias)
    return weights, out


BIAS_RIGHT = cases(
    (bias_solution,),
    (bias_einsum_output_only,),
    (bias_queries_scaled_first_float64,),
    (bias_with_a_masked_attention,),
)


def bias_scaled_by_keys(query, key, value, bias):
    scores = query @ key.transpose(-2, -1) / math.sqrt(key.size(-2)) + bias
    return scores.softmax(dim=-1) @ value


def bias_as_a_mask(query, key, value, bias):
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
    return scores.masked_fill(bias < 0, float("-inf")).softmax(-1) @ value


def bias_weights_before_the_bias(query, key, value, bias):
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
    return (scores + bias).softmax(-1) @ value, scores + bias


BIAS_WRONG = cases(
    (bias_pytorch, "through scaled_dot_product_attention, which adds the bias for you"),
    (bias_as_a_mask, "the bias is used as a mask"),
    (bias_weights_before_the_bias, "the weights returned are the scores before the softmax"),
    (bias_scaled_by_keys, "divided by sqrt(5), the number of keys T_k"),
    (bias_after_softmax, "the bias is added after the softmax"),
    (bias_divided_too, "the bias is divided by sqrt(d_k) with the scores"),
    (bias_ignored, "the bias is ignored"),
    (bias_multiplies, "the bias multiplies the scores"),
    (bias_no_scaling, "the scores are not divided by sqrt(d_k)"),
    (bias_subtracted, "the bias is subtracted"),
    (bias_softmax_over_queries, "softmax runs over the queries (dim=-2)"),
    (bias_sqrt_8_hard_coded, "right for the first test case but not with B = 3, T_q = 4, T_k = 7, d_k = 16"),
    (bias_transpose_1_2, "right on 3-d inputs (B, T, d_k), not on 4-d ones"),
    (bias_scales_query_in_place, "changed its input query in place"),
    (bias_detached, "cannot be trained through"),
    (bias_on_meta, "is on meta"),
    (bias_pair_swapped, "the pair is (weights, output)"),
)


# ---------------------------------------------------------------------------------------------------------------------
# Chapter 02: split_heads(x, n_heads) and merge_heads(x)


def split_solution(x, n_heads):  # the notebook's solution
    B, T, d_model = x.shape
    x = x.view(B, T, n_heads, d_model // n_heads)  # (B, T, h, d_k)
    return x.transpose(1, 2)  # (B, h, T, d_k)


def split_reshape_permute(x, n_heads):
    return x.reshape(x.size(0), x.size(1), n_heads, -1).permute(0, 2, 1, 3)


def split_chunk_stack(x, n_heads):
    return torch.stack(x.chunk(n_heads, dim=-1), dim=1)


def split_loop_over_heads(x, n_heads):
    d_k = x.shape[-1] // n_heads
    return torch.stack([x[:, :, i * d_k : (i + 1) * d_k] for i in range(n_heads)], dim=1)


def split_unflatten_einsum(x, n_heads):
    return torch.einsum("bthd->bhtd", x.unflatten(-1, (n_heads, -1))).contiguous()


def split_torch_split(x, n_heads):
    return torch.stack(torch.split(x, x.size(-1) // n_heads, dim=-1), dim=1)


def split_no_transpose(x, n_heads):
    B, T, d_model = x.shape
    return x.view(B, T, n_heads, d_model // n_heads)


def split_view_heads_first(x, n_heads):
    B, T, d_model = x.shape
    return x.view(B, n_heads, T, d_model // n_heads)


def split_interleaved(x, n_heads):
    B, T, d_model = x.shape
    return x.view(B, T, d_model // n_heads, n_heads).permute(0, 3, 1, 2)


def split_permute_t_last(x, n_heads):
    B, T, d_model = x.shape
    return x.view(B, T, n_heads, d_model // n_heads).permute(0, 2, 3, 1)


def split_n_heads_hard_coded(x, n_heads):
    return x.view(x.size(0), x.size(1), 4, -1).transpose(1, 2)


def split_d_k_hard_coded(x, n_heads):
    return x.view(x.size(0), x.size(1), n_heads, 2).transpose(1, 2)


def split_batch_hard_coded(x, n_heads):
    return x.view(2, x.size(1), n_heads, -1).transpose(1, 2)


def split_detached(x, n_heads):
    return split_solution(x.detach(), n_heads)


def split_numpy(x, n_heads):
    B, T, _ = x.shape
    return torch.from_numpy(x.numpy().reshape(B, T, n_heads, -1).transpose(0, 2, 1, 3).copy())


def split_on_meta(x, n_heads):
    return split_solution(x, n_heads).to("meta")


SPLIT_RIGHT = cases(
    (split_solution,),
    (split_reshape_permute,),
    (split_chunk_stack,),
    (split_loop_over_heads,),
    (split_unflatten_einsum,),
    (split_torch_split,),
)


def split_d_k_hard_coded_4(x, n_heads):  # 4 does not divide the first case's d_model = 8 into n_heads = 4 heads
    return x.reshape(x.size(0), x.size(1), n_heads, 4).transpose(1, 2)


SPLIT_WRONG = cases(
    (split_d_k_hard_coded_4, "take each from the input"),
    (split_no_transpose, "shape (B, T, h, d_k)"),
    (split_view_heads_first, "mixes positions"),
    (split_interleaved, "the last axis is viewed as (d_k, h)"),
    (split_permute_t_last, "T and d_k are swapped"),
    (split_n_heads_hard_coded, "right for the first test case but not with B = 3, T = 5, d_model = 12, n_heads = 3"),
    (split_d_k_hard_coded, "right for the first test case"),
    (split_batch_hard_coded, "right for the first test case"),
    (split_detached, "cannot be trained through"),
    (split_numpy, "goes through NumPy"),
    (split_on_meta, "is on meta"),
)


def merge_solution(x):  # the notebook's solution
    B, h, T, d_k = x.shape
    x = x.transpose(1, 2)  # (B, T, h, d_k)
    return x.reshape(B, T, h * d_k)  # (B, T, h * d_k)


def merge_permute_flatten(x):
    return x.permute(0, 2, 1, 3).flatten(2)


def merge_cat_unbind(x):
    return torch.cat(x.unbind(dim=1), dim=-1)


def merge_loop_over_heads(x):
    return torch.cat([x[:, i] for i in range(x.shape[1])], dim=-1)


def merge_contiguous_view(x):
    B, _, T, _ = x.shape
    return x.transpose(1, 2).contiguous().view(B, T, -1)


def merge_einsum(x):
    B, h, T, d_k = x.shape
    return torch.einsum("bhtd->bthd", x).reshape(B, T, h * d_k)


def merge_no_transpose(x):
    return x.reshape(x.size(0), x.size(2), -1)


def merge_view_after_transpose(x):
    B, h, T, d_k = x.shape
    return x.transpose(1, 2).view(B, T, h * d_k)


def merge_interleaved(x):
    B, h, T, d_k = x.shape
    return x.permute(0, 2, 3, 1).reshape(B, T, h * d_k)


def merge_shape_hard_coded(x):
    return x.transpose(1, 2).reshape(2, 3, 8)


def merge_transposes_its_input(x):
    B, h, T, d_k = x.shape
    x.transpose_(1, 2)  # turns the caller's tensor round
    return x.reshape(B, T, h * d_k)


def merge_heads_reversed(x):
    return torch.cat([x[:, i] for i in reversed(range(x.size(1)))], dim=-1)


def merge_detached(x):
    return merge_solution(x).detach()


def merge_on_meta(x):
    return merge_solution(x).to("meta")


MERGE_RIGHT = cases(
    (merge_solution,),
    (merge_permute_flatten,),
    (merge_cat_unbind,),
    (merge_loop_over_heads,),
    (merge_contiguous_view,),
    (merge_einsum,),
)


def merge_transpose_2_3(x):
    B, h, T, d_k = x.shape
    return x.transpose(2, 3).reshape(B, T, h * d_k)


MERGE_WRONG = cases(
    (merge_transpose_2_3, "transpose(2, 3) swaps T and d_k"),
    (merge_no_transpose, "transpose(1, 2) back to (B, T, h, d_k) before the reshape"),
    (merge_view_after_transpose, "so .view cannot regroup its axes: use .reshape(...)"),
    (merge_interleaved, "the heads are interleaved"),
    (merge_heads_reversed, "the heads are in reverse order"),
    (merge_shape_hard_coded, "right for the first test case but not with B = 3, n_heads = 3, T = 5, d_k = 4"),
    (merge_transposes_its_input, "changed its input x in place"),
    (merge_detached, "cannot be trained through"),
    (merge_on_meta, "is on meta"),
)


# ---------------------------------------------------------------------------------------------------------------------
# Chapter 02, exercise 1: fuse_head_projections(head_weights)


def fuse_solution(head_weights):  # the notebook's solution
    fused = torch.cat(head_weights, dim=1)  # (d_model, h * d_k): the paper's W^Q, heads side by side
    return fused.T  # (h * d_k, d_model): nn.Linear's (out, in) layout


def fuse_transposed_heads_stacked_rows(head_weights):
    return torch.cat([w.T for w in head_weights], dim=0)


def fuse_loop_into_zeros(head_weights):
    d_model, d_k = head_weights[0].shape
    fused = torch.zeros(len(head_weights) * d_k, d_model, device=head_weights[0].device)
    for i, w in enumerate(head_weights):
        fused[i * d_k : (i + 1) * d_k] = w.T
    return fused


def fuse_stack_transpose_reshape(head_weights):
    stacked = torch.stack(head_weights)  # (h, d_model, d_k)
    return stacked.transpose(1, 2).reshape(-1, stacked.size(1))


def fuse_hstack_t(head_weights):
    return torch.hstack(tuple(head_weights)).t().contiguous()


def fuse_einsum(head_weights):
    return torch.einsum("hij->hji", torch.stack(head_weights)).flatten(0, 1)


def fuse_not_transposed(head_weights):
    return torch.cat(head_weights, dim=1)


def fuse_interleaved(head_weights):
    return torch.stack(head_weights, dim=-1).flatten(1).T


def fuse_input_axis(head_weights):
    return torch.cat(head_weights, dim=0)


def fuse_reshape_for_transpose(head_weights):
    fused = torch.cat(head_weights, dim=1)
    return fused.reshape(fused.size(1), fused.size(0))


def fuse_stacked_reshaped(head_weights):
    return torch.stack(head_weights).reshape(-1, head_weights[0].size(0))


def fuse_two_heads_hard_coded(head_weights):
    return torch.cat([head_weights[0], head_weights[1]], dim=1).T


def fuse_transposes_its_inputs(head_weights):
    return torch.cat([w.t_() for w in head_weights], dim=0)


def fuse_on_meta(head_weights):
    return fuse_solution(head_weights).to("meta")


FUSE_RIGHT = cases(
    (fuse_solution,),
    (fuse_transposed_heads_stacked_rows,),
    (fuse_loop_into_zeros,),
    (fuse_stack_transpose_reshape,),
    (fuse_hstack_t,),
    (fuse_einsum,),
)


def fuse_rewrites_its_list(head_weights):
    """Right numbers, but the caller's list now holds transposed matrices."""
    for i, w in enumerate(head_weights):
        head_weights[i] = w.T
    return torch.cat(head_weights, dim=0)


def fuse_appends_to_its_list(head_weights):
    head_weights.append(torch.zeros_like(head_weights[0]))
    return torch.cat(head_weights[:-1], dim=1).T


def fuse_heads_reversed(head_weights):
    return torch.cat(list(reversed(head_weights)), dim=1).T


FUSE_WRONG = cases(
    (fuse_heads_reversed, "the heads are in reverse order"),
    (fuse_not_transposed, "nn.Linear stores its weight as (out, in)"),
    (fuse_interleaved, "interleaved"),
    (fuse_input_axis, "concatenated along the input axis"),
    (fuse_reshape_for_transpose, "(.reshape and .view keep this layout: they do not transpose)"),
    (fuse_stacked_reshaped, "of the stacked (h, d_model, d_k) to (h * d_k, d_model)"),
    (fuse_two_heads_hard_coded, "right for the first test case but not with d_model = 12, n_heads = 3"),
    (fuse_transposes_its_inputs, "changed its input head_weights[0] in place"),
    (
        fuse_rewrites_its_list,
        "changed its input head_weights in place (append, insert, pop, remove, sort, += or an item",
    ),
    (fuse_appends_to_its_list, "changed its input head_weights in place"),
    (fuse_on_meta, "is on meta"),
)


# ---------------------------------------------------------------------------------------------------------------------
# Chapter 02, exercise 2: grouped_query_attention(query, key, value)


def gqa_solution(query, key, value):  # the notebook's solution
    group = query.size(1) // key.size(1)  # h // g query heads share each key/value head
    key = key.repeat_interleave(group, dim=1)  # (B, h, T_k, d_k): heads 0, 0, 1, 1, ... when h // g = 2
    value = value.repeat_interleave(group, dim=1)  # (B, h, T_k, d_k)
    return scaled_dot_product_attention(query, key, value)  # (B, h, T_q, d_k), (B, h, T_q, T_k)


def gqa_expand_reshape(query, key, value):
    B, g, T_k, d_k = key.shape
    n_rep = query.shape[1] // g
    key = key[:, :, None].expand(B, g, n_rep, T_k, d_k).reshape(B, g * n_rep, T_k, d_k)
    value = value[:, :, None].expand(B, g, n_rep, T_k, d_k).reshape(B, g * n_rep, T_k, d_k)
    return scaled_dot_product_attention(query, key, value)[0]


def gqa_loop_over_query_heads(query, key, value):
    per_group = query.size(1) // key.size(1)
    heads = [
        scaled_dot_product_attention(query[:, i], key[:, i // per_group], value[:, i // per_group])[0]
        for i in range(query.size(1))
    ]
    return torch.stack(heads, dim=1)


def gqa_pytorch(query, key, value):
    return F.scaled_dot_product_attention(query, key, value, enable_gqa=True)


def gqa_grouped_queries_broadcast(query, key, value):
    B, h, T_q, d_k = query.shape
    g = key.size(1)
    q = query.view(B, g, h // g, T_q, d_k)  # each group's query heads side by side
    out, _ = scaled_dot_product_attention(q, key.unsqueeze(2), value.unsqueeze(2))  # (B, g, h // g, T_q, d_k)
    return out.reshape(B, h, T_q, d_k)


def gqa_einsum(query, key, value):
    k = key.repeat_interleave(query.shape[1] // key.shape[1], dim=1)
    v = value.repeat_interleave(query.shape[1] // key.shape[1], dim=1)
    scores = torch.einsum("bhqd,bhkd->bhqk", query, k) / math.sqrt(query.shape[-1])
    return torch.einsum("bhqk,bhkd->bhqd", scores.softmax(-1), v)


def gqa_tiled_with_repeat(query, key, value):
    group = query.size(1) // key.size(1)
    return scaled_dot_product_attention(query, key.repeat(1, group, 1, 1), value.repeat(1, group, 1, 1))


def gqa_loop_modulo(query, key, value):
    g = key.size(1)
    heads = [scaled_dot_product_attention(query[:, i], key[:, i % g], value[:, i % g])[0] for i in range(query.size(1))]
    return torch.stack(heads, dim=1)


def gqa_multi_query(query, key, value):
    return scaled_dot_product_attention(query, key[:, :1], value[:, :1])


def gqa_group_hard_coded(query, key, value):
    return scaled_dot_product_attention(query, key.repeat_interleave(2, dim=1), value.repeat_interleave(2, dim=1))


def gqa_group_is_g(query, key, value):
    group = key.size(1)  # g, not h // g
    return scaled_dot_product_attention(query, key.repeat_interleave(group, 1), value.repeat_interleave(group, 1))


def gqa_no_scaling(query, key, value):
    group = query.size(1) // key.size(1)
    k, v = key.repeat_interleave(group, 1), value.repeat_interleave(group, 1)
    return (query @ k.transpose(-2, -1)).softmax(-1) @ v


def gqa_scaled_by_d_model(query, key, value):
    group = query.size(1) // key.size(1)
    k, v = key.repeat_interleave(group, 1), value.repeat_interleave(group, 1)
    d_model = query.size(1) * query.size(-1)
    return (query @ k.transpose(-2, -1) / math.sqrt(d_model)).softmax(-1) @ v


def gqa_softmax_over_the_queries(query, key, value):
    group = query.size(1) // key.size(1)
    k, v = key.repeat_interleave(group, 1), value.repeat_interleave(group, 1)
    return (query @ k.transpose(-2, -1) / math.sqrt(query.size(-1))).softmax(-2) @ v


def gqa_detached(query, key, value):
    return gqa_solution(query, key, value)[0].detach()


def gqa_key_detached(query, key, value):
    return gqa_solution(query, key.detach(), value)


def gqa_on_meta(query, key, value):
    return gqa_solution(query, key, value)[0].to("meta")


GQA_RIGHT = cases(
    (gqa_solution,),
    (gqa_expand_reshape,),
    (gqa_loop_over_query_heads,),
    (gqa_grouped_queries_broadcast,),
    (gqa_einsum,),
)


def gqa_values_tiled(query, key, value):
    group = query.size(1) // key.size(1)
    return scaled_dot_product_attention(query, key.repeat_interleave(group, dim=1), value.repeat(1, group, 1, 1))


GQA_WRONG = cases(
    (gqa_pytorch, "through enable_gqa=True"),
    (gqa_values_tiled, "the keys and the values are expanded differently"),
    (gqa_tiled_with_repeat, "query head i uses key/value head i % g"),
    (gqa_loop_modulo, "k.repeat_interleave(h // g, dim=1)"),
    (gqa_multi_query, "multi-query attention"),
    (gqa_group_hard_coded, "right for the first test case but not with n_kv_heads = 1"),
    (gqa_group_is_g, "each key/value head is repeated g = 3 times, which gives 9 heads for h = 6 query heads"),
    (gqa_no_scaling, "not divided by sqrt(d_k)"),
    (gqa_scaled_by_d_model, "divided by sqrt(h * d_k) = sqrt(d_model)"),
    (gqa_softmax_over_the_queries, "softmax runs over the queries (dim=-2)"),
    (gqa_detached, "cannot be trained through"),
    (gqa_key_detached, "no gradient reaches key: a step is cut from the graph"),
    (gqa_on_meta, "is on meta"),
)


# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "check",
    [
        check_scaled_dot_product_attention,
        check_attention_with_bias,
        check_split_heads,
        check_merge_heads,
        check_fused_head_projections,
        check_grouped_query_attention,
    ],
)
def test_an_unwritten_stub_is_not_attempted(check, capsys):
    ok, out = verdict(check, todo, capsys)
    assert not ok and "not written yet" in out


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
def test_an_unwritten_stub_of_a_transfer_exercise_is_not_attempted(check, capsys):
    ok, out = verdict(check, todo, capsys)
    assert not ok and "not written yet" in out


def test_the_attention_checker_says_it_compared_with_pytorch(capsys):
    ok, out = verdict(check_scaled_dot_product_attention, attention_solution, capsys)
    assert ok and "F.scaled_dot_product_attention" in out


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


# ---------------------------------------------------------------------------------------------------------------------
# The verdict table: every answer above, the verdict it must get and the words its message must hold.

VERDICTS = [
    *verdict_rows(check_scaled_dot_product_attention, ATTENTION_RIGHT, ATTENTION_WRONG),
    *verdict_rows(check_attention_with_bias, BIAS_RIGHT, BIAS_WRONG),
    *verdict_rows(check_split_heads, SPLIT_RIGHT, SPLIT_WRONG),
    *verdict_rows(check_merge_heads, MERGE_RIGHT, MERGE_WRONG),
    *verdict_rows(check_fused_head_projections, FUSE_RIGHT, FUSE_WRONG),
    *verdict_rows(check_grouped_query_attention, GQA_RIGHT, GQA_WRONG),
]


# a wrong answer calls softmax without dim=
test_each_answer_gets_its_verdict = pytest.mark.filterwarnings("ignore:Implicit dimension choice for softmax")(
    verdict_table_test(VERDICTS)
)
