"""How much a chapter's trained figure varies from run to run: its recipe trained with several seeds, on the CPU.

    python tools/seed_spread.py dates 0 1 2 3 4      # chapter 06: held-out exact match of DATE_TRANSFORMER
    python tools/seed_spread.py shakespeare 0 1 2    # chapter 07: best validation loss of SHAKESPEARE_GPT_CPU

Another processor rounds the last bits of every sum in its own way, and a few hundred training steps carry those
differences into other weights: a reader's run lands somewhere in the spread of other seeds, not on the figure saved
in the notebook. The bounds the notebooks assert (and the ranges their prose quotes) come from this spread. The seed
sets the model's initial weights and the order of the batches; the data and its held-out split stay those of the
chapter. Run it with ``ATEN_CPU_CAPABILITY=default`` (or ``avx2``) to see other kernels too.
"""

from __future__ import annotations

import argparse
import os
import statistics
from dataclasses import asdict

import torch

from course_utils import (
    GPT,
    CharTokenizer,
    DateTask,
    Transformer,
    encode_pairs,
    estimate_loss,
    exact_match,
    load_tiny_shakespeare,
    random_batches,
    random_windows,
    seq2seq_loss,
    set_seed,
    split_ids,
    train,
)
from course_utils.recipes import DATE_TRANSFORMER, SHAKESPEARE_GPT_CPU

CPU = torch.device("cpu")


def dates(seeds: list[int]) -> dict[int, float]:
    """Chapter 06: exact match on the 2,000 held-out examples."""
    recipe = DATE_TRANSFORMER
    task = DateTask(seed=0)
    src_tok, tgt_tok = task.src_tokenizer, task.tgt_tokenizer
    src_ids, tgt_ids = encode_pairs(task.pairs(100_000, "train", seed=0), src_tok, tgt_tok)
    test_pairs = task.pairs(2_000, "test", seed=0)
    smoothing = recipe.training.label_smoothing
    results = {}
    for seed in seeds:
        set_seed(seed)
        model = Transformer(src_tok.vocab_size, tgt_tok.vocab_size, **asdict(recipe.model))
        batches = random_batches(src_ids, tgt_ids, batch_size=recipe.training.batch_size, seed=seed)
        train(
            model, batches, lambda m, src, tgt: seq2seq_loss(m, src, tgt, tgt_tok.pad_id, smoothing),
            recipe.training, device=CPU, desc=f"seed {seed}",
        )  # fmt: skip
        results[seed], _ = exact_match(model, test_pairs, src_tok, tgt_tok)
        print(f"seed {seed}: held-out exact match {results[seed]:.2%}", flush=True)
    return results


def shakespeare(seeds: list[int]) -> dict[int, float]:
    """Chapter 07 (CPU recipe): the best validation loss of its evaluations."""
    recipe = SHAKESPEARE_GPT_CPU
    text = load_tiny_shakespeare()
    tokenizer = CharTokenizer(text, specials=False)
    train_ids, val_ids = split_ids(text, tokenizer)
    splits = {"train": train_ids, "val": val_ids}
    results = {}
    for seed in seeds:
        set_seed(seed)
        model = GPT(tokenizer.vocab_size, **asdict(recipe.model))
        windows = random_windows(train_ids, recipe.model.block_size, recipe.training.batch_size, seed=seed)
        history = train(
            model, windows, lambda m, x, y: m(x, y)[1], recipe.training, device=CPU, desc=f"seed {seed}",
            eval_fn=lambda m: estimate_loss(m, splits, recipe.training.batch_size, iters=recipe.eval_batches),
            eval_every=recipe.eval_every,
        )  # fmt: skip
        results[seed] = min(losses["val"] for _, losses in history.evals)
        print(f"seed {seed}: best validation loss {results[seed]:.3f}", flush=True)
    return results


RUNS = {"dates": dates, "shakespeare": shakespeare}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", choices=sorted(RUNS))
    parser.add_argument("seeds", nargs="+", type=int)
    args = parser.parse_args()
    results = RUNS[args.run](args.seeds)
    values = list(results.values())
    kernels = os.environ.get("ATEN_CPU_CAPABILITY", "the processor's own")
    print(
        f"{args.run}, {len(values)} seeds, {kernels} kernels: from {min(values):.4g} to {max(values):.4g}, "
        f"mean {statistics.mean(values):.4g}"
    )


if __name__ == "__main__":
    main()
