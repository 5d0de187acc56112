"""Training throughput of chapter 07's GPT on Tiny Shakespeare: milliseconds per step and tokens per second,
and optionally the time to a validation loss.

Presets are nanoGPT's shakespeare_char configurations, the same models notebook 07 trains:
``cpu`` (4 layers, 4 heads, 128 dims, context 64, batch 12) and ``gpu`` (6 layers, 6 heads, 384 dims,
context 256, batch 64, dropout 0.2; 10.65 M parameters). Training runs as in the notebook: fused attention
and LayerNorm kernels, bf16 autocast on GPUs that support it, fused AdamW where PyTorch has it.

    python benchmarks/bench_gpt.py                                  # preset by device, step times only
    python benchmarks/bench_gpt.py --preset cpu --to-loss 1.89 --max-steps 2000
    python benchmarks/bench_gpt.py --preset gpu --to-loss 1.47 --compile

Results are printed and written as JSON to benchmarks/results/ (not committed); README.md records them.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import torch

from course_utils import (
    GPT,
    CharTokenizer,
    TrainConfig,
    count_parameters,
    estimate_loss,
    get_device,
    load_tiny_shakespeare,
    lr_factor,
    make_optimizer,
    random_windows,
    set_seed,
    split_ids,
    train_step,
)

PRESETS = {
    "cpu": {"block_size": 64, "d_model": 128, "n_heads": 4, "n_layers": 4, "dropout": 0.0, "batch_size": 12, "steps": 2000},
    "gpu": {"block_size": 256, "d_model": 384, "n_heads": 6, "n_layers": 6, "dropout": 0.2, "batch_size": 64, "steps": 5000},
}  # fmt: skip


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def lm_loss(model, x, y):
    return model(x, y)[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default=None, help="cpu or cuda (default: get_device())")
    parser.add_argument("--preset", choices=PRESETS, default=None, help="default: gpu on CUDA, else cpu")
    parser.add_argument("--steps", type=int, default=100, help="timed steps (after --warmup)")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--compile", action="store_true", help="torch.compile the model first")
    parser.add_argument("--to-loss", type=float, default=None, help="also train until validation loss <= this")
    parser.add_argument("--max-steps", type=int, default=None, help="give up after this many steps (default: preset)")
    parser.add_argument("--eval-every", type=int, default=250)
    args = parser.parse_args()

    device = torch.device(args.device) if args.device else get_device()
    preset = dict(PRESETS[args.preset or ("gpu" if device.type == "cuda" else "cpu")])
    default_steps = preset.pop("steps")
    max_steps = args.max_steps or default_steps
    batch_size = preset.pop("batch_size")
    text = load_tiny_shakespeare()
    tokenizer = CharTokenizer(text, specials=False)
    train_ids, val_ids = split_ids(text, tokenizer)
    config = TrainConfig(
        steps=max_steps, batch_size=batch_size, lr=1e-3, warmup_steps=100, schedule="cosine",
        weight_decay=0.1, betas=(0.9, 0.99), grad_clip=1.0,
    )  # fmt: skip

    set_seed(0)
    model = GPT(tokenizer.vocab_size, preset["block_size"], preset["d_model"], preset["n_heads"], preset["n_layers"],
                dropout=preset["dropout"], bias=False).to(device)  # fmt: skip
    n_params = count_parameters(model) - model.position_embed.weight.numel()
    optimizer = make_optimizer(model, config)
    runner = torch.compile(model) if args.compile else model
    windows = random_windows(train_ids, preset["block_size"], batch_size, seed=0)
    tokens = batch_size * preset["block_size"]

    def step(i: int) -> None:
        for group in optimizer.param_groups:
            group["lr"] = config.lr * lr_factor(i, config)
        x, y = (t.to(device, non_blocking=True) for t in next(windows))
        train_step(runner, optimizer, lm_loss, (x, y), config)

    start = time.perf_counter()
    for i in range(args.warmup):  # includes compilation, if any
        step(i)
    sync(device)
    warmup_seconds = time.perf_counter() - start
    times = []
    for i in range(args.warmup, args.warmup + args.steps):
        t = time.perf_counter()
        step(i)
        sync(device)
        times.append(time.perf_counter() - t)
    ms = 1000 * statistics.median(times)
    result = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu",
        "threads": torch.get_num_threads(), "torch": torch.__version__, "preset": args.preset or device.type,
        "parameters_without_positions": n_params, "batch": [batch_size, preset["block_size"]],
        "compile": args.compile, "warmup_seconds": round(warmup_seconds, 2),
        "ms_per_step": round(ms, 2), "tokens_per_second": round(tokens / (ms / 1000)),
    }  # fmt: skip
    print(f"{n_params:,} parameters, batch {batch_size} x {preset['block_size']} on {result['device']}")
    print(f"median step {ms:.2f} ms = {result['tokens_per_second']:,} tokens/s (warm-up {warmup_seconds:.1f} s)")

    if args.to_loss is not None:
        splits = {"val": val_ids}
        done, trained, i = None, warmup_seconds + sum(times), args.warmup + args.steps
        while i < max_steps:
            t = time.perf_counter()
            step(i)
            i += 1
            if i % args.eval_every == 0 or i == max_steps:
                sync(device)
                trained += time.perf_counter() - t
                val = estimate_loss(runner, splits, batch_size, iters=40)["val"]
                print(f"  step {i:5d}: validation loss {val:.3f} after {trained:.1f} s of training")
                if val <= args.to_loss:
                    done = {"step": i, "seconds": round(trained, 1), "val_loss": round(val, 4)}
                    break
            else:
                trained += time.perf_counter() - t
        result["to_loss"] = {"target": args.to_loss, "reached": done}
        print(
            f"validation loss {args.to_loss} "
            + (f"reached at step {done['step']}, {done['seconds']} s" if done else "not reached")
        )

    out = Path(__file__).resolve().parent / "results"
    out.mkdir(exist_ok=True)
    path = out / f"gpt-{result['preset']}-{device.type}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(result, indent=1))
    print(f"written to {path}")


if __name__ == "__main__":
    main()
