"""Checkers for chapter 11: data-parallel training with ``torch.distributed`` (gradients averaged over the ranks,
each rank's shard of a data set, the memory each rank holds under DDP and FSDP).

``check_average_gradients`` runs the student's function in two processes joined in a ``gloo`` process group
(``course_utils.training.distributed.spawn``). A function defined in a notebook cannot be pickled into new processes,
so the checker sends its source, read with ``inspect.getsource``, and each process runs it with ``torch``, ``dist``,
``nn``, ``F``, ``math`` and what its code uses of the notebook's imports.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import math
import numbers
import textwrap
import time
import types
from collections.abc import Callable, Iterable
from itertools import combinations
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.data import DistributedSampler

from ..training.distributed import spawn
from ..utils import code_names
from ._core import EMPTY_ERRORS, NotWritten, NotYet, Verdict, call, one_number, verdict

__all__ = ["check_average_gradients", "check_bytes_per_rank", "check_shard_indices"]


# --- averaging the gradients over the ranks -------------------------------------------------------------------------

WORLD = 2  # processes the answer runs on
STEPS, ROWS, LR = 3, 12, 0.1  # SGD steps; rows of each step's batch, split between the ranks (2 or 3); learning rate
MODEL = "the checker's model: Linear(6, 16), Tanh, Linear(16, 2)"  # where a message names its parameters (2.bias)
TIMEOUT = 60.0  # seconds before a rank still waiting in a collective is named
# What gloo says on a rank that waits in a collective which another rank never joins (that rank has finished, or
# failed, and its process ended): in a run that goes on, that rank would wait for ever.
PEER_GONE = ("Connection reset by peer", "Connection closed by peer", "Broken pipe", "Timed out", "timed out")
HANG = (
    "Every rank must make the same collective calls, on the same tensors, in the same order: no all_reduce under "
    "`if dist.get_rank() == ...`, and none skipped on one rank only (a gradient that is None on one rank)"
)


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 2))


def _batches() -> list[tuple[Tensor, Tensor]]:
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(ROWS, 6, generator=g), torch.randn(ROWS, 2, generator=g)) for _ in range(STEPS)]


def _half(x: Tensor, rank: int, world_size: int = WORLD) -> Tensor:
    """Rank ``rank``'s rows of a batch, of ``world_size`` equal parts: with 2 ranks, the first half for rank 0, the
    second for rank 1."""
    per = x.size(0) // world_size
    return x[rank * per : (rank + 1) * per]


def _weights(model: nn.Module) -> dict[str, Tensor]:
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def _backward(model: nn.Module, x: Tensor, y: Tensor) -> None:
    """The gradients of the mean squared error on (x, y), into fresh ``.grad``s (as ``zero_grad()`` leaves them)."""
    for p in model.parameters():
        p.grad = None
    F.mse_loss(model(x), y).backward()


def _step(model: nn.Module) -> None:
    """``torch.optim.SGD``'s step (no momentum), written out: building the optimizer costs a new process a second."""
    with torch.no_grad():
        for p in model.parameters():
            if p.grad is not None:
                p.add_(p.grad, alpha=-LR)


def _one_process() -> dict[str, Tensor]:
    """The reference: one process trained on the whole batch of every step, which two ranks share."""
    model = _model()
    for x, y in _batches():
        _backward(model, x, y)
        _step(model)
    return _weights(model)


def _simulated(averaged: Iterable[int], scale: float = 1.0) -> list[dict[str, Tensor]]:
    """What each rank's weights become when the parameters numbered ``averaged`` get the ranks' mean gradient times
    ``scale`` and the others keep their rank's own: the classic mistakes, computed in this process."""
    averaged = list(averaged)
    models = [_model() for _ in range(WORLD)]
    for x, y in _batches():
        for rank, model in enumerate(models):
            _backward(model, _half(x, rank), _half(y, rank))
        grads = [[p.grad for p in model.parameters() if p.grad is not None] for model in models]  # every one here
        for i in averaged:
            mean = torch.stack([g[i] for g in grads]).mean(0) * scale
            for g in grads:
                g[i].copy_(mean)
        for model in models:
            _step(model)
    return [_weights(m) for m in models]


