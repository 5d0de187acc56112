"""The bug lab (chapter 09): mystery modules to diagnose with the probes, the checker of a diagnosis, and the
checker of the causality probe's core step.

The modules below each hold one bug that the chapter does not name. They live here, not in the notebook, so
that the student edition does not show the bug next to the question; reading this file gives the answers away.
"""

from __future__ import annotations

import inspect
import math
import numbers
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from ..model.attention import MultiHeadAttention
from ..model.encoder import Encoder
from ..model.masks import padding_mask
from ..model.positional import PositionalEncoding
from ..utils import code_names
from ._core import Named, NotYet, Verdict, call, each_case, verdict
from .predictions import Question, judge

__all__ = ["MYSTERIES", "Mystery", "check_diagnosis", "check_future_leak", "mystery_model"]

VOCAB, PAD = 12, 0  # the mysteries read ids 0..11; id 0 is padding where padding matters


class _LanguageModel(nn.Module):
    """Mystery A: a one-block language model, ids (B, T) -> logits (B, T, V)."""

    def __init__(self, d_model: int = 32, n_heads: int = 4, block_size: int = 16) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, d_model)
        self.pos = nn.Embedding(block_size, d_model)
        self.attn = MultiHeadAttention(d_model, n_heads)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, VOCAB)

    def forward(self, tokens: Tensor) -> Tensor:
        T = tokens.size(1)
        x = self.embed(tokens) + self.pos(torch.arange(T, device=tokens.device))
        mask = torch.ones(T, T, dtype=torch.bool, device=tokens.device).tril(1)
        out, _ = self.attn(x, x, x, mask=mask)
        return self.head(self.norm(x + out))  # (B, T, V)


class _EmbeddedEncoder(nn.Module):
    """Embeddings (N(0, 1/d) start, scaled by sqrt(d)), the sinusoidal encoding and an encoder stack."""

    def __init__(self, n_layers: int, d_model: int = 32, n_heads: int = 4) -> None:
        super().__init__()
        self.d_model = d_model
        self.embed = nn.Embedding(VOCAB, d_model)
        nn.init.normal_(self.embed.weight, std=d_model**-0.5)
        self.positional = PositionalEncoding(d_model, max_len=64)
        self.encoder = Encoder(d_model, n_heads, 2 * d_model, n_layers=n_layers, dropout=0.1)


class _Encoder(_EmbeddedEncoder):
    """Mystery B: an encoder, ids (B, T) -> states (B, T, d_model); ``inputs(ids)`` is what its first layer reads."""

    def __init__(self) -> None:
        super().__init__(n_layers=2)

    def inputs(self, tokens: Tensor) -> Tensor:
        """The scaled embeddings plus the positional encoding, (B, T, d_model): the encoder stack's input."""
        x = self.embed(tokens) * math.sqrt(self.d_model)
        return x + self.positional.pe[: tokens.size(1)] / math.sqrt(self.d_model)

    def forward(self, tokens: Tensor) -> Tensor:
        out: Tensor = self.encoder(self.inputs(tokens), padding_mask(tokens, PAD))
        return out


class _Attention(MultiHeadAttention):
    """Mystery C: multi-head attention, a drop-in for nn.MultiheadAttention(batch_first=True)."""

    def _split_heads(self, x: Tensor) -> Tensor:
        B, T, _ = x.shape
        return x.reshape(B, self.n_heads, T, self.d_k)


class _Classifier(_EmbeddedEncoder):
    """Mystery D: a sequence classifier, ids (B, T) -> class logits (B, 3); ``states(ids)`` gives the encoder's
    output before pooling."""

    def __init__(self) -> None:
        super().__init__(n_layers=1)
        self.head = nn.Linear(self.d_model, 3)

    def states(self, tokens: Tensor) -> Tensor:
        """The encoder's output, (B, T, d_model), one state per position, before pooling."""
        x = self.positional(self.embed(tokens) * math.sqrt(self.d_model))
        out: Tensor = self.encoder(x, padding_mask(tokens, PAD))
        return out

    def forward(self, tokens: Tensor) -> Tensor:
        return self.head(self.states(tokens).mean(dim=1))  # (B, 3)


