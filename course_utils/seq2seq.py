"""Sequence to sequence: the teacher-forcing loss, greedy decoding, and exact-match evaluation.

Shape letters: B batch, S source length, T target length, V vocabulary size. ``model`` is a ``Transformer``
(or ``TorchTransformer``): ``encode(src, src_mask)``, ``decode(tgt, memory, src_mask, tgt_mask)``, and
``forward`` = both. Masks are bool, True = may attend.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .data import CharTokenizer, encode_pairs
from .masks import causal_mask, padding_mask, target_mask
from .model import Transformer
from .utils import eval_mode

__all__ = ["exact_match", "greedy_decode", "seq2seq_loss"]


def seq2seq_loss(model: nn.Module, src: Tensor, tgt: Tensor, pad_id: int, label_smoothing: float = 0.0) -> Tensor:
    """Teacher forcing: the decoder reads ``<bos> y_1 ... y_{n-1}`` and must predict ``y_1 ... <eos>``.

    ``src (B, S)`` and ``tgt (B, T)`` are padded with ``pad_id``; padded target positions are
    ignored by the loss. Label smoothing as in ``F.cross_entropy`` (section 5.4 of the paper).
    """
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]  # (B, T - 1) each: input shifted right by one
    logits = model(src, tgt_in, padding_mask(src, pad_id), target_mask(tgt_in, pad_id))  # (B, T - 1, V)
    return F.cross_entropy(
        logits.reshape(-1, logits.size(-1)), tgt_out.reshape(-1), ignore_index=pad_id, label_smoothing=label_smoothing
    )


@torch.no_grad()
def greedy_decode(
    model: Transformer,
    src: Tensor,
    src_mask: Tensor | None,
    max_len: int,
    bos_id: int,
    eos_id: int,
    pad_id: int | None = None,
) -> Tensor:
    """Decode ``src`` ``(B, S)`` one token at a time, always taking the most likely next token.

    Returns a LongTensor ``(B, <= max_len)`` that starts with ``bos_id``. Decoding stops when every
    row has produced ``eos_id`` or ``max_len`` tokens; a finished row is filled with ``pad_id`` (or
    ``eos_id`` when no ``pad_id`` is given). It runs in eval mode (no dropout) and restores the mode.
    """
    if max_len < 1:
        raise ValueError(f"max_len must be at least 1 (the BOS token); got {max_len}")
    with eval_mode(model):
        memory = model.encode(src, src_mask)  # (B, S, d_model)
        ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long, device=src.device)  # (B, 1)
        done = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
        filler = eos_id if pad_id is None else pad_id
        for _ in range(max_len - 1):
            logits = model.decode(ys, memory, src_mask, causal_mask(ys.size(1), device=src.device))
            next_token = logits[:, -1].argmax(dim=-1)  # (B,): the last position predicts the next token
            next_token = next_token.masked_fill(done, filler)
            ys = torch.cat([ys, next_token[:, None]], dim=1)  # (B, t + 1)
            done |= next_token == eos_id
            if bool(done.all()):
                break
    return ys


@torch.no_grad()
def exact_match(
    model: Transformer,
    pairs: Sequence[tuple[str, str]],
    src_tokenizer: CharTokenizer,
    tgt_tokenizer: CharTokenizer,
    *,
    max_len: int | None = None,
    batch_size: int = 512,
) -> tuple[float, list[str]]:
    """Greedy-decode every source string; return (fraction exactly right, the predictions)."""
    device = next(model.parameters()).device
    src, tgt = encode_pairs(pairs, src_tokenizer, tgt_tokenizer)
    max_len = tgt.size(1) + 2 if max_len is None else max_len
    predictions = []
    for start in range(0, len(pairs), batch_size):
        chunk = src[start : start + batch_size].to(device)
        out = greedy_decode(
            model, chunk, padding_mask(chunk, src_tokenizer.pad_id), max_len,
            tgt_tokenizer.bos_id, tgt_tokenizer.eos_id, tgt_tokenizer.pad_id,
        )  # fmt: skip
        predictions += [tgt_tokenizer.decode(row) for row in out.cpu()]
    correct = sum(p == t for p, (_, t) in zip(predictions, pairs))
    return correct / max(len(pairs), 1), predictions
