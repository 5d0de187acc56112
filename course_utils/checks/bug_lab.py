"""The bug lab (chapter 09): mystery modules to diagnose with the probes, the checker of a diagnosis, and the
checker of the causality probe's core step.

The modules below each hold one bug that the chapter does not name. They live here, not in the notebook, so
that the student edition does not show the bug next to the question; reading this file gives the answers away.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ..model.attention import MultiHeadAttention
from ..model.encoder import Encoder
from ..model.masks import padding_mask
from ..model.positional import PositionalEncoding
from ._core import NotYet, Verdict, call, verdict
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
        return x.view(B, self.n_heads, T, self.d_k)


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
            "a": "no causal mask: every position sees the whole sequence",
            "b": "an off-by-one causal mask: each position also sees the next token",
            "c": "the padding mask broadcast along the wrong axis",
            "d": "nothing: it is a correct causal model",
        },
        answer="b",
        why={
            "a": "Without a mask, a change at any later position would move earlier outputs; the causality probe "
            "shows changes at distance 1 only.",
            "b": "The mask is torch.ones(T, T).tril(1): diagonal=1 keeps one entry above the diagonal, so position "
            "i reads token i + 1, the very token it must predict (bug 2 showed what training does with "
            "such a leak). The causality probe finds leaks at distance 1 only; the fix is tril() (diagonal 0).",
            "c": "This model has no padding at all; the leak the causality probe shows is about order.",
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
            "c": "the positional encoding is scaled down before it is added",
            "d": "the positional encoding uses 2i twice",
        },
        answer="c",
        why={
            "a": "Then shuffling the first half would leave the second half's outputs unchanged; the position probe "
            "finds they change, a little: positions arrive, weakly.",
            "b": "The position probe flags a weak signal, which fits; but the embeddings are not large: "
            "mystery_b.embed.weight.std() * sqrt(32) is about 1, the size of the encoding's values (between -1 and 1). "
            "Measure before choosing.",
            "c": "inputs() adds pe / sqrt(d_model): the encoding arrives 5.7 times too small. The position probe "
            "flags a weak signal; the embeddings' scale is normal (about 1), and inputs(ids) minus the scaled "
            "embeddings, compared with sinusoidal_encoding by the equality probe, is the table times a constant "
            "(1/sqrt(32) = 0.177). Fix: x + pe, unscaled.",
            "d": "The positional part of inputs(ids) is the paper's table times a constant, not a table with "
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


def check_diagnosis(diagnose: Callable[[], str] | str | None, name: str) -> Verdict:
    """Check a diagnosis of mystery ``name``: ``diagnose`` is a function that probes the mystery and returns one
    letter of ``MYSTERIES[name].choices`` (or that letter itself)."""
    if name not in MYSTERIES:
        raise KeyError(f"no mystery {name!r}; there are {', '.join(MYSTERIES)}")
    m = MYSTERIES[name]

    def run() -> str:
        answer = call(diagnose) if callable(diagnose) else diagnose
        return judge(m, answer, f"probe mystery {name}, then return one of {{letters}} and run the cell.")

    return verdict(run, name=f"check_diagnosis[{name}]")


# --- the causality probe's core step ---------------------------------------------------------------------------


def _leak(fn: Callable[[Tensor], Tensor], tokens: Tensor, j: int, new_id: int) -> float:
    changed = tokens.clone()
    changed[:, j] = new_id
    with torch.no_grad():
        return float((fn(changed)[:, :j] - fn(tokens)[:, :j]).abs().max()) if j > 0 else 0.0


def _test_models() -> tuple[Callable[[Tensor], Tensor], Callable[[Tensor], Tensor]]:
    """A causal model and a leaky one, ids (B, T) -> (B, T, V). Called inside a check, whose verdict keeps the
    student's random state."""
    torch.manual_seed(0)
    embed, attn, head = nn.Embedding(VOCAB, 16), MultiHeadAttention(16, 2), nn.Linear(16, VOCAB)

    def model(tokens: Tensor, causal: bool) -> Tensor:
        x = embed(tokens)
        return head(x + attn(x, x, x, is_causal=causal)[0])

    return (lambda t: model(t, True)), (lambda t: model(t, False))


def check_future_leak(my_future_leak: Callable[[Callable[[Tensor], Tensor], Tensor, int, int], float]) -> Verdict:
    """``my_future_leak(fn, tokens, j, new_id)``: set token ``j`` of every sequence to ``new_id`` and return the
    largest change (a float) of ``fn``'s outputs at positions before ``j``."""

    def run() -> str:
        causal, leaky = _test_models()
        tokens = torch.randint(1, VOCAB, (3, 8), generator=torch.Generator().manual_seed(1))
        for name, fn in (("a causal model", causal), ("a model without a causal mask", leaky)):
            for j in (1, 4, 7):
                expected = _leak(fn, tokens, j, 0)
                given = tokens.clone()
                got = call(my_future_leak, fn, given, j, 0)
                if not torch.equal(given, tokens):
                    raise NotYet("my_future_leak changed the tokens it was given: change a copy (tokens.clone())")
                if not isinstance(got, float | int) and not (isinstance(got, Tensor) and got.numel() == 1):
                    raise NotYet(f"return one number (a float); got {type(got).__name__}")
                got = float(got)
                if abs(got - expected) <= 1e-5 + 1e-4 * expected:
                    continue
                changed = tokens.clone()
                changed[:, j] = 0
                with torch.no_grad():
                    through_j = float((fn(changed)[:, : j + 1] - fn(tokens)[:, : j + 1]).abs().max())
                    everywhere = float((fn(changed) - fn(tokens)).abs().max())
                if abs(got - through_j) <= 1e-5 and abs(through_j - expected) > 1e-5:
                    raise NotYet(
                        f"on {name}, j={j}: you include position j itself. Output j reads token j legitimately (it "
                        "predicts token j + 1); only the positions before j, [:, :j], must not move."
                    )
                if abs(got - everywhere) <= 1e-5 and abs(everywhere - expected) > 1e-5:
                    raise NotYet(f"on {name}, j={j}: you compare every position; keep only those before j, [:, :j].")
                raise NotYet(f"on {name}, j={j}: got {got:.6g}, expected {expected:.6g}")
        return "0 on the causal model at every j, and the right leak on the model without a mask."

    return verdict(run)
