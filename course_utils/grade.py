"""Grade students' notebooks: rebuild each from the course's own edition, run it headlessly, report every exercise.

    python -m course_utils.grade alice/01_attention.ipynb bob/01_attention.ipynb
    python -m course_utils.grade submissions/*/*.ipynb --csv grades.csv --timeout 600 --jobs 2

What is graded (the design of nbgrader's ``autograde``): not the submitted notebook as it stands, but the course's
student edition of its chapter (``notebooks/student/``, the *release*) with each exercise cell's answer taken from the
submission. Every other cell comes from the release: a cell the student added or edited outside the exercises does
not run, and the checker calls come from the release, after the answer, in cells of the grader's own. Those calls
use the checkers as they were before any student code ran, and each verdict reaches the grader as an output of the
grader's cell (``VERDICT``): printing, logging or displaying a verdict from an answer cell counts for nothing.

Each exercise is reported as

- ``pass``: the checker accepted the answer;
- ``fail``: the checker rejected it (its message says why);
- ``not attempted``: the function still raises ``NotImplementedError`` (or the prediction is still ``None``);
- ``not run``: execution never reached the checker (an earlier cell crashed the kernel, or the notebook ran
  past its time limit).

An answer that reaches past the exercise (the checkers, the grader, ``sys.modules``, the output machinery...) is
graded, and flagged for review (``review`` in the CSV): code in an answer cell runs in the same kernel as the checker
after it, and could change what that checker does. The instructor guide says what that leaves open.

Each submission runs in a scratch folder of its own (the submitted file and its folder are never written), under a
time limit after which the kernel and every process it started are ended, with its memory capped, and with its
outputs capped. A file that is not a course notebook is reported in one line, and the others are graded.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import csv
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Report", "Result", "exercises", "grade", "main", "run_notebook"]

# check_name( or check_name("question-id": a string literal as first argument names the question
# check_prediction("question", ...) and check_diagnosis(function, "mystery") report one exercise per question
CHECK_CALL = re.compile(r"^[ \t]*(check_\w+)\((?:\s*[\"']([\w-]+)[\"']|\s*\w+\s*,\s*[\"']([\w-]+)[\"'])?", re.MULTILINE)
STATUSES = ("pass", "fail", "not attempted", "not run")
RELEASE = Path(__file__).resolve().parents[1] / "notebooks" / "student"  # in a checkout of the course
VERDICT = "application/vnd.course-verdict+json"  # the MIME type of a verdict, as the grader's cells display it
GRADER = "__course_grader__"  # the kernel-side grader, created by the graded notebook's first cell
# What an answer has no need to touch: the checkers and the grader, imports by name, the output machinery.
REACHES_PAST = re.compile(
    r"course_utils|__course_grader__|\bcheck_\w+\s*(=|\.)|sys\.modules|builtins|get_ipython|IPython|sys\.std(out|err)"
    r"|\bdisplay\(|globals\(\)|setattr\(|importlib|__import__|__dict__|(?<![\w.])(exec|eval)\(|Verdict|fork_rng"
)
OUTPUT_LIMIT = 100_000  # characters of output kept per cell; a flood beyond it is dropped

# Run in a child process, so that a notebook that loops or kills its kernel cannot take the grader with it.
# argv: the notebook to run (written back, executed), the scratch folder it runs in, a file for the kernel's pid,
# the characters of output kept per cell, the MiB of address space allowed (0: no cap).
RUNNER = r"""
import json, os, resource, sys, nbformat
from nbclient import NotebookClient

path, workdir, pidfile, limit, memory = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
if memory:  # the kernel inherits the cap on its address space
    resource.setrlimit(resource.RLIMIT_AS, (memory * 2**20, memory * 2**20))

used, noted = {}, set()

