"""How good a trained model is: exact match (whole outputs right), corpus BLEU, and a language model's loss.

Shape letters: B batch, T sequence length.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from ..data import CharTokenizer, encode_pairs, random_windows
from ..model import GPT, Transformer, padding_mask
from ..utils import eval_mode
from .decoding import greedy_decode

__all__ = ["bleu", "estimate_loss", "exact_match"]


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
            model,
            chunk,
            padding_mask(chunk, src_tokenizer.pad_id),
            max_len=max_len,
            bos_id=tgt_tokenizer.bos_id,
            eos_id=tgt_tokenizer.eos_id,
            pad_id=tgt_tokenizer.pad_id,
        )
        predictions += [tgt_tokenizer.decode(row) for row in out.cpu()]
    correct = sum(p == t for p, (_, t) in zip(predictions, pairs))
    return correct / max(len(pairs), 1), predictions


def bleu(hypotheses: Sequence[str], references: Sequence[str]) -> tuple[float, str]:
    """Corpus BLEU by sacreBLEU on detokenised, case-sensitive text, and sacreBLEU's signature, which says
    exactly how it was computed (tokenizer, casing, smoothing, version) so that scores can be compared."""
    from sacrebleu.metrics.bleu import BLEU

    metric = BLEU()
    score = metric.corpus_score(list(hypotheses), [list(references)])
    return float(score.score), str(metric.get_signature())


@torch.no_grad()
def estimate_loss(
    model: GPT, splits: dict[str, Tensor], batch_size: int, iters: int = 50, seed: int = 1234
) -> dict[str, float]:
    """Mean loss of ``model`` over ``iters`` batches of random windows of each split. The windows are the
    same at every call (fixed ``seed``), so successive estimates are comparable."""
    device = next(model.parameters()).device
    out = {}
    with eval_mode(model):
        for name, data in splits.items():
            windows = random_windows(data, model.block_size, batch_size, seed=seed)
            losses = [model(*(t.to(device) for t in next(windows)))[1] for _ in range(iters)]
            out[name] = torch.stack([loss for loss in losses if loss is not None]).mean().item()
    return out
