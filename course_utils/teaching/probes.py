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


@dataclass(frozen=True)
class ProbeReport:
    """What a probe measured. ``flagged`` is True when the measurement points to a bug; ``value`` is the
    number behind it; ``likely_bug`` names the usual causes ("" when nothing is flagged); ``detail`` holds a
    tensor worth plotting where there is one (the causality probe's leak matrix)."""

    probe: str
    flagged: bool
    value: float
    finding: str
    likely_bug: str = ""
    detail: Tensor | None = field(default=None, repr=False, compare=False)

    def __str__(self) -> str:
        text = f"{'⚠️ ' if self.flagged else '✅ '}{self.probe} probe: {self.finding}"
        return text + (f"\n   likely bug: {self.likely_bug}" if self.likely_bug else "")

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # IPython shows the text, not the dataclass
        printer.text(str(self))


def _run(fn: Callable[..., Any], *args: Any) -> Tensor:
    """The model's output as a float tensor: the first element of a tuple (attention returns (out, weights))."""
    with torch.no_grad():
        out = fn(*args)
    if isinstance(out, tuple):
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


def _unsteady(name: str, fn: Callable[..., Any], *args: Any) -> ProbeReport | None:
    """A report when two identical calls give different outputs (dropout on), else None."""
    first, second = _run(fn, *args), _run(fn, *args)
    if first.shape == second.shape and torch.equal(torch.nan_to_num(first), torch.nan_to_num(second)):
        return None
    change = _largest((first - second).abs()) if first.shape == second.shape else math.inf
    return ProbeReport(name, True, change, f"two identical calls differ by up to {change:.3g}", DROPOUT_ON)


def _check_tokens(tokens: Tensor) -> None:
    if not isinstance(tokens, Tensor) or tokens.dim() != 2 or tokens.is_floating_point():
        raise ValueError(f"tokens must be integer ids of shape (B, T); got {getattr(tokens, 'shape', tokens)!r}")