class Client(NotebookClient):
    def output(self, outs, msg, display_id, cell_index):
        out = super().output(outs, msg, display_id, cell_index)
        if out is None:
            return None
        used[cell_index] = used.get(cell_index, 0) + len(json.dumps(out))
        keep = out.get("output_type") == "error" or "VERDICT" in out.get("data", {})
        if used[cell_index] > limit and not keep and outs and outs[-1] is out:
            outs.pop()  # beyond the cell's share: dropped, once said so
            if cell_index not in noted:
                noted.add(cell_index)
                outs.append(nbformat.v4.new_output("stream", name="stderr", text="[output beyond the limit dropped]"))
            return None
        return out

def started(notebook):
    with open(pidfile, "w") as f:
        f.write(str(client.km.provisioner.pid))

nb = nbformat.read(path, as_version=4)
client = Client(nb, kernel_name="python3", allow_errors=True, timeout=None, on_notebook_start=started,
                resources={"metadata": {"path": workdir}})
try:
    client.execute()
finally:
    nbformat.write(nb, path)  # the executed copy, read back for the verdicts and the cells that raised
""".replace("VERDICT", VERDICT)

# The graded notebook's first cell: the checkers are taken now, before any student code runs.
SETUP = f"""
from course_utils.grade import KernelGrader as _KernelGrader
{GRADER} = _KernelGrader()
del _KernelGrader
"""


class KernelGrader:
    """The grader's side inside the kernel: the checkers as they were when it was made, and ``report`` to hand a
    verdict to the grader as an output of the grader's own cell."""

    def __init__(self) -> None:
        from . import checks

        self._checkers = {name: getattr(checks, name) for name in checks.__all__ if name.startswith("check_")}

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["_checkers"][name]
        except KeyError:
            raise AttributeError(name) from None

    def report(self, verdict: Any) -> None:
        from IPython.display import display

        record = {"exercise": verdict.exercise, "status": verdict.status, "message": verdict.message}
        display({VERDICT: record}, raw=True)


@dataclass(frozen=True)
class Result:
    notebook: str
    exercise: str
    status: str
    message: str
    review: str = ""  # why an instructor should read this answer (it reaches past the exercise), or ""


@dataclass(frozen=True)
class Report:
    """One notebook's run: a ``Result`` per exercise, the cells that raised (``"cell 12: NameError: ..."``),
    why the run stopped early (None if it ran to the end), and, for a file that could not be graded at all,
    why (``unreadable``; then there are no results)."""

    notebook: str
    results: list[Result]
    errors: list[str]
    stopped: str | None
    unreadable: str | None = None
    chapter: str | None = None
    notes: list[str] = field(default_factory=lambda: [])


class NotGradable(Exception):
    """The file cannot be graded; the message says why, in one line."""


def _exercise_name(name: str, question: str, mystery: str) -> str:
    return f"{name}[{question or mystery}]" if question or mystery else name


def _calls(source: str) -> list[str]:
    return [_exercise_name(*found) for found in CHECK_CALL.findall(source)]


