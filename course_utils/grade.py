"""Grade students' notebooks: rebuild each from the course's own edition, run it headlessly, report every exercise.

    python -m course_utils.grade alice/01_attention.ipynb bob/01_attention.ipynb
    python -m course_utils.grade submissions/*/*.ipynb --csv grades.csv --timeout 600 --jobs 2

What is graded (the design of nbgrader's ``autograde``): not the submitted notebook as it stands, but the course's
student edition of its chapter (``notebooks/student/``, the *release*) with each exercise cell's answer taken from the
submission. Every other cell comes from the release: a cell the student added or edited outside the exercises does
not run, and the checker calls come from the release, after the answer. The checkers do not run in the kernel: the
process that runs it (the runner) runs them, as the course wrote them, and each call they make of a student's function
crosses to the kernel and back as data (``course_utils.remote``). So the comparison, the message and the status are
made where no answer reaches, and passed on to the grader on a channel the kernel is not given (in the sandbox below,
cannot even see): printing, logging, displaying or writing a verdict from the notebook counts for nothing, and so does
patching anything of the checkers in the kernel.

Each exercise is reported as

- ``pass``: the checker accepted the answer;
- ``fail``: the checker rejected it (its message says why);
- ``answered``: a prediction (``check_prediction[...]``) holds one of its letters, right or wrong: predictions are
  graded as participation, since each wrong letter's explanation teaches the answer and a retry predicts nothing
  (the message says whether the letter was right);
- ``not attempted``: the function still raises ``NotImplementedError`` (or the prediction is still ``None``);
- ``not run``: execution never reached the checker (an earlier cell crashed the kernel, or the notebook ran
  past its time limit).

An answer that reaches past the exercise (the checkers, the grader, ``sys.modules``, the output machinery, a library's
attributes, the call stack...) or calls a ready-made version of it is graded, and flagged for review (``review`` in
the CSV), from that answer onward: code in an answer cell runs in the same kernel as the functions the checkers call
after it, and could change what they return. The instructor guide says what that leaves open.

Each submission's kernel runs in a scratch folder of its own, under a time limit after which the kernel and every
process of its session are ended, with its address space and its outputs capped. Where bubblewrap runs (Linux, with
Debian's ``bubblewrap`` package), the kernel runs in a sandbox of its own: its own processes (a ``/proc`` that shows no
other), no network, every file read-only but its scratch folder, a private ``/tmp``, and everything it started ended
with it; so no submission can touch the course, the results, the grader or another submission. Elsewhere (macOS,
Windows), the runner and the kernel run in a container of their own per submission (Docker or Podman, the image of
``tools/grader.Dockerfile``): no network, no user but nobody, every file read-only but two folders in memory, removed
with all it holds when the run ends. Without a sandbox the grader says so in one line: the grades are then formative
only. Told to stop (Ctrl-C, SIGTERM, SIGHUP), the grader
ends every run and still reports what it graded. The grader writes nothing next to a submission. A file that is not a
course notebook is reported in one line, and the others are graded.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import csv
import functools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Report", "Result", "exercises", "grade", "main", "run_notebook"]

# check_name( or check_name("question-id": a string literal as first argument names the question
# check_prediction("question", ...) and check_diagnosis(function, "mystery") report one exercise per question
CHECK_CALL = re.compile(r"^[ \t]*(check_\w+)\((?:\s*[\"']([\w-]+)[\"']|\s*\w+\s*,\s*[\"']([\w-]+)[\"'])?", re.MULTILINE)
STATUSES = ("pass", "fail", "answered", "not attempted", "not run")
RELEASE = Path(__file__).resolve().parents[1] / "notebooks" / "student"  # in a checkout of the course
GRADER = "__course_grader__"  # the kernel's end of the link to the checkers, made by the graded notebook's first cell
# What an answer has no need to touch: the checkers and the grader, imports by name, the output machinery, the
# interpreter's insides (a dunder attribute other than __init__, frames, the garbage collector), and assignments to
# the attributes of a library (torch.Tensor.any = ...).
REACHES_PAST = re.compile(
    r"course_utils|__course_grader__|\bcheck_\w+\s*(=|\.)|sys\.modules|builtins|get_ipython|IPython|sys\.std(out|err)"
    r"|\bdisplay\(|globals\(\)|\bvars\(|setattr\(|importlib|__import__|(?<![\w.])(exec|eval|compile)\(|Verdict"
    r"|fork_rng|\.__(?!init__\b)\w+__|__torch_function__|__torch_dispatch__|_getframe|currentframe|f_back|f_globals"
    r"|\bgc\.|ctypes|\bos\.(kill|fork|setsid|getppid)|signal\.|/proc|\binspect\.|\btraceback\.|sys\._"
    r"|^[ \t]*(torch|nn|F|np|math|random|os|sys)\.[\w.]+\s*=(?!=)",
    re.MULTILINE,
)
# For an exercise, the course's or PyTorch's own version of what it asks to write: an answer calling it is flagged.
OWN_ANSWER = {
    "check_scaled_dot_product_attention": "scaled_dot_product_attention",
    "check_attention_with_bias": "scaled_dot_product_attention",
    "check_causal_mask": "causal_mask",
    "check_padding_mask": "padding_mask",
    "check_sinusoidal_encoding": "sinusoidal_encoding|PositionalEncoding",
    "check_layer_norm": "layer_norm|LayerNorm",
    "check_rms_norm": "rms_norm|RMSNorm",
    "check_encoder_layer": r"layer\(",
    "check_pre_norm_layer": r"layer\(",
    "check_decoder_layer": r"layer\(",
    "check_gpt_block": r"block\(",
    "check_greedy_decode": "greedy_decode|beam_search",
    "check_beam_step": "beam_search",
    "check_label_smoothing": r"label_smoothing\s*=",
    "check_bpe_segment": r"BPETokenizer|segment\(",
    "check_ngram_matches": r"sacrebleu|bleu\(",
}
OUTPUT_LIMIT = 100_000  # characters of output kept per cell; a flood beyond it is dropped

# Run in a child process, so that a notebook that loops or kills its kernel cannot take the grader with it. It reads
# the notebook to run on its standard input, runs each cell in the kernel but the verdict cells, whose checkers it
# runs itself (on RemoteFunctions), and writes, on its standard output, one JSON line for the kernel's pid and one per
# cell: the verdicts of its checkers and the errors the cell raised. The kernel's own streams go nowhere (and it
# inherits no other descriptor), so nothing the notebook runs can write to that channel; no file holds the results.
# argv: the scratch folder the kernel runs in, the characters of output kept per cell, the MiB of address space
# allowed (0: no cap), the sandbox's command line (JSON, [] for none), the folder of the sockets and the calls' files.
RUNNER = r"""
import sys
sys.modules["rfc3987_syntax"] = None  # jsonschema's optional IRI checks, unused by nbformat: 1 s of grammar building
import json, resource, subprocess, nbformat
from nbclient import NotebookClient

