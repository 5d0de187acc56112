"""Probes: small experiments that catch the classic Transformer bugs in a model you cannot read line by line.

Each probe runs a model (any callable) on inputs it builds from yours, measures one property that a correct
model has, and returns a ``ProbeReport``: what it measured, whether that looks wrong, and the bugs that
usually cause it. The probes, and the bug each is made for:

- ``causality_probe``: change one later token; do earlier outputs move? (no causal mask, a mask of the
  other convention, cross-attention with queries from the encoder, an off-by-one triangle)
- ``equality_probe``: the largest difference from a reference (PyTorch's module, or a table), with what the
  difference looks like (unbiased std, epsilon outside the root, scores scaled by the wrong number, a mask of
  the other convention, 2i applied twice)
- ``padding_probe``: append padding; do the real positions' outputs move? (no padding mask, or one broadcast
  along the queries instead of the keys)
- ``position_probe``: permute the input; does the output only follow the permutation? (no positional
  encoding, or one drowned by embeddings far larger than it)
- ``batch_probe``: run each example alone; does the output depend on the rest of the batch?
  (``log_softmax`` without ``dim``, normalising over the batch)
- ``output_probe``: are these logits, log-probabilities or probabilities, and normalised along which axis?

Every probe that runs a model first runs it twice on the same input: if the outputs differ, dropout is on (the
model is in training mode) and the report says so instead of measuring noise. Models are run without gradients;
put them in eval mode (``model.eval()``) before probing.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

__all__ = [
    "CAUSES",
    "ProbeReport",
    "batch_probe",
    "causality_probe",
    "equality_probe",
    "output_probe",
    "padding_probe",
    "position_probe",
]

DROPOUT_ON = (
    "dropout is on: the model is in training mode (call model.eval() before evaluating, generating or probing), "
    "or its forward pass draws random numbers"
)


# What a probe can name, by code: ``ProbeReport.causes`` lists the codes, ``likely_bug`` says them in words.
CAUSES = {
    "dropout_on": DROPOUT_ON,
    "no_causal_mask": "no causal mask (is_causal forgotten, or the triangle built and never applied)",
    "mask_convention": "a mask of the other convention (nn.MultiheadAttention and key_padding_mask take True = "
    "blocked; masked_fill(mask == 0, ...) takes 1 = may attend)",
    "cross_attention_queries": "in an encoder-decoder, cross-attention whose queries come from the encoder (the "
    "target's positions are then its keys, unmasked)",
    "off_by_one_mask": "an off-by-one causal mask: each position also sees the next token (tril(diagonal=1), or "
    "triu with the wrong diagonal); the triangle must keep j <= i",
    "masked_row_nan": "a query row with every key masked, and softmax over nothing is NaN: a causal mask of the "
    "other convention leaves the last position nothing to attend to, one that also blocks the diagonal the first",
    "shape": "an axis swapped, merged or taken from the wrong input (an attention output has the query's length: "
    "queries from the encoder give the source's length)",
    "log_of_zero": "log(0): the log of a probability that underflowed to 0 (use log_softmax) or of a zero target "
    "(0 * log 0 is NaN: use torch.xlogy)",
    "unbiased_std": "an unbiased std (x.std() divides by n - 1); LayerNorm uses the biased variance, "
    "x.var(unbiased=False)",
    "wrong_scale": "scores scaled by the wrong number, or not at all: divide by sqrt(d_k), the size of one head",
    "eps_outside_sqrt": "an epsilon in the wrong place: (x - mean) / (std + eps) instead of (x - mean) / "
    "sqrt(var + eps), which matters when the variance is small (or only another eps than the reference's)",
    "no_root": "the square root is missing: a norm divides by sqrt(var + eps) (RMSNorm: sqrt(mean(x²) + eps)), not by "
    "var + eps",
    "head_split": "heads split or merged in the wrong order: view(B, T, h, d_k).transpose(1, 2) to split, "
    "transpose(1, 2).reshape(B, T, h * d_k) to merge back",
    "softmax_axis": "a softmax over the wrong axis: attention weights must sum to 1 over the keys (dim=-1)",
    "2i_twice": "2i is applied twice (10000 ** (2 * i / d) with i already stepping by 2), which stretches every "
    "wavelength; use 10000 ** (i / d) for i in range(0, d, 2)",
    "sin_cos_layout": "the sines and cosines in another layout: all sines first, then all cosines "
    "(torch.cat([sin, cos], -1)); the paper interleaves them, sin in even columns and cos in odd ones",
    "no_padding_mask": "no padding mask: real positions attend to the padding",
    "mask_wrong_axis": "a (B, T) padding mask broadcast along the queries ((B, 1, T, 1)) instead of the keys "
    "((B, 1, 1, T))",
    "mean_over_padding": "pooling (a mean over T) that counts the padded positions: divide the masked sum by the "
    "number of real tokens",
    "no_positions": "no positional information: the encoding is missing, or computed and thrown away (x + pe whose "
    "result is not assigned, x.add(pe) instead of x.add_(pe)); attention alone cannot tell order",
    "weak_positions": "a weak positional signal: embeddings far larger than the encoding (nn.Embedding's N(0, 1) "
    "start times sqrt(d_model)), or an encoding scaled down",
    "batch_mixing": "something mixes the batch: a softmax or log_softmax over dim 0 (F.log_softmax(x) without dim "
    "picks dim 0 for a 3-d input), a normalisation over the batch axis, or a mask without its head axis",
    "probabilities": "probabilities fed to F.cross_entropy, which applies log_softmax itself: the loss has a floor "
    "above 0 and the gradients shrink; return the logits",
    "log_softmax_axis": "log_softmax over the wrong axis (without dim, PyTorch picks dim 0 for a 1-d or 3-d input, "
    "dim 1 otherwise): write F.log_softmax(x, dim=-1)",
    "unknown": "the difference has no simple pattern: compare intermediate results (forward hooks) to find the "
    "first step that differs",
}


@dataclass(frozen=True)
class ProbeReport:
    """What a probe measured. ``flagged`` is True when the measurement points to a bug; ``value`` is the
    number behind it; ``likely_bug`` names the usual causes in words ("" when nothing is flagged) and
    ``causes`` by their codes (keys of ``CAUSES``), most likely first; ``detail`` holds a tensor worth plotting
    where there is one (the causality probe's dependency matrix). A flag is a measurement, not a diagnosis:
    several bugs leave the same trace, and the report lists each that could."""

    probe: str
    flagged: bool
    value: float
    finding: str
    likely_bug: str = ""
    causes: tuple[str, ...] = ()
    detail: Tensor | None = field(default=None, repr=False, compare=False)

    def __str__(self) -> str:
        text = f"{'⚠️ ' if self.flagged else '✅ '}{self.probe} probe: {self.finding}"
        return text + (f"\n   likely bug: {self.likely_bug}" if self.likely_bug else "")

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # IPython shows the text, not the dataclass
        printer.text(str(self))


def _flag(probe: str, value: float, finding: str, *causes: str | tuple[str, str], detail: Tensor | None = None):
    """A flagged report; each cause is a code of ``CAUSES`` or (code, words) where the words are specific."""
    codes = tuple(c if isinstance(c, str) else c[0] for c in causes)
    words = [CAUSES[c] if isinstance(c, str) else c[1] for c in causes]
    likely = words[0] if len(words) == 1 else "; or ".join(words)
    return ProbeReport(probe, True, value, finding, likely, codes, detail)


def _run(fn: Callable[..., Any], *args: Any) -> Tensor:
    """The model's output as a float tensor: the first element of a tuple (attention returns (out, weights))."""
    with torch.no_grad():
        out = fn(*args)
    if isinstance(out, (tuple, list)) and out:
        out = out[0]
    if not isinstance(out, Tensor):
        raise TypeError(f"the model must return a tensor (or a tuple starting with one); got {type(out).__name__}")
    return out.detach().float()


def _tolerance(reference: Tensor, atol: float) -> float:
    finite = reference[torch.isfinite(reference)]
    return atol * (1.0 + (float(finite.abs().max()) if finite.numel() else 0.0))


# A quiet probe does not print the change it measured when that change is float rounding: its digits differ from one
# processor to another (and a notebook's saved output must read the same everywhere). The value stays in the report.
_ROUNDING = "up to float rounding"


def _largest(diff: Tensor) -> float:
    diff = torch.nan_to_num(diff, nan=math.inf)
    return float(diff.max()) if diff.numel() else 0.0


def _unsteady(name: str, fn: Callable[..., Any], *args: Any, whose: str = "") -> ProbeReport | None:
    """A report when two identical calls give different outputs (dropout on), else None."""
    first, second = _run(fn, *args), _run(fn, *args)
    if first.shape == second.shape and torch.equal(torch.nan_to_num(first), torch.nan_to_num(second)):
        return None
    change = _largest((first - second).abs()) if first.shape == second.shape else math.inf
    return _flag(name, change, f"two identical calls{whose} differ by up to {change:.3g}", "dropout_on")


def _check_tokens(tokens: Tensor, *, min_length: int = 1, min_batch: int = 1) -> None:
    if not isinstance(tokens, Tensor) or tokens.dim() != 2 or tokens.is_floating_point():
        got = f"{tokens.dtype} {tuple(tokens.shape)}" if isinstance(tokens, Tensor) else type(tokens).__name__
        raise ValueError(f"tokens must be integer ids of shape (B, T); got {got}")
    B, T = tokens.shape
    if T < min_length or B < min_batch:
        raise ValueError(
            f"this probe needs at least {min_batch} sequence(s) of at least {min_length} tokens; got tokens of "
            f"shape {(B, T)}: with fewer there is nothing to measure, and a quiet report would prove nothing"
        )


def _check_per_position(outputs: Tensor, tokens: Tensor) -> None:
    if outputs.dim() < 2 or outputs.shape[:2] != tokens.shape:
        raise ValueError(
            f"fn must return outputs of shape (B, T, ...) for tokens {tuple(tokens.shape)}; got {tuple(outputs.shape)}"
        )


def _dependence(fn: Callable[..., Any], tokens: Tensor, base: Tensor, allowed: Tensor, seed: int) -> Tensor:
    """``(T, T)``: the largest change of output ``i`` (row) when token ``j`` (column) of every sequence changes to
    another id of ``allowed``."""
    B, T = tokens.shape
    generator = torch.Generator().manual_seed(seed)
    matrix = torch.zeros(T, T, device="cpu")  # filled from .cpu() copies: plotted, printed
    for j in [*range(1, T), 0]:  # token 0 last: the ids drawn for the others do not depend on it
        changed = tokens.clone()
        pick = allowed[torch.randint(len(allowed), (B,), generator=generator, device="cpu").to(tokens.device)]
        same = pick == tokens[:, j]
        pick[same] = allowed[(torch.searchsorted(allowed, pick[same]) + 1) % len(allowed)]  # always a different id
        changed[:, j] = pick
        moved = (_run(fn, changed) - base).abs()  # (B, T, ...)
        matrix[:, j] = torch.nan_to_num(moved.reshape(B, T, -1), nan=math.inf).amax(dim=(0, 2)).cpu()
    return matrix


def causality_probe(
    fn: Callable[[Tensor], Any],
    tokens: Tensor,
    vocab_size: int,
    *,
    exclude: tuple[int, ...] = (),
    atol: float = 1e-5,
    seed: int = 0,
) -> ProbeReport:
    """Does output ``i`` depend on a token after ``i``? For each position ``j``, the probe changes token ``j``
    of every sequence (to a random id of ``range(vocab_size)``, never one of ``exclude``, e.g. the padding
    id) and measures how far every output moves. ``fn`` maps ids ``(B, T)`` to outputs ``(B, T, ...)``.
    ``detail`` is the ``(T, T)`` dependency matrix: the largest change at ``i`` (row) when token ``j``
    (column) changes. In a causal model everything above the diagonal is 0; what lies above it is a leak, and
    its shape tells the usual causes apart (a band one token wide per layer: an off-by-one triangle).
    """
    _check_tokens(tokens, min_length=2)
    allowed = torch.tensor([v for v in range(vocab_size) if v not in exclude], device=tokens.device)
    if len(allowed) < 2:
        raise ValueError(
            f"the causality probe changes tokens to other ids, and range(vocab_size={vocab_size}) without "
            f"exclude={exclude} leaves {len(allowed)}: allow at least 2"
        )
    unsteady = _unsteady("causality", fn, tokens)
    if unsteady:
        return unsteady
    base = _run(fn, tokens)
    T = tokens.size(1)
    _check_per_position(base, tokens)
    bad = ~torch.isfinite(base).flatten(2).all(-1) if base.dim() > 2 else ~torch.isfinite(base)  # (B, T)
    if bad.any():
        positions = sorted({int(t) for t in bad.nonzero()[:, 1]})
        return _flag(
            "causality", math.nan, f"the output is NaN or infinite at positions {positions}",
            "masked_row_nan", "mask_convention",
        )  # fmt: skip
    tol = _tolerance(base, atol)
    matrix = _dependence(fn, tokens, base, allowed, seed)
    leak = matrix.triu(1)
    worst = float(leak.max())
    if worst <= tol:
        return ProbeReport(
            "causality", False, worst,
            f"no output moves when a later token changes ({'largest change 0' if worst == 0 else _ROUNDING})",
            detail=matrix,
        )  # fmt: skip
    i, j = divmod(int(leak.argmax()), T)
    distances = sorted({int(b - a) for a, b in (leak > tol).nonzero().tolist()})
    width = distances[-1]
    finding = (
        f"output {i} moves by {worst:.3g} when token {j} changes; later tokens reach earlier outputs at distances "
        f"{distances[:6]}{' ...' if len(distances) > 6 else ''}"
    )
    if distances == list(range(1, width + 1)) and width < T - 1:
        band = (
            f"{CAUSES['off_by_one_mask']}. The leak is a band {width} token{'s' * (width > 1)} wide: each layer with "
            f"such a mask lets a position see one token further ahead, so the band is as wide as the number of "
            f"such layers ({width} here)"
        )
        return _flag("causality", worst, finding, ("off_by_one_mask", band), detail=matrix)
    causes: list[str] = ["no_causal_mask", "mask_convention", "cross_attention_queries"]
    earlier = float(matrix[: T - 1].tril(-1).max()) if T > 2 else math.inf
    if earlier <= tol:  # outputs read only later tokens: attention goes exactly where it must not
        causes.remove("mask_convention")
        causes.insert(0, "mask_convention")
        finding += "; no output but the last reads an earlier token"
    if width == T - 1 and T <= 5 and distances == list(range(1, T)):
        finding += f" (a model with {T - 1} or more layers and an off-by-one mask also leaks this far: probe with more tokens than layers)"
        causes.append("off_by_one_mask")
    return _flag("causality", worst, finding, *causes, detail=matrix)


def _as_output(value: Any) -> tuple[Tensor, Tensor | None]:
    if isinstance(value, (tuple, list)):
        items: list[Any] = list(value)
        first = items[0] if items else None
        if not isinstance(first, Tensor):
            raise TypeError("expected a tuple starting with a tensor, as attention's (output, weights)")
        weights = items[1] if len(items) > 1 and isinstance(items[1], Tensor) else None
        return first.detach().float().cpu(), None if weights is None else weights.detach().float().cpu()
    if not isinstance(value, Tensor):
        raise TypeError(f"expected a tensor or a tuple starting with one; got {type(value).__name__}")
    return value.detach().float().cpu(), None  # compared on the CPU: ours and the reference may live apart


def _evaluate(model: Callable[..., Any] | Tensor, inputs: tuple[Any, ...]) -> tuple[Tensor, Tensor | None]:
    if isinstance(model, Tensor):
        return _as_output(model)
    with torch.no_grad():
        return _as_output(model(*inputs))


def _table_hint(ours: Tensor, reference: Tensor) -> str | None:
    """For positional tables (positions, d): a cause code when ours is the reference's columns rearranged."""
    if ours.dim() != 2 or ours.shape != reference.shape or ours.size(1) < 8:
        return None
    d = ours.size(1)
    close = lambda a, b: torch.allclose(a, b, atol=1e-4)  # noqa: E731
    half = d // 2
    zeros, ones = torch.zeros(half, device=ours.device), torch.ones(d - half, device=ours.device)
    sines_first = close(ours[0, :half], zeros) and close(ours[0, half:], ones)
    interleaved = close(reference[0, 0::2], zeros) and close(reference[0, 1::2], ones)
    if d % 2 == 0 and sines_first and interleaved:  # position 0: sin 0 = 0, cos 0 = 1
        return "sin_cos_layout"
    cols = torch.arange(2, (d - 1) // 2 + 1, 2, device=ours.device)  # even columns c whose double 2c is still a column
    if len(cols) and close(ours[:, cols], reference[:, 2 * cols]):
        return "2i_twice"  # our column c is the reference's column 2c: every wavelength stretched
    return None


def _shape_report(out: Tensor, ref: Tensor) -> ProbeReport | None:
    if out.shape == ref.shape:
        return None
    return _flag("equality", math.inf, f"shapes differ: ours {tuple(out.shape)}, reference {tuple(ref.shape)}", "shape")


def _non_finite_report(out: Tensor, ref: Tensor) -> ProbeReport | None:
    broken = ~torch.isfinite(out) & torch.isfinite(ref)
    if not broken.any():
        return None
    kinds = " and ".join(
        k for k, m in (("NaN", torch.isnan(out)), ("infinite", torch.isinf(out))) if (m & broken).any()
    )
    finding = f"ours is {kinds} at {int(broken.sum())} entries where the reference is finite"
    if out.dim() >= 2 and bool((broken.all(-1) | ~broken.any(-1)).all()):  # whole rows: positions, not entries
        finding += f", whole rows of {out.size(-1)} features (positions whose every key was masked)"
        return _flag("equality", math.nan, finding, "masked_row_nan", "mask_convention", "log_of_zero")
    return _flag("equality", math.nan, finding, "log_of_zero", "masked_row_nan")


def _where(gap: Tensor, ref: Tensor, diff: float) -> str:
    """Where the largest difference ``gap`` (``|ours - reference|``) is, and the reference's value there."""
    flat = int(torch.nan_to_num(gap, nan=math.inf).flatten().argmax())
    where = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat, device=gap.device), gap.shape))
    return f"largest difference {diff:.3g} at index {where} (reference value there {float(ref[where]):.4g})"


