"""Chapter 07's checkers against students' answers: right ones written in other ways pass, classic mistakes fail
with a message that names them (the GPT block, one sampling step, top-p, one key/value cache step)."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers import verdict

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


@pytest.mark.parametrize("fn", BLOCK_RIGHT, ids=[f.__name__ for f in BLOCK_RIGHT])
def test_gpt_block_right_answers_pass(fn, capsys):
    ok, out = verdict(check_gpt_block, fn, capsys)
    assert ok, out
    assert "GPT block is right" in out


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


@pytest.mark.parametrize("fn, words", BLOCK_WRONG, ids=ids(BLOCK_WRONG))
def test_gpt_block_wrong_answers_fail_and_are_named(fn, words, capsys):
    ok, out = verdict(check_gpt_block, fn, capsys)
    assert not ok and out.startswith("❌"), out
    assert words in out, out
    assert "could not be tested" not in out


# --- one sampling step -----------------------------------------------------------------------------------------


def sample_solution(logits, temperature, top_k, generator):  # the notebook's solution
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)  # (B, 1)
    z = logits / temperature  # (B, V)
    if top_k is not None:
        kth_largest = torch.topk(z, top_k).values[:, -1:]  # (B, 1)
        z = z.masked_fill(z < kth_largest, float("-inf"))
    return torch.multinomial(z.softmax(dim=-1), num_samples=1, generator=generator)  # (B, 1)


def sample_among_top_k(logits, temperature, top_k, generator):  # draw among the k kept, map back with gather
    if not temperature:
        return torch.argmax(logits, -1, keepdim=True)
    z = logits / temperature
    if top_k is None:
        return torch.multinomial(F.softmax(z, dim=-1), 1, generator=generator)
    values, indices = torch.topk(z, k=top_k, dim=-1)  # (B, k) each
    choice = torch.multinomial(F.softmax(values, dim=-1), num_samples=1, generator=generator)  # (B, 1) in 0 .. k-1
    return indices.gather(-1, choice)


def sample_gumbel_max(logits, temperature, top_k, generator):  # argmax(z + Gumbel noise) draws from softmax(z)
    if temperature == 0:
        return logits.argmax(-1).unsqueeze(-1)
    z = logits.double() / temperature
    if top_k:
        z = torch.where(z < z.topk(top_k, dim=-1).values[..., [-1]], -math.inf, z)
    u = torch.rand(z.shape, generator=generator, dtype=torch.float64).clamp_min(1e-12)
    return (z - torch.log(-torch.log(u))).argmax(dim=-1, keepdim=True)


def sample_float64_probs(logits, temperature, top_k, generator):
    if temperature == 0.0:
        return logits.max(dim=-1, keepdim=True).indices
    z = logits.to(torch.float64).div(temperature)
    if top_k is not None:
        kth = z.sort(dim=-1, descending=True).values[:, top_k - 1 : top_k]
        z[z < kth] = float("-inf")  # z is a new tensor: the caller's logits are untouched
    probs = torch.exp(z - z.logsumexp(-1, keepdim=True))
    return torch.multinomial(probs, 1, replacement=True, generator=generator).long()


SAMPLE_RIGHT = [sample_solution, sample_among_top_k, sample_gumbel_max, sample_float64_probs]


@pytest.mark.parametrize("fn", SAMPLE_RIGHT, ids=[f.__name__ for f in SAMPLE_RIGHT])
def test_sampling_step_right_answers_pass(fn, capsys):
    ok, out = verdict(check_sampling_step, fn, capsys)
    assert ok, out
    assert "sampling step is right" in out


def sample_seeds_inside(logits, temperature, top_k, generator):  # ignores its generator argument
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    torch.manual_seed(0)
    z = logits / temperature
    if top_k is not None:
        z = z.masked_fill(z < torch.topk(z, top_k).values[:, -1:], float("-inf"))
    return torch.multinomial(z.softmax(dim=-1), num_samples=1)


def sample_own_generator(logits, temperature, top_k, generator):  # a seed written into the code
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    z = logits / temperature
    if top_k is not None:
        z = z.masked_fill(z < torch.topk(z, top_k).values[:, -1:], float("-inf"))
    return torch.multinomial(z.softmax(dim=-1), num_samples=1, generator=torch.Generator().manual_seed(0))


def sample_global_rng(logits, temperature, top_k, generator):
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    z = logits / temperature
    if top_k is not None:
        z = z.masked_fill(z < torch.topk(z, top_k).values[:, -1:], float("-inf"))
    return torch.multinomial(z.softmax(dim=-1), num_samples=1)


def sample_temperature_after_softmax(logits, temperature, top_k, generator):
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    z = logits
    if top_k is not None:
        z = z.masked_fill(z < torch.topk(z, top_k).values[:, -1:], float("-inf"))
    probs = z.softmax(dim=-1) / temperature
    return torch.multinomial(probs, num_samples=1, generator=generator)


def sample_double_softmax(logits, temperature, top_k, generator):  # the temperature divides the probabilities
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    z = logits.softmax(dim=-1) / temperature
    if top_k is not None:
        z = z.masked_fill(z < torch.topk(z, top_k).values[:, -1:], float("-inf"))
    return torch.multinomial(z.softmax(dim=-1), num_samples=1, generator=generator)


def sample_temperature_ignored(logits, temperature, top_k, generator):
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    z = logits
    if top_k is not None:
        z = z.masked_fill(z < torch.topk(z, top_k).values[:, -1:], float("-inf"))
    return torch.multinomial(z.softmax(dim=-1), num_samples=1, generator=generator)


def sample_argmax_always(logits, temperature, top_k, generator):
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    z = logits / temperature
    if top_k is not None:
        z = z.masked_fill(z < torch.topk(z, top_k).values[:, -1:], float("-inf"))
    return z.softmax(dim=-1).argmax(dim=-1, keepdim=True)


def sample_divides_in_place(logits, temperature, top_k, generator):
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    logits /= temperature
    if top_k is not None:
        logits = logits.masked_fill(logits < torch.topk(logits, top_k).values[:, -1:], float("-inf"))
    return torch.multinomial(logits.softmax(dim=-1), num_samples=1, generator=generator)


def sample_masked_fill_in_place(logits, temperature, top_k, generator):
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    if top_k is not None:
        logits.masked_fill_(logits < torch.topk(logits, top_k).values[:, -1:], float("-inf"))
    return torch.multinomial((logits / temperature).softmax(dim=-1), num_samples=1, generator=generator)


def sample_temperature_hard_coded(logits, temperature, top_k, generator):
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    z = logits / 0.5
    if top_k is not None:
        z = z.masked_fill(z < torch.topk(z, top_k).values[:, -1:], float("-inf"))
    return torch.multinomial(z.softmax(dim=-1), num_samples=1, generator=generator)


def sample_k_hard_coded(logits, temperature, top_k, generator):
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    z = logits / temperature
    if top_k is not None:
        z = z.masked_fill(z < torch.topk(z, 3).values[:, -1:], float("-inf"))
    return torch.multinomial(z.softmax(dim=-1), num_samples=1, generator=generator)


def sample_k_hard_coded_one(logits, temperature, top_k, generator):
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    z = logits / temperature
    if top_k is not None:
        z = z.masked_fill(z < torch.topk(z, 1).values[:, -1:], float("-inf"))
    return torch.multinomial(z.softmax(dim=-1), num_samples=1, generator=generator)


def sample_multiplies(logits, temperature, top_k, generator):
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    z = logits * temperature
    if top_k is not None:
        z = z.masked_fill(z < torch.topk(z, top_k).values[:, -1:], float("-inf"))
    return torch.multinomial(z.softmax(dim=-1), num_samples=1, generator=generator)


def sample_fills_zero(logits, temperature, top_k, generator):
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    z = logits / temperature
    if top_k is not None:
        z = z.masked_fill(z < torch.topk(z, top_k).values[:, -1:], 0.0)
    return torch.multinomial(z.softmax(dim=-1), num_samples=1, generator=generator)


def sample_top_k_of_first_row(logits, temperature, top_k, generator):  # the k-th largest of row 0 for every row
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    z = logits / temperature
    if top_k is not None:
        z = z.masked_fill(z < torch.topk(z, top_k).values[0, -1], float("-inf"))
    return torch.multinomial(z.softmax(dim=-1), num_samples=1, generator=generator)


def sample_divides_by_zero(logits, temperature, top_k, generator):
    z = logits / temperature
    if top_k is not None:
        z = z.masked_fill(z < torch.topk(z, top_k).values[:, -1:], float("-inf"))
    return torch.multinomial(z.softmax(dim=-1), num_samples=1, generator=generator)


def sample_on_meta(logits, temperature, top_k, generator):
    return sample_solution(logits, temperature, top_k, generator).to("meta")


def sample_flat_ids(logits, temperature, top_k, generator):  # (B,) instead of (B, 1)
    return sample_solution(logits, temperature, top_k, generator).view(-1)


SAMPLE_WRONG = [
    (sample_seeds_inside, "draw with the generator you are given"),
    (sample_own_generator, "draw with the generator you are given"),
    (sample_global_rng, "the same seed gives different tokens"),
    (sample_temperature_after_softmax, "before the softmax"),
    (sample_double_softmax, "the softmax is taken twice"),
    (sample_temperature_ignored, "the temperature has no effect"),
    (sample_argmax_always, "always the most likely token"),
    (sample_divides_in_place, IN_PLACE),
    (sample_masked_fill_in_place, IN_PLACE),
    (sample_temperature_hard_coded, "is a value written into the code"),
    (sample_k_hard_coded, "is a value written into the code"),
    (sample_k_hard_coded_one, "the draws keep only the largest logit, not top_k = 3"),
    (sample_multiplies, "multiplied by the temperature"),
    (sample_fills_zero, "not 0"),
    (sample_divides_by_zero, "at temperature 0"),
    (sample_on_meta, "meta"),
    (sample_flat_ids, "(B, 1)"),
]


@pytest.mark.parametrize("fn, words", SAMPLE_WRONG, ids=ids(SAMPLE_WRONG))
def test_sampling_step_wrong_answers_fail_and_are_named(fn, words, capsys):
    ok, out = verdict(check_sampling_step, fn, capsys)
    assert not ok and out.startswith("❌"), out
    assert words in out, out
    assert "could not be tested" not in out


def test_a_top_k_threshold_from_the_first_row_only_is_not_passed(capsys):
    ok, out = verdict(check_sampling_step, sample_top_k_of_first_row, capsys)
    assert not ok and "could not be tested" not in out, out


def test_the_in_place_division_is_named_as_such_not_as_an_ignored_temperature(capsys):
    ok, out = verdict(check_sampling_step, sample_divides_in_place, capsys)
    assert not ok and "temperature has no effect" not in out and "ignored" not in out, out


# --- top-p -----------------------------------------------------------------------------------------------------


def top_p_solution(logits, p):  # the notebook's solution
    probs = logits.softmax(dim=-1)  # (B, V)
    sorted_probs, order = probs.sort(dim=-1, descending=True)  # (B, V) each, most likely first
    before = sorted_probs.cumsum(dim=-1) - sorted_probs  # (B, V): the mass of the more likely tokens
    keep = (before < p).scatter(-1, order, before < p)  # (B, V), back in vocabulary order
    kept = probs * keep
    return kept / kept.sum(dim=-1, keepdim=True)


def top_p_row_loop(logits, p):  # plain Python over each row
    probs = torch.softmax(logits, dim=-1)
    out = torch.zeros_like(probs)
    for b in range(probs.shape[0]):
        total = 0.0
        for i in sorted(range(probs.shape[1]), key=lambda i: -probs[b, i].item()):
            out[b, i] = probs[b, i]
            total += probs[b, i].item()
            if total >= p:
                break
        out[b] = out[b] / out[b].sum()
    return out


def top_p_filtered_logits(logits, p):  # -inf on the sorted logits, scattered back, then the softmax
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
    cumulative = sorted_logits.softmax(-1).cumsum(-1)
    crossed_before = torch.cat([torch.zeros_like(cumulative[:, :1]), cumulative[:, :-1]], dim=-1) >= p
    sorted_logits = sorted_logits.masked_fill(crossed_before, float("-inf"))
    return torch.empty_like(logits).scatter(-1, order, sorted_logits).softmax(-1)


def top_p_searchsorted(logits, p):  # the index of the crossing token, then a rank mask
    probs = logits.double().softmax(-1)
    sorted_probs, order = probs.sort(-1, descending=True)
    cumulative = sorted_probs.cumsum(-1)
    last = torch.searchsorted(cumulative, torch.full((probs.size(0), 1), p, dtype=cumulative.dtype))  # (B, 1)
    keep_sorted = torch.arange(probs.size(-1)) <= last  # (B, V)
    keep = torch.zeros_like(keep_sorted).scatter(1, order, keep_sorted)
    nucleus = torch.where(keep, probs, 0.0)
    return (nucleus / nucleus.sum(-1, keepdim=True)).float()


def top_p_hugging_face(logits, p):  # remove tokens above the threshold, shifted right by one: the crossing one stays
    sorted_logits, order = logits.sort(descending=True)
    remove = sorted_logits.softmax(-1).cumsum(-1) > p
    remove[..., 1:] = remove[..., :-1].clone()
    remove[..., 0] = False
    return logits.masked_fill(remove.scatter(1, order, remove), float("-inf")).softmax(-1)


TOP_P_RIGHT = [top_p_solution, top_p_row_loop, top_p_filtered_logits, top_p_searchsorted, top_p_hugging_face]


@pytest.mark.parametrize("fn", TOP_P_RIGHT, ids=[f.__name__ for f in TOP_P_RIGHT])
def test_top_p_right_answers_pass(fn, capsys):
    ok, out = verdict(check_top_p, fn, capsys)
    assert ok, out
    assert "top-p is right" in out


def _top_p(logits, p, *, descending=True, crossing=True, renormalise=True, extra=0):
    probs = logits.softmax(dim=-1)
    sorted_probs, order = probs.sort(dim=-1, descending=descending)
    cumulative = sorted_probs.cumsum(dim=-1)
    keep = cumulative - sorted_probs < p if crossing else cumulative < p
    if extra:  # also the token(s) after the one that crosses p
        keep = keep | torch.cat([torch.ones_like(keep[:, :extra]), keep[:, :-extra]], dim=-1)
    keep = keep.scatter(-1, order, keep)
    kept = probs * keep
    return kept / kept.sum(dim=-1, keepdim=True) if renormalise else kept


def top_p_crossing_excluded(logits, p):
    return _top_p(logits, p, crossing=False)


def top_p_crossing_excluded_but_first(logits, p):
    probs = logits.softmax(dim=-1)
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    keep = sorted_probs.cumsum(dim=-1) < p
    keep[:, 0] = True
    keep = keep.scatter(-1, order, keep)
    kept = probs * keep
    return kept / kept.sum(dim=-1, keepdim=True)


def top_p_one_past_crossing(logits, p):
    return _top_p(logits, p, extra=1)


def top_p_not_renormalised(logits, p):
    return _top_p(logits, p, renormalise=False)


def top_p_sorted_ascending(logits, p):
    return _top_p(logits, p, descending=False)


def top_p_sorted_ascending_cumulative(logits, p):  # at p = 0.5 this is also the inverted mask's result
    probs = logits.softmax(-1)
    sorted_probs, order = torch.sort(probs)
    keep = sorted_probs.cumsum(-1) < p
    keep = keep.scatter(-1, order, keep)
    return probs * keep / (probs * keep).sum(-1, keepdim=True)


def top_p_inverted(logits, p):
    probs = logits.softmax(-1)
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    remove = sorted_probs.cumsum(-1) - sorted_probs < p  # meant as the tokens to remove
    remove = remove.scatter(-1, order, remove)
    kept = probs.masked_fill(remove, 0.0)
    return kept / kept.sum(-1, keepdim=True)


def top_p_p_hard_coded(logits, p):
    return _top_p(logits, 0.5)


def top_p_p_hard_coded_last(logits, p):
    return _top_p(logits, 0.9)


def top_p_in_place(logits, p):
    sorted_logits, order = logits.sort(descending=True)
    remove = sorted_logits.softmax(-1).cumsum(-1) - sorted_logits.softmax(-1) >= p
    logits[remove.scatter(1, order, remove)] = float("-inf")
    return logits.softmax(-1)


def top_p_unsorted(logits, p):
    probs = logits.softmax(-1)
    keep = probs.cumsum(-1) - probs < p
    kept = probs * keep
    return kept / kept.sum(-1, keepdim=True)


def top_p_not_scattered_back(logits, p):
    probs = logits.softmax(-1)
    sorted_probs, _ = probs.sort(dim=-1, descending=True)
    keep = sorted_probs.cumsum(-1) - sorted_probs < p
    kept = probs * keep
    return kept / kept.sum(-1, keepdim=True)


def top_p_on_meta(logits, p):
    return top_p_solution(logits, p).to("meta")


def top_p_returns_logits(logits, p):
    keep = top_p_solution(logits, p) > 0
    return logits.masked_fill(~keep, float("-inf"))


TOP_P_WRONG = [
    (top_p_crossing_excluded, "a row kept no token"),
    (top_p_crossing_excluded_but_first, "the token that crosses p is dropped"),
    (top_p_one_past_crossing, "one token too many"),
    (top_p_not_renormalised, "renormalise"),
    (top_p_sorted_ascending, "descending=True"),
    (top_p_sorted_ascending, "ascending"),
    (top_p_sorted_ascending_cumulative, "sorted in ascending order"),
    (top_p_inverted, "keeps the tail"),
    (top_p_p_hard_coded, "is p written into the code"),
    (top_p_p_hard_coded_last, "is p written into the code"),
    (top_p_in_place, IN_PLACE),
    (top_p_unsorted, "sort them in descending order"),
    (top_p_not_scattered_back, "still in sorted order"),
    (top_p_on_meta, "meta"),
    (top_p_returns_logits, "return probabilities"),
]


@pytest.mark.parametrize("fn, words", TOP_P_WRONG, ids=ids(TOP_P_WRONG))
def test_top_p_wrong_answers_fail_and_are_named(fn, words, capsys):
    ok, out = verdict(check_top_p, fn, capsys)
    assert not ok and out.startswith("❌"), out
    assert words in out, out
    assert "could not be tested" not in out


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


@pytest.mark.parametrize("fn", KV_RIGHT, ids=[f.__name__ for f in KV_RIGHT])
def test_kv_cache_step_right_answers_pass(fn, capsys):
    ok, out = verdict(check_kv_cache_step, fn, capsys)
    assert ok, out
    assert "key/value cache step is right" in out


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


@pytest.mark.parametrize("fn, words", KV_WRONG, ids=ids(KV_WRONG))
def test_kv_cache_step_wrong_answers_fail_and_are_named(fn, words, capsys):
    ok, out = verdict(check_kv_cache_step, fn, capsys)
    assert not ok and out.startswith("❌"), out
    assert words in out, out
    assert "could not be tested" not in out
