"""Checkers for attention and multi-head attention (chapters 01, 02 and 05)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from ..model.attention import expand_kv, scaled_dot_product_attention
from ..model.masks import causal_mask
from ..utils import code_names
from ._core import (
    MISTAKES,
    NotYet,
    Verdict,
    backpropagates,
    call,
    differs,
    each_case,
    name_mistake,
    off_the_cpu,
    on_meta,
    same,
    verdict,
)

__all__ = [
    "check_attention_with_bias",
    "check_fused_head_projections",
    "check_grouped_query_attention",
    "check_merge_heads",
    "check_scaled_dot_product_attention",
    "check_split_heads",
]


def _call(fn: Callable[..., Any], *args: Any) -> Any:
    """``call``, with PyTorch's error for ``.view`` on a transposed tensor explained."""
    try:
        return call(fn, *args)
    except NotYet as e:
        if "view size is not compatible" in str(e):
            raise NotYet(
                f"{e} (after a transpose the tensor's memory is no longer in that order, so .view cannot regroup its "
                "axes: use .reshape(...), or .contiguous().view(...))"
            ) from None
        if "is invalid for input of size" in str(e):
            raise NotYet(
                f"{e} (the sizes asked of .view or .reshape do not multiply to the tensor's number of elements: take "
                "each from the input, x.size(...) and d_k = d_model // n_heads, rather than writing one in)"
            ) from None
        raise


def _output(got: Any, out_shape: tuple[int, ...], weights_shape: tuple[int, ...]) -> Any:
    """The output of an answer that may return ``output`` or ``(output, weights)`` (a tuple or a list); the weights
    returned in its place are named."""
    if isinstance(got, tuple | list) and got:
        pair: list[Any] = list(got)
        if (
            len(pair) == 2
            and all(isinstance(t, Tensor) for t in pair)
            and (tuple(pair[0].shape), tuple(pair[1].shape)) == (weights_shape, out_shape) != (out_shape, weights_shape)
        ):
            raise NotYet("the pair is (weights, output): return the output first, (weights @ value, weights)")
        got = pair[0]
    if isinstance(got, Tensor) and tuple(got.shape) == weights_shape != out_shape:
        raise NotYet(
            f"this is the weights' shape {weights_shape}, (..., T_q, T_k): the output is the weighted sum of the "
            "values, weights @ value"
        )
    return got


def _same_or_nan(got: object, buggy: Tensor) -> bool:
    """``got`` equals ``buggy``, NaN where it has NaN (a row whose keys are all hidden by ``-inf``)."""
    return (
        isinstance(got, Tensor)
        and got.device == buggy.device
        and got.shape == buggy.shape
        and torch.allclose(got.double(), buggy.double(), atol=1e-5, equal_nan=True)
    )


def _axes(ndim: int) -> dict[int, str]:
    """The axes of ``ndim``-d scores other than the keys', as the softmax mistakes name them."""
    implicit = ", which F.softmax picks when given no dim="
    names = {0: "the batch axis (dim=0" + (implicit if ndim == 3 else "") + ")"}
    if ndim == 4:
        names[1] = "the heads axis (dim=1" + implicit + ")"
    names[ndim - 2] = "the queries (dim=-2)"
    return names


def _with_heads(one: Callable[..., str], case: dict[str, Any]) -> None:
    """``one(**case)`` on 4-d inputs ``(B, h, T, d_k)``, told apart from the 3-d cases: an answer that indexes axes
    from the front (``key.transpose(1, 2)``, ``softmax(dim=2)``) is right on 3-d inputs only."""
    try:
        one(**case)
    except NotYet as e:
        how = (
            "torch.bmm takes 3-d tensors only: use @ (torch.matmul), which keeps any leading dimensions"
            if "must be a 3D tensor" in str(e)
            else "index the axes from the end, key.transpose(-2, -1) and softmax(dim=-1), so that any leading "
            "dimensions work"
        )
        raise NotYet(
            f"right on 3-d inputs (B, T, d_k), not on 4-d ones (B, h, T, d_k), as multi-head attention passes: {how} "
            f"({e})"
        ) from None


# Attention written for the student: what the exercise of chapter 01, section 6, asks to write step by step.
_LIBRARY_ATTENTION = {"scaled_dot_product_attention", "multi_head_attention_forward", "MultiheadAttention"}


def _library_attention(fn: Callable[..., Any]) -> str | None:
    """The name of a ready-made attention that ``fn``'s code calls (F.scaled_dot_product_attention, the course's
    scaled_dot_product_attention, nn.MultiheadAttention), by its name or through a global alias; None if none."""
    known = {F.scaled_dot_product_attention, scaled_dot_product_attention, F.multi_head_attention_forward,
             torch.nn.MultiheadAttention}  # fmt: skip
    if any(fn is f for f in known):
        return getattr(fn, "__name__", "a ready-made attention")
    library = getattr(fn, "library", None)  # set on the grader's stand-in for a function of the answer's process
    if isinstance(library, str):
        return library
    names = code_names(fn)  # with those of the functions and lambdas defined in it
    scope = getattr(fn, "__globals__", {})
    for name in sorted(names):
        if name in _LIBRARY_ATTENTION or any(scope.get(name) is f for f in known):
            return name
    return None


