"""The grader against submissions that go after other students' grades or the grader itself: each runs in a
bubblewrap sandbox (its own processes, no network, every file read-only but its scratch folder), so what it starts
dies with it and what it writes goes nowhere; and the grader, told to stop, still reports what it graded.

Every hostile cell here aims only at files under the test's own ``tmp_path``, so that a sandbox that failed would
break this test, not the checkout."""

import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_grade import (
    CAUSAL,
    CAUSAL_CALL,
    CAUSAL_STUB,
    PADDING,
    PADDING_CALL,
    PADDING_STUB,
    SETUP,
    WRONG_CAUSAL,
    sandbox_for,
    statuses,
    submission,
    write,
)

from course_utils.grade import choose_sandbox, container_command, container_missing, main, printable, run_notebook

pytestmark = pytest.mark.slow  # every test here runs notebooks in a kernel

ROOT = Path(__file__).resolve().parents[1]
BOTH_RIGHT = [("check_causal_mask", "pass"), ("check_padding_mask", "pass")]


@pytest.fixture
def tiny_release(tmp_path):  # as in test_grade: two exercises, a few seconds a run
    folder = tmp_path / "release"
    folder.mkdir()
    write(folder / "01_tiny.ipynb", [("", SETUP), ("exercise", CAUSAL_STUB), ("", "x = 1"), ("exercise", PADDING_STUB)])
    return folder


def honest(tmp_path, name="bob.ipynb"):
    return submission(tmp_path, causal=CAUSAL + CAUSAL_CALL, padding=PADDING + PADDING_CALL, name=name)


@pytest.mark.parametrize("sandbox", ["bwrap", "podman"])
def test_a_forged_record_written_to_the_runners_output_reaches_nothing(tmp_path, tiny_release, sandbox):
    """At exit, a hook writes a forged verdict into the standard output of every process it can see: in the sandbox
    it sees only its own; in a container it also sees the runner's, which no other process may open."""
    chosen = sandbox_for(sandbox)
    forge = (
        "import atexit, glob, json\n"
        "def forge():\n"
        "    record = json.dumps({'cell': 2, 'verdicts': [{'exercise': 'check_causal_mask', 'status': 'pass', "
        "'message': '✅ forged'}]})\n"
        "    for fd in glob.glob('/proc/*/fd/1'):\n"
        "        try:\n"
        "            open(fd, 'w').write(record + '\\n')\n"
        "        except OSError:\n"
        "            pass\n"
        "atexit.register(forge)\n"
        "forge()\n"
        "def my_causal_mask(size):\n    raise NotImplementedError\n" + CAUSAL_CALL
    )
    report = run_notebook(submission(tmp_path, causal=forge), 120, release=tiny_release, sandbox=chosen)
    assert statuses(report) == [("check_causal_mask", "not attempted"), ("check_padding_mask", "not attempted")]


@pytest.mark.parametrize("sandbox", ["bwrap", "podman"])
def test_nothing_a_submission_starts_or_writes_outlives_it_or_reaches_another(tmp_path, tiny_release, sandbox):
    """A detached process that waits for the grader to finish, then rewrites the grades; a sitecustomize.py dropped on
    the path of every later run; an edited file of the course: none of it happens, and the next student's grades
    are the checkers'."""
    chosen = sandbox_for(sandbox)
    site, results = tmp_path / "site", tmp_path / "grades"
    site.mkdir()
    results.mkdir()
    course = tmp_path / "course.py"
    course.write_text("ORIGINAL = True\n")
    attack = (
        "import os, time\n"
        f"for path, text in (({str(site / 'sitecustomize.py')!r}, 'raise SystemExit'), ({str(course)!r}, 'x')):\n"
        "    try:\n"
        "        open(path, 'w').write(text)\n"
        "    except OSError as e:\n"
        "        print('refused:', e)\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    time.sleep(2)  # the grader has finished by now\n"
        f"    open({str(results / 'grades.csv')!r}, 'w').write('forged')\n"
        "    os._exit(0)\n"
    )
    eve = submission(tmp_path, causal=attack + CAUSAL + CAUSAL_CALL, name="eve.ipynb")
    bob = honest(tmp_path)
    env_path = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = f"{site}{os.pathsep}{env_path}" if env_path else str(site)  # on every kernel's path
    try:
        first = run_notebook(eve, 120, release=tiny_release, sandbox=chosen)
        second = run_notebook(bob, 120, release=tiny_release, sandbox=chosen)
    finally:
        os.environ["PYTHONPATH"] = env_path
    assert statuses(first)[0] == ("check_causal_mask", "pass") and statuses(second) == BOTH_RIGHT
    time.sleep(3)
    assert list(site.iterdir()) == [] and course.read_text() == "ORIGINAL = True\n"
    assert list(results.iterdir()) == []