def _ratio(out: Tensor, ref: Tensor) -> float | None:
    """The c with ours = c * reference, if one fits (to 1e-3 relative), else None."""
    ratio = float((out * ref).sum() / (ref * ref).sum().clamp_min(1e-30))  # the best c in ours ~ c * reference
    residual = float((out - ratio * ref).norm() / ref.norm().clamp_min(1e-30))
    return ratio if residual < 1e-3 else None


def _scale_hint(out: Tensor, ref: Tensor) -> tuple[str, tuple[str, str]] | None:
    """Ours = the reference times a constant, or, around each feature's mean (a LayerNorm's bias adds the same to
    both), ours - mean = c * (reference - mean): (the finding, the cause), or None."""
    n = out.size(-1)
    finite = (torch.isfinite(out) & torch.isfinite(ref)).all(-1)  # (...,): rows finite in both
    rows_out, rows_ref = out[finite].reshape(-1, n), ref[finite].reshape(-1, n)  # (rows, n)
    ratio, centred = _ratio(rows_out, rows_ref), False
    if (ratio is None or abs(ratio - 1) <= 1e-4) and rows_out.size(0) > 1:
        ratio, centred = _ratio(rows_out - rows_out.mean(0), rows_ref - rows_ref.mean(0)), True
    if ratio is None or abs(ratio - 1) <= 1e-4:
        return None
    unbiased = n > 1 and min(abs(ratio - math.sqrt((n - 1) / n)), abs(ratio - math.sqrt(n / (n - 1)))) < 2e-4
    if unbiased:
        cause = ("unbiased_std", f"{ratio:.5f} is sqrt((n-1)/n) for n = {n} features: {CAUSES['unbiased_std']}")
    else:
        cause = ("wrong_scale", "a constant factor: a scale applied twice, or not at all (sqrt(d_k), sqrt(d_model))")
    if centred:
        return f"; around each feature's mean, ours = reference x {ratio:.5f}", cause
    return f"; ours = reference x {ratio:.5f}", cause