def _resolve(module: str, qualname: str) -> Any:
    value: Any = importlib.import_module(module)
    for part in filter(None, qualname.split(".")):
        value = getattr(value, part)
    return value


def _imports(fn: Callable[..., Any]) -> dict[str, tuple[str, str]]:
    """What the answer's code uses from its notebook's imports, as (module, qualified name) for the new processes to
    import again: ``import torch.distributed as td``, ``from torch.distributed import all_reduce``. A name the
    notebook defined itself is left out: the new processes cannot import it."""
    code, scope = getattr(fn, "__code__", None), getattr(fn, "__globals__", {})
    found: dict[str, tuple[str, str]] = {}
    if not isinstance(code, types.CodeType) or not isinstance(scope, dict):
        return found
    for name in code_names(fn):
        value = scope.get(name)
        if isinstance(value, types.ModuleType):
            found[name] = (value.__name__, "")
            continue
        module, qualname = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
        if not isinstance(module, str) or not isinstance(qualname, str) or module == "__main__":
            continue
        try:
            if _resolve(module, qualname) is value:
                found[name] = (module, qualname)
        except Exception:  # not importable where it says it lives: left out
            continue
    return found


def _gradients_averaged_with(
    rank: int, world_size: int, source: str, name: str, imports: dict[str, tuple[str, str]]
) -> dict[str, Any]:
    """On each rank (run by ``spawn``): the answer's code executed anew, then the model trained on this rank's half
    of every batch, the answer called after each backward. The weights, or what the answer raised, as data."""
    namespace: dict[str, Any] = {"__name__": "__answer__", "torch": torch, "dist": dist, "nn": nn, "F": F, "math": math}
    for alias, (module, qualname) in imports.items():
        try:
            namespace[alias] = _resolve(module, qualname)
        except Exception:
            continue
    try:
        exec(compile(source, f"<{name}>", "exec"), namespace)
        fn = namespace[name]
        model = _model()
        for x, y in _batches():
            _backward(model, _half(x, rank, world_size), _half(y, rank, world_size))
            fn(model)
            _step(model)
    except NotImplementedError:
        return {"not written": True}
    except Exception as e:
        return {"raised": type(e).__name__, "message": str(e)}
    return {"weights": _weights(model)}


def _source(fn: Callable[..., Any]) -> str:
    """The answer's code, dedented: ``NotWritten`` for the student edition's stub (a body that only raises
    ``NotImplementedError``), ``NotYet`` where it cannot be read."""
    name = getattr(fn, "__name__", "your function")
    if not callable(fn):
        raise NotYet(f"the checker needs your function itself; it got {type(fn).__name__} {fn!r:.40}")
    define = (
        "the check runs your function in new processes (2, then 3), which need its code: define it with def in a "
        "notebook cell, run that cell, then this one"
    )
    if name == "<lambda>":
        raise NotYet(f"your function is a lambda: {define}")
    try:
        source = textwrap.dedent(inspect.getsource(fn))  # pyright: ignore[reportArgumentType]
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError) as e:
        raise NotYet(f"the checker could not read the code of {name} ({type(e).__name__}: {e}): {define}") from None
    defined = [
        node for node in tree.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name
    ]
    if not defined:
        raise NotYet(f"the checker could not find `def {name}` in the code of {name}: {define}")
    body = [
        statement
        for statement in defined[0].body
        if not isinstance(statement, ast.Pass)
        and not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant))  # docstring, ...
    ]
    raised = body[0].exc if len(body) == 1 and isinstance(body[0], ast.Raise) else None
    raised = raised.func if isinstance(raised, ast.Call) else raised
    if isinstance(raised, ast.Name) and raised.id == "NotImplementedError":
        raise NotWritten(f"{name} is not written yet: replace `raise NotImplementedError`, then run this cell again.")
    return source


