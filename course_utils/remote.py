"""The checkers in the grader's process, the student's functions in the student's: calls that cross as data.

The grader (``course_utils.grade``) runs each submission's answers in a kernel, and each checker in the runner, the
grader's process that drives that kernel (outside its sandbox, where no answer reaches). A checker is given a ``RemoteFunction`` where it would be given the student's function: each
call writes the arguments to a file in the kernel's folder, has the kernel run the function on them (``KernelSide``,
the grader's object in the kernel), and reads the result back as data only (``torch.load(weights_only=True)``:
tensors, numbers, strings, lists, tuples and dicts, never an object that runs code). What the call did to its
arguments comes back too (a tensor changed in place, a list rewritten, a module's parameters tied, its submodules
called), so that a checker sees what it would see in one process; and a result that needs a gradient is tied to the
arguments by an autograd function whose backward asks the kernel for the gradients. The comparison, the message and
the status are then made here, from the course's own code.

``Link`` is the grader's side; what it needs of the kernel is one function, ``run(code)``, that executes a line of
code there and returns when it is done. ``loopback()`` makes a link to a ``KernelSide`` in this process, whose data
still crosses as files: the tests use it to run every checker's answers both ways.
"""

from __future__ import annotations

import builtins
import contextlib
import inspect
import io
import itertools
import os
import secrets
import shutil
import stat
import tempfile
import weakref
from collections import Counter, OrderedDict
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from .utils import code_names, notebook_values_read, watch_forward

__all__ = ["KernelSide", "Link", "RemoteFunction", "loopback"]

WIRE_LIMIT = 256 * 2**20  # bytes: a result file larger than this is refused
# Functions whose use an exercise forbids (chapter 01's attention): named to the checker when the answer's code
# refers to them through another global name.
LIBRARY = {
    "scaled_dot_product_attention": torch.nn.functional.scaled_dot_product_attention,
    "multi_head_attention_forward": torch.nn.functional.multi_head_attention_forward,
    "MultiheadAttention": torch.nn.MultiheadAttention,
}


# --- data on the wire ---------------------------------------------------------------------------------------------


def _to_wire(value: Any, depth: int = 0, given: tuple[Any, ...] = ()) -> Any:
    """``value`` as what ``torch.load(weights_only=True)`` reads back: plain tensors, numbers, strings, None, lists,
    tuples and dicts, with a few marked forms (a NumPy array, a Counter, a Generator's state, one of the call's own
    arguments ``given``, a module's tensors, another object's type)."""
    if depth > 20:
        return {"__object__": "a structure nested too deep", "repr": ""}
    for i, arg in enumerate(given):
        if value is arg and not isinstance(value, bool | int | float | str | type(None)):
            return {"__argument__": i}
    if isinstance(value, nn.Module):
        named = value.named_parameters(remove_duplicate=False)
        return {"__module__": type(value).__name__, "parameters": [(n, t.detach().clone()) for n, t in named]}
    if isinstance(value, np.generic):  # before float: NumPy's float64 is a float too
        return {"__numpy_scalar__": value.item(), "dtype": str(value.dtype)}
    if value is None:
        return None
    if isinstance(value, bool):  # a subclass (an IntEnum, say) as its base
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, complex):
        return complex(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, Tensor):
        return value.detach().as_subclass(Tensor).clone() if type(value) is not Tensor else value.detach().clone()
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            return {"__numpy_objects__": [_to_wire(v, depth + 1) for v in value.tolist()]}
        return {"__numpy__": torch.from_numpy(np.ascontiguousarray(value).copy())}
    if isinstance(value, torch.Generator):
        return {"__generator__": value.get_state()}
    if isinstance(value, torch.dtype | torch.device | torch.Size):
        return {"__torch__": str(value), "kind": type(value).__name__}
    if isinstance(value, Counter):
        return {"__counter__": [(_to_wire(k, depth + 1), int(v)) for k, v in value.items()]}
    if isinstance(value, tuple):
        return tuple(_to_wire(v, depth + 1, given) for v in value)
    if isinstance(value, list):
        return [_to_wire(v, depth + 1, given) for v in value]
    if isinstance(value, dict):
        return {"__dict__": [(_to_wire(k, depth + 1), _to_wire(v, depth + 1)) for k, v in value.items()]}
    if isinstance(value, set | frozenset):
        return {"__set__": [_to_wire(v, depth + 1) for v in value]}
    return {"__object__": type(value).__name__, "repr": repr(value)[:200]}


