"""Sequence to sequence: the teacher-forcing loss, and batches of sentence pairs of different lengths.

Shape letters: B batch, S source length, T target length, V vocabulary size. ``model`` is a ``Transformer``
(or ``TorchTransformer``): ``encode(src, src_mask)``, ``decode(tgt, memory, src_mask, tgt_mask)``, and
``forward`` = both. Masks are bool, True = may attend.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..data import Tokenizer
from ..model import Transformer, padding_mask, target_mask

__all__ = ["encode_corpus", "pad_batch", "seq2seq_loss", "translation_batches", "validation_loss"]


def seq2seq_loss(model: nn.Module, src: Tensor, tgt: Tensor, pad_id: int, label_smoothing: float = 0.0) -> Tensor:
    """Teacher forcing: the decoder reads ``<bos> y_1 ... y_{n-1}`` and must predict ``y_1 ... <eos>``.

    ``src (B, S)`` and ``tgt (B, T)`` are padded with ``pad_id``; padded target positions are
    ignored by the loss. Label smoothing as in ``F.cross_entropy`` (section 5.4 of the paper).
    """
    if tgt.dim() != 2 or tgt.size(1) < 2:
        raise ValueError(
            f"tgt must be (B, T) with T >= 2 (<bos>, then at least one token to predict); got shape {tuple(tgt.shape)}"
        )
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]  # (B, T - 1) each: input shifted right by one
    logits = model(src, tgt_in, padding_mask(src, pad_id), target_mask(tgt_in, pad_id))  # (B, T - 1, V)
    return F.cross_entropy(
        logits.reshape(-1, logits.size(-1)), tgt_out.reshape(-1), ignore_index=pad_id, label_smoothing=label_smoothing
    )


Example = tuple[list[int], list[int]]  # (source ids, target ids with <bos> and <eos>)


def encode_corpus(pairs: Sequence[tuple[str, str]], tokenizer: Tokenizer) -> list[Example]:
    """Each (source, target) sentence pair as ids: the source plain, the target between ``<bos>`` and ``<eos>``."""
    return [(tokenizer.encode(src), tokenizer.encode(tgt, bos=True, eos=True)) for src, tgt in pairs]


def pad_batch(rows: Sequence[Sequence[int]], pad_id: int) -> Tensor:
    """Token lists of different lengths -> one LongTensor ``(B, longest)`` on the CPU (move it with ``.to(device)``),
    padded on the right with ``pad_id``."""
    if len(rows) == 0:
        raise ValueError("pad_batch needs at least one row of token ids")
    out = torch.full((len(rows), max(len(r) for r in rows)), pad_id, dtype=torch.long, device="cpu")
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.as_tensor(row, dtype=torch.long, device="cpu")  # a list or a tensor row
    return out


def translation_batches(
    examples: Sequence[Example], batch_size: int, pad_id: int, seed: int = 0, pool: int = 50
) -> Iterator[tuple[Tensor, Tensor]]:
    """Endless ``(src (B, S), tgt (B, T))`` batches, epoch after epoch. Each epoch shuffles the examples, sorts
    every ``pool`` batches' worth by length so that a batch holds sentences of similar lengths (little
    padding), and shuffles the order of the batches."""
    rng = random.Random(seed)
    order = list(range(len(examples)))
    while True:
        rng.shuffle(order)
        batches = []
        for start in range(0, len(order), batch_size * pool):
            chunk = sorted(
                order[start : start + batch_size * pool], key=lambda i: (len(examples[i][0]), len(examples[i][1]))
            )
            batches += [chunk[k : k + batch_size] for k in range(0, len(chunk), batch_size)]
        rng.shuffle(batches)
        for batch in batches:
            yield (
                pad_batch([examples[i][0] for i in batch], pad_id),
                pad_batch([examples[i][1] for i in batch], pad_id),
            )


@torch.no_grad()
def validation_loss(model: Transformer, examples: Sequence[Example], pad_id: int, batch_size: int = 128) -> float:
    """Mean cross-entropy per target token (teacher forcing, no label smoothing) over ``examples``."""
    device = next(model.parameters()).device
    total, count = 0.0, 0
    for start in range(0, len(examples), batch_size):
        chunk = examples[start : start + batch_size]
        src, tgt = (
            pad_batch([s for s, _ in chunk], pad_id).to(device),
            pad_batch([t for _, t in chunk], pad_id).to(device),
        )
        n = int((tgt[:, 1:] != pad_id).sum())  # the target tokens the loss averages over
        total += float(seq2seq_loss(model, src, tgt, pad_id)) * n
        count += n
    return total / max(count, 1)
