"""Checkers for teacher forcing, the loss, weight tying and evaluation (chapters 05 and 06)."""

from __future__ import annotations

import numbers
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._core import (
    NotYet,
    Verdict,
    backpropagates,
    call,
    differs,
    each_case,
    off_the_cpu,
    on_meta,
    same,
    verdict,
    wrong_device,
)

__all__ = [
    "check_label_smoothing",
    "check_sequence_accuracy",
    "check_weight_tying",
]


def _annotated_smoothing(log_p: Tensor, target: Tensor, smoothing: float, pad: int) -> list[Tensor]:
    """What the Annotated Transformer's ``LabelSmoothing`` gives, written into this exercise as students write it:
    smoothing / (V - 2) on every token but the true one and padding (id ``pad``), 1 - smoothing on the true one;
    with the padding column and the padded rows zeroed, then each mean, or without them."""
    V = log_p.size(-1)
    q = torch.full_like(log_p, smoothing / (V - 2)).scatter(1, target[:, None], 1 - smoothing)
    plain = -(q * log_p).sum(-1)  # (N,)
    q = q.index_fill(1, torch.tensor([pad]), 0.0)
    real = target != pad
    rows = -(q * log_p).sum(-1) * real  # (N,): padded rows count 0
    variants = [plain.mean(), rows.mean()]
    if real.any():
        variants.append(rows.sum() / real.sum())
    return variants


_ANNOTATED = (
    "smoothing / (V - 2) on each other token and 1 - smoothing on the true one: the Annotated Transformer's "
    "convention, which spreads smoothing over V - 2 tokens, excluding padding and the true token. This chapter's "
    "(PyTorch's) spreads it over all V: 1 - smoothing + smoothing / V for the true token, smoothing / V for each other"
)


def check_label_smoothing(fn: Callable[..., Any]) -> Verdict:
    """``fn(logits (N, V), target (N,), smoothing)`` returns the mean label-smoothed cross-entropy, with PyTorch's
    convention: the true token's target is 1 - smoothing + smoothing / V, every other token's smoothing / V. It is
    tested with two vocabulary sizes and three values of smoothing, and must let gradients through."""

    def one(N: int, V: int, seed: int) -> str:
        g = torch.Generator().manual_seed(seed)
        logits, target = torch.randn(N, V, generator=g), torch.randint(0, V, (N,), generator=g)
        gots = _smoothed_losses(fn, logits, target)
        ce = partial(F.cross_entropy, logits, target)
        wrong = [s for s in _SMOOTHINGS if differs(gots[s], ce(label_smoothing=s))]
        if wrong:
            for message, loss in _smoothing_mistakes(logits, target):
                values = {s: loss(s) for s in _SMOOTHINGS}
                shows = [s for s in _SMOOTHINGS if differs(values[s], ce(label_smoothing=s))]
                if shows and not any(differs(gots[s], values[s]) for s in _SMOOTHINGS):
                    raise NotYet(f"at smoothing={shows[0]}: {message}")
            same(gots[wrong[0]], ce(label_smoothing=wrong[0]), f"the loss at smoothing={wrong[0]}")
        backpropagates(
            fn,
            logits,
            target,
            0.1,
            what="the loss",
            reference=lambda logits, target, s: F.cross_entropy(logits, target, label_smoothing=s),
        )
        return (
            "label-smoothed cross-entropy is right, equal to PyTorch's F.cross_entropy(label_smoothing=...) "
            "at smoothing 0, 0.1 and 0.3."
        )

    def confident() -> None:
        """Logits 120 apart, as a trained model's can be: a softmax then underflows to 0 in float32, and its log to
        -inf, where log_softmax stays finite (about -120)."""
        logits = torch.zeros(3, 5)
        logits[:, 1] = 120.0  # (3, 5): every position all but sure of token 1
        target = torch.tensor([1, 0, 1])  # position 1's true token has p = e^-120, which underflows
        expected = F.cross_entropy(logits, target, label_smoothing=0.1)
        got = call(fn, logits, target, 0.1)
        if isinstance(got, Tensor | float | int):
            got = torch.as_tensor(got, dtype=logits.dtype)
            got = got.reshape(()) if got.numel() == 1 else got  # a loss of shape (1,) will do, as above
        if isinstance(got, Tensor) and got.numel() == 1 and not bool(torch.isfinite(got).all()):
            raise NotYet(
                f"with logits 120 apart (a confident model's) the loss is {got.item()}, PyTorch's "
                f"{expected.item():.2f}: ln p taken as log(softmax(...)) is -inf where p underflows to 0. "
                "logits.log_softmax(-1) computes ln p without that underflow"
            )
        same(got, expected, "the loss with logits 120 apart (a confident model's)")

    def run() -> str:
        message = each_case(one, [dict(N=6, V=5, seed=0), dict(N=4, V=9, seed=1)])
        confident()
        logits, target = torch.randn(4, 5), torch.tensor([0, 3, 1, 4])
        off_the_cpu("the loss", on_meta(fn, logits, target, 0.1), getattr(fn, "__name__", "it"))
        return message

    return verdict(run)


