"""Helpers the tests share (a module of its own: the notebooks' conftest.py would shadow a `conftest` import)."""

import torch


def no_empty_rows(mask: torch.Tensor) -> torch.Tensor:
    """Allow the diagonal so that no query row is fully masked."""
    return mask | torch.eye(mask.size(-2), mask.size(-1), dtype=torch.bool)


def verdict(check, fn, capsys):
    """Run a checker on an answer: (passed, what it printed)."""
    ok = check(fn)
    return ok, capsys.readouterr().out


def todo(*args, **kwargs):
    """An exercise not written yet."""
    raise NotImplementedError


def judged(check, fn, expected, capsys):
    """The verdict matrix's one assertion: a right answer (``expected`` None) passes with a ✅; a wrong one fails, its
    message naming ``expected``, and was tested (not "could not be tested")."""
    ok, out = verdict(check, fn, capsys)
    if expected is None:
        assert ok and out.startswith("✅"), out
    else:
        assert not ok and out.startswith("❌") and expected in out, out
        assert "could not be tested" not in out, out
