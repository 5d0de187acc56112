"""The GPU verification: `make gpu-check` on a machine with CUDA.

Runs what only a GPU runs, times it, and writes one report, ``benchmarks/gpu/report.json`` and
``benchmarks/gpu/report.md`` (commit both; the README's GPU row and benchmarks/README.md quote them):

- ``notebooks``: every notebook's complete edition executed on the GPU, as a student's Colab runs it (07 trains
  SHAKESPEARE_GPT_GPU there), each timed, section by section against the CPU's times (docs/lessons/run_times.json),
  with the errors and the key figures it printed;
- ``notebooks-float16``: the training chapters (06, 07, 08, 10) again in float16 autocast with a gradient scaler,
  the path of a GPU without bfloat16 such as Colab's T4 (``COURSE_AMP_DTYPE=float16``);
- ``translator``: chapter 08's full recipe, MULTI30K_TRANSLATOR, trained on the GPU, then its greedy test BLEU;
- ``bench-gpt``: benchmarks/bench_gpt.py, the course's GPT against nanoGPT's model in the same loop, with an A/A
  twin (the harness's own bias), then to validation loss 1.47; ``bench-gpt-compiled``: the same with
  ``torch.compile``; ``bench-gpt-kernels``: the step times on each attention kernel alone (flash, cuDNN, efficient,
  math);
- ``bench-transformer``: benchmarks/bench_transformer.py, the full model against nn.Transformer's layers;
- ``nanogpt``: benchmarks/nanogpt_anchor.py, nanoGPT's own training on the same GPU (``--nanogpt``: a checkout of
  github.com/karpathy/nanoGPT; skipped without one), the anchor for bench-gpt's time to 1.47;
- ``profile-gpt``: benchmarks/profile_gpt.py, where a training step of the GPT and of nanoGPT's architecture spends
  its time on the GPU (the kernels that take longest, and how many each step launches).

Each part may be run alone (``--parts``); the report keeps the parts already measured. Without CUDA the script
refuses in one line. A GPU machine without a package registry gets the missing packages as wheels: ``make
gpu-wheels`` (on a machine with internet) fills ``.whl/`` and copies the course's data into ``data/``; ``make
gpu-check`` installs the wheels first.

    python tools/gpu_check.py                              # every part
    python tools/gpu_check.py --parts notebooks translator
    python tools/gpu_check.py --parts notebooks --jobs 4   # four notebooks at a time (their times then overlap)
    python tools/gpu_check.py --smoke --out /tmp/smoke     # the script itself, on the CPU, at toy sizes
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
OUT = ROOT / "benchmarks" / "gpu"
PARTS = ("notebooks", "bench-gpt", "bench-transformer", "bench-gpt-compiled", "nanogpt", "profile-gpt", "translator",
         "bench-gpt-kernels", "notebooks-float16")  # fmt: skip
SDPA_KERNELS = ("flash", "cudnn", "efficient", "math")
# Printed lines worth keeping from each notebook: losses, accuracies, BLEU, which recipe ran.
FIGURES = re.compile(r"validation loss|exact match|BLEU|this run uses|steps in|held-out", re.IGNORECASE)


def environment(device: str) -> dict[str, Any]:
    import torch

    gpu = device == "cuda"
    return {
        "gpu": torch.cuda.get_device_name(0) if gpu else "none: a smoke test on the CPU",
        "capability": ".".join(map(str, torch.cuda.get_device_capability(0))) if gpu else "-",
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "date": time.strftime("%Y-%m-%d"),
        "commit": _commit(),
    }


def _commit() -> str:
    """The commit the checked code is at (benchmarks/common.py's ``commit``: GIT_COMMIT where the tree came
    without its .git)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from common import commit

    return commit()


def _cut(line: str, width: int = 200) -> str:
    return line if len(line) <= width else line[: width - 1] + "…"


