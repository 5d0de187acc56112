"""Both editions of every chapter, run as the instructors' grader runs them: the complete edition passes every
exercise, and the untouched student edition runs top to bottom with every exercise not attempted yet.

The training chapters load their shipped weights (COURSE_SKIP_TRAINING), as a class without time to train would;
nbval runs the complete editions with training elsewhere in the suite.
"""

import concurrent.futures
from pathlib import Path

import pytest

from course_utils.grade import Report, run_notebook

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
CHAPTERS = sorted(path.name for path in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


@pytest.fixture(scope="module")
def reports() -> dict[tuple[str, str], Report]:
    runs = [(edition, name) for name in CHAPTERS for edition in ("complete", "student")]
    paths = {"complete": NOTEBOOKS, "student": NOTEBOOKS / "student"}
    with pytest.MonkeyPatch.context() as env:  # inherited by the grader's kernels only, undone for later tests
        env.setenv("COURSE_SKIP_TRAINING", "1")
        env.setenv("OMP_NUM_THREADS", "1")  # two kernels at a time, one core each: no oversubscription
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            futures = {run: pool.submit(run_notebook, paths[run[0]] / run[1], 600) for run in runs}
            return {run: future.result() for run, future in futures.items()}


@pytest.mark.parametrize("name", CHAPTERS)
def test_the_complete_edition_passes_every_exercise(reports, name):
    report = reports["complete", name]
    assert report.stopped is None and report.errors == []
    assert report.results and [r for r in report.results if r.status != "pass"] == []


@pytest.mark.parametrize("name", CHAPTERS)
def test_the_student_edition_runs_to_the_end_with_every_exercise_not_attempted(reports, name):
    report, complete = reports["student", name], reports["complete", name]
    assert report.stopped is None and report.errors == [], "every cell but the stubs runs as in the complete edition"
    assert [r.exercise for r in report.results] == [r.exercise for r in complete.results]
    assert [r for r in report.results if r.status != "not attempted"] == []
