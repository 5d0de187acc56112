"""Helpers the tests share (a module of its own: the notebooks' conftest.py would shadow a `conftest` import)."""

import collections
import importlib
import sys
from pathlib import Path

import pytest
import torch
from _pytest.mark.structures import ParameterSet


def no_empty_rows(mask: torch.Tensor) -> torch.Tensor:
    """Allow the diagonal so that no query row is fully masked."""
    return mask | torch.eye(mask.size(-2), mask.size(-1), dtype=torch.bool)


# Whether the checkers' tests call the answers across the grader's link: the [remote] run of each, with
# TESTS_REMOTE_ANSWERS=1 (tests/conftest.py).
ACROSS_THE_LINK = False


def verdict(check, fn, capsys):
    """Run a checker on an answer: (passed, what it printed). In a test's [remote] run the answer runs as the grader
    runs it, across a link (``course_utils.remote.loopback``): every value crosses as data."""
    if ACROSS_THE_LINK and callable(fn):
        from course_utils.remote import loopback

        fn = loopback({"answer": fn}).hold("answer")
    ok = check(fn)
    return ok, capsys.readouterr().out


def attention_steps(query, key, value, mask=None):
    """Attention written step by step, as chapter 01's exercise asks (the checker refuses a ready-made one)."""
    scores = query @ key.transpose(-2, -1) / query.size(-1) ** 0.5  # (..., T_q, T_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights @ value, weights


def todo(*args, **kwargs):
    """An exercise not written yet."""
    raise NotImplementedError


def judged(check, fn, expected, capsys, says=None):
    """The verdict table's one assertion: a right answer (``expected`` None) passes with a ✅ (whose line holds
    ``says``, where given); a wrong one fails, its message naming ``expected``, and was tested (not "could not be
    tested")."""
    ok, out = verdict(check, fn, capsys)
    if expected is None:
        assert ok and out.startswith("✅") and (says is None or says in out), out
    else:
        assert not ok and out.startswith("❌") and expected in out, out
        assert "could not be tested" not in out, out


def _entry(answer):
    """(name, fn, words) from the ways a test file lists its answers: a function; (fn[, words]); (name, fn[, words]);
    pytest.param(fn[, words], id=name)."""
    if isinstance(answer, ParameterSet):
        fn, *words = answer.values
        return answer.id or fn.__name__, fn, (words or [None])[0]
    if callable(answer):
        return answer.__name__, answer, None
    if isinstance(answer[0], str):
        name, fn, *words = answer
        return name, fn, (words or [None])[0]
    fn, *words = answer
    words = (words or [None])[0]
    return (fn.__name__ if fn.__name__ != "<lambda>" else str(words)[:40]), fn, words


def verdict_rows(check, right, wrong, says=None):
    """One checker's rows of a verdict table, each (check, answer, expected, says) for ``judged``: every right answer
    (expected None: it passes) and every wrong one (expected: the words its message must hold), named
    ``checker: right|wrong: answer``."""
    topic = check.__name__.removeprefix("check_")
    rows = []
    for answers, kind in ((right, "right"), (wrong, "wrong")):
        for answer in answers:
            name, fn, words = _entry(answer)
            assert (words is None) == (kind == "right"), f"{topic}: {name} is listed as {kind}"
            rows.append(
                pytest.param(check, fn, words, says if kind == "right" else None, id=f"{topic}: {kind}: {name}")
            )
    return rows


def verdict_table_test(rows):
    """A test file's one test of its verdict table (rows from ``verdict_rows``): each row, one test case."""

    @pytest.mark.parametrize("check, answer, expected, says", rows)
    def test_each_answer_gets_its_verdict(check, answer, expected, says, capsys):
        judged(check, answer, expected, capsys, says)

    return test_each_answer_gets_its_verdict


def benchmark_module(name: str):
    """A script of benchmarks/ imported as a module (the scripts import each other by their file names)."""
    folder = str(Path(__file__).resolve().parent.parent / "benchmarks")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return importlib.import_module(name)


def operators(fn) -> collections.Counter:
    """The ATen operators that compute while ``fn()`` runs, by name (benchmarks/common.py's ``OperatorCount``)."""
    with benchmark_module("common").OperatorCount() as count:
        fn()
    return count.computing


# --- answers several checkers' tests share ---
def wrong_choices(q):
    """Every other letter, with the explanation of its misconception; then answers that are no letter at all."""
    letters = [(c, f"({c}) {q.choices[c]}") for c in q.choices if c != q.answer]
    return [
        *letters,
        ("z", "is not one of the choices"),
        ("b and c", "is not one of the choices"),
        (2, "is not one of the choices"),
        ("", "is not one of the choices"),
    ]


def rotary(x, positions, theta, *, pairing="halves", exponent=1.0, sign=1.0, theta_=None, ignore_positions=False,
           precedence=False, d_=None):  # fmt: skip
    """A rotary embedding of pairs (i, i + d/2), with one switch per classic mistake."""
    d, theta = d_ or x.size(-1), theta_ or theta
    pos = torch.arange(x.size(-2), device=x.device) if ignore_positions else positions
    two_i = torch.arange(0, d, 2, dtype=torch.float32, device=x.device)
    omega = (theta**-two_i) / d if precedence else theta ** (-exponent * two_i / d)
    angles = sign * pos.float()[:, None] * omega
    cos, sin = angles.cos(), angles.sin()
    if pairing == "interleaved":
        a, b = x[..., 0::2], x[..., 1::2]
        return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)
    a, b = x[..., : d // 2], x[..., d // 2 :]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)


# --- references and their classic variants --------------------------------------------------------------------


def rope_reference(x, exponent=1.0, halves=False, direction=1.0, start=0):
    """Rotary embedding of x (..., T, d): pairs (2i, 2i+1), or (i, i + d/2) with ``halves``."""
    T, d = x.shape[-2:]
    pos = torch.arange(start, start + T, dtype=torch.float32, device=x.device)[:, None]  # (T, 1)
    two_i = torch.arange(0, d, 2, dtype=torch.float32, device=x.device)  # (d / 2,)
    angle = direction * pos / 10000 ** (exponent * two_i / d)  # (T, d / 2)
    cos, sin = angle.cos(), angle.sin()
    first, second = (slice(0, d // 2), slice(d // 2, d)) if halves else (slice(0, d, 2), slice(1, d, 2))
    a, b = x[..., first], x[..., second]
    out = torch.empty_like(x)
    out[..., first], out[..., second] = a * cos - b * sin, a * sin + b * cos
    return out
