"""Chapter 08's translator: build and train the recipe's ``Transformer`` on sentence pairs, and measure its BLEU.

Sentences are encoded by one ``BPETokenizer`` shared by both languages; targets carry ``<bos>`` and ``<eos>``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import torch

from ..data import BPETokenizer
from ..model import Transformer
from ..utils import set_seed
from .decoding import translate
from .loop import History, train
from .metrics import bleu
from .recipes import TranslationRecipe
from .seq2seq import encode_corpus, seq2seq_loss, translation_batches, validation_loss

__all__ = ["ALPHAS", "evaluate_bleu", "train_translator"]


def train_translator(
    recipe: TranslationRecipe,
    tokenizer: BPETokenizer,
    train_pairs: Sequence[tuple[str, str]],
    val_pairs: Sequence[tuple[str, str]] = (),
    *,
    steps: int | None = None,
    device: torch.device | str | None = None,
    seed: int = 0,
    progress: bool = True,
    on_eval: Callable[[Transformer], None] | None = None,
    checkpoint: str | Path | None = None,
    checkpoint_every: int = 0,
    keep: dict[str, Any] | None = None,
) -> tuple[Transformer, History]:
    """Build the recipe's ``Transformer`` (one vocabulary, shared embeddings) and train it on ``train_pairs``,
    measuring the validation loss every ``recipe.eval_every`` steps and at the end; ``on_eval(model)``, if given,
    runs then too (e.g. to translate a few sentences). ``steps`` shortens the run (the schedule is then squeezed
    to fit). ``checkpoint``, ``checkpoint_every`` and ``keep`` are ``train``'s: a run that survives a disconnect."""
    config = recipe.training if steps is None else replace(recipe.training, steps=steps)
    set_seed(seed)
    vocab = tokenizer.vocab_size
    model = Transformer(vocab, vocab, **asdict(recipe.model)).to(device or "cpu")
    examples = encode_corpus(train_pairs, tokenizer)
    val_examples = encode_corpus(val_pairs, tokenizer)
    pad, smoothing = tokenizer.pad_id, config.label_smoothing

    def evaluate(_: object) -> dict[str, float]:  # train calls it with the model being trained: `model`
        if on_eval is not None:
            on_eval(model)
        return {"val_loss": validation_loss(model, val_examples, pad)} if val_examples else {}

    history = train(
        model,
        translation_batches(examples, config.batch_size, pad, seed=seed),
        lambda m, src, tgt: seq2seq_loss(m, src, tgt, pad, smoothing),
        config,
        device=device,
        eval_fn=evaluate if val_examples or on_eval else None,
        eval_every=recipe.eval_every,
        progress=progress,
        desc="translator",
        checkpoint=checkpoint,
        checkpoint_every=checkpoint_every,
        keep=keep,
    )
    return model, history


ALPHAS = (0.6, 0.8, 1.0, 1.2, 1.5, 2.0, 2.5)  # the length-penalty alphas tried on the validation set


def evaluate_bleu(
    model: Transformer,
    tokenizer: BPETokenizer,
    test_pairs: Sequence[tuple[str, str]],
    val_pairs: Sequence[tuple[str, str]],
    beam_size: int = 4,
    alphas: Sequence[float] = ALPHAS,
) -> dict[str, float]:
    """Choose the length penalty's ``alpha`` for ``beam_size`` on ``val_pairs`` (the best BLEU of ``alphas``), then
    measure BLEU on ``test_pairs``, greedy and with that beam. Returns ``{"val_bleu_beam1": ...,
    "val_bleu_beam4_alpha0.6": ..., ..., "alpha": ..., "bleu_beam1": ..., "bleu_beam4": ...}``."""

    def score(pairs: Sequence[tuple[str, str]], k: int, alpha: float = 1.0) -> float:
        sources, references = [s for s, _ in pairs], [t for _, t in pairs]
        return bleu(translate(model, tokenizer, sources, beam_size=k, alpha=alpha), references)[0]

    metrics = {"val_bleu_beam1": score(val_pairs, 1)}
    for alpha in alphas:
        metrics[f"val_bleu_beam{beam_size}_alpha{alpha}"] = score(val_pairs, beam_size, alpha)
    best = max(alphas, key=lambda a: metrics[f"val_bleu_beam{beam_size}_alpha{a}"])
    metrics["alpha"] = best
    metrics["bleu_beam1"] = score(test_pairs, 1)
    metrics[f"bleu_beam{beam_size}"] = score(test_pairs, beam_size, best)
    return metrics