def _largest_difference(got: dict[str, Tensor], expected: dict[str, Tensor]) -> tuple[float, str]:
    gaps = {n: float((got[n].double() - w.double()).abs().max()) for n, w in expected.items()}
    worst = max(gaps, key=lambda n: gaps[n])
    return gaps[worst], worst


def _equal(a: dict[str, Tensor], b: dict[str, Tensor], atol: float = 1e-5) -> bool:
    return all(torch.allclose(a[n].double(), w.double(), rtol=0, atol=atol) for n, w in b.items())


def _on_two_ranks(fn: Callable[..., Any], world_size: int = WORLD) -> dict[str, Any]:
    """The answer run on ``world_size`` new processes, in the process that holds it (the notebook's, or the grader's
    kernel): each rank's result, or why there is none, as data. It never raises: the checker says what it means."""
    try:
        source = _source(fn)
    except NotWritten as e:
        return {"not written": str(e)}
    except NotYet as e:
        return {"not yet": str(e)}
    name = getattr(fn, "__name__", "your function")
    start = time.monotonic()
    try:
        return {"ranks": spawn(_gradients_averaged_with, world_size, source, name, _imports(fn), timeout=TIMEOUT)}
    except TimeoutError as e:
        return {"timeout": str(e), "early": time.monotonic() - start < TIMEOUT}


def _on_three_ranks(fn: Callable[..., Any]) -> dict[str, Any]:
    """``_on_two_ranks`` on 3 processes: an answer that divides by 2, written in, is right on 2 ranks only."""
    return _on_two_ranks(fn, 3)