workdir, limit, memory, sandbox, sockets = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), json.loads(sys.argv[4]), sys.argv[5]
folder = sockets  # also where the checkers' calls and the kernel's answers are written
if sys.platform == "linux":  # no process of this user may read this one's memory or descriptors, or trace it (in a
    import ctypes            # container the kernel sees it): Linux's PR_SET_DUMPABLE, 0
    ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)
import os
os.makedirs(workdir, exist_ok=True)  # in a container, made here
os.makedirs(sockets, exist_ok=True)
if memory:  # the kernel inherits the cap on its address space
    resource.setrlimit(resource.RLIMIT_AS, (memory * 2**20, memory * 2**20))
nb = nbformat.reads(sys.stdin.read(), as_version=4)
if sandbox:  # the kernel is started inside the sandbox, and reached over socket files in the folder it shares
    from jupyter_client.manager import AsyncKernelManager  # as nbclient's own: a blocking one's client would hold the
                                                           # event loop, and a kernel's death go unseen until the limit
    class Sandboxed(AsyncKernelManager):
        def format_kernel_cmd(self, extra_arguments=None):
            return sandbox + super().format_kernel_cmd(extra_arguments)

    manager = Sandboxed(kernel_name="python3", transport="ipc", ip=sockets + "/kernel",
                        connection_file=sockets + "/kernel.json")
else:
    manager = None
report = sys.stdout
used, noted = {}, set()

class Client(NotebookClient):
    def output(self, outs, msg, display_id, cell_index):
        out = super().output(outs, msg, display_id, cell_index)
        if out is None:
            return None
        used[cell_index] = used.get(cell_index, 0) + len(json.dumps(out))
        keep = out.get("output_type") == "error"
        if used[cell_index] > limit and not keep and outs and outs[-1] is out:
            outs.pop()  # beyond the cell's share: dropped, once said so
            if cell_index not in noted:
                noted.add(cell_index)
                outs.append(nbformat.v4.new_output("stream", name="stderr", text="[output beyond the limit dropped]"))
            return None
        return out

def say(record):
    report.write(json.dumps(record) + "\n")
    report.flush()

def started(notebook):
    say({"kernel": client.km.provisioner.pid})

def executed(cell, cell_index, execute_reply):
    if cell.get("metadata", {}).get("course_synthetic"):
        return  # a call of the grader's own, within a verdict cell
    outputs = cell.get("outputs", [])
    errors = [f"{o.get('ename', '?')}: {o.get('evalue', '')}"[:200] for o in outputs if o.get("output_type") == "error"]
    say({"cell": cell_index, "verdicts": [], "errors": errors})  # what the kernel displays is no verdict

client = Client(nb, km=manager, kernel_name="python3", allow_errors=True, timeout=None, on_notebook_start=started,
                on_cell_executed=executed, resources={"metadata": {"path": workdir}})

# The checkers run here, in this process, as the course wrote them (imported before any student code runs); each
# call of a student's function crosses to the kernel and back as data (course_utils.remote).
import contextlib, io, threading
from nbclient.exceptions import DeadKernelError

course = {}  # the checkers and the link, imported while the kernel starts (both take seconds), before any cell runs

def load():
    from course_utils import checks
    from course_utils.remote import Link
    course.update(checks=checks, Link=Link)

loading = threading.Thread(target=load)
loading.start()

class Ended(Exception):
    pass

current = [0]  # the verdict cell being judged: the kernel's outputs of each call go with it

def run(code):
    cell = nbformat.v4.new_code_cell(code, metadata={"course_synthetic": True})
    try:
        client.execute_cell(cell, current[0])
    except DeadKernelError as e:
        raise Ended(f"the kernel died: {e}") from None
    raised = [f"{o.get('ename', '?')}: {o.get('evalue', '')}" for o in cell.outputs if o.get("output_type") == "error"]
    if raised:
        raise RuntimeError(raised[0][:1000])


def judge(index, calls):
    current[0], verdicts, errors = index, [], []
    checks, link = course["checks"], course["link"]
    for call in calls:
        try:
            args = [link.hold(a["expression"]) if "expression" in a else a["literal"] for a in call["args"]]
        except RuntimeError as e:
            errors.append(str(e)[:200])
            continue
        with contextlib.redirect_stdout(io.StringIO()):
            found = getattr(checks, call["checker"])(*args)
        verdicts.append({"exercise": found.exercise, "status": found.status, "message": found.message})
    say({"cell": index, "verdicts": verdicts, "errors": errors})

with client.setup_kernel(stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL):
    loading.join()
    if "checks" not in course:
        sys.exit("the grader could not import course_utils.checks")
    course["link"] = course["Link"](run, folder)
    for index, cell in enumerate(nb.cells):
        calls = cell.get("metadata", {}).get("course_calls")
        try:
            judge(index, calls) if calls is not None else client.execute_cell(cell, index)
        except (Ended, DeadKernelError) as e:
            sys.exit(f"the kernel died: {e}")
