"""nanoGPT's own character-level Shakespeare training, timed on this machine: the anchor that bench_gpt.py's time to
validation loss 1.47 is compared with (benchmarks/README.md).

It runs a checkout of https://github.com/karpathy/nanoGPT (measured at commit 3adf61e1) as published: its
``data/shakespeare_char/prepare.py`` on the course's copy of Tiny Shakespeare (the same file it downloads), then
``train.py config/train_shakespeare_char.py`` (6 layers, 6 heads, 384 dimensions, context 256, batch 64, compiled,
bfloat16), stopped after ``--max-iters`` (its learning-rate schedule still decays over 5,000). nanoGPT prints the
time of every tenth iteration and the validation loss every 250; this script stamps each line with the seconds since
the start and writes what it read to benchmarks/results/ as JSON.

    python benchmarks/nanogpt_anchor.py /path/to/nanoGPT --to-loss 1.47
    python benchmarks/nanogpt_anchor.py /path/to/nanoGPT --max-iters 60 --device cpu --compile=False \
        --eval_interval=20 --eval_iters=2 --batch_size=4 --n_layer=1      # the script itself, on a CPU
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import save

EVAL = re.compile(r"^step (\d+): train loss ([\d.]+), val loss ([\d.]+)")
ITER = re.compile(r"^iter (\d+): loss ([\d.]+), time ([\d.]+)ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("nanogpt", type=Path, help="a checkout of karpathy/nanoGPT")
    parser.add_argument("--text", type=Path, default=None, help="Tiny Shakespeare (default: the course's copy)")
    parser.add_argument("--max-iters", type=int, default=2000)
    parser.add_argument("--to-loss", type=float, default=1.47)
    parser.add_argument("--device", default="cuda", help="train.py's device (cuda; cpu to test this script)")
    args, train_args = parser.parse_known_args()  # the rest, --key=value, go to train.py (a test: --device=cpu)

    data = args.nanogpt / "data" / "shakespeare_char"
    if args.text is None:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
        from course_utils import load_tiny_shakespeare

        load_tiny_shakespeare()  # fetched (or found in data/) with its checksum checked
        args.text = Path(__file__).resolve().parent.parent / "data" / "tinyshakespeare.txt"
    shutil.copyfile(args.text, data / "input.txt")
    subprocess.run([sys.executable, "prepare.py"], cwd=data, check=True, capture_output=True)

    command = [sys.executable, "train.py", "config/train_shakespeare_char.py", f"--max_iters={args.max_iters}",
               f"--device={args.device}", *train_args]  # fmt: skip
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=args.nanogpt, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    evals, iters, reached = [], [], None
    assert process.stdout is not None
    for line in process.stdout:
        now = time.perf_counter() - start
        print(f"{now:7.1f} s  {line}", end="", flush=True)
        if m := EVAL.match(line):
            step, val = int(m[1]), float(m[3])
            evals.append({"step": step, "val_loss": val, "seconds_since_start": round(now, 1)})
            if reached is None and val <= args.to_loss:
                reached = evals[-1]
        elif m := ITER.match(line):
            iters.append((int(m[1]), float(m[3])))
    if process.wait():
        raise SystemExit(f"nanoGPT's train.py exited with {process.returncode}")
    commit = ""
    if (args.nanogpt / ".git").exists():
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=args.nanogpt, capture_output=True, text=True).stdout
    elif (args.nanogpt / "COMMIT").exists():  # an exported tree, with its commit written beside it
        commit = (args.nanogpt / "COMMIT").read_text()
    # Iteration 0 holds compilation; the first few after it warm up.
    ms = statistics.median([t for i, t in iters if i >= 50] or [t for _, t in iters[1:]] or [float("nan")])
    result = {
        "nanogpt_commit": commit.strip() or "unknown",
        "max_iters": args.max_iters,
        "median_ms_per_iter": round(ms, 2),
        "tokens_per_second": round(64 * 256 / (ms / 1000)),
        "first_iter_ms": iters[0][1] if iters else None,
        "evals": evals,
        "to_loss": {"target": args.to_loss, "reached": reached},
    }
    if reached:
        result["to_loss"]["training_seconds_estimate"] = round(reached["step"] * ms / 1000, 1)
    print(
        f"nanoGPT: median {ms:.2f} ms per iteration ({result['tokens_per_second']:,} tokens/s); "
        + (
            f"validation loss {reached['val_loss']} <= {args.to_loss} at step {reached['step']}, "
            f"{reached['seconds_since_start']} s after the start (compilation and evaluations included)"
            if reached
            else f"validation loss {args.to_loss} not reached in {args.max_iters} iterations"
        )
    )
    save(result, "nanogpt-anchor")


if __name__ == "__main__":
    main()
