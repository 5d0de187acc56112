"""Measured figures that the documentation quotes, each from one results file, rendered into the tables between
``<!-- figures:NAME -->`` and ``<!-- /figures:NAME -->`` in README.md (and any other page listed in ``PAGES``).

A figure is measured once, written to its results file by the run that measured it, and shown in one table; prose
points to the table instead of repeating its numbers. ``tests/test_figures.py`` fails when a table differs from its
results file.

    python tools/figures.py                          # rewrite every table from its results file
    python tools/figures.py --check                  # name the tables that differ from their results (exit 1)
    python tools/figures.py --summarise-ci build     # .ci/run's last step: build/ci.json from its stage logs
    python tools/figures.py --record-ci ../fresh/build/ci.json   # a clean clone's CI run becomes docs/figures/ci.json
    python tools/figures.py --measure-skip-training   # time chapters 06-08 with SKIP_TRAINING (2 minutes)

Results files: ``docs/figures/ci.json`` (the stages of the last clean-clone run of ``.ci/run``),
``docs/lessons/run_times.json`` (``make outputs``: every notebook and section on the CPU, also the lesson plans'
source), ``docs/figures/skip_training.json`` (``--measure-skip-training``: the training chapters with
``SKIP_TRAINING``) and
``benchmarks/gpu/report.json`` (the last ``make gpu-check``).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md"]
# .ci/run's stages, in order: what each runs.
STAGES = {
    "environment": "a virtual environment and PyTorch's CPU wheel (uv)",
    "make test": "ruff, basedpyright, every test but the dry_run ones, every notebook's complete edition under nbval",
    "make test-colab": "every notebook again, on Colab's library versions and other CPU kernels",
    "make site": "the website, from the committed notebooks",
    "make slides": "a deck per chapter",
    "make gpu-dry-run": "the GPU code paths on the CPU; every student edition through the grader",
}
SUMMARY = re.compile(r"^=*\s*(?P<counts>\d[^=]*?) in (?P<seconds>[\d.]+)s", re.MULTILINE)


def _block(name: str) -> re.Pattern[str]:
    return re.compile(rf"(<!-- figures:{name} -->\n)(.*?)(<!-- /figures:{name} -->)", re.DOTALL)


def ci_table(results: dict) -> str:
    """The stages of one clean-clone run of .ci/run: seconds each, what pytest counted, and the total."""
    rows = ["| stage | what it runs | seconds | pytest's count |", "| --- | --- | --- | --- |"]
    for stage in results["stages"]:
        rows.append(
            f"| `{stage['name']}` | {STAGES.get(stage['name'], '')} | {stage['seconds']:,} | {stage.get('pytest', '')} |"
        )
    rows.append(f"| **the stages together** | | **{results['total_seconds']:,}** | |")
    return "\n".join(rows) + (
        f"\n\n{results['date']}, commit {results.get('commit', 'unknown')}, a clean clone on {results['machine']} "
        "(`.ci/run`, recorded with `python tools/figures.py --record-ci`; pytest's own time excludes installing).\n"
    )


def _read(relative: str) -> dict:
    return json.loads((ROOT / relative).read_text())


def run_times_table() -> str:
    """Whole notebooks' run times: the CPU run of ``make outputs`` (docs/lessons/run_times.json, also the lesson
    plans' source), a run with SKIP_TRAINING, and the last ``make gpu-check`` (benchmarks/gpu/report.json)."""
    cpu = _read(RUN_TIMES)
    skip = _read(SKIP_TRAINING)
    gpu = _read(GPU_REPORT)
    stems = sorted(cpu)
    on_gpu = {n["notebook"]: n for n in gpu["notebooks"]}

    def cell(seconds: float | None, failed: bool = False) -> str:
        # a no-break space: a narrow column keeps "18 s" on one line
        return "" if seconds is None else f"{seconds:.0f}\u00a0s" + (", failed" if failed else "")

    rows = [
        "| notebook | " + " | ".join(stem[:2] for stem in stems) + " |",
        "| --- |" + " --- |" * len(stems),
        f"| CPU, {cpu[stems[0]]['machine'].split(',')[0].replace(' CPU', '')} | "
        + " | ".join(cell(cpu[s]["whole"]) for s in stems)
        + " |",
        "| CPU, `SKIP_TRAINING` | " + " | ".join(cell(skip["seconds"].get(s)) for s in stems) + " |",
        f"| GPU ({gpu['environment']['gpu'].removeprefix('NVIDIA ')}), {gpu.get('notebook_jobs', 1)} at a time | "
        + " | ".join(cell(on_gpu[s]["seconds"], bool(on_gpu[s]["errors"])) if s in on_gpu else "" for s in stems)
        + " |",
    ]
    env = gpu["environment"]
    return "\n".join(rows) + (
        f"\n\nCPU: `make outputs` ({RUN_TIMES}); `SKIP_TRAINING`: {skip['date']}, {skip['machine']} ({SKIP_TRAINING}); "
        f"GPU: `make gpu-check`, {env['date']}, PyTorch {env['torch'].split('+')[0]} ({GPU_REPORT}).\n"
    )


