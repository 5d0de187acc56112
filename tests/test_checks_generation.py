"""The checkers of ``course_utils.checks.generation``, the GPT (chapter 07), against students' answers: right
answers written in other styles pass, each classic mistake fails with a message that names it, and an unwritten stub
is reported as not attempted.
"""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers import todo, verdict, verdict_rows, verdict_table_test

from course_utils.checks import check_gpt_block, check_kv_cache_step, check_sampling_step, check_top_p

NOT_CAUSAL = "no causal mask: every position also reads the future tokens"
CALLED = "you called layer(...) itself"


NORMALISED = "the residual stream itself is normalised"
FLIPPED = "the mask's convention is flipped"


HARD_CODED = "right for the first test case but not with"
IN_PLACE = "in place"


def ids(cases):
    return [fn.__name__ for fn, *_ in cases]


# --- the GPT block ---------------------------------------------------------------------------------------------


def block_solution(block, x):  # the notebook's solution
    h = block.norm1(x)  # (B, T, d_model)
    x = x + block.self_attn(query=h, key=h, value=h, is_causal=True)[0]  # (B, T, d_model)
    return x + block.feed_forward(block.norm2(x))  # (B, T, d_model)


def block_explicit_tril_mask(block, x):
    T = x.size(1)
    mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()  # True = may attend
    h = block.norm1(x)
    attended, _ = block.self_attn(h, h, h, mask)
    y = x + attended
    return y + block.feed_forward(block.norm2(y))


def block_mask_from_parameters_device(block, x):
    T = x.shape[1]
    device = next(block.parameters()).device
    causal = torch.tril(torch.ones(T, T, device=device)).bool().view(1, 1, T, T)
    out = x + block.self_attn(query=block.norm1(x), key=block.norm1(x), value=block.norm1(x), mask=causal)[0]
    out = out + block.feed_forward(block.norm2(out))
    return out


def block_sublayer_methods(block, x):  # GPTBlock's own sublayer helpers, not its forward (dropout is off)
    x = x + block.self_attention_block(block.norm1(x))
    return x + block.feed_forward_block(block.norm2(x))


def block_arange_mask(block, x):
    positions = torch.arange(x.shape[-2], device=x.device)
    may_attend = positions[None, :] <= positions[:, None]  # key <= query
    residual = x
    h = block.norm1(x)
    x = residual + block.self_attn(query=h, key=h, value=h, mask=may_attend)[0]
    residual = x
    return residual + block.feed_forward(block.norm2(x))


BLOCK_RIGHT = [
    block_solution,
    block_explicit_tril_mask,
    block_mask_from_parameters_device,
    block_sublayer_methods,
    block_arange_mask,
]


def block_calls_itself(block, x):
    return block(x)


def block_not_causal(block, x):
    h = block.norm1(x)
    x = x + block.self_attn(query=h, key=h, value=h)[0]
    return x + block.feed_forward(block.norm2(x))


def block_normalised_stream(block, x):
    x = block.norm1(x)
    x = x + block.self_attn(query=x, key=x, value=x, is_causal=True)[0]
    x = block.norm2(x)
    return x + block.feed_forward(x)


def block_normalised_stream_second(block, x):
    h = block.norm1(x)
    x = x + block.self_attn(query=h, key=h, value=h, is_causal=True)[0]
    x = block.norm2(x)
    return x + block.feed_forward(x)


def block_post_norm(block, x):
    x = block.norm1(x + block.self_attn(query=x, key=x, value=x, is_causal=True)[0])
    return block.norm2(x + block.feed_forward(x))


def block_no_residuals(block, x):
    h = block.norm1(x)
    x = block.self_attn(query=h, key=h, value=h, is_causal=True)[0]
    return block.feed_forward(block.norm2(x))


def block_ffn_reads_input(block, x):
    h = block.norm1(x)
    a = block.self_attn(query=h, key=h, value=h, is_causal=True)[0]
    return x + a + block.feed_forward(block.norm2(x))


