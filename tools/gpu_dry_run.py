"""Run every notebook's GPU code paths on the CPU: `make gpu-dry-run`.

The course's notebooks take another branch on a GPU (chapter 07 trains SHAKESPEARE_GPT_GPU, at its real size) and
``train`` computes in bfloat16 there. A machine without a GPU never runs that code, so a typo, a shape or a tensor
left on the wrong device there would first fail in a student's Colab. With ``COURSE_GPU_DRY_RUN=1`` the CPU takes
those paths (``gpu_branch``), and ``train`` and ``estimate_loss`` stop after a few steps, each on 2 rows of its batch
(a CPU emulating bfloat16 took minutes for one step of chapter 07's full batch), and generation and decoding after
8 tokens (``course_utils.dry_run``): CI's make test has run every cell in full before, on the CPU. This script runs
every chapter so, one kernel each, ``--jobs`` at a time:

- its student edition, through the instructors' grader (``course_utils.grade``), as a class that skips training
  (``COURSE_SKIP_TRAINING=1``) would run it, every exercise not attempted: every cell but the stubs must run, and
  every exercise be graded "not attempted". No exercise cell trains or reads the device or SKIP_TRAINING
  (``tests/test_editions.py`` checks), so the stubs leave no GPU path out;
- its complete edition too where the chapter trains live only when training is not skipped (06-08), for that
  training's GPU path; 08 stops after its training, as from there on it uses the shipped translator either way.
  Skipping training, the shipped weights must meet every check, but those that see what a generation or a decoding
  cut short left (a BLEU score of eight-token translations).

After 3 training steps nothing has been learned, so the notebooks' checks of trained figures fail. The script
turns each ``assert`` into a check that reports and goes on (the cells after it still run, on what the cell
computed), and counts those reports apart, where it may see what was cut short: anywhere after a training run or a
loss estimate was cut (``course_utils.dry_run.DRY_RUN_CUTS``), and in a cell in which a generation or a decoding was
cut or that computes from one (``_TAINT``). Any other failed check raises: it checks code (a shape, an equality with
PyTorch), which must hold on Colab's libraries as on CI's. Every error fails the run: that is
what a GPU branch would raise. No ``assert`` outside an exercise cell reads a name that an exercise cell binds
(``tests/test_editions.py``), so a softened check hides no stub's effect.

Then the benchmarks of ``make gpu-check`` run for one timed step on the CPU: the GPT at its GPU preset (one layer,
2 rows), compiled with ``torch.compile`` as the GPU check compiles it, and the full model against ``nn.Transformer``
at chapter 06's sizes; and the tests marked ``dry_run``, which take every part of ``make gpu-check`` at toy sizes
on the CPU (``gpu_check.py --smoke``). Lines that still run only on a real GPU: ``torch.cuda`` calls (``synchronize``,
``is_bf16_supported``), CUDA kernels, and ``torch.compile``'s GPU code generation.

With ``--amp-dtype float16`` the notebooks train as on a GPU without bfloat16 (Colab's T4): float16 autocast with
a gradient scaler (``COURSE_AMP_DTYPE=float16``). ``--complete`` runs the complete editions alone, each training live.

    python tools/gpu_dry_run.py                      # every chapter, then the benchmarks
    python tools/gpu_dry_run.py 07 08 --no-benchmarks
    python tools/gpu_dry_run.py 06 10 --complete --amp-dtype float16 --no-benchmarks
    python tools/gpu_dry_run.py --float16-too 06 10   # make gpu-dry-run: all, then 06 and 10 in float16 too
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
# The GPU check's benchmarks, one timed step each on the CPU: the GPT at its GPU preset, compiled as there; the full
# model at chapter 06's sizes (the same code; the paper's sizes would take minutes on a CPU).
GPT_RUN = "--device cpu --preset gpu --n-layers 1 --batch-size 2 --steps 1 --warmup 1 --compile"
TRANSFORMER_RUN = "--device cpu --preset dates --timing-steps 1 --skip-accuracy"
BENCHMARKS = [
    ["benchmarks/bench_gpt.py", *GPT_RUN.split()],
    ["benchmarks/bench_transformer.py", *TRANSFORMER_RUN.split()],
    # and the tests marked dry_run: every part of make gpu-check at toy sizes on the CPU (gpu_check.py --smoke)
    ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "dry_run", "tests/test_gpu_dry_run.py"],
]
# Chapters whose complete edition stops, in a dry run, after its last cell that reads SKIP_TRAINING: from there on
# it uses the shipped weights whether it trained or not (08: section 5 onwards), as the student edition's run does.
UP_TO_TRAINING = {"08_translation"}
ENVIRONMENT = {"COURSE_GPU_DRY_RUN": "1", "COURSE_DEVICE": "cpu", "CUDA_VISIBLE_DEVICES": "", "COURSE_PROGRESS": "text"}


REPORT = "dry-run check failed:"


GENERATED = "(computed from a generation cut short)"  # how a report says why it is tolerated, else "(after: train)"
# Exceptions a check may raise on what a cut left (a word looked up in an eight-token translation); any other one
# (a device, a shape, a name) is an error wherever it comes.
TOLERATED = (LookupError, ZeroDivisionError)

# The cells' record of generation cuts: a cell in which a generation or a decoding was cut short, or that reads a name
# such a cell bound, is "tainted", and so is every name it binds. A check fails quietly only where it may see what a
# cut changed: anywhere after a training run or a loss estimate was cut (everything after trains on), or in a tainted
# cell (a generation's text, a BLEU score). IPython runs _dry_run_cell before each cell and _dry_run_taint after it.
_TAINT = """
import ast as _dry_run_ast
_DRY_RUN = {"tainted": set(), "cell": False, "generations": 0}


