"""Exercise checkers: each runs a student's function against the reference and says what differs.

Every ``check_*`` prints one verdict and returns a ``Verdict``, true when the answer is correct and
shown as nothing in a notebook: a wrong or unfinished answer never stops the notebook. Where a mistake is a classic one (a missing
sqrt(d_k), 2i applied twice, unbiased variance), the message names it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from .attention import scaled_dot_product_attention
from .masks import causal_mask, padding_mask
from .positional import sinusoidal_encoding

__all__ = [
    "check_causal_mask", "check_feed_forward", "check_label_smoothing", "check_layer_norm",
    "check_merge_heads", "check_mha_parameter_count", "check_padding_mask", "check_position_shift",
    "check_pre_norm_layer",
    "check_scaled_dot_product_attention", "check_shift_right", "check_sinusoidal_encoding",
    "check_split_heads",
]  # fmt: skip


class _NotYet(Exception):
    """The student's answer differs from the reference; the message says how."""


def _call(fn: Callable, *args):
    try:
        return fn(*args)
    except NotImplementedError:
        raise _NotYet(
            f"{fn.__name__} is not written yet: replace `raise NotImplementedError`, then run this cell again."
        ) from None
    except Exception as e:  # the student's bug, reported rather than raised
        raise _NotYet(f"{fn.__name__} raised {type(e).__name__}: {e}") from None


def _same(got, expected: Tensor, what: str, atol: float = 1e-5) -> None:
    if not isinstance(got, Tensor):
        raise _NotYet(f"{what} should be a torch.Tensor; got {type(got).__name__}")
    if got.shape != expected.shape:
        raise _NotYet(f"{what} has shape {tuple(got.shape)}; expected {tuple(expected.shape)}")
    if (got.dtype == torch.bool) != (expected.dtype == torch.bool):
        raise _NotYet(f"{what} has dtype {got.dtype}; expected {expected.dtype}")
    bad = (got.double() - expected.double()).abs() > atol + 1e-4 * expected.double().abs()
    if bad.any():
        where = tuple(int(i) for i in bad.nonzero()[0])
        raise _NotYet(
            f"{what} differs at index {where}: got {got[where].item():.6g}, expected {expected[where].item():.6g}"
        )


def _differs(got, reference: Tensor) -> bool:
    return not (
        isinstance(got, Tensor)
        and got.shape == reference.shape
        and torch.allclose(got.double(), reference.double(), atol=1e-5)
    )


class Verdict:
    """The outcome of a check: ``bool(verdict)`` says whether it passed; ``.message`` says why."""

    def __init__(self, passed: bool, message: str) -> None:
        self.passed, self.message = passed, message

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        return f"Verdict(passed={self.passed})"

    def _ipython_display_(self) -> None:  # the message is already printed; show nothing more
        pass


def _verdict(run: Callable[[], str]) -> Verdict:
    try:
        message = "✅ " + run()
    except _NotYet as e:
        message = "❌ " + str(e)
    print(message)
    return Verdict(message.startswith("✅"), message)


def check_scaled_dot_product_attention(fn: Callable) -> Verdict:
    """``fn(query, key, value, mask=None)`` returns the output, or ``(output, weights)``."""

    def run() -> str:
        g = torch.Generator().manual_seed(0)
        q, k, v = (torch.randn(2, n, 8, generator=g) for n in (3, 5, 5))  # T_q = 3, T_k = 5
        for mask in (None, torch.rand(3, 5, generator=g) > 0.3, causal_mask(5)[-3:]):
            mask = None if mask is None else mask | torch.eye(3, 5, dtype=torch.bool)  # no empty rows
            out = _call(fn, q, k, v, mask)
            out = out[0] if isinstance(out, tuple) else out
            expected, _ = scaled_dot_product_attention(q, k, v, mask)
            if mask is None and not _differs(out, (q @ k.transpose(-2, -1)).softmax(-1) @ v):
                raise _NotYet("the scores are not divided by sqrt(d_k): use q @ k.transpose(-2, -1) / math.sqrt(d_k)")
            if mask is None and not _differs(out, (q @ k.transpose(-2, -1) / math.sqrt(8)).softmax(-2) @ v):
                raise _NotYet(
                    "softmax runs over the queries (dim=-2); each query's weights over the keys must sum to 1: dim=-1"
                )
            _same(out, expected, "the output" + (" with a mask" if mask is not None else ""))
        return "scaled_dot_product_attention matches the reference, with and without masks."

    return _verdict(run)


