"""What every checker shares: calling the student's function safely, comparing tensors, the verdict."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Generator
from typing import Any

import numpy as np
import torch
from torch import Tensor


class NotYet(Exception):
    """The student's answer differs from the reference; the message says how."""


class NotWritten(NotYet):
    """The student's function still raises ``NotImplementedError``: the exercise is not attempted yet."""


def _plain(result: Any, name: str) -> Any:
    """``result`` if its tensors are plain ``torch.Tensor`` (or parameters): a tensor subclass can answer a comparison
    however it likes, so a checker does not compare one."""
    if isinstance(result, Tensor) and type(result) not in (Tensor, torch.nn.Parameter):
        raise NotYet(f"{name} returned a {type(result).__name__}, a subclass of torch.Tensor: return a plain tensor")
    if isinstance(result, tuple | list):
        for item in result:  # pyright: ignore[reportUnknownVariableType]
            _plain(item, name)
    return result


def call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    try:
        result = fn(*args, **kwargs)
    except NotImplementedError:
        raise NotWritten(
            f"{fn.__name__} is not written yet: replace `raise NotImplementedError`, then run this cell again."
        ) from None
    except Exception as e:  # the student's bug, reported rather than raised
        raise NotYet(f"{fn.__name__} raised {type(e).__name__}: {e}") from None
    return _plain(result, getattr(fn, "__name__", "your function"))


def same(got: object, expected: Tensor, what: str, atol: float = 1e-5) -> None:
    if not isinstance(got, Tensor):
        raise NotYet(f"{what} should be a torch.Tensor; got {type(got).__name__}")
    _plain(got, what)
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
    """The outcome of a check: ``bool(verdict)`` says whether it passed; ``.message`` says why; ``.exercise`` names the
    exercise graded (``check_layer_norm``, ``check_prediction[scaling]``) and ``.status`` is ``pass``, ``fail`` or
    ``not attempted``: the grader (``python -m course_utils.grade``) reads these."""

    def __init__(self, passed: bool, message: str, exercise: str = "", status: str | None = None) -> None:
        self.passed, self.message, self.exercise = passed, message, exercise
        self.status = status or ("pass" if passed else "fail")

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        return f"Verdict(passed={self.passed})"

    def _ipython_display_(self) -> None:  # the message is already printed; show nothing more
        pass


@contextlib.contextmanager
def students_random_state_kept() -> Generator[None, None, None]:
    """Within the block a checker may seed and draw as it likes; after it, Python's, NumPy's and PyTorch's (CPU)
    random generators are as the student's notebook left them, so its later draws do not depend on the check."""
    python, numpy = random.getstate(), np.random.get_state()
    with torch.random.fork_rng(devices=[]):
        try:
            yield
        finally:
            random.setstate(python)
            np.random.set_state(numpy)


def verdict(run: Callable[[], str], name: str | None = None) -> Verdict:
    """Run a checker's test (a function ``run`` defined inside a ``check_*`` function), print its verdict and
    return it, named ``name`` (by default the checker's own name). The student's random state is kept."""
    status = "pass"
    try:
        with students_random_state_kept():
            message = "✅ " + run()
    except NotYet as e:
        message = "❌ " + str(e)
        status = "not attempted" if isinstance(e, NotWritten) else "fail"
    print(message)
    exercise = name or run.__qualname__.split(".")[0]  # run is defined in check_*: "check_layer_norm.<locals>.run"
    return Verdict(status == "pass", message, exercise, status)