"""

# The graded notebook's first cell: the kernel's end of the link the checkers call the answers through.
SETUP = f"""
from course_utils.remote import KernelSide as _KernelSide
{GRADER} = _KernelSide()
del _KernelSide
"""


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
    sandbox: str = "none"  # where its kernel ran: "bwrap", "podman", "docker" (a container) or "none"


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

    if path.is_dir():
        raise NotGradable(f"a folder, not a notebook: pass the notebooks in it ({path / '*.ipynb'})")
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
    """The chapter whose exercises the submission's exercise cells hold (most in common); the chapter the
    instructor named (``--chapter``) for a notebook whose exercise cells call no checker any more."""
    theirs = {name for cell in _exercise_cells(nb) for name in _calls(cell.source)}
    shared = {
        stem: len(theirs & {n for c in _exercise_cells(r) for n in _calls(c.source)}) for stem, r in releases.items()
    }
    best = max(shared, key=lambda stem: shared[stem])
    if not shared[best] and expected is not None and _exercise_cells(nb):
        return expected  # every checker call deleted: the exercise cells are matched by their places in the chapter
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
    """An exercise cell without its checker calls: what the student wrote. Each top-level ``check_*(...)`` statement,
    on one line or several, is replaced by ``None``; what shares its line stays (``check_x(f); f = None``). A cell
    that does not parse loses the lines that start with a call, and keeps its syntax error."""
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return "\n".join(line for line in source.splitlines() if not CHECK_CALL.match(line)).rstrip() + "\n"
    lines = source.splitlines(keepends=True)
    calls = [
        node
        for node in tree.body
        if isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Name)
        and node.value.func.id.startswith("check_")
    ]
    for node in reversed(calls):  # from the end, so that earlier positions stay valid
        first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
        start = len(lines[first].encode()[: node.col_offset].decode())
        end = len(lines[last].encode()[: node.end_col_offset].decode())
        lines[first : last + 1] = [lines[first][:start] + "None" + lines[last][end:]]
    return "".join(lines).rstrip() + "\n"


def _verdict_calls(source: str) -> list[dict[str, Any]]:
    """The release's checker calls of an exercise cell, as the runner makes them: each checker's name and its
    arguments, a literal (a prediction's question) as itself, anything else as the expression the kernel evaluates."""
    import ast

    calls = []
    for line in source.splitlines():
        if not CHECK_CALL.match(line):
            continue
        node = ast.parse(line.split("#")[0].strip(), mode="eval").body
        assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name), line
        args = [
            {"literal": a.value} if isinstance(a, ast.Constant) else {"expression": ast.unparse(a)} for a in node.args
        ]
        calls.append({"checker": node.func.id, "args": args})
    return calls


def reviews(answer: str, names: Sequence[str]) -> dict[str, str]:
    """Why an instructor should read ``answer``, the answer to the exercises ``names``: it reaches past the exercise
    (``REACHES_PAST``), or calls the course's own version of what it asks for (``OWN_ANSWER``). Empty if neither."""
    found: dict[str, str] = {}
    answer = unicodedata.normalize("NFKC", answer)  # as Python reads identifiers: look-alike letters are the same
    reach = REACHES_PAST.search(answer)
    for name in names:
        own = OWN_ANSWER.get(name.split("[")[0])
        shortcut = re.search(rf"(?<!\w)(?:{own})", answer) if own else None
        if reach:
            found[name] = f"its answer mentions {reach.group(0).strip()!r}: read it"
        elif shortcut:
            found[name] = f"its answer uses {shortcut.group(0)!r}, a ready-made version of the exercise: read it"
    return found


@dataclass
class _Graded:
    """The notebook to run, and what each of its cells is."""

    notebook: Any
    verdict_cells: dict[int, list[str]]  # cell index -> the exercises its verdicts must name
    places: dict[int, str]  # cell index -> where the student finds it (for errors), for the release's cells
    reviews: dict[str, str]  # exercise -> why to read its answer
    notes: list[str]


def _graded_notebook(nb: Any, release: Any) -> _Graded:
    import nbformat

    theirs = _exercise_cells(nb)
    by_call = {key: cell for cell in theirs for key in _calls(cell.source)[:1]}
    out = nbformat.v4.new_notebook(metadata=release.metadata)
    graded = _Graded(out, {}, {}, {}, [])
    out.cells.append(nbformat.v4.new_code_cell(SETUP.strip()))
    number, position, tampered, section = 0, 0, "", "the top of the notebook"
    for cell in release.cells:
        if cell.cell_type == "markdown":  # a section starts at each heading the student sees (## ...)
            heading = re.search(r"^#{1,2} +(.+?)\s*$", cell.source, re.M)
            if heading:
                number, section = 0, f'section "{heading.group(1)}"'
        if cell.cell_type != "code":
            continue
        number += 1
        place = f"{section}, code cell {number}"
        tags = cell.get("metadata", {}).get("tags", [])
        if "exercise" not in tags:
            graded.places[len(out.cells)] = place
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
            graded.reviews.update(reviews(answer, names))
            reached = next((graded.reviews[n] for n in names if "mentions" in graded.reviews.get(n, "")), None)
            if reached and not tampered:
                tampered = f"an earlier answer ({', '.join(names)}) reaches past its exercise, which can change what "
                tampered += "every later answer returns: read them"
        if tampered:  # from the first answer that reaches past its exercise onward
            for name in names:
                graded.reviews.setdefault(name, tampered)
        graded.places[len(out.cells)] = place
        out.cells.append(nbformat.v4.new_code_cell(answer))
        graded.verdict_cells[len(out.cells)] = names
        calls = _verdict_calls(cell.source)
        out.cells.append(
            nbformat.v4.new_code_cell("# the checkers, run by the grader", metadata={"course_calls": calls})
        )
    return graded


def _session(sid: int) -> list[int]:
    """The processes of session ``sid`` (Linux's /proc; elsewhere, just its leader)."""
    proc = Path("/proc")
    if not proc.is_dir():
        return [sid]
    members = []
    for stat in proc.glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()  # state, ppid, pgrp, session, ...
        except (OSError, IndexError):
            continue
        if fields[3] == str(sid) and fields[0] != "Z":
            members.append(int(stat.parent.name))
    return members


def _end_session(sid: int) -> None:
    """End every process of session ``sid``: SIGTERM, up to two seconds, then SIGKILL. A process that put itself in a
    session of its own (``setsid``) is not found."""
    for sig, wait in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 1.0)):
        members = _session(sid)
        for pid in members:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + wait
        while members and time.monotonic() < deadline:
            time.sleep(0.05)
            members = _session(sid)
        if not members:
            return


