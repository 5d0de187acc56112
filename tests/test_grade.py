"""The instructors' grader: every exercise reported as pass, fail, not attempted or not run, whatever the
notebook does, and the student's file left as it was."""

import csv

import nbformat
import pytest

from course_utils.grade import exercises, grade, main, run_notebook

pytestmark = pytest.mark.slow  # every test here runs notebooks in a kernel

SETUP = "import torch\nfrom course_utils.checks import check_causal_mask, check_padding_mask, check_sliding_window_mask"
RIGHT = "def right(size):\n    return torch.tril(torch.ones(size, size, dtype=torch.bool))"


def notebook(tmp_path, *cells, name="student.ipynb"):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    path = tmp_path / name
    nbformat.write(nb, path)
    return path


def test_each_exercise_gets_its_status_and_the_file_is_untouched(tmp_path):
    path = notebook(
        tmp_path,
        SETUP,
        RIGHT + "\ncheck_causal_mask(right)",
        "def stub(tokens, pad_id):\n    raise NotImplementedError\ncheck_padding_mask(stub)",
        "1 / 0  # a broken cell does not stop the grading",
        "def wrong(size, window):\n    return torch.ones(1)\ncheck_sliding_window_mask(wrong)",
    )
    before = path.read_bytes()
    results = grade(path, timeout=120)
    assert [(r.exercise, r.status) for r in results] == [
        ("check_causal_mask", "pass"),
        ("check_padding_mask", "not attempted"),
        ("check_sliding_window_mask", "fail"),
    ]
    assert "not written yet" in results[1].message and results[2].message.startswith("❌")
    assert path.read_bytes() == before
    assert exercises(path) == ["check_causal_mask", "check_padding_mask", "check_sliding_window_mask"]


def test_a_crash_or_an_endless_loop_leaves_the_rest_not_run(tmp_path):
    crash = notebook(tmp_path, SETUP, RIGHT + "\ncheck_causal_mask(right)", "import os\nos._exit(1)",
                     "check_padding_mask(None)", name="crash.ipynb")  # fmt: skip
    results = grade(crash, timeout=120)
    assert [r.status for r in results] == ["pass", "not run"]
    assert "stopped" in results[1].message

    loop = notebook(tmp_path, "while True:\n    pass", "check_causal_mask(None)", name="loop.ipynb")
    (result,) = grade(loop, timeout=4)
    assert result.status == "not run" and "time limit of 4 s" in result.message


def test_the_command_line_prints_a_table_and_writes_csv(tmp_path, capsys):
    path = notebook(tmp_path, SETUP, RIGHT + "\ncheck_causal_mask(right)")
    out = tmp_path / "grades.csv"
    assert main([str(path), "--csv", str(out), "--timeout", "120"]) == 0
    assert "check_causal_mask  pass" in capsys.readouterr().out
    rows = list(csv.reader(out.open()))
    assert rows[0] == ["notebook", "exercise", "status", "message"] and rows[1][:3] == [
        "student.ipynb",
        "check_causal_mask",
        "pass",
    ]
    with pytest.raises(SystemExit):
        main([str(tmp_path / "missing.ipynb")])


def test_every_checker_reports_its_own_name_to_the_grader(tmp_path, monkeypatch):
    import json

    from course_utils import checks

    log = tmp_path / "verdicts.jsonl"
    monkeypatch.setenv("COURSE_GRADE_LOG", str(log))
    per_question = ("check_prediction", "check_diagnosis")  # these report one name per question: tested below
    names = [name for name in checks.__all__ if name.startswith("check_") and name not in per_question]

    def unwritten(*args, **kwargs):
        raise NotImplementedError

    for name in names:
        getattr(checks, name)(unwritten)
    checks.check_diagnosis(unwritten, "A")
    records = [json.loads(line) for line in log.read_text().splitlines()]
    expected = [(name, "not attempted") for name in names] + [("check_diagnosis[A]", "not attempted")]
    assert [(r["check"], r["status"]) for r in records] == expected


def test_predictions_are_exercises_of_their_own_and_raising_cells_are_listed(tmp_path):
    from course_utils.checks.predictions import QUESTIONS

    first, second = sorted(QUESTIONS)[:2]
    path = notebook(
        tmp_path,
        "from course_utils.checks import check_prediction",
        f'check_prediction("{first}", "{QUESTIONS[first].answer}")',
        "undefined_name",
        f'check_prediction("{second}", None)',
    )
    report = run_notebook(path, timeout=120)
    assert [(r.exercise, r.status) for r in report.results] == [
        (f"check_prediction[{first}]", "pass"),
        (f"check_prediction[{second}]", "not attempted"),
    ]
    assert report.errors == ["cell 3: NameError: name 'undefined_name' is not defined"] and report.stopped is None