def _attention_hint(weights: Tensor | None, ref_weights: Tensor | None) -> tuple[str, str] | None:
    """What differs between two sets of attention weights ``(..., T_q, T_k)``: a cause, or None."""
    if weights is None or ref_weights is None:
        return None
    if weights.dim() == ref_weights.dim() + 1:
        weights = weights.mean(1)  # ours per head, the reference's averaged over heads
    if weights.shape != ref_weights.shape:
        return None
    rows = max(weights.shape[:-1].numel(), 1)
    blocked = float(weights[ref_weights == 0].sum()) / rows  # ours' weight on keys the reference blocks, per row
    sharp, ref_sharp = float(weights.amax(-1).mean()), float(ref_weights.amax(-1).mean())
    same_top = float((weights.argmax(-1) == ref_weights.argmax(-1)).float().mean())
    by_keys = torch.allclose(weights.sum(-1), torch.ones(()), atol=1e-3)
    if not by_keys and weights.size(-2) > 1 and torch.allclose(weights.sum(-2), torch.ones(()), atol=1e-3):
        return "softmax_axis", f"ours' weights sum to 1 over the queries, not the keys: {CAUSES['softmax_axis']}"
    key_mask = (ref_weights == 0).all(-2, keepdim=True) & (ref_weights == 0)  # keys blocked for every query
    square = weights.size(-1) == weights.size(-2) and bool(key_mask.any())
    if blocked > 1e-3 and square:
        padded = key_mask.any(-2).squeeze(-2) if key_mask.dim() > 1 else key_mask  # (..., T): the padded positions
        uniform = (weights.amax(-1) - weights.amin(-1)) < 1e-6  # (..., T_q): rows that attend evenly to every key
        if bool(padded.any()) and bool(uniform[padded].all()) and not bool(uniform[~padded].any()):
            return "mask_wrong_axis", (
                "ours attends evenly to every key from the padded positions, and to the padding from the real ones: "
                f"{CAUSES['mask_wrong_axis']}"
            )
    if blocked > 1e-3:
        return "mask_convention", (
            f"ours puts {blocked:.0%} of its attention (per row, on average) on keys the reference blocks: "
            f"{CAUSES['mask_convention']}, or one broadcast along the wrong axis"
        )
    if same_top < 0.9:
        return "head_split", (
            f"ours favours another key than the reference in {1 - same_top:.0%} of the rows: queries and keys are "
            "paired differently, as when heads are split with view(B, h, T, d_k) instead of "
            "view(B, T, h, d_k).transpose(1, 2)"
        )
    if sharp < ref_sharp - 1e-3:
        return "wrong_scale", (
            f"ours attends more evenly (largest weight {sharp:.3f} per row on average, reference {ref_sharp:.3f}): "
            "scores divided by too large a number, such as sqrt(d_model) instead of sqrt(d_k)"
        )
    if sharp > ref_sharp + 1e-3:
        return "wrong_scale", (
            f"ours attends more sharply (largest weight {sharp:.3f} per row on average, reference {ref_sharp:.3f}): "
            "scores not divided by sqrt(d_k), or by too small a number"
        )
    if not torch.allclose(weights, ref_weights, atol=1e-4):
        return None
    return "head_split", (
        "the attention weights are equal, the outputs are not: the heads' outputs are merged in the wrong order "
        "(transpose(1, 2) before reshape(B, T, h * d_k)), or the output projection differs"
    )


