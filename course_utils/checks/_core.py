"""What every checker shares: calling the student's function safely, comparing tensors, the verdict."""

from __future__ import annotations

import contextlib
import copy
import inspect
import numbers
import random
from collections.abc import Callable, Generator, Sequence
from contextvars import ContextVar
from typing import Any

import numpy as np
import torch
from torch import Tensor

from ..utils import notebook_values_read, watch_forward


def one_number(x: object) -> float | None:
    """A number an answer returned, as a float: a Python or NumPy number, or a tensor or array of one element (not on
    meta); None if it is none of these."""
    if isinstance(x, Tensor):
        if x.numel() != 1 or x.device.type == "meta":
            return None
        x = x.item()
    elif isinstance(x, np.ndarray):
        if x.size != 1:
            return None
        x = x.item()
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        return None
    return float(x)


class NotYet(Exception):
    """The student's answer differs from the reference; the message says how."""


class NotWritten(NotYet):
    """The student's function still raises ``NotImplementedError``: the exercise is not attempted yet."""


class Named(NotYet):
    """A classic mistake recognised by what it computes (``name_mistake``): its message stands as it is, even in a
    later test case, where ``each_case`` would otherwise ask about a value written into the code."""


def _plain(result: Any, name: str) -> Any:
    """``result`` if its tensors are plain ``torch.Tensor`` (or parameters): a tensor subclass can answer a comparison
    however it likes, so a checker does not compare one."""
    if isinstance(result, Tensor) and type(result) not in (Tensor, torch.nn.Parameter):
        raise NotYet(f"{name} returned a {type(result).__name__}, a subclass of torch.Tensor: return a plain tensor")
    if isinstance(result, tuple | list):
        for item in result:  # pyright: ignore[reportUnknownVariableType]
            _plain(item, name)
    return result


def _tensors(value: Any, name: str) -> list[tuple[str, Tensor]]:
    """The tensors an argument holds, named as the student would name them: ``x``, ``caches[0]``, ``batch['ids']``."""
    if isinstance(value, Tensor):
        return [(name, value)]
    if isinstance(value, list | tuple):
        return [t for i, item in enumerate(value) for t in _tensors(item, f"{name}[{i}]")]  # pyright: ignore[reportUnknownArgumentType, reportUnknownVariableType]
    if isinstance(value, dict):
        return [t for k, item in value.items() for t in _tensors(item, f"{name}[{k!r}]")]  # pyright: ignore[reportUnknownArgumentType, reportUnknownVariableType]
    return []


def _plain_value(value: Any) -> bool:
    """Plain values, ids or words, or lists and tuples of them: a list of these is what an answer may change in
    place without a tensor in it (tensors are checked apart, ``_tensors``)."""
    if isinstance(value, list | tuple):
        return all(_plain_value(item) for item in value)  # pyright: ignore[reportUnknownVariableType]
    return value is None or isinstance(value, str | int | float | bool)


def _list_changed(given: list[Any], kept: list[Any]) -> bool:
    """Whether an argument list differs from its copy taken before the call: by value for plain values, else item by
    item, each still the same object (the copy was shallow)."""
    if _plain_value(kept):
        return given != kept
    return len(given) != len(kept) or any(a is not b for a, b in zip(given, kept, strict=False))