def check_causal_mask(fn: Callable) -> Verdict:
    """``fn(size)`` returns a bool ``(size, size)`` mask, True where position i may attend to j."""

    def run() -> str:
        for size in (1, 4, 7):
            got = _call(fn, size)
            if (
                size > 1
                and isinstance(got, Tensor)
                and got.shape == (size, size)
                and torch.equal(got.bool(), causal_mask(size).T)
            ):
                raise _NotYet("the mask is transposed: row i (the query) must allow columns j <= i, i.e. tril")
            _same(got, causal_mask(size), f"causal mask of size {size}")
        return "causal_mask is right: each position sees itself and the past, never the future."

    return _verdict(run)


def check_padding_mask(fn: Callable) -> Verdict:
    """``fn(tokens (B, T), pad_id)`` returns a bool ``(B, 1, 1, T)`` mask, True at real tokens."""

    def run() -> str:
        tokens = torch.tensor([[5, 6, 7, 0, 0], [8, 0, 0, 0, 0], [4, 4, 4, 4, 4]])
        got = _call(fn, tokens, 0)
        if isinstance(got, Tensor) and got.shape == (3, 5):
            raise _NotYet("shape (B, T): add two axes, mask[:, None, None, :], so it broadcasts over heads and queries")
        if isinstance(got, Tensor) and got.shape == (3, 1, 1, 5) and torch.equal(got, ~padding_mask(tokens, 0)):
            raise _NotYet("True marks the padding; in this course True means 'may attend' (a real token)")
        _same(got, padding_mask(tokens, 0), "padding mask")
        return "padding_mask is right: (B, 1, 1, T), True at real tokens."

    return _verdict(run)


def check_split_heads(fn: Callable) -> Verdict:
    """``fn(x (B, T, d_model), n_heads)`` returns ``(B, n_heads, T, d_k)``."""

    def run() -> str:
        x = torch.arange(2 * 3 * 8, dtype=torch.float32).reshape(2, 3, 8)
        got = _call(fn, x, 4)
        expected = x.view(2, 3, 4, 2).transpose(1, 2)
        if isinstance(got, Tensor) and got.shape == (2, 3, 4, 2):
            raise _NotYet("shape (B, T, h, d_k): the heads axis must come before T, so add .transpose(1, 2)")
        if isinstance(got, Tensor) and got.shape == expected.shape and torch.equal(got, x.view(2, 4, 3, 2)):
            raise _NotYet(
                "right shape, wrong values: x.view(B, h, T, d_k) mixes positions; view(B, T, h, d_k) then transpose(1, 2)"
            )
        _same(got, expected, "split heads")
        return "split_heads is right: (B, T, d_model) -> (B, T, h, d_k) -> (B, h, T, d_k)."

    return _verdict(run)


def check_merge_heads(fn: Callable) -> Verdict:
    """``fn(x (B, n_heads, T, d_k))`` returns ``(B, T, n_heads * d_k)``, the heads side by side."""

    def run() -> str:
        x = torch.arange(2 * 4 * 3 * 2, dtype=torch.float32).reshape(2, 4, 3, 2)
        got = _call(fn, x)
        expected = x.transpose(1, 2).reshape(2, 3, 8)
        if isinstance(got, Tensor) and got.shape == expected.shape and torch.equal(got, x.reshape(2, 3, 8)):
            raise _NotYet("right shape, wrong values: transpose(1, 2) back to (B, T, h, d_k) before the reshape")
        _same(got, expected, "merged heads")
        return "merge_heads is right: (B, h, T, d_k) -> (B, T, h, d_k) -> (B, T, h * d_k)."

    return _verdict(run)


def check_mha_parameter_count(fn: Callable) -> Verdict:
    """``fn(d_model, n_heads)`` returns the number of parameters of multi-head attention (with biases)."""

    def run() -> str:
        from .attention import MultiHeadAttention

        for d_model, n_heads in ((8, 2), (64, 4), (512, 8), (512, 1)):
            expected = sum(p.numel() for p in MultiHeadAttention(d_model, n_heads).parameters())
            got = _call(fn, d_model, n_heads)
            if got != expected:
                hint = " (did you forget the biases?)" if got == 4 * d_model**2 else ""
                raise _NotYet(f"for d_model={d_model}, n_heads={n_heads}: got {got}, expected {expected}{hint}")
        return "right: 4 * d_model**2 + 4 * d_model, whatever the number of heads."

    return _verdict(run)