def _mixing_hint(ours: Callable[..., Any], reference: Callable[..., Any], inputs: tuple[Any, ...]) -> str | None:
    """Without attention weights to compare: does the difference vanish when every position of each float input
    ``(..., T, d)`` holds the same vector? Then it lies in how positions are mixed: a finding, or None."""
    if not any(isinstance(x, Tensor) and x.is_floating_point() and x.dim() >= 3 and x.size(-2) > 1 for x in inputs):
        return None
    same = tuple(
        x[..., :1, :].expand_as(x).contiguous() if isinstance(x, Tensor) and x.is_floating_point() and x.dim() >= 3
        else x
        for x in inputs
    )  # fmt: skip
    try:
        gap = _relative_gap(ours, reference, same)
    except (RuntimeError, ValueError, TypeError):  # the inputs' positions are tied to something fixed (a mask)
        return None
    if gap > 1e-4:
        return None
    return (
        "; equal when every position holds the same vector: the difference is in how positions are mixed, the "
        "attention weights (give the probe both modules' weights, need_weights=True, to tell which cause)"
    )


def _root_hint(out: Tensor, ref: Tensor, inputs: tuple[Any, ...]) -> str | None:
    """Ours = reference x c, with c changing from row to row as 1 / sqrt(a statistic of the row of x) (the mean
    square, the variance): a norm that forgot its square root. The finding, or None."""
    x = next((t for t in inputs if isinstance(t, Tensor) and t.is_floating_point() and t.shape == ref.shape), None)
    if x is None or ref.dim() < 2 or ref.size(-1) < 2:
        return None
    c = (out * ref).sum(-1) / (ref * ref).sum(-1).clamp_min(1e-30)  # (...,): the best factor for each row
    if _largest(out - c.unsqueeze(-1) * ref) > 1e-3 * max(float(ref.abs().max()), 1e-30) or float(c.std()) < 1e-3:
        return None
    for name, stat in (("mean square", x.pow(2).mean(-1)), ("variance", x.var(-1, unbiased=False))):
        if torch.allclose(c * stat.sqrt(), torch.ones_like(c), rtol=0.05, atol=0.0):
            return f"; row by row, ours = reference / sqrt(the row's {name}): a square root missing"
    return None


