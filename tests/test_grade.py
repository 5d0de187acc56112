"""The instructors' grader, under honest, broken and dishonest submissions.

Most submissions here answer a small release of two exercises (``tiny_release``), so that each run takes a few
seconds; the grader treats it as it treats a chapter's student edition. The last tests grade chapter 01 itself.
"""

import csv
import hashlib
import os
import re
import signal
import time
from pathlib import Path

import nbformat
import pytest

from course_utils.grade import (
    RELEASE,
    choose_sandbox,
    container_missing,
    default_jobs,
    exercises,
    grade,
    load_points,
    main,
    run_notebook,
    sandbox_missing,
    student_of,
)

pytestmark = pytest.mark.slow  # every test here runs notebooks in a kernel

ROOT = Path(__file__).resolve().parents[1]
SETUP = "import torch\nfrom course_utils.checks import check_causal_mask, check_padding_mask"
CAUSAL_STUB = "def my_causal_mask(size):\n    raise NotImplementedError\n\n\ncheck_causal_mask(my_causal_mask)"
PADDING_STUB = (
    "def my_padding_mask(tokens, pad_id):\n    raise NotImplementedError\n\n\ncheck_padding_mask(my_padding_mask)"
)
CAUSAL = "def my_causal_mask(size):\n    return torch.tril(torch.ones(size, size, dtype=torch.bool))"
PADDING = "def my_padding_mask(tokens, pad_id):\n    return (tokens != pad_id)[:, None, None, :]"
WRONG_CAUSAL = "def my_causal_mask(size):\n    return torch.ones(size, size, dtype=torch.bool)"
CAUSAL_CALL, PADDING_CALL = "\n\n\ncheck_causal_mask(my_causal_mask)", "\n\n\ncheck_padding_mask(my_padding_mask)"
FORGED = (
    "from IPython.display import display\n"
    "for name in ('check_causal_mask', 'check_padding_mask'):\n"
    "    print('✅ right')\n"
    "    display({'application/vnd.course-verdict+json': {'exercise': name, 'status': 'pass', 'message': '✅'}},"
    " raw=True)"
)


