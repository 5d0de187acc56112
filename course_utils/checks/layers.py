"""Checkers for the encoder's building blocks (chapter 04)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from ..masks import padding_mask
from ._core import NotYet, Verdict, call, differs, same, verdict

__all__ = ["check_feed_forward", "check_layer_norm", "check_pre_norm_layer"]


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
        return "layer_norm matches F.layer_norm (biased variance, eps inside the root)."

    return verdict(run)


def check_feed_forward(fn: Callable[..., Any]) -> Verdict:
    """``fn(x, w_1, b_1, w_2, b_2)`` returns FFN(x) = max(0, x W_1 + b_1) W_2 + b_2 (weights as ``nn.Linear`` stores them)."""

    def run() -> str:
        g = torch.Generator().manual_seed(0)
        x = torch.randn(2, 3, 4, generator=g)
        w_1, b_1 = torch.randn(8, 4, generator=g), torch.randn(8, generator=g)  # (d_ff, d_model), as nn.Linear
        w_2, b_2 = torch.randn(4, 8, generator=g), torch.randn(4, generator=g)
        got = call(fn, x, w_1, b_1, w_2, b_2)
        if not differs(got, F.linear(F.linear(x, w_1, b_1), w_2, b_2)):
            raise NotYet("the ReLU is missing: without it the two layers collapse into one linear map")
        same(got, F.linear(F.relu(F.linear(x, w_1, b_1)), w_2, b_2), "FFN(x)")
        return "feed_forward is right: expand to d_ff, ReLU, project back, at every position."

    return verdict(run)


def check_pre_norm_layer(fn: Callable[..., Any]) -> Verdict:
    """``fn(layer, x, mask)`` computes a pre-norm encoder layer's forward from ``layer``'s submodules."""

    def run() -> str:
        from ..encoder import EncoderLayer

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
        same(got, expected, "the layer's output")
        return "pre-norm layer is right: x + SelfAttn(LN(x)), then x + FFN(LN(x))."

    return verdict(run)