def _argument_names(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    try:
        return dict(inspect.signature(fn).bind(*args, **kwargs).arguments)
    except (TypeError, ValueError):  # a builtin, or arguments that do not fit: positions then
        return {**{f"argument {i + 1}": a for i, a in enumerate(args)}, **kwargs}


# What PyTorch says when one operation meets tensors on two devices.
DEVICE_MISMATCH = ("is not on the expected device", "Expected all tensors to be on the same device", "same device")


def on_meta(fn: Callable[..., Any], *args: Any) -> Any:
    """The answer once more, its tensor arguments on PyTorch's meta device (shapes, no values), standing in for a
    GPU: a tensor it makes without ``device=`` lands on the CPU and meets the inputs there, as in Colab. Its result,
    or None where the answer reads values (``.item()``, NumPy, Python numbers), which a meta tensor has none of: that
    answer is judged on the CPU only. A clash of devices raises ``NotYet``."""
    name = getattr(fn, "__name__", "your function")
    moved = [a.to("meta") if isinstance(a, Tensor) else a for a in args]
    try:
        with students_random_state_kept():
            return fn(*moved)
    except Exception as e:
        if any(words in str(e) for words in DEVICE_MISMATCH):
            raise NotYet(
                f"with its inputs on a GPU (here PyTorch's meta device, which stands in for one), {name} raised "
                f"{type(e).__name__}: {e} A tensor made without device= is made on the CPU: create new tensors on the "
                "inputs' device, e.g. torch.arange(n, device=x.device)"
            ) from None
        return None


def off_the_cpu(what: str, got: object, name: str) -> None:
    """Raise ``NotYet`` if ``got``, the answer's result for inputs on the meta device, is (or holds) a tensor left on
    the CPU."""
    if any(t.device.type == "cpu" for _, t in _tensors(got, what)):
        raise NotYet(
            f"with its inputs on a GPU (here PyTorch's meta device, which stands in for one), {name} returns {what} "
            "on the CPU: a tensor made without device= is made there; create new tensors on the inputs' device, "
            "e.g. torch.arange(n, device=x.device)"
        )


def call(fn: Callable[..., Any], *args: Any, changes_inputs: bool = False, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``, with the student's errors turned into verdicts: not written yet, an exception (named,
    with its message, or a hint when it has none), or an input tensor changed in place (an answer that overwrites
    its input would make the checker's reference, computed from that input, agree with it). ``changes_inputs=True``
    for an exercise whose function is meant to update what it is given."""
    name = getattr(fn, "__name__", "your function")
    if not callable(fn):
        raise NotYet(f"the checker needs your function itself; it got {type(fn).__name__} {fn!r:.40}")
    answers = _ANSWERS.get()
    if answers is not None and not any(fn is a for a in answers):
        answers.append(fn)
    named = _argument_names(fn, args, kwargs)
    before = (
        [] if changes_inputs else [(n, t, t.detach().clone()) for arg, v in named.items() for n, t in _tensors(v, arg)]
    )
    # Lists as they were: plain values copied whole, lists of tensors (or other objects) item by item, which must
    # still be the same objects afterwards (head_weights[i] = head_weights[i].T rewrites the caller's list).
    lists = (
        []
        if changes_inputs
        else [
            (arg, v, copy.deepcopy(v) if _plain_value(v) else list(v))  # pyright: ignore[reportUnknownArgumentType]
            for arg, v in named.items()
            if isinstance(v, list)
        ]
    )
    try:
        result = fn(*args, **kwargs)
    except NotImplementedError:
        raise NotWritten(
            f"{name} is not written yet: replace `raise NotImplementedError`, then run this cell again."
        ) from None
    except SystemExit as e:  # sys.exit() in an answer: it would end the cell (or the grader), not the function
        raise NotYet(
            f"{name} called sys.exit() or exit() (SystemExit {e.code!r}): return a value instead of exiting"
        ) from None
    except Exception as e:  # the student's bug, reported rather than raised
        detail = f": {e}" if str(e) else EMPTY_ERRORS.get(type(e).__name__, " (an error with no message)")
        if any(words in str(e) for words in DEVICE_MISMATCH):
            detail += ". Create new tensors on the inputs' device, e.g. torch.zeros(..., device=x.device)"
        if "without overflow" in str(e):
            detail += (
                ". A number the size of float32's extremes (torch.finfo(torch.float32).min, -1e38) does not fit in "
                'the bfloat16 or float16 a GPU computes in: fill with float("-inf"), or torch.finfo(x.dtype).min of '
                "the tensor's own dtype"
            )
        raise NotYet(f"{name} raised {type(e).__name__}{detail}") from None
    for arg, given, kept in lists:
        if _list_changed(given, kept):
            raise NotYet(
                f"{name} changed its input {arg} in place (append, insert, pop, remove, sort, += or an item "
                "assignment write into the caller's list): build a new list instead ([*s, x], s + [x], sorted(s)), "
                "or only read it; the caller still needs it as it was"
            )
    for arg, tensor, kept in before:
        same_values = tensor.shape == kept.shape and bool(
            torch.equal(tensor.detach(), kept)
            or (tensor.is_floating_point() and torch.allclose(tensor.detach(), kept, equal_nan=True, rtol=0, atol=0))
        )
        if not same_values:
            raise NotYet(
                f"{name} changed its input {arg} in place (an operation such as x -= m, x[...] = v, x.add_(...) or "
                "masked_fill_ writes into the caller's tensor). Compute a new tensor instead (x = x - m, "
                "x.masked_fill(...)): the caller still needs its input as it was"
            )
    return _plain(result, name)


# What cuts a gradient off, said after "something" (backpropagates) or "no gradient reaches x: something".
CUT_OFF = (
    "cut it off: .item(), .detach(), torch.no_grad(), .numpy() or a new tensor built from numbers "
    "(torch.tensor(...)). Keep every step in torch operations on the inputs"
)
# The same, for an answer whose values are right but whose gradient is not: part of it is cut off.
CUT_FROM_GRAPH = (
    "a step is cut from the graph (.detach(), .item(), NumPy or torch.no_grad() on part of the computation), so "
    "training would follow a wrong gradient: keep every step in torch operations on the inputs"
)


def backpropagates(
    fn: Callable[..., Any], *args: Any, what: str = "the output", reference: Callable[..., Tensor] | None = None
) -> None:
    """Raise ``NotYet`` unless ``fn(*args)`` lets gradients flow back to its floating-point tensor arguments: the
    chapters train through these functions, and an answer computed with ``.item()``, ``.detach()``,
    ``torch.no_grad()`` or NumPy returns the right numbers that no optimiser can learn from. With ``reference`` (the
    right function, same arguments), the gradient reaching each floating-point argument must also equal the
    reference's: an answer with only *part* of its computation cut from the graph (one branch detached, a
    normaliser computed in NumPy) has the right values and some gradient, but not the right one."""
    inputs = [a.detach().clone().requires_grad_(True) if isinstance(a, Tensor) and a.is_floating_point() else a
              for a in args]  # fmt: skip
    reason = f"{what} cannot be trained through: no gradient reaches the inputs. Something {CUT_OFF}"
    try:
        got = call(fn, *inputs)
    except NotYet as e:  # NumPy on a tensor that needs a gradient: PyTorch's advice (.detach()) would cut it
        if "numpy()" in str(e) and "requires grad" in str(e):
            raise NotYet(
                f"{what} cannot be trained through: it goes through NumPy (.numpy()), where no gradient follows. "
                "Keep every step in torch operations on the inputs"
            ) from None
        raise
    got = got[0] if isinstance(got, tuple | list) and got else got
    leaves = [a for a in inputs if isinstance(a, Tensor) and a.requires_grad]
    if not isinstance(got, Tensor) or not got.requires_grad:
        raise NotYet(reason)
    grads = torch.autograd.grad(got.float().sum(), leaves, allow_unused=True)
    if all(g is None for g in grads):
        raise NotYet(reason)
    if reference is not None:
        named = list(_argument_names(fn, args, {}))
        if len(named) != len(args):  # *args in the answer's signature: positions then
            named = [f"argument {i + 1}" for i in range(len(args))]
        floats = [n if isinstance(a, Tensor) and a.is_floating_point() else "" for n, a in zip(named, args)]
        same_gradients(fn, args, reference, floats, what)


# One mistake, one message, whichever checker meets it: sibling checkers (the encoder, pre-norm, decoder and GPT-block
# layers; the masks of chapters 01, 05 and 07) import these rather than word them again.
MISTAKES = {
    "called the layer": (
        "you called layer(...) itself, which runs the course's own forward: write the forward from its "
        "submodules (layer.self_attn, layer.norm1, layer.feed_forward, ...)"
    ),
    "flipped mask": (
        "the mask's convention is flipped: in this course True means *may attend*, so hide the scores where the mask "
        "is False (masked_fill(~mask, -inf))"
    ),
    "normalised stream": (
        "the residual stream itself is normalised (x = norm1(x) before the add): normalise only the sublayer's input, "
        "x + self_attn(norm1(x)), so the stream keeps its own scale"
    ),
    "mask ignored": "the mask is ignored: pass it to self_attn, so that no token attends to padding",
    "no causal mask": "no causal mask: every position also reads the future tokens",
    "not scaled": "the scores are not divided by sqrt(d_k): use q @ k.transpose(-2, -1) / math.sqrt(d_k)",
    "padded query": (
        "the padded *queries* are masked as well (a (B, 1, T, T) mask hiding rows): mask the keys only, "
        "(B, 1, 1, T); what a padded position computes is ignored by the loss anyway"
    ),
}


@contextlib.contextmanager
def not_called(module: torch.nn.Module) -> Generator[None, None, None]:
    """Within the block, an answer that runs ``module``'s own forward raises ``NotYet`` naming it: ``layer(x, mask)``,
    ``layer.forward(x, mask)`` or ``type(layer).forward(layer, x, mask)``; the exercise is to write that forward from
    the module's parts. A call is seen by a forward pre-hook (which a grader's link relays from the answer's process)
    and, for a direct call of ``forward``, by the class's ``forward`` watched for the length of the block."""
    calls: list[bool] = []
    hook = module.register_forward_pre_hook(lambda _m, _args: calls.append(True))
    with watch_forward(module, lambda *_: calls.append(True)):
        try:
            yield
        except NotYet:
            if calls:
                raise NotYet(MISTAKES["called the layer"]) from None
            raise
        finally:
            hook.remove()
    if calls:
        raise NotYet(MISTAKES["called the layer"])


def any_device(got: Any, reference: Tensor, what: str) -> Any:
    """``got`` where ``reference`` is, for a function given no tensor to take a device from (a mask or a table built
    from sizes, a batch built from lists): its result may be on the default device or on the notebook's ``device``,
    both right. Only the meta device, which holds no values, is named."""
    if isinstance(got, Tensor) and got.device != reference.device:
        if got.device.type == "meta":
            raise NotYet(
                f"{what} is on the meta device, which holds no values: build it on a real device (with no "
                "device=..., the default one)"
            )
        return got.to(reference.device)
    return got


def each_case(one: Callable[..., str], cases: list[dict[str, Any]]) -> str:
    """``one(**case)`` for every case, and the first case's success message. The first case is the main test; the
    others change its values (lengths, ids, seeds), so that an answer with one of them hard-coded fails, told which
    values changed."""
    message = ""
    for i, case in enumerate(cases):
        try:
            result = one(**case)
        except (NotWritten, Named):
            raise
        except NotYet as e:
            if i == 0:
                raise
            changed = ", ".join(f"{k} = {v!r}" for k, v in case.items() if cases[0].get(k, object()) != v)
            raise NotYet(
                f"right for the first test case but not with {changed}: is a value written into the code that "
                f"should come from the arguments? ({e})"
            ) from None
        message = message or result
    return message


def same_gradients(
    fn: Callable[..., Any], args: Sequence[Any], reference: Callable[..., Tensor], names: Sequence[str], what: str
) -> None:
    """Raise ``NotYet`` unless the gradients that ``fn(*args)`` sends back to the tensor arguments named ``names``
    (one name per argument, ``""`` for one not compared) equal those of ``reference(*args)``.
    Run after ``backpropagates``: the values are right, so a different gradient means a step cut from the graph."""
    theirs = [
        a.detach().clone().requires_grad_(bool(n)) if isinstance(a, Tensor) else a
        for a, n in zip(args, names, strict=True)
    ]
    ours = [
        a.detach().clone().requires_grad_(bool(n)) if isinstance(a, Tensor) else a
        for a, n in zip(args, names, strict=True)
    ]
    got = call(fn, *theirs)
    got = got[0] if isinstance(got, tuple | list) and got else got  # (output, weights): the output
    expected = reference(*ours)
    if not isinstance(got, Tensor) or not got.requires_grad:
        raise NotYet(f"{what} cannot be trained through: no gradient reaches the inputs. {CUT_FROM_GRAPH}")
    if got.shape != expected.shape and got.numel() == expected.numel():  # a loss of shape (1,) for (): the same
        got = got.reshape(expected.shape)
    if got.shape != expected.shape:
        raise NotYet(f"{what} has shape {tuple(got.shape)}; expected {tuple(expected.shape)}")
    upstream = torch.randn(expected.shape, generator=torch.Generator().manual_seed(0), dtype=expected.dtype)
    compared = [(n, t, o) for n, t, o in zip(names, theirs, ours) if n and isinstance(t, Tensor)]
    got_grads = torch.autograd.grad((got * upstream).sum(), [t for _, t, _ in compared], allow_unused=True)
    expected_grads = torch.autograd.grad((expected * upstream).sum(), [o for _, _, o in compared])
    for (name, _, _), g, e in zip(compared, got_grads, expected_grads):
        if g is None:
            raise NotYet(f"no gradient reaches {name}: {CUT_FROM_GRAPH}")
        if not torch.allclose(g.double(), e.double(), atol=1e-4, rtol=1e-3):
            raise NotYet(
                f"{what} has the right values but not the right gradient with respect to {name}: {CUT_FROM_GRAPH}"
            )


def call_layer(fn: Callable[..., Any], *args: Any) -> Any:
    """``call(fn, *args)`` for a layer's forward written from its submodules: an error about a tuple gets the hint
    that ``self_attn`` returns two things."""
    try:
        return call(fn, *args)
    except NotWritten:
        raise
    except NotYet as e:
        if "tuple" in str(e):
            raise NotYet(
                f"{str(e).rstrip('.')}; self_attn (like cross_attn) returns (output, weights): take its [0]"
            ) from None
        if "NoneType" in str(e):
            raise NotYet(
                f"{str(e).rstrip('.')}; self_attn returns (output, weights), and the weights are None unless asked "
                "for (need_weights=True): the output is its [0], the first of the two"
            ) from None
        raise


# Errors whose message is empty, and what usually raises them in an exercise.
EMPTY_ERRORS = {
    "StopIteration": " (next() found nothing: next(iter(...)) or next(model.parameters()) on something empty)",
    "AssertionError": " (one of your own asserts failed)",
    "KeyError": " (a key that is not in the dict)",
}


def wrong_device(
    what: str,
    got: torch.device,
    expected: torch.device,
    where: str = "the inputs were",
    how: str = "create new tensors on the inputs' device (device=x.device) and do not move the result",
) -> NotYet:
    """One wording for a result on another device than its inputs, whichever checker meets it: ``what`` is on
    ``got``; ``where`` (``"the logits were"``, ``"src is"``) on ``expected``; then what to do."""
    return NotYet(f"{what} is on {got}; {where} on {expected}: {how}")


def same(got: object, expected: Tensor, what: str, atol: float = 1e-5) -> None:
    if not isinstance(got, Tensor):
        raise NotYet(f"{what} should be a torch.Tensor; got {type(got).__name__}")
    _plain(got, what)
    if got.device != expected.device:
        raise wrong_device(what, got.device, expected.device)
    if got.shape != expected.shape:
        raise NotYet(f"{what} has shape {tuple(got.shape)}; expected {tuple(expected.shape)}")
    if (
        got.is_floating_point()
        and expected.is_floating_point()
        and torch.finfo(got.dtype).bits < torch.finfo(expected.dtype).bits
    ):
        raise NotYet(
            f"{what} has dtype {got.dtype}; expected {expected.dtype}: a lower precision (.half(), .bfloat16(), "
            "dtype=...) loses digits and breaks the next layer's matmul. Keep the inputs' dtype"
        )
    if (got.dtype == torch.bool) != (expected.dtype == torch.bool) or (
        expected.is_floating_point() and not (got.is_floating_point() or got.dtype == torch.bool)
    ):
        raise NotYet(f"{what} has dtype {got.dtype}; expected {expected.dtype}")
    bad = (got.double() - expected.double()).abs() > atol + 1e-4 * expected.double().abs()
    bad |= got.double().isnan() & ~expected.double().isnan()  # NaN compares as not greater: named here
    if bad.any():
        where = tuple(int(i) for i in bad.nonzero()[0])
        raise NotYet(
            f"{what} differs at index {where}: got {got[where].item():.6g}, expected {expected[where].item():.6g}"
        )


def differs(got: object, reference: Tensor) -> bool:
    return not (
        isinstance(got, Tensor)
        and got.device == reference.device
        and got.shape == reference.shape
        and torch.allclose(got.double(), reference.double(), atol=1e-5)
    )


def name_mistake(got: object, expected: Tensor, mistakes: list[tuple[Tensor, str]], context: str = "") -> None:
    """Raise ``NotYet`` naming the first mistake whose buggy result ``got`` equals (and ``expected`` does not):
    ``mistakes`` pairs what a classic bug computes with the message that names it."""
    for buggy, message in mistakes:
        if not differs(got, buggy) and differs(buggy, expected):
            raise Named(f"{context}: {message}" if context else message)


class Verdict:
    """The outcome of a check: ``bool(verdict)`` says whether it passed; ``.message`` says why; ``.exercise`` names the
    exercise graded (``check_layer_norm``, ``check_prediction[scaling]``) and ``.status`` is ``pass``, ``fail``,
    ``not attempted`` or, for a prediction, ``answered``: the grader (``python -m course_utils.grade``) reads these."""

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


# The answers a checker's run has called (``call`` adds each), for the note on what they read from the notebook.
_ANSWERS: ContextVar[list[Any] | None] = ContextVar("answers", default=None)


def _values_read_note(answers: list[Any]) -> str:
    """For a failed verdict: the notebook's numbers and tensors the answers read, which may be why (at most 8 named).
    Only a hint: whatever goes wrong in finding them leaves it out."""
    try:
        read = {name: value for answer in answers for name, value in notebook_values_read(answer).items()}
    except Exception:
        return ""
    if not read:
        return ""
    said = ", ".join(f"{name} {value}" for name, value in sorted(read.items())[:8])
    return (
        f". Your code reads {said} from the notebook rather than from its arguments, and the checker calls it with "
        "other inputs than the notebook's: if one of these should follow the inputs, compute it from them (a size "
        "with .size(-1) or len(...), for example)."
    )


def verdict(run: Callable[[], str], name: str | None = None) -> Verdict:
    """Run a checker's test (a function ``run`` defined inside a ``check_*`` function), print its verdict and
    return it, named ``name`` (by default the checker's own name). The student's random state is kept."""
    status = "pass"
    answers = _ANSWERS.set([])
    try:
        with students_random_state_kept():
            message = "✅ " + run()
    except NotYet as e:
        message = "❌ " + (str(e) or "your answer differs from the reference")
        status = "not attempted" if isinstance(e, NotWritten) else "fail"
        if status == "fail" and (note := _values_read_note(_ANSWERS.get() or [])):
            message = message.rstrip(". ") + note
    except Exception as e:  # an answer the checker could not test (never an exception in the student's notebook)
        message = f"❌ this answer could not be tested: {type(e).__name__}: {e}"
        status = "fail"
    finally:
        _ANSWERS.reset(answers)
    print(message)
    exercise = name or run.__qualname__.split(".")[0]  # run is defined in check_*: "check_layer_norm.<locals>.run"
    return Verdict(status == "pass", message, exercise, status)