def check_scaled_dot_product_attention(fn: Callable[..., Any]) -> Verdict:
    """``fn(query, key, value, mask=None)`` returns the output, or ``(output, weights)``, computed step by step (not by
    calling a ready-made attention: that is the exercise)."""

    def one(B: int, T_q: int, T_k: int, d_k: int, d_v: int, seed: int, heads: int | None = None) -> str:
        g = torch.Generator().manual_seed(seed)
        lead = (B,) if heads is None else (B, heads)
        q, k, v = (torch.randn(*lead, n, d, generator=g) for n, d in ((T_q, d_k), (T_k, d_k), (T_k, d_v)))
        lengths = torch.randint(1, T_k + 1, (B,), generator=g)
        padding = (torch.arange(T_k) < lengths[:, None]).view(B, *([1] * len(lead)), T_k)  # (B, 1, T_k) or 4-d
        random = (torch.rand(T_q, T_k, generator=g) > 0.3) | torch.eye(T_q, T_k, dtype=torch.bool)  # no empty rows
        for mask in (None, random, causal_mask(T_k)[-T_q:], padding):
            raw = _attention_call(fn, q, k, v, mask)
            got = _output(raw, (*lead, T_q, d_v), (*lead, T_q, T_k))
            expected, weights = scaled_dot_product_attention(q, k, v, mask)
            torch.testing.assert_close(expected, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
            if mask is None:
                _name_unmasked_mistake(got, expected, q, k, v, heads)
            else:
                _name_masked_mistake(got, expected, q, k, v, mask)
            _name_weights_mistake(fn, got, expected, q, k, mask)
            same(got, expected, "the output" + (" with a mask" if mask is not None else ""))
            _returned_weights(raw, weights, q @ k.transpose(-2, -1) / math.sqrt(d_k), mask)
        return (
            "your attention equals course_utils.scaled_dot_product_attention and PyTorch's "
            "F.scaled_dot_product_attention, with and without masks."
        )

    def run() -> str:
        message = each_case(
            one,
            [
                dict(B=2, T_q=3, T_k=5, d_k=8, d_v=6, seed=0),
                dict(B=3, T_q=4, T_k=7, d_k=16, d_v=12, seed=1),
            ],
        )
        _with_heads(one, dict(B=2, T_q=3, T_k=5, d_k=4, d_v=6, seed=2, heads=4))
        g = torch.Generator().manual_seed(0)
        q, k, v = (torch.randn(2, n, 8, generator=g) for n in (3, 5, 5))
        backpropagates(
            fn, q, k, v, None, what="the attention output", reference=lambda *a: scaled_dot_product_attention(*a)[0]
        )
        _same_dtype(_output(call(fn, q, k, v, None), (2, 3, 8), (2, 3, 5)), q, "the output")
        _on_a_gpu(fn)
        library = _library_attention(fn)
        if library:
            raise NotYet(
                f"right numbers, but through {library}, attention written for you: this exercise is to write each "
                "step yourself, the scores q @ k.transpose(-2, -1), the division by math.sqrt(d_k), the mask, the "
                "softmax over the keys and the weighted sum of the values"
            )
        return message + _empty_row_note(fn)

    return verdict(run)


def _attention_call(fn: Callable[..., Any], *args: Any) -> Any:
    """``call(fn, query, key, value, mask_or_bias)``, with PyTorch's errors for two classic slips explained: ``key.T``
    (which reverses every axis) and a mask reshaped before use."""
    try:
        return _call(fn, *args)
    except NotYet as e:
        key, extra = args[1], args[3]
        if "T" in code_names(fn) and key.dim() > 2 and re.search(r"must match|mat1 and mat2|size mismatch", str(e)):
            raise NotYet(
                f"{e}. key.T reverses every axis of a tensor with more than two (section 2's K^T is a matrix's): on "
                f"key {tuple(key.shape)} it gives {tuple(reversed(key.shape))}. Swap only the last two axes, "
                "key.transpose(-2, -1) (or key.mT)"
            ) from None
        if isinstance(extra, Tensor) and "must match" in str(e):
            raise NotYet(
                f"{e}, with a {'mask' if extra.dtype == torch.bool else 'bias'} of shape {tuple(extra.shape)}: it "
                "comes broadcastable to the scores (..., T_q, T_k) as it is; use it without reshaping it"
            ) from None
        raise


def _same_dtype(got: Tensor, query: Tensor, what: str) -> None:
    """The output in the inputs' dtype: float64 from float32 inputs would break the next layer's float32 matmul."""
    if got.dtype != query.dtype:
        raise NotYet(
            f"{what} has dtype {got.dtype} for {query.dtype} inputs: computing in another precision is fine, but "
            f"return the result in the inputs' dtype, .to(query.dtype), or the next layer's matmul fails"
        )


def _weights_of(fn: Callable[..., Any], q: Tensor, k: Tensor, extra: Tensor | None) -> Tensor | None:
    """The weights the answer gives each key, read from its output: with the identity matrix as the values, row i
    of the output is query i's weights. None if that call does not give a tensor of the weights' shape."""
    eye = torch.eye(k.size(-2)).expand(*k.shape[:-1], k.size(-2))  # (..., T_k, T_k)
    try:
        got = _output(call(fn, q, k, eye.clone(), extra), (*q.shape[:-1], k.size(-2)), ())
    except NotYet:
        return None
    shape = (*q.shape[:-1], k.size(-2))
    return got if isinstance(got, Tensor) and got.device == k.device and got.shape == shape else None


def _name_weights_mistake(
    fn: Callable[..., Any], got: Tensor, expected: Tensor, q: Tensor, k: Tensor, mask: Tensor | None
) -> None:
    """A wrong output that no other message names, named by the weights the answer gives (its output with the
    identity as the values): a row that does not sum to 1, or weight left on a hidden key."""
    if not isinstance(got, Tensor) or got.device != expected.device or got.shape != expected.shape:
        return  # named by same(), as it is
    if not differs(got, expected):
        return
    weights = _weights_of(fn, q, k, mask)
    if weights is None or not weights.isfinite().all():
        return
    sums = weights.double().sum(-1)
    if not torch.allclose(sums, torch.ones_like(sums), atol=1e-4):
        first = sums.flatten()[(sums.flatten() - 1).abs().argmax()].item()
        raise NotYet(
            f"a query's weights do not sum to 1 (one row sums to {first:.4g}): the weights are the softmax of the "
            "scaled scores over the keys, scores.softmax(dim=-1), nothing after it"
        )
    if isinstance(mask, Tensor) and mask.dtype == torch.bool:
        hidden = ~mask.expand(weights.shape)
        if (weights[hidden] > 1e-6).any():
            most = weights[hidden].max().item()
            raise NotYet(
                f"keys the mask hides still get weight (up to {most:.3g}): a finite fill such as -10 or -1e4 only "
                'lowers their scores; fill them with float("-inf"), whose softmax weight is exactly 0'
            )


def _returned_weights(raw: Any, expected: Tensor, scaled: Tensor, mask: Tensor | None) -> None:
    """The weights of an answer that returns the pair ``(output, weights)``, as its docstring asks: the softmax's
    result, with the mask applied, in the shape ``(..., T_q, T_k)``; checked once the output is right."""
    if not (isinstance(raw, tuple | list) and len(raw) == 2):  # pyright: ignore[reportUnknownArgumentType]
        return
    weights: Any = raw[1]
    if weights is None:
        raise NotYet(
            "the output is right, and the second item returned is None: return the weights too, (weights @ value, "
            "weights), or the output alone"
        )
    if isinstance(weights, Tensor) and weights.shape != expected.shape and weights.shape == expected.mT.shape:
        raise NotYet(
            f"the weights have shape {tuple(weights.shape)}, (..., T_k, T_q): they are transposed; each query's row "
            "of weights over the keys is (..., T_q, T_k), the softmax's result as it is"
        )
    hidden = scaled if mask is None else scaled.masked_fill(~mask, float("-inf"))
    name_mistake(
        weights,
        expected,
        [
            (hidden, "the weights returned are the scores before the softmax: return the softmax's result"),
            (scaled, "the weights returned are the scores before the softmax: return the softmax's result"),
            (scaled.softmax(-1), "the weights returned are those without the mask: return the masked softmax, "
             "the weights the output was computed with"),
        ],
        "the output is right, but",
    )  # fmt: skip
    same(weights, expected, "the weights (the second item returned)")


def _empty_row_note(fn: Callable[..., Any]) -> str:
    """A note for a right answer that hides scores with a finite fill (-1e9): a query whose keys are all hidden then
    attends evenly to them, section 4's trap, which the checker's masks (no empty row) cannot fail."""
    g = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(2, n, 8, generator=g) for n in (3, 5, 5))
    mask = torch.ones(3, 5, dtype=torch.bool)
    mask[1] = False  # query 1 may see no key
    try:
        got = _output(call(fn, q, k, v, mask), (2, 3, 8), (2, 3, 5))
    except NotYet:
        return ""
    if isinstance(got, Tensor) and got.shape == (2, 3, 8) and bool(got[:, 1].isfinite().all()) \
            and torch.allclose(got[:, 1], v.mean(-2), atol=1e-4):  # fmt: skip
        return (
            " (A note: a query whose keys are all hidden gets even weights over them with your fill, and so attends "
            "to padding: section 4's trap of -1e9. With float(\"-inf\") it gets NaN, which the course's version "
            "turns into zeros.)"
        )
    return ""


