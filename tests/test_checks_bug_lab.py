"""The checkers of ``course_utils.checks.bug_lab``, the bug lab (chapter 09), against students' answers: right
answers written in other styles pass, each classic mistake fails with a message that names it, and an unwritten stub
is reported as not attempted.
"""

import numpy as np
import pytest
import torch
from helpers import judged, todo, wrong_choices
from torch import nn

from course_utils.checks import (
    check_diagnosis,
    check_future_leak,
)
from course_utils.checks.bug_lab import MYSTERIES, mystery_model


def right_forms(letter):
    """A letter as students write it: lower case, upper case, in parentheses, with spaces."""
    return [letter, letter.upper(), f"({letter})", f" {letter} "]


def measuring(name, letter):
    """A diagnosis that runs mystery ``name`` on a batch, prints what it saw and returns ``letter``."""

    def diagnose():
        if name == "C":
            attention = nn.MultiheadAttention(8, 2, batch_first=True)
            x = torch.randn(1, 3, 8)
            print(mystery_model("C", attention)(x, x, x)[0].shape)
        else:
            print(mystery_model(name)(torch.randint(1, 12, (2, 5))).shape)
        return letter

    return diagnose


@pytest.mark.parametrize("name", sorted(MYSTERIES))
def test_a_diagnosis_is_right_as_a_function_that_measures_then_returns_it(name, capsys):
    for form in right_forms(MYSTERIES[name].answer):
        assert check_diagnosis(measuring(name, form), name), capsys.readouterr().out


def test_a_diagnosis_that_reaches_its_probe_through_defaults_or_a_closure_is_no_guess(capsys):
    """code_names sees no local name: a probe passed as a default argument, or held by a closure, still measures."""
    from course_utils import causality_probe

    ids = torch.randint(1, 12, (2, 8))

    def with_defaults(model=mystery_model("A"), probe=causality_probe):  # noqa: B008  (as a student may write it)
        print(probe(model, ids, 12))
        return "a"

    def make(measure, letter):
        def diagnose():
            print(measure())
            return letter

        return diagnose

    for diagnose in (with_defaults, make(lambda: causality_probe(mystery_model("A"), ids, 12), "a")):
        assert check_diagnosis(diagnose, "A"), capsys.readouterr().out


@pytest.mark.parametrize("name", sorted(MYSTERIES))
def test_a_wrong_diagnosis_is_explained(name, capsys):
    m = MYSTERIES[name]

    def crashes():
        raise ValueError("the probe needs a model")

    guesses = {"A": lambda: "a", "B": lambda: "D", "C": lambda: " (c) ", "D": lambda: "b"}  # right, measuring nothing

    def guess():
        print("I think it is this one")
        return guesses[name]()

    def reads_the_key():
        return MYSTERIES[name].answer

    def reads_it_by_getattr():
        return getattr(MYSTERIES[name], "answer")  # noqa: B009

    assert all(guesses[n]().strip(" ()").lower() == MYSTERIES[n].answer for n in MYSTERIES)
    wrong = [
        *((measuring(name, letter), words) for letter, words in wrong_choices(m)),
        (m.answer, "a letter on its own is a guess"),
        (guess, "without measuring anything"),
        (guesses[name], "without measuring anything"),
        (reads_the_key, "reads the answer key"),
        (reads_it_by_getattr, "reads the answer key"),
        (lambda m=m: m.answer, "reads the answer key"),  # the notebook's loop leaves a Mystery in a global
        (crashes, "raised ValueError: the probe needs a model"),
        (todo, "not written yet"),
        (None, "probe mystery"),
    ]
    for answer, words in wrong:
        assert not check_diagnosis(answer, name)
        out = capsys.readouterr().out
        assert words in out, (answer, out)


# --- 09: the causality probe's core step ------------------------------------------------------------------------------


def leak_solution(fn, tokens, j, new_id):  # the notebook's solution
    changed = tokens.clone()
    changed[:, j] = new_id
    with torch.no_grad():
        return float((fn(changed)[:, :j] - fn(tokens)[:, :j]).abs().max())


def leak_where_one_call(fn, tokens, j, new_id):
    """torch.where builds the changed batch; both batches go through the model in one call; a 0-d tensor back."""
    B, T = tokens.shape
    at_j = torch.arange(T, device=tokens.device) == j
    changed = torch.where(at_j, torch.full_like(tokens, new_id), tokens)
    with torch.inference_mode():
        out = fn(torch.cat([tokens, changed]))
    return (out[B:, :j] - out[:B, :j]).abs().amax()