def _dry_run_generations():
    from course_utils.dry_run import DRY_RUN_CUTS, GENERATION_CUTS
    return sum(cut in GENERATION_CUTS for cut in DRY_RUN_CUTS)


def _dry_run_names(source):
    try:
        tree = _dry_run_ast.parse(source)
    except SyntaxError:
        return set(), set()
    read, bound = set(), set()
    for node in _dry_run_ast.walk(tree):
        if isinstance(node, _dry_run_ast.Name):
            (read if isinstance(node.ctx, _dry_run_ast.Load) else bound).add(node.id)
        elif isinstance(node, (_dry_run_ast.Subscript, _dry_run_ast.Attribute)) and not isinstance(node.ctx, _dry_run_ast.Load):
            while isinstance(node, (_dry_run_ast.Subscript, _dry_run_ast.Attribute)):
                node = node.value
            if isinstance(node, _dry_run_ast.Name):
                bound.add(node.id)  # x[i] = ..., x.y = ...: x changed
        elif isinstance(node, (_dry_run_ast.FunctionDef, _dry_run_ast.ClassDef)):
            bound.add(node.name)
    return read, bound


def _dry_run_cell(info):
    read, _ = _dry_run_names(info.raw_cell or "")
    _DRY_RUN["cell"] = bool(read & _DRY_RUN["tainted"])
    _DRY_RUN["generations"] = _dry_run_generations()


def _dry_run_taint(result):
    _, bound = _dry_run_names(result.info.raw_cell or "")
    if _DRY_RUN["cell"] or _dry_run_generations() > _DRY_RUN["generations"]:
        _DRY_RUN["tainted"] |= bound


try:
    get_ipython().events.register("pre_run_cell", _dry_run_cell)
    get_ipython().events.register("post_run_cell", _dry_run_taint)
except NameError:  # not in IPython: a generation cut anywhere taints what follows
    pass
