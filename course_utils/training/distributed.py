"""Training beyond one process, on PyTorch's own engine (``torch.distributed``): the few pieces a data-parallel run
writes by hand before it hands them to DDP or FSDP, each proven equal to them in tests/test_distributed.py.

- ``average_gradients``: every gradient replaced by its mean over the ranks, one ``all_reduce`` per parameter (what
  DDP does, in buckets, overlapped with the backward pass);
- ``shard``: a rank's rows of a batch, the world size dividing it or an error;
- ``backend_for``: ``gloo`` on the CPU, ``nccl`` on CUDA GPUs, an error for NCCL without one;
- ``spawn``: a function run on ``world_size`` local processes joined in one process group, every rank's result
  returned, and a rank that hangs named after ``timeout`` seconds instead of a run that never ends.
"""

from __future__ import annotations

import datetime
import io
import multiprocessing
import os
import queue
import socket
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor, nn

__all__ = ["average_gradients", "backend_for", "same_on_every_rank", "shard", "spawn"]


def average_gradients(model: nn.Module, group: Any = None) -> None:
    """Replace each parameter's gradient by its mean over the ranks of ``group`` (all of them by default): one
    ``all_reduce`` (a sum) per parameter, then a division by the number of ranks. After it every rank holds the same
    gradients, so the same optimizer step keeps their weights equal."""
    world = dist.get_world_size(group)
    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad, op=dist.ReduceOp.SUM, group=group)
            p.grad.div_(world)


def same_on_every_rank(model: nn.Module) -> bool:
    """Whether every rank holds rank 0's parameters bit for bit. Rank 0 broadcasts each parameter in turn, every rank
    compares it with its own (``torch.equal``), and an all-reduce of the mismatches gives every rank the same answer.
    A checksum (a sum of the weights) could match for weights that differ; this cannot. Each rank holds one extra
    parameter at a time. Every rank must call it, as for any collective."""
    mismatches = 0
    device = torch.device("cpu")
    for p in model.parameters():
        device = p.device
        rank_0s = p.detach().clone()
        dist.broadcast(rank_0s, src=0)  # rank 0's copy of this parameter, on every rank
        mismatches += not torch.equal(rank_0s, p.detach())
    total = torch.tensor([mismatches], device=device)  # on the parameters' device: NCCL sends only CUDA tensors
    dist.all_reduce(total)  # the mismatches of every rank, summed
    return int(total.item()) == 0


def shard(batch: Tensor, rank: int, world_size: int) -> Tensor:
    """Rank ``rank``'s rows of ``batch`` (B, ...): rows ``rank * B/N`` to ``(rank + 1) * B/N``, for N ranks."""
    rows = batch.shape[0]
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} of world_size {world_size}: need 0 <= rank < world_size")
    if rows % world_size:
        raise ValueError(
            f"a batch of {rows} rows does not split over {world_size} ranks: make the batch a multiple of "
            f"{world_size} (e.g. {rows - rows % world_size or world_size}), or drop the last, uneven batch"
        )
    per = rows // world_size
    return batch[rank * per : (rank + 1) * per]


def backend_for(device: torch.device | str) -> str:
    """The process group's backend for ``device``: ``nccl`` for CUDA, ``gloo`` for the CPU. NCCL without a CUDA GPU
    is refused, with what to use instead."""
    device = torch.device(device)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("NCCL needs a CUDA GPU and this machine has none: use backend 'gloo' on the CPU")
        return "nccl"
    if device.type == "cpu":
        return "gloo"
    raise ValueError(f"no torch.distributed backend here for device {device.type!r}: use the CPU (gloo) or CUDA (nccl)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _port_taken(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def _context() -> Any:
    """How ``spawn`` starts its ranks: on Linux forked from a server process that has imported PyTorch once (Python's
    "forkserver"), so that each rank starts in a fraction of a second instead of importing PyTorch again (about two
    seconds of a CPU each); elsewhere as new interpreters ("spawn": forking a process that loaded macOS's system
    libraries is unsafe, and Windows cannot fork). The server imports PyTorch alone: each rank imports ``fn``'s module
    itself, from the caller's path, as a new interpreter would; it gets the caller's environment of the moment and
    fresh random seeds (``_rank``)."""
    if not sys.platform.startswith("linux"):
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["torch"])  # read when the server starts (the first call), if none runs yet
    return context