def _notebook(path: Path, timeout: int, amp_dtype: str | None = None) -> dict[str, Any]:
    import nbformat  # imported here: the preflight runs before `make gpu-check` installs the wheels
    from gpu_dry_run import execute

    sys.path.insert(0, str(ROOT / "notebooks"))
    from build import section_times

    env = {**os.environ, "COURSE_PROGRESS": "text"}
    for name in ("COURSE_DEVICE", "COURSE_SKIP_TRAINING", "COURSE_GPU_DRY_RUN", "CUDA_VISIBLE_DEVICES"):
        env.pop(name, None)  # the GPU, training included, as in Colab
    if amp_dtype:
        env["COURSE_AMP_DTYPE"] = amp_dtype
    nb = nbformat.read(path, as_version=4)
    seconds, errors, lines = execute(nb, env, timeout)
    figures = [_cut(line.strip()) for _, line in lines if FIGURES.search(line)]
    print(f"{path.stem}: {seconds:.0f} s, {len(errors)} errors", flush=True)
    for error in errors:
        print(f"   ERROR {error}", flush=True)
    sections = [[name, round(cells, 1)] for name, cells in section_times(nb)]
    return {"notebook": path.stem, "seconds": round(seconds, 1), "errors": errors, "figures": figures,
            "sections": sections}  # fmt: skip


def notebooks(
    timeout: int, only: tuple[str, ...] = (), jobs: int = 1, amp_dtype: str | None = None
) -> list[dict[str, Any]]:
    """The complete editions (those whose names start with one of ``only``; default: every one) executed on the GPU,
    ``jobs`` at a time (one kernel each), in chapter order."""
    from concurrent.futures import ProcessPoolExecutor

    paths = sorted(p for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb") if not only or p.stem.startswith(only))
    if jobs <= 1:
        return [_notebook(path, timeout, amp_dtype) for path in paths]
    # The longest first, so the slowest chapters do not start last (07 trains the GPU recipe; 08-10 train too).
    order = sorted(paths, key=lambda p: p.stem[:2] not in ("07", "09", "08", "10"))
    with ProcessPoolExecutor(jobs) as pool:
        done = dict(zip(order, pool.map(_notebook, order, [timeout] * len(order), [amp_dtype] * len(order))))
    return [done[path] for path in paths]


def _slower_sections(report: dict[str, Any]) -> list[str]:
    """Rows for each section that took longer on the GPU than in the CPU run of docs/lessons/run_times.json."""
    cpu_path = ROOT / "docs" / "lessons" / "run_times.json"
    cpu = json.loads(cpu_path.read_text()) if cpu_path.exists() else {}
    rows = []
    for r in report.get("notebooks", []):
        on_cpu = dict(cpu.get(r["notebook"], {}).get("sections", []))
        for name, gpu_seconds in r.get("sections", []):
            if name in on_cpu and gpu_seconds > on_cpu[name] + 0.5:
                rows.append(f"| {r['notebook']} | {name} | {on_cpu[name]} | {gpu_seconds} |")
    return rows


def translator(device: str, smoke: bool) -> dict[str, Any]:
    import torch

    from course_utils import (
        MULTI30K_QUICK,
        MULTI30K_TRANSLATOR,
        BPETokenizer,
        bleu,
        load_multi30k,
        load_pretrained,
        train_translator,
        translate,
    )

    tokenizer = BPETokenizer.from_dict(load_pretrained("multi30k_translator").tokenizer)  # the shipped vocabulary
    train_pairs, val_pairs, test_pairs = (load_multi30k(split) for split in ("train", "val", "test"))
    recipe, name = (MULTI30K_QUICK, "MULTI30K_QUICK") if smoke else (MULTI30K_TRANSLATOR, "MULTI30K_TRANSLATOR")
    steps = 5 if smoke else recipe.training.steps
    test_pairs = test_pairs[:50] if smoke else test_pairs
    model, history = train_translator(recipe, tokenizer, train_pairs, val_pairs[:300], steps=steps, device=device)
    start = time.perf_counter()
    greedy = translate(model, tokenizer, [de for de, _ in test_pairs])
    if device == "cuda":
        torch.cuda.synchronize()
    score, signature = bleu(greedy, [en for _, en in test_pairs])
    return {
        "recipe": name,
        "steps": steps,
        "train_seconds": round(history.seconds, 1),
        "test_bleu_greedy": round(score, 2),
        "decode_seconds": round(time.perf_counter() - start, 1),
        "signature": signature,
    }


def benchmark(device: str, script: str, *args: str) -> dict[str, Any]:
    """Run a benchmark script; its newest JSON result."""
    results = ROOT / "benchmarks" / "results"
    before = set(results.glob("*.json")) if results.exists() else set()
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), "--device", device, *args], check=True)
    new = sorted(set(results.glob("*.json")) - before)
    return json.loads(new[-1].read_text()) if new else {}


