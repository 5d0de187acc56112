"""Train and save the weights that ship with the course (``course_utils.load_pretrained``), on the CPU:

    python -m course_utils.build_checkpoints [date_transformer] [shakespeare_gpt]

Each run repeats its notebook's training exactly: the same data, seeds, model and recipe
(``PRETRAINED_RECIPES``, which tests hold equal to what the notebooks print).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import asdict
from pathlib import Path

import torch

from .pretrained import CHECKPOINTS, PRETRAINED_RECIPES, _path, load_pretrained
from .train import History


def _save(name: str, model, history: History, metrics: dict, samples: list[str] | None = None) -> Path:
    _, recipe, config = PRETRAINED_RECIPES[name]
    CHECKPOINTS.mkdir(exist_ok=True)
    path = _path(name)
    payload = {
        "recipe": dict(recipe),
        "train_config": asdict(config),
        "state_dict": {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()},
        "history": asdict(history),
        "metrics": metrics,
        "samples": samples or [],
        "torch_version": torch.__version__.split("+")[0],
    }
    torch.save(payload, path)
    return path


def train_date_transformer() -> Path:
    """Chapter 06's run: the same data, seeds, model and recipe, on the CPU."""
    from .data import encode_pairs, random_batches
    from .dates import DateTask
    from .model import Transformer
    from .train import exact_match, seq2seq_loss, train
    from .utils import set_seed

    _, recipe, config = PRETRAINED_RECIPES["date_transformer"]
    set_seed(0)
    task = DateTask(seed=0)
    src_tok, tgt_tok = task.src_tokenizer, task.tgt_tokenizer
    src_ids, tgt_ids = encode_pairs(task.pairs(100_000, "train", seed=0), src_tok, tgt_tok)
    test_pairs = task.pairs(2_000, "test", seed=0)
    set_seed(0)
    model = Transformer(src_tok.vocab_size, tgt_tok.vocab_size, **recipe)
    set_seed(0)
    batches = random_batches(src_ids, tgt_ids, batch_size=config.batch_size, seed=0)
    history = train(
        model,
        batches,
        lambda m, src, tgt: seq2seq_loss(m, src, tgt, tgt_tok.pad_id, label_smoothing=config.label_smoothing),
        config,
        device=torch.device("cpu"),
        desc="date transformer",
    )
    accuracy, _ = exact_match(model, test_pairs, src_tok, tgt_tok)
    return _save("date_transformer", model, history, {"held_out_exact_match": accuracy})


def train_shakespeare_gpt() -> Path:
    """Chapter 07's CPU run: the same data, seeds, model, recipe, evaluations and samples."""
    from .data import CharTokenizer
    from .gpt import GPT, estimate_loss
    from .text import load_tiny_shakespeare, random_windows, split_ids
    from .train import train
    from .utils import set_seed

    _, recipe, config = PRETRAINED_RECIPES["shakespeare_gpt"]
    text = load_tiny_shakespeare()
    tokenizer = CharTokenizer(text, specials=False)
    train_ids, val_ids = split_ids(text, tokenizer)
    splits = {"train": train_ids, "val": val_ids}
    set_seed(0)
    model = GPT(
        tokenizer.vocab_size, recipe["block_size"], recipe["d_model"], recipe["n_heads"], recipe["n_layers"],
        dropout=recipe["dropout"], bias=False,
    )  # fmt: skip
    prompt = torch.tensor([tokenizer.encode("\n")])
    samples = []

    def evaluate(model):
        losses = estimate_loss(model, splits, recipe["batch_size"], iters=40)
        out = model.generate(prompt, 200, temperature=0.8, generator=torch.Generator().manual_seed(0))
        samples.append(tokenizer.decode(out[0]))
        return losses

    set_seed(0)
    history = train(
        model, random_windows(train_ids, recipe["block_size"], recipe["batch_size"], seed=0),
        lambda m, x, y: m(x, y)[1], config, device=torch.device("cpu"), eval_fn=evaluate,
        eval_every=recipe["eval_every"], desc="GPT",
    )  # fmt: skip
    best = min(losses["val"] for _, losses in history.evals)
    return _save("shakespeare_gpt", model, history, {"best_val_loss": best}, samples)


BUILDERS = {"date_transformer": train_date_transformer, "shakespeare_gpt": train_shakespeare_gpt}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Train and save the course's shipped weights (on the CPU).")
    parser.add_argument("names", nargs="*", help=f"any of {', '.join(BUILDERS)} (default: all)")
    args = parser.parse_args(argv)
    for name in args.names:
        if name not in BUILDERS:  # before anything trains
            parser.error(f"no pretrained weights called {name!r}; there are: {', '.join(BUILDERS)}")
    for name in args.names or BUILDERS:
        start = time.perf_counter()
        path = BUILDERS[name]()
        print(f"wrote {path} ({path.stat().st_size / 1e6:.2f} MB) in {time.perf_counter() - start:.0f} s")
        print("  " + load_pretrained(name).describe())


if __name__ == "__main__":
    main()
