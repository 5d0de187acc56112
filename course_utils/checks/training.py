"""Checkers for teacher forcing, the loss, weight tying and evaluation (chapters 05 and 06)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from ._core import NotYet, Verdict, backpropagates, call, name_mistake, same, verdict

__all__ = [
    "check_label_smoothing",
    "check_sequence_accuracy",
    "check_weight_tying",
]


def check_label_smoothing(fn: Callable[..., Any]) -> Verdict:
    """``fn(logits (N, V), target (N,), smoothing)`` returns the mean label-smoothed cross-entropy, with PyTorch's
    convention: the true token's target is 1 - smoothing + smoothing / V, every other token's smoothing / V."""

    def run() -> str:
        g = torch.Generator().manual_seed(0)
        logits, target = torch.randn(6, 5, generator=g), torch.randint(0, 5, (6,), generator=g)
        V = logits.size(-1)
        log_p = logits.log_softmax(-1)  # (N, V)
        true = log_p.gather(1, target[:, None]).squeeze(1)  # (N,): log p of the true token
        for smoothing in (0.0, 0.1, 0.3):
            got = call(fn, logits, target, smoothing)
            if not isinstance(got, Tensor | float | int):
                raise NotYet(f"return the loss as a tensor or a number; got {type(got).__name__}")
            got = torch.as_tensor(got, dtype=logits.dtype)
            expected = F.cross_entropy(logits, target, label_smoothing=smoothing)
            if smoothing:
                others = log_p.sum(-1) - true  # (N,): sum of log p over the V - 1 other tokens
                mistakes = [
                    (F.cross_entropy(logits, target), "the smoothing is ignored: this is plain cross-entropy"),
                    (
                        (-(1 - smoothing) * true - smoothing / (V - 1) * others).mean(),
                        "smoothing / (V - 1) on each of the V - 1 other tokens and 1 - smoothing on the true one: a "
                        "convention of its own; PyTorch's, used here, spreads smoothing / V over all V tokens, the "
                        "true one included",
                    ),
                    (
                        (-(1 - smoothing) * true - smoothing / V * others).mean(),
                        "the true token gets 1 - smoothing: it must be 1 - smoothing + smoothing / V, so that the "
                        "smoothed target sums to 1",
                    ),
                ]
            else:
                mistakes = []
            mistakes.append((expected * len(target), "the sum over positions: take the mean"))
            name_mistake(got, expected, mistakes, f"at smoothing={smoothing}")
            same(got, expected, f"the loss at smoothing={smoothing}")
        backpropagates(fn, logits, target, 0.1, what="the loss")
        return (
            "label-smoothed cross-entropy is right, equal to PyTorch's F.cross_entropy(label_smoothing=...) "
            "at smoothing 0, 0.1 and 0.3."
        )

    return verdict(run)


def check_weight_tying(fn: Callable[..., Any]) -> Verdict:
    """``fn(model)`` ties, in place, a ``Transformer``'s output projection ``model.generator.weight`` ``(V, d_model)``
    to its target embedding ``model.tgt_embed.weight`` ``(V, d_model)``: ONE Parameter used twice."""

    def run() -> str:
        from ..model.transformer import Transformer
        from ..utils import count_parameters

        torch.manual_seed(0)
        model = Transformer(11, 13, d_model=16, n_heads=2, n_layers=1, d_ff=32, dropout=0.0)
        before = count_parameters(model)
        call(fn, model)
        weight, embedding = model.generator.weight, model.tgt_embed.weight
        if weight is model.src_embed.weight:
            raise NotYet(
                "tied to the SOURCE embedding: the output projection scores target tokens, so share model.tgt_embed"
            )
        if weight is not embedding:
            if weight.shape == (16, 13):
                raise NotYet(
                    "transposed: nn.Linear stores its weight as (out, in) = (V, d_model), the embedding's shape "
                    "already; share it as it is"
                )
            if weight.shape == embedding.shape and weight.data_ptr() == embedding.data_ptr():
                raise NotYet(
                    "one storage (through .data), but still two Parameters: each gets its own gradient and optimizer "
                    "state, and count_parameters counts both. Share the Parameter object itself: assign it, as a "
                    "Parameter, to the output projection's weight attribute"
                )
            if weight.shape == embedding.shape and torch.equal(weight, embedding):
                raise NotYet(
                    "the values are copied, not shared: the two start equal and drift apart at the first step. "
                    "Share the Parameter object itself instead of its values"
                )
            raise NotYet("model.generator.weight is not model.tgt_embed.weight: make them one and the same Parameter")
        after = count_parameters(model)
        src, tgt = torch.tensor([[4, 5, 6]]), torch.tensor([[1, 7, 8]])
        logits = call(model, src, tgt)
        if not isinstance(logits, Tensor) or logits.shape != (1, 3, 13):
            raise NotYet("after tying, the model should still return logits (B, T, V)")
        saved, matrix = before - after, 13 * 16  # V x d_model: the matrix now counted once
        rest = saved - matrix
        if rest == 13 and model.generator.bias is None:
            detail = f" and {rest:,} for the output projection's bias (V = 13), which your answer removed"
        elif rest:
            detail = f" and {rest:,} for other parameters your answer {'removed' if rest > 0 else 'added'}"
        else:
            detail = ""
        return (
            f"one Parameter, used twice: {before:,} -> {after:,} parameters, {saved:,} fewer: "
            f"{matrix:,} = V x d_model = 13 x 16 for the shared matrix (counted once){detail}; "
            "its gradient sums both uses."
        )

    return verdict(run)


def check_sequence_accuracy(fn: Callable[..., Any]) -> Verdict:
    """``fn(predictions (B, T), labels (B, T), pad_id)`` returns the fraction of rows whose every non-pad label is
    predicted right (what the prediction says where the label is ``<pad>`` does not count)."""

    def run() -> str:
        pad = 0
        labels = torch.tensor([[5, 6, 7, 2], [5, 2, 0, 0], [8, 9, 2, 0], [4, 2, 0, 0], [6, 6, 6, 2]])
        predictions = torch.tensor([[5, 6, 7, 2], [5, 2, 9, 9], [8, 3, 2, 0], [4, 2, 0, 0], [6, 6, 6, 5]])
        got = call(fn, predictions.clone(), labels.clone(), pad)
        if isinstance(got, Tensor) and got.numel() == 1:
            got = got.item()
        if not isinstance(got, float | int):
            raise NotYet(f"return one number, the fraction of rows right; got {type(got).__name__}")
        real = labels != pad
        right = predictions == labels
        mistakes = [
            (3, "that is the number of rows right: divide by the number of rows, B"),
            (
                right.all(1).float().mean().item(),
                "the padded positions count: row 1 is right up to its <eos> and wrong only where the label is <pad>, "
                "which the loss ignores; compare only where labels != pad_id",
            ),
            (
                (right & real).sum().item() / real.sum().item(),
                "that is token-level accuracy: a row counts only if EVERY one of its tokens is right",
            ),
            (
                right.float().mean().item(),
                "that is token-level accuracy, padding included: count whole rows, without pads",
            ),
        ]
        for wrong, why in mistakes:
            if abs(float(got) - wrong) < 1e-6:
                raise NotYet(why)
        expected = (right | ~real).all(1).float().mean().item()
        if abs(float(got) - expected) > 1e-6:
            raise NotYet(f"got {float(got):.4g}, expected {expected:.4g} (3 of the 5 rows are right)")
        return "sequence accuracy is right: a row counts when all its real tokens are right; padding is ignored."

    return verdict(run)