"""


def _check_function(report: str) -> str:
    """``_dry_run_check``, which a softened ``assert`` calls with its test and its message, each to evaluate (a
    ``lambda``). A check that fails where it may see what the dry run cut short is ``report``ed and the cells after
    it still run: after a training run or a loss estimate was cut (course_utils.dry_run.DRY_RUN_CUTS), or in a cell
    tainted by a generation or a decoding cut short (``_TAINT``); so is a test that raises a ``TOLERATED`` error
    there. Every other failure raises, as it would on a GPU: it checks code (a shape, an equality with PyTorch)."""
    return _TAINT + (
        "\n\ndef _dry_run_check(test, message=lambda: ''):\n"
        "    from course_utils.dry_run import DRY_RUN_CUTS, GENERATION_CUTS\n"
        "    try:\n"
        "        if test():\n"
        "            return\n"
        "        raised = None\n"
        f"    except {', '.join(t.__name__ for t in TOLERATED).join('()')} as error:\n"
        "        raised = error\n"
        "    trained = [cut for cut in DRY_RUN_CUTS if cut not in GENERATION_CUTS]\n"
        "    generated = _DRY_RUN['cell'] or _dry_run_generations() > _DRY_RUN['generations']\n"
        "    if not (trained or generated):\n"
        "        raise raised or AssertionError(message())\n"
        "    if raised is None:\n"
        "        try:\n"
        "            message = message()\n"
        f"        except {', '.join(t.__name__ for t in TOLERATED).join('()')} as error:\n"
        "            raised = error\n"
        "    message = f'{type(raised).__name__}: {raised}' if raised else message\n"
        f"    why = {GENERATED!r} if generated else f'(after: {{\", \".join(sorted(set(trained)))}})'\n"
        "    message = ' '.join(f'{message} {why}'.split())  # one line, whatever the message\n"
        f"{report}\n"
    )


PRELUDE = _check_function(f"    print({REPORT!r}, message)")


class _Asserts(ast.NodeTransformer):
    """``assert test, message`` -> ``_dry_run_check(lambda: test, lambda: message)``: reported, not raised; the
    message evaluated only when the test fails, as an ``assert`` does."""

    def visit_Assert(self, node: ast.Assert) -> ast.stmt:
        def later(expression: ast.expr) -> ast.Lambda:
            nothing = ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[])
            return ast.Lambda(nothing, expression)

        arguments = [later(node.test), *([later(node.msg)] if node.msg else [])]
        return ast.copy_location(ast.Expr(ast.Call(ast.Name("_dry_run_check", ast.Load()), arguments, [])), node)


def soften(source: str) -> str:
    """A cell's code with its asserts turned into reports (unchanged if it is not plain Python: a magic)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    if not any(isinstance(node, ast.Assert) for node in ast.walk(tree)):
        return source
    return ast.unparse(ast.fix_missing_locations(_Asserts().visit(tree)))


def execute(
    nb: nbformat.NotebookNode, env: dict[str, str], timeout: int
) -> tuple[float, list[str], list[tuple[int, str]]]:
    """Run a notebook in a fresh kernel, going on after an error (as a student's Colab would not, but a check must):
    (seconds, the errors, every line printed with its cell's index). Also used by tools/gpu_check.py."""
    client = NotebookClient(
        nb, timeout=timeout, kernel_name="python3", allow_errors=True, resources={"metadata": {"path": str(NOTEBOOKS)}}
    )
    start = time.perf_counter()
    try:
        client.execute(env=env)
    except CellExecutionError as error:  # a timeout or a dead kernel: allow_errors does not cover those
        return time.perf_counter() - start, [str(error).splitlines()[0][:300]], []
    errors, lines = [], []
    for i, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                errors.append(f"cell {i}: {output['ename']}: {output['evalue']}".splitlines()[0][:300])
            elif output.get("output_type") == "stream":
                lines += [(i, line) for line in output["text"].splitlines()]
    return time.perf_counter() - start, errors, lines


