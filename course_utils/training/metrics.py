"""How good a trained model is: exact match (whole outputs right), corpus BLEU and how sure a BLEU gain is, and a
language model's loss.

Shape letters: B batch, T sequence length.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ..data import CharTokenizer, encode_pairs, random_windows
from ..dry_run import DRY_RUN_ROWS, DRY_RUN_STEPS, cut_short
from ..model import GPT, Transformer, padding_mask
from ..settings import GPU_DRY_RUN
from ..utils import eval_mode
from .decoding import greedy_decode

__all__ = ["BleuDifference", "bleu", "bleu_difference", "estimate_loss", "exact_match"]


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

    for name, texts in (("hypotheses", hypotheses), ("references", references)):
        if isinstance(texts, str):  # a string is a sequence too: of one-character "sentences"
            raise TypeError(f"{name} must be a list of sentences, one per line; got one string: wrap it, [{name}]")
    hypotheses, references = list(hypotheses), list(references)
    if len(hypotheses) != len(references) or not hypotheses:
        raise ValueError(
            f"BLEU pairs each hypothesis with its reference: got {len(hypotheses)} hypotheses for {len(references)} "
            "references" + ("" if hypotheses else " (none to score)")
        )
    metric = BLEU()
    score = metric.corpus_score(hypotheses, [references])
    return float(score.score), str(metric.get_signature())


@dataclass(frozen=True)
class BleuDifference:
    """BLEU(b) - BLEU(a) on the same sentences, and the interval the paired bootstrap gives it."""

    bleu_a: float
    bleu_b: float
    difference: float
    low: float  # the interval holding the middle `level` share of the resampled differences
    high: float
    level: float
    samples: int

    def __str__(self) -> str:
        return f"{self.difference:+.2f} ({self.level:.0%} interval {self.low:+.2f} to {self.high:+.2f})"


def bleu_difference(
    hypotheses_a: Sequence[str],
    hypotheses_b: Sequence[str],
    references: Sequence[str],
    *,
    samples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> BleuDifference:
    """How sure is a BLEU gain? The paired bootstrap (Koehn, 2004): draw as many sentences as there are, with
    replacement, score both systems on the same draw, and repeat ``samples`` times; the middle ``level`` share of the
    differences is the interval. Each sentence's n-gram counts and lengths are computed once by sacreBLEU (the same
    tokenisation and smoothing as ``bleu``); a draw sums them, as corpus BLEU does."""
    from sacrebleu.metrics.bleu import BLEU

    if not (len(hypotheses_a) == len(hypotheses_b) == len(references) > 0):
        raise ValueError(
            f"need as many translations from each system as references (and at least one); got "
            f"{len(hypotheses_a)}, {len(hypotheses_b)} and {len(references)}"
        )
    metric = BLEU()

    def statistics(hypotheses: Sequence[str]) -> np.ndarray:
        rows = []
        for hypothesis, reference in zip(hypotheses, references):
            s = metric.corpus_score([hypothesis], [[reference]])
            rows.append([s.sys_len, s.ref_len, *s.counts, *s.totals])
        return np.array(rows, dtype=np.int64)  # (N, 10): lengths, matches of 1-4-grams, 1-4-grams

    def score(summed: np.ndarray) -> float:
        correct, total = [int(c) for c in summed[2:6]], [int(t) for t in summed[6:10]]
        sys_len, ref_len = int(summed[0]), int(summed[1])
        return float(BLEU.compute_bleu(correct, total, sys_len, ref_len, smooth_method=metric.smooth_method).score)

    a, b = statistics(hypotheses_a), statistics(hypotheses_b)
    draws = np.random.default_rng(seed).integers(0, len(references), size=(samples, len(references)))
    differences = [score(b[draw].sum(0)) - score(a[draw].sum(0)) for draw in draws]
    low, high = np.quantile(differences, [(1 - level) / 2, (1 + level) / 2])
    bleu_a, bleu_b = score(a.sum(0)), score(b.sum(0))
    return BleuDifference(bleu_a, bleu_b, bleu_b - bleu_a, float(low), float(high), level, samples)


@torch.no_grad()
def estimate_loss(
    model: GPT, splits: dict[str, Tensor], batch_size: int, iters: int = 50, seed: int = 1234
) -> dict[str, float]:
    """Mean loss of ``model`` over ``iters`` batches of random windows of each split. The windows are the
    same at every call (fixed ``seed``), so successive estimates are comparable."""
    if iters < 1 or batch_size < 1:
        raise ValueError(
            f"estimate_loss averages over iters >= 1 batches of batch_size >= 1; got {iters}, {batch_size}"
        )
    device = next(model.parameters()).device
    if GPU_DRY_RUN.is_on():  # a dry run passes the code, measures nothing: a few small batches
        iters, batch_size = min(iters, DRY_RUN_STEPS), min(batch_size, DRY_RUN_ROWS)
        cut_short("estimate_loss")
    out = {}
    with eval_mode(model), torch.no_grad():
        for name, data in splits.items():
            windows = random_windows(data, model.block_size, batch_size, seed=seed)
            losses = [model(*(t.to(device) for t in next(windows)))[1] for _ in range(iters)]
            out[name] = torch.stack([loss for loss in losses if loss is not None]).mean().item()
    return out