def _on_a_gpu(fn: Callable[..., Any]) -> None:
    """The answer as a GPU runs it: its inputs on another device (the meta device stands in for one), and in
    bfloat16, where a fill value the size of float32's extremes overflows."""
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(2, n, 8, generator=g) for n in (3, 5, 5))
    mask = causal_mask(5)[-3:]  # (3, 5)
    got = on_meta(fn, q, k, v, mask)
    off_the_cpu("the output", got, getattr(fn, "__name__", "it"))  # an (output, weights) pair included
    expected, _ = scaled_dot_product_attention(q, k, v, mask)
    try:
        half = _output(call(fn, q.bfloat16(), k.bfloat16(), v.bfloat16(), mask), (2, 3, 8), (2, 3, 5))
    except NotYet as e:
        if not re.search(r"BFloat16|dtype|scalar type", str(e)):
            raise
        raise NotYet(
            f"right in float32, but with bfloat16 inputs (what a GPU computes in) {e}. A step turned the bfloat16 "
            "scores into float32 (a softmax with dtype=torch.float32, or a mask made as a float32 tensor and added), "
            "and the weights then meet the bfloat16 values in a matmul: make such tensors in scores.dtype, or cast "
            "the weights back, weights.to(value.dtype)"
        ) from None
    if isinstance(half, Tensor) and half.is_floating_point() and half.dtype != torch.bfloat16:
        raise NotYet(
            f"right in float32, but with bfloat16 inputs (what a GPU computes in) the output is {half.dtype}: "
            "computing a step in float32 is fine, but return the result in the inputs' dtype, .to(query.dtype), or "
            "the next layer's bfloat16 matmul fails"
        )
    if not (isinstance(half, Tensor) and half.shape == expected.shape and half.isfinite().all()
            and torch.allclose(half.float(), expected, atol=0.1)):  # fmt: skip
        raise NotYet(
            "right in float32, not in bfloat16 (what a GPU computes in): hide scores with "
            'float("-inf") or torch.finfo(scores.dtype).min, and return the result in the inputs\' dtype'
        )