def run(
    path: Path, timeout: int, keep: Path | None = None, amp_dtype: str | None = None
) -> tuple[list[str], list[str], float]:
    """Execute one complete edition in dry-run mode: (errors, checks failed where a cut forgives them, seconds)."""
    nb = nbformat.read(path, as_version=4)
    if path.stem in UP_TO_TRAINING:
        nb.cells = nb.cells[
            : 1 + max(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "SKIP_TRAINING" in c.source)
        ]
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.source = soften(cell.source)
    nb.cells.insert(0, nbformat.v4.new_code_cell(PRELUDE))  # cell 0: the cells keep their numbers from 1
    amp = {"COURSE_AMP_DTYPE": amp_dtype} if amp_dtype else {}
    seconds, errors, lines = execute(nb, {**os.environ, **ENVIRONMENT, **amp}, timeout)
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, keep / path.name)
    expected = [f"{path.stem} cell {i - 1}: {line}" for i, line in lines if REPORT in line]
    return [f"{path.stem} {error}" for error in errors], expected, seconds


def run_student(path: Path, timeout: int, amp_dtype: str | None = None) -> tuple[list[str], list[str], float]:
    """The student edition of chapter ``path`` run by the instructors' grader as a class that skips training would
    run it (``COURSE_SKIP_TRAINING=1``), in dry-run mode, every exercise not attempted: (errors, checks failed where
    a cut forgives them, seconds). An error is a cell that raised, a stop, or an exercise graded otherwise than "not
    attempted": every cell but the stubs must run as in the complete edition. In a chapter that skips all its
    training then (06-08: the shipped weights instead), a failed check is an error too, but where it sees what a
    generation or a decoding cut short left."""
    from course_utils.grade import exercises, run_notebook

    student = NOTEBOOKS / "student" / path.name
    release = nbformat.read(student, as_version=4)  # the grader takes every cell but the answers from the release
    with tempfile.TemporaryDirectory(prefix="dry-run-") as tmp:
        log = Path(tmp) / "failed-checks.txt"
        first = True
        for cell in release.cells:
            if cell.cell_type != "code" or "exercise" in cell.metadata.get("tags", []):
                continue
            cell.source = (prelude(log) + "\n" if first else "") + soften(cell.source)
            first = False
        amp = {"COURSE_AMP_DTYPE": amp_dtype} if amp_dtype else {}
        saved = dict(os.environ)
        os.environ.update({**ENVIRONMENT, "COURSE_SKIP_TRAINING": "1", **amp})  # the grader's kernel inherits it
        try:
            start = time.perf_counter()
            # The course's own edition, whose cells append to a log outside the kernel's folder: no sandbox.
            report = run_notebook(student, timeout, release={path.stem: release}, chapter=path.stem, sandbox="none")
            seconds = time.perf_counter() - start
        finally:
            os.environ.clear()
            os.environ.update(saved)
        expected = log.read_text().splitlines() if log.exists() else []
    errors = [
        *report.errors,
        *([report.stopped] if report.stopped else []),
        *([report.unreadable] if report.unreadable else []),
    ]
    errors += [f"{r.exercise}: {r.status} ({r.message[:100]})" for r in report.results if r.status != "not attempted"]
    if [r.exercise for r in report.results] != exercises(path):
        errors.append(f"graded {[r.exercise for r in report.results]}, not the chapter's exercises")
    if reads_skip_training(path):  # every training skipped: the shipped weights must meet every check but those
        # that see what a generation or a decoding cut short left (a BLEU of eight-token translations)
        generated = [line for line in expected if line.endswith(GENERATED)]
        errors += [f"with the shipped weights, {line}" for line in expected if line not in generated]
        expected = generated
    name = f"{path.stem} (student)"
    return [f"{name} {error}" for error in errors], [f"{name}: {line}" for line in expected], seconds


def prelude(log: Path) -> str:
    """``_dry_run_check`` for a run whose printed lines are not read back: it appends its report to ``log``."""
    return _check_function(f"    with open({str(log)!r}, 'a') as f:\n        print({REPORT!r}, message, file=f)")


def reads_skip_training(path: Path) -> bool:
    """Whether the chapter trains live only when training is not skipped: then its student edition, run as a class
    that skips training, leaves that training's GPU path untaken, and the complete edition runs too."""
    nb = nbformat.read(path, as_version=4)
    return any(c.cell_type == "code" and "SKIP_TRAINING" in c.source for c in nb.cells)