_SMOOTHINGS = (0.1, 0.3, 0.0)  # 0.1 first: a convention of its own shows there, not only a side effect at 0


def _smoothed_losses(fn: Callable[..., Any], logits: Tensor, target: Tensor) -> dict[float, Tensor]:
    """The answer's loss at each smoothing, as a tensor of shape (); an answer of another shape or type, or one that
    takes log(0), is told so."""
    N = logits.size(0)
    gots: dict[float, Tensor] = {}
    for smoothing in _SMOOTHINGS:
        got = call(fn, logits, target, smoothing)
        if isinstance(got, np.ndarray | np.generic):
            got = torch.as_tensor(got)
        if not isinstance(got, Tensor | float | int):
            raise NotYet(f"return the loss as a tensor or a number; got {type(got).__name__}")
        got = torch.as_tensor(got, dtype=logits.dtype)
        got = got.reshape(()) if got.numel() == 1 else got  # a loss of shape (1,) will do
        at = f"at smoothing={smoothing}"
        if got.shape == (N,):
            raise NotYet(f"{at}: one loss per position, shape ({N},): return their mean, a single number")
        if got.device == logits.device and got.numel() == 1 and not bool(torch.isfinite(got).all()):
            raise NotYet(
                f"{at}: the loss is {got.item()}: something takes log(0), probably ln q where the target q is 0 "
                "(as in the sum of q (ln q - ln p)). The cross-entropy -sum q ln p needs only "
                "ln p = logits.log_softmax(-1)"
            )
        gots[smoothing] = got
    return gots


def _smoothing_mistakes(logits: Tensor, target: Tensor) -> list[tuple[str, Callable[[float], Tensor]]]:
    """Each classic mistake, as the loss it gives at a smoothing: an answer named by one gives that loss at every
    smoothing tested."""
    N, V = logits.shape
    log_p = logits.log_softmax(-1)  # (N, V)
    true = log_p.gather(1, target[:, None]).squeeze(1)  # (N,): log p of the true token
    others = log_p.sum(-1) - true  # (N,): sum of log p over the V - 1 other tokens

    def ce(smoothing: float) -> Tensor:
        return F.cross_entropy(logits, target, label_smoothing=smoothing)

    def smoothed(smoothing: float) -> Tensor:
        return torch.full_like(log_p, smoothing / V).scatter(1, target[:, None], 1 - smoothing + smoothing / V)

    padding = (
        "the positions whose target is 0 are left out, as if 0 were padding: this function has no padding to "
        "skip, every one of the N positions counts (seq2seq_loss leaves padding out, with ignore_index=pad_id)"
    )
    real = target != 0
    return [
        ("the smoothing is ignored: this is plain cross-entropy", lambda s: ce(0.0)),
        *(
            (
                f"this is the loss at smoothing={h} whatever smoothing is given: use the argument smoothing, not "
                "a number written into the code",
                lambda s, h=h: ce(h),
            )
            for h in _SMOOTHINGS
            if h
        ),
        *(
            (_ANNOTATED, lambda s, i=i: _annotated_smoothing(log_p, target, s, 0)[i])
            for i in range(len(_annotated_smoothing(log_p, target, 0.1, 0)))
        ),
        (
            "smoothing / (V - 1) on each of the V - 1 other tokens and 1 - smoothing on the true one: a "
            "convention of its own; PyTorch's, used here, spreads smoothing / V over all V tokens, the "
            "true one included",
            lambda s: (-(1 - s) * true - s / (V - 1) * others).mean(),
        ),
        (
            "the true token gets 1 - smoothing: it must be 1 - smoothing + smoothing / V, so that the "
            "smoothed target sums to 1",
            lambda s: (-(1 - s) * true - s / V * others).mean(),
        ),
        (
            "this is the KL divergence between the smoothed target q and p, the cross-entropy minus the "
            "entropy of q: return the cross-entropy itself, -sum q ln p (F.cross_entropy's value)",
            lambda s: ce(s) + (smoothed(s) * smoothed(s).clamp_min(1e-30).log()).sum(-1).mean(),
        ),
        ("the sum over positions: take the mean", lambda s: ce(s) * N),
        (
            "the mean over all N x V entries: sum over the V tokens, then average over the N positions",
            lambda s: ce(s) / V,
        ),
        ("the sign is flipped: the cross-entropy is -sum q ln p, a positive number", lambda s: -ce(s)),
        (
            "ln p must be the log-softmax of the logits (logits.log_softmax(-1)); the logits themselves are "
            "not log-probabilities",
            lambda s: -(smoothed(s) * logits).sum(-1).mean(),
        ),
        (
            "the log-softmax runs over dim=0, down the batch: one position's probabilities run along the "
            "vocabulary, logits.log_softmax(-1)",
            lambda s: -(smoothed(s) * logits.log_softmax(0)).sum(-1).mean(),
        ),
        (
            "the target has no peak at the true token, only smoothing / V everywhere: q.scatter(...) returns a new "
            "tensor and leaves q as it was; write q.scatter_(...) (in place) or q = q.scatter(...)",
            lambda s: -(torch.full_like(log_p, s / V) * log_p).sum(-1).mean(),
        ),
        (padding, lambda s: F.cross_entropy(logits[real], target[real], label_smoothing=s)),
        (padding, lambda s: F.cross_entropy(logits, target, label_smoothing=s, reduction="none")[real].sum() / N),
    ]


