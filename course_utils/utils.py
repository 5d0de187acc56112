"""Reproducibility, devices and evaluation mode, shared by every notebook."""

from __future__ import annotations

import contextlib
import dis
import inspect
import numbers
import random
import sys
import types
import weakref
from collections.abc import Callable, Generator
from typing import Any, TypeVar

import numpy as np
import torch
from torch import Tensor, nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from .settings import DEVICE, GPU_DRY_RUN

__all__ = [
    "count_parameters",
    "eval_mode",
    "get_device",
    "gpu_branch",
    "in_mode",
    "peak_memory",
    "set_seed",
    "synchronize",
]

M = TypeVar("M", bound=nn.Module)


def set_seed(seed: int = 0) -> None:
    """Seed Python's, NumPy's and PyTorch's (CPU and every GPU) random generators."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device


def get_device() -> torch.device:
    """The best device available: CUDA, then Apple's MPS, then the CPU.

    Set the environment variable ``COURSE_DEVICE`` (e.g. ``COURSE_DEVICE=cpu``) to force one;
    the committed notebook outputs are produced with ``COURSE_DEVICE=cpu``.
    """
    forced = DEVICE.value()
    if forced:
        return torch.device(forced)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def gpu_branch(device: torch.device | str) -> bool:
    """Whether a notebook takes its GPU branch (the larger recipe): on a CUDA device; or on any device when
    ``COURSE_GPU_DRY_RUN=1``, where ``train`` then stops after a few steps (``make gpu-dry-run`` runs every
    notebook so, to catch a GPU branch's bugs on a machine without a GPU)."""
    return torch.device(device).type == "cuda" or GPU_DRY_RUN.is_on()


def count_parameters(model: nn.Module, trainable_only: bool = True) -> int:
    """Number of (trainable) parameters; tied weights are counted once."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


@contextlib.contextmanager
def in_mode(model: M, training: bool) -> Generator[M, None, None]:
    """Within the block ``model`` is in training mode (``training=True``: dropout on) or evaluation mode;
    afterwards it is back in the mode it was in, even if the block raised."""
    was_training = model.training
    model.train(training)
    try:
        yield model
    finally:
        model.train(was_training)


def eval_mode(model: M) -> contextlib.AbstractContextManager[M]:
    """``in_mode(model, training=False)``: evaluation (dropout off) within the block, the previous mode after."""
    return in_mode(model, training=False)


def synchronize(device: torch.device | str) -> None:
    """Wait for the GPU's queued work to finish, so that a clock read afterwards measures it (no-op on the CPU)."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class _LiveTensors(TorchDispatchMode):
    """Counts the bytes of the tensors PyTorch's operations create while active, and the most alive at once."""

    def __init__(self) -> None:
        super().__init__()
        self.live = self.peak = 0
        self.holders: dict[int, int] = {}  # storage address -> how many tensors created here still use it

    def _release(self, key: int, nbytes: int) -> None:
        self.holders[key] -= 1
        if self.holders[key] == 0:
            del self.holders[key]
            self.live -= nbytes

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        for t in tree_leaves(out):
            if isinstance(t, Tensor) and t.device.type == "cpu":
                storage = t.untyped_storage()
                key, nbytes = storage.data_ptr(), storage.nbytes()
                if key not in self.holders:  # a new storage (a view of one counted already adds nothing)
                    self.holders[key] = 0
                    self.live += nbytes
                    self.peak = max(self.peak, self.live)
                self.holders[key] += 1
                weakref.finalize(t, self._release, key, nbytes)
        return out


R = TypeVar("R")


def peak_memory(fn: Callable[[], R], device: torch.device | str = "cpu") -> tuple[R, int]:
    """``(fn(), bytes)``: the most memory ``fn`` held at once beyond what existed before it, in bytes.

    On a GPU, CUDA's allocator says it (``torch.cuda.max_memory_allocated``, every allocation included). On the
    CPU, PyTorch keeps no such record: every tensor an operation returns is counted from its creation until the
    last Python reference to it goes; a fused kernel's own scratch space, which it frees before returning, is not
    seen there.
    """
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        result = fn()
        torch.cuda.synchronize(device)
        return result, torch.cuda.max_memory_allocated(device) - before
    tracker = _LiveTensors()
    with tracker:
        result = fn()
    return result, tracker.peak


@contextlib.contextmanager
def watch_forward(
    module: nn.Module, record: Callable[[nn.Module, tuple[Any, ...], dict[str, Any]], None]
) -> Generator[None, None, None]:
    """Within the block, ``record(module, args, kwargs)`` for each run of ``module``'s forward that no forward
    pre-hook saw: a direct ``module.forward(...)`` or ``type(module).forward(module, ...)``. The class's ``forward`` is
    wrapped for the block and put back after it; other instances of the class are not recorded."""
    cls = type(module)
    own = cls.__dict__.get("forward")
    inner = cls.forward
    by_call: list[int] = []  # forwards entered through module(...), whose pre-hooks see them

    def entered(_m: Any, _args: Any) -> None:
        by_call.append(1)

    def watched(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self is module:
            if by_call:
                by_call.pop()
            else:
                record(self, args, kwargs)
        return inner(self, *args, **kwargs)

    hook = module.register_forward_pre_hook(entered)
    cls.forward = watched  # pyright: ignore[reportAttributeAccessIssue]
    try:
        yield
    finally:
        hook.remove()
        if own is None:
            del cls.forward
        else:
            cls.forward = own  # pyright: ignore[reportAttributeAccessIssue]


def code_names(fn: object) -> set[str]:
    """The names a function's code uses: globals and attributes (``co_names``) and the keyword arguments it passes
    (``enable_gqa=True`` keeps ``"enable_gqa"`` among its constants), in its own code and in the functions and lambdas
    defined in it. Empty for an object without code."""
    names: set[str] = set()
    code = getattr(fn, "__code__", None)
    stack = [code] if code is not None else []
    while stack:
        c = stack.pop()
        names.update(getattr(c, "co_names", ()))
        for k in getattr(c, "co_consts", ()):
            if hasattr(k, "co_names"):
                stack.append(k)
            elif isinstance(k, tuple) and all(isinstance(s, str) for s in k):  # pyright: ignore[reportUnknownVariableType]
                names.update(k)  # pyright: ignore[reportUnknownArgumentType]
    return names


def _students_functions(answer: object) -> list[types.FunctionType]:
    """The functions of a student's answer, each with its own globals: a function (unwrapped from decorators such as
    ``@torch.no_grad()``), a bound method's, or for a class (or an object built from one) the methods, static and
    class methods that it and its bases define, leaving out the classes of PyTorch and of the course."""
    answer = getattr(answer, "__func__", answer)  # a bound method, a staticmethod or classmethod object
    if isinstance(answer, types.FunctionType):
        unwrapped = inspect.unwrap(answer)
        return [unwrapped] if isinstance(unwrapped, types.FunctionType) else []
    owner = answer if isinstance(answer, type) else type(answer)
    found: list[types.FunctionType] = []
    for cls in owner.__mro__:
        if cls.__module__.startswith(("builtins", "torch", "course_utils")):
            continue
        for entry in vars(cls).values():
            entry = getattr(entry, "__func__", entry)
            if isinstance(entry, types.FunctionType):
                found += _students_functions(entry)
    return found


def _imported(name: str, value: object, own: str) -> bool:
    """``value`` is another module's ``name`` (``from math import pi``, ``from course_utils import IGNORE``): not a
    variable of the notebook's own. Small ints are shared objects, so for them only the course's names count."""
    if isinstance(value, int) and -5 <= value <= 256:
        course = sys.modules.get("course_utils")
        return course is not None and vars(course).get(name) is value
    return any(vars(m).get(name) is value for n, m in list(sys.modules.items()) if n != own and hasattr(m, "__dict__"))


def _said(value: object) -> str | None:
    """A number or tensor as the note says it: ``= 4``, ``= 0.5``, ``(a tensor of shape (2, 5))``; None otherwise."""
    if isinstance(value, Tensor):
        return f"= {value.item()!r} (a 0-d tensor)" if value.dim() == 0 else f"(a tensor of shape {tuple(value.shape)})"
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return f"= {int(value)!r}"
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return f"= {float(value)!r}"
    return None


def notebook_values_read(answer: object) -> dict[str, str]:
    """The numbers and tensors a student's function (or class) reads from its module's globals, a notebook's
    variables, each said as text by name (``{"d_k": "= 4"}``, ``{"x": "(a tensor of shape (2, 5))"}``): a size left
    over from a cell above, which the checker's other inputs do not share. The functions of that module it calls are
    read too (its own ``attention``, called by its module); values imported from elsewhere (``IGNORE``, ``math.pi``)
    are not counted. The grader's stand-in for an answer in another process carries what that process read
    (``notebook_values``)."""
    carried = getattr(answer, "notebook_values", None)
    if isinstance(carried, dict):
        return {str(k): str(v) for k, v in carried.items()}  # pyright: ignore[reportUnknownVariableType]
    if str(getattr(answer, "__module__", None) or "").startswith(("course_utils", "torch")):
        return {}  # the course's own code, or PyTorch's: not the student's
    read: dict[str, str] = {}
    functions, seen = _students_functions(answer), set[types.CodeType]()
    while functions:
        function = functions.pop()
        scope, own = function.__globals__, function.__module__
        codes = [function.__code__]
        while codes:
            code = codes.pop()
            if code in seen:
                continue
            seen.add(code)
            for instruction in dis.get_instructions(code):
                name = instruction.argval
                if instruction.opname not in ("LOAD_GLOBAL", "LOAD_NAME") or not isinstance(name, str):
                    continue
                value = scope.get(name)
                if getattr(value, "__module__", None) == own and (callable(value) or isinstance(value, type)):
                    functions += _students_functions(value)  # the notebook's own helper, or class
                elif (said := _said(value)) is not None and not _imported(name, value, own):
                    read[name] = said
            codes += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    return read


def require_sizes(owner: str, **sizes: int | None) -> None:
    """A clear error for a size that cannot build ``owner``: each of ``sizes`` an int >= 1 (None: the default)."""
    bad = {
        name: n
        for name, n in sizes.items()
        if n is not None and (isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1)
    }
    if bad:
        got = ", ".join(f"{name}={n!r}" for name, n in bad.items())
        raise ValueError(f"{owner} needs sizes that are ints >= 1; got {got}")