@dataclass
class _Run:
    """What the runner said: each cell's verdicts and errors (by cell index), why the run stopped early, and what was
    suspicious about the channel (records after the runner ended, a cell reported twice)."""

    cells: dict[int, dict[str, Any]]
    stopped: str | None
    suspicious: str = ""


def _lines(text: str | None) -> list[dict[str, Any]]:
    records = []
    for line in (text or "").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


def sandbox_command(scratch: str, sockets: str) -> list[str]:
    """bubblewrap's command line that starts a kernel in a sandbox of its own: its own process tree (a ``/proc`` that
    shows nothing else), no network, every file read-only but its scratch folder and the folder of the sockets the
    runner reaches it by, a private ``/tmp``, and every process in it ended when the runner ends."""
    return [
        "bwrap", "--die-with-parent", "--new-session", "--unshare-all", "--ro-bind", "/", "/", "--dev", "/dev",
        "--proc", "/proc", "--tmpfs", "/tmp", "--bind", scratch, scratch, "--bind", sockets, sockets,
        "--chdir", scratch, "--setenv", "HOME", scratch, "--unsetenv", "JPY_PARENT_PID", "--",
    ]  # fmt: skip


@functools.cache
def sandbox_missing() -> str | None:
    """Why no submission can run in a sandbox on this machine, in a few words; None when bubblewrap works here."""
    if shutil.which("bwrap") is None:
        return "bubblewrap is not installed (Debian and Ubuntu: apt install bubblewrap)"
    try:
        with tempfile.TemporaryDirectory(prefix="grade-") as tmp:
            done = subprocess.run([*sandbox_command(tmp, tmp), "true"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"bubblewrap does not start: {e}"
    if done.returncode != 0:
        said = [line for line in done.stderr.splitlines() if line.strip()]
        return "bubblewrap does not start here: " + (said[-1] if said else f"exit status {done.returncode}")
    return None


ENGINES = ("podman", "docker")  # where bubblewrap cannot run, a container per submission
IMAGE = "course-grader"  # the image tools/grader.Dockerfile builds
SANDBOXES = ("auto", "bwrap", *ENGINES, "none")
# What a process in a container may inherit from the grader's environment: the course's settings and the threads.
PASSED_ON = ("OMP_NUM_THREADS", "PYTHONHASHSEED", "ATEN_CPU_CAPABILITY", "CUDA_VISIBLE_DEVICES")
IN_CONTAINER = "/grade"  # the container's one writable folder (besides /tmp), both in memory


@dataclass(frozen=True)
class Sandbox:
    """Where each kernel runs: ``kind`` is ``"bwrap"``, ``"podman"``, ``"docker"`` or ``"none"``; ``image`` the
    container image (or, for podman, a folder holding a root file system); ``missing`` why there is no sandbox."""

    kind: str
    image: str = IMAGE
    missing: str | None = None


def course_fingerprint() -> str:
    """A digest of this installation's ``course_utils`` (its Python files): the grader and a container's image must
    hold the same checkers."""
    import hashlib

    root = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _container_python(image: str) -> str:
    # An image's Python is on its PATH; a root folder (podman) is a copy of a machine's, with the grader's own Python.
    return sys.executable if os.path.isabs(image) else "python"


def container_command(engine: str, image: str, name: str, memory_mb: int | None = None) -> list[str]:
    """The command line that runs a program in a new container of ``image`` named ``name``: no network, no user but
    nobody, no capability, every file read-only but ``/grade`` and ``/tmp`` (in memory, gone with it), ``memory_mb``
    of memory at most, the course's data folders read-only, and only the course's settings from the environment."""
    # podman: no folders of its own in memory besides these two, and nothing copied into them from the image
    podman = ["--read-only-tmpfs=false"] if engine == "podman" else []
    empty = ",notmpcopyup" if engine == "podman" else ""
    command = [
        engine, "run", "--rm", "-i", "--name", name, "--network", "none", "--read-only", *podman,
        "--user", "65534:65534", "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--pids-limit", "4096",
        "--tmpfs", f"/tmp:rw,mode=1777{empty}", "--tmpfs", f"{IN_CONTAINER}:rw,mode=1777{empty}", "--workdir", "/tmp",
        "--env", f"HOME={IN_CONTAINER}/work", "--env", "PYDEVD_DISABLE_FILE_VALIDATION=1",
    ]  # fmt: skip
    if memory_mb:
        command += ["--memory", f"{memory_mb}m"]
    settings = {k: v for k, v in os.environ.items() if k.startswith("COURSE_") or k in PASSED_ON}
    from .data.text import default_data_dir  # the data the chapters read: no network in there

    folders = {"COURSE_DATA_DIR": str(default_data_dir()), "COURSE_DATA_MIRROR": settings.get("COURSE_DATA_MIRROR")}
    for key, folder in folders.items():
        if folder and os.path.isdir(folder):
            folder = os.path.realpath(folder)
            command += ["--volume", f"{folder}:{folder}:ro"]
            settings[key] = folder
        else:
            settings.pop(key, None)
    for key, value in sorted(settings.items()):
        command += ["--env", f"{key}={value}"]
    if os.path.isabs(image):  # podman: a root folder, seen through an overlay that is dropped with the container
        return [*command, "--rootfs", f"{image}:O"]
    return [*command, image]


@functools.cache
def container_missing(engine: str, image: str = IMAGE) -> str | None:
    """Why no submission can run in a container of ``image`` on this machine, in a few words; None when one starts
    and holds this installation's course."""
    if shutil.which(engine) is None:
        return f"{engine} is not installed"
    if os.path.isabs(image):
        if engine != "podman" or not os.path.isdir(image):
            return f"{image}: a root folder stands in for an image with podman only, and must exist"
    else:
        try:
            found = subprocess.run([engine, "image", "inspect", image], capture_output=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"{engine} does not answer: {e}"
        said = [line for line in found.stderr.decode(errors="replace").splitlines() if line.strip()]
        unknown = ("no such", "not known", "not found")  # docker's words, then podman's, for an image it does not have
        if found.returncode != 0 and said and not any(word in said[-1].lower() for word in unknown):  # no daemon...
            return f"{engine} does not answer: {said[-1]}"
        if found.returncode != 0:
            return f"{engine} has no image {image!r} (build it: {engine} build -t {image} -f tools/grader.Dockerfile .)"
    name = f"course-grade-check-{os.getpid()}-{time.time_ns()}"
    probe = "import course_utils.grade as g; print(g.course_fingerprint())"
    try:
        done = subprocess.run(
            [*container_command(engine, image, name), _container_python(image), "-c", probe],
            capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as e:
        _remove_container(engine, name)
        return f"a container of {image} does not start: {e}"
    if done.returncode != 0:
        said = [line for line in done.stderr.splitlines() if line.strip()]
        return f"a container of {image} does not start: " + (said[-1] if said else f"exit status {done.returncode}")
    if done.stdout.strip() != course_fingerprint():
        return f"the image {image}'s course_utils is not this one's: build it again from this checkout"
    return None


def _remove_container(engine: str, name: str) -> None:
    try:
        now = ["--time", "0"] if engine == "podman" else []  # podman would ask first, and wait 10 s; docker kills
        subprocess.run([engine, "rm", "-f", *now, name], capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        pass


def choose_sandbox(sandbox: str = "auto", image: str = IMAGE) -> Sandbox:
    """The sandbox ``sandbox`` names: ``"auto"`` is bubblewrap where it runs, else a container of ``image`` (podman's,
    then docker's) where one starts, else none; ``"bwrap"``, ``"podman"`` and ``"docker"`` raise ``RuntimeError``
    where they cannot run, saying why; ``"none"`` is none."""
    if sandbox not in SANDBOXES:
        raise ValueError(f"sandbox={sandbox!r}: use one of {', '.join(map(repr, SANDBOXES))}")
    if sandbox == "none":
        return Sandbox("none", image, "switched off")
    if sandbox in ("bwrap", "auto"):
        missing = sandbox_missing()
        if not missing:
            return Sandbox("bwrap", image)
        if sandbox == "bwrap":
            raise RuntimeError(f"no sandbox: {missing}")
        for engine in ENGINES:
            if shutil.which(engine) and not container_missing(engine, image):
                return Sandbox(engine, image)
        return Sandbox("none", image, f"{missing}; no container of {image} either (the instructor guide says how)")
    missing = container_missing(sandbox, image)
    if missing:
        raise RuntimeError(f"no sandbox: {missing}")
    return Sandbox(sandbox, image)


# The runs in progress, for a grader told to stop (Ctrl-C, SIGTERM, SIGHUP): the sessions to end.
_LIVE: set[int] = set()
_CONTAINERS: dict[str, str] = {}  # the containers running (name: engine), to remove
_LIVE_LOCK = threading.Lock()
_STOPPING = threading.Event()
STOPPED = "the grading was stopped before this notebook's run ended"
GRACE = 2.0  # seconds the grader reads on after the runner ended; a process of the notebook holding the pipe is not waited for


def stop_every_run() -> None:
    """End every run in progress, and start no other: each is reported as far as it got."""
    _STOPPING.set()
    with _LIVE_LOCK:
        sessions = list(_LIVE)
        containers = list(_CONTAINERS.items())
    for sid in sessions:
        _end_session(sid)
    for name, engine in containers:
        _remove_container(engine, name)


def _run(notebook: Any, timeout: float, memory_mb: int | None, sandbox: Sandbox, threads: int | None = None) -> _Run:
    """Execute ``notebook`` in a scratch folder (in a sandbox, or a container) and end the kernel and everything it
    started."""
    import nbformat

    if _STOPPING.is_set():
        return _Run({}, STOPPED)
    # A socket's path has room for about 100 characters: where the temporary folder's name is long, /tmp holds them.
    short = None if len(tempfile.gettempdir()) < 60 or not os.path.isdir("/tmp") else "/tmp"
    with (
        tempfile.TemporaryDirectory(prefix="grade-") as tmp,
        tempfile.TemporaryDirectory(prefix="grade-sockets-", dir=short) as sockets,
        tempfile.TemporaryFile("w+") as stderr,
    ):
        scratch = os.path.join(tmp, "work")  # the kernel's folder; its parent holds nothing else either
        os.mkdir(scratch)
        env = {k: v for k, v in os.environ.items() if not k.startswith("JPY_")}
        env["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
        if threads and "OMP_NUM_THREADS" not in env:  # kernels side by side: each its share of the cores
            env["OMP_NUM_THREADS"] = str(threads)
        container = None
        if sandbox.kind in ENGINES:  # the runner and the kernel in a container, the runner's output its only way out
            container = f"course-grade-{os.getpid()}-{time.time_ns()}"
            prefix = [
                *container_command(sandbox.kind, sandbox.image, container, memory_mb),
                _container_python(sandbox.image),
            ]
            scratch, sockets, wrap = f"{IN_CONTAINER}/work", f"{IN_CONTAINER}/sockets", "[]"
        else:
            prefix = [sys.executable]
            wrap = json.dumps(sandbox_command(scratch, sockets) if sandbox.kind == "bwrap" else [])
        with _LIVE_LOCK:
            if container:
                _CONTAINERS[container] = sandbox.kind
        process = subprocess.Popen(
            [*prefix, "-c", RUNNER, scratch, str(OUTPUT_LIMIT), str(memory_mb or 0), wrap, sockets],
            env=env, cwd=tmp if container else scratch, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True,
            start_new_session=True,
        )  # fmt: skip
        with _LIVE_LOCK:
            _LIVE.add(process.pid)
        said: list[str] = []
        ended = threading.Event()  # the runner has ended: what comes after comes from something else
        late: list[str] = []

        def read() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                (late if ended.is_set() else said).append(line)
                record = _lines(line)
                if record and isinstance(record[0].get("kernel"), int) and not container:  # a pid of this machine
                    with _LIVE_LOCK:
                        _LIVE.add(record[0]["kernel"])  # the kernel runs in a session of its own

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        stopped = None
        try:
            assert process.stdin is not None
            try:
                process.stdin.write(nbformat.writes(notebook))
                process.stdin.close()
            except (BrokenPipeError, OSError):
                pass  # the runner is already gone; its exit status says why
            process.wait(timeout=timeout)
            if _STOPPING.is_set():
                stopped = STOPPED
            elif process.returncode != 0:
                stderr.seek(0)
                last = [line for line in stderr.read().strip().splitlines() if line.strip()]
                stopped = "the notebook stopped: " + (last[-1] if last else f"exit status {process.returncode}")
        except subprocess.TimeoutExpired:
            stopped = f"stopped after the time limit of {timeout:g} s"
            if container:
                _remove_container(sandbox.kind, container)
            _end_session(process.pid)  # the runner first: once it is gone, it says no more
        finally:
            if process.poll() is None:  # interrupted otherwise: nothing of the run may outlive the grader
                _end_session(process.pid)
                stopped = stopped or STOPPED
            reader.join(GRACE)  # what the runner said before it ended; a pipe still held open is not waited for
            ended.set()
            reader.join(0.2)
            held = reader.is_alive()
            records = _lines("".join(said))
            kernels = [r["kernel"] for r in records if isinstance(r.get("kernel"), int) and not container]
            for sid in [*kernels, process.pid]:  # the kernel runs in a session of its own, as jupyter_client starts it
                _end_session(sid)
            if container:  # every process in it ends with it, and everything it wrote
                _remove_container(sandbox.kind, container)
            with _LIVE_LOCK:
                _LIVE.difference_update([*kernels, process.pid])
                _CONTAINERS.pop(container or "", None)
    cells: dict[int, dict[str, Any]] = {}
    suspicious = []
    for record in records:
        if isinstance(record.get("cell"), int):
            if record["cell"] in cells:
                suspicious.append(f"cell {record['cell']} was reported twice")
            cells[record["cell"]] = record
    if late or held:
        suspicious.append("a process the notebook started held the grader's channel open after the run")
    return _Run(cells, stopped, "; ".join(suspicious))


def _errors(run: _Run, graded: _Graded) -> list[str]:
    return [
        f"{graded.places[i]}: {error}"[:300]
        for i in sorted(run.cells)
        if i in graded.places
        for error in run.cells[i].get("errors", [])
    ]


def grade(path: str | Path, timeout: float = 600.0, **options: Any) -> list[Result]:
    """Run one notebook and return one ``Result`` per exercise it contains."""
    return run_notebook(path, timeout, **options).results


def run_notebook(
    path: str | Path,
    timeout: float = 600.0,
    *,
    release: str | Path | dict[str, Any] | None = None,
    chapter: str | None = None,
    memory_mb: int | None = 8192,
    sandbox: str | Sandbox = "auto",
    threads: int | None = None,
) -> Report:
    """Grade one submission: its exercises' results, the cells that raised and why it stopped, if it did. ``release``
    is the folder of the course's student editions (default: ``notebooks/student`` of this checkout), or those editions
    already read (``{"01_attention": notebook, ...}``: a class's grading reads them once, before any runs); ``chapter``
    (e.g. ``"01_attention"``), if given, is the only chapter accepted; ``memory_mb`` caps the kernel's address space;
    ``sandbox`` is ``"auto"`` (the kernel in a bubblewrap sandbox where this machine has one, else in a container of
    the grader's image where one starts), ``"bwrap"``, ``"podman"`` or ``"docker"`` (that sandbox or an error),
    ``"none"``, or a ``Sandbox`` from ``choose_sandbox``; ``threads``, if given, the threads PyTorch's kernels may use (``OMP_NUM_THREADS``,
    unless it is set already)."""
    chosen = sandbox if isinstance(sandbox, Sandbox) else choose_sandbox(sandbox)
    path = Path(path)
    try:
        nb = _read(path)
        releases = release if isinstance(release, dict) else _releases(Path(release or RELEASE))
        stem = _chapter_of(nb, releases, chapter)
    except NotGradable as e:
        return Report(str(path), [], [], None, unreadable=str(e), chapter=chapter)  # the chapter it was handed in for
    graded = _graded_notebook(nb, releases[stem])
    run = _run(graded.notebook, timeout, memory_mb, chosen, threads=threads)
    stopped = run.stopped
    if run.suspicious:  # counts against the submission: every exercise is to be read
        graded.reviews = {n: f"{run.suspicious}: read it" for names in graded.verdict_cells.values() for n in names}
    results = []
    for index, names in graded.verdict_cells.items():
        records = [r for r in run.cells.get(index, {}).get("verdicts", []) if isinstance(r, dict)]
        if len(records) > len(names):  # something besides the checkers displayed a verdict: trust none of them
            why = f"its verdict cell gave {len(records)} verdicts for {len(names)} exercise(s)"
            results += [Result(str(path), name, "not run", why, f"{why}: read its answer") for name in names]
            continue
        # The checker that ran names the exercise it graded; the release's calls only say what did not run.
        reported = [r for r in records if r.get("status") in STATUSES and isinstance(r.get("exercise"), str)]
        for record in reported:
            name, status, message = record["exercise"], record["status"], str(record.get("message", ""))
            review = graded.reviews.get(name, "")
            if status in ("pass", "fail") and (status == "pass") != message.startswith("✅"):
                review = review or f"its verdict says {status!r} with a message that says otherwise: read its answer"
            results.append(Result(str(path), name, status, message, review))
        for name in [n for n in names if n not in {r["exercise"] for r in reported}]:
            why = stopped or "the checker's cell did not run to its verdict"
            results.append(Result(str(path), name, "not run", why, graded.reviews.get(name, "")))
    errors = _errors(run, graded)
    return Report(str(path), results, errors, stopped, chapter=stem, notes=graded.notes, sandbox=chosen.kind)


POINTS = RELEASE / "points.toml"  # the points of each exercise, by chapter (the course's exercise list)
EARNS = ("pass", "answered")  # the statuses that earn an exercise's points


def load_points(path: str | Path | None = None) -> dict[str, dict[str, float]]:
    """The points of each exercise by chapter, from a TOML file (default: the course's ``points.toml``, 1 point
    each): ``{"01_attention": {"check_causal_mask": 1.0, ...}, ...}``. A ``ValueError`` names a value that is not a
    number of points."""
    import tomllib

    path = Path(path or POINTS)
    try:
        table = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ValueError(f"{path}: {e}") from None
    points: dict[str, dict[str, float]] = {}
    for chapter, weights in table.items():
        if not isinstance(weights, dict):
            raise ValueError(
                f"{path}: {chapter} = {weights!r}: a chapter is a table, [{chapter}], of exercise = points"
            )
        for name, value in weights.items():
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ValueError(f"{path}: [{chapter}] {name} = {value!r}: points are a number, 0 or more")
        points[chapter] = {name: float(value) for name, value in weights.items()}
    return points


def student_of(path: str | Path) -> str:
    """Whose a submission is: its folder's name when the file is named as a chapter (``alice/01_attention.ipynb``:
    alice), else the file's name (``alice_01.ipynb``: alice_01)."""
    path = Path(path)
    named_as_chapter = re.fullmatch(r"\d\d_\w+", path.stem)
    return path.parent.name if named_as_chapter and path.parent.name not in ("", ".") else path.stem


@dataclass(frozen=True)
class Tally:
    """One submission's results counted: exercises passed, failed, not attempted and not run (predictions apart:
    answered of asked), and the points earned of the points there are."""

    passed: int
    failed: int
    not_attempted: int
    not_run: int
    answered: int
    predictions: int
    points: float
    out_of: float

    @property
    def exercises(self) -> int:
        return self.passed + self.failed + self.not_attempted + self.not_run

    def summary(self) -> str:
        said = f"{self.passed} passed, {self.failed} failed, {self.not_attempted} not attempted"
        said += f", {self.not_run} not run" if self.not_run else ""
        said += f" of {self.exercises} exercises"
        if self.predictions:
            said += f"; {self.answered} of {self.predictions} predictions answered"
        return said + f"; {self.points:g} of {self.out_of:g} points"


def tally(report: Report, points: dict[str, dict[str, float]] | None = None) -> Tally:
    """``report``'s results counted, each exercise worth its points in ``points`` (1 where it names none)."""
    weights = (points or {}).get(report.chapter or "", {})
    counts = {status: 0 for status in STATUSES}
    earned = out_of = 0.0
    predictions = 0
    for result in report.results:
        weight = weights.get(result.exercise, 1.0)
        out_of += weight
        earned += weight if result.status in EARNS else 0.0
        if result.exercise.startswith("check_prediction["):
            predictions += 1
            counts["answered"] += result.status == "answered"
        else:
            counts[result.status] += 1
    return Tally(counts["pass"], counts["fail"], counts["not attempted"], counts["not run"], counts["answered"],
                 predictions, earned, out_of)  # fmt: skip


def write_sheet(reports: Sequence[Report], path: str | Path, points: dict[str, dict[str, float]] | None = None) -> None:
    """The grade sheet: one row per submission (the student, the chapter, the counts, the points, how many answers to
    read, a note) and a column per exercise holding its status. A file that could not be graded has a full row too:
    0 points (of the chapter's, where ``--chapter`` named it), every exercise ``not graded``, the reason in its note,
    so that a spreadsheet totalling the column counts it."""
    names: dict[str, None] = {}
    for report in reports:
        names.update((r.exercise, None) for r in report.results)
    counted = ["passed", "failed", "not attempted", "not run", "predictions answered", "points", "out of", "to read"]
    with Path(path).open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["student", "notebook", "chapter", *counted, "note", *names])
        for report in reports:
            student = student_of(report.notebook)
            if report.unreadable:
                weights = (points or {}).get(report.chapter or "", {})
                writer.writerow([
                    student, report.notebook, report.chapter or "", 0, 0, 0, 0, "", 0,
                    f"{sum(weights.values()):g}" if weights else "", 0, f"not graded: {report.unreadable}",
                    *("not graded" for _ in names),
                ])  # fmt: skip
                continue
            t = tally(report, points)
            status = {r.exercise: r.status + (" (review)" if r.review else "") for r in report.results}
            note = f"stopped early: {report.stopped}" if report.stopped else ""
            writer.writerow([
                student, report.notebook, report.chapter, t.passed, t.failed, t.not_attempted, t.not_run,
                f"{t.answered} of {t.predictions}", f"{t.points:g}", f"{t.out_of:g}",
                sum(bool(r.review) for r in report.results), note, *(status.get(name, "") for name in names),
            ])  # fmt: skip


def feedback(report: Report, points: dict[str, dict[str, float]] | None = None) -> str:
    """What a student is handed back (Markdown): each exercise's status, points and the checker's whole message, the
    cells that raised and where to find them. The flags for the instructor are not in it."""
    student = student_of(report.notebook)
    if report.unreadable:
        chapter = f" for {report.chapter}" if report.chapter else ""
        return (
            f"# {report.chapter or 'Not graded'}: {student}\n\n{Path(report.notebook).name}, handed in{chapter}, could "
            f"not be graded: {report.unreadable}.\n\nHand in the chapter's notebook itself, the .ipynb file Jupyter saves "
            "(in Colab: File → Download → Download .ipynb), with your answers in its exercise cells.\n"
        )
    t = tally(report, points)
    weights = (points or {}).get(report.chapter or "", {})
    lines = [f"# {report.chapter}: {student}", "", f"{Path(report.notebook).name}: {t.summary()}.", ""]
    if report.stopped:
        lines += [f"The run stopped early: {report.stopped}.", ""]
    for result in report.results:
        weight = weights.get(result.exercise, 1.0)
        earned = weight if result.status in EARNS else 0.0
        worth = f"{earned:g} of {weight:g} point{'' if weight == 1 else 's'}"
        lines += [f"## {result.exercise}: {result.status} ({worth})", "", result.message, ""]
    if report.errors:
        lines += ["## Cells that raised an error", "", *(f"- {e}" for e in report.errors), ""]
    if report.notes:
        lines += ["## Notes", "", *(f"- {n}" for n in report.notes), ""]
    return "\n".join(lines)


def write_feedback(
    reports: Sequence[Report], folder: str | Path, points: dict[str, dict[str, float]] | None = None
) -> list[Path]:
    """One feedback file per submission in ``folder`` (``<student>_<chapter>.md``; two submissions of one name are
    numbered); the files written."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for report in reports:
        named = f"{student_of(report.notebook)}_{report.chapter}" if report.chapter else student_of(report.notebook)
        stem = re.sub(r"[^\w.-]+", "_", named)
        path, n = folder / f"{stem}.md", 1
        while path in written:
            n += 1
            path = folder / f"{stem}_{n}.md"
        path.write_text(feedback(report, points), encoding="utf-8")
        written.append(path)
    return written


def default_jobs() -> int:
    """Notebooks to grade at once on this machine: one per core, as far as memory allows 3 GiB each."""
    cores = os.cpu_count() or 1
    try:
        gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):
        return 1
    return max(1, min(cores, int(gib // 3)))


def printable(text: str) -> str:
    """``text`` with its control characters (a newline in a file name, an escape sequence) written as escapes, so that
    one row of the table stays one line and the terminal shows what is there."""
    return re.sub(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]", lambda m: repr(m.group())[1:-1], text)


def _table(results: Sequence[Result]) -> str:
    rows = [("notebook", "exercise", "status", "message")] + [
        (
            printable(r.notebook),
            printable(r.exercise),
            r.status + (" (review)" if r.review else ""),
            printable(r.message.replace("\n", " "))[:100],
        )
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
    parser.add_argument("--csv", type=Path, help="also write the results to this CSV file, a row per exercise")
    parser.add_argument(
        "--sheet",
        type=Path,
        help="also write the grade sheet to this CSV file: a row per student, a column per exercise",
    )
    parser.add_argument(
        "--feedback", type=Path, help="also write each student's feedback, every message in full, into this folder"
    )
    parser.add_argument(
        "--points", type=Path, help="the points of each exercise (TOML, as notebooks/student/points.toml, the default)"
    )
    jobs = default_jobs()
    parser.add_argument(
        "--jobs", type=int, default=jobs,
        help=f"notebooks run at once (default: one per core as memory allows 3 GiB each: {jobs} here)",
    )  # fmt: skip
    parser.add_argument("--chapter", help="accept only this chapter's notebooks, e.g. 01_attention")
    parser.add_argument(
        "--release", type=Path, help="folder of the course's student editions (default: the checkout's)"
    )
    parser.add_argument("--memory", type=int, default=8192, help="MiB of address space per kernel (default 8192)")
    parser.add_argument(
        "--sandbox",
        choices=SANDBOXES,
        default="auto",
        help="where each kernel runs: in a bubblewrap sandbox (bwrap), in a container of --image (podman, docker), "
        "where there is one of these, in that order (auto, the default), or without a sandbox (none); a sandbox named "
        "that cannot run is an error",
    )
    parser.add_argument(
        "--image",
        default=IMAGE,
        help=f"the container image for podman and docker (default {IMAGE}, built by tools/grader.Dockerfile); for "
        "podman, a root folder (an absolute path) may stand in for it",
    )
    args = parser.parse_args(argv)
    for path in args.notebooks:
        if not path.exists():
            parser.error(f"{path}: no such file")
    if args.jobs < 1:
        parser.error(f"--jobs {args.jobs}: at least 1")
    try:
        releases = _releases(args.release or RELEASE)  # read once: no submission's run can change them for the next
    except FileNotFoundError as e:
        parser.error(str(e))
    try:
        points = load_points(args.points) if args.points or POINTS.is_file() else {}
    except ValueError as e:
        parser.error(str(e))
    try:
        sandbox = choose_sandbox(args.sandbox, args.image)
    except RuntimeError as e:
        parser.error(str(e))
    missing = "--sandbox none" if args.sandbox == "none" else sandbox.missing
    if missing:
        print(f"no sandbox ({missing}): students' code runs with your rights, so these grades are formative only "
              "(the instructor guide says why)", file=sys.stderr, flush=True)  # fmt: skip

    # Notebooks side by side share the cores: threads that spin for a core held by another kernel slow every run
    # many times over (chapter 09, graded beside 08 and 10 on two cores: over 15 minutes; one thread each, 92 s).
    threads = max(1, (os.cpu_count() or 1) // args.jobs) if args.jobs > 1 else None

    def one(path: Path) -> Report:
        start = time.perf_counter()
        report = run_notebook(
            path, args.timeout, release=releases, chapter=args.chapter, memory_mb=args.memory, sandbox=sandbox,
            threads=threads,
        )  # fmt: skip
        if report.unreadable:
            print(f"{path}: {report.unreadable}", file=sys.stderr, flush=True)
            return report
        summary = f"{path}: {tally(report, points).summary()} ({time.perf_counter() - start:.0f} s)"
        if report.errors:
            summary += f"; {len(report.errors)} cell(s) raised, the first: {report.errors[0]}"
        print(summary, file=sys.stderr, flush=True)
        return report

    signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    received: list[int] = []

    def stop(signum: int, _frame: Any) -> None:  # every run ends, and what was graded is still reported
        if not received:
            print(f"\n{signal.Signals(signum).name}: ending every run, then reporting what was graded",
                  file=sys.stderr, flush=True)  # fmt: skip
        received.append(signum)
        stop_every_run()

    _STOPPING.clear()
    before = (
        {s: signal.signal(s, stop) for s in signals} if threading.current_thread() is threading.main_thread() else {}
    )
    try:  # a second signal while the table and the CSV are written ends nothing more: they are written
        with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:  # each notebook runs in its own process
            reports = list(pool.map(one, args.notebooks))
        if args.sheet:
            write_sheet(reports, args.sheet, points)
        if args.feedback:
            written = write_feedback(reports, args.feedback, points)
            print(f"{len(written)} feedback file(s) in {args.feedback}", file=sys.stderr, flush=True)
        return _report(reports, args.csv, received)
    finally:  # called from Python (argv given), the caller's handlers come back; from the command line they stay
        for s, handler in before.items() if argv is not None else ():
            signal.signal(s, handler)


def _report(reports: Sequence[Report], to_csv: Path | None, received: Sequence[int]) -> int:
    """Print the table and what is to be read, write the CSV; the exit status."""
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
    if to_csv:
        with to_csv.open("w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(["notebook", "exercise", "status", "message", "review"])
            writer.writerows((r.notebook, r.exercise, r.status, r.message, r.review) for r in results)
            writer.writerows((r.notebook, "", "not graded", r.unreadable, "") for r in reports if r.unreadable)
    if received:
        return 128 + received[0]
    return 1 if unreadable else 0


if __name__ == "__main__":
    sys.exit(main())