RUN_TIMES = "docs/lessons/run_times.json"
SKIP_TRAINING = "docs/figures/skip_training.json"
GPU_REPORT = "benchmarks/gpu/report.json"
# Each table: the results files it is rendered from, and how.
RENDERERS: dict[str, tuple[tuple[str, ...], Callable[[], str]]] = {
    "ci": (("docs/figures/ci.json",), lambda: ci_table(_read("docs/figures/ci.json"))),
    "run-times": ((RUN_TIMES, SKIP_TRAINING, GPU_REPORT), run_times_table),
}


def rendered(text: str) -> str:
    """``text`` with every table block rewritten from its results files."""
    for name, (sources, render) in RENDERERS.items():
        if not _block(name).search(text) or not all((ROOT / source).exists() for source in sources):
            continue
        table = render()
        text = _block(name).sub(lambda m, table=table: m.group(1) + table + m.group(3), text)
    return text


def stale() -> list[str]:
    """The pages whose tables differ from their results files, and blocks whose results file is missing."""
    problems = []
    for page in PAGES:
        text = page.read_text()
        for name, (sources, _) in RENDERERS.items():
            missing = [source for source in sources if not (ROOT / source).exists()]
            if _block(name).search(text) and missing:
                problems.append(f"{page.name}: its {name} table has no results file {', '.join(missing)}")
        if rendered(text) != text:
            problems.append(f"{page.name}: a table differs from its results file (python tools/figures.py)")
    return problems


def summarise_ci(build: Path) -> dict:
    """build/ci.json from what .ci/run left in ``build``: ci-stages.tsv (stage, seconds) and one log per stage."""
    import os
    import platform

    stages = []
    for line in (build / "ci-stages.tsv").read_text().splitlines():
        name, seconds = line.split("\t")
        stage: dict = {"name": name, "seconds": int(seconds)}
        log = build / f"ci-{name.replace(' ', '-')}.log"
        found = SUMMARY.findall(log.read_text(errors="replace")) if log.exists() else []
        if found:
            stage["pytest"] = "; ".join(f"{counts.strip()} in {float(s):.0f} s" for counts, s in found)
        stages.append(stage)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=build, capture_output=True, text=True)
    return {
        "date": time.strftime("%Y-%m-%d"),
        "commit": commit.stdout.strip() or "unknown",
        "machine": f"{os.cpu_count()} CPU cores, {platform.machine()}, no GPU",
        "stages": stages,
        "total_seconds": sum(s["seconds"] for s in stages),
    }


def measure_skip_training() -> dict:
    """docs/figures/skip_training.json's measurement: each complete edition that reads SKIP_TRAINING, top to bottom
    with COURSE_SKIP_TRAINING=1 on the CPU, in a fresh kernel, one after another, the kernel's start included."""
    import os
    import platform

    import nbformat
    from gpu_dry_run import execute, reads_skip_training  # tools/, beside this file

    env = {**os.environ, "COURSE_SKIP_TRAINING": "1", "COURSE_DEVICE": "cpu", "CUDA_VISIBLE_DEVICES": "",
           "COURSE_PROGRESS": "text", "PYTHONHASHSEED": "0"}  # fmt: skip
    seconds = {}
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        if not reads_skip_training(path):
            continue
        took, errors, _ = execute(nbformat.read(path, as_version=4), env, 600)
        if errors:
            raise SystemExit(f"{path.stem} with SKIP_TRAINING: {errors[0]}")
        seconds[path.stem] = round(took)
        print(f"{path.stem}: {seconds[path.stem]} s with SKIP_TRAINING")
    return {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{os.cpu_count()} CPU cores, {platform.machine()}",
        "what": "python tools/figures.py --measure-skip-training: each training chapter's complete edition top to "
        "bottom with COURSE_SKIP_TRAINING=1 (the shipped weights instead of training), the kernel's start included",
        "seconds": seconds,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only name the tables that differ (exit 1 if any)")
    parser.add_argument("--summarise-ci", type=Path, metavar="BUILD", help="write BUILD/ci.json from .ci/run's logs")
    parser.add_argument("--record-ci", type=Path, metavar="CI_JSON", help="make a CI run's ci.json the recorded one")
    parser.add_argument(
        "--measure-skip-training", action="store_true", help="time the training chapters' SKIP_TRAINING runs"
    )
    args = parser.parse_args()
    if args.measure_skip_training:
        (ROOT / SKIP_TRAINING).write_text(json.dumps(measure_skip_training(), indent=1) + "\n")
    if args.summarise_ci:
        (args.summarise_ci / "ci.json").write_text(json.dumps(summarise_ci(args.summarise_ci), indent=1) + "\n")
        return 0
    if args.record_ci:
        (ROOT / "docs" / "figures").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(args.record_ci, ROOT / "docs" / "figures" / "ci.json")
    if args.check:
        problems = stale()
        print("\n".join(problems) or "every table matches its results file")
        return 1 if problems else 0
    for page in PAGES:
        page.write_text(rendered(page.read_text()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