def leak_loop(fn, tokens, j, new_id):
    """A loop over the earlier positions, max() of Python floats, index_fill for the copy."""
    changed = tokens.index_fill(1, torch.tensor([j]), new_id)
    before, after = fn(tokens).detach(), fn(changed).detach()
    return max(float((after[:, i] - before[:, i]).abs().max()) for i in range(j))


def leak_numpy(fn, tokens, j, new_id):
    changed = tokens.detach().clone()
    changed[:, j].fill_(new_id)
    with torch.no_grad():
        a, b = fn(tokens).numpy(), fn(changed).numpy()
    return np.abs(b[:, :j] - a[:, :j]).max()


def leak_with(mistake):
    def probe(fn, tokens, j, new_id):
        changed = tokens if mistake == "in-place" else tokens.clone()
        before = fn(tokens).detach()
        position = {"token-0": 0, "token-j-1": j - 1}.get(mistake, j)
        if mistake == "first-sequence":
            changed[0, position] = new_id
        elif mistake == "row-j":
            changed[j] = new_id
        elif mistake == "row-j-mod-B":
            changed[j % len(tokens)] = new_id
        elif mistake == "from-j-on":
            changed[:, j:] = new_id
        else:
            changed[:, position] = 0 if mistake == "hard-coded-new-id" else new_id
        with torch.no_grad():
            diff = fn(changed) - before
        part = {
            "position-0": diff[:, :1],
            "position-j-1": diff[:, j - 1 : j],
            "through-j": diff[:, : j + 1],
            "everywhere": diff,
            "after-j": diff[:, j + 1 :],
            "before-j-1": diff[:, : j - 1],
        }.get(mistake, diff[:, :j])
        if mistake == "before-j-1" and part.numel() == 0:
            return 0.0
        if mistake == "squared":
            return part.pow(2).max().item()
        if mistake == "int":
            return int(part.abs().max().item())
        if mistake == "mean-of-each-max":
            return part.abs().flatten(1).amax(1).mean().item()
        if mistake == "difference-of-max":
            with torch.no_grad():
                return abs(fn(changed)[:, :j].max().item() - before[:, :j].max().item())
        if mistake == "mean":
            return part.abs().mean().item()
        if mistake == "no-abs":
            return part.max().item()
        if mistake == "meta":
            return part.abs().max().to("meta")
        return part.abs().max().item()

    return probe


@pytest.mark.parametrize(
    "fn",
    [leak_solution, leak_where_one_call, leak_loop, leak_numpy, leak_with(None)],
    ids=["notebook", "where-one-call-tensor", "loop-index-fill", "numpy", "detached-base"],
)
def test_future_leak_right_answers_pass(fn, capsys):
    judged(check_future_leak, fn, None, capsys)


@pytest.mark.parametrize(
    ("mistake", "named"),
    [
        ("position-0", "only position 0 is compared"),
        ("position-j-1", "only position j - 1 is compared"),
        ("through-j", "you include position j itself"),
        ("everywhere", "you compare every position"),
        ("after-j", "you compare the positions after j"),
        ("token-0", "token 0 is changed, not token j"),
        ("first-sequence", "only the first sequence's token j is changed"),
        ("row-j", "j indexes dimension 0, the batch"),
        ("hard-coded-new-id", "token j is set to 0, not to new_id"),
        ("mean", "that is the mean change"),
        ("no-abs", "without .abs()"),
        ("in-place", "changed its input tokens in place"),
        ("meta", "tensor on meta"),
        ("before-j-1", "position j - 1 is left out"),
        ("token-j-1", "token j - 1 is changed, not token j"),
        ("from-j-on", "every token from j on is changed"),
        ("row-j-mod-B", "a whole sequence (row j of the batch) is changed"),
        ("squared", "the square of the largest change"),
        ("int", "cut to a whole number"),
        ("mean-of-each-max", "the mean over the sequences of each one's largest change"),
        ("difference-of-max", "the change of the largest output, not the largest change"),
    ],
)
def test_future_leak_wrong_answers_fail(mistake, named, capsys):
    judged(check_future_leak, leak_with(mistake), named, capsys)