def markdown(report: dict[str, Any]) -> str:
    env = report.get("environment", {})
    lines = [
        "# GPU check",
        "",
        f"{env.get('gpu', '?')} (compute capability {env.get('capability', '?')}), "
        + (f"{env['cpus']} CPUs, " if env.get("cpus") else "")
        + f"PyTorch {env.get('torch', '?')}, CUDA {env.get('cuda', '?')}, Python {env.get('python', '?')}, "
        f"{env.get('date', '?')}. Written by "
        "`make gpu-check` (tools/gpu_check.py); every figure below was measured by that run.",
        "",
    ]
    if "notebooks" in report:
        jobs = report.get("notebook_jobs", 1)
        lines += [
            "## Notebooks on the GPU",
            "",
            "Each complete edition executed top to bottom in its own kernel, on the GPU, training included"
            + (
                f", {jobs} notebooks at a time (so each one's seconds include sharing the GPU and CPUs)."
                if jobs > 1
                else ", one after another."
            ),
            "",
            "| notebook | seconds | errors | figures printed |",
            "| --- | --- | --- | --- |",
        ]
        for r in report["notebooks"]:
            figures = r["figures"] if len(r["figures"]) <= 7 else [*r["figures"][:4], "…", *r["figures"][-2:]]
            shown = "<br>".join(figures).replace("|", "\\|")  # the first and the last: a training's best comes last
            lines.append(f"| {r['notebook']} | {r['seconds']} | {len(r['errors'])} | {shown} |")
        lines.append("")
        errors = [(r["notebook"], e) for r in report["notebooks"] for e in r["errors"]]
        if errors:
            lines += ["Errors:", "", *(f"- {name}, {error}" for name, error in errors), ""]
        slower = _slower_sections(report)
        if slower:
            lines += [
                "Sections that took longer on the GPU than on the CPU (seconds of their cells; the CPU's from "
                "docs/lessons/run_times.json). Chapter 07 trains a model 18 times larger on a GPU (SHAKESPEARE_GPT_GPU), "
                "so its training sections are not the same work"
                + (", and notebooks ran several at a time here, sharing the GPU and the CPUs:" if jobs > 1 else ":"),
                "",
                "| notebook | section | CPU | GPU |",
                "| --- | --- | --- | --- |",
                *slower,
                "",
            ]
    if "notebooks-float16" in report:
        lines += [
            "## The training chapters in float16 (the path of a GPU without bfloat16, such as a T4)",
            "",
            "`COURSE_AMP_DTYPE=float16`: float16 autocast with a gradient scaler, on this GPU.",
            "",
            "| notebook | seconds | errors | figures printed |",
            "| --- | --- | --- | --- |",
        ]
        for r in report["notebooks-float16"]:
            figures = r["figures"] if len(r["figures"]) <= 7 else [*r["figures"][:4], "…", *r["figures"][-2:]]
            lines.append(f"| {r['notebook']} | {r['seconds']} | {len(r['errors'])} | {'<br>'.join(figures)} |")
        lines += ["", *(f"- {r['notebook']}, {e}" for r in report["notebooks-float16"] for e in r["errors"]), ""]
    for kernel, r in report.get("bench-gpt-kernels", {}).items():
        if "error" in r:
            lines += [f"Attention on `{kernel}` only: failed: {r['error']}", ""]
            continue
        ms = r.get("ms_per_step", {})
        lines += [f"Attention on `{kernel}` only: " + ", ".join(f"{k} {v} ms" for k, v in ms.items())
                  + f"; ratio {r.get('ratio')}, A/A {r.get('aa_ratio')}.", ""]  # fmt: skip
    if "translator" in report:
        t = report["translator"]
        lines += [
            "## Chapter 08's full recipe",
            "",
            f"{t['recipe']}: {t['steps']} steps in {t['train_seconds']} s; test BLEU (greedy) {t['test_bleu_greedy']} "
            f"(`{t['signature']}`), decoded in {t['decode_seconds']} s.",
            "",
        ]
    lines += _gpt_summary(report)
    for note in report.get("notes", []):
        lines += [f"Note: {note}", ""]
    for kind, r in report.get("profile-gpt", {}).get("models", {}).items():
        lines += [
            f"## Profile of a training step: {kind}",
            "",
            f"{r['aten_ops_per_step']:.0f} PyTorch operators and {r['kernels_per_step']:.0f} GPU kernels a step.",
            "",
            "```",
            r["table"],
            "```",
            "",
        ]
    for part in ("bench-gpt", "bench-transformer", "nanogpt"):  # bench-gpt holds eager and, when run, compiled
        if part in report:
            lines += [f"## {part}", "", "```json", json.dumps(report[part], indent=1)[:4000], "```", ""]
    return "\n".join(lines)