def check_average_gradients(fn: Callable[..., Any]) -> Verdict:
    """``fn(model)`` replaces every parameter's ``.grad`` by its mean over the ranks of the default process group
    (``dist.all_reduce``, a sum, then a division by ``dist.get_world_size()``). Run on 2 processes (gloo), each
    training on half of every batch, it must train the weights of one process trained on the whole batches."""

    def run() -> str:
        name = getattr(fn, "__name__", "your function")
        # in the grader, the answer lives in the grader's kernel: the ranks are started there, and their weights
        # come back as data
        applied = getattr(fn, "applied", None)  # course_utils.remote.RemoteFunction's: run it where the answer is
        outcome = applied(_on_two_ranks) if callable(applied) else _on_two_ranks(fn)
        if not isinstance(outcome, dict):
            raise NotYet("the answer's process returned something other than the ranks' results")
        if "not written" in outcome:
            raise NotWritten(str(outcome["not written"]))
        if "not yet" in outcome:
            raise NotYet(str(outcome["not yet"]))
        if "timeout" in outcome:
            if outcome["early"]:  # ended before the time limit: they did not wait, they failed
                raise RuntimeError(
                    f"the {WORLD} processes of the check ended before they reported (in a script, start the check "
                    'under `if __name__ == "__main__":`)'
                )
            waiting = str(outcome["timeout"]).split(" of ")[0]  # "rank(s) [1]"
            raise NotYet(
                f"the run hangs: {waiting} of {WORLD} did not finish within {TIMEOUT:g} s, waiting in a collective "
                f"that another rank never joined (or in a loop that never ends). {HANG}"
            )
        ranks: list[dict[str, Any]] = outcome["ranks"]
        if any("not written" in r for r in ranks):
            raise NotWritten(
                f"{name} is not written yet: replace `raise NotImplementedError`, then run this cell again."
            )
        raised = {rank: r for rank, r in enumerate(ranks) if "raised" in r}
        own = {rank: r for rank, r in raised.items() if not any(words in r["message"] for words in PEER_GONE)}
        if own:  # the answer's own error, before any rank's wait for a peer that had gone
            rank, error = min(own.items())
            message = str(error["message"])
            where = f" on rank {rank} only" if len(own) < WORLD else ""
            if "ReduceOp.AVG" in message:
                raise NotYet(
                    f"{name} raised {error['raised']}{where}: {message}. gloo, the CPU backend, does not average in "
                    "the all_reduce in this PyTorch (NCCL does, and gloo since PyTorch 2.8): sum with the default "
                    "ReduceOp.SUM, then divide by dist.get_world_size()"
                )
            detail = (
                f": {message}" if message else EMPTY_ERRORS.get(str(error["raised"]), " (an error with no message)")
            )
            hinted = error["raised"] == "NameError" or "process group twice" in message
            detail = detail.rstrip(".!") if hinted else detail  # a hint follows: "twice!. The" reads badly
            if error["raised"] == "NameError":
                detail += (
                    ". The check runs your function's own code in new processes (2, then 3), with torch, dist "
                    "(torch.distributed), nn, F, math and the modules your notebook imported: define what else it "
                    "needs inside the function"
                )
            if "process group twice" in message:
                detail += (
                    ". The process group is already set up (by the checker here, by torchrun in a script): your "
                    "function only averages the gradients"
                )
            raise NotYet(f"{name} raised {error['raised']}{where}{detail}")
        if raised:
            waited, finished = min(raised), [rank for rank in range(WORLD) if rank not in raised]
            others = f"rank {finished[0]} finished without it" if finished else "no other rank joined it"
            raise NotYet(
                f"the run hangs: rank {waited} waited in a collective that the other rank never joined ({others}), "
                f"which in a real run waits for ever. {HANG}"
            )
        got: list[dict[str, Tensor]] = [r["weights"] for r in ranks]
        reference = _one_process()
        if all(_equal(g, reference, atol=1e-6) for g in got):
            three = applied(_on_three_ranks) if callable(applied) else _on_three_ranks(fn)
            weights = [r.get("weights") for r in three.get("ranks", [])] if isinstance(three, dict) else []
            if len(weights) != 3 or not all(w is not None and _equal(w, reference, atol=1e-6) for w in weights):
                raise NotYet(
                    f"right on {WORLD} ranks, but not on 3, each on a third of every batch: is the number of ranks "
                    "written into the code (a division by 2)? Divide by dist.get_world_size(), which each rank "
                    "reads from its process group"
                )
            return (
                f"{name} is right: {WORLD} ranks, each on half of every batch, train the weights of one process "
                "trained on the whole batches."
            )
        names = list(reference)
        if not _equal(got[0], got[1], atol=1e-6):
            if all(_equal(g, w) for g, w in zip(got, _simulated([]), strict=True)):
                raise NotYet(
                    "the gradients are left as they are: each rank trained on its own half of the batch, and the "
                    "ranks' weights differ. Each p.grad must end up holding the mean over the ranks: all_reduce "
                    "p.grad itself (in place: it writes the sum into the tensor it is given), then p.grad /= "
                    "dist.get_world_size(); or all_reduce one buffer of all the gradients and copy its slices back "
                    "with p.grad.copy_(...). An all_reduce of a copy (p.grad / n) or a name rebound (g = ...) leaves "
                    "p.grad unchanged"
                )
            for size in range(1, len(names)):
                for subset in combinations(range(len(names)), size):
                    if all(_equal(g, w) for g, w in zip(got, _simulated(subset), strict=True)):
                        kept = [names[i] for i in range(len(names)) if i not in subset]
                        averaged = ", ".join(names[i] for i in subset)
                        raise NotYet(
                            f"only some parameters are averaged ({averaged}, of {MODEL}): the others "
                            f"({', '.join(kept)}) keep each rank's own gradient, so the ranks' weights drift apart. "
                            "Average the .grad of every parameter in model.parameters()"
                        )
            gap, where = _largest_difference(got[1], got[0])
            raise NotYet(
                f"the {WORLD} ranks' weights differ after training (by up to {gap:.3g}, in {where} of {MODEL}): "
                "after your function every rank must hold the same gradients, their mean over the ranks"
            )
        mistakes = [
            (
                2.0,
                "the gradients are summed, not averaged: divide by dist.get_world_size() after the all_reduce. The "
                f"sum is the mean times the number of ranks: a learning rate {WORLD} times larger ({WORLD} ranks "
                "here, N times with N ranks)",
            ),
            (
                0.5,
                f"the gradients are divided by {WORLD * WORLD} where the ranks are {WORLD}: divided twice (before "
                "and after the all_reduce, say) or by another count. The all_reduce sums one gradient per rank: "
                "divide that sum once, by dist.get_world_size()",
            ),
        ]
        for scale, message in mistakes:
            if _equal(got[0], _simulated(range(len(names)), scale)[0]):
                raise NotYet(message)
        if _equal(got[0], _weights(_model()), atol=0):
            raise NotYet("the weights did not move: after your function the gradients are None or zero")
        gap, where = _largest_difference(got[0], reference)
        raise NotYet(
            f"the weights differ from those of one process trained on the whole batches (by up to {gap:.3g}, in "
            f"{where} of {MODEL}): each p.grad must become the mean of the {WORLD} ranks' gradients, every "
            "element of it in its place (with one buffer for all: each slice copied back to its own p.grad)"
        )

    return verdict(run)