def _name_unmasked_mistake(got: Tensor, expected: Tensor, q: Tensor, k: Tensor, v: Tensor, heads: int | None) -> None:
    """Without a mask: a scale other than sqrt(d_k), or the softmax over another axis, named by the output it gives."""
    (T_q, d_k), T_k, d_v = q.shape[-2:], k.size(-2), v.size(-1)
    scores = q @ k.transpose(-2, -1)  # (..., T_q, T_k), not yet scaled
    scaled = scores / math.sqrt(d_k)
    root = f"divide by math.sqrt(query.size(-1)) = sqrt({d_k})"
    scales = [
        (1.0, MISTAKES["not scaled"]),
        (d_k, f"the scores are divided by d_k = {d_k}, not by its square root: {root}"),
        (1 / math.sqrt(d_k), f"the scores are multiplied by sqrt(d_k); {root}"),
        (math.sqrt(d_v), f"the scores are divided by sqrt(d_v) = sqrt({d_v}), the values' size: {root}"),
        (math.sqrt(T_k), f"the scores are divided by sqrt({T_k}), the number of keys T_k: {root}"),
        (math.sqrt(T_q), f"the scores are divided by sqrt({T_q}), the number of queries T_q: {root}"),
        (math.sqrt(512), f"the scores are divided by sqrt(512), the paper's d_model: {root}"),
        (
            d_k / 2,
            f"the scores are divided by d_k / 2 = {d_k / 2:g}: d_k ** 1/2 is (d_k ** 1) / 2, since ** binds tighter "
            f"than /; write d_k ** 0.5, or {root}",
        ),
    ]
    if heads is not None:
        scales += [
            (math.sqrt(heads), f"the scores are divided by sqrt({heads}), the number of heads: {root}"),
            (math.sqrt(heads * d_k), f"the scores are divided by sqrt(h * d_k) = sqrt(d_model): {root}"),
        ]
    name_mistake(got, expected, [((scores / s).softmax(-1) @ v, message) for s, message in scales])
    name_mistake(
        got,
        expected,
        [
            (
                scores.softmax(-1) / math.sqrt(d_k) @ v,
                "sqrt(d_k) divides after the softmax (the weights, or the output), and the scores went into it "
                f"unscaled: divide the scores before the softmax, {root}, then .softmax(dim=-1)",
            )
        ],
    )
    name_mistake(
        got,
        expected,
        [
            (scaled.softmax(dim) @ v, f"softmax runs over {name}; each query's weights over the keys must "
             "sum to 1: dim=-1")
            for dim, name in _axes(scaled.dim()).items()
        ],
    )  # fmt: skip