class Opaque:
    """What crossed the wire as an object of some other type: its type's name and its repr, nothing that runs."""

    def __init__(self, text: str) -> None:
        self._text = text

    def __repr__(self) -> str:
        return self._text


def _module_of(kind: str, parameters: list[tuple[str, Tensor]]) -> nn.Module:
    """A module (of a class named ``kind``) that holds ``parameters`` under their dotted names: what a checker can
    read of a module an answer returned."""
    module = type(kind, (nn.Module,), {})()
    for name, tensor in parameters:
        *path, attribute = name.split(".")
        owner = module
        for part in path:
            if not hasattr(owner, part):
                owner.add_module(part, nn.Module())
            owner = getattr(owner, part)
        owner.register_parameter(attribute, nn.Parameter(tensor))
    return module


def _from_wire(value: Any, given: tuple[Any, ...] = ()) -> Any:
    if isinstance(value, tuple):
        return tuple(_from_wire(v, given) for v in value)
    if isinstance(value, list):
        return [_from_wire(v, given) for v in value]
    if not isinstance(value, dict):
        return value
    if "__argument__" in value and isinstance(value["__argument__"], int) and value["__argument__"] < len(given):
        return given[value["__argument__"]]
    if "__module__" in value and isinstance(value.get("parameters"), list):
        return _module_of(str(value["__module__"]), value["parameters"])
    if "__numpy__" in value:
        return value["__numpy__"].numpy()
    if "__numpy_objects__" in value:
        return np.array([_from_wire(v) for v in value["__numpy_objects__"]], dtype=object)
    if "__numpy_scalar__" in value:
        return np.dtype(value["dtype"]).type(value["__numpy_scalar__"])
    if "__generator__" in value:
        return torch.Generator().set_state(value["__generator__"])
    if "__torch__" in value:
        text = value["__torch__"]
        if value["kind"] == "dtype":
            return getattr(torch, text.removeprefix("torch."))
        return torch.device(text) if value["kind"] == "device" else Opaque(text)
    if "__counter__" in value:
        return Counter({_from_wire(k): v for k, v in value["__counter__"]})
    if "__dict__" in value:
        return {_from_wire(k): _from_wire(v) for k, v in value["__dict__"]}
    if "__set__" in value:
        return {_from_wire(v) for v in value["__set__"]}
    if "__object__" in value:
        kind = type(str(value["__object__"]), (Opaque,), {})  # type(got).__name__ names what the answer returned
        return kind(str(value.get("repr", "")))
    return value


def _read(path: Path) -> Any:
    """A file the kernel wrote, as data; a link, a pipe, a file too large or not torch's raises ``RuntimeError``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as e:
        raise RuntimeError(f"the answer's process gave no result ({e.strerror})") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > WIRE_LIMIT:
            raise RuntimeError("the answer's process gave a result that is not a file of data, or too large a one")
        data = f.read(WIRE_LIMIT + 1)
    try:
        return torch.load(io.BytesIO(data), weights_only=True)
    except Exception as e:  # not torch's format, or an object weights_only refuses: never unpickled
        raise RuntimeError(f"the answer's process gave a result that is not data ({type(e).__name__})") from None


def _write_new(path: str, data: bytes) -> None:
    """Write a file that must not exist yet, never through a link: the kernel may have put anything in the folder."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


# --- the kernel's side --------------------------------------------------------------------------------------------


def _tensor_paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], Tensor]]:
    """Every tensor in ``value`` (nested in lists, tuples and dicts), with its path of indices and keys."""
    if isinstance(value, Tensor):
        return [(path, value)]
    if isinstance(value, list | tuple):
        return [found for i, v in enumerate(value) for found in _tensor_paths(v, (*path, i))]
    if isinstance(value, dict):
        return [found for k, v in value.items() for found in _tensor_paths(v, (*path, k))]
    return []