# --- each rank's shard of a data set --------------------------------------------------------------------------------


def _sampled(n: int, rank: int, world_size: int, epoch: int, seed: int, **options: bool) -> list[int]:
    """What ``DistributedSampler(range(n), ...)`` yields rank ``rank`` in ``epoch``, with ``options`` (shuffle,
    drop_last) as given: the reference, and two classic mistakes (no shuffle, drop_last)."""
    dataset: Any = range(n)  # a sequence is all the sampler reads of it: its length
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, seed=seed, **options)
    sampler.set_epoch(epoch)
    return list(sampler)


def _permutation(n: int, seed: int) -> list[int]:
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist()


def _padded(indices: list[int], world_size: int) -> list[int]:
    total = math.ceil(len(indices) / world_size) * world_size
    return (indices * math.ceil(total / len(indices)))[:total]


def _as_indices(got: object, rank: int) -> list[int]:
    """The answer for one rank as a list of ints: a list, tuple, range, 1-D tensor or array (or an iterator) of
    whole numbers; ``NotYet`` otherwise."""
    if isinstance(got, Tensor | np.ndarray):
        if got.ndim != 1:
            raise NotYet(f"rank {rank}'s indices should be one-dimensional; got shape {tuple(got.shape)}")
        if isinstance(got, Tensor) and got.device.type == "meta":
            raise NotYet(f"rank {rank}'s indices are on the meta device, which holds no values")
        got = got.tolist()
    if isinstance(got, str | bytes | dict | set | frozenset) or not isinstance(got, Iterable):
        raise NotYet(
            f"return rank {rank}'s indices as a list of ints, in the order it reads them; got {type(got).__name__}"
        )
    items: list[Any] = list(got)  # pyright: ignore[reportUnknownArgumentType]
    for item in items:
        if isinstance(item, Tensor) and item.numel() == 1:
            item = item.item()
        if isinstance(item, bool) or not isinstance(item, numbers.Integral):
            raise NotYet(f"rank {rank}'s indices should be ints; one is {type(item).__name__} {item!r:.20}")
    return [int(i.item()) if isinstance(i, Tensor) else int(i) for i in items]


def _contiguous(piece: list[int], whole: list[int]) -> bool:
    return any(whole[i : i + len(piece)] == piece for i in range(len(whole) - len(piece) + 1))