def _sequences(inputs: tuple[Any, ...]) -> list[int] | None:
    """The indices of the float inputs ``(..., T, d)`` that share one length T > 2 (self-attention's query, key and
    value, a layer's x), or None."""
    found = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.is_floating_point() and x.dim() >= 3]
    if not found or len({inputs[i].size(-2) for i in found}) != 1 or inputs[found[0]].size(-2) < 3:
        return None
    return found


def _future_hint(
    ours: Callable[..., Any], reference: Callable[..., Any], inputs: tuple[Any, ...]
) -> tuple[str, tuple[str, ...]] | None:
    """Where the reference is causal (its outputs before the last position ignore the last position's inputs): which
    earlier positions of ours move when the last position's inputs change. (The finding, the causes), or None."""
    found = _sequences(inputs)
    if found is None:
        return None
    T = inputs[found[0]].size(-2)
    generator = torch.Generator().manual_seed(0)
    changed = list(inputs)
    for i in found:
        x = inputs[i].clone()
        x[..., -1, :] += torch.randn(x[..., -1, :].shape, generator=generator).to(x.device, x.dtype)
        changed[i] = x
    try:
        moves = []
        for fn in (ours, reference):
            before, after = _evaluate(fn, inputs)[0], _evaluate(fn, tuple(changed))[0]
            if before.dim() < 2 or before.size(-2) != T or before.shape != after.shape:
                return None
            moved = (after - before).abs().flatten(0, -3).amax((0, -1)) if before.dim() > 2 else (after - before).abs()
            moves.append(moved.reshape(-1)[: T - 1] > _tolerance(before, 1e-5))  # (T - 1,): earlier positions moved
    except (RuntimeError, ValueError, TypeError):
        return None
    leak, ref_leak = moves
    if bool(ref_leak.any()) or not bool(leak.any()):
        return None
    if leak.nonzero().flatten().tolist() == [T - 2]:
        return (f"; changing the last position's input moves ours' output at position {T - 2}, the one before it, "
                "where the reference's stays: ours sees one token ahead"), ("off_by_one_mask",)  # fmt: skip
    return (f"; changing the last position's input moves ours' outputs at {int(leak.sum())} earlier positions, where "
            "the reference's stay: ours sees the future"), ("no_causal_mask", "mask_convention")  # fmt: skip


def _rows_hint(ours: Callable[..., Any], reference: Callable[..., Any], inputs: tuple[Any, ...]) -> str | None:
    """With every position of the float inputs holding the same vector, does the reference give the same output at
    every position and ours not? Then ours moves values between positions and features (a reshape)."""
    found = _sequences(inputs)
    if found is None:
        return None
    same = tuple(x[..., :1, :].expand_as(x).contiguous() if i in found else x for i, x in enumerate(inputs))
    try:
        out, ref = _evaluate(ours, same)[0], _evaluate(reference, same)[0]
    except (RuntimeError, ValueError, TypeError):
        return None
    if out.shape != ref.shape or out.dim() < 2:
        return None
    tol = _tolerance(ref, 1e-5)
    if _largest(ref - ref[..., :1, :]) > tol or _largest(out - out[..., :1, :]) <= tol:
        return None
    return (
        "; with the same vector at every position, the reference gives the same output at every position and ours "
        "does not: ours moves values between positions and features"
    )


