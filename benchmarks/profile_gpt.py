"""Where a training step of chapter 07's GPT spends its time, beside nanoGPT's architecture: PyTorch's profiler over a
few steps of each model, the same loop as bench_gpt.py (forward, loss, backward, clipping, AdamW).

For each model it prints the operators and kernels that take the most time (on a GPU: device time, so the kernels;
on a CPU: CPU time), how many operators and device kernels one step launches, and writes the whole comparison as
JSON to benchmarks/results/. Where a small model's step is bound by launching kernels rather than by running them,
the launch count tells more than the kernels' times.

    python benchmarks/profile_gpt.py --device cuda           # the GPU preset
    python benchmarks/profile_gpt.py --preset cpu --steps 2  # the script itself, on a CPU
"""

from __future__ import annotations

import argparse

import torch
from bench_gpt import MODELS, PRESETS, build_model, lm_loss
from common import machine, save
from torch.profiler import ProfilerActivity, profile

from course_utils import CharTokenizer, get_device, load_tiny_shakespeare, random_windows, split_ids
from course_utils.training.loop import make_optimizer, train_step
from course_utils.utils import synchronize


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None)
    parser.add_argument("--preset", choices=PRESETS, default=None, help="default: gpu on CUDA, else cpu")
    parser.add_argument("--steps", type=int, default=5, help="profiled steps per model, after 10 warm-up steps")
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    device = torch.device(args.device) if args.device else get_device()
    recipe = PRESETS[args.preset or ("gpu" if device.type == "cuda" else "cpu")]
    sizes, config = recipe.model, recipe.training
    text = load_tiny_shakespeare()
    tokenizer = CharTokenizer(text, specials=False)
    train_ids, _ = split_ids(text, tokenizer)
    windows = random_windows(train_ids, sizes.block_size, config.batch_size, seed=0)
    batches = [tuple(t.to(device) for t in next(windows)) for _ in range(10 + args.steps)]

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    sort_by = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    result: dict = {"device": str(device), "machine": machine(device), "torch": torch.__version__, "models": {}}
    for kind in MODELS:
        model = build_model(kind, tokenizer.vocab_size, sizes, device)
        optimizer = make_optimizer(model, config)
        for batch in batches[:10]:
            train_step(model, optimizer, lm_loss, batch, config)
        synchronize(device)
        with profile(activities=activities) as prof:
            for batch in batches[10:]:
                train_step(model, optimizer, lm_loss, batch, config)
            synchronize(device)
        events = prof.key_averages()
        ops = sum(e.count for e in events if e.key.startswith("aten::")) / args.steps
        kernels = sum(e.count for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA) / args.steps
        table = events.table(sort_by=sort_by, row_limit=args.top)
        print(f"=== {kind}: {ops:.0f} aten operators and {kernels:.0f} device kernels per step")
        print(table)
        result["models"][kind] = {"aten_ops_per_step": ops, "kernels_per_step": kernels, "table": table}
    save(result, f"profile-gpt-{device.type}")


if __name__ == "__main__":
    main()
