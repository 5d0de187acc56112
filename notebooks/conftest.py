"""How pytest runs the notebooks (nbval executes each one cell by cell, in one kernel) beside the tests.

``make test`` runs them in parallel with pytest-xdist, ``-n 2 --dist loadgroup``: here every cell of a notebook joins
one xdist group, so that a notebook runs in one worker, in order (the cells share a kernel). Work is handed out in
the order of the collection, so the longest items go first, the many quick tests last, where they fill the gaps:
the chapters from the last (the longest) to the first, then the other tests that execute notebooks or train, then
the rest.
"""

from __future__ import annotations

import re

import pytest

CHAPTER = re.compile(r"\b(\d\d)_\w+")


def _cost_rank(item: pytest.Item) -> tuple[int, int]:
    """Notebooks first, then slow tests, then the rest; within each, the later chapters first."""
    chapter = CHAPTER.search(item.path.name if item.path.suffix == ".ipynb" else item.name)
    later_first = -int(chapter.group(1)) if chapter else 0
    if item.path.suffix == ".ipynb":
        return 0, later_first
    return (1 if item.get_closest_marker("slow") else 2), later_first


@pytest.hookimpl(tryfirst=True)  # before xdist turns the groups into node ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.xdist_group(item.path.name))
    items.sort(key=_cost_rank)  # stable: the cells of a notebook keep their order