def check_sinusoidal_encoding(fn: Callable) -> Verdict:
    """``fn(max_len, d_model)`` returns the ``(max_len, d_model)`` sinusoidal table."""

    def run() -> str:
        got = _call(fn, 50, 16)
        pos = torch.arange(50.0)[:, None]
        buggy = torch.zeros(50, 16)
        two_i = torch.arange(0, 16, 2)
        buggy[:, 0::2] = torch.sin(pos / 10000 ** (2 * two_i / 16))
        buggy[:, 1::2] = torch.cos(pos / 10000 ** (2 * two_i / 16))
        if not _differs(got, buggy):
            raise _NotYet(
                "2i is applied twice: arange(0, d_model, 2) already steps by 2, so use 10000 ** (two_i / d_model)"
            )
        if not _differs(got, sinusoidal_encoding(50, 16)[:, [i + 1 - 2 * (i % 2) for i in range(16)]]):
            raise _NotYet("sin and cos are swapped: even dimensions get sin, odd ones cos")
        _same(got, sinusoidal_encoding(50, 16), "the encoding", atol=1e-4)
        return "sinusoidal_encoding matches the paper's formula."

    return _verdict(run)


def check_position_shift(fn: Callable) -> Verdict:
    """``fn(k, d_model)`` returns the ``(d_model, d_model)`` matrix M_k with M_k @ PE[p] = PE[p + k] for every p."""

    def run() -> str:
        pe = sinusoidal_encoding(64, 8).double()
        for k in (1, 3, 10):
            got = _call(fn, k, 8)
            if not isinstance(got, Tensor) or got.shape != (8, 8):
                raise _NotYet(f"return a (d_model, d_model) tensor; got {getattr(got, 'shape', type(got).__name__)}")
            shifted = pe[: 64 - k] @ got.double().T  # row p: M_k @ PE[p]
            if torch.allclose(shifted, pe[k:], atol=1e-4):
                continue
            if torch.allclose(pe[: 64 - k] @ got.double(), pe[k:], atol=1e-4):
                raise _NotYet("this is M_k transposed: the sine row is [cos, sin] and the cosine row [-sin, cos]")
            raise _NotYet(
                f"M_k @ PE[p] differs from PE[p + k] for k={k}; build 2x2 rotations by k * omega_i on the diagonal"
            )
        return "right: shifting by k positions is a fixed rotation of each (sin, cos) pair, whatever p."

    return _verdict(run)


def check_layer_norm(fn: Callable) -> Verdict:
    """``fn(x, weight, bias, eps)`` normalises over the last dimension, as ``F.layer_norm``."""

    def run() -> str:
        g = torch.Generator().manual_seed(0)
        x = torch.randn(2, 3, 6, generator=g) * 3 + 1
        weight, bias = torch.randn(6, generator=g), torch.randn(6, generator=g)
        eps = 0.5  # large, so that where eps goes shows
        got = _call(fn, x, weight, bias, eps)
        mean = x.mean(-1, keepdim=True)
        if not _differs(got, (x - mean) / torch.sqrt(x.var(-1, keepdim=True) + eps) * weight + bias):
            raise _NotYet("unbiased variance (divides by d - 1); layer norm divides by d: var(unbiased=False)")
        if not _differs(got, (x - mean) / (x.std(-1, keepdim=True) + eps) * weight + bias):
            raise _NotYet("this is (x - mean) / (std + eps) with unbiased std: use sqrt(biased var + eps)")
        if not _differs(got, (x - mean) / (x.std(-1, unbiased=False, keepdim=True) + eps) * weight + bias):
            raise _NotYet("eps is outside the square root: use sqrt(var + eps)")
        _same(got, F.layer_norm(x, (6,), weight, bias, eps), "the normalised output")
        return "layer_norm matches F.layer_norm (biased variance, eps inside the root)."

    return _verdict(run)