def _shard_mistake(got: list[list[int]], n: int, world_size: int, epoch: int, seed: int) -> str:
    """What the ranks' indices ``got`` show, for one case whose answer is wrong."""
    ranks = range(world_size)
    perm = _permutation(n, seed + epoch)
    padded = _padded(perm, world_size)
    per = len(padded) // world_size
    named = [
        (
            [(perm + perm[: len(padded) - n])[r::world_size] for r in ranks],
            "the padding, perm[:padding], is too short when n < world_size: repeat the permutation until its length "
            "is a multiple of world_size, as DistributedSampler does",
        ),
        (
            [_sampled(n, r, world_size, 0, seed) for r in ranks],
            "the order is the same every epoch: seed the generator with seed + epoch (what sampler.set_epoch "
            "changes), not with seed alone",
        ),
        (
            [_sampled(n, r, world_size, epoch, 0) for r in ranks],
            "the seed is ignored: seed the generator with seed + epoch",
        ),
        (
            [_sampled(n, r, world_size, epoch, seed, shuffle=False) for r in ranks],
            "the indices are not shuffled: DistributedSampler(shuffle=True) permutes them, torch.randperm(n, "
            "generator=g) with g = torch.Generator() seeded with seed + epoch",
        ),
        (
            [_sampled(n, r, world_size, epoch, seed, drop_last=True) for r in ranks],
            "the last indices are dropped (drop_last=True): DistributedSampler(drop_last=False) pads instead, "
            "repeating indices from the start of the permutation up to a multiple of world_size",
        ),
    ]
    expected = [_sampled(n, r, world_size, epoch, seed) for r in ranks]
    named.append(
        (
            [expected[(r + 1) % world_size] for r in ranks],
            "each rank reads the next rank's indices (rank r gets rank r + 1's): start at the rank itself, "
            "padded[rank::world_size]",
        )
    )
    for buggy, message in named:
        if got == buggy and buggy != expected:
            return message
    counts = [len(g) for g in got]
    if len(set(counts)) == 1 and counts[0] > per:
        return (
            f"each rank reads {counts[0]} indices where DistributedSampler gives it {per}: the padding goes past the "
            f"next multiple of world_size; pad only up to math.ceil(n / world_size) * world_size = {per * world_size} "
            "(no padding at all when world_size divides n)"
        )
    if world_size > 1 and max(map(len, got)) > 1 and all(_contiguous(g, padded) or _contiguous(g, perm) for g in got):
        return (
            "each rank reads a contiguous block of the permutation: a valid split, but not DistributedSampler's, "
            "which gives rank r every world_size-th index, starting at r: padded[rank::world_size]"
            + ("" if len(set(map(len, got))) == 1 else ". And the ranks get unequal counts: pad the permutation")
        )
    if len(set(counts)) > 1:
        short, long = counts.index(min(counts)), counts.index(max(counts))
        return (
            f"rank {short} reads {min(counts)} indices and rank {long} {max(counts)}: without padding the ranks get "
            "unequal counts when world_size does not divide n, and the rank with fewer batches leaves a collective "
            "(DDP's all_reduce) that the others wait in: the run hangs. Pad as DistributedSampler does: repeat "
            f"indices from the start of the permutation up to a multiple of world_size ({per * world_size} here)"
        )
    read = set().union(*map(set, got))
    if read != set(range(n)):
        missing = min(set(range(n)) - read)
        return (
            f"the ranks' shards overlap and some examples are never read (index {missing}, for one): each rank "
            "shuffles on its own (its own seed, or the global random state). Every rank must draw the same "
            "permutation, from a torch.Generator seeded with seed + epoch, and take its own every world_size-th "
            "index of it"
        )
    first = next(r for r in ranks if got[r] != expected[r])
    return (
        f"rank {first} reads {got[first]}; DistributedSampler gives it {expected[first]}. The ranks split the "
        "indices between them, but not in DistributedSampler's order: g = torch.Generator(); g.manual_seed(seed + "
        "epoch); torch.randperm(n, generator=g), padded up to a multiple of world_size, then every world_size-th "
        "index starting at rank"
    )


