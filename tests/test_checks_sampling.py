"""The checkers of ``course_utils.checks.sampling``, sampling (chapter 07), against students' answers: right answers
written in other styles pass, each classic mistake fails with a message that names it, and an unwritten stub is
reported as not attempted.
"""

import math

import pytest
import torch
import torch.nn.functional as F
from helpers import verdict, verdict_rows, verdict_table_test

from course_utils.checks import check_sampling_step, check_top_p

IN_PLACE = "in place"


def ids(cases):
    return [fn.__name__ for fn, *_ in cases]


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
    crossing = torch.full((probs.size(0), 1), p, dtype=cumulative.dtype, device=probs.device)
    last = torch.searchsorted(cumulative, crossing)  # (B, 1)
    keep_sorted = torch.arange(probs.size(-1), device=probs.device) <= last  # (B, V)
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


def top_p_sorted_probabilities_returned(logits, p):  # the nucleus right, but left in sorted order
    sorted_probs, _ = logits.softmax(-1).sort(dim=-1, descending=True)
    kept = sorted_probs * (sorted_probs.cumsum(-1) - sorted_probs < p)
    return kept / kept.sum(-1, keepdim=True)


def top_p_gathered_back(logits, p):  # gather where scatter undoes the sort
    probs = logits.softmax(-1)
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    keep = (sorted_probs.cumsum(-1) - sorted_probs < p).gather(-1, order)
    kept = probs * keep
    return kept / kept.sum(-1, keepdim=True)


def top_p_cumsum_of_logits(logits, p):  # the running sum over sorted logits, not probabilities
    probs = logits.softmax(-1)
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    keep_sorted = sorted_logits.cumsum(-1) - sorted_logits < p
    kept = probs * keep_sorted.scatter(-1, order, keep_sorted)
    return kept / kept.sum(-1, keepdim=True)


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


def top_p_mask_made_on_the_cpu(logits, p):
    probs = logits.softmax(-1)
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    keep = sorted_probs.cumsum(-1) - sorted_probs < p
    mask = torch.zeros(probs.shape, dtype=torch.bool).scatter(-1, order, keep)  # no device=: on the CPU
    kept = probs * mask
    return kept / kept.sum(-1, keepdim=True)


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
    (top_p_sorted_probabilities_returned, "returned in sorted order"),
    (top_p_gathered_back, "put back with gather"),
    (top_p_cumsum_of_logits, "running sum is taken over the logits"),
    (top_p_on_meta, "meta"),
    (top_p_mask_made_on_the_cpu, "create new tensors on the inputs' device"),
    (top_p_returns_logits, "return probabilities"),
]


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


def test_sampling_step_keeping_one_token_too_many_is_named(capsys):
    def sorted_index_k(logits, temperature, top_k, generator):  # the k-th largest taken at index k, not k - 1
        if temperature == 0:
            return logits.argmax(dim=-1, keepdim=True)
        z = logits / temperature
        if top_k is not None:
            kth = z.sort(dim=-1, descending=True).values[:, top_k : top_k + 1]
            z = z.masked_fill(z < kth, float("-inf"))
        return torch.multinomial(z.softmax(-1), 1, generator=generator)

    ok, out = verdict(check_sampling_step, sorted_index_k, capsys)
    assert not ok and "keeps k + 1 tokens" in out, out


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


# --- the verdict table: every answer above, the verdict it must get and the words its message must hold ---------

VERDICTS = [
    *verdict_rows(check_sampling_step, SAMPLE_RIGHT, SAMPLE_WRONG, says="sampling step is right"),
    *verdict_rows(check_top_p, TOP_P_RIGHT, TOP_P_WRONG, says="top-p is right"),
]


test_each_answer_gets_its_verdict = verdict_table_test(VERDICTS)
