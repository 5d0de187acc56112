"""Run every notebook's GPU code paths on the CPU: `make gpu-dry-run`.

The course's notebooks take another branch on a GPU (chapter 07 trains SHAKESPEARE_GPT_GPU, at its real size) and
``train`` computes in bfloat16 there. A machine without a GPU never runs that code, so a typo, a shape or a tensor
left on the wrong device there would first fail in a student's Colab. With ``COURSE_GPU_DRY_RUN=1`` the CPU takes
those paths (``gpu_branch``), and ``train`` and ``estimate_loss`` stop after a few steps, each on 2 rows of its batch
(a CPU emulating bfloat16 took minutes for one step of chapter 07's full batch); this script executes each
complete-edition notebook so, one kernel each.

After 3 training steps nothing has been learned, so the notebooks' checks of trained figures fail. The script
turns each ``assert`` into a check that reports and goes on (the cells after it still run, on what the cell
computed), and counts those reports apart. Every error fails the run: that is what a GPU branch would raise.

Then the benchmarks of ``make gpu-check`` run for one timed step on the CPU: the GPT at its GPU preset, compiled with
``torch.compile`` as the GPU check compiles it, and the full model against ``nn.Transformer`` at chapter 06's sizes.
Lines that still run only on a real GPU: ``torch.cuda`` calls (``synchronize``, ``is_bf16_supported``), CUDA
kernels, and ``torch.compile``'s GPU code generation.

With ``--amp-dtype float16`` the notebooks train as on a GPU without bfloat16 (Colab's T4): float16 autocast with
a gradient scaler (``COURSE_AMP_DTYPE=float16``).

    python tools/gpu_dry_run.py                      # every notebook, then the benchmarks
    python tools/gpu_dry_run.py 07 08 --no-benchmarks
    python tools/gpu_dry_run.py 06 07 08 10 --amp-dtype float16 --no-benchmarks
"""

from __future__ import annotations

import argparse
import ast
import os
import subprocess
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
# The GPU check's benchmarks, one timed step each on the CPU: the GPT at its GPU preset, compiled as there; the full
# model at chapter 06's sizes (the same code; the paper's sizes would take minutes on a CPU).
GPT_RUN = "--device cpu --preset gpu --steps 1 --warmup 1 --compile"
TRANSFORMER_RUN = "--device cpu --preset dates --timing-steps 1 --skip-accuracy"
BENCHMARKS = [
    ["benchmarks/bench_gpt.py", *GPT_RUN.split()],
    ["benchmarks/bench_transformer.py", *TRANSFORMER_RUN.split()],
]
ENVIRONMENT = {"COURSE_GPU_DRY_RUN": "1", "COURSE_DEVICE": "cpu", "CUDA_VISIBLE_DEVICES": "", "COURSE_PROGRESS": "text"}


REPORT = "dry-run check failed:"
PRELUDE = f"""def _dry_run_check(ok, message=""):
    if not ok:
        print({REPORT!r}, message)
"""


class _Asserts(ast.NodeTransformer):
    """``assert test, message`` -> ``_dry_run_check(test, message)``: reported, not raised."""

    def visit_Assert(self, node: ast.Assert) -> ast.stmt:
        call = ast.Call(ast.Name("_dry_run_check", ast.Load()), [node.test, *([node.msg] if node.msg else [])], [])
        return ast.copy_location(ast.Expr(call), node)


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
    """Execute one notebook in dry-run mode: (errors, failed checks of trained figures, seconds)."""
    nb = nbformat.read(path, as_version=4)
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("only", nargs="*", help="notebook numbers (07) or names; default: all")
    parser.add_argument("--timeout", type=int, default=600, help="seconds a cell may take")
    parser.add_argument("--keep", type=Path, help="a folder to write the executed notebooks to, to read them")
    parser.add_argument("--no-benchmarks", action="store_true", help="only the notebooks")
    parser.add_argument(
        "--amp-dtype", choices=("bfloat16", "float16"), help="autocast dtype (default bfloat16; float16: a T4's path)"
    )
    args = parser.parse_args()
    paths = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    paths = [p for p in paths if not args.only or any(p.stem.startswith(o) for o in args.only)]
    failures = 0
    for path in paths:
        errors, expected, seconds = run(path, args.timeout, args.keep, args.amp_dtype)
        print(f"{path.stem}: {seconds:.0f} s, {len(errors)} errors, {len(expected)} trained-figure checks failed "
              "(expected after 3 steps)")  # fmt: skip
        for line in errors:
            print("   ERROR", line)
        failures += len(errors)
    for command in [] if args.no_benchmarks else BENCHMARKS:
        start = time.perf_counter()
        done = subprocess.run([sys.executable, *command], cwd=ROOT, capture_output=True, text=True)
        print(f"{' '.join(command)}: {time.perf_counter() - start:.0f} s, exit {done.returncode}")
        if done.returncode:
            print("   ERROR", (done.stderr or done.stdout).strip().splitlines()[-1][:300])
            failures += 1
    dtype = f" ({args.amp_dtype} autocast)" if args.amp_dtype else ""
    print(f"GPU dry run{dtype}:", "no errors" if not failures else f"{failures} errors")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