def _relative_gap(ours: Callable[..., Any], reference: Callable[..., Any], inputs: tuple[Any, ...]) -> float:
    out, _ = _evaluate(ours, inputs)
    ref, _ = _evaluate(reference, inputs)
    if out.shape != ref.shape:
        return math.inf
    return _largest(torch.where(out == ref, 0.0, (out - ref).abs())) / max(float(ref.abs().max()), 1e-30)


def _epsilon_hint(
    ours: Callable[..., Any], reference: Callable[..., Any], inputs: tuple[Any, ...], relative: float
) -> tuple[str, float] | None:
    """Whether the relative difference grows when the float inputs shrink 1000 times (an epsilon in the wrong
    place): (the finding, the small inputs' relative difference), or None."""
    if not any(isinstance(x, Tensor) and x.is_floating_point() for x in inputs):
        return None
    small = tuple(x * 1e-3 if isinstance(x, Tensor) and x.is_floating_point() else x for x in inputs)
    s_relative = _relative_gap(ours, reference, small)
    if s_relative <= 10 * relative or s_relative <= 1e-3:
        return None
    return (
        f"with inputs 1000 times smaller the relative difference grows from {relative:.2g} to {s_relative:.2g}",
        s_relative,
    )


def equality_probe(
    ours: Callable[..., Any] | Tensor,
    reference: Callable[..., Any] | Tensor,
    *inputs: Any,
    atol: float = 1e-5,
) -> ProbeReport:
    """The largest difference between ``ours(*inputs)`` and ``reference(*inputs)``, and what it looks like.

    Either may be a tensor instead of a callable (a positional-encoding table, say). A callable may return a
    tuple ``(output, weights)``, as attention modules do: then the attention weights are compared too, and
    the report says whether ours are flatter or sharper than the reference's, or attend where it blocks
    (for ``nn.MultiheadAttention`` pass ``average_attn_weights=False`` to get per-head weights). Give both the
    same weights first (``MultiHeadAttention.from_torch``, ``load_state_dict``). To find an epsilon in the
    wrong place, the probe also runs both on the float inputs scaled by 1e-3, even when they agree at scale 1.
    """
    # Each pattern recognised is one small function above (_scale_hint, _attention_hint...): a new one is a new
    # function and a few lines here.
    for fn, whose in ((ours, " of ours"), (reference, " of the reference")):
        unsteady = None if isinstance(fn, Tensor) else _unsteady("equality", fn, *inputs, whose=whose)
        if unsteady:
            return unsteady
    out, weights = _evaluate(ours, inputs)
    ref, ref_weights = _evaluate(reference, inputs)
    failed = _shape_report(out, ref) or _non_finite_report(out, ref)
    if failed:
        return failed
    gap = torch.where(out == ref, 0.0, (out - ref).abs())  # equal infinities differ by 0, not by inf - inf = NaN
    diff = _largest(gap)
    relative = diff / max(float(ref.abs().max()), 1e-30)
    runs = None if isinstance(ours, Tensor) or isinstance(reference, Tensor) else (ours, reference)
    epsilon = _epsilon_hint(*runs, inputs, relative) if runs else None
    if diff <= _tolerance(ref, atol):
        if epsilon is None:
            return ProbeReport("equality", False, diff, f"equal to the reference ({_ROUNDING})")
        finding = f"equal at the inputs' scale ({_ROUNDING}), but {epsilon[0]}"
        return _flag("equality", epsilon[1], finding, "eps_outside_sqrt")
    finding = _where(gap, ref, diff)
    causes: list[str | tuple[str, str]] = []
    table = _table_hint(out, ref)
    if table:
        causes.append(table)
    scale = _scale_hint(out, ref)
    if scale:
        finding += scale[0]
        causes.append(scale[1])
    root = None if scale or not runs else _root_hint(out, ref, inputs)
    if root:
        finding += root
        causes.append("no_root")
    attention = _attention_hint(weights, ref_weights)
    if attention:
        causes.append(attention)
    elif not causes and runs and (weights is None or ref_weights is None):
        future = _future_hint(*runs, inputs)
        rows = None if future else _rows_hint(*runs, inputs)
        mixing = None if future or rows else _mixing_hint(*runs, inputs)
        if future:
            finding += future[0]
            causes += list(future[1])
        elif rows:
            finding += rows
            causes.append(("head_split", f"{CAUSES['head_split']} (a view(B, h, T, d_k) without the transpose mixes "
                                         "positions and heads)"))  # fmt: skip
        elif mixing:
            finding += mixing
            causes += ["wrong_scale", "mask_convention", "softmax_axis"]
    if epsilon and not root:  # a missing root also grows as the inputs shrink
        finding += "; " + epsilon[0]
        causes.append("eps_outside_sqrt")
    return _flag("equality", diff, finding, *(causes or ["unknown"]))


