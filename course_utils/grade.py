"""Grade students' notebooks: run each one headlessly and report every exercise.

    python -m course_utils.grade alice/01_attention.ipynb bob/01_attention.ipynb
    python -m course_utils.grade submissions/*/*.ipynb --csv grades.csv --timeout 600

For each notebook the grader lists the exercises it contains (every ``check_*`` call in its code cells),
runs a copy of it in a fresh kernel (the student's file is never modified), and reports each exercise as

- ``pass``: the checker accepted the answer;
- ``fail``: the checker rejected it (its message says why);
- ``not attempted``: the function still raises ``NotImplementedError``;
- ``not run``: execution never reached the checker (an earlier cell crashed the kernel, or the notebook ran
  past its time limit).

A "predict, then run" question, ``check_prediction("scaling", my_prediction)``, is the exercise
``check_prediction[scaling]``. Cells that raised an error (other than the exercises' own checkers, which never
raise) are listed under the table: a student's edition should run top to bottom.

A cell that raises does not stop the run (as when a student runs every cell in Jupyter): later exercises are
still graded. The checkers report to the grader through a file named by ``COURSE_GRADE_LOG``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import csv
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .settings import GRADE_LOG

__all__ = ["Report", "Result", "exercises", "grade", "main", "run_notebook"]

# check_name( or check_name("question-id": a string literal as first argument names the question
# check_prediction("question", ...) and check_diagnosis(function, "mystery") report one exercise per question
CHECK_CALL = re.compile(r"^[ \t]*(check_\w+)\((?:\s*[\"']([\w-]+)[\"']|\s*\w+\s*,\s*[\"']([\w-]+)[\"'])?", re.MULTILINE)
STATUSES = ("pass", "fail", "not attempted", "not run")

# Run in a child process, so that a notebook that loops or kills its kernel cannot take the grader with it.
RUNNER = """
import sys, nbformat
from nbclient import NotebookClient
path, workdir = sys.argv[1], sys.argv[2]
nb = nbformat.read(path, as_version=4)
try:
    NotebookClient(nb, kernel_name="python3", allow_errors=True, timeout=None,
                   resources={"metadata": {"path": workdir}}).execute()
finally:
    nbformat.write(nb, path)  # the executed copy, read back for the cells that raised
"""


@dataclass(frozen=True)
class Result:
    notebook: str
    exercise: str
    status: str
    message: str


@dataclass(frozen=True)
class Report:
    """One notebook's run: a ``Result`` per exercise, the cells that raised (``"cell 12: NameError: ..."``),
    and why the run stopped early (None if it ran to the end)."""

    notebook: str
    results: list[Result]
    errors: list[str]
    stopped: str | None


def exercises(path: Path) -> list[str]:
    """The exercises a notebook contains, in order of first appearance: each checker it calls, each
    prediction question (``check_prediction[id]``) and each mystery diagnosed (``check_diagnosis[A]``)."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    found: dict[str, None] = {}
    for cell in nb.cells:
        if cell.cell_type == "code":
            found.update(
                (f"{name}[{question or mystery}]" if question or mystery else name, None)
                for name, question, mystery in CHECK_CALL.findall(cell.source)
            )
    return list(found)


def _errors(executed: Path) -> list[str]:
    import nbformat

    nb = nbformat.read(executed, as_version=4)
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    return [
        f"cell {number}: {output.get('ename', '?')}: {output.get('evalue', '')}"[:200]
        for number, cell in enumerate(code, 1)
        for output in cell.get("outputs", [])
        if output.get("output_type") == "error"
    ]


def _run(path: Path, log: Path, timeout: float) -> tuple[str | None, list[str]]:
    """Execute a copy of ``path`` next to the original (relative paths keep working). Returns why it stopped
    (None if it ran to the end) and the code cells (numbered from 1) that raised."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / path.name
        copy.write_bytes(path.read_bytes())
        env = {**os.environ, GRADE_LOG.name: str(log), "PYDEVD_DISABLE_FILE_VALIDATION": "1"}
        process = subprocess.Popen(
            [sys.executable, "-c", RUNNER, str(copy), str(path.parent.resolve())],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
        )  # fmt: skip
        try:
            _, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)  # the runner and its kernel
            process.communicate()
            return f"stopped after the time limit of {timeout:g} s", []
        errors = _errors(copy)
        if process.returncode != 0:
            last = [line for line in stderr.strip().splitlines() if line.strip()]
            return "the notebook stopped: " + (last[-1] if last else f"exit status {process.returncode}"), errors
    return None, errors


def grade(path: str | Path, timeout: float = 600.0) -> list[Result]:
    """Run one notebook and return one ``Result`` per exercise it contains."""
    return run_notebook(path, timeout).results


def run_notebook(path: str | Path, timeout: float = 600.0) -> Report:
    """Run one notebook: its exercises' results, the cells that raised and why it stopped, if it did."""
    path = Path(path)
    expected = exercises(path)
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "verdicts.jsonl"
        log.touch()
        stopped, errors = _run(path, log, timeout)
        records = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line]
    latest = {record["check"]: record for record in records}  # a checker run twice: its last verdict counts
    results = []
    for name in expected:
        record = latest.get(name)
        if record is None:
            why = stopped or "the checker's cell did not run"
            results.append(Result(path.name, name, "not run", why))
        else:
            results.append(Result(path.name, name, record["status"], record["message"]))
    return Report(path.name, results, errors, stopped)


def _table(results: Sequence[Result]) -> str:
    rows = [("notebook", "exercise", "status", "message")] + [
        (r.notebook, r.exercise, r.status, r.message.replace("\n", " ")[:100]) for r in results
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row[:3], widths)) + "  " + row[3] for row in rows
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m course_utils.grade", description="Run students' notebooks and grade every exercise."
    )
    parser.add_argument("notebooks", nargs="+", type=Path, help="students' notebooks (.ipynb); none is modified")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds allowed per notebook (default 600)")
    parser.add_argument("--csv", type=Path, help="also write the results to this CSV file")
    parser.add_argument("--jobs", type=int, default=1, help="notebooks run at once (default 1; at most one per core)")
    args = parser.parse_args(argv)
    for path in args.notebooks:
        if not path.is_file():
            parser.error(f"{path}: no such notebook")

    def one(path: Path) -> Report:
        start = time.perf_counter()
        report = run_notebook(path, timeout=args.timeout)
        passed = sum(r.status == "pass" for r in report.results)
        summary = f"{path}: {passed} of {len(report.results)} exercises passed ({time.perf_counter() - start:.0f} s)"
        if report.errors:
            summary += f"; {len(report.errors)} cell(s) raised, the first: {report.errors[0]}"
        print(summary, file=sys.stderr, flush=True)
        return report

    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:  # each notebook runs in its own process
        reports = list(pool.map(one, args.notebooks))
    results = [result for report in reports for result in report.results]
    print(_table(results))
    errors = [f"{report.notebook}, {error}" for report in reports for error in report.errors]
    if errors:
        print("\ncells that raised an error:\n" + "\n".join("  " + e for e in errors))
    if args.csv:
        with args.csv.open("w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(["notebook", "exercise", "status", "message"])
            writer.writerows((r.notebook, r.exercise, r.status, r.message) for r in results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
