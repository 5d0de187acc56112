"""How pytest runs the notebooks (nbval executes each one cell by cell, in one kernel) beside the tests.

``make test`` runs them in parallel with pytest-xdist (``-n 2 --dist loadscope``). A notebook's cells share one
kernel, so they must run in one worker, in order: here a notebook is one unit of work, and every other test a unit
of its own, so that the tests fill the gaps the notebooks leave. xdist hands out the units with the most items
first (the notebooks), then the others in the order of the collection, which puts the slow tests (the grader's,
training; the later chapters first) before the quick ones.
"""

from __future__ import annotations

import os
import re
import tempfile
from typing import Any

import pytest

CHAPTER = re.compile(r"\[(\d\d)_")  # a test parametrized by chapter: test_...[09_bug_lab.ipynb]


def pytest_configure(config: pytest.Config) -> None:
    """Every run of the notebooks trains afresh: the checkpoints of chapters 07 and 08 go to a new temporary folder,
    not to checkpoints/, from which a run would resume a previous one's weights (trained, maybe, by other code)."""
    if not os.environ.get("COURSE_CHECKPOINTS"):
        os.environ["COURSE_CHECKPOINTS"] = tempfile.mkdtemp(prefix="course-checkpoints-")


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
