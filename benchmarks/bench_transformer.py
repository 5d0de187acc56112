"""course_utils.Transformer against nn.Transformer of the same sizes, on the same batches.

Two measurements:

1. Train-step time: both models take the same batches in alternation (ours, theirs, ours, ...), so that
   both see the same machine load; the median over many steps is reported, and the ratio ours / theirs.
2. Time to accuracy: each model is trained with the recipe of notebook 06 and evaluated on held-out dates
   every few steps; reported are the first step, and the training seconds (evaluation excluded), at which
   exact match reaches the target.

    python benchmarks/bench_transformer.py                       # the GPU if there is one, else the CPU
    python benchmarks/bench_transformer.py --device cpu --preset base --skip-accuracy

Results are printed and written as JSON to benchmarks/results/ (not committed); README.md records them.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from dataclasses import asdict
from pathlib import Path

import torch

from course_utils import (
    DateTask,
    TorchTransformer,
    TrainConfig,
    Transformer,
    count_parameters,
    encode_pairs,
    exact_match,
    make_optimizer,
    random_batches,
    seq2seq_loss,
    set_seed,
    train,
    train_step,
)

PRESETS = {
    # the model of notebook 06
    "dates": dict(d_model=64, n_heads=4, n_layers=2, d_ff=128, batch_size=64),
    # the paper's base sizes (65 M parameters with its vocabularies), on the same data: speed only
    "base": dict(d_model=512, n_heads=8, n_layers=6, d_ff=2048, batch_size=64),
}
RECIPE = TrainConfig(steps=1000, batch_size=64, lr=3e-3, warmup_steps=100, schedule="cosine", label_smoothing=0.1)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def build(cls, task: DateTask, preset: dict, device: torch.device) -> torch.nn.Module:
    set_seed(0)
    sizes = {k: v for k, v in preset.items() if k != "batch_size"}
    return cls(task.src_tokenizer.vocab_size, task.tgt_tokenizer.vocab_size, dropout=0.0, max_len=64, **sizes).to(
        device
    )


def step_times(models: dict, batches, config: TrainConfig, device: torch.device, steps: int, warmup: int) -> dict:
    """Median train-step time of each model, measured in alternation on identical batches."""
    pad = 0

    def loss_fn(model, src, tgt):
        return seq2seq_loss(model, src, tgt, pad, config.label_smoothing)

    optimizers = {name: make_optimizer(model, config) for name, model in models.items()}
    times = {name: [] for name in models}
    for i in range(warmup + steps):
        batch = tuple(t.to(device) for t in next(batches))
        for name, model in models.items():
            sync(device)
            start = time.perf_counter()
            train_step(model, optimizers[name], loss_fn, batch, config)
            sync(device)
            if i >= warmup:
                times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def time_to_accuracy(model, task, src, tgt, config, device, target: float, every: int) -> dict:
    held_out = task.pairs(1000, "test", seed=0)

    def evaluate(m):
        return {"acc": exact_match(m, held_out, task.src_tokenizer, task.tgt_tokenizer)[0]}

    history = train(
        model,
        random_batches(src, tgt, batch_size=config.batch_size, seed=0),
        lambda m, s, t: seq2seq_loss(m, s, t, task.src_tokenizer.pad_id, config.label_smoothing),
        config,
        device=device,
        eval_fn=evaluate,
        eval_every=every,
        progress=False,
    )
    reached = [(step, secs) for (step, m), secs in zip(history.evals, history.eval_seconds) if m["acc"] >= target]
    return {
        "final_accuracy": history.evals[-1][1]["acc"],
        "steps_to_target": reached[0][0] if reached else None,
        "seconds_to_target": round(reached[0][1], 2) if reached else None,
        "train_seconds": round(history.seconds, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="auto", help="auto (GPU if present), cpu, cuda")
    parser.add_argument("--preset", default="dates", choices=sorted(PRESETS))
    parser.add_argument("--timing-steps", type=int, default=200, help="alternated steps timed per model")
    parser.add_argument("--skip-accuracy", action="store_true", help="only time the steps")
    parser.add_argument("--target", type=float, default=0.99, help="held-out exact match to reach")
    args = parser.parse_args()

    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available() else
                          "cpu" if args.device == "auto" else args.device)  # fmt: skip
    preset = PRESETS[args.preset]
    config = TrainConfig(**{**asdict(RECIPE), "batch_size": preset["batch_size"]})
    task = DateTask(seed=0)
    src, tgt = encode_pairs(task.pairs(100_000, "train", seed=0), task.src_tokenizer, task.tgt_tokenizer)
    machine = (
        torch.cuda.get_device_name(device)
        if device.type == "cuda"
        else f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads"
    )
    print(f"torch {torch.__version__} on {device} ({machine}); preset {args.preset}: {preset}")

    models = {
        "course_utils": build(Transformer, task, preset, device),
        "nn.Transformer": build(TorchTransformer, task, preset, device),
    }
    for name, model in models.items():
        print(f"  {name:15} {count_parameters(model):>12,} parameters")
    times = step_times(
        models,
        random_batches(src, tgt, batch_size=config.batch_size, seed=1),
        config,
        device,
        args.timing_steps,
        warmup=20,
    )
    ratio = times["course_utils"] / times["nn.Transformer"]
    print(f"median train step ({args.timing_steps} alternated steps each, batch {config.batch_size}):")
    for name, t in times.items():
        print(f"  {name:15} {1000 * t:8.2f} ms")
    print(f"  ratio course_utils / nn.Transformer = {ratio:.3f}")

    result = {
        "torch": torch.__version__, "device": str(device), "machine": machine, "preset": args.preset,
        "step_ms": {k: round(1000 * v, 3) for k, v in times.items()}, "ratio": round(ratio, 3),
    }  # fmt: skip
    if not args.skip_accuracy:
        result["to_accuracy"] = {}
        print(f"time to {args.target:.0%} held-out exact match ({config.steps}-step recipe, evaluated every 50 steps):")
        for name, cls in (("course_utils", Transformer), ("nn.Transformer", TorchTransformer)):
            outcome = time_to_accuracy(
                build(cls, task, preset, device), task, src, tgt, config, device, args.target, every=50
            )
            result["to_accuracy"][name] = outcome
            print(f"  {name:15} {outcome}")

    out_dir = Path(__file__).resolve().parent / "results"
    out_dir.mkdir(exist_ok=True)
    out = out_dir / f"transformer_{args.preset}_{device.type}.json"
    out.write_text(json.dumps(result, indent=2))
    print(f"written {out.relative_to(Path.cwd()) if out.is_relative_to(Path.cwd()) else out}")


if __name__ == "__main__":
    main()
