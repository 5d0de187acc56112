"""Measured figures that the documentation quotes, each from one results file, rendered into the tables between
``<!-- figures:NAME -->`` and ``<!-- /figures:NAME -->`` in README.md and benchmarks/README.md (``PAGES``).

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
``benchmarks/gpu/report.json`` (the last ``make gpu-check``), for README.md; ``benchmarks/measured/*.json`` (each
written by a benchmark script's ``--record NAME``; the command is in the file) and the GPU report again, for
benchmarks/README.md.
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
PAGES = [ROOT / "README.md", ROOT / "benchmarks" / "README.md"]
# .ci/run's stages, in order: what each runs (make test-colab's for the runs that had it).
STAGES = {
    "environment": "a virtual environment and PyTorch's CPU wheel (uv)",
    "make test": "ruff, basedpyright, every test but the dry_run ones, every notebook's complete edition under nbval "
    "on other CPU kernels",
    "make test-colab": "every notebook again, on Colab's library versions and other CPU kernels",
    "make site": "the website, from the committed notebooks",
    "make slides": "a deck per chapter",
    "make gpu-dry-run": "on Colab's library versions: the GPU code paths on the CPU, every student edition through "
    "the grader",
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

    # the machine and PyTorch's CPU kernels of each notebook's run: the most common pair is the row's, any other is
    # marked in its cell and named below the table
    runs = {s: (cpu[s]["machine"], cpu[s].get("kernels") or "unknown") for s in stems}
    usual = max(set(runs.values()), key=list(runs.values()).count)
    others = sorted({run for run in runs.values() if run != usual})
    marks = {run: "†‡§¶"[i] if i < 4 else f"({i + 1})" for i, run in enumerate(others)}

    def cpu_cell(stem: str) -> str:
        return cell(cpu[stem]["whole"]) + marks.get(runs[stem], "")

    def named(run: tuple[str, str]) -> str:
        return f"{run[0].removesuffix(', PyTorch on the CPU')}, {run[1]} kernels"

    rows = [
        "| notebook | " + " | ".join(stem[:2] for stem in stems) + " |",
        "| --- |" + " --- |" * len(stems),
        f"| CPU, {usual[0].split(',')[0].replace(' CPU', '')} | " + " | ".join(cpu_cell(s) for s in stems) + " |",
        "| CPU, `SKIP_TRAINING` | " + " | ".join(cell(skip["seconds"].get(s)) for s in stems) + " |",
        f"| GPU ({gpu['environment']['gpu'].removeprefix('NVIDIA ')}), {gpu.get('notebook_jobs', 1)} at a time | "
        + " | ".join(cell(on_gpu[s]["seconds"], bool(on_gpu[s]["errors"])) if s in on_gpu else "" for s in stems)
        + " |",
    ]
    env = gpu["environment"]
    return "\n".join(rows) + (
        f"\n\nCPU: `make outputs`, {named(usual)}"
        + "".join(f"; {marks[run]} {named(run)}" for run in others)
        + f" ({RUN_TIMES}); `SKIP_TRAINING`: {skip['date']}, {skip['machine']} ({SKIP_TRAINING}); "
        f"GPU: `make gpu-check`, {env['date']}, PyTorch {env['torch'].split('+')[0]} ({GPU_REPORT}).\n"
    )


RUN_TIMES = "docs/lessons/run_times.json"
SKIP_TRAINING = "docs/figures/skip_training.json"
GPU_REPORT = "benchmarks/gpu/report.json"
# The benchmarks' results files, written by the scripts' --record NAME (benchmarks/measured/NAME.json).
TRANSFORMER_CPU = ("benchmarks/measured/transformer-dates-cpu.json", "benchmarks/measured/transformer-base-cpu.json")
GPT_CPU = ("benchmarks/measured/gpt-cpu.json", "benchmarks/measured/gpt-cpu-4-layers.json")
OPERATORS = "benchmarks/measured/operators-gpt.json"
RECIPE_TRIALS = "benchmarks/measured/gpt-cpu-recipe-trials.json"


def _ms(value: float) -> str:
    return f"{value:,.1f}" if value < 1000 else f"{value:,.0f}"


def _sources(rows: list[tuple[str, dict]]) -> str:
    """One line for each run the rows come from: where and when it was measured, by which command, and its results
    file."""
    lines: dict[str, None] = {}
    for source, r in rows:
        when = r.get("date") or r.get("environment", {}).get("date", "")
        command = f"`{r['command']}`" if r.get("command") else "`make gpu-check`"
        commit = f", commit {r['commit']}" if r.get("commit") else ""
        processor = r.get("processor") or r.get("machine", "")
        lines[f"- {processor}, PyTorch {r['torch'].split('+')[0]}, {when}{commit}: {command} ({source})"] = None
    return "\n".join(lines) + "\n"


def _gpu_run(result: dict, report: dict) -> dict:
    """A benchmark's result in the GPU report, with the run's date and commit."""
    env = report["environment"]
    return {**result, "date": env["date"], "commit": env.get("commit")}


def transformer_table() -> str:
    """bench_transformer.py: the course's Transformer against nn.Transformer's layers, on the CPU and the GPU."""
    rows = [(source, _read(source)) for source in TRANSFORMER_CPU]
    gpu = _read(GPU_REPORT)
    if "bench-transformer" in gpu:
        rows.append((GPU_REPORT, _gpu_run(gpu["bench-transformer"], gpu)))
    out = [
        "| processor | preset | parameters | ours, ms/step | readable | PyTorch's layers | ratio (readable) "
        "| to 99% held-out: ours | PyTorch's |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]

    def reached(outcome: dict | None) -> str:
        if outcome is None:
            return "(speed only)"
        if outcome["steps_to_target"] is None:
            return f"not reached (final {outcome['final_accuracy']:.1%})"
        return (f"{outcome['steps_to_target']} steps, {outcome['seconds_to_target']:.1f} s "
                f"(final {outcome['final_accuracy']:.1%})")  # fmt: skip

    for _, r in rows:
        ms, ratio, accuracy = r["step_ms"], r["ratio"], r.get("to_accuracy") or {}
        params = (
            f"{r['parameters'] / 1e6:.1f} M"
            if r.get("parameters", 0) >= 1e6
            else f"{r.get('parameters', 0) / 1e3:.0f} k"
        )
        out.append(
            f"| {r['machine'] if r['device'].startswith('cuda') else 'CPU'} | `{r['preset']}` "
            f"| {params if r.get('parameters') else ''} | {_ms(ms['course_utils'])} | {_ms(ms['course_utils, readable'])} "
            f"| {_ms(ms['nn.Transformer'])} | **{ratio['course_utils']:.2f}** ({ratio['course_utils, readable']:.2f}) "
            f"| {reached(accuracy.get('course_utils')) if accuracy else '(speed only)'} "
            f"| {reached(accuracy.get('nn.Transformer')) if accuracy else ''} |"
        )
    return "\n".join(out) + "\n\n" + _sources(rows)


def gpt_table() -> str:
    """bench_gpt.py: the course's GPT against nanoGPT's architecture, and nanoGPT's own training, CPU and GPU."""
    rows = [(source, _read(source)) for source in GPT_CPU]
    gpu = _read(GPU_REPORT)
    for mode in ("eager", "compiled"):
        if mode in gpu.get("bench-gpt", {}):
            rows.append((GPU_REPORT, _gpu_run(gpu["bench-gpt"][mode], gpu)))
    out = [
        "| processor | preset, layers | ours, ms/step | nanoGPT architecture | ratio | A/A twin | validation loss |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for _, r in rows:
        ms = r["ms_per_step"]
        goal = r.get("to_loss")
        if goal and goal.get("reached"):
            loss = (f"{goal['reached']['val_loss']:.3f} (≤ {goal['target']}) at step {goal['reached']['step']:,}, "
                    f"after {goal['reached']['seconds']:.1f} s of training")  # fmt: skip
        elif goal:
            best = min(goal["evals"], key=lambda e: e["val_loss"])
            loss = (f"{goal['target']} not reached; best {best['val_loss']:.3f} at step {best['step']:,} "
                    f"({best['seconds']:.1f} s)")  # fmt: skip
        else:
            loss = ""
        layers = f", {r['n_layers']} layers" if "n_layers" in r else ""
        where = r["machine"] if r["device"].startswith("cuda") else "CPU"
        aa = "" if r.get("aa_ratio") is None else f"{r['aa_ratio']:.3f}"
        out.append(
            f"| {where} | `{r['preset']}`{layers}{', compiled' if r.get('compile') else ''} "
            f"| {_ms(ms['course_utils.GPT'])} ({r['tokens_per_second']:,} tokens/s) | {_ms(ms['nanoGPT architecture'])} "
            f"| **{r['ratio']:.3f}** | {aa} | {loss} |"
        )
    nanogpt = gpu.get("nanogpt")
    if nanogpt:
        best = min(nanogpt["evals"], key=lambda e: e["val_loss"])
        out.append(
            f"| {gpu['environment']['gpu']} | nanoGPT's own `train.py` (its commit {nanogpt['nanogpt_commit'][:7]}), compiled | | {_ms(nanogpt['median_ms_per_iter'])} "
            f"({nanogpt['tokens_per_second']:,} tokens/s) | | | best {best['val_loss']:.3f} at step {best['step']:,} "
            f"of {nanogpt['max_iters']:,} |"
        )
        rows.append((GPU_REPORT, {**_gpu_run(nanogpt, gpu), "machine": gpu["environment"]["gpu"],
                                  "torch": gpu["environment"]["torch"], "command": "make gpu-check PARTS=nanogpt"}))  # fmt: skip
    return "\n".join(out) + "\n\n" + _sources(rows)


def operators_table() -> str:
    """profile_gpt.py --count-only: the operators one training step runs, the course's GPT against nanoGPT's."""
    r = _read(OPERATORS)
    out = [
        "| | the course's GPT | nanoGPT's architecture | ratio | matrix products |",
        "| --- | --- | --- | --- | --- |",
    ]
    described = {
        "compiled graphs, bfloat16": "`torch.compile`'s graphs (forward and backward, before fusion), bfloat16"
    }
    for precision, models in r["operators_per_step"].items():
        ours, theirs = models["course_utils.GPT"], models["nanoGPT architecture"]
        out.append(
            f"| {described.get(precision, precision)} | {ours['operators']} | {theirs['operators']} | {ours['operators'] / theirs['operators']:.3f} "
            f"| {ours['matrix_products']} and {theirs['matrix_products']} |"
        )
    return "\n".join(out) + "\n\n" + _sources([(OPERATORS, r)])


def recipe_trials_table() -> str:
    """The runs that chose notebook 07's CPU recipe (benchmarks/measured/gpt-cpu-recipe-trials.json)."""
    r = _read(RECIPE_TRIALS)
    out = [
        "| layers | steps | peak lr | warm-up | validation loss | seconds |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for t in r["trials"]:
        cells = [t["layers"], f"{t['steps']:,}", t["lr"], t["warmup"], f"{t['val_loss']:.3f}",
                 "(busy machine)" if t["seconds"] is None else t["seconds"]]  # fmt: skip
        line = " | ".join(str(c) for c in cells)
        out.append(f"| **{line.replace(' | ', '** | **')}** |" if t.get("chosen") else f"| {line} |")
    return "\n".join(out) + f"\n\n{r['what']} ({RECIPE_TRIALS})\n"


# Each table: the results files it is rendered from, and how.
RENDERERS: dict[str, tuple[tuple[str, ...], Callable[[], str]]] = {
    "ci": (("docs/figures/ci.json",), lambda: ci_table(_read("docs/figures/ci.json"))),
    "run-times": ((RUN_TIMES, SKIP_TRAINING, GPU_REPORT), run_times_table),
    "bench-transformer": ((*TRANSFORMER_CPU, GPU_REPORT), transformer_table),
    "bench-gpt": ((*GPT_CPU, GPU_REPORT), gpt_table),
    "operators": ((OPERATORS,), operators_table),
    "recipe-trials": ((RECIPE_TRIALS,), recipe_trials_table),
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
