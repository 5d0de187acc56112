"""What the benchmark scripts share: naming the machine, timing steps in alternation, and saving results."""

from __future__ import annotations

import json
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from course_utils.utils import synchronize

RESULTS = Path(__file__).resolve().parent / "results"


def machine(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads"


def alternated_step_times(
    steps: dict[str, Callable[[int], None]], device: torch.device, n: int, warmup: int
) -> dict[str, float]:
    """Median seconds of each named step function, called in turn (a, b, a, b, ...) so that every contender sees
    the same machine load; ``warmup`` rounds are run first and not timed."""
    times: dict[str, list[float]] = {name: [] for name in steps}
    for i in range(warmup + n):
        for name, step in steps.items():
            synchronize(device)
            start = time.perf_counter()
            step(i)
            synchronize(device)
            if i >= warmup:
                times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def save(result: dict[str, Any], stem: str) -> Path:
    """Write ``result`` as JSON to benchmarks/results/ (not committed) and say where."""
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(result, indent=1))
    print(f"written to {path}")
    return path
