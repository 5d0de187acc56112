"""The encoder layer and stack (section 3.1 of the paper).

Shape letters: B batch, T source length. Masks are bool, True = may attend.
"""

from __future__ import annotations

from collections.abc import Iterable

from torch import Tensor, nn

from ..utils import require_sizes
from .attention import MultiHeadAttention
from .convert_torch import layer_from_torch
from .layers import FeedForward, LayerNorm

__all__ = ["Encoder", "EncoderLayer"]


class EncoderLayer(nn.Module):
    r"""Self-attention, then a feed-forward network, each wrapped in a residual connection.

    Post-norm (the paper, ``norm_first=False``): ``x = LayerNorm(x + Sublayer(x))``.
    Pre-norm (most modern models, ``norm_first=True``): ``x = x + Sublayer(LayerNorm(x))``.
    ``forward(x (B, T, d_model), mask)`` -> ``(B, T, d_model)``; ``mask`` is usually
    ``padding_mask(src, pad_id)`` of shape ``(B, 1, 1, T)``.

    Each sublayer is one method, for a subclass to override (a variant, a bug to study), as PyTorch's
    ``_sa_block`` and ``_ff_block``; the residual connections and norms stay in ``forward``:

    - ``self_attention_block(x, mask)``: attention over ``x`` itself, then dropout;
    - ``feed_forward_block(x)``: the feed-forward network, then dropout.
    """

    def __init__(
        self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1, norm_first: bool = False, eps: float = 1e-5
    ) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.feed_forward = FeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2 = LayerNorm(d_model, eps), LayerNorm(d_model, eps)
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)

    def self_attention_block(self, x: Tensor, mask: Tensor | None) -> Tensor:
        out, _ = self.self_attn(query=x, key=x, value=x, mask=mask)
        return self.dropout1(out)  # (B, T, d_model)

    def feed_forward_block(self, x: Tensor) -> Tensor:
        return self.dropout2(self.feed_forward(x))  # (B, T, d_model)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        if self.norm_first:
            x = x + self.self_attention_block(self.norm1(x), mask)
            x = x + self.feed_forward_block(self.norm2(x))
        else:
            x = self.norm1(x + self.self_attention_block(x, mask))
            x = self.norm2(x + self.feed_forward_block(x))
        return x  # (B, T, d_model)

    @classmethod
    def from_torch(cls, layer: nn.TransformerEncoderLayer) -> EncoderLayer:
        """An equivalent layer with the weights of ``nn.TransformerEncoderLayer`` (ReLU, batch_first)."""
        return layer_from_torch(cls, layer, nn.TransformerEncoderLayer)


class LayerStack(nn.Module):
    """``n_layers`` layers applied in turn; pre-norm stacks end with one more ``LayerNorm``, because their
    layers leave the residual stream unnormalised (post-norm layers already end in a norm)."""

    def __init__(self, layers: Iterable[nn.Module], d_model: int, norm_first: bool) -> None:
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.norm: nn.Module = LayerNorm(d_model) if norm_first else nn.Identity()


class Encoder(LayerStack):
    """A stack of ``n_layers`` encoder layers: ``forward(x (B, T, d_model), mask)`` -> ``(B, T, d_model)``."""

    def __init__(
        self, d_model: int, n_heads: int, d_ff: int, n_layers: int, dropout: float = 0.1, norm_first: bool = False
    ) -> None:
        require_sizes("Encoder", n_layers=n_layers)
        layers = (EncoderLayer(d_model, n_heads, d_ff, dropout, norm_first) for _ in range(n_layers))
        super().__init__(layers, d_model, norm_first)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        for layer in self.layers:
            x = layer(x, mask)
        return self.norm(x)  # (B, T, d_model)
