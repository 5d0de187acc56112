"""Checkers for the encoder's building blocks (chapter 04)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..model.masks import padding_mask
from ._core import NotWritten, NotYet, Verdict, backpropagates, call, differs, same, verdict

__all__ = [
    "check_encoder_layer",
    "check_layer_norm",
    "check_pre_norm_layer",
    "check_rms_norm",
]


def check_layer_norm(fn: Callable[..., Any]) -> Verdict:
    """``fn(x, weight, bias, eps)`` normalises over the last dimension, as ``F.layer_norm``."""

    def run() -> str:
        g = torch.Generator().manual_seed(0)
        x = torch.randn(2, 3, 6, generator=g) * 3 + 1
        weight, bias = torch.randn(6, generator=g), torch.randn(6, generator=g)
        eps = 0.5  # large, so that where eps goes shows
        got = call(fn, x, weight, bias, eps)
        mean = x.mean(-1, keepdim=True)
        if not differs(got, (x - mean) / torch.sqrt(x.var(-1, keepdim=True) + eps) * weight + bias):
            raise NotYet("unbiased variance (divides by d - 1); layer norm divides by d: var(unbiased=False)")
        if not differs(got, (x - mean) / (x.std(-1, keepdim=True) + eps) * weight + bias):
            raise NotYet("this is (x - mean) / (std + eps) with unbiased std: use sqrt(biased var + eps)")
        if not differs(got, (x - mean) / (x.std(-1, unbiased=False, keepdim=True) + eps) * weight + bias):
            raise NotYet("eps is outside the square root: use sqrt(var + eps)")
        same(got, F.layer_norm(x, (6,), weight, bias, eps), "the normalised output")
        backpropagates(fn, x, weight, bias, eps, what="the normalised output")
        return "layer_norm matches F.layer_norm (biased variance, eps inside the root)."

    return verdict(run)


def check_pre_norm_layer(fn: Callable[..., Any]) -> Verdict:
    """``fn(layer, x, mask)`` computes a pre-norm encoder layer's forward from ``layer``'s submodules."""

    def run() -> str:
        from ..model.encoder import EncoderLayer

        torch.manual_seed(0)
        layer = EncoderLayer(16, 4, 32, dropout=0.0, norm_first=True).eval()
        with torch.no_grad():
            for norm in (layer.norm1, layer.norm2):
                for parameter in norm.parameters():  # the scale and the shift
                    parameter.normal_()
        x = torch.randn(2, 5, 16)
        mask = padding_mask(torch.tensor([[1, 2, 3, 0, 0], [1, 2, 3, 4, 5]]), 0)
        with torch.no_grad():
            got = call(fn, layer, x, mask)
            attend = lambda h: layer.self_attn(h, h, h, mask)[0]  # noqa: E731
            post = layer.norm1(x + attend(x))
            post = layer.norm2(post + layer.feed_forward(post))
            if not differs(got, post):
                raise NotYet(
                    "this is post-norm (norm after the residual add); pre-norm normalises the sublayer's input"
                )
            y = x + attend(layer.norm1(x))
            expected = y + layer.feed_forward(layer.norm2(y))
            if not differs(got, attend(layer.norm1(x)) + layer.feed_forward(layer.norm2(x))):
                raise NotYet("the residual connections are missing: add each sublayer's output to its input")
            h = layer.norm1(x)  # the stream itself normalised, then the residual taken from it
            z = h + attend(h)
            if not differs(got, z + layer.feed_forward(layer.norm2(z))):
                raise NotYet(
                    "the residual stream itself is normalised (x = norm1(x) before the add): normalise only the "
                    "sublayer's input, x + self_attn(norm1(x)), so the stream keeps its own scale"
                )
            if not differs(got, layer.norm2(expected)) or not differs(got, layer.norm1(expected)):
                raise NotYet(
                    "a norm is applied to the layer's output: in pre-norm each LayerNorm feeds a sublayer, the "
                    "stream is added to as it is (a pre-norm *stack* ends with one final norm, not each layer)"
                )
            unmasked = x + layer.self_attn(*(layer.norm1(x),) * 3, None)[0]
            if not differs(got, unmasked + layer.feed_forward(layer.norm2(unmasked))):
                raise NotYet("the mask is ignored: pass it to self_attn, so that no token attends to padding")
        same(got, expected, "the layer's output")
        return "pre-norm layer is right: x + SelfAttn(LN(x)), then x + FFN(LN(x))."

    return verdict(run)


def _with_hint(fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return call(fn, *args)
    except NotWritten:
        raise
    except NotYet as e:
        if "tuple" in str(e):
            raise NotYet(f"{e}; self_attn returns (output, weights): take its [0]") from None
        raise


def _post_norm_layer(seed: int = 0) -> tuple[Any, nn.TransformerEncoderLayer, Tensor, Tensor]:
    """A post-norm ``EncoderLayer`` copied from ``nn.TransformerEncoderLayer`` (dropout off, norms with random
    scales and shifts, so that which norm goes where shows), an input and a padding mask."""
    from ..model.encoder import EncoderLayer

    torch.manual_seed(seed)
    theirs = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True).eval()
    with torch.no_grad():
        for norm in (theirs.norm1, theirs.norm2):
            for parameter in norm.parameters():  # the scale and the shift
                parameter.normal_()
    layer = EncoderLayer.from_torch(theirs).eval()
    x = torch.randn(2, 5, 16)
    mask = padding_mask(torch.tensor([[1, 2, 3, 0, 0], [1, 2, 3, 4, 5]]), 0)  # (B, 1, 1, T)
    return layer, theirs, x, mask


def check_encoder_layer(fn: Callable[..., Any]) -> Verdict:
    """``fn(layer, x, mask)`` computes the paper's post-norm encoder layer from ``layer``'s submodules:
    h = norm1(x + SelfAttn(x)), then norm2(h + FFN(h))."""

    def run() -> str:
        layer, theirs, x, mask = _post_norm_layer()
        real = mask[:, 0, 0]  # (B, T): True = real token
        with torch.no_grad():
            got = _with_hint(fn, layer, x, mask)
            n1, n2, ffn = layer.norm1, layer.norm2, layer.feed_forward

            def attend(h: Tensor, m: Tensor | None = mask) -> Tensor:
                return layer.self_attn(h, h, h, m)[0]

            h = n1(x + attend(x))
            y = x + attend(n1(x))
            h_swapped = n2(x + attend(x))
            named = {
                "this is pre-norm (the norm before each sublayer): the paper's post-norm normalises after the "
                "residual addition, norm1(x + SelfAttn(x))": y + ffn(n2(y)),
                "the residual connections are missing: add each sublayer's input to its output before the norm": n2(
                    ffn(n1(attend(x)))
                ),
                "the first residual connection is missing: norm1(x + SelfAttn(x))": n2(
                    n1(attend(x)) + ffn(n1(attend(x)))
                ),
                "the second residual connection is missing: norm2(h + FFN(h))": n2(ffn(h)),
                "the mask is ignored: pass it to self_attn, so that no token attends to padding": n2(
                    n1(x + attend(x, None)) + ffn(n1(x + attend(x, None)))
                ),
                "norm1 and norm2 are swapped: norm1 follows the attention, norm2 the feed-forward network": n1(
                    h_swapped + ffn(h_swapped)
                ),
                "the feed-forward network reads x: it must read h, the attention sublayer's normalised output": n2(
                    h + ffn(x)
                ),
            }
            for mistake, buggy in named.items():
                if not differs(got, buggy):
                    raise NotYet(mistake)
            expected = n2(h + ffn(h))
            same(got, expected, "the layer's output")
            torch_out = theirs(x, src_key_padding_mask=~real)  # torch: True = padding
        same(got[real], torch_out[real], "the output at the real positions, compared with nn.TransformerEncoderLayer")
        return (
            "post-norm layer is right: equal to course_utils.EncoderLayer and, at the real positions, to "
            "nn.TransformerEncoderLayer."
        )

    return verdict(run)


def check_rms_norm(fn: Callable[..., Any]) -> Verdict:
    """``fn(x, weight, eps)`` returns x / sqrt(mean(x²) + eps) * weight over the last dimension, as ``F.rms_norm``."""

    def run() -> str:
        g = torch.Generator().manual_seed(0)
        x = torch.randn(2, 3, 6, generator=g) * 2 + 1  # a mean far from 0, so that subtracting it shows
        weight = torch.randn(6, generator=g)
        eps = 0.5  # large, so that where eps goes shows
        got = call(fn, x, weight, eps)
        mean_square = x.pow(2).mean(-1, keepdim=True)  # (B, T, 1)
        centred = x - x.mean(-1, keepdim=True)
        variance = x.var(-1, unbiased=False, keepdim=True)
        named = {
            "the mean is subtracted: that is LayerNorm without its shift. RMSNorm divides x itself by "
            "sqrt(mean(x²) + eps)": centred / torch.sqrt(variance + eps) * weight,
            "the variance is used (it subtracts the mean): RMSNorm uses the mean of the squares, "
            "x.pow(2).mean(-1, keepdim=True)": x / torch.sqrt(variance + eps) * weight,
            "eps is outside the square root: use sqrt(mean(x²) + eps)": x / (mean_square.sqrt() + eps) * weight,
            "the sum of squares is divided by d - 1: the mean divides by d, x.pow(2).mean(-1)": x
            / torch.sqrt(x.pow(2).sum(-1, keepdim=True) / 5 + eps)
            * weight,
            "the scale is missing: multiply by weight (gamma)": x / torch.sqrt(mean_square + eps),
        }
        for mistake, buggy in named.items():
            if not differs(got, buggy):
                raise NotYet(mistake)
        same(got, F.rms_norm(x, (6,), weight, eps), "the normalised output")
        backpropagates(fn, x, weight, eps, what="the normalised output")
        return "rms_norm matches F.rms_norm: no mean subtracted, eps inside the root."

    return verdict(run)