def check_feed_forward(fn: Callable) -> Verdict:
    """``fn(x, w_1, b_1, w_2, b_2)`` returns FFN(x) = max(0, x W_1 + b_1) W_2 + b_2 (weights as ``nn.Linear`` stores them)."""

    def run() -> str:
        g = torch.Generator().manual_seed(0)
        x = torch.randn(2, 3, 4, generator=g)
        w_1, b_1 = torch.randn(8, 4, generator=g), torch.randn(8, generator=g)  # (d_ff, d_model), as nn.Linear
        w_2, b_2 = torch.randn(4, 8, generator=g), torch.randn(4, generator=g)
        got = _call(fn, x, w_1, b_1, w_2, b_2)
        if not _differs(got, F.linear(F.linear(x, w_1, b_1), w_2, b_2)):
            raise _NotYet("the ReLU is missing: without it the two layers collapse into one linear map")
        _same(got, F.linear(F.relu(F.linear(x, w_1, b_1)), w_2, b_2), "FFN(x)")
        return "feed_forward is right: expand to d_ff, ReLU, project back, at every position."

    return _verdict(run)


def check_pre_norm_layer(fn: Callable) -> Verdict:
    """``fn(layer, x, mask)`` computes a pre-norm encoder layer's forward from ``layer``'s submodules."""

    def run() -> str:
        from .encoder import EncoderLayer

        torch.manual_seed(0)
        layer = EncoderLayer(16, 4, 32, dropout=0.0, norm_first=True).eval()
        with torch.no_grad():
            for norm in (layer.norm1, layer.norm2):
                norm.weight.normal_()
                norm.bias.normal_()
        x = torch.randn(2, 5, 16)
        mask = padding_mask(torch.tensor([[1, 2, 3, 0, 0], [1, 2, 3, 4, 5]]), 0)
        with torch.no_grad():
            got = _call(fn, layer, x, mask)
            attend = lambda h: layer.self_attn(h, h, h, mask)  # noqa: E731
            post = layer.norm1(x + attend(x))
            post = layer.norm2(post + layer.feed_forward(post))
            if not _differs(got, post):
                raise _NotYet(
                    "this is post-norm (norm after the residual add); pre-norm normalises the sublayer's input"
                )
            y = x + attend(layer.norm1(x))
            expected = y + layer.feed_forward(layer.norm2(y))
            if not _differs(got, attend(layer.norm1(x)) + layer.feed_forward(layer.norm2(x))):
                raise _NotYet("the residual connections are missing: add each sublayer's output to its input")
        _same(got, expected, "the layer's output")
        return "pre-norm layer is right: x + SelfAttn(LN(x)), then x + FFN(LN(x))."

    return _verdict(run)


def check_shift_right(fn: Callable) -> Verdict:
    """``fn(tgt (B, T))`` returns ``(decoder_input, labels)`` for teacher forcing, each ``(B, T - 1)``."""

    def run() -> str:
        tgt = torch.tensor([[1, 7, 8, 9, 2], [1, 5, 2, 0, 0]])  # <bos>=1 ... <eos>=2, <pad>=0
        got = _call(fn, tgt)
        if not (isinstance(got, tuple) and len(got) == 2):
            raise _NotYet("return a pair (decoder_input, labels)")
        if isinstance(got[0], Tensor) and torch.equal(got[0], tgt[:, 1:]):
            raise _NotYet("input and labels are swapped: the decoder reads tgt[:, :-1] and predicts tgt[:, 1:]")
        _same(got[0], tgt[:, :-1], "decoder input")
        _same(got[1], tgt[:, 1:], "labels")
        return "shift_right is right: the decoder reads <bos> y1 ... and learns to predict y1 ... <eos>."

    return _verdict(run)


def check_label_smoothing(fn: Callable) -> Verdict:
    """``fn(logits (N, V), target (N,), smoothing)`` returns the mean label-smoothed cross-entropy."""

    def run() -> str:
        g = torch.Generator().manual_seed(0)
        logits, target = torch.randn(6, 5, generator=g), torch.randint(0, 5, (6,), generator=g)
        for smoothing in (0.0, 0.1, 0.3):
            got = _call(fn, logits, target, smoothing)
            _same(
                torch.as_tensor(got),
                F.cross_entropy(logits, target, label_smoothing=smoothing),
                f"the loss at smoothing={smoothing}",
            )
        return "label-smoothed cross-entropy matches F.cross_entropy(label_smoothing=...)."

    return _verdict(run)