def _name_masked_mistake(got: Tensor, expected: Tensor, q: Tensor, k: Tensor, v: Tensor, mask: Tensor) -> None:
    """With a mask: one flipped, ignored, applied after the softmax, filled with 0 or added, named by its output."""
    scaled = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (..., T_q, T_k)
    flipped = [scaled.masked_fill(mask, fill).softmax(-1) @ v for fill in (float("-inf"), -1e9)]
    if any(_same_or_nan(got, buggy) for buggy in flipped):
        raise NotYet(MISTAKES["flipped mask"])
    if isinstance(got, Tensor) and _same_or_nan(got, (scaled + (~mask).float() * float("-inf")).softmax(-1) @ v):
        raise NotYet(
            "the output is NaN: (~mask).float() * float('-inf') multiplies the allowed positions' 0 by -inf, and "
            "0 * inf is NaN, which the softmax spreads to the whole row; hide the scores with "
            'scores.masked_fill(~mask, float("-inf")) (or torch.where(mask, scores, float("-inf")))'
        )
    weights = scaled.softmax(-1)
    name_mistake(
        got,
        expected,
        [
            (
                weights @ v,
                "the output with a mask equals the output without one: the mask is ignored. Hide the "
                'scores where it is False, scores.masked_fill(~mask, float("-inf")), before the softmax',
            ),
            (
                weights.masked_fill(~mask, 0.0) @ v,
                "the mask is applied after the softmax: the weights left no longer sum to 1. Hide the "
                'scores before it, scores.masked_fill(~mask, float("-inf")).softmax(dim=-1)',
            ),
            (
                scaled.masked_fill(~mask, 0.0).softmax(-1) @ v,
                "the hidden scores are set to 0, and a score of 0 still gets the weight e^0 in the "
                'softmax: fill them with float("-inf"), masked_fill(~mask, float("-inf"))',
            ),
            (
                (scaled + mask.float()).softmax(-1) @ v,
                "the bool mask is added to the scores (True counts as 1), which hides nothing: "
                'scores.masked_fill(~mask, float("-inf"))',
            ),
        ],
    )


def check_split_heads(fn: Callable[..., Any]) -> Verdict:
    """``fn(x (B, T, d_model), n_heads)`` returns ``(B, n_heads, T, d_k)``."""

    def one(B: int, T: int, d_model: int, n_heads: int) -> str:
        x = torch.arange(B * T * d_model, dtype=torch.float32).reshape(B, T, d_model)
        d_k = d_model // n_heads
        got = _call(fn, x, n_heads)
        expected = x.view(B, T, n_heads, d_k).transpose(1, 2)
        if isinstance(got, Tensor) and got.shape == (B, T, n_heads, d_k):
            raise NotYet("shape (B, T, h, d_k): the heads axis must come before T, so add .transpose(1, 2)")
        if isinstance(got, Tensor) and got.shape == (B, n_heads, d_k, T) != expected.shape:
            raise NotYet("shape (B, h, d_k, T): T and d_k are swapped; only the heads axis moves, .transpose(1, 2)")
        name_mistake(
            got,
            expected,
            [
                (
                    x.view(B, n_heads, T, d_k),
                    "right shape, wrong values: x.view(B, h, T, d_k) mixes positions; "
                    "view(B, T, h, d_k) then transpose(1, 2)",
                ),
                (
                    x.view(B, T, d_k, n_heads).permute(0, 3, 1, 2),
                    "right shape, wrong values: the last axis is viewed as (d_k, h), so head i gets the interleaved "
                    "features i, i + h, i + 2h, ...; head i owns the block i * d_k to (i + 1) * d_k - 1: "
                    "view(B, T, h, d_k) then transpose(1, 2)",
                ),
            ],
        )
        same(got, expected, "split heads")
        return "split_heads is right: (B, T, d_model) -> (B, T, h, d_k) -> (B, h, T, d_k)."

    def run() -> str:
        message = each_case(one, [dict(B=2, T=3, d_model=8, n_heads=4), dict(B=3, T=5, d_model=12, n_heads=3)])
        backpropagates(
            fn,
            torch.randn(2, 3, 8),
            4,
            what="split_heads's output",
            reference=lambda x, h: x.view(x.size(0), x.size(1), h, -1).transpose(1, 2),
        )
        return message

    return verdict(run)