def _at(value: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        value = value[key]
    return value


class KernelSide:
    """The grader's object in the kernel: holds the objects a checker is given by name (``hold``), runs a call on
    them (``serve``) and the backward of a call that kept its graph (``backward``). Everything it returns is written
    as data to a file whose path the grader chose."""

    def __init__(self) -> None:
        self._held: dict[str, Any] = {}
        self._graphs: dict[str, tuple[list[Tensor], list[Tensor]]] = {}

    def hold(self, path: str, slot: str, value: Any) -> None:
        """Keep ``value`` as ``slot``, and write what the grader may know of it: a callable's name, parameters and
        the names its code refers to; any other value itself, as data."""
        self._held[slot] = value
        if not callable(value):
            description: dict[str, Any] = {"callable": False, "value": _to_wire(value)}
        else:
            description = {"callable": True, "name": str(getattr(value, "__name__", type(value).__name__))}
            try:
                parameters = inspect.signature(value).parameters.values()
                description["parameters"] = [(p.name, int(p.kind), p.default is not p.empty) for p in parameters]
            except (TypeError, ValueError):
                description["parameters"] = None
            names = code_names(value)  # with those of the functions and lambdas defined in it
            scope = getattr(value, "__globals__", {})
            description["names"] = sorted(names)
            try:  # the notebook's numbers it reads, as text: a hint for a failed verdict, never a reason to fail
                description["notebook_values"] = notebook_values_read(value)
            except Exception:
                description["notebook_values"] = {}
            description["aliases"] = {
                name: known for name in names for known, f in LIBRARY.items() if scope.get(name) is f
            }
            from .model.attention import scaled_dot_product_attention as course_attention

            own = {**LIBRARY, "scaled_dot_product_attention (the course's)": course_attention}
            description["aliases"] |= {name: "scaled_dot_product_attention" for name in names
                                       if scope.get(name) is course_attention}  # fmt: skip
            library = next((known for known, f in own.items() if value is f), None)
            description["library"] = library and getattr(value, "__name__", library)
        torch.save(description, path)

    def held(self, slot: str) -> Any:
        """The value kept as ``slot``: for a course function that ``RemoteFunction.applied`` runs on it here."""
        return self._held[slot]

    def serve(self, path: str) -> None:
        """Run the call written in ``path + '.in'``; write its result (or the exception it raised) and what it did
        to its arguments in ``path + '.out'``."""
        reply: dict[str, Any] = {}
        calls: dict[tuple[int, str], list[Any]] = {}
        try:
            call = torch.load(path + ".in", weights_only=False)
            args, kwargs = call["args"], call["kwargs"]
            for where in call["grad"]:
                _at(args, where).requires_grad_(True)
            hooks, watched, watches = [], [], contextlib.ExitStack()
            given = list(args)

            def which(v: Any) -> int | None:  # a submodule given one of the call's own arguments: which one
                return next((i for i, a in enumerate(given) if v is a), None)

            for index, name in call["hooked"]:
                module = args[index].get_submodule(name)

                def record(_m: Any, a: Any, k: Any, key: tuple[int, str] = (index, name)) -> None:
                    calls.setdefault(key, []).append(([which(v) for v in a], {n: which(v) for n, v in k.items()}))

                hooks.append(module.register_forward_pre_hook(record, with_kwargs=True))
                watched.append((module, record))
            before = [self._before(a) for a in args]
            fn = self._held[call["slot"]]
            try:
                for module, record in watched:  # its forward called directly (module.forward(...)): told too
                    watches.enter_context(watch_forward(module, record))
                with torch.set_grad_enabled(bool(call["grad"])):
                    result = fn(*args, **kwargs)
            finally:
                watches.close()
                for hook in hooks:
                    hook.remove()
            reply["result"] = _to_wire(result, given=tuple(given))
            reply["hooks"] = [(index, name, seen) for (index, name), seen in calls.items()]
            reply["after"] = [self._after(a, b) for a, b in zip(args, before, strict=True)]
            if call["grad"]:
                leaves = [_at(args, where) for where in call["grad"]]
                outputs = [t for _, t in _tensor_paths(result)]
                reply["graph"] = [bool(t.requires_grad) for t in outputs]
                self._graphs[path] = (leaves, outputs)
        except BaseException as e:
            reply = {"raised": {"type": type(e).__name__, "message": str(e)[:2000]}}
            reply["hooks"] = [(index, name, seen) for (index, name), seen in calls.items()]
        torch.save(reply, path + ".out")

    def backward(self, path: str) -> None:
        """The gradients, with respect to the call's tensors that needed one, of its outputs against the gradients
        written in ``path + '.grad'``; written in ``path + '.grads'``."""
        reply: dict[str, Any]
        try:
            leaves, outputs = self._graphs.pop(path)
            given = torch.load(path + ".grad", weights_only=False)
            pairs = [(o, g) for o, g in zip(outputs, given, strict=True) if g is not None and o.requires_grad]
            grads = torch.autograd.grad(
                [o for o, _ in pairs], leaves, [g for _, g in pairs], allow_unused=True
            ) if pairs else [None] * len(leaves)  # fmt: skip
            reply = {"grads": [None if g is None else g.detach().clone() for g in grads]}
        except BaseException as e:
            reply = {"raised": {"type": type(e).__name__, "message": str(e)[:2000]}}
        torch.save(reply, path + ".grads")

    @staticmethod
    def _before(arg: Any) -> Any:
        """What ``_after`` compares with: the identities of a list's or dict's items, of a module's parameters."""
        if isinstance(arg, list):
            return [id(v) for v in arg]
        if isinstance(arg, dict):
            return {k: id(v) for k, v in arg.items()}
        if isinstance(arg, nn.Module):
            return {id(p): name for name, p in reversed(list(arg.named_parameters(remove_duplicate=False)))}
        return None

    @staticmethod
    def _after(arg: Any, before: Any) -> Any:
        """What a call left of one argument: a tensor's values; each item of a list or dict, and whether it is still
        the object given; a module's parameters, each with the name of the parameter whose object it now is."""
        if isinstance(arg, Tensor):
            return arg.detach().clone()
        if isinstance(arg, list):
            return {"__list__": [(i < len(before) and id(v) == before[i], _to_wire(v)) for i, v in enumerate(arg)]}
        if isinstance(arg, dict):
            return {"__items__": [(_to_wire(k), before.get(k) == id(v), _to_wire(v)) for k, v in arg.items()]}
        if isinstance(arg, nn.Module):
            parameters = [
                (name, before.get(id(p)), p.detach().clone(), p.requires_grad)
                for name, p in arg.named_parameters(remove_duplicate=False)
            ]
            buffers = [(name, b.detach().clone()) for name, b in arg.named_buffers()]
            storages: dict[int, list[Any]] = {}
            for name, p in arg.named_parameters(remove_duplicate=False):
                layout = (name, tuple(p.shape), tuple(p.stride()), p.storage_offset())
                storages.setdefault(p.untyped_storage().data_ptr(), []).append(layout)
            shared = [names for names in storages.values() if len(names) > 1]
            return {"__module__": {"parameters": parameters, "buffers": buffers, "storage": shared}}
        return None


# --- the grader's side --------------------------------------------------------------------------------------------


def _exception(kind: str, message: str) -> BaseException:
    """The kernel's exception, rebuilt by name: a built-in one as itself, any other (or a built-in that is not built
    from a message alone, such as UnicodeDecodeError) as a RuntimeError of that name (so that a message "raised
    IndexError: ..." reads as it would in one process)."""
    found = getattr(builtins, kind, None)
    if isinstance(found, type) and issubclass(found, BaseException) and found not in (KeyboardInterrupt, GeneratorExit):
        try:
            return found(message) if found is not KeyError else KeyError(message.strip("'\""))
        except TypeError:  # UnicodeDecodeError(encoding, object, start, end, reason): rebuilt by name below
            pass
    return type(kind, (RuntimeError,), {})(message)


_KINDS = {int(p.kind): p.kind for p in inspect.signature(lambda a, /, b, *c, d, **e: None).parameters.values()}


class RemoteFunction:
    """The student's function as a checker sees it: calling it runs the function in the kernel."""

    def __init__(self, link: Link, slot: str, description: dict[str, Any]) -> None:
        self._link, self._slot = link, slot
        self.__name__ = self.__qualname__ = str(description.get("name", "your function"))
        names = tuple(description.get("names", ()))
        self.__code__ = SimpleNamespace(co_names=names, co_consts=())  # what _library_attention reads
        self.__globals__ = {name: LIBRARY[known] for name, known in description.get("aliases", {}).items()}
        self.library = description.get("library")
        self.notebook_values = description.get("notebook_values", {})  # what notebook_values_read found there
        parameters = description.get("parameters")
        if parameters is not None:
            self.__signature__ = inspect.Signature(
                [
                    inspect.Parameter(name, _KINDS[kind], default=None if has_default else inspect.Parameter.empty)
                    for name, kind, has_default in parameters
                ]
            )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._link.call(self._slot, args, kwargs)

    def applied(self, function: Callable[[Any], Any]) -> Any:
        """``function(answer)`` run in the answer's process, its result returned as data. For a checker that must run
        the answer where no call of it can reach (chapter 11's, in new processes started there): ``function`` is
        one of the course's own, a module-level function of ``course_utils``, named to the kernel by its module and
        name; the answer's process runs it as it runs the answer, inside the grader's sandbox."""
        module, name = function.__module__, function.__qualname__
        if not module.startswith("course_utils.") or not name.isidentifier():
            raise ValueError(f"{module}.{name} is not a module-level function of course_utils")
        return self._link.hold(
            f"getattr(__import__({module!r}, fromlist=['_']), {name!r})(__course_grader__.held({self._slot!r}))"
        )

    def __repr__(self) -> str:
        return f"<function {self.__name__} (in the answer's process)>"


class _Through(torch.autograd.Function):
    """Ties a remote call's outputs to its inputs that need a gradient; the backward asks the kernel."""

    @staticmethod
    def forward(ctx: Any, link: Link, path: str, outputs: list[Tensor], differentiable: list[bool], *leaves: Tensor):
        ctx.link, ctx.path, ctx.count = link, path, len(leaves)
        ctx.set_materialize_grads(False)  # an output the checker does not use sends no gradient, not zeros
        ctx.mark_non_differentiable(*[o for o, d in zip(outputs, differentiable, strict=True) if not d])
        return tuple(outputs)

    @staticmethod
    def backward(ctx: Any, *grads: Tensor | None) -> Any:
        found = ctx.link.gradients(ctx.path, list(grads))
        return (None, None, None, None, *found)


class Link:
    """The grader's end of a kernel: ``hold`` a value of the kernel under a name, and call the functions held.
    ``run(code)`` executes one line of code in the kernel; ``folder`` is where both sides write their files."""

    def __init__(self, run: Callable[[str], None], folder: str | Path) -> None:
        self._run, self._folder = run, Path(folder)
        self._counter = itertools.count()
        self._prefix = f"call-{secrets.token_hex(4)}-"  # two links may share a folder (the tests' loopbacks)

    def _path(self) -> str:
        return str(self._folder / f"{self._prefix}{next(self._counter)}")

    def hold(self, expression: str) -> Any:
        """The value of ``expression`` in the kernel: a ``RemoteFunction`` for a callable, the value (as data)
        otherwise. The expression's own error (a NameError, say) raises ``RuntimeError`` with its text."""
        path = self._path()
        slot = os.path.basename(path)
        self._run(f"__course_grader__.hold({path!r}, {slot!r}, {expression})")
        description = _read(Path(path))
        if not isinstance(description, dict):
            raise RuntimeError("the answer's process described its value in a form the grader does not read")
        if description.get("callable"):
            return RemoteFunction(self, slot, description)
        return _from_wire(description.get("value"))

    def call(self, slot: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        path = self._path()
        grad = [where for where, t in _tensor_paths(args) if t.requires_grad] if torch.is_grad_enabled() else []
        hooked = [
            (i, name)
            for i, arg in enumerate(args)
            if isinstance(arg, nn.Module)
            for name, module in arg.named_modules()
            if module._forward_pre_hooks  # pyright: ignore[reportPrivateUsage]
        ]
        sent_args, sent_kwargs = _map(args, _sendable), _map(kwargs, _sendable)
        buffer = io.BytesIO()
        torch.save({"slot": slot, "args": sent_args, "kwargs": sent_kwargs, "grad": grad, "hooked": hooked}, buffer)
        _write_new(path + ".in", buffer.getvalue())
        self._run(f"__course_grader__.serve({path!r})")
        reply = _read(Path(path + ".out"))
        if not isinstance(reply, dict):
            raise RuntimeError("the answer's process replied in a form the grader does not read")
        for index, name, seen in reply.get("hooks", []):  # the checker's hooks told of each call of the submodule
            module = args[index].get_submodule(name)
            with_kwargs = module._forward_pre_hooks_with_kwargs  # pyright: ignore[reportPrivateUsage]
            for positional, named in seen:  # what it was given: the call's own arguments where they were, else None
                a = tuple(None if i is None else args[i] for i in positional)
                k = {key: None if i is None else args[i] for key, i in named.items()}
                for key, hook in list(module._forward_pre_hooks.items()):  # pyright: ignore[reportPrivateUsage]
                    hook(module, a, k) if key in with_kwargs else hook(module, a)
        if "raised" in reply:
            raised = reply["raised"]
            raise _exception(str(raised.get("type", "Exception")), str(raised.get("message", "")))
        for given, after in zip(args, reply.get("after", []), strict=False):
            _apply_after(given, after)
        result = _from_wire(reply.get("result"), args)
        if grad and any(reply.get("graph", [])):
            leaves = [_at(args, where) for where in grad]
            found = _tensor_paths(result)
            tied = _Through.apply(self, path, [t for _, t in found], list(reply["graph"]), *leaves)
            result = _replace(result, list(tied))
        return result

    def gradients(self, path: str, grads: list[Tensor | None]) -> list[Tensor | None]:
        buffer = io.BytesIO()
        torch.save([None if g is None else g.detach() for g in grads], buffer)
        _write_new(path + ".grad", buffer.getvalue())
        self._run(f"__course_grader__.backward({path!r})")
        reply = _read(Path(path + ".grads"))
        if not isinstance(reply, dict) or "raised" in reply:
            raise RuntimeError("the answer's process could not compute the gradients")
        return list(reply["grads"])


def _map(value: Any, leaf: Callable[[Any], Any]) -> Any:
    """``value`` with ``leaf`` applied to everything in it that is not a list, tuple or dict (the order in which
    ``_tensor_paths`` finds tensors)."""
    if isinstance(value, list):
        return [_map(v, leaf) for v in value]
    if isinstance(value, tuple):
        return tuple(_map(v, leaf) for v in value)
    if isinstance(value, dict):
        return {k: _map(v, leaf) for k, v in value.items()}
    return leaf(value)


def _sendable(value: Any) -> Any:
    """One argument of a call, as it is sent: a tensor detached (its need of a gradient is sent apart), a module copied
    without its hooks (a checker's hooks are its own, and a lambda does not cross; the kernel records the calls)."""
    if isinstance(value, Tensor):
        return value.detach()
    if isinstance(value, nn.Module) and any(m._forward_pre_hooks or m._forward_hooks for m in value.modules()):  # pyright: ignore[reportPrivateUsage]
        saved = [(m, m._forward_pre_hooks, m._forward_hooks) for m in value.modules()]  # pyright: ignore[reportPrivateUsage]
        try:
            for m, _, _ in saved:
                m._forward_pre_hooks, m._forward_hooks = OrderedDict(), OrderedDict()  # pyright: ignore[reportPrivateUsage]
            buffer = io.BytesIO()
            torch.save(value, buffer)
        finally:
            for m, pre, post in saved:
                m._forward_pre_hooks, m._forward_hooks = pre, post  # pyright: ignore[reportPrivateUsage]
        buffer.seek(0)
        return torch.load(buffer, weights_only=False)
    return value


def _write_into(given: Tensor, value: Tensor) -> None:
    """``value`` written into the checker's tensor ``given``, as an in-place operation of the answer did."""
    if value.shape != given.shape or value.dtype != given.dtype:
        given.data = value
    elif not torch.equal(value, given.detach()) and not (given.is_floating_point() and bool(
            torch.allclose(value, given.detach(), rtol=0, atol=0, equal_nan=True))):  # fmt: skip
        with torch.no_grad():
            given.copy_(value)


def _apply_after(given: Any, after: Any) -> None:
    """What the call did to an argument, done to the checker's own: values written in place, list and dict items
    replaced or changed in place, a module's parameters replaced, tied or removed."""
    if isinstance(given, Tensor) and isinstance(after, Tensor):
        _write_into(given, after)
    elif isinstance(given, list) and isinstance(after, dict) and "__list__" in after:
        items = []
        for i, (same, value) in enumerate(after["__list__"]):
            value = _from_wire(value)
            if same and i < len(given) and isinstance(given[i], Tensor) and isinstance(value, Tensor):
                _write_into(given[i], value)
                items.append(given[i])
            elif same and i < len(given) and isinstance(given[i], list) and isinstance(value, list):
                given[i][:] = value  # an inner list changed in place (s.append(x)): the same object, new items
                items.append(given[i])
            else:
                items.append(given[i] if same and i < len(given) else value)
        given[:] = items
    elif isinstance(given, dict) and isinstance(after, dict) and "__items__" in after:
        items = {}
        for key, same, value in after["__items__"]:
            key, value = _from_wire(key), _from_wire(value)
            if same and key in given and isinstance(given[key], Tensor) and isinstance(value, Tensor):
                _write_into(given[key], value)
                items[key] = given[key]
            else:
                items[key] = given[key] if same and key in given else value
        given.clear()
        given.update(items)
    elif isinstance(given, nn.Module) and isinstance(after, dict) and "__module__" in after:
        state = after["__module__"]
        originals = dict(given.named_parameters(remove_duplicate=False))
        for name in originals:  # removed (set to None) where the answer's module has it no more
            if name not in {n for n, *_ in state["parameters"]}:
                owner, _, attribute = name.rpartition(".")
                (given.get_submodule(owner) if owner else given).register_parameter(attribute, None)
        for name, origin, value, requires_grad in state["parameters"]:
            target = originals.get(origin) if origin is not None else None
            if target is None:
                target = nn.Parameter(value.clone(), requires_grad=requires_grad)
            else:
                _write_into(target, value)
                target.requires_grad_(requires_grad)
            owner, _, attribute = name.rpartition(".")
            module = given.get_submodule(owner) if owner else given
            if getattr(module, attribute, None) is not target:
                setattr(module, attribute, target)
        now = dict(given.named_parameters(remove_duplicate=False))
        for layouts in state.get("storage", []):  # two Parameters over one memory (.data = ..., a view): here too
            first = now.get(layouts[0][0])
            for other, size, stride, offset in layouts[1:]:
                if first is not None and now.get(other) is not None and now[other] is not first:
                    now[other].data = torch.as_strided(first.data, size, stride, offset)
        buffers = dict(given.named_buffers())
        for name, value in state["buffers"]:
            if name in buffers:
                _write_into(buffers[name], value)


def _replace(value: Any, tensors: list[Tensor]) -> Any:
    """``value`` with its tensors replaced by ``tensors``, in the order ``_tensor_paths`` finds them."""
    new = iter(tensors)
    return _map(value, lambda v: next(new) if isinstance(v, Tensor) else v)


def loopback(namespace: dict[str, Any], folder: str | Path | None = None) -> Link:
    """A link to a ``KernelSide`` in this process that runs code in ``namespace`` (the tests' kernel): every value
    still crosses as a file, so a checker run through it sees what it would see across two processes. Without
    ``folder``, the files go to a temporary folder of the link's own, deleted with the link."""
    side = KernelSide()
    namespace["__course_grader__"] = side
    made = folder is None
    folder = Path(tempfile.mkdtemp(prefix="loopback-")) if folder is None else Path(folder)

    def run(code: str) -> None:
        try:
            exec(code, namespace)
        except Exception as e:  # as the grader hears of an error in the kernel: its name and message
            raise RuntimeError(f"{type(e).__name__}: {e}") from None

    link = Link(run, folder)
    if made:  # when the link and the functions held through it are gone
        weakref.finalize(link, shutil.rmtree, folder, ignore_errors=True)
    return link
