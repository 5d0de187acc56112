"""Training throughput of chapter 07's GPT on Tiny Shakespeare, against a nanoGPT-architecture reference, and
optionally the time to a validation loss.

Presets are the recipes notebook 07 trains (``course_utils.training.recipes``): ``cpu`` = ``SHAKESPEARE_GPT_CPU``
(3 layers, 4 heads, 128 dims, context 64, batch 12; ``--n-layers 4`` gives nanoGPT's CPU size) and ``gpu`` =
``SHAKESPEARE_GPT_GPU`` (6 layers, 6 heads, 384 dims, context 256, batch 64, dropout 0.2; 10.65 M parameters).

1. Step time: the course's ``GPT`` and ``ReferenceGPT`` (nanoGPT's architecture, ``nanogpt_reference.py``), the
   same sizes and initialisation, take the same batches in alternation in a plain loop: forward, loss, backward,
   gradient clipping, AdamW (``course_utils.training.loop.train_step``, with bf16 autocast on GPUs that support it).
   Nothing is switched on for speed: the course's model runs its default forward. Every batch is on the device
   before the timing starts; the order of the models is reversed every other step. Median over ``--steps``.
   ``--aa`` adds a second, identical course GPT: the ratio of the two copies (ideally 1.00) is the harness's own
   bias. ``--sdpa-backend`` runs attention on one kernel only (flash, cudnn, efficient, math), so that a GPU run can
   tell the attention kernel's share apart.
2. ``--to-loss``: the course's GPT alone, trained with the preset's recipe until the validation loss (mean over
   40 fixed batches, every ``--eval-every`` steps) reaches the target; training seconds exclude evaluation.

    python benchmarks/bench_gpt.py                                  # preset by device, step times
    python benchmarks/bench_gpt.py --preset cpu --to-loss 1.95
    python benchmarks/bench_gpt.py --preset gpu --to-loss 1.47 --compile
    python benchmarks/bench_gpt.py --aa --sdpa-backend math        # the harness's bias; one attention kernel

Results are printed and written as JSON to benchmarks/results/ (not committed); README.md records them.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import asdict, replace

import torch
from common import SDPA_BACKENDS, add_record_argument, alternated_step_times, machine, save, sdpa_backend
from nanogpt_reference import ReferenceGPT

from course_utils import (
    GPT,
    SHAKESPEARE_GPT_CPU,
    SHAKESPEARE_GPT_GPU,
    CharTokenizer,
    GPTConfig,
    count_parameters,
    estimate_loss,
    get_device,
    load_tiny_shakespeare,
    lr_factor,
    random_windows,
    set_seed,
    split_ids,
)
from course_utils.training.loop import make_optimizer, train_step
from course_utils.utils import synchronize

PRESETS = {"cpu": SHAKESPEARE_GPT_CPU, "gpu": SHAKESPEARE_GPT_GPU}


MODELS = ("course_utils.GPT", "nanoGPT architecture")
TWIN = "course_utils.GPT, A/A twin"  # --aa: the course's GPT once more, to measure the harness against itself


def compiled(model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    """``torch.compile(model)``; on a GPU without Triton (which compiles its kernels), one line and the model as it
    is: eager."""
    from torch.utils._triton import has_triton

    if device.type == "cuda" and not has_triton():
        print("torch.compile needs Triton on a GPU, and it is not installed (pip install triton): running eager")
        return model
    return torch.compile(model)


def lm_loss(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return model(x, y)[1]


def build_model(kind: str, vocab_size: int, sizes: GPTConfig, device: torch.device) -> torch.nn.Module:
    """One of ``MODELS`` at ``sizes``, seeded, in training mode: the course's GPT or nanoGPT's architecture."""
    set_seed(0)
    if kind in ("course_utils.GPT", TWIN):
        return GPT(vocab_size, **asdict(sizes)).to(device).train()
    shape = (sizes.block_size, sizes.d_model, sizes.n_heads, sizes.n_layers, sizes.dropout)
    return ReferenceGPT(vocab_size, *shape).to(device).train()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default=None, help="cpu or cuda (default: get_device())")
    parser.add_argument("--preset", choices=PRESETS, default=None, help="default: gpu on CUDA, else cpu")
    parser.add_argument("--steps", type=int, default=100, help="timed steps per model (after --warmup)")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--compile", action="store_true", help="torch.compile both models first")
    parser.add_argument("--batch-size", type=int, default=None, help="rows per batch (default: the recipe's)")
    parser.add_argument("--to-loss", type=float, default=None, help="then train until validation loss <= this")
    parser.add_argument("--max-steps", type=int, default=None, help="give up after this many steps (default: recipe)")
    parser.add_argument("--eval-every", type=int, default=250)
    parser.add_argument(
        "--n-layers", type=int, default=None, help="override the preset's depth (nanoGPT's CPU size: 4)"
    )
    parser.add_argument("--aa", action="store_true", help="time a second copy of the course's GPT too (A/A)")
    parser.add_argument("--sdpa-backend", choices=SDPA_BACKENDS, default=None, help="attention on this kernel only")
    add_record_argument(parser)
    args = parser.parse_args()

    device = torch.device(args.device) if args.device else get_device()
    preset = args.preset or ("gpu" if device.type == "cuda" else "cpu")
    recipe = PRESETS[preset]
    sizes, config = recipe.model, recipe.training
    if args.n_layers:
        sizes = replace(sizes, n_layers=args.n_layers)
    if args.max_steps:
        config = replace(config, steps=args.max_steps)
    if args.batch_size:
        config = replace(config, batch_size=args.batch_size)
    text = load_tiny_shakespeare()
    tokenizer = CharTokenizer(text, specials=False)
    train_ids, val_ids = split_ids(text, tokenizer)

    def build(kind: str) -> torch.nn.Module:
        return build_model(kind, tokenizer.vocab_size, sizes, device)

    models = {kind: build(kind) for kind in (*MODELS, TWIN) if kind != TWIN or args.aa}
    ours = models["course_utils.GPT"]
    n_params = count_parameters(ours) - ours.position_embed.weight.numel()
    runners = {k: compiled(m, device) if args.compile else m for k, m in models.items()}
    was_compiled = any(runner is not models[k] for k, runner in runners.items())
    optimizers = {k: make_optimizer(m, config) for k, m in models.items()}
    windows = random_windows(train_ids, sizes.block_size, config.batch_size, seed=0)
    # every model sees batch i at step i; all are on the device before the clock starts
    batches = [tuple(t.to(device) for t in next(windows)) for _ in range(args.warmup + args.steps)]

    def stepper(kind: str):
        def step(i: int) -> None:
            for group in optimizers[kind].param_groups:
                group["lr"] = config.lr * lr_factor(i, config)
            train_step(runners[kind], optimizers[kind], lm_loss, batches[i], config)

        return step

    start = time.perf_counter()
    with sdpa_backend(args.sdpa_backend):
        seconds = alternated_step_times({k: stepper(k) for k in models}, device, args.steps, args.warmup)
    print(sizes)
    print(config)
    print(f"{n_params:,} parameters, batch {config.batch_size} x {sizes.block_size} on {device} ({machine(device)})")
    tokens = config.batch_size * sizes.block_size
    for kind, s in seconds.items():
        print(f"  {kind:22} median step {1000 * s:7.2f} ms = {tokens / s:,.0f} tokens/s")
    ratio = seconds["course_utils.GPT"] / seconds["nanoGPT architecture"]
    print(f"  ratio course_utils / nanoGPT architecture = {ratio:.3f} ({time.perf_counter() - start:.0f} s)")
    aa = round(seconds["course_utils.GPT"] / seconds[TWIN], 3) if args.aa else None
    if aa is not None:
        print(f"  A/A: the course's GPT against its identical twin = {aa:.3f} (the harness's own bias; ideally 1.000)")
    result = {
        "device": str(device), "machine": machine(device), "torch": torch.__version__, "preset": preset,
        "n_layers": sizes.n_layers, "steps": args.steps, "parameters_without_positions": n_params, "batch": [config.batch_size, sizes.block_size],
        "compile": was_compiled, "sdpa_backend": args.sdpa_backend,
        "ms_per_step": {k: round(1000 * s, 2) for k, s in seconds.items()},
        "ratio": round(ratio, 3), "aa_ratio": aa, "tokens_per_second": round(tokens / seconds["course_utils.GPT"]),
    }  # fmt: skip

    if args.to_loss is not None:  # a fresh model, trained alone with the recipe's schedule
        model = build("course_utils.GPT")
        runner = compiled(model, device) if args.compile else model
        optimizer = make_optimizer(model, config)
        windows = random_windows(train_ids, sizes.block_size, config.batch_size, seed=0)
        done, trained, evals = None, 0.0, []
        for i in range(config.steps):
            t = time.perf_counter()
            for group in optimizer.param_groups:
                group["lr"] = config.lr * lr_factor(i, config)
            train_step(runner, optimizer, lm_loss, tuple(b.to(device) for b in next(windows)), config)
            if (i + 1) % args.eval_every == 0 or i + 1 == config.steps:
                synchronize(device)
                trained += time.perf_counter() - t
                val = estimate_loss(model, {"val": val_ids}, config.batch_size, iters=40)["val"]
                print(f"  step {i + 1:5d}: validation loss {val:.3f} after {trained:.1f} s of training")
                evals.append({"step": i + 1, "val_loss": round(val, 4), "seconds": round(trained, 1)})
                if val <= args.to_loss:
                    done = {"step": i + 1, "seconds": round(trained, 1), "val_loss": round(val, 4)}
                    break
            else:
                trained += time.perf_counter() - t
        result["to_loss"] = {"target": args.to_loss, "reached": done, "evals": evals}
        print(
            f"validation loss {args.to_loss} "
            + (f"reached at step {done['step']}, {done['seconds']} s" if done else "not reached")
        )

    save(result, f"gpt-{preset}-{device.type}", device, args.record)


if __name__ == "__main__":
    main()
