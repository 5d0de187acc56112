"""What every checker shares: calling the student's function safely, comparing tensors, the verdict."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from ..settings import GRADE_LOG


class NotYet(Exception):
    """The student's answer differs from the reference; the message says how."""


class NotWritten(NotYet):
    """The student's function still raises ``NotImplementedError``: the exercise is not attempted yet."""


def call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    try:
        return fn(*args, **kwargs)
    except NotImplementedError:
        raise NotWritten(
            f"{fn.__name__} is not written yet: replace `raise NotImplementedError`, then run this cell again."
        ) from None
    except Exception as e:  # the student's bug, reported rather than raised
        raise NotYet(f"{fn.__name__} raised {type(e).__name__}: {e}") from None


def same(got: object, expected: Tensor, what: str, atol: float = 1e-5) -> None:
    if not isinstance(got, Tensor):
        raise NotYet(f"{what} should be a torch.Tensor; got {type(got).__name__}")
    if got.shape != expected.shape:
        raise NotYet(f"{what} has shape {tuple(got.shape)}; expected {tuple(expected.shape)}")
    if (got.dtype == torch.bool) != (expected.dtype == torch.bool):
        raise NotYet(f"{what} has dtype {got.dtype}; expected {expected.dtype}")
    bad = (got.double() - expected.double()).abs() > atol + 1e-4 * expected.double().abs()
    if bad.any():
        where = tuple(int(i) for i in bad.nonzero()[0])
        raise NotYet(
            f"{what} differs at index {where}: got {got[where].item():.6g}, expected {expected[where].item():.6g}"
        )


def differs(got: object, reference: Tensor) -> bool:
    return not (
        isinstance(got, Tensor)
        and got.shape == reference.shape
        and torch.allclose(got.double(), reference.double(), atol=1e-5)
    )


def name_mistake(got: object, expected: Tensor, mistakes: list[tuple[Tensor, str]], context: str = "") -> None:
    """Raise ``NotYet`` naming the first mistake whose buggy result ``got`` equals (and ``expected`` does not):
    ``mistakes`` pairs what a classic bug computes with the message that names it."""
    for buggy, message in mistakes:
        if not differs(got, buggy) and differs(buggy, expected):
            raise NotYet(f"{context}: {message}" if context else message)


class Verdict:
    """The outcome of a check: ``bool(verdict)`` says whether it passed; ``.message`` says why."""

    def __init__(self, passed: bool, message: str) -> None:
        self.passed, self.message = passed, message

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        return f"Verdict(passed={self.passed})"

    def _ipython_display_(self) -> None:  # the message is already printed; show nothing more
        pass


def verdict(run: Callable[[], str], name: str | None = None) -> Verdict:
    """Run a checker's test (a function ``run`` defined inside a ``check_*`` function), print its verdict and
    return it. When a grader asks for it (``COURSE_GRADE_LOG``), the exercise's name (``name``, by default the
    checker's) and the outcome are recorded."""
    status = "pass"
    try:
        message = "✅ " + run()
    except NotYet as e:
        message = "❌ " + str(e)
        status = "not attempted" if isinstance(e, NotWritten) else "fail"
    print(message)
    log = GRADE_LOG.value()
    if log:
        checker = name or run.__qualname__.split(".")[0]  # run is defined in check_*: "check_layer_norm.<locals>.run"
        record = {"check": checker, "status": status, "message": message}
        with open(log, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
    return Verdict(status == "pass", message)
