"""Chapter 07's checkers accept the reference, name each classic mistake, and report an unwritten stub."""

import math

import pytest
import torch
import torch.nn.functional as F
from helpers import todo, verdict

from course_utils.checks import (
    check_gpt_block,
    check_kv_cache_step,
    check_sampling_step,
    check_top_p,
)

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


# --- one sampling step ---------------------------------------------------------------------------------------


def sampler(*, divide=True, use_temperature=True, use_top_k=True, fill=float("-inf"), invert=False, keep_fewer=False,
            greedy=False, use_generator=True):  # fmt: skip
    """A sampling step with one switch per classic mistake."""

    def sample(logits, temperature, top_k, generator):
        if temperature == 0 or greedy:
            return logits.argmax(dim=-1, keepdim=True)
        t = temperature if use_temperature else 1.0
        z = logits / t if divide else logits * t
        if top_k is not None and use_top_k:
            kth = torch.topk(z, top_k).values[:, -1:]
            drop = z >= kth if invert else z <= kth if keep_fewer else z < kth
            z = z.masked_fill(drop, fill)
        return torch.multinomial(z.softmax(-1), 1, generator=generator if use_generator else None)

    return sample


def test_sampling_step_reference_passes(capsys):
    ok, out = verdict(check_sampling_step, sampler(), capsys)
    assert ok and out.startswith("✅")


def test_sampling_step_accepts_another_way_of_drawing(capsys):
    def inverse_cdf(logits, temperature, top_k, generator):  # not torch.multinomial: the frequencies still agree
        if temperature == 0:
            return logits.argmax(dim=-1, keepdim=True)
        z = logits / temperature
        if top_k is not None:
            z = z.masked_fill(z < torch.topk(z, top_k).values[:, -1:], float("-inf"))
        u = torch.rand(z.size(0), 1, generator=generator)
        return torch.searchsorted(z.softmax(-1).cumsum(-1), u).clamp(max=z.size(-1) - 1)

    ok, out = verdict(check_sampling_step, inverse_cdf, capsys)
    assert ok, out


@pytest.mark.parametrize(
    "mistake, words",
    [
        ({"divide": False}, "multiplied by the temperature"),
        ({"use_temperature": False}, "temperature has no effect"),
        ({"use_top_k": False}, "top_k is ignored"),
        ({"fill": 0.0}, "not 0"),
        ({"invert": True}, "mask is inverted"),
        ({"keep_fewer": True}, "keeps k - 1 tokens"),
        ({"greedy": True}, "always the most likely token"),
        ({"use_generator": False}, "same seed gives different tokens"),
    ],
)
def test_sampling_step_mistakes_are_named(mistake, words, capsys):
    ok, out = verdict(check_sampling_step, sampler(**mistake), capsys)
    assert not ok and words in out


def test_sampling_step_dividing_by_temperature_zero_is_explained(capsys):
    ok, out = verdict(
        check_sampling_step, lambda logits, t, k, g: torch.multinomial((logits / t).softmax(-1), 1), capsys
    )
    assert not ok and "at temperature 0" in out and "argmax" in out


def test_sampling_step_returning_probabilities_is_named(capsys):
    ok, out = verdict(check_sampling_step, lambda logits, t, k, g: logits.softmax(-1), capsys)
    assert not ok and "(B, 1)" in out


# --- top-p -----------------------------------------------------------------------------------------------------


def top_p(*, crossing=True, sort=True, tail=False, renormalise=True, keep_first=False, back=True):
    """Top-p with one switch per classic mistake."""

    def nucleus(logits, p):
        probs = logits.softmax(-1)
        if sort:
            sorted_probs, order = probs.sort(dim=-1, descending=True)
        else:
            sorted_probs, order = probs, torch.arange(probs.size(-1)).expand_as(probs)
        cumulative = sorted_probs.cumsum(-1)
        keep = cumulative - sorted_probs < p if crossing else cumulative < p
        if keep_first:
            keep[:, 0] = True
        if tail:
            keep = ~keep
        keep = keep.scatter(-1, order, keep) if back else keep
        kept = probs * keep
        return kept / kept.sum(-1, keepdim=True) if renormalise else kept

    return nucleus


def test_top_p_reference_passes(capsys):
    ok, out = verdict(check_top_p, top_p(), capsys)
    assert ok and out.startswith("✅")


def test_top_p_hugging_face_formulation_passes(capsys):
    def shifted(logits, p):  # remove tokens above the threshold, shifted right by one: the crossing token stays
        sorted_logits, order = logits.sort(descending=True)
        remove = sorted_logits.softmax(-1).cumsum(-1) > p
        remove[..., 1:] = remove[..., :-1].clone()
        remove[..., 0] = False
        return logits.masked_fill(remove.scatter(1, order, remove), float("-inf")).softmax(-1)

    ok, out = verdict(check_top_p, shifted, capsys)
    assert ok, out


@pytest.mark.parametrize(
    "mistake, words",
    [
        ({"crossing": False, "keep_first": True}, "the token that crosses p is dropped"),
        ({"crossing": False}, "a row kept no token"),
        ({"sort": False}, "sort them in descending order"),
        ({"tail": True}, "keeps the tail"),
        ({"renormalise": False}, "renormalise"),
        ({"back": False}, "still in sorted order"),
    ],
)
def test_top_p_mistakes_are_named(mistake, words, capsys):
    ok, out = verdict(check_top_p, top_p(**mistake), capsys)
    assert not ok and words in out


def test_top_p_returning_logits_is_named(capsys):
    def logits_out(logits, p):
        keep = top_p()(logits, p) > 0
        return logits.masked_fill(~keep, float("-inf"))

    ok, out = verdict(check_top_p, logits_out, capsys)
    assert not ok and "return probabilities" in out


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


# --- the prediction --------------------------------------------------------------------------------------------