def _check_per_position(outputs: Tensor, tokens: Tensor) -> None:
    if outputs.dim() < 2 or outputs.shape[:2] != tokens.shape:
        raise ValueError(
            f"fn must return outputs of shape (B, T, ...) for tokens {tuple(tokens.shape)}; got {tuple(outputs.shape)}"
        )


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
    id) and measures how far the outputs at positions ``i < j`` move. ``fn`` maps ids ``(B, T)`` to outputs
    ``(B, T, ...)``. ``detail`` is the ``(T, T)`` matrix of the largest change at ``i`` (row) when ``j``
    (column) changes; in a causal model everything above the diagonal is 0.
    """
    _check_tokens(tokens)
    unsteady = _unsteady("causality", fn, tokens)
    if unsteady:
        return unsteady
    base = _run(fn, tokens)
    T = tokens.size(1)
    _check_per_position(base, tokens)
    bad = ~torch.isfinite(base).flatten(2).all(-1) if base.dim() > 2 else ~torch.isfinite(base)  # (B, T)
    if bad.any():
        positions = sorted({int(t) for t in bad.nonzero()[:, 1]})
        return ProbeReport(
            "causality", True, math.nan, f"the output is NaN or infinite at positions {positions}",
            "a query row with every key masked: a causal mask of the other convention leaves the last position "
            "nothing to attend to (nn.MultiheadAttention takes True = blocked; pass ~mask)",
        )  # fmt: skip
    allowed = torch.tensor([v for v in range(vocab_size) if v not in exclude], device=tokens.device)
    generator = torch.Generator().manual_seed(seed)
    tol = _tolerance(base, atol)
    leak = torch.zeros(T, T)
    for j in range(1, T):
        changed = tokens.clone()
        pick = allowed[torch.randint(len(allowed), (tokens.size(0),), generator=generator).to(tokens.device)]
        same = pick == tokens[:, j]
        pick[same] = allowed[(torch.searchsorted(allowed, pick[same]) + 1) % len(allowed)]  # always a different id
        changed[:, j] = pick
        moved = (_run(fn, changed) - base).abs()  # (B, T, ...)
        leak[:j, j] = moved[:, :j].reshape(moved.size(0), j, -1).amax(dim=(0, 2)).cpu()
    worst = float(leak.max())
    if worst <= tol:
        return ProbeReport(
            "causality", False, worst,
            f"no output moves when a later token changes ({'largest change 0' if worst == 0 else _ROUNDING})",
            detail=leak,
        )  # fmt: skip
    i, j = divmod(int(leak.argmax()), T)
    distances = {int(b - a) for a, b in (leak > tol).nonzero().tolist()}
    finding = (
        f"output {i} moves by {worst:.3g} when token {j} changes; later tokens reach earlier outputs at distances "
        f"{sorted(distances)[:6]}{' ...' if len(distances) > 6 else ''}"
    )
    if distances == {1}:
        likely = (
            "an off-by-one causal mask: each position also sees the next token (tril(diagonal=1), or triu "
            "used with the wrong diagonal); the triangle must keep j <= i"
        )
    else:
        likely = (
            "no causal mask; or a mask of the other convention (nn.MultiheadAttention takes True = blocked); or, "
            "in an encoder-decoder, cross-attention whose queries come from the encoder (then the target's "
            "positions are its keys, unmasked)"
        )
    return ProbeReport("causality", True, worst, finding, likely, detail=leak)


def _as_output(value: Any) -> tuple[Tensor, Tensor | None]:
    if isinstance(value, tuple):
        items: list[Any] = list(value)
        first = items[0] if items else None
        if not isinstance(first, Tensor):
            raise TypeError("expected a tuple starting with a tensor, as attention's (output, weights)")
        weights = items[1] if len(items) > 1 and isinstance(items[1], Tensor) else None
        return first.detach().float(), None if weights is None else weights.detach().float()
    if not isinstance(value, Tensor):
        raise TypeError(f"expected a tensor or a tuple starting with one; got {type(value).__name__}")
    return value.detach().float(), None


def _evaluate(model: Callable[..., Any] | Tensor, inputs: tuple[Any, ...]) -> tuple[Tensor, Tensor | None]:
    if isinstance(model, Tensor):
        return _as_output(model)
    with torch.no_grad():
        return _as_output(model(*inputs))


def _table_hint(ours: Tensor, reference: Tensor) -> str | None:
    """For positional tables (positions, d): our column c equal to the reference's column 2c."""
    if ours.dim() != 2 or ours.shape != reference.shape or ours.size(1) < 8:
        return None
    d = ours.size(1)
    cols = torch.arange(2, (d - 1) // 2 + 1, 2)  # even columns c whose double 2c is still a column
    if len(cols) and torch.allclose(ours[:, cols], reference[:, 2 * cols], atol=1e-4):
        return (
            "your column c equals the reference's column 2c (for even c): 2i is applied twice (10000 ** (2 * i / d) with i "
            "already stepping by 2), which stretches every wavelength; use 10000 ** (i / d) for i in range(0, d, 2)"
        )
    return None


def _shape_report(out: Tensor, ref: Tensor) -> ProbeReport | None:
    if out.shape == ref.shape:
        return None
    return ProbeReport(
        "equality", True, math.inf, f"shapes differ: ours {tuple(out.shape)}, reference {tuple(ref.shape)}",
        "an axis swapped, merged or taken from the wrong input (an attention output has the query's length: "
        "queries from the encoder give the source's length)",
    )  # fmt: skip


def _non_finite_report(out: Tensor, ref: Tensor) -> ProbeReport | None:
    broken = ~torch.isfinite(out) & torch.isfinite(ref)
    if not broken.any():
        return None
    kinds = " and ".join(
        k for k, m in (("NaN", torch.isnan(out)), ("infinite", torch.isinf(out))) if (m & broken).any()
    )
    return ProbeReport(
        "equality", True, math.nan, f"ours is {kinds} at {int(broken.sum())} entries where the reference is finite",
        "log(0): the log of a probability that underflowed to 0 (use log_softmax) or of a zero target (0 * log 0 "
        "is NaN: use torch.xlogy); or a row with every entry masked (a mask of the other convention)",
    )  # fmt: skip


def _where(gap: Tensor, ref: Tensor, diff: float) -> str:
    """Where the largest difference ``gap`` (``|ours - reference|``) is, and the reference's value there."""
    flat = int(torch.nan_to_num(gap, nan=math.inf).flatten().argmax())
    where = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), gap.shape))
    return f"largest difference {diff:.3g} at index {where} (reference value there {float(ref[where]):.4g})"


