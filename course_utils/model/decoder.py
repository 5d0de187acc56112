"""The decoder layer and stack (section 3.1 of the paper).

Shape letters: B batch, T target length, S source length. Masks are bool, True = may attend.
"""

from __future__ import annotations

from torch import Tensor, nn

from ..utils import require_sizes
from .attention import KVCache, MultiHeadAttention
from .convert_torch import layer_from_torch
from .encoder import LayerStack
from .layers import FeedForward, LayerNorm

__all__ = ["Decoder", "DecoderCache", "DecoderLayer"]


class DecoderCache:
    """What one decoder layer keeps between decoding steps: its self-attention's keys and values (one more
    position per step) and its cross-attention's (the memory's projections, computed at the first step)."""

    def __init__(self) -> None:
        self.self_attn = KVCache()
        self.cross_attn = KVCache(static=True)

    def __len__(self) -> int:
        return len(self.self_attn)  # the target positions decoded so far


def _check_cache_used(cache: DecoderCache, expected: int) -> None:
    """A sublayer that ignores its cache (an attention variant whose forward drops ``cache=``) would decode each new
    position as if it were the first: a wrong answer, silently. Refuse it instead."""
    if len(cache.self_attn) != expected or cache.cross_attn.keys is None:
        raise ValueError(
            "an attention module of this decoder layer ignored its cache (a subclass whose forward drops cache= or "
            "is_causal=?), so incremental decoding would be wrong: decode with use_cache=False, or pass both on"
        )


class DecoderLayer(nn.Module):
    r"""Masked self-attention, cross-attention over the encoder output, then a feed-forward network.

    ``forward(x (B, T, d_model), memory (B, S, d_model), src_mask, tgt_mask)`` -> ``(B, T, d_model)``.
    ``tgt_mask`` (usually ``target_mask(tgt, pad_id)``, ``(B, 1, T, T)``) keeps each position from
    seeing later ones. In cross-attention the **queries come from the decoder** (``x``) and the keys
    and values from ``memory``, masked with ``src_mask`` (``(B, 1, 1, S)``): each target position
    asks which source positions matter to it. Residuals and norms as in ``EncoderLayer``.

    Each sublayer is one method, for a subclass to override (chapter 05's and the bug lab's swapped
    cross-attention), as PyTorch's ``_sa_block``, ``_mha_block`` and ``_ff_block``; ``forward`` adds the
    residual connections and norms. ``cache`` is None except in incremental decoding (``Decoder.new_caches``):

    - ``self_attention_block(x, tgt_mask, cache)``: masked attention over the target, then dropout;
    - ``cross_attention_block(x, memory, src_mask, cache)``: queries from ``x``, keys and values from
      ``memory``, then dropout;
    - ``feed_forward_block(x)``: the feed-forward network, then dropout.
    """

    def __init__(
        self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1, norm_first: bool = False, eps: float = 1e-5
    ) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.feed_forward = FeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2, self.norm3 = (LayerNorm(d_model, eps) for _ in range(3))
        self.dropout1, self.dropout2, self.dropout3 = (nn.Dropout(dropout) for _ in range(3))

    def self_attention_block(self, x: Tensor, tgt_mask: Tensor | None, cache: KVCache | None = None) -> Tensor:
        if cache is None:
            out, _ = self.self_attn(query=x, key=x, value=x, mask=tgt_mask)
        else:  # x holds only the new positions; they see every cached one and themselves
            out, _ = self.self_attn(query=x, key=x, value=x, is_causal=True, cache=cache)
        return self.dropout1(out)  # (B, T, d_model)

    def cross_attention_block(
        self, x: Tensor, memory: Tensor, src_mask: Tensor | None, cache: KVCache | None = None
    ) -> Tensor:
        out, _ = self.cross_attn(query=x, key=memory, value=memory, mask=src_mask, cache=cache)
        return self.dropout2(out)  # (B, T, d_model): one output per target position

    def feed_forward_block(self, x: Tensor) -> Tensor:
        return self.dropout3(self.feed_forward(x))  # (B, T, d_model)

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        src_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
        cache: DecoderCache | None = None,
    ) -> Tensor:
        self_cache, cross_cache = (None, None) if cache is None else (cache.self_attn, cache.cross_attn)
        decoded = 0 if cache is None else len(cache)
        if self.norm_first:
            x = x + self.self_attention_block(self.norm1(x), tgt_mask, self_cache)
            x = x + self.cross_attention_block(self.norm2(x), memory, src_mask, cross_cache)
            x = x + self.feed_forward_block(self.norm3(x))
        else:
            x = self.norm1(x + self.self_attention_block(x, tgt_mask, self_cache))
            x = self.norm2(x + self.cross_attention_block(x, memory, src_mask, cross_cache))
            x = self.norm3(x + self.feed_forward_block(x))
        if cache is not None:
            _check_cache_used(cache, decoded + x.size(1))
        return x  # (B, T, d_model)

    @classmethod
    def from_torch(cls, layer: nn.TransformerDecoderLayer) -> DecoderLayer:
        """An equivalent layer with the weights of ``nn.TransformerDecoderLayer`` (ReLU, batch_first)."""
        return layer_from_torch(cls, layer, nn.TransformerDecoderLayer)


class Decoder(LayerStack):
    """A stack of ``n_layers`` decoder layers:
    ``forward(x (B, T, d_model), memory (B, S, d_model), src_mask, tgt_mask)`` -> ``(B, T, d_model)``.

    Incremental decoding: with ``caches`` (``new_caches()``, one ``DecoderCache`` per layer) ``x`` holds only
    the positions not decoded yet, usually one; the causal mask is then implied and ``tgt_mask`` must be None.
    """

    def __init__(
        self, d_model: int, n_heads: int, d_ff: int, n_layers: int, dropout: float = 0.1, norm_first: bool = False
    ) -> None:
        require_sizes("Decoder", n_layers=n_layers)
        layers = (DecoderLayer(d_model, n_heads, d_ff, dropout, norm_first) for _ in range(n_layers))
        super().__init__(layers, d_model, norm_first)

    def new_caches(self) -> list[DecoderCache]:
        """Empty caches for incremental decoding, one per layer."""
        return [DecoderCache() for _ in self.layers]

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        src_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
        caches: list[DecoderCache] | None = None,
    ) -> Tensor:
        if caches is not None and (tgt_mask is not None or len(caches) != len(self.layers)):
            raise ValueError(
                f"with caches, pass tgt_mask=None (the new positions see every earlier one) and one cache per "
                f"layer ({len(self.layers)}); got {len(caches)} caches"
                + (" and a tgt_mask" if tgt_mask is not None else "")
            )
        for i, layer in enumerate(self.layers):
            x = layer(x, memory, src_mask, tgt_mask, None if caches is None else caches[i])
        return self.norm(x)  # (B, T, d_model)
