"""Both editions of every chapter, as the instructors' grader sees them.

The complete edition is executed by nbval (``make test``), which compares every checker's printed verdict with the
committed one: here it is enough to check, without running anything, that every exercise's verdict is a committed
pass that nbval compares. The student edition runs top to bottom through the grader, every exercise not attempted
yet; the training chapters load their shipped weights (COURSE_SKIP_TRAINING), as a class without time to train
would.
"""

from pathlib import Path

import nbformat
import pytest

from course_utils.grade import CHECK_CALL, exercises, run_notebook

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
CHAPTERS = sorted(path.name for path in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.parametrize("name", CHAPTERS)
def test_the_complete_edition_stores_a_compared_pass_for_every_exercise(name):
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    verdicts = []
    for cell in nb.cells:
        if cell.cell_type != "code" or not CHECK_CALL.search(cell.source):
            continue
        assert "nbval-ignore-output" not in cell.metadata.get("tags", []), "nbval must compare every verdict"
        printed = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
        verdicts += [line for line in printed.splitlines() if line.startswith(("✅", "❌"))]
    assert verdicts and all(line.startswith("✅") for line in verdicts)
    assert len(verdicts) == len(exercises(NOTEBOOKS / name)), "one verdict per exercise"


@pytest.mark.slow
@pytest.mark.parametrize("name", CHAPTERS)
def test_the_student_edition_runs_to_the_end_with_every_exercise_not_attempted(name, monkeypatch):
    monkeypatch.setenv("COURSE_SKIP_TRAINING", "1")  # inherited by the grader's kernel only
    report = run_notebook(NOTEBOOKS / "student" / name, 600)
    assert report.stopped is None and report.errors == [], "every cell but the stubs runs as in the complete edition"
    assert [r.exercise for r in report.results] == exercises(NOTEBOOKS / name)
    assert [r for r in report.results if r.status != "not attempted"] == []


@pytest.mark.parametrize("name", CHAPTERS)
def test_a_predictions_verdict_is_folded_in_the_complete_edition(name):
    """The verdict of a prediction names its answer: presented as it is (RISE), the complete edition must not show it
    on the question's slide, before the cells that measure it."""
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    predictions = [c for c in nb.cells if c.cell_type == "code" and "check_prediction(" in c.source]
    assert predictions
    for cell in predictions:
        assert cell.metadata.get("jupyter", {}).get("outputs_hidden") is True, cell.source[:80]