def padding_probe(
    fn: Callable[[Tensor], Any], tokens: Tensor, pad_id: int, *, extra: int = 4, atol: float = 1e-5
) -> ProbeReport:
    """Append ``extra`` padding positions to every sequence: do the outputs at real (non-padding) positions
    move? With a correct padding mask they cannot, since no real position attends to padding. ``fn`` maps ids
    ``(B, T)`` to outputs ``(B, T, ...)``, or to one output per sequence ``(B, ...)`` (a classifier)."""
    _check_tokens(tokens)
    if extra < 1:
        raise ValueError(f"extra={extra}: append at least one padding position")
    if not bool((tokens != pad_id).any()):
        raise ValueError(f"every token is the padding id {pad_id}: give the probe real tokens to watch")
    unsteady = _unsteady("padding", fn, tokens)
    if unsteady:
        return unsteady
    base = _run(fn, tokens)
    padded = torch.cat(
        [tokens, torch.full((tokens.size(0), extra), pad_id, dtype=tokens.dtype, device=tokens.device)], 1
    )
    out = _run(fn, padded)
    per_position = base.dim() >= 2 and base.shape[:2] == tokens.shape
    real = (tokens != pad_id).cpu()  # (B, T)
    tol = _tolerance(base, atol)
    only_last = False  # only each sequence's last position moves: it reads the next token, the padding
    if per_position:
        moved = (out[:, : tokens.size(1)] - base).abs().reshape(*tokens.shape, -1).amax(-1).cpu()  # (B, T)
        change = _largest(moved[real])
        only_last = bool((moved[:, :-1][real[:, :-1]] <= tol).all())
    else:
        change = _largest((out - base).abs()) if out.shape == base.shape else math.inf
    if change <= tol:
        return ProbeReport(
            "padding",
            False,
            change,
            f"{extra} more padding positions move no real output ({_ROUNDING})",
        )
    finding = f"{extra} more padding positions move the real positions' outputs by up to {change:.3g}"
    causes: list[str | tuple[str, str]] = ["no_padding_mask", "mask_convention", "mask_wrong_axis"]
    if per_position:
        if only_last:
            finding += "; only each sequence's last position moves, the one the padding follows"
            causes.insert(0, ("off_by_one_mask", CAUSES["off_by_one_mask"] + " (it then reads the appended "
                              "padding; causality_probe measures the leak)"))  # fmt: skip
        finite = torch.isfinite(out.reshape(*out.shape[:2], -1)).all(-1).cpu()  # (B, T + extra)
        real_finite = bool(finite[:, : tokens.size(1)][real].all())
        if not bool(finite[:, tokens.size(1) :].all()):  # the padded queries had nothing to attend to
            causes = ["mask_wrong_axis", "mask_convention"]
            finding += "; the padded positions' own outputs are NaN (their query rows are fully masked)"
            if not real_finite:
                finding += ", and the NaN reaches real positions through later layers"
    else:
        finding = f"{extra} more padding positions move the output by up to {change:.3g}"
        causes.insert(0, "mean_over_padding")
    return _flag("padding", change, finding, *causes)


def _derangement(n: int, generator: torch.Generator) -> Tensor:
    """A random permutation of range(n) that moves every position (n >= 2)."""
    perm = torch.randperm(n, generator=generator, device="cpu")  # the generator is a CPU one
    while bool((perm == torch.arange(n, device="cpu")).any()):
        perm = torch.randperm(n, generator=generator, device="cpu")
    return perm