@dataclass(frozen=True)
class Mystery(Question):
    """A diagnosis question about a mystery module: ``what`` it is and how to call it, and the ``probe`` that
    catches its bug."""

    what: str = ""
    probe: str = ""


MYSTERIES: dict[str, Mystery] = {
    "A": Mystery(
        chapter="09",
        what="a one-block language model: ids (B, T) -> next-token logits (B, T, 12)",
        choices={
            "a": "an off-by-one causal mask: each position also sees the next token",
            "b": "no causal mask: every position sees the whole sequence",
            "c": "the padding mask broadcast along the wrong axis",
            "d": "nothing: it is a correct causal model",
        },
        answer="a",
        why={
            "b": "Without a mask, a change at any later position would move earlier outputs; the causality probe "
            "shows changes at distance 1 only.",
            "a": "The mask is torch.ones(T, T).tril(1): diagonal=1 keeps one entry above the diagonal, so position "
            "i reads token i + 1, the very token it must predict (bug 2 showed what training does with "
            "such a leak). The causality probe finds leaks at distance 1 only; the fix is tril() (diagonal 0).",
            "c": "This model takes no padding mask at all. The padding probe does flag it, but only each "
            "sequence's last position moves, the one the appended padding follows: that position reads the next "
            "token, padding or not, and the causality probe measures that leak, at distance 1. It is about order.",
            "d": "The causality probe flags it: outputs move when the next token changes.",
        },
        probe="causality_probe",
    ),
    "B": Mystery(
        chapter="09",
        what="an encoder: ids (B, T) -> states (B, T, 32); mystery_b.inputs(ids) is what its first layer reads, "
        "mystery_b.embed its embedding",
        choices={
            "a": "the positional encoding never reaches the encoder",
            "b": "the embeddings drown the positional encoding: initialised N(0, 1), then times sqrt(d_model)",
            "c": "the positional encoding uses 2i twice",
            "d": "the positional encoding is scaled down before it is added",
        },
        answer="d",
        why={
            "a": "Then permuting the positions would only permute the outputs, and the position probe would say the "
            "model ignores order. It measures a share above 0 instead (positions move the output a little, against "
            "new tokens): positions arrive, weakly.",
            "b": "The position probe flags a weak signal, which fits; but the embeddings are not large: "
            "mystery_b.embed.weight.std() * sqrt(32) is about 1, the size of the encoding's values (between -1 and 1). "
            "Measure before choosing.",
            "d": "inputs() adds pe / sqrt(d_model): the encoding arrives 5.7 times too small. The position probe "
            "flags a weak signal; the embeddings' scale is normal (about 1), and inputs(ids) minus the scaled "
            "embeddings, compared with sinusoidal_encoding by the equality probe, is the table times a constant "
            "(1/sqrt(32) = 0.177). Fix: x + pe, unscaled.",
            "c": "The positional part of inputs(ids) is the paper's table times a constant, not a table with "
            "stretched wavelengths: the equality probe finds a constant factor, not columns moved.",
        },
        probe="position_probe",
    ),
    "C": Mystery(
        chapter="09",
        what="multi-head attention, a drop-in for nn.MultiheadAttention(batch_first=True): (x, x, x) -> (out, weights)",
        choices={
            "a": "scores divided by sqrt(d_model) instead of sqrt(d_k)",
            "b": "the mask convention flipped",
            "c": "heads split with view(B, h, T, d_k), without the transpose",
            "d": "nothing: it equals PyTorch's module",
        },
        answer="c",
        why={
            "a": "Too large a divisor flattens the weights but keeps each head's own queries and keys; here even the "
            "weights' pattern differs, with no mask involved.",
            "b": "The difference appears with no mask at all, so it is not about the mask.",
            "c": "The projections give (B, T, h*d_k); view(B, h, T, d_k) reinterprets that memory without moving "
            "it, so a 'head' holds pieces of several positions. The shapes are right and nothing fails; the "
            "equality probe against nn.MultiheadAttention shows the difference. Fix: view(B, T, h, d_k)."
            "transpose(1, 2).",
            "d": "The equality probe shows a large difference from nn.MultiheadAttention with the same weights.",
        },
        probe="equality_probe",
    ),
    "D": Mystery(
        chapter="09",
        what="a sequence classifier: ids (B, T), padded with id 0 -> class logits (B, 3); mystery_d.states(ids) "
        "gives the encoder's states (B, T, 32) before pooling",
        choices={
            "a": "dropout left on at inference",
            "b": "its mean over the positions counts the padding",
            "c": "its encoder's attention has no padding mask: real positions attend to the padding",
            "d": "nothing: padding cannot change its output",
        },
        answer="b",
        why={
            "a": "Every probe runs the model twice on the same input first, and would have reported outputs that "
            "change from call to call; the padding probe measured a change caused by the padding instead.",
            "b": "states.mean(dim=1) averages every position, padding included, so the same sentence gets another "
            "class score with more padding. The padding probe flags the classifier; on mystery_d.states it stays "
            "quiet, so the attention is masked right and the pooling is left. The fix is a masked mean: "
            "(states * keep).sum(1) / keep.sum(1), keep = (tokens != pad)[..., None].",
            "c": "The padding probe on the classifier fits this too; but on mystery_d.states, before pooling, it is "
            "quiet: no real position's state moves with more padding, so the attention's mask is right.",
            "d": "The padding probe shows the output changing when padding is appended.",
        },
        probe="padding_probe",
    ),
}