def check_weight_tying(fn: Callable[..., Any]) -> Verdict:
    """``fn(model)`` ties, in place, a ``Transformer``'s output projection ``model.generator.weight`` ``(V, d_model)``
    to its target embedding ``model.tgt_embed.weight`` ``(V, d_model)``: ONE Parameter used twice. It is tested on
    two models of different sizes."""

    def one(src_vocab: int, V: int, d_model: int) -> str:
        from ..model.transformer import Transformer
        from ..utils import count_parameters

        torch.manual_seed(0)
        model = Transformer(src_vocab, V, d_model=d_model, n_heads=2, n_layers=1, d_ff=2 * d_model, dropout=0.0)
        before = count_parameters(model)
        result = call(fn, model)
        weight, embedding = model.generator.weight, model.tgt_embed.weight
        if (
            isinstance(result, nn.Module)
            and result is not model
            and getattr(getattr(result, "generator", None), "weight", None) is not None
            and weight is not embedding
        ):
            raise NotYet(
                "your function returned another model (a copy?) and left the one it was given untied: tie the "
                "given model's weights, in place"
            )
        if weight is embedding and model.src_embed.weight is embedding:
            raise NotYet(
                "all three are one matrix, the source embedding too: the paper can share it three ways because its "
                f"two languages share one vocabulary. Here the source has {src_vocab} tokens and the target {V}, so "
                "a row of the source embedding stands for another token than the same row of the target's: leave "
                "model.src_embed alone and tie only model.generator.weight and model.tgt_embed.weight"
            )
        if weight is model.src_embed.weight:
            raise NotYet(
                "tied to the SOURCE embedding: the output projection scores target tokens, so share model.tgt_embed"
            )
        if weight is not embedding:
            if weight.shape == (d_model, V):
                raise NotYet(
                    "transposed: nn.Linear stores its weight as (out, in) = (V, d_model), the embedding's shape "
                    "already; share it as it is"
                )
            if weight.shape == embedding.shape and weight.data_ptr() == embedding.data_ptr():
                raise NotYet(
                    "one storage, but still two Parameters (nn.Parameter(...) around the embedding's weight, or "
                    ".data, makes a second Parameter over the same memory): each gets its own gradient and "
                    "optimizer state, and count_parameters counts both. Share the Parameter object itself: "
                    "model.generator.weight = model.tgt_embed.weight"
                )
            if weight.shape == embedding.shape and torch.equal(weight, embedding):
                raise NotYet(
                    "the values are copied, not shared: the two start equal and drift apart at the first step. "
                    "Share the Parameter object itself instead of its values"
                )
            raise NotYet("model.generator.weight is not model.tgt_embed.weight: make them one and the same Parameter")
        if not weight.requires_grad:
            raise NotYet("the shared Parameter is frozen (requires_grad=False): it must go on learning")
        after = count_parameters(model)
        src, tgt = torch.tensor([[4, 5, 6]]), torch.tensor([[1, 3, 2]])
        logits = call(model, src, tgt)
        if not isinstance(logits, Tensor) or logits.shape != (1, 3, V):
            raise NotYet("after tying, the model should still return logits (B, T, V)")
        saved, matrix = before - after, V * d_model  # V x d_model: the matrix now counted once
        bias = V if model.generator.bias is None else 0  # removed by the answer, though not asked
        other = saved - matrix - bias
        detail = f" and {bias:,} for the output projection's bias (V = {V}), which your answer removed" if bias else ""
        if other > 0:
            detail += f" and {other:,} for other parameters your answer removed or froze"
        elif other < 0 and saved >= 0:
            detail += f", less {-other:,} for parameters your answer added"
        if saved < 0:  # the answer added more than the sharing saved
            return (
                f"one Parameter, used twice: {before:,} -> {after:,} parameters, {-saved:,} more: "
                f"{matrix:,} = V x d_model = {V} x {d_model} fewer for the shared matrix (counted once){detail}, but "
                f"{-other:,} more that your answer added; its gradient sums both uses."
            )
        return (
            f"one Parameter, used twice: {before:,} -> {after:,} parameters, {saved:,} fewer: "
            f"{matrix:,} = V x d_model = {V} x {d_model} for the shared matrix (counted once){detail}; "
            "its gradient sums both uses."
        )

    def run() -> str:
        return each_case(one, [dict(src_vocab=11, V=13, d_model=16), dict(src_vocab=7, V=9, d_model=8)])

    return verdict(run)


