"""A Llama-style decoder-only model (Touvron et al. 2023): chapter 07's GPT with the choices of recent models.

What changes from ``GPT``, one piece each:

- RMSNorm instead of LayerNorm (``layers.RMSNorm``), still before each sublayer (pre-norm);
- rotary positions inside attention instead of learned position embeddings (``positional.apply_rotary``);
- grouped-query attention: fewer key/value heads than query heads (``attention.GroupedQueryAttention``);
- a gated SwiGLU feed-forward network instead of GELU (``layers.SwiGLU``);
- no biases anywhere, and an output head of its own (not tied to the token embedding) unless ``tie_embeddings``.

Shape letters: B batch, T sequence length (at most ``block_size``), V vocabulary size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from ..utils import require_sizes
from .attention import GroupedQueryAttention, KVCache
from .causal_lm import CausalLM
from .layers import RMSNorm, SwiGLU
from .positional import rotary_angles

__all__ = ["Llama", "LlamaBlock", "LlamaConfig", "swiglu_hidden_size"]


def swiglu_hidden_size(d_model: int, multiple_of: int = 32) -> int:
    """Llama's rule for ``d_ff``: 2/3 of 4 d_model, so that SwiGLU's three matrices hold about as many weights as a
    GELU network's two at 4 d_model, rounded up to a multiple of ``multiple_of``."""
    return multiple_of * math.ceil(8 * d_model / 3 / multiple_of)


@dataclass(frozen=True)
class LlamaConfig:
    """The sizes of a ``Llama``: ``Llama(vocab_size, **asdict(config))``."""

    block_size: int = 256  # the longest context generate keeps (rotary positions themselves have no table)
    d_model: int = 384
    n_heads: int = 6
    n_kv_heads: int | None = None  # None: n_heads (multi-head attention); fewer: grouped-query attention
    n_layers: int = 6
    d_ff: int | None = None  # None: swiglu_hidden_size(d_model)
    rope_theta: float = 10000.0
    norm_eps: float = 1e-6
    tie_embeddings: bool = False
    dropout: float = 0.0


class LlamaBlock(nn.Module):
    """x + GQA(RMSNorm(x)), then x + SwiGLU(RMSNorm(x)): ``GPTBlock``'s layout with Llama's parts."""

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        n_kv_heads: int | None,
        d_ff: int,
        rope_theta: float = 10000.0,
        norm_eps: float = 1e-6,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.norm1 = RMSNorm(d_model, eps=norm_eps)
        self.self_attn = GroupedQueryAttention(d_model, n_heads, n_kv_heads, rope_theta, dropout)
        self.norm2 = RMSNorm(d_model, eps=norm_eps)
        self.feed_forward = SwiGLU(d_model, d_ff)
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(self, x: Tensor, cache: KVCache | None = None, rotary: tuple[Tensor, Tensor] | None = None) -> Tensor:
        """``rotary``: the cosines and sines of the positions (``rotary_angles``), shared by every block."""
        attended, _ = self.self_attn(self.norm1(x), cache, rotary=rotary)
        x = x + self.dropout1(attended)
        return x + self.dropout2(self.feed_forward(self.norm2(x)))  # (B, T, d_model)


class Llama(CausalLM):
    """Token embeddings (no position embeddings: rotary positions act inside attention), ``n_layers`` ``LlamaBlock``,
    a final RMSNorm and an untied output head.

    ``forward(idx (B, T), targets (B, T) = None, caches=None)`` returns ``(logits (B, T, V), loss or None)`` and
    ``generate`` is ``GPT``'s, KV cache included. Initialisation as ``GPT``: N(0, 0.02), the projections that write
    into the residual stream scaled down by sqrt(2 n_layers); RMSNorm scales at 1.
    """

    def __init__(
        self,
        vocab_size: int,
        block_size: int = 256,
        d_model: int = 384,
        n_heads: int = 6,
        n_kv_heads: int | None = None,
        n_layers: int = 6,
        d_ff: int | None = None,
        rope_theta: float = 10000.0,
        norm_eps: float = 1e-6,
        tie_embeddings: bool = False,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        require_sizes("Llama", vocab_size=vocab_size, block_size=block_size, n_layers=n_layers, d_ff=d_ff)
        self.vocab_size, self.block_size = vocab_size, block_size
        self.token_embed = nn.Embedding(vocab_size, d_model)
        self.dropout = nn.Dropout(dropout)
        d_ff = d_ff or swiglu_hidden_size(d_model)
        self.blocks = nn.ModuleList(
            LlamaBlock(d_model, n_heads, n_kv_heads, d_ff, rope_theta, norm_eps, dropout) for _ in range(n_layers)
        )
        self.norm = RMSNorm(d_model, eps=norm_eps)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        if tie_embeddings:
            self.head.weight = self.token_embed.weight
        blocks: list[LlamaBlock] = list(self.blocks)  # type: ignore[arg-type]  # a ModuleList of LlamaBlocks
        residual = {id(p) for b in blocks for p in (b.self_attn.w_o.weight, b.feed_forward.w_down.weight)}
        for p in self.parameters():
            if p.dim() >= 2:
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n_layers) if id(p) in residual else 0.02)

    def embed(self, idx: Tensor, past: int) -> Tensor:
        return self.dropout(self.token_embed(idx))  # (B, T, d_model): positions enter inside attention

    def layer_inputs(self, idx: Tensor, past: int) -> dict[str, Any]:
        """The rotary angles of positions ``past ... past + T - 1``, once for every block (not once per layer), with
        the head size and ``rope_theta`` of the blocks' attention (the same in every block)."""
        attention: GroupedQueryAttention = self.blocks[0].self_attn  # type: ignore[assignment]
        positions = torch.arange(past, past + idx.size(1), device=idx.device)  # (T,)
        return {"rotary": rotary_angles(positions, attention.d_k, attention.rope_theta)}  # cos, sin: (T, d_k/2) each