def exercises(path: Path) -> list[str]:
    """The exercises a notebook contains, in order of first appearance: each checker it calls, each
    prediction question (``check_prediction[id]``) and each mystery diagnosed (``check_diagnosis[A]``)."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    found: dict[str, None] = {}
    for cell in nb.cells:
        if cell.cell_type == "code":
            found.update((name, None) for name in _calls(cell.source))
    return list(found)


def _read(path: Path) -> Any:
    """The submission as a notebook, or ``NotGradable`` saying in one line what it is instead."""
    import nbformat

    try:
        raw = path.read_bytes()
    except OSError as e:
        raise NotGradable(f"not readable: {e.strerror or e}") from None
    if not raw.strip():
        raise NotGradable("not a notebook: the file is empty")
    try:
        nb = nbformat.reads(raw.decode("utf-8"), as_version=4)
    except UnicodeDecodeError:
        raise NotGradable("not a notebook: the file is not text (a binary file?)") from None
    except Exception as e:  # nbformat's own errors: not JSON, not a notebook's JSON
        reason = str(e).strip().splitlines()[0][:120] if str(e).strip() else type(e).__name__
        raise NotGradable(f"not a notebook: {reason}") from None
    if not isinstance(nb.get("cells"), list):
        raise NotGradable("not a notebook: it has no list of cells")
    return nb


def _exercise_cells(nb: Any) -> list[Any]:
    """The code cells tagged ``exercise``; if an editor dropped every tag, the code cells that call a checker."""
    code = [c for c in nb.cells if c.get("cell_type") == "code" and isinstance(c.get("source"), str)]
    tagged = [c for c in code if "exercise" in c.get("metadata", {}).get("tags", [])]
    return tagged or [c for c in code if _calls(c.source)]


def _releases(release: Path) -> dict[str, Any]:
    import nbformat

    found = {p.stem: nbformat.read(p, as_version=4) for p in sorted(release.glob("[0-9][0-9]_*.ipynb"))}
    if not found:
        raise FileNotFoundError(
            f"no student editions in {release}: grade from a checkout of the course, or pass --release with the "
            "folder of the student editions (notebooks/student)"
        )
    return found


def _chapter_of(nb: Any, releases: dict[str, Any], expected: str | None) -> str:
    """The chapter whose exercises the submission's exercise cells hold (most in common)."""
    theirs = {name for cell in _exercise_cells(nb) for name in _calls(cell.source)}
    shared = {
        stem: len(theirs & {n for c in _exercise_cells(r) for n in _calls(c.source)}) for stem, r in releases.items()
    }
    best = max(shared, key=lambda stem: shared[stem])
    if not shared[best]:
        count = sum(c.get("cell_type") == "code" for c in nb.cells)
        raise NotGradable(
            f"not a course notebook: none of its {count} code cells is a course exercise (cells tagged 'exercise' "
            "that call a checker)"
        )
    if expected is not None and best != expected:
        raise NotGradable(f"another chapter's notebook: its exercises are those of {best}, not {expected}")
    return best


def _answer(source: str) -> str:
    """An exercise cell without its checker calls: what the student wrote."""
    return "\n".join(line for line in source.splitlines() if not CHECK_CALL.match(line)).rstrip() + "\n"


def _verdict_cell(source: str) -> str:
    """The release's checker calls of an exercise cell, made through the kernel-side grader."""
    calls = [line.strip() for line in source.splitlines() if CHECK_CALL.match(line)]
    return "\n".join(f"{GRADER}.report({GRADER}.{call.split('#')[0].strip()})" for call in calls)


@dataclass
class _Graded:
    """The notebook to run, and what each of its cells is."""

    notebook: Any
    verdict_cells: dict[int, list[str]]  # cell index -> the exercises its verdicts must name
    numbers: dict[int, int]  # cell index -> the release's code-cell number (for errors), for the release's cells
    reviews: dict[str, str]  # exercise -> why to read its answer
    notes: list[str]


def _graded_notebook(nb: Any, release: Any) -> _Graded:
    import nbformat

    theirs = _exercise_cells(nb)
    by_call = {key: cell for cell in theirs for key in _calls(cell.source)[:1]}
    out = nbformat.v4.new_notebook(metadata=release.metadata)
    graded = _Graded(out, {}, {}, {}, [])
    out.cells.append(nbformat.v4.new_code_cell(SETUP.strip()))
    number, position = 0, 0
    for cell in release.cells:
        if cell.cell_type != "code":
            continue
        number += 1
        tags = cell.get("metadata", {}).get("tags", [])
        if "exercise" not in tags:
            graded.numbers[len(out.cells)] = number
            out.cells.append(nbformat.v4.new_code_cell(cell.source))
            continue
        names = _calls(cell.source)
        mine = by_call.get(names[0]) if names else None
        if mine is None and position < len(theirs) and not _calls(theirs[position].source):
            mine = theirs[position]  # the checker call was deleted from the cell: the same place among exercises
        position += 1
        if mine is None:
            graded.notes.append(f"{', '.join(names)}: the exercise cell is missing; the release's stub ran")
            answer = _answer(cell.source)
        else:
            answer = _answer(mine.source)
            reach = REACHES_PAST.search(answer)
            if reach:
                graded.reviews.update((name, f"its answer mentions {reach.group(0)!r}: read it") for name in names)
        graded.numbers[len(out.cells)] = number
        out.cells.append(nbformat.v4.new_code_cell(answer))
        graded.verdict_cells[len(out.cells)] = names
        out.cells.append(nbformat.v4.new_code_cell(_verdict_cell(cell.source)))
    return graded