def check_shard_indices(fn: Callable[..., Any]) -> Verdict:
    """``fn(n, rank, world_size, epoch, seed=0)`` returns the indices rank ``rank`` reads in ``epoch``, in order, as
    ``DistributedSampler(range(n), num_replicas=world_size, rank=rank, shuffle=True, seed=seed)`` yields them after
    ``set_epoch(epoch)``."""
    cases = [  # (n, world_size, epoch, seed): the first shows padding, the epoch and the seed at once
        (10, 3, 2, 5),
        (10, 3, 3, 5),
        (12, 4, 0, 0),
        (7, 2, 1, 42),
        (2, 5, 1, 0),  # fewer examples than ranks: the permutation repeated
        (3, 4, 0, 7),
        (9, 1, 4, 3),  # one rank: every index
        (100, 8, 7, 1234),
    ]

    def run() -> str:
        for n, world_size, epoch, seed in cases:
            state = torch.get_rng_state()
            got = [_as_indices(call(fn, n, rank, world_size, epoch, seed), rank) for rank in range(world_size)]
            expected = [_sampled(n, rank, world_size, epoch, seed) for rank in range(world_size)]
            if got == expected:
                if not torch.equal(torch.get_rng_state(), state):
                    raise NotYet(
                        "right indices, but drawn from PyTorch's global generator (torch.manual_seed, then "
                        "torch.randperm without generator=): in a training run that reseeds every other random draw "
                        "each epoch, dropout's included. Draw them from a generator of their own, g = "
                        "torch.Generator(); g.manual_seed(seed + epoch); torch.randperm(n, generator=g)"
                    )
                continue
            case = f"with n={n}, world_size={world_size}, epoch={epoch}, seed={seed}"
            outside = [i for g in got for i in g if not 0 <= i < n]
            if outside:
                raise NotYet(f"{case}: index {outside[0]} is outside the data set, range({n})")
            raise NotYet(f"{case}: {_shard_mistake(got, n, world_size, epoch, seed)}")
        return "every rank reads what DistributedSampler gives it, epoch after epoch."

    return verdict(run)


# --- the memory each rank holds -------------------------------------------------------------------------------------

BYTES = 4 + 4 + 8  # per parameter, float32: the parameter, its gradient, AdamW's two moments (exp_avg, exp_avg_sq)
PER_PARAMETER = {  # bytes per parameter that classic mistakes count, and what each forgets
    4: "only the parameters are counted (4 bytes each, float32): each rank also holds their gradients (4 bytes) and "
    "AdamW's two moment buffers, exp_avg and exp_avg_sq (4 + 4): 16 bytes per parameter",
    8: "8 bytes per parameter where there are 16: AdamW's state is forgotten (its two float32 moment buffers, "
    "exp_avg and exp_avg_sq, 8 bytes per parameter), or every number is counted as 2 bytes (bfloat16) where all "
    "four tensors here are float32, 4 bytes a number: parameter 4 + gradient 4 + AdamW's moments 8 = 16",
    12: "12 bytes per parameter where there are 16: the gradients are forgotten (backward fills a float32 .grad as "
    "large as each parameter, 4 bytes), or one of AdamW's two moments: parameter 4 + gradient 4 + exp_avg 4 + "
    "exp_avg_sq 4",
    2: "2 bytes per parameter: one bfloat16 tensor. Here every tensor is float32 (4 bytes a number) and a rank holds "
    "four per parameter: the parameter, its gradient and AdamW's two moments, 16 bytes",
    32: "32 bytes per parameter: 8 bytes a number is float64; float32 takes 4, so 4 + 4 + 8 = 16",
}
UNITS = {1e3: "kilobytes (1e3 bytes)", 2**10: "KiB (1024 bytes)", 1e6: "megabytes (1e6 bytes)",
         2**20: "MiB (2**20 bytes)", 1e9: "gigabytes (1e9 bytes)", 2**30: "GiB (2**30 bytes)"}  # fmt: skip


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 0.01 * abs(b)


