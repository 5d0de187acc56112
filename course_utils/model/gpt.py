"""A GPT: the Transformer's decoder alone, trained to predict the next token (Radford et al. 2018, 2019).

Shape letters: B batch, T sequence length (at most ``block_size``), V vocabulary size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ..utils import require_sizes
from .attention import KVCache, MultiHeadAttention
from .causal_lm import CausalLM
from .layers import FeedForward, LayerNorm

__all__ = ["GPT", "GPTBlock", "GPTConfig"]


@dataclass(frozen=True)
class GPTConfig:
    """The sizes of a ``GPT``: ``GPT(vocab_size, **asdict(config))``. Defaults: nanoGPT's Shakespeare model."""

    block_size: int = 256  # the context: the most positions the model reads at once
    d_model: int = 384
    n_heads: int = 6
    n_layers: int = 6
    d_ff: int | None = None  # None: 4 * d_model
    dropout: float = 0.0
    bias: bool = True  # biases in the linear layers and LayerNorms (nanoGPT's Shakespeare model has none)


class GPTBlock(nn.Module):
    """A pre-norm decoder layer without cross-attention: x + CausalSelfAttn(LN(x)), then x + FFN(LN(x)).

    The two sublayers are ``self_attention_block(x, cache)`` and ``feed_forward_block(x)``, as in ``DecoderLayer``."""

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        bias: bool = True,
        activation: str = "gelu",
        norm_eps: float = 1e-5,
    ) -> None:
        super().__init__()
        self.norm1 = LayerNorm(d_model, eps=norm_eps, bias=bias)
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout, bias=bias)
        self.norm2 = LayerNorm(d_model, eps=norm_eps, bias=bias)
        self.feed_forward = FeedForward(d_model, d_ff, dropout=0.0, activation=activation, bias=bias)
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)

    def self_attention_block(self, x: Tensor, cache: KVCache | None = None) -> Tensor:
        attended, _ = self.self_attn(query=x, key=x, value=x, is_causal=True, cache=cache)
        return self.dropout1(attended)  # (B, T, d_model)

    def feed_forward_block(self, x: Tensor) -> Tensor:
        return self.dropout2(self.feed_forward(x))  # (B, T, d_model)

    def forward(self, x: Tensor, cache: KVCache | None = None) -> Tensor:
        x = x + self.self_attention_block(self.norm1(x), cache)
        return x + self.feed_forward_block(self.norm2(x))  # (B, T, d_model)


class GPT(CausalLM):
    """Token and learned position embeddings, ``n_layers`` causal pre-norm blocks, a final LayerNorm,
    and an output head whose weight is the token embedding (tied: the same matrix reads and writes tokens).

    ``forward(idx (B, T), targets (B, T) = None)`` returns ``(logits (B, T, V), loss or None)``.
    Initialisation as GPT-2: N(0, 0.02), with the projections that write into the residual stream
    scaled down by sqrt(2 * n_layers) so that the stream's variance does not grow with depth.
    """

    def __init__(
        self,
        vocab_size: int,
        block_size: int = 256,
        d_model: int = 384,
        n_heads: int = 6,
        n_layers: int = 6,
        d_ff: int | None = None,
        dropout: float = 0.0,
        bias: bool = True,
        activation: str = "gelu",
        norm_eps: float = 1e-5,
    ) -> None:
        super().__init__()
        require_sizes("GPT", vocab_size=vocab_size, block_size=block_size, n_layers=n_layers, d_ff=d_ff)
        self.vocab_size, self.block_size = vocab_size, block_size
        self.token_embed = nn.Embedding(vocab_size, d_model)
        self.position_embed = nn.Embedding(block_size, d_model)
        self.dropout = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(
            GPTBlock(d_model, n_heads, d_ff or 4 * d_model, dropout, bias, activation, norm_eps)
            for _ in range(n_layers)
        )
        self.norm = LayerNorm(d_model, eps=norm_eps, bias=bias)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        self.head.weight = self.token_embed.weight  # weight tying
        # the projections that write into the residual stream: attention's W^O and the feed-forward's second layer
        blocks: list[GPTBlock] = list(self.blocks)  # type: ignore[arg-type]  # a ModuleList of GPTBlocks
        residual = {id(p) for b in blocks for p in (b.self_attn.w_o.weight, b.feed_forward.w_2.weight)}
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n_layers) if id(p) in residual else 0.02)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def embed(self, idx: Tensor, past: int) -> Tensor:
        positions = torch.arange(past, past + idx.size(1), device=idx.device)  # (T,)
        return self.dropout(self.token_embed(idx) + self.position_embed(positions))  # (B, T, d_model)