def _kill(pgid: int) -> None:
    """End a process group: SIGTERM, up to two seconds, then SIGKILL."""
    for sig, wait in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 0.0)):
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                os.killpg(pgid, 0)
            except (ProcessLookupError, PermissionError):
                return
            time.sleep(0.05)


def _run(notebook: Any, timeout: float, memory_mb: int | None) -> tuple[Any | None, str | None]:
    """Execute ``notebook`` in a scratch folder. Returns the executed notebook (None if it could not be read back)
    and why the run stopped early (None if it ran to the end). The kernel and everything it started are ended."""
    import nbformat

    with tempfile.TemporaryDirectory(prefix="grade-") as tmp:
        scratch = Path(tmp) / "work"  # the kernel's folder: whatever the notebook writes lands here
        scratch.mkdir()
        path, pidfile = Path(tmp) / "graded.ipynb", Path(tmp) / "kernel.pid"
        nbformat.write(notebook, path)
        env = {k: v for k, v in os.environ.items() if not k.startswith("JPY_")}
        env["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
        process = subprocess.Popen(
            [sys.executable, "-c", RUNNER, str(path), str(scratch), str(pidfile), str(OUTPUT_LIMIT), str(memory_mb or 0)],
            env=env, cwd=scratch, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
        )  # fmt: skip
        stopped = None
        try:
            _, stderr = process.communicate(timeout=timeout)
            if process.returncode != 0:
                last = [line for line in stderr.strip().splitlines() if line.strip()]
                stopped = "the notebook stopped: " + (last[-1] if last else f"exit status {process.returncode}")
        except subprocess.TimeoutExpired:
            stopped = f"stopped after the time limit of {timeout:g} s"
        finally:
            # The kernel runs in a session of its own (jupyter_client starts it so), and what the notebook started
            # stays in the kernel's process group: end that group, then the runner's.
            kernel = pidfile.read_text().strip() if pidfile.exists() else ""
            if kernel.isdigit():
                _kill(int(kernel))
            _kill(process.pid)
            process.communicate()
        try:
            return nbformat.read(path, as_version=4), stopped
        except Exception:
            return None, stopped


def _verdicts(cell: Any) -> list[dict[str, str]]:
    return [
        output["data"][VERDICT]
        for output in cell.get("outputs", [])
        if output.get("output_type") == "display_data" and isinstance(output.get("data", {}).get(VERDICT), dict)
    ]


def _errors(executed: Any, graded: _Graded) -> list[str]:
    return [
        f"cell {graded.numbers[i]}: {output.get('ename', '?')}: {output.get('evalue', '')}"[:200]
        for i, cell in enumerate(executed.cells)
        if i in graded.numbers
        for output in cell.get("outputs", [])
        if output.get("output_type") == "error"
    ]


def grade(path: str | Path, timeout: float = 600.0, **options: Any) -> list[Result]:
    """Run one notebook and return one ``Result`` per exercise it contains."""
    return run_notebook(path, timeout, **options).results


def run_notebook(
    path: str | Path,
    timeout: float = 600.0,
    *,
    release: str | Path | None = None,
    chapter: str | None = None,
    memory_mb: int | None = 8192,
) -> Report:
    """Grade one submission: its exercises' results, the cells that raised and why it stopped, if it did. ``release``
    is the folder of the course's student editions (default: ``notebooks/student`` of this checkout); ``chapter``
    (e.g. ``"01_attention"``), if given, is the only chapter accepted; ``memory_mb`` caps the kernel's address space."""
    path = Path(path)
    try:
        nb = _read(path)
        releases = _releases(Path(release) if release is not None else RELEASE)
        stem = _chapter_of(nb, releases, chapter)
    except NotGradable as e:
        return Report(str(path), [], [], None, unreadable=str(e))
    graded = _graded_notebook(nb, releases[stem])
    executed, stopped = _run(graded.notebook, timeout, memory_mb)
    results = []
    for index, names in graded.verdict_cells.items():
        records = _verdicts(executed.cells[index]) if executed is not None else []
        if len(records) > len(names):  # something besides the checkers displayed a verdict: trust none of them
            why = f"its verdict cell gave {len(records)} verdicts for {len(names)} exercise(s)"
            results += [Result(str(path), name, "not run", why, f"{why}: read its answer") for name in names]
            continue
        # The checker that ran names the exercise it graded; the release's calls only say what did not run.
        reported = [r for r in records if r.get("status") in STATUSES and isinstance(r.get("exercise"), str)]
        for record in reported:
            name = record["exercise"]
            results.append(
                Result(str(path), name, record["status"], str(record.get("message", "")), graded.reviews.get(name, ""))
            )
        for name in [n for n in names if n not in {r["exercise"] for r in reported}]:
            why = stopped or "the checker's cell did not run to its verdict"
            results.append(Result(str(path), name, "not run", why, graded.reviews.get(name, "")))
    errors = _errors(executed, graded) if executed is not None else []
    return Report(str(path), results, errors, stopped, chapter=stem, notes=graded.notes)


def _table(results: Sequence[Result]) -> str:
    rows = [("notebook", "exercise", "status", "message")] + [
        (r.notebook, r.exercise, r.status + (" (review)" if r.review else ""), r.message.replace("\n", " ")[:100])
        for r in results
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
    parser.add_argument("--chapter", help="accept only this chapter's notebooks, e.g. 01_attention")
    parser.add_argument(
        "--release", type=Path, help="folder of the course's student editions (default: the checkout's)"
    )
    parser.add_argument("--memory", type=int, default=8192, help="MiB of address space per kernel (default 8192)")
    args = parser.parse_args(argv)
    for path in args.notebooks:
        if not path.exists():
            parser.error(f"{path}: no such file")

    def one(path: Path) -> Report:
        start = time.perf_counter()
        report = run_notebook(path, args.timeout, release=args.release, chapter=args.chapter, memory_mb=args.memory)
        if report.unreadable:
            print(f"{path}: {report.unreadable}", file=sys.stderr, flush=True)
            return report
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
    unreadable = [f"{report.notebook}: {report.unreadable}" for report in reports if report.unreadable]
    if unreadable:
        print("\nnot graded:\n" + "\n".join("  " + line for line in unreadable))
    notes = [f"{report.notebook}, {note}" for report in reports for note in report.notes]
    errors = [f"{report.notebook}, {error}" for report in reports for error in report.errors]
    if notes:
        print("\nnotes:\n" + "\n".join("  " + n for n in notes))
    if errors:
        print("\ncells that raised an error:\n" + "\n".join("  " + e for e in errors))
    review = [r for r in results if r.review]
    if review:
        print("\nto read by hand:\n" + "\n".join(f"  {r.notebook}, {r.exercise}: {r.review}" for r in review))
    if args.csv:
        with args.csv.open("w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(["notebook", "exercise", "status", "message", "review"])
            writer.writerows((r.notebook, r.exercise, r.status, r.message, r.review) for r in results)
            writer.writerows((r.notebook, "", "not graded", r.unreadable, "") for r in reports if r.unreadable)
    return 1 if unreadable else 0


if __name__ == "__main__":
    sys.exit(main())