def block_mask_t_hard_coded(block, x):
    mask = torch.ones(5, 5).tril().bool()  # T = 5, the checker's first T
    h = block.norm1(x)
    x = x + block.self_attn(h, h, h, mask)[0]
    return x + block.feed_forward(block.norm2(x))


def block_flipped_mask(block, x):
    T = x.size(1)
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)  # PyTorch's convention: True = hidden
    h = block.norm1(x)
    x = x + block.self_attn(h, h, h, mask)[0]
    return x + block.feed_forward(block.norm2(x))


def block_detached(block, x):
    return block_solution(block, x).detach()


def block_no_grad(block, x):
    with torch.no_grad():
        return block_solution(block, x)


def block_numpy(block, x):
    return torch.from_numpy(np.array(block_solution(block, x).tolist(), dtype=np.float32))


def block_in_place(block, x):
    h = block.norm1(x)
    x += block.self_attn(query=h, key=h, value=h, is_causal=True)[0]
    return x + block.feed_forward(block.norm2(x))


def block_on_meta(block, x):
    return torch.empty_like(x, device="meta")


def block_returns_tuple(block, x):
    h = block.norm1(x)
    x = x + block.self_attn(query=h, key=h, value=h, is_causal=True)
    return x


def block_attention_detached(block, x):
    """The attention branch taken out of the graph: right values, and a gradient that skips attention."""
    h = block.norm1(x)
    x = x + block.self_attn(query=h, key=h, value=h, is_causal=True)[0].detach()
    return x + block.feed_forward(block.norm2(x))


def block_ffn_no_grad(block, x):
    h = block.norm1(x)
    x = x + block.self_attn(query=h, key=h, value=h, is_causal=True)[0]
    with torch.no_grad():
        f = block.feed_forward(block.norm2(x))
    return x + f


BLOCK_WRONG = [
    (block_calls_itself, CALLED),
    (block_not_causal, NOT_CAUSAL),
    (block_not_causal, "is_causal=True"),
    (block_normalised_stream, NORMALISED),
    (block_normalised_stream_second, NORMALISED),
    (block_post_norm, "post-norm"),
    (block_no_residuals, "both residual connections are missing"),
    (block_ffn_reads_input, "reads the block's input"),
    (block_mask_t_hard_coded, HARD_CODED),
    (block_flipped_mask, FLIPPED),
    (block_detached, "cannot be trained through"),
    (block_no_grad, "cannot be trained through"),
    (block_numpy, "cannot be trained through"),
    (block_attention_detached, "right values but not the right gradient with respect to x"),
    (block_ffn_no_grad, "right values but not the right gradient with respect to x"),
    (block_in_place, IN_PLACE),
    (block_on_meta, "is on meta"),
    (block_returns_tuple, "(output, weights)"),
]


# --- one key/value cache step ----------------------------------------------------------------------------------


def kv_solution(cache_k, cache_v, q, k, v):  # the notebook's solution
    cache_k = torch.cat([cache_k, k], dim=2)  # (B, h, T + 1, d_k)
    cache_v = torch.cat([cache_v, v], dim=2)  # (B, h, T + 1, d_k)
    scores = q @ cache_k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, h, 1, T + 1)
    return scores.softmax(dim=-1) @ cache_v, cache_k, cache_v  # (B, h, 1, d_k)


def kv_sdpa_list(cache_k, cache_v, q, k, v):  # PyTorch's kernel, a list for the triple
    keys, values = torch.cat((cache_k, k), dim=-2), torch.cat((cache_v, v), dim=-2)
    return [F.scaled_dot_product_attention(q, keys, values), keys, values]


def kv_einsum_float64(cache_k, cache_v, q, k, v):
    keys = torch.cat([cache_k, k], 2)
    values = torch.cat([cache_v, v], 2)
    d_k = keys.shape[-1]
    scores = torch.einsum("bhqd,bhkd->bhqk", q.double(), keys.double()) * d_k**-0.5
    out = torch.einsum("bhqk,bhkd->bhqd", scores.softmax(-1), values.double())
    return out.to(q.dtype), keys, values