def _scale_hint(out: Tensor, ref: Tensor) -> tuple[str, str] | None:
    """Ours = the reference times a constant (on the finite entries): (the finding, the likely cause), or None."""
    n = out.size(-1)
    finite = torch.isfinite(out) & torch.isfinite(ref)
    out, ref = out[finite], ref[finite]
    ratio = float((out * ref).sum() / (ref * ref).sum().clamp_min(1e-30))  # the best c in ours ~ c * reference
    residual = float((out - ratio * ref).norm() / ref.norm().clamp_min(1e-30))
    if not residual < 1e-3 or abs(ratio - 1) <= 1e-4:
        return None
    unbiased = n > 1 and min(abs(ratio - math.sqrt((n - 1) / n)), abs(ratio - math.sqrt(n / (n - 1)))) < 2e-4
    if unbiased:
        cause = (
            f"{ratio:.5f} is sqrt((n-1)/n) for n = {n} features: an unbiased std (x.std() divides by n - 1); "
            "LayerNorm uses the biased variance, x.var(unbiased=False)"
        )
    else:
        cause = "a constant factor: a scale applied twice, or not at all (sqrt(d_k), sqrt(d_model))"
    return f"; ours = reference x {ratio:.5f}", cause


def _attention_hint(weights: Tensor | None, ref_weights: Tensor | None) -> str | None:
    """What differs between two sets of attention weights ``(..., T_q, T_k)``, or None."""
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
    if blocked > 1e-3:
        return (
            f"ours puts {blocked:.0%} of its attention (per row, on average) on keys the reference blocks: a mask of "
            "the other convention (nn.MultiheadAttention takes True = blocked), or one broadcast along the wrong axis"
        )
    if same_top < 0.9:
        return (
            f"ours favours another key than the reference in {1 - same_top:.0%} of the rows: queries and keys are "
            "paired differently, as when heads are split with view(B, h, T, d_k) instead of "
            "view(B, T, h, d_k).transpose(1, 2), or merged without transposing back"
        )
    if sharp < ref_sharp - 1e-3:
        return (
            f"ours attends more evenly (largest weight {sharp:.3f} per row on average, reference {ref_sharp:.3f}): "
            "scores divided by too large a number, such as sqrt(d_model) instead of sqrt(d_k)"
        )
    if sharp > ref_sharp + 1e-3:
        return (
            f"ours attends more sharply (largest weight {sharp:.3f} per row on average, reference {ref_sharp:.3f}): "
            "scores not divided by sqrt(d_k), or by too small a number"
        )
    return None