def _as_number(got: object, device: torch.device) -> float:
    """The accuracy an answer returned, as a float: a Python or NumPy number, or a tensor of one element."""
    if isinstance(got, np.ndarray) and got.size == 1:
        got = got.item()
    if isinstance(got, Tensor) and got.numel() == 1:
        if got.device != device:
            raise wrong_device(
                "the accuracy",
                got.device,
                device,
                how="compute it on the inputs' device and do not move it (or return a Python number, with .item())",
            )
        got = got.item()
    if isinstance(got, bool) or not isinstance(got, numbers.Real):
        raise NotYet(f"return one number, the fraction of rows right; got {type(got).__name__}")
    return float(got)


# The test batches: (labels (B, T) padded with pad_id, predictions). In the first (pad_id 0), row 1 is right up to
# its <eos> and wrong only under padding; rows 2 and 6 predict padding's id where a real label is; rows 4 and 5 miss
# the <eos> (in the last column, and before it), row 6 the first token. In the second, pad_id is 3 and 0 is a real
# token (mispredicted in row 2), so that a pad id written into the code shows; it has 4 rows, not 7, and row 1 misses
# its first token while no row's last column is a real label. Each mistake in _accuracy_mistakes gives another pair
# of values on the two (a test checks it).
_ACCURACY_BATCHES = [
    (
        [[5, 6, 7, 2], [5, 2, 0, 0], [8, 9, 2, 0], [4, 2, 0, 0], [6, 6, 6, 2], [7, 7, 2, 0], [5, 5, 2, 0]],
        [[5, 6, 7, 2], [5, 2, 9, 9], [8, 0, 2, 0], [4, 2, 0, 0], [6, 6, 6, 5], [7, 7, 5, 0], [0, 5, 2, 0]],
    ),
    (
        [[5, 0, 2, 3, 3], [1, 6, 2, 3, 3], [4, 0, 1, 2, 3], [6, 2, 3, 3, 3]],
        [[5, 0, 2, 7, 3], [9, 6, 2, 3, 3], [4, 5, 1, 2, 3], [6, 2, 0, 0, 0]],
    ),
]


