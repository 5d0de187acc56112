"""The course's training runs, each defined once: a model's sizes and how to train it.

Notebooks, the checkpoint builder (``tools/build_checkpoints.py``) and the benchmarks import these
objects and print them; the shipped weights record the recipe they were trained with.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Generic, TypeVar

from ..data.byte_bpe import END_OF_TEXT
from ..model import GPTConfig, TransformerConfig
from .instruct import ChatTemplate
from .loop import TrainConfig

__all__ = [
    "BYTE_GPT",
    "DATE_TRANSFORMER",
    "MULTI30K_QUICK",
    "MULTI30K_TRANSLATOR",
    "SHAKESPEARE_GPT_CPU",
    "SHAKESPEARE_GPT_GPU",
    "ByteGPTRecipe",
    "Recipe",
    "TranslationRecipe",
]

ModelConfig = TypeVar("ModelConfig", TransformerConfig, GPTConfig)


@dataclass(frozen=True)
class Recipe(Generic[ModelConfig]):
    """A model's sizes (``model``), how to train it (``training``), and how to evaluate it: every
    ``eval_every`` steps (0: only at the end), on ``eval_batches`` batches per data split."""

    model: ModelConfig
    training: TrainConfig
    eval_every: int = 0
    eval_batches: int = 20


# Chapter 06: date normalisation, 97% to 99.9% of unseen dates right (five seeds, tools/seed_spread.py) after half a
# minute of training on a laptop CPU. Fresh examples every step leave nothing to overfit: no dropout.
DATE_TRANSFORMER = Recipe(
    model=TransformerConfig(d_model=64, n_heads=4, n_layers=2, d_ff=128, dropout=0.0, max_len=64),
    training=TrainConfig(steps=500, batch_size=64, lr=5e-3, warmup_steps=50, schedule="cosine", label_smoothing=0.1),
)

# Chapter 07, on a GPU: nanoGPT's Shakespeare model and settings (AdamW, weight decay 0.1, beta2 0.99, a peak
# learning rate of 1e-3 after 100 warm-up steps, cosine decay to a tenth of it), 6 layers, 6 heads, 384
# dimensions, context 256, dropout 0.2: 10.65 M parameters. 2,500 steps, half of nanoGPT's 5,000.
SHAKESPEARE_GPT_GPU = Recipe(
    model=GPTConfig(block_size=256, d_model=384, n_heads=6, n_layers=6, dropout=0.2, bias=False),
    training=TrainConfig(
        steps=2500,
        batch_size=64,
        lr=1e-3,
        warmup_steps=100,
        schedule="cosine",
        label_smoothing=0.0,
        weight_decay=0.1,
        betas=(0.9, 0.99),
        grad_clip=1.0,
    ),
    eval_every=250,
)
# On a CPU, a small variant trained for under a minute: nanoGPT's CPU sizes (128 dimensions, 4 heads, context 64,
# batches of 12) with 3 layers instead of 4, which reach the same validation loss in this time. So small a model
# takes a larger learning rate: 4e-3 after 50 warm-up steps gets further in 1,100 steps than nanoGPT's 1e-3 does
# in 1,500 (benchmarks/README.md has the runs tried).
SHAKESPEARE_GPT_CPU = Recipe(
    model=GPTConfig(block_size=64, d_model=128, n_heads=4, n_layers=3, dropout=0.0, bias=False),
    training=replace(SHAKESPEARE_GPT_GPU.training, steps=1100, batch_size=12, lr=4e-3, warmup_steps=50),
    eval_every=275,
)


@dataclass(frozen=True)
class TranslationRecipe(Recipe[TransformerConfig]):
    """A ``Recipe`` that also learns its tokenizer: one byte-pair vocabulary of ``vocab_size`` entries for both
    languages, from the merges seen at least ``min_frequency`` times in the training sentences."""

    vocab_size: int = 4000
    min_frequency: int = 2


# Chapter 08: Multi30k German -> English on a 2-core CPU in about an hour. A shared vocabulary of 4,000 subwords
# (3,894 merges) lets one matrix embed both languages and project back (section 3.4). The sizes are the usual
# small model for this corpus (3 + 3 layers, 256 dimensions, 8 heads, feed-forward 512: 4.98 M parameters,
# under 10 MB in half precision), trained post-norm as in the paper, with label smoothing 0.1 and dropout 0.1,
# on batches of 64 sentence pairs of similar lengths, for 7,000 steps (about 15 passes over the 29,000 pairs).
MULTI30K_TRANSLATOR = TranslationRecipe(
    model=TransformerConfig(
        d_model=256, n_heads=8, n_layers=3, d_ff=512, dropout=0.1, max_len=256, share_embeddings=True
    ),
    training=TrainConfig(
        steps=7000, batch_size=64, lr=1e-3, warmup_steps=600, schedule="cosine", label_smoothing=0.1, grad_clip=1.0
    ),
    eval_every=1000,
)

# Chapter 08's live run on a CPU: a small translator (2 + 2 layers of 128 dimensions, batches of 32 pairs) that
# learns for about half a minute, long enough to watch its translations take shape, with the shipped model's
# vocabulary.
MULTI30K_QUICK = TranslationRecipe(
    model=replace(MULTI30K_TRANSLATOR.model, d_model=128, n_heads=4, n_layers=2, d_ff=256),
    training=replace(MULTI30K_TRANSLATOR.training, steps=250, batch_size=32, lr=3e-3, warmup_steps=50),
    eval_every=125,
)


@dataclass(frozen=True)
class ByteGPTRecipe(Recipe[GPTConfig]):
    """A ``Recipe`` for a GPT on byte-level BPE tokens (``train_byte_bpe``): ``vocab_size`` tokens in all, the
    ``special_tokens`` last."""

    vocab_size: int = 1024
    special_tokens: tuple[str, ...] = (END_OF_TEXT, *ChatTemplate().special_tokens)


# Chapter 12's pretrained model, the one it adapts: chapter 07's CPU GPT with a context of 96 byte-level BPE tokens
# (about 230 characters) from a vocabulary of 1,024, trained on Tiny Shakespeare and Multi30k's English captions (the
# words its instructions are made of). The special tokens of the chat template exist from the start but never occur
# in pretraining: tuning teaches them. Dropout 0.1 over 3,000 steps of 16 windows (4.6 M tokens, about 4 passes).
BYTE_GPT = ByteGPTRecipe(
    model=replace(SHAKESPEARE_GPT_CPU.model, block_size=96, dropout=0.1),
    training=replace(SHAKESPEARE_GPT_CPU.training, steps=3000, batch_size=16, warmup_steps=100),
    eval_every=500,
)