def check_merge_heads(fn: Callable[..., Any]) -> Verdict:
    """``fn(x (B, n_heads, T, d_k))`` returns ``(B, T, n_heads * d_k)``, the heads side by side."""

    def one(B: int, n_heads: int, T: int, d_k: int) -> str:
        x = torch.arange(B * n_heads * T * d_k, dtype=torch.float32).reshape(B, n_heads, T, d_k)
        got = _call(fn, x)
        expected = x.transpose(1, 2).reshape(B, T, n_heads * d_k)
        name_mistake(
            got,
            expected,
            [
                (
                    x.reshape(B, T, n_heads * d_k),
                    "right shape, wrong values: transpose(1, 2) back to (B, T, h, d_k) before the reshape",
                ),
                (
                    x.transpose(2, 3).reshape(B, T, n_heads * d_k),
                    "right shape, wrong values: transpose(2, 3) swaps T and d_k; the heads axis is the one to move, "
                    "next to d_k: transpose(1, 2), to (B, T, h, d_k), then the reshape",
                ),
                (
                    x.permute(0, 2, 3, 1).reshape(B, T, n_heads * d_k),
                    "right shape, wrong values: the heads are interleaved (feature j of head i lands at j * h + i), "
                    "as permute(0, 2, 3, 1) puts d_k before h: transpose(1, 2) only, to (B, T, h, d_k), so that each "
                    "head's d_k features stay side by side",
                ),
                (
                    x.flip(1).transpose(1, 2).reshape(B, T, n_heads * d_k),
                    "right shape, wrong values: the heads are in reverse order; head i's features belong at i * d_k "
                    "to (i + 1) * d_k - 1, as split_heads cut them: transpose(1, 2), then the reshape, keeps heads "
                    "0, 1, ..., h - 1 in order",
                ),
            ],
        )
        same(got, expected, "merged heads")
        return "merge_heads is right: (B, h, T, d_k) -> (B, T, h, d_k) -> (B, T, h * d_k)."

    def run() -> str:
        message = each_case(one, [dict(B=2, n_heads=4, T=3, d_k=2), dict(B=3, n_heads=3, T=5, d_k=4)])
        backpropagates(
            fn,
            torch.randn(2, 4, 3, 2),
            what="merge_heads's output",
            reference=lambda x: x.transpose(1, 2).reshape(x.size(0), x.size(2), -1),
        )
        return message

    return verdict(run)


def check_attention_with_bias(fn: Callable[..., Any]) -> Verdict:
    """``fn(query, key, value, bias)`` returns ``softmax(Q K^T / sqrt(d_k) + bias) V``, or ``(output, weights)``;
    ``bias`` is a float ``(T_q, T_k)`` added to the scaled scores."""

    def one(B: int, T_q: int, T_k: int, d_k: int, slope: float, seed: int, heads: int | None = None) -> str:
        g = torch.Generator().manual_seed(seed)
        lead = (B,) if heads is None else (B, heads)
        q, k, v = (torch.randn(*lead, n, d_k, generator=g) for n in (T_q, T_k, T_k))
        distance = (torch.arange(T_q)[:, None] + T_k - T_q - torch.arange(T_k)).abs().float()  # queries: the last
        # far keys are penalised, as ALiBi does; with heads, one slope per head: a (h, T_q, T_k) bias
        bias = -slope * (distance if heads is None else torch.arange(1, heads + 1)[:, None, None] * distance)
        raw = _attention_call(fn, q, k, v, bias)
        out = _output(raw, (*lead, T_q, d_k), (*lead, T_q, T_k))
        scores = q @ k.transpose(-2, -1)  # (..., T_q, T_k), not yet scaled
        scaled = scores / math.sqrt(d_k)
        expected = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)  # PyTorch adds a float attn_mask
        mistakes = [
            (
                (scaled.softmax(-1) + bias) @ v,
                "the bias is added after the softmax: add it to the scores, before .softmax(dim=-1)",
            ),
            (
                ((scores + bias) / math.sqrt(d_k)).softmax(-1) @ v,
                "the bias is divided by sqrt(d_k) with the scores: scale Q K^T first, then add the bias",
            ),
            (scaled.softmax(-1) @ v, "the bias is ignored: add it to the scaled scores"),
            ((scaled * bias).softmax(-1) @ v, "the bias multiplies the scores; it is additive: scores + bias"),
            (
                (scores + bias).softmax(-1) @ v,
                "the scores are not divided by sqrt(d_k): q @ k.transpose(-2, -1) / math.sqrt(d_k), then + bias",
            ),
            (
                (scaled - bias).softmax(-1) @ v,
                "the bias is subtracted; it is added, scores + bias (a penalty is already negative: -slope * distance)",
            ),
            (
                (scaled + bias).softmax(-2) @ v,
                "softmax runs over the queries (dim=-2); each query's weights over the keys must sum to 1: dim=-1",
            ),
            (
                (scores / math.sqrt(T_k) + bias).softmax(-1) @ v,
                f"the scores are divided by sqrt({T_k}), the number of keys T_k: divide by math.sqrt(d_k) = "
                f"sqrt({d_k}), the size of each query and key (query.size(-1)), then add the bias",
            ),
        ]
        if slope > 0:  # every bias entry off the diagonal is negative: a bias used as a mask hides them all
            mistakes.append((
                scaled.masked_fill(bias < 0, float("-inf")).softmax(-1) @ v,
                "the bias is used as a mask, hiding the keys where it is negative: it is a penalty, not a ban; add "
                "it to the scaled scores, scores + bias, so that far keys weigh less but still count",
            ))  # fmt: skip
        name_mistake(out, expected, mistakes)
        same(out, expected, "the output")
        weights = (scaled + bias).softmax(-1)
        _returned_weights(raw, weights, scaled + bias, None)
        return "right: softmax(Q K^T / sqrt(d_k) + bias) V, as F.scaled_dot_product_attention with a float attn_mask."

    def run() -> str:
        message = each_case(
            one,
            [
                dict(B=2, T_q=3, T_k=5, d_k=8, slope=0.75, seed=0),
                dict(B=3, T_q=4, T_k=7, d_k=16, slope=0.5, seed=1),
            ],
        )
        _with_heads(one, dict(B=2, T_q=3, T_k=5, d_k=4, slope=0.25, seed=2, heads=4))
        g = torch.Generator().manual_seed(0)
        q, k, v = (torch.randn(2, n, 8, generator=g) for n in (3, 5, 5))
        bias = -0.75 * torch.rand(3, 5, generator=g)
        backpropagates(
            fn,
            q,
            k,
            v,
            bias,
            what="the attention output",
            reference=lambda q, k, v, b: F.scaled_dot_product_attention(q, k, v, attn_mask=b),
        )
        _same_dtype(_output(call(fn, q, k, v, bias), (2, 3, 8), (2, 3, 5)), q, "the output")
        off_the_cpu("the output", on_meta(fn, q, k, v, bias), getattr(fn, "__name__", "it"))
        library = _library_attention(fn)
        if library:
            raise NotYet(
                f"right numbers, but through {library}, which adds the bias for you (a float attn_mask): this "
                "exercise is to add it yourself, where your attention's masked_fill acts, on the scaled scores"
            )
        return message

    return verdict(run)