def write(path, cells):
    """cells: (tag, source) pairs; tag "exercise" or ""."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# 01 · Tiny")] + [
        nbformat.v4.new_code_cell(source, metadata={"tags": [tag]} if tag else {}) for tag, source in cells
    ]
    nbformat.write(nb, path)
    return path


@pytest.fixture
def tiny_release(tmp_path):
    folder = tmp_path / "release"
    folder.mkdir()
    write(folder / "01_tiny.ipynb", [("", SETUP), ("exercise", CAUSAL_STUB), ("", "x = 1"), ("exercise", PADDING_STUB)])
    return folder


def submission(tmp_path, causal=CAUSAL_STUB, padding=PADDING_STUB, before=(), after=(), name="alice.ipynb"):
    folder = tmp_path / "submissions"
    folder.mkdir(exist_ok=True)
    cells = [("", SETUP), *before, ("exercise", causal), ("", "x = 1"), ("exercise", padding), *after]
    return write(folder / name, cells)


def statuses(report):
    return [(r.exercise, r.status) for r in report.results]


def digest(folder):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def skip_without_a_sandbox(sandbox):
    """Skip a sandboxed variant where bubblewrap does not run; CI installs it, and fails rather than skip."""
    missing = sandbox_missing()
    if sandbox == "bwrap" and missing:
        if os.environ.get("CI"):
            pytest.fail(f"CI must grade in the sandbox: {missing}")
        pytest.skip(missing)


CONTAINER_ROOT = "/"  # podman's stand-in for the grader's image: this machine's own root, seen through an overlay


def sandbox_for(kind):
    """What ``run_notebook`` is given for a test's variant: ``"none"``, ``"bwrap"`` (skipped where bubblewrap does not
    run), or ``"podman"``: a container per submission, as on a machine without bubblewrap, with this machine's root
    for its image (skipped where podman cannot start one as nobody: CI has no podman)."""
    if kind != "podman":
        skip_without_a_sandbox(kind)
        return kind
    missing = container_missing("podman", CONTAINER_ROOT)
    if missing:
        pytest.skip(f"no container: {missing}")
    return choose_sandbox("podman", CONTAINER_ROOT)


def alive(pid):
    """Whether process ``pid`` still runs (a zombie, dead but not yet reaped, counts as ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


# --- honest work ------------------------------------------------------------------------------------------------


def test_each_exercise_gets_its_status_and_nothing_submitted_changes(tmp_path, tiny_release):
    path = submission(tmp_path, causal=CAUSAL + CAUSAL_CALL, after=[("", "1 / 0  # a broken cell of their own")])
    before = digest(path.parent)
    report = run_notebook(path, 120, release=tiny_release)
    assert statuses(report) == [("check_causal_mask", "pass"), ("check_padding_mask", "not attempted")]
    assert "not written yet" in report.results[1].message and report.chapter == "01_tiny"
    assert report.errors == [] and report.stopped is None  # the student's own cell is not part of the graded run
    assert digest(path.parent) == before
    assert exercises(path) == ["check_causal_mask", "check_padding_mask"]


def test_a_wrong_answer_fails_with_the_checkers_message(tmp_path, tiny_release):
    report = run_notebook(submission(tmp_path, causal=WRONG_CAUSAL + CAUSAL_CALL), 120, release=tiny_release)
    assert report.results[0].status == "fail" and report.results[0].message.startswith("❌")


# --- dishonest work: none of it gains a pass ----------------------------------------------------------------------


def test_verdicts_written_by_the_notebook_count_for_nothing(tmp_path, tiny_release):
    """A cell of its own that prints and displays verdicts, and one that writes a verdict file, as graders once read."""
    log = "import json\nopen('verdicts.jsonl', 'a').write(json.dumps({'check': 'check_causal_mask', 'status': 'pass'}))"
    path = submission(tmp_path, after=[("", FORGED), ("", log)])
    assert statuses(run_notebook(path, 120, release=tiny_release)) == [
        ("check_causal_mask", "not attempted"),
        ("check_padding_mask", "not attempted"),
    ]


def test_a_forged_verdict_inside_an_answer_is_not_the_checkers_and_is_flagged(tmp_path, tiny_release):
    path = submission(tmp_path, causal=CAUSAL_STUB + "\n" + FORGED)
    report = run_notebook(path, 120, release=tiny_release)
    assert statuses(report)[0] == ("check_causal_mask", "not attempted")
    assert "IPython" in report.results[0].review


def test_a_checker_redefined_in_a_cell_of_its_own_or_in_the_answer_is_not_the_one_that_grades(tmp_path, tiny_release):
    fake = "check_causal_mask = check_padding_mask = lambda fn: print('✅ right')"
    own_cell = run_notebook(submission(tmp_path, before=[("", fake)], name="own.ipynb"), 120, release=tiny_release)
    in_answer = run_notebook(
        submission(tmp_path, causal=fake + "\n" + CAUSAL_STUB, padding="check_padding_mask = 3\n" + PADDING + PADDING_CALL,
                   name="answer.ipynb"),
        120, release=tiny_release,
    )  # fmt: skip
    assert statuses(own_cell) == [("check_causal_mask", "not attempted"), ("check_padding_mask", "not attempted")]
    assert statuses(in_answer) == [("check_causal_mask", "not attempted"), ("check_padding_mask", "pass")]
    assert all(r.review for r in in_answer.results)  # a checker's name assigned to: read by hand


def test_an_edited_checker_call_is_replaced_by_the_releases(tmp_path, tiny_release):
    edited = CAUSAL_STUB.replace(
        "check_causal_mask(my_causal_mask)",
        "check_causal_mask(lambda size: torch.tril(torch.ones(size, size, dtype=torch.bool)))",
    )
    report = run_notebook(submission(tmp_path, causal=edited), 120, release=tiny_release)
    assert statuses(report)[0] == ("check_causal_mask", "not attempted")


def test_a_deleted_checker_call_still_grades_the_exercise_from_the_course_list(tmp_path, tiny_release):
    # the answer is written, and the student removed the call that checks it: the release's call still runs
    both = run_notebook(submission(tmp_path, causal=CAUSAL, padding=PADDING + PADDING_CALL), 120, release=tiny_release)
    assert statuses(both) == [("check_causal_mask", "pass"), ("check_padding_mask", "pass")]
    wrong = run_notebook(submission(tmp_path, causal=WRONG_CAUSAL, name="bob.ipynb"), 120, release=tiny_release)
    assert statuses(wrong) == [("check_causal_mask", "fail"), ("check_padding_mask", "not attempted")]
    # every call deleted: told the chapter, the grader matches the exercise cells by their places and grades them
    eve = submission(tmp_path, causal=CAUSAL, padding=PADDING, name="eve.ipynb")
    bare = run_notebook(eve, 120, release=tiny_release, chapter="01_tiny")
    assert statuses(bare) == [("check_causal_mask", "pass"), ("check_padding_mask", "pass")]
    # not told: a notebook whose cells call no checker is not recognised as a chapter, and is reported, not skipped
    unknown = run_notebook(eve, 120, release=tiny_release)
    assert unknown.unreadable and "not a course notebook" in unknown.unreadable


def test_two_students_files_of_the_same_name_stay_apart_in_the_table_and_the_csv(tmp_path, tiny_release, capsys):
    alice, bob = tmp_path / "alice", tmp_path / "bob"
    alice.mkdir()
    bob.mkdir()
    write(alice / "01_tiny.ipynb", [("", SETUP), ("exercise", CAUSAL + CAUSAL_CALL), ("exercise", PADDING_STUB)])
    write(bob / "01_tiny.ipynb", [("", SETUP), ("exercise", WRONG_CAUSAL + CAUSAL_CALL), ("exercise", PADDING_STUB)])
    out = tmp_path / "grades.csv"
    main([str(alice / "01_tiny.ipynb"), str(bob / "01_tiny.ipynb"), "--csv", str(out), "--timeout", "120",
          "--release", str(tiny_release)])  # fmt: skip
    rows = {(r["notebook"], r["exercise"]): r["status"] for r in csv.DictReader(out.open())}
    assert rows[(str(alice / "01_tiny.ipynb"), "check_causal_mask")] == "pass"
    assert rows[(str(bob / "01_tiny.ipynb"), "check_causal_mask")] == "fail"
    table = capsys.readouterr().out
    assert "alice/01_tiny.ipynb" in table and "bob/01_tiny.ipynb" in table


def test_a_hook_that_adds_verdicts_to_the_graders_cells_gains_nothing(tmp_path, tiny_release):
    hook = (
        "from IPython import get_ipython\n"
        "from IPython.display import display as show\n"
        "forged = {'exercise': 'check_causal_mask', 'status': 'pass', 'message': 'forged'}\n"
        "get_ipython().events.register('post_run_cell', lambda *a: show({'application/vnd.course-verdict+json': forged}, raw=True))\n"
    )
    report = run_notebook(submission(tmp_path, causal=hook + CAUSAL_STUB), 120, release=tiny_release)
    assert statuses(report)[0] == ("check_causal_mask", "not attempted")  # what the kernel displays is not read
    assert report.results[0].review  # get_ipython: flagged


def test_patching_a_checkers_internals_from_an_answer_is_flagged_for_review(tmp_path, tiny_release):
    """What a determined student can still do: code in an answer runs in the checker's kernel. The grader cannot
    stop it; it flags the answer for the instructor to read."""
    patch = "import course_utils.checks._core as core\ncore.same = lambda *args, **kwargs: None\n" + WRONG_CAUSAL
    report = run_notebook(submission(tmp_path, causal=patch + CAUSAL_CALL), 120, release=tiny_release)
    assert "course_utils" in report.results[0].review


def test_a_tensor_that_lies_about_comparisons_reaches_the_checker_as_a_plain_tensor(tmp_path, tiny_release):
    lie = "class Lie(torch.Tensor):\n    def __bool__(self):\n        return False\n\n\n"
    lie += "def my_causal_mask(size):\n    return torch.zeros(size, size, dtype=torch.bool).as_subclass(Lie)"
    report = run_notebook(submission(tmp_path, causal=lie + CAUSAL_CALL), 120, release=tiny_release)
    # Only data crosses to the checker: a plain tensor of zeros, judged as it is.
    assert statuses(report)[0] == ("check_causal_mask", "fail") and "the future" not in report.results[0].review


@pytest.mark.parametrize(
    ("answer", "flag"),
    [
        (
            "def my_causal_mask(size):\n    return torch.ones(size, size, dtype=torch.bool).triu()\n"
            "causal_mask.__code__ = my_causal_mask.__code__",
            "__code__",
        ),  # the reference the checker compares with
        ("torch.Tensor.any = lambda self, *args, **kwargs: False\n" + WRONG_CAUSAL, "torch.Tensor.any ="),
        ("from torch.nn.functional import *\nmy_causal_mask = lambda size: causal_mask(size)", "causal_mask"),
    ],
)
def test_answers_that_tamper_or_take_a_shortcut_are_flagged(tmp_path, tiny_release, answer, flag):
    """From the grader's red team: wrong answers that passed, each now flagged for the instructor to read."""
    setup = "import torch\nfrom course_utils import causal_mask\nfrom course_utils.checks import check_causal_mask, check_padding_mask"
    release = tiny_release.parent / "release2"
    release.mkdir()
    write(
        release / "01_tiny.ipynb", [("", setup), ("exercise", CAUSAL_STUB), ("", "x = 1"), ("exercise", PADDING_STUB)]
    )
    report = run_notebook(submission(tmp_path, causal=answer + CAUSAL_CALL), 120, release=release)
    assert flag in report.results[0].review


@pytest.mark.parametrize("sandbox", ["none", "bwrap", "podman"])
def test_results_the_kernel_writes_to_files_or_its_parent_count_for_nothing(tmp_path, tiny_release, sandbox):
    """The runner passes results on its standard output, which the kernel does not hold; killing the runner ends
    the run without a verdict. In the sandbox the kernel's parent is the sandbox's first process, which a signal
    from inside cannot end (in a container, the runner is that first process), and its files go nowhere: the
    checkers' own verdicts stand."""
    chosen = sandbox_for(sandbox)
    forge = (
        "import glob, json, os, signal\n"
        "assert os.path.basename(os.path.dirname(os.getcwd())).startswith('grade'), 'not in the grader scratch'\n"
        "for path in glob.glob('../*') + glob.glob('*'):\n"
        "    open(path + '.forged', 'w').write(json.dumps({'cell': 2, 'verdicts': [{'exercise': 'check_causal_mask', "
        "'status': 'pass', 'message': 'x'}]}))\n"
        "os.kill(os.getppid(), signal.SIGKILL)\n"
    )
    report = run_notebook(submission(tmp_path, causal=forge + CAUSAL_STUB), 120, release=tiny_release, sandbox=chosen)
    expected = "not run" if sandbox == "none" else "not attempted"
    assert [r.status for r in report.results] == [expected, expected] and report.sandbox == sandbox
    assert not list(tmp_path.rglob("*.forged"))


def test_a_line_shared_with_a_checker_call_still_runs(tmp_path, tiny_release):
    shared = CAUSAL + "\n\n\ncheck_causal_mask(my_causal_mask); my_causal_mask = None"
    split = PADDING + "\n\n\ncheck_padding_mask(\n    my_padding_mask\n)"
    report = run_notebook(submission(tmp_path, causal=shared, padding=split), 120, release=tiny_release)
    # The checker runs again when the cell has run, and by then my_causal_mask is None: said, not raised.
    assert statuses(report) == [("check_causal_mask", "fail"), ("check_padding_mask", "pass")]
    assert "needs your function itself; it got NoneType" in report.results[0].message


# --- broken work: the rest is graded, nothing outlives the run ----------------------------------------------------


@pytest.mark.parametrize("sandbox", ["none", "bwrap", "podman"])
def test_a_timeout_ends_the_kernel_and_every_process_it_started(tmp_path, tiny_release, sandbox):
    chosen = sandbox_for(sandbox)
    mark = f"{sandbox}-{time.time_ns()}"  # in the processes' command lines, to find them from outside a sandbox
    spawn = (
        "import os, subprocess, sys, time\n"
        f"sys.argv.append({mark!r})\n"
        f"child = subprocess.Popen(['sh', '-c', 'sleep 300; : {mark}'])\n"
        f"shell = subprocess.Popen('(sleep 301; : {mark}) &', shell=True)  # a grandchild the kernel does not know\n"
        f"grouped = subprocess.Popen(['sh', '-c', 'sleep 302; : {mark}'], process_group=0)  # a group of its own\n"
        f"alone = subprocess.Popen(['sh', '-c', 'sleep 303; : {mark}'], start_new_session=True)  # a session too\n"
        "while True:\n    time.sleep(1)  # stuck, without taking a core from the tests beside it\n"
    )
    start = time.monotonic()
    path = submission(tmp_path, causal=CAUSAL + CAUSAL_CALL, padding=spawn)
    report = run_notebook(path, 10, release=tiny_release, sandbox=chosen)
    assert time.monotonic() - start < 40
    assert statuses(report) == [("check_causal_mask", "pass"), ("check_padding_mask", "not run")]
    assert "time limit of 10 s" in report.results[1].message
    time.sleep(0.5)
    left = [_cmdline(p) for p in Path("/proc").glob("[0-9]*") if mark in _cmdline(p) and alive(p.name)]
    # Without a sandbox a process in a session of its own escapes the clean-up (the instructor guide says so).
    assert left == ([] if sandbox != "none" else [f"sh -c sleep 303; : {mark}"])
    for p in Path("/proc").glob("[0-9]*"):
        if mark in _cmdline(p):
            os.kill(int(p.name), signal.SIGKILL)


def test_a_process_that_leaves_the_session_does_not_hold_the_grader(tmp_path, tiny_release):
    """A child in a session of its own escapes the clean-up (the instructor guide says so), but the grader does not
    wait for it: it holds none of the grader's pipes."""
    detach = "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(60)\n    os._exit(0)\n"
    start = time.monotonic()
    report = run_notebook(submission(tmp_path, causal=detach + CAUSAL + CAUSAL_CALL), 30, release=tiny_release)
    assert time.monotonic() - start < 45 and statuses(report)[0] == ("check_causal_mask", "pass")


def _cmdline(proc):
    try:
        return (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


@pytest.mark.parametrize(
    ("exit_call", "stopped"),
    [("import os\nos._exit(1)", "the notebook stopped: the kernel died"), ("import sys\nsys.exit(0)", None)],
)
def test_a_notebook_that_exits_is_graded_up_to_there(tmp_path, tiny_release, exit_call, stopped):
    """A kernel that dies is seen at once (in the sandbox too), not at the time limit; SystemExit is a cell's error."""
    path = submission(tmp_path, causal=CAUSAL + CAUSAL_CALL, padding=exit_call + "\n" + PADDING_STUB)
    report = run_notebook(path, 120, release=tiny_release)
    assert statuses(report) == [("check_causal_mask", "pass"), ("check_padding_mask", "not run")]
    assert (report.stopped or "").startswith(stopped or "") and (stopped is None) == (report.stopped is None)


def test_a_cell_that_deletes_what_it_can_reach_touches_no_submission(tmp_path, tiny_release):
    wipe = (  # everything in its folder and the folder above, where the grader put it (never further: this is a test)
        "import glob, os, shutil\n"
        "assert os.path.basename(os.path.dirname(os.getcwd())).startswith('grade-'), 'not in the grader scratch'\n"
        "for f in glob.glob('*') + glob.glob('../*'):\n"
        "    shutil.rmtree(f, ignore_errors=True) if os.path.isdir(f) else os.remove(f)\n"
    )
    path = submission(tmp_path, causal=wipe + CAUSAL + CAUSAL_CALL)
    submission(tmp_path, name="bob.ipynb")
    before = digest(path.parent)
    report = run_notebook(path, 120, release=tiny_release)
    assert digest(path.parent) == before
    assert statuses(report)[0] == ("check_causal_mask", "pass")


def test_a_flood_of_output_is_cut_and_the_exercises_still_graded(tmp_path, tiny_release):
    flood = "for _ in range(200_000):\n    print('x' * 100)\n"
    report = run_notebook(submission(tmp_path, causal=flood + CAUSAL + CAUSAL_CALL), 120, release=tiny_release)
    assert statuses(report) == [("check_causal_mask", "pass"), ("check_padding_mask", "not attempted")]


def test_a_memory_hog_meets_the_graders_cap(tmp_path, tiny_release):
    hog = "hog = bytearray(64 * 2**30)  # 64 GiB\n"
    report = run_notebook(submission(tmp_path, causal=hog + CAUSAL + CAUSAL_CALL, padding=PADDING + PADDING_CALL),
                          120, release=tiny_release, memory_mb=4096)  # fmt: skip
    assert statuses(report) == [("check_causal_mask", "not run"), ("check_padding_mask", "pass")]
    assert any("MemoryError" in e for e in report.errors)


def test_a_missing_exercise_cell_runs_the_releases_stub(tmp_path, tiny_release):
    path = submission(tmp_path, causal=CAUSAL + CAUSAL_CALL)
    nb = nbformat.read(path, as_version=4)
    nb.cells = [c for c in nb.cells if "check_padding_mask(my" not in c.source]
    nbformat.write(nb, path)
    report = run_notebook(path, 120, release=tiny_release)
    assert statuses(report) == [("check_causal_mask", "pass"), ("check_padding_mask", "not attempted")]
    assert report.notes and "missing" in report.notes[0]


def test_a_class_is_graded_whatever_one_file_holds(tmp_path, tiny_release, capsys):
    folder = tmp_path / "class"
    folder.mkdir()
    (folder / "not_json.ipynb").write_text("{ this is not json")
    (folder / "binary.ipynb").write_bytes(bytes(range(256)) * 4)
    (folder / "empty.ipynb").write_text("")
    (folder / "unzipped").mkdir()  # a folder passed where its notebooks were meant
    (folder / "notes.ipynb").write_text(nbformat.writes(nbformat.v4.new_notebook()))  # a notebook without cells
    other = nbformat.read(ROOT / "notebooks" / "student" / "02_multi_head_attention.ipynb", as_version=4)
    other_release = tmp_path / "release" / "02_multi_head_attention.ipynb"
    nbformat.write(other, other_release)
    nbformat.write(other, folder / "other_chapter.ipynb")
    good = submission(tmp_path, causal=CAUSAL + CAUSAL_CALL)
    noisy = nbformat.read(good, as_version=4)  # 10,000 cells of their own, each with stored output
    noisy.cells += [
        nbformat.v4.new_code_cell("print(1)", outputs=[nbformat.v4.new_output("stream", text="1\n" * 50)])
        for _ in range(10_000)
    ]
    nbformat.write(noisy, folder / "noisy.ipynb")
    out = tmp_path / "grades.csv"
    files = [*sorted(folder.iterdir()), good]
    code = main([*map(str, files), "--csv", str(out), "--timeout", "120", "--jobs", "2", "--chapter", "01_tiny",
                 "--release", str(tiny_release)])  # fmt: skip
    assert code == 1  # some files could not be graded
    rows = {(Path(r["notebook"]).name, r["exercise"]): r for r in csv.DictReader(out.open())}
    reasons = {name: rows[(name, "")]["message"] for name, exercise in rows if exercise == ""}
    assert reasons["not_json.ipynb"].startswith("not a notebook")
    assert reasons["binary.ipynb"].startswith("not a notebook")
    assert reasons["empty.ipynb"] == "not a notebook: the file is empty"
    assert (
        reasons["unzipped"] == f"a folder, not a notebook: pass the notebooks in it ({folder / 'unzipped' / '*.ipynb'})"
    )
    assert reasons["notes.ipynb"].startswith("not a course notebook")
    assert reasons["other_chapter.ipynb"].startswith("another chapter's notebook: its exercises are those of 02_")
    for name in ("noisy.ipynb", "alice.ipynb"):
        assert rows[(name, "check_causal_mask")]["status"] == "pass"
        assert rows[(name, "check_padding_mask")]["status"] == "not attempted"
    printed = capsys.readouterr().out
    assert "not graded:" in printed and "not a notebook" in printed


def test_a_submission_without_its_tags_is_still_matched_by_its_checker_calls(tmp_path, tiny_release):
    path = submission(tmp_path, causal=CAUSAL + CAUSAL_CALL)
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        cell.metadata.pop("tags", None)  # an editor that keeps no cell metadata
    nbformat.write(nb, path)
    assert statuses(run_notebook(path, 120, release=tiny_release))[0] == ("check_causal_mask", "pass")


# --- the course's own chapter -------------------------------------------------------------------------------------


def test_an_untouched_student_edition_with_a_forged_last_cell_passes_nothing(tmp_path):
    nb = nbformat.read(ROOT / "notebooks" / "student" / "01_attention.ipynb", as_version=4)
    names = exercises(ROOT / "notebooks" / "01_attention.ipynb")
    forged = FORGED.replace("('check_causal_mask', 'check_padding_mask')", repr(tuple(names)))
    nb.cells.append(nbformat.v4.new_code_cell(forged))
    path = tmp_path / "01_attention.ipynb"
    nbformat.write(nb, path)
    results = grade(path, timeout=300)
    assert [r.exercise for r in results] == names and {r.status for r in results} == {"not attempted"}


# --- what an instructor and a TA get: a sheet, points, feedback, cells found where the student sees them ----------


def test_the_grade_sheet_counts_each_students_exercises_and_points_and_the_feedback_says_it_all(tmp_path, tiny_release):
    points = tmp_path / "points.toml"
    points.write_text("[01_tiny]\ncheck_causal_mask = 2\ncheck_padding_mask = 3\n")
    alice, bob = tmp_path / "alice", tmp_path / "bob"
    alice.mkdir()
    bob.mkdir()
    cells = [("", SETUP), ("exercise", CAUSAL + CAUSAL_CALL), ("", "x = 1"), ("exercise", PADDING_STUB)]
    write(alice / "01_tiny.ipynb", cells)  # one passed, one not attempted
    write(
        bob / "01_tiny.ipynb",
        [("", SETUP), ("exercise", "1 / 0" + CAUSAL_CALL), ("", "x = 1"), ("exercise", PADDING_STUB)],
    )
    (tmp_path / "carol.ipynb").write_text("{")
    sheet, folder = tmp_path / "sheet.csv", tmp_path / "feedback"
    files = [alice / "01_tiny.ipynb", bob / "01_tiny.ipynb", tmp_path / "carol.ipynb"]
    main([*map(str, files), "--release", str(tiny_release), "--points", str(points), "--sheet", str(sheet),
          "--feedback", str(folder), "--timeout", "120"])  # fmt: skip
    rows = {row["student"]: row for row in csv.DictReader(sheet.open())}
    assert (rows["alice"]["passed"], rows["alice"]["not attempted"], rows["alice"]["points"]) == ("1", "1", "2")
    assert rows["alice"]["out of"] == "5" and rows["alice"]["check_causal_mask"] == "pass"
    assert (rows["bob"]["failed"], rows["bob"]["not run"], rows["bob"]["points"]) == ("0", "1", "0")
    assert rows["carol"]["note"].startswith("not graded") and rows["carol"]["points"] == "0"
    assert rows["carol"]["check_causal_mask"] == "not graded" and rows["alice"]["note"] == ""
    told = (folder / "bob_01_tiny.md").read_text()
    # the cell that raised, found as the student sees the notebook: under its heading, the n-th code cell there
    assert 'section "01 · Tiny", code cell 2: ZeroDivisionError' in told
    assert "## check_padding_mask: not attempted (0 of 3 points)" in told
    assert "not attempted of 2 exercises" in (folder / "alice_01_tiny.md").read_text()
    assert sorted(p.name for p in folder.iterdir()) == ["alice_01_tiny.md", "bob_01_tiny.md", "carol.md"]
    assert "Hand in the chapter's notebook itself" in (folder / "carol.md").read_text()


def test_the_courses_points_name_every_exercise_of_every_chapter_and_bad_points_are_refused(tmp_path):
    points = load_points()
    for release in sorted(RELEASE.glob("[0-9][0-9]_*.ipynb")):
        assert list(points[release.stem]) == exercises(release), release.stem
    assert set(points) == {p.stem for p in RELEASE.glob("[0-9][0-9]_*.ipynb")}
    bad = tmp_path / "points.toml"
    for text, said in (("[01_x]\ncheck_a = -1\n", "points are a number, 0 or more"), ("x = 1\n", "a chapter is a table"),
                       ("[01_x]\ncheck_a = 'two'\n", "points are a number"), ("[01_x\n", "points.toml")):  # fmt: skip
        bad.write_text(text)
        with pytest.raises(ValueError, match=said):
            load_points(bad)
    assert student_of("class/alice/01_attention.ipynb") == "alice" and student_of("class/bob_01.ipynb") == "bob_01"
    assert 1 <= default_jobs() <= (os.cpu_count() or 1)


def test_the_instructor_guides_example_summary_adds_up_for_its_chapter():
    """The guide shows the line the grader prints for one submission: its counts must be the chapter's."""
    guide = (Path(__file__).resolve().parents[1] / "docs" / "instructor_guide.md").read_text()
    chapter = re.search(r"--chapter (\d\d_\w+)", guide)[1]
    said = re.search(r"`(\d+) passed, (\d+) failed, (\d+) not attempted of (\d+) exercises;\s+(\d+) of (\d+) predictions "
                     r"answered; ([\d.]+) of ([\d.]+) points`", guide)  # fmt: skip
    assert said, "the guide's example summary line is not in the grader's form"
    passed, failed, missing, exercises, answered, predictions = map(int, said.groups()[:6])
    points = load_points()[chapter]
    asked = [name for name in points if name.startswith("check_prediction[")]
    assert passed + failed + missing == exercises == len(points) - len(asked) and predictions == len(asked)
    assert float(said[8]) == sum(points.values())
    assert answered <= predictions

    def best(weights, n):
        return sum(sorted(weights)[len(weights) - n :]) if n else 0.0

    exercise_weights = [v for k, v in points.items() if k not in asked]
    assert float(said[7]) <= best(exercise_weights, passed) + best([points[k] for k in asked], answered)