def kv_right_aligned_mask(cache_k, cache_v, q, k, v):  # a causal mask lined up with the last key: all True
    keys, values = torch.cat([cache_k, k], dim=2), torch.cat([cache_v, v], dim=2)
    T_q, T_k = q.size(2), keys.size(2)
    mask = torch.ones(T_q, T_k, dtype=torch.bool, device=q.device).tril(diagonal=T_k - T_q)
    scores = (q @ keys.transpose(-2, -1)) / keys.size(-1) ** 0.5
    scores = scores.masked_fill(~mask, float("-inf"))
    return F.softmax(scores, dim=-1) @ values, keys, values


def kv_explicit_loop(cache_k, cache_v, q, k, v):  # one head at a time
    keys, values = torch.cat([cache_k, k], dim=2), torch.cat([cache_v, v], dim=2)
    B, h, _, d_k = q.shape
    out = torch.empty_like(q)
    for b in range(B):
        for head in range(h):
            scores = keys[b, head] @ q[b, head, 0] / math.sqrt(d_k)  # (T + 1,)
            out[b, head, 0] = torch.softmax(scores, 0) @ values[b, head]
    return out, keys, values


KV_RIGHT = [kv_solution, kv_sdpa_list, kv_einsum_float64, kv_right_aligned_mask, kv_explicit_loop]


def kv_cat_last_axis(cache_k, cache_v, q, k, v):
    cache_k, cache_v = torch.cat([cache_k, k], dim=-1), torch.cat([cache_v, v], dim=-1)
    return F.scaled_dot_product_attention(q, cache_k, cache_v), cache_k, cache_v


def kv_cat_head_axis(cache_k, cache_v, q, k, v):
    cache_k, cache_v = torch.cat([cache_k, k], dim=1), torch.cat([cache_v, v], dim=1)
    scores = q @ cache_k.transpose(-2, -1) / math.sqrt(q.size(-1))
    return scores.softmax(-1) @ cache_v, cache_k, cache_v


def kv_cat_batch_axis(cache_k, cache_v, q, k, v):
    cache_k, cache_v = torch.cat([cache_k, k]), torch.cat([cache_v, v])
    scores = q @ cache_k.transpose(-2, -1) / math.sqrt(q.size(-1))
    return scores.softmax(-1) @ cache_v, cache_k, cache_v


def kv_own_key_forgotten(cache_k, cache_v, q, k, v):
    scores = q @ cache_k.transpose(-2, -1) / math.sqrt(q.size(-1))
    out = scores.softmax(-1) @ cache_v
    return out, torch.cat([cache_k, k], dim=2), torch.cat([cache_v, v], dim=2)


def kv_own_key_sliced_off(cache_k, cache_v, q, k, v):
    cache_k, cache_v = torch.cat([cache_k, k], dim=2), torch.cat([cache_v, v], dim=2)
    scores = q @ cache_k[:, :, :-1].transpose(-2, -1) / math.sqrt(q.size(-1))
    return scores.softmax(-1) @ cache_v[:, :, :-1], cache_k, cache_v


def kv_no_scale(cache_k, cache_v, q, k, v):
    cache_k, cache_v = torch.cat([cache_k, k], dim=2), torch.cat([cache_v, v], dim=2)
    return (q @ cache_k.transpose(-2, -1)).softmax(-1) @ cache_v, cache_k, cache_v


def kv_scale_hard_coded(cache_k, cache_v, q, k, v):
    cache_k, cache_v = torch.cat([cache_k, k], dim=2), torch.cat([cache_v, v], dim=2)
    return (q @ cache_k.transpose(-2, -1) / 2.0).softmax(-1) @ cache_v, cache_k, cache_v  # sqrt(4): d_k = 4


def kv_scale_by_length(cache_k, cache_v, q, k, v):
    cache_k, cache_v = torch.cat([cache_k, k], dim=2), torch.cat([cache_v, v], dim=2)
    scores = q @ cache_k.transpose(-2, -1) / math.sqrt(cache_k.size(2))
    return scores.softmax(-1) @ cache_v, cache_k, cache_v