def _accuracy_mistakes(y: Tensor, p: Tensor, pad_id: int) -> list[tuple[float, str]]:
    """Each classic mistake of sequence accuracy, as the value it gives on labels ``y`` and predictions ``p``."""
    real, right = y != pad_id, p == y
    fine = right | ~real  # (B, T): right, or not a real label
    eos = 2  # the test batches' <eos>
    under_pad = int((fine.all(1) & ~right.all(1)).nonzero()[0, 0])  # a row right but under its padding

    def rows(ok: Tensor) -> float:  # the fraction of rows whose positions are all ok
        return ok.all(1).float().mean().item()

    return [
        (float(fine.all(1).sum()), "that is the number of rows right: divide by the number of rows, B"),
        (
            rows(right | (p == pad_id)),
            "the padding is looked up in the predictions: it is where the LABELS are pad_id (labels == pad_id) "
            "that a position does not count",
        ),
        (
            rows(right),
            f"the padded positions count: row {under_pad} is right up to its <eos> and wrong only where the "
            "label is <pad>, which the loss ignores; compare only where labels != pad_id",
        ),
        (
            (right & real).sum().item() / real.sum().item(),
            "that is token-level accuracy: a row counts only if EVERY one of its tokens is right",
        ),
        (right.float().mean().item(), "that is token-level accuracy, padding included: count whole rows, without pads"),
        (
            fine.float().mean().item(),
            "that is token-level accuracy, with every padded position counted as right: count whole rows, a row "
            "being right when all its real tokens are",
        ),
        (
            ((right & real).sum(1) / real.sum(1)).mean().item(),
            "that is the mean of each row's token accuracy: a row counts 1 when all its real tokens are right, "
            "else 0, however many of them are",
        ),
        (
            fine.any(1).float().mean().item(),
            "a row counts when ANY of its positions is fine: it must be ALL of them, .all(dim=1)",
        ),
        (fine.all(0).float().mean().item(), ".all(dim=0) runs down the batch: a row is dim=1, .all(dim=1)"),
        (
            rows(right & real),
            "a position is fine when it is right OR padded (|): with &, a padded position is never fine, so no row "
            "with padding counts",
        ),
        (
            rows(fine[:, 1:]),
            "column 0 is skipped: the labels hold no <bos> (it is only in the decoder's input), so column 0 is the "
            "first real token, to be predicted like the others",
        ),
        (
            rows(fine[:, :-1]),
            "the last column is left out: in the longest rows it holds <eos>, a real label the model must predict",
        ),
        (
            rows(fine | (y == eos)),
            "<eos> is left out: it is a real label (the loss trains it), and a row is right only if the model "
            "also predicts where it ends",
        ),
    ]


def check_sequence_accuracy(fn: Callable[..., Any]) -> Verdict:
    """``fn(predictions (B, T), labels (B, T), pad_id)`` returns the fraction of rows whose every non-pad label is
    predicted right (what the prediction says where the label is ``<pad>`` does not count). It is tested with two
    batches, padded with two different ids; a mistake is named only where the answer gives its value on both, since
    on one batch of a few rows two mistakes can give the same fraction."""
    cases: list[dict[str, Any]] = [dict(batch=0, pad_id=0), dict(batch=1, pad_id=3)]
    answers: dict[int, float] = {}

    def answer(batch: int, pad_id: int) -> float:
        if batch not in answers:
            y, p = (torch.tensor(rows) for rows in _ACCURACY_BATCHES[batch])
            answers[batch] = _as_number(call(fn, p.clone(), y.clone(), pad_id), y.device)
        return answers[batch]

    def close(a: float, b: float) -> bool:
        return abs(a - b) < 1e-6

    def expected_and_mistakes(batch: int, pad_id: int) -> tuple[float, list[tuple[float, str]]]:
        y, p = (torch.tensor(rows) for rows in _ACCURACY_BATCHES[batch])
        return ((p == y) | (y == pad_id)).all(1).float().mean().item(), _accuracy_mistakes(y, p, pad_id)

    def gives(i: int, case: dict[str, Any]) -> bool:  # on this case, the answer gives mistake i's value
        try:
            got = answer(**case)
        except NotYet:
            return False
        return close(got, expected_and_mistakes(**case)[1][i][0])

    def one(batch: int, pad_id: int) -> str:
        got = answer(batch, pad_id)
        expected, mistakes = expected_and_mistakes(batch, pad_id)
        if close(got, expected):
            return "sequence accuracy is right: a row counts when all its real tokens are right; padding is ignored."
        for i, (_, why) in enumerate(mistakes):
            shows = any(not close(m[i][0], e) for e, m in (expected_and_mistakes(**c) for c in cases))
            if shows and all(gives(i, c) for c in cases):
                raise NotYet(why)
        B = len(_ACCURACY_BATCHES[batch][0])
        rows_right = round(expected * B)
        raise NotYet(f"got {got:.4g}, expected {expected:.4g} ({rows_right} of the {B} rows are right)")

    def run() -> str:
        return each_case(one, cases)

    return verdict(run)