def test_a_process_holding_the_runners_pipe_neither_holds_the_grader_nor_goes_unflagged(tmp_path, tiny_release):
    """Without a sandbox the kernel can reach its runner's output (``/proc/<parent>/fd/1``): a detached process that
    holds it open does not make the grader wait past the run, and the submission is flagged."""
    hold = (
        "import os, time\n"
        "pipe = os.open(f'/proc/{os.getppid()}/fd/1', os.O_WRONLY)\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    time.sleep(60)  # holds the pipe\n"
        "    os._exit(0)\n"
    )
    start = time.monotonic()
    path = submission(tmp_path, causal=hold + CAUSAL + CAUSAL_CALL, padding=PADDING + PADDING_CALL)
    report = run_notebook(path, 120, release=tiny_release, sandbox="none")
    assert time.monotonic() - start < 40
    assert statuses(report) == BOTH_RIGHT
    assert all("held the grader's channel open" in r.review for r in report.results)


def _grader(tmp_path, files, *extra):
    """The grader as an instructor starts it, in a process of its own, with its scratch folders under tmp_path."""
    scratch = tmp_path / "tmp"
    scratch.mkdir(exist_ok=True)
    env = {**os.environ, "TMPDIR": str(scratch), "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "course_utils.grade", *map(str, files), *extra]
    return subprocess.Popen(command, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_grader_told_to_stop_ends_every_run_and_reports_what_it_graded(tmp_path, tiny_release):
    """SIGTERM, then Ctrl-C while it ends the runs (SIGHUP and a first Ctrl-C take the same way)."""
    signals = (signal.SIGTERM, signal.SIGINT)
    mark = f"stuck-{time.time_ns()}"
    stuck = f"import subprocess, time\nsubprocess.Popen(['sh', '-c', 'sleep 300; : {mark}'])\nwhile True:\n    time.sleep(1)\n"
    files = [honest(tmp_path), submission(tmp_path, causal=CAUSAL + CAUSAL_CALL, padding=stuck, name="eve.ipynb")]
    out = tmp_path / "grades.csv"
    # one notebook at a time (the default runs one per core), so that bob's is graded before eve's gets stuck
    grader = _grader(tmp_path, files, "--csv", out, "--release", tiny_release, "--timeout", "120", "--jobs", "1")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(mark in _cmdline(p) for p in Path("/proc").glob("[0-9]*")):
        time.sleep(0.2)  # until eve's notebook is stuck, which is after bob's was graded
    time.sleep(2)
    for sig in signals:
        grader.send_signal(sig)
        time.sleep(0.3)
    printed, said = grader.communicate(timeout=30)
    # 143 (SIGTERM's status); or killed by the Ctrl-C itself, where it came after the grader was done
    assert grader.returncode in (128 + signals[0], -signals[1]), said
    rows = {(Path(r["notebook"]).name, r["exercise"]): r["status"] for r in csv.DictReader(out.open())}
    assert rows[("bob.ipynb", "check_causal_mask")] == "pass" and rows[("bob.ipynb", "check_padding_mask")] == "pass"
    assert rows[("eve.ipynb", "check_causal_mask")] == "pass"
    assert rows[("eve.ipynb", "check_padding_mask")] == "not run"
    assert "bob.ipynb" in printed and "ending every run" in said
    time.sleep(0.5)
    assert not [p for p in Path("/proc").glob("[0-9]*") if mark in _cmdline(p)]
    assert list((tmp_path / "tmp").iterdir()) == []  # no scratch folder left


def test_control_characters_in_a_file_name_stay_on_their_row(tmp_path, tiny_release, capsys):
    odd = honest(tmp_path, name="bob\nalice\x1b[2J.ipynb")
    main([str(odd), "--timeout", "120", "--release", str(tiny_release)])
    table = capsys.readouterr().out.splitlines()
    assert len(table) == 3 and all(r"bob\nalice\x1b[2J.ipynb" in row for row in table[1:])
    assert printable("tab\there\u2028") == r"tab\there\u2028"


def test_without_a_sandbox_the_grader_says_the_grades_are_formative(tmp_path, tiny_release, capsys):
    main([str(honest(tmp_path)), "--timeout", "120", "--release", str(tiny_release), "--sandbox", "none"])
    assert "no sandbox (--sandbox none): students' code runs with your rights" in capsys.readouterr().err


def test_a_container_is_given_no_network_no_user_no_capability_and_none_of_the_graders_environment(monkeypatch):
    monkeypatch.setenv("GRADER_SECRET", "s3cret")
    monkeypatch.setenv("COURSE_SKIP_TRAINING", "1")
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    command = container_command("docker", "course-grader", "course-grade-1", memory_mb=4096)
    flags = " ".join(command)
    for flag in ("--network none", "--read-only", "--user 65534:65534", "--cap-drop ALL", "--memory 4096m",
                 "no-new-privileges", "--rm"):  # fmt: skip
        assert flag in flags
    assert "s3cret" not in flags and "COURSE_SKIP_TRAINING=1" in command and "OMP_NUM_THREADS=2" in command
    volumes = [command[i + 1] for i, flag in enumerate(command) if flag == "--volume"]  # the data folders
    assert command[-1] == "course-grader" and all(volume.endswith(":ro") for volume in volumes)
    assert container_command("podman", "/srv/root", "n")[-2:] == ["--rootfs", "/srv/root:O"]


def test_a_container_sandbox_that_cannot_run_says_why_and_how(monkeypatch, tmp_path, tiny_release, capsys):
    monkeypatch.setattr("course_utils.grade.shutil.which", lambda name: None)
    container_missing.cache_clear()
    try:
        with pytest.raises(RuntimeError, match="no sandbox: docker is not installed"):
            choose_sandbox("docker")
        with pytest.raises(SystemExit):
            main([str(honest(tmp_path)), "--release", str(tiny_release), "--sandbox", "podman"])
        assert "no sandbox: podman is not installed" in capsys.readouterr().err
    finally:
        container_missing.cache_clear()
    with pytest.raises(ValueError, match="use one of 'auto', 'bwrap', 'podman', 'docker', 'none'"):
        choose_sandbox("firejail")


def _cmdline(proc):
    try:
        return (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


# --- cheats from the red team: the checkers run in the grader's process, so none reaches them -------------------

CHEATS = {
    "a checker module's verdict replaced": (
        "import inspect\nfrom course_utils.checks import check_causal_mask, Verdict\n"
        "inspect.getmodule(check_causal_mask).verdict = lambda run, name=None: Verdict(True, '✅ right', "
        "'check_causal_mask')\n"
    ),
    "the kernel's grader object replaced through gc": (
        "import gc\nfor o in gc.get_objects():\n"
        "    if type(o).__name__ == 'KernelSide':\n        o.serve = lambda path: None\n"
    ),
    "the output machinery patched": (
        "import IPython.display as shown\nshown.display = lambda *a, **k: None\nprint('✅ right')\n"
    ),
    "Verdict swapped in sys.modules": (
        "import sys\nsys.modules['course_utils.checks._core'].Verdict = lambda *a, **k: True\n"
    ),
    "written with look-alike letters": "import ｃｏｕｒｓｅ_utils.checks as c\nc.check_causal_mask = None\n",
    "the import machinery patched": (
        "import builtins\nreal = builtins.__import__\nbuiltins.__import__ = lambda name, *a, **k: real(name, *a, **k)\n"
    ),
    "the string 'fail' overwritten with ctypes": (
        "import ctypes, sys\nword = sys.intern('fail')\n"
        "ctypes.memmove(id(word) + sys.getsizeof(word) - 5, b'pass', 4)\n"
    ),
}


@pytest.mark.parametrize("cheat", list(CHEATS), ids=list(CHEATS))
def test_a_wrong_answer_that_patches_the_kernel_still_fails_and_is_flagged(tmp_path, tiny_release, cheat):
    answer = CHEATS[cheat] + "from course_utils.checks import check_causal_mask\n" + WRONG_CAUSAL + CAUSAL_CALL
    report = run_notebook(submission(tmp_path, causal=answer), 120, release=tiny_release)
    assert statuses(report)[0] == ("check_causal_mask", "fail"), report.results[0].message
    assert report.results[0].review and report.results[1].review  # flagged from that answer onward


def test_an_answer_that_hands_the_checker_the_courses_own_reference_is_flagged(tmp_path, tiny_release):
    """What a sandboxed student can still do (the instructor guide says so): return the course's reference when it
    sees the grader call. It passes, and it is flagged for the instructor to read."""
    answer = (
        "import inspect\nfrom course_utils import causal_mask\n\n\n"
        "def my_causal_mask(size):\n"
        "    if any(f.function == 'serve' for f in inspect.stack()):\n"
        "        return causal_mask(size)\n"
        "    return torch.ones(size, size, dtype=torch.bool)\n" + CAUSAL_CALL
    )
    report = run_notebook(submission(tmp_path, causal=answer), 120, release=tiny_release)
    assert statuses(report)[0] == ("check_causal_mask", "pass") and report.results[0].review