def kv_causal_kernel(cache_k, cache_v, q, k, v):  # is_causal aligns the triangle top-left: key 0 only
    cache_k, cache_v = torch.cat([cache_k, k], 2), torch.cat([cache_v, v], 2)
    return F.scaled_dot_product_attention(q, cache_k, cache_v, is_causal=True), cache_k, cache_v


def kv_prepended(cache_k, cache_v, q, k, v):
    cache_k, cache_v = torch.cat([k, cache_k], dim=2), torch.cat([v, cache_v], dim=2)
    return F.scaled_dot_product_attention(q, cache_k, cache_v), cache_k, cache_v


def kv_values_not_appended(cache_k, cache_v, q, k, v):
    cache_k = torch.cat([cache_k, k], dim=2)
    return F.scaled_dot_product_attention(q, cache_k, torch.cat([cache_v, v], dim=2)), cache_k, cache_v


def kv_scales_q_in_place(cache_k, cache_v, q, k, v):
    q /= math.sqrt(q.size(-1))
    cache_k, cache_v = torch.cat([cache_k, k], dim=2), torch.cat([cache_v, v], dim=2)
    return (q @ cache_k.transpose(-2, -1)).softmax(-1) @ cache_v, cache_k, cache_v


def kv_on_meta(cache_k, cache_v, q, k, v):
    out, cache_k, cache_v = kv_solution(cache_k, cache_v, q, k, v)
    return out.to("meta"), cache_k, cache_v


def kv_returns_out_only(cache_k, cache_v, q, k, v):
    return kv_solution(cache_k, cache_v, q, k, v)[0]


KV_WRONG = [
    (kv_cat_last_axis, "position axis"),
    (kv_cat_head_axis, "position axis"),
    (kv_cat_batch_axis, "position axis"),
    (kv_own_key_forgotten, "before its own key was appended"),
    (kv_own_key_sliced_off, "before its own key was appended"),
    (kv_no_scale, "sqrt(d_k)"),
    (kv_scale_hard_coded, "is a value written into the code"),
    (kv_scale_by_length, "sqrt(d_k)"),
    (kv_causal_kernel, "only the first position"),
    (kv_prepended, "append it at the end"),
    (kv_values_not_appended, "cache_v has not grown"),
    (kv_scales_q_in_place, IN_PLACE),
    (kv_on_meta, "meta"),
    (kv_returns_out_only, "return a triple"),
]


# --- the GPT block -------------------------------------------------------------------------------------------


def block_forward(*, causal=True, pre_norm=True, attn_residual=True, ffn_residual=True, ffn_reads_input=False,
                  ffn_norm="norm2"):  # fmt: skip
    """A GPT block's forward with one switch per classic mistake."""

    def forward(block, x):
        attend = lambda h: block.self_attn(query=h, key=h, value=h, is_causal=causal)[0]  # noqa: E731
        if not pre_norm:
            y = block.norm1(x + attend(x))
            return block.norm2(y + block.feed_forward(y))
        a = attend(block.norm1(x))
        y = x + a if attn_residual else a
        f = block.feed_forward(getattr(block, ffn_norm)(x if ffn_reads_input else y))
        return y + f if ffn_residual else f

    return forward


def test_gpt_block_reference_passes(capsys):
    ok, out = verdict(check_gpt_block, block_forward(), capsys)
    assert ok and out.startswith("✅")


@pytest.mark.parametrize(
    "mistake, words",
    [
        ({"causal": False}, "no causal mask"),
        ({"pre_norm": False}, "post-norm"),
        ({"attn_residual": False, "ffn_residual": False}, "both residual connections are missing"),
        ({"attn_residual": False}, "residual connection around attention is missing"),
        ({"ffn_residual": False}, "residual connection around the feed-forward network is missing"),
        ({"ffn_reads_input": True}, "reads the block's input"),
        ({"ffn_norm": "norm1"}, "norm1 is used twice"),
    ],
)
def test_gpt_block_mistakes_are_named(mistake, words, capsys):
    ok, out = verdict(check_gpt_block, block_forward(**mistake), capsys)
    assert not ok and words in out


