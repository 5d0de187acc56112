"""How pytest runs the notebooks (nbval executes each one cell by cell, in one kernel) beside the tests.

``make test`` runs them in parallel with pytest-xdist (``-n 2 --dist loadscope``). A notebook's cells share one
kernel, so they must run in one worker, in order: here a notebook is one unit of work, and every other test a unit
of its own, so that the tests fill the gaps the notebooks leave. xdist hands out the units with the most items
first (the notebooks), then the others in the order of the collection, which puts the slow tests (the grader's,
training; the later chapters first) before the quick ones.

Each notebook's kernel computes on other CPU kernels of PyTorch than its stored outputs were made with (named for
each chapter in docs/lessons/run_times.json): an output that depends on the processor's rounding fails here, not on a
student's laptop. See ``other_kernels``.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHAPTER = re.compile(r"\[(\d\d)_")  # a test parametrized by chapter: test_...[09_bug_lab.ipynb]
RUN_TIMES = Path(__file__).resolve().parent.parent / "docs" / "lessons" / "run_times.json"
# PyTorch's CPU kernels on an x86 processor (ATEN_CPU_CAPABILITY), the fastest first; each rounds otherwise.
LADDER = ("AVX512", "AVX2", "DEFAULT")
_made: dict[pytest.Config, str] = {}  # the checkpoint folder each run made


def pytest_configure(config: pytest.Config) -> None:
    """Every run of the notebooks trains afresh: the checkpoints of chapters 07 and 08 go to a new temporary folder,
    not to checkpoints/, from which a run would resume a previous one's weights (trained, maybe, by other code)."""
    if not os.environ.get("COURSE_CHECKPOINTS"):  # pytest-xdist's workers inherit the folder of the process that
        os.environ["COURSE_CHECKPOINTS"] = _made[config] = tempfile.mkdtemp(prefix="course-checkpoints-")  # made it


def pytest_unconfigure(config: pytest.Config) -> None:
    """The folder goes when the run that made it ends (some 20 MB of weights)."""
    if (folder := _made.pop(config, None)) is not None:
        shutil.rmtree(folder, ignore_errors=True)
        if os.environ.get("COURSE_CHECKPOINTS") == folder:
            del os.environ["COURSE_CHECKPOINTS"]


@functools.cache
def other_kernels(chapter: str) -> str | None:
    """The ``ATEN_CPU_CAPABILITY`` the kernel of ``chapter`` (``06_transformer``) runs with: this processor's own
    kernels if its stored outputs were made with others, else the fastest ones below them (AVX-512 -> AVX2, nearly
    as fast, where the plain ``default`` kernels made the notebooks take a quarter longer on two cores). None: as set
    in the environment, or nothing else to take (then a warning says the check is off)."""
    if "ATEN_CPU_CAPABILITY" in os.environ:
        return None
    import torch

    times = json.loads(RUN_TIMES.read_text())
    made = {times[chapter].get("kernels")} if chapter in times else {entry.get("kernels") for entry in times.values()}
    own = torch.backends.cpu.get_cpu_capability()
    below = LADDER[LADDER.index(own) + 1 :] if own in LADDER else ("DEFAULT",)
    chosen = next((kernels for kernels in (own, *below) if kernels not in made), None)
    if chosen is None:
        warnings.warn(f"{chapter}: its outputs were made with {own} kernels and none other is left", stacklevel=2)
    return None if chosen in (None, own) else chosen.lower()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    """A notebook's kernel starts in the setup of its first cell: it inherits ``other_kernels`` there, and nothing
    else does (the tests compute on the processor's own kernels)."""
    kernels = other_kernels(item.path.stem) if item.path.suffix == ".ipynb" else None
    if kernels is None:
        yield
        return
    os.environ["ATEN_CPU_CAPABILITY"] = kernels
    try:
        yield
    finally:
        del os.environ["ATEN_CPU_CAPABILITY"]


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class NotebookScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return path if path.endswith(".ipynb") else nodeid

    return NotebookScheduling(config, log)


def _order(item: pytest.Item) -> tuple[bool, int]:
    """Slow tests first, and among tests by chapter the later (longer) chapters first."""
    chapter = CHAPTER.search(item.name)
    return not item.get_closest_marker("slow"), -int(chapter.group(1)) if chapter else 0


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=_order)  # stable: a notebook's cells keep their order