def _gpt_summary(report: dict[str, Any]) -> list[str]:
    """The GPT's step times and time to the target loss, beside nanoGPT's own run, as one table."""
    rows = []
    for mode, r in report.get("bench-gpt", {}).items():
        ms, reached = r.get("ms_per_step", {}), (r.get("to_loss") or {}).get("reached")
        ours, ref = ms.get("course_utils.GPT"), ms.get("nanoGPT architecture")
        best = min((r.get("to_loss") or {}).get("evals", []), key=lambda e: e["val_loss"], default=None)
        seen = f" (best {best['val_loss']} at step {best['step']})" if best else ""
        to_loss = f"{reached['val_loss']} at step {reached['step']}, {reached['seconds']} s" if reached else ""
        to_loss = to_loss or "not reached" + seen
        rows.append(f"| course_utils.GPT, {mode} | {ours} | {ref} | {r.get('ratio')} | {to_loss} |")
    if "nanogpt" in report:
        n = report["nanogpt"]
        best = min(n.get("evals", []), key=lambda e: e["val_loss"], default=None)
        seen = f"best {best['val_loss']} at step {best['step']}" if best else "-"
        reached = (n.get("to_loss") or {}).get("reached")
        to_loss = f"{reached['val_loss']} at step {reached['step']}" if reached else f"not reached ({seen})"
        rows.append(f"| nanoGPT's own train.py, compiled | - | {n.get('median_ms_per_iter')} | - | {to_loss} |")
    if not rows:
        return []
    target = next((r["to_loss"]["target"] for r in report.get("bench-gpt", {}).values() if r.get("to_loss")), "-")
    return [
        "## The GPT against nanoGPT",
        "",
        "Milliseconds per training step (median, the two models in alternation), and the validation loss "
        f"{target} (seconds of training, evaluations excluded).",
        "",
        "| run | the course's GPT, ms/step | nanoGPT's model, ms/step | ratio | to the target loss |",
        "| --- | --- | --- | --- | --- |",
        *rows,
        "",
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    parser.add_argument("--timeout", type=int, default=1800, help="seconds a notebook cell may take")
    parser.add_argument("--jobs", type=int, default=1, help="notebooks executed at a time")
    parser.add_argument("--nanogpt", type=Path, default=ROOT / ".nanogpt", help="a checkout of karpathy/nanoGPT")
    parser.add_argument("--out", type=Path, default=OUT, help="where report.json and report.md go")
    parser.add_argument("--preflight", action="store_true", help="only check that this machine has CUDA")
    parser.add_argument(
        "--smoke", action="store_true",
        help="test this script on the CPU at toy sizes (one notebook, a few steps); its figures mean nothing",
    )  # fmt: skip
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        print(f"make gpu-check needs PyTorch with CUDA, and {sys.executable} has no torch: set PYTHON to one that has")
        return 2
    if not torch.cuda.is_available() and not args.smoke:
        print(
            "make gpu-check needs a CUDA GPU, and torch.cuda.is_available() is False here: run it on a machine with one"
        )
        return 2
    if args.preflight:
        return 0
    path = args.out / "report.json"
    report = json.loads(path.read_text()) if path.exists() else {}
    device = "cpu" if args.smoke else "cuda"
    report["environment"] = environment(device)
    gpt_args = (
        ("--preset", "cpu", "--steps", "2", "--warmup", "1", "--aa")
        if args.smoke
        else ("--preset", "gpu", "--to-loss", "1.47", "--aa")
    )
    for part in args.parts:
        print(f"--- {part}", flush=True)
        if part == "notebooks":
            report[part] = notebooks(args.timeout, only=("01", "02") if args.smoke else (), jobs=args.jobs)
            report["notebook_jobs"] = args.jobs
        elif part == "notebooks-float16":  # the path of a GPU without bfloat16 (a T4), on this GPU
            training = ("02",) if args.smoke else ("06", "07", "08", "10")
            report[part] = notebooks(args.timeout, only=training, jobs=args.jobs, amp_dtype="float16")
        elif part == "bench-gpt-kernels":
            steps = ("--preset", "cpu", "--steps", "2", "--warmup", "1") if args.smoke else ("--steps", "50")
            kernels = ("math",) if args.smoke else SDPA_KERNELS
            report[part] = {}
            for kernel in kernels:  # one that this GPU or these shapes cannot run is recorded, and the next tried
                try:
                    report[part][kernel] = benchmark(device, "bench_gpt.py", *steps, "--aa", "--sdpa-backend", kernel)
                except subprocess.CalledProcessError as error:
                    report[part][kernel] = {"error": _cut(str(error.stderr or error.stdout or error).strip()[-300:])}
        elif part == "translator":
            report[part] = translator(device, args.smoke)
        elif part == "bench-gpt":
            report[part] = {**report.get(part, {}), "eager": benchmark(device, "bench_gpt.py", *gpt_args)}
        elif part == "bench-gpt-compiled":  # compiling takes minutes on a CPU: the smoke test skips it
            if not args.smoke:
                compiled = benchmark(device, "bench_gpt.py", *gpt_args, "--compile")
                report["bench-gpt"] = {**report.get("bench-gpt", {}), "compiled": compiled}
        elif part == "nanogpt":
            if not (args.nanogpt / "train.py").exists():
                print(f"no nanoGPT checkout at {args.nanogpt}: skipped")
                continue
            tiny = ("--max-iters", "20", "--compile=False", "--eval_interval=10", "--eval_iters=2",
                    "--batch_size=2", "--n_layer=1", "--dtype=float32")  # fmt: skip
            report[part] = benchmark(device, "nanogpt_anchor.py", str(args.nanogpt), *(tiny if args.smoke else ()))
        elif part == "profile-gpt":
            report[part] = benchmark(
                device, "profile_gpt.py", *(("--preset", "cpu", "--steps", "1") if args.smoke else ())
            )
        elif part == "bench-transformer":
            sizes = (
                ("--preset", "dates", "--timing-steps", "2")
                if args.smoke
                else ("--preset", "base", "--timing-steps", "50")
            )
            report[part] = benchmark(device, "bench_transformer.py", *sizes, "--skip-accuracy")
        args.out.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(report, indent=1))  # after each part: a later failure keeps what was measured
        (args.out / "report.md").write_text(markdown(report))
    errors = sum(len(r["errors"]) for part in ("notebooks", "notebooks-float16") for r in report.get(part, []))
    print(f"report written to {path} and report.md; notebook errors: {errors}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
