"""Train and save the weights that ship with the course (``course_utils.load_pretrained``), on the CPU:

    python tools/build_checkpoints.py [date_transformer] [shakespeare_gpt] [multi30k_translator] [byte_gpt]

Each run repeats its notebook's training exactly: the same data, seeds, model and recipe (the objects of
``course_utils.training.recipes``, which the notebooks import from ``course_utils``). The files land in ``course_utils/checkpoints/``,
inside the package, so that the wheel (and Colab) carries them.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from torch import nn

from course_utils import (
    GPT,
    CharTokenizer,
    DateTask,
    History,
    Transformer,
    encode_pairs,
    estimate_loss,
    exact_match,
    load_pretrained,
    load_tiny_shakespeare,
    random_batches,
    random_windows,
    seq2seq_loss,
    set_seed,
    split_ids,
    train,
)
from course_utils.data.bpe import BPETokenizer, learn_bpe_fast
from course_utils.data.byte_bpe import ByteBPE, train_byte_bpe
from course_utils.data.instructions import pretraining_texts
from course_utils.data.multi30k import load_multi30k
from course_utils.training.pretrained import CHECKPOINTS, PRETRAINED, checkpoint_path
from course_utils.training.recipes import Recipe
from course_utils.training.translation import train_translator

CPU = torch.device("cpu")


def save(
    name: str,
    model: nn.Module,
    history: History,
    metrics: dict[str, float],
    samples: list[str] = (),
    *,
    half: bool = False,
    **extra: Any,
) -> Path:
    """Write the checkpoint. A tensor that several names share (tied weights) is stored once, under its first
    name, with the others listed in ``aliases``; ``half`` stores floating-point tensors in float16."""
    CHECKPOINTS.mkdir(exist_ok=True)
    path = checkpoint_path(name)
    state, aliases, first = {}, {}, {}
    for key, value in model.state_dict().items():
        if value.data_ptr() in first:
            aliases[key] = first[value.data_ptr()]
            continue
        first[value.data_ptr()] = key
        value = value.detach().cpu().contiguous()
        state[key] = value.half() if half and value.is_floating_point() else value
    payload = {
        "recipe": asdict(PRETRAINED[name]),
        "state_dict": state,
        "aliases": aliases,
        "history": asdict(history),
        "metrics": metrics,
        "samples": list(samples),
        "torch_version": torch.__version__.split("+")[0],
        **extra,
    }
    torch.save(payload, path)
    return path


def train_date_transformer(seed: int = 0) -> tuple[Transformer, History, float]:
    """Chapter 06's run: the same data, model and recipe, on the CPU; ``seed`` sets the initial weights and the order
    of the batches (the chapter's is 0). Returns the model, its history and its held-out exact match."""
    recipe = PRETRAINED["date_transformer"]
    set_seed(0)
    task = DateTask(seed=0)
    src_tok, tgt_tok = task.src_tokenizer, task.tgt_tokenizer
    src_ids, tgt_ids = encode_pairs(task.pairs(100_000, "train", seed=0), src_tok, tgt_tok)
    test_pairs = task.pairs(2_000, "test", seed=0)
    set_seed(seed)
    model = Transformer(src_tok.vocab_size, tgt_tok.vocab_size, **asdict(recipe.model))
    set_seed(seed)
    batches = random_batches(src_ids, tgt_ids, batch_size=recipe.training.batch_size, seed=seed)
    smoothing = recipe.training.label_smoothing
    history = train(
        model, batches, lambda m, src, tgt: seq2seq_loss(m, src, tgt, tgt_tok.pad_id, smoothing),
        recipe.training, device=CPU, desc=f"date transformer, seed {seed}",
    )  # fmt: skip
    accuracy, _ = exact_match(model, test_pairs, src_tok, tgt_tok)
    return model, history, accuracy


def date_transformer() -> Path:
    model, history, accuracy = train_date_transformer()
    return save("date_transformer", model, history, {"held_out_exact_match": accuracy})


def train_language_model(
    recipe: Recipe[Any], tokenizer: Any, splits: dict[str, torch.Tensor], seed: int, desc: str, sample_tokens: int
) -> tuple[GPT, History, list[str]]:
    """A GPT of ``recipe`` trained on random windows of ``splits["train"]``, evaluated every ``recipe.eval_every``
    steps on each split, with a sample of ``sample_tokens`` after a newline at each evaluation; ``seed`` sets the
    initial weights and the order of the windows. Returns the model, its history and its samples."""
    set_seed(seed)
    model = GPT(tokenizer.vocab_size, **asdict(recipe.model))
    prompt = torch.tensor([tokenizer.encode("\n")])
    samples = []

    def evaluate(model: GPT) -> dict[str, float]:
        losses = estimate_loss(model, splits, recipe.training.batch_size, iters=recipe.eval_batches)
        out = model.generate(prompt, sample_tokens, temperature=0.8, generator=torch.Generator().manual_seed(0))
        samples.append(tokenizer.decode(out[0]))
        return losses

    set_seed(seed)
    windows = random_windows(splits["train"], recipe.model.block_size, recipe.training.batch_size, seed=seed)
    history = train(
        model, windows, lambda m, x, y: m(x, y)[1], recipe.training, device=CPU, eval_fn=evaluate,
        eval_every=recipe.eval_every, desc=f"{desc}, seed {seed}",
    )  # fmt: skip
    return model, history, samples


def train_shakespeare_gpt(seed: int = 0) -> tuple[GPT, History, list[str]]:
    """Chapter 07's CPU run: the same data, model, recipe, evaluations and samples; ``seed`` sets the initial weights
    and the order of the windows (the chapter's is 0). Returns the model, its history and its samples."""
    text = load_tiny_shakespeare()
    tokenizer = CharTokenizer(text, specials=False)
    train_ids, val_ids = split_ids(text, tokenizer)
    splits = {"train": train_ids, "val": val_ids}
    return train_language_model(PRETRAINED["shakespeare_gpt"], tokenizer, splits, seed, "GPT", sample_tokens=200)


def best_val_loss(history: History) -> float:
    return min(losses["val"] for _, losses in history.evals)


def shakespeare_gpt() -> Path:
    model, history, samples = train_shakespeare_gpt()
    return save("shakespeare_gpt", model, history, {"best_val_loss": best_val_loss(history)}, samples)


def multi30k_translator() -> Path:
    """Chapter 08's run: the tokenizer learned on the training sentences, then the recipe's model trained on
    them, measuring the validation loss; the test-set BLEU is measured on the saved (half-precision) weights."""
    recipe = PRETRAINED["multi30k_translator"]
    train_pairs, val_pairs = load_multi30k("train"), load_multi30k("val")
    tokenizer = learn_bpe_fast([s for pair in train_pairs for s in pair], recipe.vocab_size, recipe.min_frequency)
    model, history = train_translator(recipe, tokenizer, train_pairs, val_pairs, device=CPU)
    metrics = {"val_loss": history.evals[-1][1]["val_loss"]}
    path = save("multi30k_translator", model, history, metrics, half=True, tokenizer=tokenizer.to_dict())
    return evaluate_translator(path)


def evaluate_translator(path: Path) -> Path:
    """Add to the checkpoint at ``path`` the BLEU of its saved weights: on the validation set, greedy and with beam 4
    for each length-penalty alpha tried; on the test set, greedy and with beam 4 at the alpha that validation chose."""
    from course_utils.training.translation import evaluate_bleu

    pretrained = load_pretrained("multi30k_translator")
    tokenizer = BPETokenizer.from_dict(pretrained.tokenizer)
    model = Transformer(tokenizer.vocab_size, tokenizer.vocab_size, **asdict(pretrained.recipe.model))
    model.load_state_dict(pretrained.state_dict)
    saved = torch.load(path, weights_only=True)
    saved["metrics"].update(evaluate_bleu(model, tokenizer, load_multi30k("test"), load_multi30k("val")))
    torch.save(saved, path)
    return path


def byte_gpt_data(tokenizer: ByteBPE) -> dict[str, torch.Tensor]:
    """Chapter 12's pretraining text as ids: ``train`` (Shakespeare's first 90%, then Multi30k's English captions)
    and ``val`` (Shakespeare's last 10%)."""
    return {k: torch.tensor(tokenizer.encode(v), dtype=torch.long) for k, v in pretraining_texts().items()}


def train_byte_gpt(seed: int = 0) -> tuple[GPT, ByteBPE, History, list[str]]:
    """Chapter 12's pretrained model: its byte-level vocabulary learned on the training text, then the recipe's GPT
    trained on it. Returns the model, its tokenizer, its history and samples."""
    recipe = PRETRAINED["byte_gpt"]
    texts = pretraining_texts()
    tokenizer = train_byte_bpe(texts["train"].splitlines(keepends=True), recipe.vocab_size, recipe.special_tokens)
    model, history, samples = train_language_model(
        recipe, tokenizer, byte_gpt_data(tokenizer), seed, "byte-level GPT", sample_tokens=80
    )
    return model, tokenizer, history, samples


def byte_gpt() -> Path:
    model, tokenizer, history, samples = train_byte_gpt()
    metrics = {"val_loss": history.evals[-1][1]["val"]}
    return save("byte_gpt", model, history, metrics, samples, half=True, tokenizer=tokenizer.to_dict())


BUILDERS: dict[str, Callable[[], Path]] = {
    "date_transformer": date_transformer,
    "shakespeare_gpt": shakespeare_gpt,
    "multi30k_translator": multi30k_translator,
    "byte_gpt": byte_gpt,
}


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