def position_probe(
    fn: Callable[[Tensor], Any],
    tokens: Tensor,
    *,
    added: bool | None = None,
    seed: int = 0,
    drowned: float = 0.2,
    atol: float = 1e-5,
) -> ProbeReport:
    """Does the model read the order of its tokens, and how much? Three experiments.

    First, shuffle the first half of each sequence and watch the outputs of the second half: each of those
    tokens still sees the same tokens before it (and after it), in another order. A bidirectional model without
    positional information cannot tell, nor can a one-layer causal one, and those outputs stay the same:
    flagged. (A causal model with two or more layers reads some order through its mask alone, positions or not.)
    A function whose outputs do not mix positions at all (the embeddings plus the encoding, say: what a first
    layer reads) skips this experiment, which would tell nothing; the second decides.

    Second, permute all positions (one random permutation that moves every position) and measure how far the
    output moves beyond following the permutation, relative to the change from new tokens (the other sequences'
    tokens in their place): a model that reads positions about as much as tokens scores near 1, one that
    ignores them 0.

    Third, repeat each sequence's first token at every position: an encoding *added* to the embeddings makes
    those outputs differ from position to position; positions that act only inside attention (rotary, relative
    biases, a causal mask) cannot, since every key and value is the same. Only for an added encoding is a share
    below ``drowned`` flagged as too weak (an untrained rotary or relative model attends almost uniformly and
    scores low too, without a bug). Neighbouring positions have similar encodings, so the strength needs at least
    4 tokens; with 3 the report gives only the first experiment.

    A causal model of two or more layers without any encoding still reads order (through its mask), so from its
    outputs it cannot be told from a rotary one. Say what the model is meant to do: ``added=True`` (an encoding
    added to the embeddings, learned or sinusoidal: the paper, GPT-2, BERT) flags a model that adds none;
    ``added=None`` (the default) accepts either kind and says which it found.
    """
    _check_tokens(tokens, min_length=3, min_batch=2)
    unsteady = _unsteady("position", fn, tokens)
    if unsteady:
        return unsteady
    T = tokens.size(1)
    generator = torch.Generator().manual_seed(seed)
    perm = _derangement(T, generator).to(tokens.device)  # drawn first: the share below reads the same as it did
    base = _run(fn, tokens)
    _check_per_position(base, tokens)
    tol = _tolerance(base, atol)
    k = max(2, T // 2)  # positions [0, k) shuffled, positions [k, T) watched
    order = torch.cat([_derangement(k, generator), torch.arange(k, T, device="cpu")]).to(tokens.device)
    others = torch.cat([tokens.roll(1, dims=0)[:, :k], tokens[:, k:]], 1)  # another sequence's first half
    mixes = float((_run(fn, others)[:, k:] - base[:, k:]).norm()) > tol * math.sqrt(base[:, k:].numel())
    if mixes:  # later outputs read earlier tokens: shuffle those, watch the later outputs
        moved = (tokens[:, order] != tokens).any(-1)  # (B,): the sequences the shuffle changes
        if not bool(moved.any()):
            raise ValueError(
                f"shuffling tokens 0..{k - 1} changes no sequence (each repeats one id there, padding say): give "
                "sequences whose first half holds different tokens"
            )
        shuffled = float((_run(fn, tokens[:, order])[moved, k:] - base[moved, k:]).norm())
        if shuffled <= tol * math.sqrt(base[moved, k:].numel()):
            return _flag(
                "position", 0.0,
                f"shuffling tokens 0..{k - 1} leaves the outputs at positions {k}..{T - 1} unchanged: the model "
                "ignores order", "no_positions",
            )  # fmt: skip
    beyond = float((_run(fn, tokens[:, perm]) - base[:, perm]).norm())
    from_tokens = float((_run(fn, tokens.roll(1, dims=0)) - base).norm())
    if from_tokens <= tol * math.sqrt(base.numel()):
        raise ValueError("every sequence of the batch gives the same output: give sequences that differ")
    if beyond <= tol * math.sqrt(base.numel()):
        return _flag(
            "position", 0.0, "permuting the positions only permutes the outputs: the model ignores order",
            "no_positions",
        )  # fmt: skip
    share = beyond / from_tokens
    finding = f"positions move the output {share:.2f} times as much as new tokens do"
    if T < 4:
        return ProbeReport(
            "position", False, share, finding + " (too few tokens to judge how strongly: give 4 or more)"
        )
    constant = _run(fn, tokens[:, :1].expand(-1, T))  # each sequence's first token at every position
    adds = float((constant - constant[:, :1]).norm()) > tol * math.sqrt(constant.numel())
    if not adds:
        finding += (
            "; a repeated token gives the same output at every position: no encoding is added, order is read "
            "inside attention only (rotary or relative positions, or a causal mask)"
        )
        if added:
            return _flag("position", share, finding + ", and this model is meant to add one", "no_positions")
        finding += (
            ", whose strength grows with training. If the model is meant to add an encoding (learned or sinusoidal, "
            "as GPT-2 does), it adds none: position_probe(..., added=True) flags that"
        )
        return ProbeReport("position", False, share, finding)
    if share < drowned:
        return _flag("position", share, finding, "weak_positions")
    return ProbeReport("position", False, share, finding)


def batch_probe(fn: Callable[..., Any], inputs: Tensor | tuple[Tensor, ...], *, atol: float = 1e-5) -> ProbeReport:
    """Run each example alone and compare with its output in the batch: a model must treat the examples of a
    batch independently. ``inputs`` is one tensor ``(B, ...)`` or a tuple of them, given to ``fn`` in order."""
    args = inputs if isinstance(inputs, tuple) else (inputs,)
    if not args or not all(isinstance(a, Tensor) and a.dim() >= 1 for a in args):
        raise ValueError("inputs must be a tensor (B, ...) or a tuple of them")
    B = args[0].size(0)
    if B < 2 or any(a.size(0) != B for a in args):
        raise ValueError(
            f"the batch probe needs a batch of at least 2 examples, the same number in every input; got "
            f"{[tuple(a.shape) for a in args]}"
        )
    unsteady = _unsteady("batch", fn, *args)
    if unsteady:
        return unsteady
    together = _run(fn, *args)
    alone = torch.cat([_run(fn, *(a[b : b + 1] for a in args)) for b in range(B)])
    change = _largest((together - alone).abs()) if together.shape == alone.shape else math.inf
    if change <= _tolerance(together, atol):
        return ProbeReport(
            "batch", False, change, f"each example's output is the same alone and in the batch ({_ROUNDING})"
        )
    finding = f"an example's output changes by up to {change:.3g} with the rest of its batch"
    return _flag("batch", change, finding, "batch_mixing")


def output_probe(outputs: Tensor | tuple[Tensor, ...], *, atol: float = 1e-4) -> ProbeReport:
    """What a model's outputs are, for a loss that expects logits (``F.cross_entropy``): raw logits,
    log-probabilities or probabilities, and normalised along which axis. A tuple (``(logits, loss)``, as a GPT
    returns) is read by its first element."""
    if isinstance(outputs, (tuple, list)) and outputs:
        outputs = outputs[0]
    if not isinstance(outputs, Tensor) or outputs.dim() < 1 or outputs.size(-1) < 2:
        raise ValueError(f"outputs must have a vocabulary axis last; got shape {getattr(outputs, 'shape', outputs)}")
    x = outputs.detach().double()
    V = x.size(-1)
    one = torch.ones(()).double()
    in_unit = bool(((x >= 0) & (x <= 1)).all())
    if in_unit and torch.allclose(x.sum(-1), one, atol=atol):
        floor = math.log(1 + (V - 1) / math.e)
        return _flag(
            "output", floor, f"probabilities (each row sums to 1 over the last axis, V = {V})",
            ("probabilities", f"{CAUSES['probabilities']} (here the loss cannot go below ln(1 + (V - 1)/e) = "
             f"{floor:.3f})"),
        )  # fmt: skip
    if torch.allclose(x.exp().sum(-1), one, atol=atol):
        return ProbeReport(
            "output", False, 0.0, "log-probabilities over the last axis: harmless with F.cross_entropy, whose "
            "log_softmax leaves log-probabilities unchanged (NLLLoss is their usual loss)",
        )  # fmt: skip
    for axis in range(x.dim() - 1):
        if x.size(axis) == 1 and bool((x == 0).all()):
            return _flag(
                "output", float(axis), f"every value is exactly 0: log-probabilities over axis {axis}, of size 1",
                ("log_softmax_axis", f"log_softmax over axis {axis}, which has one entry (without dim, PyTorch picks "
                 "dim 0 for a 1-d or 3-d input: a batch of one): write F.log_softmax(x, dim=-1)"),
            )  # fmt: skip
        if x.size(axis) < 2:
            continue
        if in_unit and torch.allclose(x.sum(axis), one, atol=atol):
            return _flag(
                "output", float(axis), f"probabilities normalised along axis {axis}, not the last one",
                ("softmax_axis", f"softmax over axis {axis}: a softmax belongs over the vocabulary, dim=-1"),
                ("probabilities", "and probabilities at all: give F.cross_entropy the logits, which it normalises "
                 "itself"),
            )  # fmt: skip
        if torch.allclose(x.exp().sum(axis), one, atol=atol):
            return _flag(
                "output", float(axis), f"log-probabilities normalised along axis {axis}, not the last one",
                ("log_softmax_axis", f"log_softmax over axis {axis} (without dim, PyTorch picks dim 0 for a 1-d or "
                 "3-d input, dim 1 otherwise, with a warning): write F.log_softmax(x, dim=-1)"),
            )  # fmt: skip
    return ProbeReport("output", False, 0.0, "raw logits (not normalised along any axis): what F.cross_entropy expects")
