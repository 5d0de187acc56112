"""Layer normalisation and the position-wise feed-forward network (section 3.3 of the paper).

Shape letters: B batch, T sequence length.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..utils import require_sizes

__all__ = ["FeedForward", "LayerNorm", "RMSNorm", "SwiGLU"]


class LayerNorm(nn.Module):
    r"""y = (x - mean) / sqrt(var + eps) * weight + bias over the last dimension (Ba et al. 2016).

    ``var`` is the *biased* variance (divide by d_model, not d_model - 1) and ``eps`` sits *inside*
    the square root: both as ``nn.LayerNorm``, whose state dict this matches (``weight`` = scale
    gamma, then ``bias`` = shift beta). The common ``(x - mean) / (x.std() + eps)`` differs on both
    counts.

    Chapter 04 writes the formula out step by step; here it runs as ``F.layer_norm``, one fused kernel
    computing the same function (the tests hold the two equal), because every layer of every model calls it.
    """

    def __init__(self, d_model: int, eps: float = 1e-5, bias: bool = True) -> None:
        super().__init__()
        self.d_model, self.eps = d_model, eps
        self.weight = nn.Parameter(torch.ones(d_model))  # gamma, the scale
        self.bias = nn.Parameter(torch.zeros(d_model)) if bias else None  # beta, the shift (GPTs often omit it)

    def forward(self, x: Tensor) -> Tensor:
        if x.size(-1) != self.d_model:
            raise ValueError(f"LayerNorm({self.d_model}) got input with last dimension {x.size(-1)}")
        return F.layer_norm(x, (self.d_model,), self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.d_model}, eps={self.eps}"


def _gelu_tanh(x: Tensor) -> Tensor:
    """GELU through its tanh approximation, as GPT-2 computes it: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    return F.gelu(x, approximate="tanh")


# "gelu" is the exact x * Phi(x) (chapter 07's GPT); "gelu_tanh" is GPT-2's approximation, within 1e-3 of it.
_ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu, "gelu_tanh": _gelu_tanh}


class FeedForward(nn.Module):
    r"""FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, applied to every position independently.

    ``(B, T, d_model) -> (B, T, d_ff) -> (B, T, d_model)``. Dropout acts on the hidden layer, as in
    ``nn.TransformerEncoderLayer``. ``activation="gelu"`` gives the GPT variant, ``"gelu_tanh"`` GPT-2's.
    """

    def __init__(
        self, d_model: int, d_ff: int, dropout: float = 0.0, activation: str = "relu", bias: bool = True
    ) -> None:
        super().__init__()
        require_sizes("FeedForward", d_model=d_model, d_ff=d_ff)
        if activation not in _ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(_ACTIVATIONS)}; got {activation!r}")
        self.activation = activation
        self.w_1 = nn.Linear(d_model, d_ff, bias=bias)
        self.w_2 = nn.Linear(d_ff, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        hidden = _ACTIVATIONS[self.activation](self.w_1(x))  # (B, T, d_ff)
        return self.w_2(self.dropout(hidden))  # (B, T, d_model)


class RMSNorm(nn.Module):
    r"""y = x / sqrt(mean(x^2) + eps) * weight over the last dimension (Zhang and Sennrich 2019), as in Llama.

    LayerNorm without the mean subtracted and without the shift: one scale ``weight`` (gamma), ``eps`` inside the
    root. Normalised in float32 whatever the input's dtype, cast back to it, then scaled, as Llama does.
    ``(..., d) -> (..., d)``.
    """

    def __init__(self, d_model: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.d_model, self.eps = d_model, eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: Tensor) -> Tensor:
        x32 = x.float()
        normed = x32 * torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + self.eps)  # (..., d)
        return self.weight * normed.to(x.dtype)

    def extra_repr(self) -> str:
        return f"{self.d_model}, eps={self.eps}"


class SwiGLU(nn.Module):
    r"""FFN(x) = W_down (SiLU(x W_gate) * (x W_up)), the gated feed-forward network of Llama (Shazeer 2020).

    Two projections up to ``d_ff``: one passes through SiLU (x * sigmoid(x)) and *gates* the other, position by
    position. No biases. ``(B, T, d_model) -> (B, T, d_ff) -> (B, T, d_model)``. With three matrices instead of
    two, a ``d_ff`` of about 8/3 d_model holds as many weights as the 4 d_model of ``FeedForward``.
    """

    def __init__(self, d_model: int, d_ff: int, bias: bool = False) -> None:
        super().__init__()
        self.w_gate = nn.Linear(d_model, d_ff, bias=bias)
        self.w_up = nn.Linear(d_model, d_ff, bias=bias)
        self.w_down = nn.Linear(d_ff, d_model, bias=bias)

    def forward(self, x: Tensor) -> Tensor:
        hidden = F.silu(self.w_gate(x)) * self.w_up(x)  # (B, T, d_ff)
        return self.w_down(hidden)  # (B, T, d_model)
