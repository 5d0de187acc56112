"""Helpers the tests share (a module of its own: the notebooks' conftest.py would shadow a `conftest` import)."""

import collections
import importlib
import sys
from pathlib import Path

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
