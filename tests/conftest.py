import os
import sys
from pathlib import Path

import pytest

# PyTorch and helpers are imported in the fixtures that use them: pytest-xdist's controlling process loads this file
# too, and runs no test (a second of every make quick before its workers start).
# jsonschema (under nbformat) builds a grammar for its optional IRI format checks on import, a second of every
# process's start; nbformat validates notebooks without them. (Where nbval's plugin is loaded, it has imported
# them before this file: make quick runs without it.)
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[assignment]


@pytest.fixture(autouse=True)
def _seeded():
    """Every test starts from the same random state, whatever ran before it."""
    import torch

    torch.manual_seed(0)


def pytest_generate_tests(metafunc):
    """With ``TESTS_REMOTE_ANSWERS=1`` (``make test``) every test of a checker that runs it on an answer
    (``helpers.verdict``, which reads what the checker printed: the tests that take ``capsys``, in
    ``tests/test_checks*.py``) runs twice in the one session: the answer called in this process, as a notebook calls it
    ([local]), then as the grader calls it ([remote]), across a link (``course_utils.remote.loopback``), every value
    crossing as data."""
    checker_test = Path(metafunc.definition.path).name.startswith("test_checks") and "capsys" in metafunc.fixturenames
    if os.environ.get("TESTS_REMOTE_ANSWERS") == "1" and checker_test:
        metafunc.parametrize("_answers_cross", ["local", "remote"], indirect=True)


@pytest.fixture(autouse=True)
def _answers_cross(request, monkeypatch):
    """Where a checker's test calls the answers: here, or across the grader's link in its [remote] run."""
    if getattr(request, "param", "local") == "remote":
        import helpers

        monkeypatch.setattr(helpers, "ACROSS_THE_LINK", True)
