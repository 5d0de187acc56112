"""What the benchmark scripts share: naming the machine, timing steps in alternation, counting the operators a step
runs, choosing the attention kernel, and saving results."""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils._python_dispatch import TorchDispatchMode

from course_utils.utils import synchronize

RESULTS = Path(__file__).resolve().parent / "results"


def machine(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads"


def alternated_step_times(
    steps: dict[str, Callable[[int], None]], device: torch.device, n: int, warmup: int
) -> dict[str, float]:
    """Median seconds of each named step function, called in turn so that every contender sees the same machine
    load, the order rotated every round (a, b, c, then b, c, a, then c, a, b, ...) so that each runs first, and after
    each other one, equally often (right after another's work, or with its own caches warm); ``warmup`` rounds are
    run first and not timed."""
    times: dict[str, list[float]] = {name: [] for name in steps}
    items = list(steps.items())
    for i in range(warmup + n):
        for name, step in items[i % len(items) :] + items[: i % len(items)]:
            synchronize(device)
            start = time.perf_counter()
            step(i)
            synchronize(device)
            if i >= warmup:
                times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


MEASURED = Path(__file__).resolve().parent / "measured"


def processor(device: torch.device) -> str:
    """The processor that ran a benchmark, as a table names it: the CPU's model, its vector instructions and its cores
    (a CPU), or the GPU's name."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    model = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return f"{model} ({torch.backends.cpu.get_cpu_capability()}), {os.cpu_count()} cores"


def commit() -> str:
    """The commit of the code measured ("with changes" where the tree differs from it), or GIT_COMMIT where the
    tree came without its .git (a copy sent to a GPU machine)."""
    root = Path(__file__).resolve().parent.parent
    found = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True)
    if found.returncode or not found.stdout.strip():
        return os.environ.get("GIT_COMMIT", "unknown")
    changed = subprocess.run(  # the results files apart: a run of several benchmarks records them one by one
        ["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":!benchmarks/measured"],
        cwd=root, capture_output=True, text=True,
    )  # fmt: skip
    return found.stdout.strip() + (" with changes" if changed.stdout.strip() else "")


def save(result: dict[str, Any], stem: str, device: torch.device | None = None, record: str | None = None) -> Path:
    """Write ``result`` as JSON to benchmarks/results/ (not committed) and say where; with ``record``, also as
    benchmarks/measured/RECORD.json, a results file that benchmarks/README.md's tables are rendered from
    (``python tools/figures.py``). The date, the command, the processor and the commit are written with it."""
    script = Path(sys.argv[0])
    result = {
        "date": time.strftime("%Y-%m-%d"),
        "command": " ".join(["python", f"benchmarks/{script.name}", *sys.argv[1:]]),
        "processor": processor(device or torch.device("cuda" if torch.cuda.is_available() else "cpu")),
        "commit": commit(),
        **result,
    }
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(result, indent=1) + "\n")
    print(f"written to {path}")
    if record:
        MEASURED.mkdir(exist_ok=True)
        (MEASURED / f"{record}.json").write_text(json.dumps(result, indent=1) + "\n")
        print(f"recorded as {MEASURED / record}.json")
    return path


def add_record_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--record",
        metavar="NAME",
        help="also write the results to benchmarks/measured/NAME.json, which benchmarks/README.md's tables are "
        "rendered from (python tools/figures.py)",
    )


# PyTorch's kernels for F.scaled_dot_product_attention, by the names --sdpa-backend takes.
SDPA_BACKENDS = {
    "flash": SDPBackend.FLASH_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "math": SDPBackend.MATH,
}


def sdpa_backend(name: str | None) -> contextlib.AbstractContextManager[Any]:
    """Within the block, ``F.scaled_dot_product_attention`` runs only the named kernel (an error where it cannot,
    e.g. flash attention on a CPU or in float32); None: PyTorch's own choice."""
    return sdpa_kernel([SDPA_BACKENDS[name]]) if name else contextlib.nullcontext()


# Operators that only describe a tensor anew (a view, a split, a detach) launch no kernel.
_NO_KERNEL = {torch.ops.aten.detach, torch.ops.aten.alias, torch.ops.aten.split, torch.ops.aten.split_with_sizes,
              torch.ops.aten.unbind, torch.ops.aten.chunk, torch.ops.aten.lift_fresh}  # fmt: skip


class OperatorCount(TorchDispatchMode):
    """Counts the ATen operators that run inside the block, by name: ``computing`` (those that compute, each a kernel
    launch on a GPU, the CPU's proxy for launches) and ``views`` (those that only describe a tensor anew)."""

    def __init__(self) -> None:
        super().__init__()
        self.computing: collections.Counter[str] = collections.Counter()
        self.views: collections.Counter[str] = collections.Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        no_kernel = func.is_view or func.overloadpacket in _NO_KERNEL
        (self.views if no_kernel else self.computing)[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))