def check_fused_head_projections(fn: Callable[..., Any]) -> Verdict:
    """``fn(head_weights)``: ``h`` matrices ``W_i`` of shape ``(d_model, d_k)`` (the paper's layout,
    ``q_i = x @ W_i``) -> the ``(h * d_k, d_model)`` weight of one ``nn.Linear`` that computes every head."""

    def one(d_model: int, n_heads: int, seed: int) -> str:
        g = torch.Generator().manual_seed(seed)
        d_k = d_model // n_heads
        heads = [torch.randn(d_model, d_k, generator=g) for _ in range(n_heads)]
        expected = torch.cat(heads, dim=1).T  # (h * d_k, d_model): nn.Linear's (out, in)
        interleaved = torch.stack(heads, dim=-1).reshape(d_model, n_heads * d_k)  # column j * h + i: head i's j
        scrambled = torch.stack(heads).reshape(n_heads * d_k, d_model)  # each computed before the answer runs
        got = call(fn, heads)
        if not differs(got, expected.T):
            raise NotYet(
                "this is the paper's W^Q, (d_model, h * d_k) = (in, out); nn.Linear stores its weight as "
                "(out, in): transpose it, torch.cat(head_weights, dim=1).T (.reshape and .view keep this layout: they do "
                "not transpose)"
            )
        if not differs(got, interleaved.T) or not differs(got, interleaved):
            raise NotYet(
                "right shape, but the heads' features are interleaved (feature j of head i at j * h + i): "
                "each head must own one block of d_k features: concatenate, don't stack"
            )
        if isinstance(got, Tensor) and got.shape in ((n_heads * d_model, d_k), (d_k, n_heads * d_model)):
            raise NotYet(
                f"shape {tuple(got.shape)}: the heads are concatenated along the input axis; each head adds "
                "d_k output features: concatenate the W_i along dim=1, then transpose"
            )
        name_mistake(
            got,
            expected,
            [
                (
                    torch.cat(heads[::-1], dim=1).T,
                    "the heads are in reverse order: head i's block is rows i * d_k to (i + 1) * d_k - 1, so "
                    "concatenate them in their order, torch.cat(head_weights, dim=1).T",
                ),
                (
                    scrambled,
                    "right shape, wrong values: .reshape (or .view) of the stacked (h, d_model, d_k) to "
                    "(h * d_k, d_model) keeps the numbers in memory order, which scrambles the rows; it does not "
                    "transpose: torch.cat(head_weights, dim=1).T",
                ),
            ],
        )
        same(got, expected, "the fused weight")
        linear = torch.nn.Linear(d_model, d_model, bias=False)
        with torch.no_grad():
            linear.weight.copy_(got)
            x = torch.randn(3, d_model, generator=g)
            for i, w in enumerate(heads):
                same(linear(x)[:, i * d_k : (i + 1) * d_k], x @ w, f"head {i}'s block of the fused Linear")
        return (
            "right: loaded into nn.Linear(d_model, d_model), head i's queries are output features i*d_k to (i+1)*d_k."
        )

    def run() -> str:
        cases = [
            dict(d_model=8, n_heads=2, seed=0),
            dict(d_model=12, n_heads=3, seed=1),
            dict(d_model=12, n_heads=4, seed=2),
        ]
        return each_case(one, cases)

    return verdict(run)