_BUILDERS: dict[str, Callable[[], nn.Module]] = {"A": _LanguageModel, "B": _Encoder, "D": _Classifier}


def mystery_model(name: str, like: nn.MultiheadAttention | None = None) -> nn.Module:
    """Mystery ``name`` (``"A"`` to ``"D"``), built with seed 0 and in eval mode. Mystery C is attention: pass
    ``like``, an ``nn.MultiheadAttention(..., batch_first=True)``, to get it with that module's sizes and weights."""
    if name not in MYSTERIES:
        raise KeyError(f"no mystery {name!r}; there are {', '.join(MYSTERIES)}")
    if name == "C":
        if not isinstance(like, nn.MultiheadAttention):
            raise TypeError("mystery C copies an nn.MultiheadAttention: mystery_model('C', torch_attention)")
        return _Attention.from_torch(like).eval()
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = _BUILDERS[name]()
    return model.eval()


# What a function may use and still measure nothing: printing, and making the letter it returns.
_SAYS_ONLY = frozenset({"print", "str", "format", "upper", "lower", "strip"})


def _given_more_than_strings(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` holds values its code's names do not show: parameters with defaults (the grader's link keeps
    their presence) or, in this process, a closure holding anything but strings (``make(lambda: probe(...))``)."""
    try:
        if any(p.default is not p.empty for p in inspect.signature(fn).parameters.values()):
            return True
    except (TypeError, ValueError):
        pass
    held = [getattr(cell, "cell_contents", None) for cell in getattr(fn, "__closure__", None) or ()]
    return any(callable(v) or isinstance(v, nn.Module | Tensor | types.ModuleType) for v in held)


def check_diagnosis(diagnose: Callable[[], str] | None, name: str) -> Verdict:
    """Check a diagnosis of mystery ``name``: ``diagnose`` is a function that probes the mystery, prints what it
    measures and returns one letter of ``MYSTERIES[name].choices``. A function that runs nothing before returning
    its letter (a guess), a letter passed on its own, and one that reads a mystery's ``answer`` or ``why`` are sent
    back."""
    if name not in MYSTERIES:
        raise KeyError(f"no mystery {name!r}; there are {', '.join(MYSTERIES)}")
    m = MYSTERIES[name]
    own = f"{getattr(diagnose, '__name__', '') or f'diagnose_{name.lower()}'}()"
    if own.startswith("<"):  # a lambda
        own = "your function"

    def run() -> str:
        if diagnose is not None and not callable(diagnose):
            shown = repr(diagnose) if len(repr(diagnose)) <= 40 else type(diagnose).__name__
            raise NotYet(
                f"check_diagnosis takes your function, not {shown}: a letter on its own is a guess. Write "
                f"diagnose_{name.lower()}() to probe mystery {name}, print what you measure and return the letter."
            )
        names = code_names(diagnose)
        scope = getattr(diagnose, "__globals__", {})
        key = {n for n in names if scope.get(n) is MYSTERIES or isinstance(scope.get(n), Mystery)}
        if names & {"answer", "why"} or (key and "getattr" in names):  # no probe's report has such attributes
            raise NotYet(f"{own} reads the answer key: probe mystery {name} and decide from what you measure.")
        answer = call(diagnose) if diagnose is not None else None
        guessed = diagnose is not None and not names - _SAYS_ONLY and not _given_more_than_strings(diagnose)
        if answer is not None and guessed and hasattr(diagnose, "__code__"):
            raise NotYet(
                f"{own} returns a letter without measuring anything: a guess is not a diagnosis. Run the probes "
                f"you choose on mystery {name} in it, print what they measure, then return the letter they support."
            )
        return judge(m, answer, f"probe mystery {name}, then return one of {{letters}} and run the cell.")

    return verdict(run, name=f"check_diagnosis[{name}]")


# --- the causality probe's core step ---------------------------------------------------------------------------


class _TestModel(nn.Module):
    """ids (B, T) -> (B, T, V): one attention layer, causal or leaky. A module, not a closure, so that the grader can
    hand it to an answer that runs in another process."""

    def __init__(self, causal: bool) -> None:
        super().__init__()
        torch.manual_seed(0)  # both models share their weights
        self.embed, self.attn, self.head = nn.Embedding(VOCAB, 16), MultiHeadAttention(16, 2), nn.Linear(16, VOCAB)
        self.causal = causal

    def forward(self, tokens: Tensor) -> Tensor:
        x = self.embed(tokens)
        return self.head(x + self.attn(x, x, x, is_causal=self.causal)[0])


def _test_models() -> tuple[Callable[[Tensor], Tensor], Callable[[Tensor], Tensor]]:
    """A causal model and a leaky one, ids (B, T) -> (B, T, V). Called inside a check, whose verdict keeps the
    student's random state."""
    return _TestModel(True).eval(), _TestModel(False).eval()


# The toy models' weight at each position: uneven, so that output j moves less than a later one and the positions
# before j move by different amounts (a probe that reads the wrong positions gets another number).
_TOY_WEIGHTS = torch.tensor([1.0, 3.0, 2.0, 2.5, 2.0, 4.0, 1.5, 3.0])


def _toy_causal(tokens: Tensor) -> Tensor:
    """ids (B, T) -> (B, T, 1): output i is the sum of the ids up to i, times a weight of position i."""
    return (_TOY_WEIGHTS[: tokens.size(1)] * tokens.double().cumsum(1))[..., None]


def _toy_leaky(tokens: Tensor) -> Tensor:
    """ids (B, T) -> (B, T, 1): output i is the sum of all the ids, times a weight of position i."""
    return (_TOY_WEIGHTS[: tokens.size(1)] * tokens.double().sum(1, keepdim=True))[..., None]


def _as_float(got: object) -> float:
    """The leak an answer returned: a Python or NumPy number, or a tensor of one element."""
    if isinstance(got, np.ndarray) and got.size == 1:
        got = got.item()
    if isinstance(got, Tensor) and got.numel() == 1:
        if got.device.type == "meta":
            raise NotYet("you returned a tensor on meta, whose value cannot be read: return a float, float(...)")
        got = got.item()
    if isinstance(got, bool) or not isinstance(got, numbers.Real):
        raise NotYet(f"return one number (a float); got {type(got).__name__}")
    return float(got)


# One run of the answer: the model's name, the model, its outputs on the tokens, j, the answer's value, the right one.
_Result = tuple[str, Callable[[Tensor], Tensor], Tensor, int, float, float]


def _largest(a: Tensor, b: Tensor) -> float:
    """The largest absolute difference; 0 between empty tensors (no positions)."""
    return float((a - b).abs().max()) if a.numel() else 0.0


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-5 + 1e-4 * abs(b)


def check_future_leak(my_future_leak: Callable[[Callable[[Tensor], Tensor], Tensor, int, int], float]) -> Verdict:
    """``my_future_leak(fn, tokens, j, new_id)``: set token ``j`` of every sequence to ``new_id`` and return the
    largest change (a float) of ``fn``'s outputs at positions before ``j``. It is tested on a causal model and on
    one without a mask, at three positions j, with two batches (B, T) and two values of new_id; two toy models, whose
    outputs move by uneven amounts, tell the mistakes apart."""

    def one(B: int, T: int, new_id: int, seed: int) -> str:
        causal, leaky = _test_models()
        tokens = torch.randint(1, VOCAB, (B, T), generator=torch.Generator().manual_seed(seed))
        models = [
            ("a causal model", causal),
            ("a model without a causal mask", leaky),
            ("a causal toy model (output i: the sum of ids up to i, weighted)", _toy_causal),
            ("a toy model without a causal mask (output i: the sum of all ids, weighted)", _toy_leaky),
        ]
        results = _leaks_measured(my_future_leak, models, tokens, new_id)
        _name_leak_mistake(results, tokens, new_id)
        for name, _, _, j, got, expected in results:
            if not _close(got, expected):
                raise NotYet(f"on {name}, j={j}: got {got:.6g}, expected {expected:.6g}")
        return "0 on the causal models at every j, and the right leak on the models without a mask."

    def run() -> str:
        return each_case(one, [dict(B=3, T=8, new_id=0, seed=1), dict(B=2, T=6, new_id=5, seed=2)])

    return verdict(run)


_Leak = Callable[[Callable[[Tensor], Tensor], Tensor, Tensor, int], float]


def _changed(fn: Callable[[Tensor], Tensor], tokens: Tensor, rows: slice | int, j: slice | int, value: int) -> Tensor:
    """``fn``'s outputs with token ``j`` of ``rows`` set to ``value``."""
    changed = tokens.clone()
    changed[rows, j] = value
    return fn(changed)


def _leak_mistakes(tokens: Tensor, new_id: int) -> list[tuple[str, _Leak]]:
    """Each classic mistake, as the value it returns for (model, base outputs, outputs with token j changed, j)."""

    def run_changed(fn: Callable[[Tensor], Tensor], rows: slice | int, j: slice | int, value: int) -> Tensor:
        return _changed(fn, tokens, rows, j, value)

    return [
        (
            "you include position j itself. Output j reads token j legitimately (it predicts token j + 1); only "
            "the positions before j, [:, :j], must not move.",
            lambda fn, base, out, j: _largest(out[:, : j + 1], base[:, : j + 1]),
        ),
        (
            "you compare every position; keep only those before j, [:, :j].",
            lambda fn, base, out, j: _largest(out, base),
        ),
        (
            "you compare the positions after j; the leak is a change at the positions before j, [:, :j].",
            lambda fn, base, out, j: _largest(out[:, j + 1 :], base[:, j + 1 :]),
        ),
        (
            "only position 0 is compared; compare every position before j, [:, :j].",
            lambda fn, base, out, j: _largest(out[:, :1], base[:, :1]),
        ),
        (
            "only position j - 1 is compared; compare every position before j, [:, :j].",
            lambda fn, base, out, j: _largest(out[:, j - 1 : j], base[:, j - 1 : j]),
        ),
        (
            "that is the mean change; return the largest, .abs().max().",
            lambda fn, base, out, j: float((out[:, :j] - base[:, :j]).abs().mean()),
        ),
        (
            "that is the sum of the changes; return the largest, .abs().max().",
            lambda fn, base, out, j: float((out[:, :j] - base[:, :j]).abs().sum()),
        ),
        (
            "without .abs() a change downwards is missed: return the largest absolute change, .abs().max().",
            lambda fn, base, out, j: float((out[:, :j] - base[:, :j]).max()),
        ),
        (
            "token 0 is changed, not token j: changed[:, j] = new_id.",
            lambda fn, base, out, j: _largest(run_changed(fn, slice(None), 0, new_id)[:, :j], base[:, :j]),
        ),
        (
            "only the first sequence's token j is changed: change it in every sequence, changed[:, j] = new_id.",
            lambda fn, base, out, j: _largest(run_changed(fn, 0, j, new_id)[:, :j], base[:, :j]),
        ),
        (
            "token j is set to 0, not to new_id: use the argument, not a number written into the code.",
            lambda fn, base, out, j: _largest(run_changed(fn, slice(None), j, 0)[:, :j], base[:, :j]),
        ),
        (
            "position j - 1 is left out: [:, :j] already stops before j (a slice leaves out its end), so "
            "[:, :j - 1] drops the last position that must not move.",
            lambda fn, base, out, j: _largest(out[:, : j - 1], base[:, : j - 1]),
        ),
        (
            "token j - 1 is changed, not token j: changed[:, j] = new_id.",
            lambda fn, base, out, j: _largest(run_changed(fn, slice(None), j - 1, new_id)[:, :j], base[:, :j]),
        ),
        (
            "every token from j on is changed (changed[:, j:]): change token j alone, changed[:, j] = new_id.",
            lambda fn, base, out, j: _largest(run_changed(fn, slice(None), slice(j, None), new_id)[:, :j], base[:, :j]),
        ),
        (
            "a whole sequence (row j of the batch) is changed, not token j of every sequence: the positions are "
            "dimension 1, changed[:, j] = new_id.",
            lambda fn, base, out, j: _largest(
                run_changed(fn, j % len(tokens), slice(None), new_id)[:, :j], base[:, :j]
            ),
        ),
        (
            "that is the square of the largest change: take the absolute change, .abs().max(), not ** 2.",
            lambda fn, base, out, j: float((out[:, :j] - base[:, :j]).pow(2).max()) if j else 0.0,
        ),
        (
            "the value is cut to a whole number (int(...)), and a leak is usually well below 1: return float(...).",
            lambda fn, base, out, j: float(int(_largest(out[:, :j], base[:, :j]))),
        ),
        (
            "that is the mean over the sequences of each one's largest change: return the largest over the whole "
            "batch, .abs().max().",
            lambda fn, base, out, j: float((out[:, :j] - base[:, :j]).abs().flatten(1).amax(1).mean()) if j else 0.0,
        ),
        (
            "that is the change of the largest output, not the largest change: subtract first, "
            "(after - before).abs().max().",
            lambda fn, base, out, j: abs(float(out[:, :j].max()) - float(base[:, :j].max())) if j else 0.0,
        ),
    ]


def _leaks_measured(
    my_future_leak: Callable[..., Any],
    models: list[tuple[str, Callable[[Tensor], Tensor]]],
    tokens: Tensor,
    new_id: int,
) -> list[_Result]:
    """The answer's value against the right one for each model at three positions j; an error is told in words
    (naming the mistake the values so far show, if they show one)."""
    T = tokens.size(1)
    results: list[_Result] = []
    for name, fn in models:
        with torch.no_grad():
            base = fn(tokens)
        for j in (1, T // 2, T - 1):
            given = tokens.clone()
            try:
                got = _as_float(call(my_future_leak, fn, given, j, new_id))
            except NotYet as e:
                if f"index {j} is out of bounds for dimension 0" in str(e):  # j = T - 1 is past the batch, B
                    raise NotYet(
                        f"{e}. j indexes dimension 0, the batch (as in changed[j] or out[j]): the positions are "
                        "dimension 1, changed[:, j]"
                    ) from None
                _name_leak_mistake(
                    results, tokens, new_id
                )  # an error after wrong values: name what the values show, if they do
                raise
            if not torch.equal(given, tokens):
                raise NotYet("my_future_leak changed the tokens it was given: change a copy (tokens.clone())")
            with torch.no_grad():
                expected = _largest(_changed(fn, tokens, slice(None), j, new_id)[:, :j], base[:, :j])
            results.append((name, fn, base, j, got, expected))
    return results


def _name_leak_mistake(results: list[_Result], tokens: Tensor, new_id: int) -> None:
    """Raise naming the mistake that gives the answer's value in every case so far, if one does."""
    wrong = [(name, j) for name, _, _, j, got, expected in results if not _close(got, expected)]
    if not wrong:
        return
    for message, mistake in _leak_mistakes(tokens, new_id):
        with torch.no_grad():
            theirs = [
                (mistake(fn, base, _changed(fn, tokens, slice(None), j, new_id), j), got, expected)
                for _, fn, base, j, got, expected in results
            ]
        if all(_close(got, value) for value, got, _ in theirs) and any(
            not _close(value, expected) for value, _, expected in theirs
        ):
            name, j = wrong[0]
            raise Named(f"on {name}, j={j}: {message}")