def _epsilon_hint(
    ours: Callable[..., Any], reference: Callable[..., Any], inputs: tuple[Any, ...], relative: float
) -> tuple[str, str] | None:
    """Whether the relative difference grows when the float inputs shrink 1000 times (an epsilon in the wrong
    place): (the finding, the likely cause), or None."""
    if not any(isinstance(x, Tensor) and x.is_floating_point() for x in inputs):
        return None
    small = tuple(x * 1e-3 if isinstance(x, Tensor) and x.is_floating_point() else x for x in inputs)
    s_out, _ = _evaluate(ours, small)
    s_ref, _ = _evaluate(reference, small)
    s_relative = _largest((s_out - s_ref).abs()) / max(float(s_ref.abs().max()), 1e-30)
    if s_relative <= 10 * relative or s_relative <= 1e-3:
        return None
    return (
        f"; with inputs 1000 times smaller the relative difference grows from {relative:.2g} to {s_relative:.2g}",
        "an epsilon in the wrong place: (x - mean) / (std + eps) instead of (x - mean) / sqrt(var + eps), "
        "which matters when the variance is small",
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
    same weights first (``MultiHeadAttention.from_torch``, ``load_state_dict``). To tell an epsilon in the
    wrong place, the probe also runs both on the float inputs scaled by 1e-3.
    """
    # Each pattern recognised is one small function above (_scale_hint, _attention_hint...): a new one is a new
    # function and a few lines here.
    if not isinstance(ours, Tensor) and not isinstance(reference, Tensor):
        unsteady = _unsteady("equality", ours, *inputs)
        if unsteady:
            return unsteady
    out, weights = _evaluate(ours, inputs)
    ref, ref_weights = _evaluate(reference, inputs)
    failed = _shape_report(out, ref) or _non_finite_report(out, ref)
    if failed:
        return failed
    gap = torch.where(out == ref, 0.0, (out - ref).abs())  # equal infinities differ by 0, not by inf - inf = NaN
    diff = _largest(gap)
    if diff <= _tolerance(ref, atol):
        return ProbeReport("equality", False, diff, f"equal to the reference ({_ROUNDING})")
    finding = _where(gap, ref, diff)
    hints = [_table_hint(out, ref)]
    scale = _scale_hint(out, ref)
    if scale:
        finding += scale[0]
        hints.append(scale[1])
    hints.append(_attention_hint(weights, ref_weights))
    if not isinstance(ours, Tensor) and not isinstance(reference, Tensor):
        relative = diff / max(float(ref.abs().max()), 1e-30)
        epsilon = _epsilon_hint(ours, reference, inputs, relative)
        if epsilon:
            finding += epsilon[0]
            hints.append(epsilon[1])
    likely = "; ".join(h for h in hints if h) or (
        "the difference has no simple pattern: compare intermediate results (forward hooks) to find the first "
        "step that differs"
    )
    return ProbeReport("equality", True, diff, finding, likely)


def padding_probe(
    fn: Callable[[Tensor], Any], tokens: Tensor, pad_id: int, *, extra: int = 4, atol: float = 1e-5
) -> ProbeReport:
    """Append ``extra`` padding positions to every sequence: do the outputs at real (non-padding) positions
    move? With a correct padding mask they cannot, since no real position attends to padding. ``fn`` maps ids
    ``(B, T)`` to outputs ``(B, T, ...)``, or to one output per sequence ``(B, ...)`` (a classifier)."""
    _check_tokens(tokens)
    unsteady = _unsteady("padding", fn, tokens)
    if unsteady:
        return unsteady
    base = _run(fn, tokens)
    padded = torch.cat(
        [tokens, torch.full((tokens.size(0), extra), pad_id, dtype=tokens.dtype, device=tokens.device)], 1
    )
    out = _run(fn, padded)
    per_position = base.dim() >= 2 and base.shape[:2] == tokens.shape
    if per_position:
        real = (tokens != pad_id).cpu()  # (B, T)
        moved = (out[:, : tokens.size(1)] - base).abs().reshape(*tokens.shape, -1).amax(-1).cpu()  # (B, T)
        change = _largest(moved[real])
    else:
        change = _largest((out - base).abs())
    tol = _tolerance(base, atol)
    if change <= tol:
        return ProbeReport(
            "padding",
            False,
            change,
            f"{extra} more padding positions move no real output ({_ROUNDING})",
        )
    return ProbeReport(
        "padding", True, change, f"{extra} more padding positions move the real positions' outputs by up to {change:.3g}",
        "real positions read the padding: no padding mask; a mask of the other convention; a (B, T) mask "
        "broadcast along the queries ((B, 1, T, 1)) instead of the keys ((B, 1, 1, T)); or pooling (a mean "
        "over T) that counts padded positions" if not per_position else
        "real positions read the padding: no padding mask; a mask of the other convention; or a (B, T) mask "
        "broadcast along the queries ((B, 1, T, 1)) instead of the keys ((B, 1, 1, T))",
    )  # fmt: skip


def position_probe(
    fn: Callable[[Tensor], Any], tokens: Tensor, *, seed: int = 0, drowned: float = 0.2, atol: float = 1e-5
) -> ProbeReport:
    """Permute each sequence's positions (one random permutation that moves every position): does the output
    merely follow the permutation? A model without positional information is permutation-equivariant,
    ``fn(x[:, p]) == fn(x)[:, p]``; a model that uses positions is not. The report gives the change beyond
    the permutation relative to the change from new tokens (the other sequences' tokens in their place): a
    model that reads positions about as much as tokens scores near 1, one that ignores them 0. Below
    ``drowned`` the positional signal is flagged as too weak."""
    _check_tokens(tokens)
    unsteady = _unsteady("position", fn, tokens)
    if unsteady:
        return unsteady
    T = tokens.size(1)
    if T < 2 or tokens.size(0) < 2:
        raise ValueError("the position probe needs at least 2 sequences of at least 2 tokens")
    generator = torch.Generator().manual_seed(seed)
    perm = torch.randperm(T, generator=generator)
    while T > 1 and bool((perm == torch.arange(T)).any()):
        perm = torch.randperm(T, generator=generator)
    perm = perm.to(tokens.device)
    base = _run(fn, tokens)
    _check_per_position(base, tokens)
    beyond = float((_run(fn, tokens[:, perm]) - base[:, perm]).norm())
    from_tokens = float((_run(fn, tokens.roll(1, dims=0)) - base).norm())
    share = beyond / max(from_tokens, 1e-30)
    if beyond <= _tolerance(base, atol) * math.sqrt(base.numel()):
        return ProbeReport(
            "position", True, share, "permuting the input only permutes the output: the model ignores positions",
            "no positional information: the encoding is missing, or computed and thrown away (x + pe whose result is "
            "not assigned, x.add(pe) instead of x.add_(pe)); attention alone is permutation-equivariant",
        )  # fmt: skip
    finding = f"positions move the output {share:.2f} times as much as new tokens do"
    if share < drowned:
        return ProbeReport(
            "position", True, share, finding,
            "a weak positional signal: embeddings far larger than the encoding (nn.Embedding's N(0, 1) start "
            "times sqrt(d_model)), or an encoding scaled down",
        )  # fmt: skip
    return ProbeReport("position", False, share, finding)


def batch_probe(fn: Callable[[Tensor], Any], inputs: Tensor, *, atol: float = 1e-5) -> ProbeReport:
    """Run each example alone and compare with its output in the batch: a model must treat the examples of a
    batch independently."""
    unsteady = _unsteady("batch", fn, inputs)
    if unsteady:
        return unsteady
    together = _run(fn, inputs)
    alone = torch.cat([_run(fn, inputs[b : b + 1]) for b in range(inputs.size(0))])
    change = _largest((together - alone).abs())
    if change <= _tolerance(together, atol):
        return ProbeReport(
            "batch", False, change, f"each example's output is the same alone and in the batch ({_ROUNDING})"
        )
    return ProbeReport(
        "batch", True, change, f"an example's output changes by up to {change:.3g} with the rest of its batch",
        "something mixes the batch: a softmax or log_softmax over dim 0 (F.log_softmax(x) without dim picks "
        "dim 0 for a 3-d input), a normalisation over the batch axis, or a mask without its head axis",
    )  # fmt: skip


def output_probe(outputs: Tensor, *, atol: float = 1e-4) -> ProbeReport:
    """What a model's outputs are, for a loss that expects logits (``F.cross_entropy``): raw logits,
    log-probabilities (normalised along the last axis, or another one), or probabilities."""
    x = outputs.detach().double()
    if x.dim() < 1 or x.size(-1) < 2:
        raise ValueError(f"outputs must have a vocabulary axis last; got shape {tuple(outputs.shape)}")
    V = x.size(-1)
    if bool(((x >= 0) & (x <= 1)).all()) and torch.allclose(x.sum(-1), torch.ones(()).double(), atol=atol):
        floor = math.log(1 + (V - 1) / math.e)
        return ProbeReport(
            "output", True, floor, f"probabilities (each row sums to 1 over the last axis, V = {V})",
            f"probabilities fed to F.cross_entropy, which applies log_softmax itself: the loss cannot go below "
            f"ln(1 + (V - 1)/e) = {floor:.3f} and the gradients shrink; return the logits",
        )  # fmt: skip
    if torch.allclose(x.exp().sum(-1), torch.ones(()).double(), atol=atol):
        return ProbeReport(
            "output", False, 0.0, "log-probabilities over the last axis: harmless with F.cross_entropy, whose "
            "log_softmax leaves log-probabilities unchanged (NLLLoss is their usual loss)",
        )  # fmt: skip
    for axis in range(x.dim() - 1):
        if x.size(axis) > 1 and torch.allclose(x.exp().sum(axis), torch.ones(()).double(), atol=atol):
            return ProbeReport(
                "output", True, float(axis), f"log-probabilities normalised along axis {axis}, not the last one",
                f"log_softmax without dim: PyTorch picks dim {axis} for a {x.dim()}-d input (with a warning); "
                "write F.log_softmax(x, dim=-1)",
            )  # fmt: skip
    return ProbeReport("output", False, 0.0, "raw logits (not normalised along any axis): what F.cross_entropy expects")