def check_grouped_query_attention(fn: Callable[..., Any]) -> Verdict:
    """``fn(query (B, h, T_q, d_k), key (B, g, T_k, d_k), value (B, g, T_k, d_k))`` returns ``(B, h, T_q, d_k)``
    (or ``(output, weights)``): query heads ``i * h // g`` to ``(i + 1) * h // g - 1`` share key/value head ``i``."""

    def one(n_heads: int, n_kv_heads: int, seed: int) -> str:
        g = torch.Generator().manual_seed(seed)
        q = torch.randn(2, n_heads, 3, 8, generator=g)  # (B, h, T_q = 3, d_k)
        k, v = (torch.randn(2, n_kv_heads, 5, 8, generator=g) for _ in range(2))  # (B, g, T_k = 5, d_k)
        group = n_heads // n_kv_heads
        try:
            got = call(fn, q, k, v)
        except NotYet as e:  # (B, g * g, T_k, d_k) keys against (B, h, T_q, d_k) queries: PyTorch names both sizes
            sizes = sorted(int(n) for n in re.findall(r"\((\d+)\)", str(e)))
            if "must match" in str(e) and group != n_kv_heads and sizes == sorted((n_heads, n_kv_heads**2)):
                named.append(
                    f"each key/value head is repeated g = {n_kv_heads} times, which gives {n_kv_heads**2} heads for "
                    f"h = {n_heads} query heads: repeat it h // g = {group} times, the number of query heads it "
                    f"serves, k.repeat_interleave(query.size(1) // key.size(1), dim=1) ({e})"
                )
            raise
        out = _output(got, (2, n_heads, 3, 8), (2, n_heads, 3, 5))
        expand = (k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1))  # (B, h, T_k, d_k)
        expected, _ = scaled_dot_product_attention(q, *expand)
        tiled, _ = scaled_dot_product_attention(q, k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1))
        first, _ = scaled_dot_product_attention(q, k[:, :1], v[:, :1])
        unscaled = (q @ expand[0].transpose(-2, -1)).softmax(-1) @ expand[1]
        name_mistake(
            out,
            expected,
            [
                (
                    tiled,
                    "query head i uses key/value head i % g: .repeat tiles the groups; neighbouring query heads "
                    "share one key/value head: k.repeat_interleave(h // g, dim=1)",
                ),
                (first, "every query head uses key/value head 0; that is multi-query attention (g = 1)"),
                *(
                    (
                        scaled_dot_product_attention(q, *pair)[0],
                        "the keys and the values are expanded differently (one with .repeat, which tiles the "
                        "groups, the other with .repeat_interleave): expand both alike, "
                        "k.repeat_interleave(h // g, dim=1) and v.repeat_interleave(h // g, dim=1)",
                    )
                    for pair in (
                        (expand[0], v.repeat(1, group, 1, 1)),
                        (k.repeat(1, group, 1, 1), expand[1]),
                    )
                ),
                (unscaled, "the scores are not divided by sqrt(d_k): call scaled_dot_product_attention, which does"),
            ],
        )
        _name_unmasked_mistake(out, expected, q, *expand, n_heads)  # another scale, the softmax over another axis
        same(out, expected, f"the output with h={n_heads}, g={n_kv_heads}")
        return "grouped-query attention is right: h // g neighbouring query heads share each key/value head."

    named: list[str] = []  # a mistake told as itself, not as each_case's question about a hard-coded value

    def run() -> str:
        try:
            message = each_case(
                one,
                [
                    dict(n_heads=4, n_kv_heads=2, seed=0),
                    dict(n_heads=6, n_kv_heads=3, seed=1),
                    dict(n_heads=4, n_kv_heads=1, seed=2),
                    dict(n_heads=8, n_kv_heads=2, seed=3),
                    dict(n_heads=2, n_kv_heads=2, seed=4),
                ],
            )
        except NotYet:
            if named:
                raise NotYet(named[0]) from None
            raise
        g = torch.Generator().manual_seed(0)
        q, k, v = (torch.randn(2, h, n, 8, generator=g) for h, n in ((4, 3), (2, 5), (2, 5)))

        def grouped(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
            n = q.size(1) // k.size(1)
            return scaled_dot_product_attention(q, expand_kv(k, n), expand_kv(v, n))[0]

        backpropagates(fn, q, k, v, what="the grouped-query attention output", reference=grouped)
        off_the_cpu("the output", on_meta(fn, q, k, v), getattr(fn, "__name__", "it"))
        if "enable_gqa" in code_names(fn):
            raise NotYet(
                "right numbers, but through enable_gqa=True, which lets PyTorch give each query head its key/value "
                "head: this exercise is to do that yourself, copies of the same head side by side along dim=1 "
                "(repeat_interleave), then scaled_dot_product_attention"
            )
        return message

    return verdict(run)