# --- one key/value cache step ----------------------------------------------------------------------------------


def kv_step(*, mask=None, dim=2, attend_first=False, prepend=False, scale=True):
    """A cached attention step with one switch per classic mistake; ``mask``: None, "tril" or "self"."""

    def step(cache_k, cache_v, q, k, v):
        keys_before, values_before = cache_k, cache_v
        pair = lambda old, new: (new, old) if prepend else (old, new)  # noqa: E731
        cache_k, cache_v = torch.cat(pair(cache_k, k), dim=dim), torch.cat(pair(cache_v, v), dim=dim)
        keys, values = (keys_before, values_before) if attend_first else (cache_k, cache_v)
        scores = q @ keys.transpose(-2, -1) / (math.sqrt(q.size(-1)) if scale else 1.0)  # (B, h, 1, T_k)
        if mask == "tril":  # the top-left triangle of a (1, T_k) matrix: only the first position
            scores = scores.masked_fill(~torch.ones(1, keys.size(2), dtype=torch.bool).tril(), float("-inf"))
        elif mask == "self":
            scores = scores.masked_fill(torch.arange(keys.size(2)) < keys.size(2) - 1, float("-inf"))
        return scores.softmax(-1) @ values, cache_k, cache_v

    return step


def test_kv_cache_step_reference_passes(capsys):
    ok, out = verdict(check_kv_cache_step, kv_step(), capsys)
    assert ok and out.startswith("✅")


def test_kv_cache_step_pytorch_causal_kernel_is_named(capsys):
    def sdpa_causal(cache_k, cache_v, q, k, v):  # is_causal aligns the triangle top-left: key 0 only
        cache_k, cache_v = torch.cat([cache_k, k], 2), torch.cat([cache_v, v], 2)
        return F.scaled_dot_product_attention(q, cache_k, cache_v, is_causal=True), cache_k, cache_v

    ok, out = verdict(check_kv_cache_step, sdpa_causal, capsys)
    assert not ok and "causal mask" in out and "only the first position" in out


@pytest.mark.parametrize(
    "mistake, words",
    [
        ({"mask": "tril"}, "only the first position"),
        ({"mask": "self"}, "sees only itself"),
        ({"dim": -1}, "position axis"),
        ({"dim": 1}, "position axis"),
        ({"attend_first": True}, "before its own key was appended"),
        ({"prepend": True}, "append it at the end"),
        ({"scale": False}, "sqrt(d_k)"),
    ],
)
def test_kv_cache_step_mistakes_are_named(mistake, words, capsys):
    ok, out = verdict(check_kv_cache_step, kv_step(**mistake), capsys)
    assert not ok and words in out


def test_kv_cache_step_that_hides_every_key_is_named(capsys):
    def hides_all(cache_k, cache_v, q, k, v):
        cache_k, cache_v = torch.cat([cache_k, k], 2), torch.cat([cache_v, v], 2)
        scores = (q @ cache_k.transpose(-2, -1)).masked_fill(torch.tensor(True), float("-inf"))
        return scores.softmax(-1) @ cache_v, cache_k, cache_v

    ok, out = verdict(check_kv_cache_step, hides_all, capsys)
    assert not ok and "hid every key" in out


# --- every chapter-07 exercise: an unwritten stub is "not attempted" -------------------------------------------


@pytest.mark.parametrize("check", [check_gpt_block, check_sampling_step, check_top_p, check_kv_cache_step])
def test_an_unwritten_stub_is_not_attempted(check, capsys):
    ok, out = verdict(check, todo, capsys)
    assert not ok and "not written yet" in out


# --- the verdict table: every answer above, the verdict it must get and the words its message must hold ---------

VERDICTS = [
    *verdict_rows(check_gpt_block, BLOCK_RIGHT, BLOCK_WRONG, says="GPT block is right"),
    *verdict_rows(check_kv_cache_step, KV_RIGHT, KV_WRONG, says="key/value cache step is right"),
]


test_each_answer_gets_its_verdict = verdict_table_test(VERDICTS)