def _rank(
    fn: Callable[..., Any],
    rank: int,
    world_size: int,
    port: int,
    timeout: float,
    args: tuple[Any, ...],
    results: Any,
    environment: dict[str, str],
):
    os.environ.clear()  # the caller's now, not the fork server's when it started
    os.environ.update(environment)
    if "numpy" in sys.modules:  # a forked rank would share the server's state with every other: fresh, as if started
        sys.modules["numpy"].random.seed()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    # what torchrun sets in each process it starts, so that code written for it (int(os.environ["WORLD_SIZE"])) runs
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world_size),
                      LOCAL_WORLD_SIZE=str(world_size), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))  # fmt: skip
    torch.set_num_threads(1)
    try:
        dist.init_process_group(
            "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size,
            timeout=datetime.timedelta(seconds=timeout),
        )  # fmt: skip
        try:
            result = io.BytesIO()  # as bytes: a tensor put on the queue itself would be shared through a file
            torch.save(
                fn(rank, world_size, *args), result
            )  # descriptor that this process, once ended, no longer serves
            results.put((rank, "ok", result.getvalue()))
        finally:
            dist.destroy_process_group()
    except BaseException as e:  # said to the parent, which raises it with the rank's name
        results.put((rank, "error", f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=6)}"))


def spawn(
    fn: Callable[..., Any], world_size: int, *args: Any, timeout: float = 120.0, port: int | None = None
) -> list[Any]:
    """Run ``fn(rank, world_size, *args)`` in ``world_size`` new processes joined in one ``gloo`` process group on
    this machine (``port``: the rendezvous port, a free one by default), and return each rank's result, in rank
    order. ``fn`` must be picklable (a function of a module), its results tensors, numbers, strings and containers of
    these. A rank that raises is named with its error; ranks still running after ``timeout`` seconds (a collective
    some rank never joined) are ended and named, instead of a run that hangs."""
    if world_size < 1:
        raise ValueError(f"world_size={world_size}: at least 1 process")
    if port is not None and _port_taken(port):
        raise RuntimeError(f"port {port} is in use: pass another rendezvous port, or none and a free one is chosen")
    port = port or _free_port()
    context = _context()
    results = context.Queue()
    environment = dict(os.environ)
    processes = [
        context.Process(
            target=_rank, args=(fn, rank, world_size, port, timeout, args, results, environment), daemon=True
        )
        for rank in range(world_size)
    ]
    for p in processes:
        p.start()
    found: dict[int, tuple[str, Any]] = {}
    try:
        deadline = time.monotonic() + timeout + 30  # the process group's own timeout fires first
        while len(found) < world_size:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                rank, status, value = results.get(timeout=min(left, 1.0))
            except queue.Empty:
                if all(not p.is_alive() for p in processes) and results.empty():
                    break
                continue
            found[rank] = (status, value)
    finally:
        for p in processes:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join()
    errors = {rank: value for rank, (status, value) in found.items() if status == "error"}
    if errors:
        rank = min(errors)
        raise RuntimeError(f"rank {rank} of {world_size} failed: {errors[rank]}")
    missing = [rank for rank in range(world_size) if rank not in found]
    if missing:
        raise TimeoutError(
            f"rank(s) {missing} of {world_size} did not finish within {timeout:g} s: a collective that some rank "
            "never joined (an uneven last batch, a rank that logs or saves alone) waits for ever"
        )
    return [torch.load(io.BytesIO(found[rank][1]), weights_only=True) for rank in range(world_size)]