def _task(kind: str, target: str, timeout: int, amp_dtype: str | None) -> tuple[str, list[str], list[str], float]:
    """One unit of the dry run, in a process of its own: (what it was, errors, checks failed after a cut, s)."""
    start = time.perf_counter()
    if kind == "command":
        done = subprocess.run([sys.executable, *target.split()], cwd=ROOT, capture_output=True, text=True)
        said = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        errors = [f"{target}: exit {done.returncode}: {said[0][:300]}"] if done.returncode else []
        return target, errors, [], time.perf_counter() - start
    path = NOTEBOOKS / target
    what = f"{path.stem} ({kind}{', ' + amp_dtype if amp_dtype else ''})"
    try:
        if kind == "student":
            return what, *run_student(path, timeout, amp_dtype)
        return what, *run(path, timeout, None, amp_dtype)
    except Exception as error:  # a dead kernel or a time limit: reported with the others, not a stop of the run
        return (
            what,
            [f"{what}: {type(error).__name__}: {str(error).splitlines()[0][:300]}"],
            [],
            time.perf_counter() - start,
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("only", nargs="*", help="notebook numbers (07) or names; default: all")
    parser.add_argument(
        "--timeout",
        type=int,
        default=600,
        help="seconds a complete edition's cell, or a whole student edition, may take",
    )
    parser.add_argument(
        "--keep", type=Path, help="run the complete editions only, one after another, and write them here"
    )
    parser.add_argument("--no-benchmarks", action="store_true", help="only the notebooks")
    parser.add_argument(
        "--amp-dtype", choices=("bfloat16", "float16"), help="autocast dtype (default bfloat16; float16: a T4's path)"
    )
    parser.add_argument("--complete", action="store_true", help="the complete editions only, every one training live")
    parser.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1), help="notebooks run at a time")
    parser.add_argument(
        "--float16-too", nargs="+", default=[], metavar="NN",
        help="these chapters' complete editions once more in float16 (a T4's path), in the same pool of kernels",
    )  # fmt: skip
    args = parser.parse_args()
    chapters = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    paths = [p for p in chapters if not args.only or any(p.stem.startswith(o) for o in args.only)]
    if args.keep:
        failures = 0
        for path in paths:
            errors, expected, seconds = run(path, args.timeout, args.keep, args.amp_dtype)
            print(f"{path.stem}: {seconds:.0f} s, {len(errors)} errors, {len(expected)} checks failed after a cut")
            failures += len(errors)
        return 1 if failures else 0
    # The longest chapters first (by their CPU run's time), so that none starts last.
    times = json.loads((ROOT / "docs" / "lessons" / "run_times.json").read_text())
    paths = sorted(paths, key=lambda p: -times.get(p.stem, {}).get("whole", 0))
    tasks = []
    for p in paths:
        tasks += [("complete", p.name, args.amp_dtype)] if args.complete or reads_skip_training(p) else []
        tasks += [] if args.complete else [("student", p.name, args.amp_dtype)]
    tasks += [] if args.no_benchmarks else [("command", " ".join(command), None) for command in BENCHMARKS]
    tasks += [("complete", p.name, "float16") for p in chapters if any(p.stem.startswith(o) for o in args.float16_too)]
    if args.jobs > 1:
        os.environ["OMP_NUM_THREADS"] = "1"  # one thread a kernel: the kernels share the cores
    failures = 0
    with ProcessPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(_task, kind, target, args.timeout, amp) for kind, target, amp in tasks]
        for future in as_completed(futures):
            what, errors, expected, seconds = future.result()
            checks = f", {len(expected)} checks failed after a cut (expected)" if expected else ""
            print(f"{what}: {seconds:.0f} s, {len(errors)} errors{checks}", flush=True)
            for line in errors:
                print("   ERROR", line, flush=True)
            failures += len(errors)
    dtype = f" ({args.amp_dtype} autocast)" if args.amp_dtype else " (and float16 autocast)" if args.float16_too else ""
    print(f"GPU dry run{dtype}:", "no errors" if not failures else f"{failures} errors")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
