"""course_utils.Transformer against nn.Transformer of the same sizes, on the same batches.

Two measurements:

1. Train-step time: the models take the same batches in alternation (ours, theirs, ours, ...), so that all see
   the same machine load; the median over many steps is reported, and the ratio ours / theirs. Ours is timed
   twice: as it runs by default (attention through ``F.scaled_dot_product_attention``), and on the readable path
   (every attention module asked for its weights, inside ``record_attention``).
2. Time to accuracy: each model is trained with notebook 06's recipe (``course_utils.training.recipes.DATE_TRANSFORMER``)
   and evaluated on held-out dates every 50 steps; reported are the first step, and the training seconds
   (evaluation excluded), at which exact match reaches the target.

    python benchmarks/bench_transformer.py                       # the GPU if there is one, else the CPU
    python benchmarks/bench_transformer.py --device cpu --preset base --skip-accuracy

Results are printed and written as JSON to benchmarks/results/ (not committed); README.md records them.
"""

from __future__ import annotations

import argparse
import contextlib
from dataclasses import asdict, replace

import torch
from common import add_record_argument, alternated_step_times, machine, save

from course_utils import (
    DATE_TRANSFORMER,
    DateTask,
    TorchTransformer,
    Transformer,
    TransformerConfig,
    count_parameters,
    encode_pairs,
    exact_match,
    get_device,
    random_batches,
    record_attention,
    seq2seq_loss,
    set_seed,
    train,
)
from course_utils.training.loop import make_optimizer, train_step

PRESETS = {
    "dates": DATE_TRANSFORMER.model,  # the model of notebook 06
    # the paper's base sizes (65 M parameters with its vocabularies), on the same data: speed only
    "base": replace(TransformerConfig(), dropout=0.0, max_len=64),
}


def build(cls: type[Transformer], task: DateTask, sizes: TransformerConfig, device: torch.device) -> Transformer:
    set_seed(0)
    return cls(task.src_tokenizer.vocab_size, task.tgt_tokenizer.vocab_size, **asdict(sizes)).to(device).train()


def time_to_accuracy(model, task, src, tgt, config, device, target: float, every: int) -> dict:
    held_out = task.pairs(1000, "test", seed=0)

    def evaluate(m):
        return {"acc": exact_match(m, held_out, task.src_tokenizer, task.tgt_tokenizer)[0]}

    history = train(
        model, random_batches(src, tgt, batch_size=config.batch_size, seed=0),
        lambda m, s, t: seq2seq_loss(m, s, t, task.src_tokenizer.pad_id, config.label_smoothing),
        config, device=device, eval_fn=evaluate, eval_every=every, progress=False,
    )  # fmt: skip
    reached = [(step, secs) for (step, m), secs in zip(history.evals, history.eval_seconds) if m["acc"] >= target]
    return {
        "final_accuracy": history.evals[-1][1]["acc"],
        "steps_to_target": reached[0][0] if reached else None,
        "seconds_to_target": round(reached[0][1], 2) if reached else None,
        "train_seconds": round(history.seconds, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default=None, help="cpu or cuda (default: get_device())")
    parser.add_argument("--preset", default="dates", choices=sorted(PRESETS))
    parser.add_argument("--timing-steps", type=int, default=200, help="alternated steps timed per model")
    parser.add_argument("--skip-accuracy", action="store_true", help="only time the steps")
    parser.add_argument("--target", type=float, default=0.99, help="held-out exact match to reach")
    parser.add_argument("--warmup", type=int, default=20, help="alternated steps per model before the clock starts")
    add_record_argument(parser)
    args = parser.parse_args()

    device = torch.device(args.device) if args.device else get_device()
    sizes, config = PRESETS[args.preset], DATE_TRANSFORMER.training
    task = DateTask(seed=0)
    pad = task.src_tokenizer.pad_id
    src, tgt = encode_pairs(task.pairs(100_000, "train", seed=0), task.src_tokenizer, task.tgt_tokenizer)
    print(f"torch {torch.__version__} on {device} ({machine(device)}); preset {args.preset}: {sizes}")

    ours = build(Transformer, task, sizes, device)
    readable = build(Transformer, task, sizes, device)
    theirs = build(TorchTransformer, task, sizes, device)
    contenders = {
        "course_utils": (ours, contextlib.nullcontext),
        "course_utils, readable": (readable, lambda: record_attention(readable)),
        "nn.Transformer": (theirs, contextlib.nullcontext),
    }
    for name, (model, _) in contenders.items():
        print(f"  {name:23} {count_parameters(model):>12,} parameters")
    optimizers = {name: make_optimizer(model, config) for name, (model, _) in contenders.items()}
    batches = random_batches(src, tgt, batch_size=config.batch_size, seed=1)
    seen: list[tuple[torch.Tensor, ...]] = []

    def stepper(name: str):
        model, mode = contenders[name]

        def step(i: int) -> None:
            if len(seen) <= i:  # every contender gets batch i
                seen.append(tuple(t.to(device) for t in next(batches)))
            with mode():
                train_step(model, optimizers[name], lambda m, s, t: seq2seq_loss(m, s, t, pad), seen[i], config)

        return step

    times = alternated_step_times(
        {name: stepper(name) for name in contenders}, device, args.timing_steps, warmup=args.warmup
    )
    print(f"median train step ({args.timing_steps} alternated steps each, batch {config.batch_size}):")
    for name, t in times.items():
        print(f"  {name:23} {1000 * t:8.2f} ms   ratio to nn.Transformer {t / times['nn.Transformer']:.3f}")

    result = {
        "torch": torch.__version__, "device": str(device), "machine": machine(device), "preset": args.preset,
        "parameters": count_parameters(ours), "batch_size": config.batch_size, "timing_steps": args.timing_steps,
        "step_ms": {k: round(1000 * v, 3) for k, v in times.items()},
        "ratio": {k: round(v / times["nn.Transformer"], 3) for k, v in times.items()},
    }  # fmt: skip
    if not args.skip_accuracy:
        result["to_accuracy"] = {}
        print(f"time to {args.target:.0%} held-out exact match ({config.steps}-step recipe, evaluated every 50 steps):")
        for name, cls in (("course_utils", Transformer), ("nn.Transformer", TorchTransformer)):
            outcome = time_to_accuracy(build(cls, task, sizes, device), task, src, tgt, config, device, args.target, 50)
            result["to_accuracy"][name] = outcome
            print(f"  {name:15} {outcome}")
    save(result, f"transformer-{args.preset}-{device.type}", device, args.record)


if __name__ == "__main__":
    main()