def check_bytes_per_rank(fn: Callable[..., Any]) -> Verdict:
    """``fn(n_params, world_size, strategy)`` returns the bytes each rank holds for the parameters, their gradients
    and AdamW's two moment buffers, all float32 (16 bytes per parameter): all of them on every rank with ``"ddp"``,
    1/world_size of each with ``"fsdp"`` (``fully_shard``, ZeRO stage 3). Right within 1%, or rounded up per tensor."""
    cases = [  # (n_params, world_size, strategy): GPT-2 small, then a size no world_size divides, a 7B model, 1 rank
        (124_439_808, 8, "ddp"),
        (124_439_808, 8, "fsdp"),
        (1_000_003, 3, "fsdp"),
        (1_000_003, 3, "ddp"),
        (7_000_000_000, 64, "fsdp"),
        (50_000, 1, "fsdp"),
        (50_000, 1, "ddp"),
    ]

    def one(n_params: int, world_size: int, strategy: str) -> None:
        answer = call(fn, n_params, world_size, strategy)
        got = one_number(answer)
        where = f"{getattr(fn, '__name__', 'your function')}({n_params}, {world_size}, {strategy!r})"
        if got is None:
            raise NotYet(f"{where} returned {answer!r:.40}: return the number of bytes, an int or a float")
        share, other = (1.0, 1 / world_size) if strategy == "ddp" else (1 / world_size, 1.0)
        expected = BYTES * n_params * share
        if _close(got, expected) or (strategy == "fsdp" and got == BYTES * math.ceil(n_params / world_size)):
            return
        shown = f"{got:,.0f}" if got.is_integer() and abs(got) >= 1 else f"{got:,.6g}"
        said = f"{where} returns {shown}; each rank holds {expected:,.0f} bytes"
        replicated = (
            "DDP replicates everything: every rank holds all the parameters, gradients and optimizer state (16 bytes "
            "per parameter, n_params of them); only FSDP divides them by the world size"
            if strategy == "ddp"
            else "FSDP is not divided: fully_shard gives each rank 1/world_size of every parameter, of its gradient "
            "and of AdamW's state, so each rank holds 16 * n_params / world_size bytes"
        )
        if other != share and _close(got, BYTES * n_params * other):
            raise NotYet(f"{said}: {replicated}")
        for b, message in PER_PARAMETER.items():
            if _close(got, b * n_params * share):
                raise NotYet(f"{said}: {message}")
        for b, message in PER_PARAMETER.items():
            if other != share and _close(got, b * n_params * other):
                raise NotYet(f"{said}: {replicated}; and {message}")
        if strategy == "fsdp" and world_size > 1:  # the ZeRO stages before 3 shard only part of the 16 bytes
            stages = [
                (8 + 8 / world_size, "ZeRO stage 1 (only AdamW's moments sharded: 8 + 8 / world_size bytes a "
                 "parameter)"),
                (4 + 12 / world_size, "ZeRO stage 2 (the gradients and the moments sharded, the parameters whole: "
                 "4 + 12 / world_size)"),
            ]  # fmt: skip
            for per, stage in stages:
                if _close(got, per * n_params):
                    raise NotYet(
                        f"{said}: that is {stage}. fully_shard is stage 3: it shards the parameters too, so every one "
                        "of the 16 bytes is divided, 16 * n_params / world_size"
                    )
        for unit, words in UNITS.items():
            if _close(got * unit, expected):
                raise NotYet(f"{said}: this is the answer in {words}: return it in bytes (divide only to print it)")
        if _close(got, 8 * expected):
            raise NotYet(f"{said}: this is the answer in bits, 8 to a byte: return bytes")
        raise NotYet(
            f"{said}: each parameter a rank holds costs 16 bytes (a float32 parameter, its float32 gradient and "
            "AdamW's two float32 moments, 4 + 4 + 4 + 4); DDP holds all n_params on every rank, FSDP 1/world_size "
            "of them"
        )

    def run() -> str:
        for case in cases:
            one(*case)
        return (
            "bytes per rank are right: 16 per parameter (float32 parameter, gradient and AdamW's two moments), all "
            "of them on every rank with DDP, 1/world_size with FSDP."
        )

    return verdict(run)
