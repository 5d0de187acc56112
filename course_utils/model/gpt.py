"""A GPT: the Transformer's decoder alone, trained to predict the next token (Radford et al. 2018, 2019).

Shape letters: B batch, T sequence length (at most ``block_size``), V vocabulary size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..utils import eval_mode
from .attention import KVCache, MultiHeadAttention
from .layers import FeedForward, LayerNorm

__all__ = ["GPT", "CausalLM", "GPTBlock", "GPTConfig"]


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


class CausalLM(nn.Module):
    """What every decoder-only model of the course shares: ``generate``, with or without a ``KVCache`` per block.

    ``forward(idx (B, T), targets=None, caches=None)`` returns ``(logits (B, T, V), loss or None)``: the
    subclass's ``embed``, then its ``blocks`` (one cache each), ``norm`` and ``head``. ``block_size`` caps the
    positions.
    """

    blocks: nn.ModuleList
    block_size: int
    norm: nn.Module
    head: nn.Linear

    def embed(self, idx: Tensor, past: int) -> Tensor:
        """The input vectors ``(B, T, d_model)`` of token ids ``idx`` ``(B, T)`` at positions ``past, past + 1, ...``."""
        raise NotImplementedError

    def layer_inputs(self, idx: Tensor, past: int) -> dict[str, Any]:
        """What every block reads besides its input and its cache, computed once per forward (``Llama``: the
        rotary angles of the positions) and passed to each block by keyword. None for the GPT."""
        return {}

    def forward(
        self, idx: Tensor, targets: Tensor | None = None, caches: list[KVCache] | None = None
    ) -> tuple[Tensor, Tensor | None]:
        if idx.dim() != 2 or idx.is_floating_point():
            raise ValueError(f"idx must be token ids of shape (B, T); got {idx.dtype} {tuple(idx.shape)}")
        past = len(caches[0]) if caches else 0
        if past + idx.size(1) > self.block_size:
            raise ValueError(
                f"{past + idx.size(1)} positions exceed block_size={self.block_size}; crop the input (generate does)"
            )
        x = self.embed(idx, past)  # (B, T, d_model)
        shared = self.layer_inputs(idx, past)
        for i, block in enumerate(self.blocks):
            x = block(x, caches[i] if caches else None, **shared)
        logits = self.head(self.norm(x))  # (B, T, V)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))
        return logits, loss

    @torch.no_grad()
    def generate(
        self,
        idx: Tensor,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: int | None = None,
        use_cache: bool = True,
        generator: torch.Generator | None = None,
    ) -> Tensor:
        """Extend ``idx`` ``(B, T)`` by ``max_new_tokens`` sampled tokens; returns ``(B, T + max_new_tokens)``.

        Each step divides the last logits by ``temperature`` (0 means always take the most likely token),
        keeps only the ``top_k`` most likely tokens if given, and samples from the softmax.
        With ``use_cache`` the keys and values of earlier positions are reused (``KVCache``), so each step
        processes one token instead of the whole context. Once the text outgrows ``block_size``, the
        window slides and every position changes place, so each step recomputes the cropped window, as
        without a cache. Both ways produce the same tokens. Runs in eval mode and restores the mode.
        """
        if temperature < 0 or (top_k is not None and top_k < 1):
            raise ValueError(f"need temperature >= 0 and top_k >= 1 or None; got {temperature}, {top_k}")
        with eval_mode(self):
            caches = None
            for _ in range(max_new_tokens):
                if use_cache and idx.size(1) < self.block_size:
                    if caches is None:  # first step: the whole prompt fills the caches
                        caches = [KVCache() for _ in self.blocks]
                        logits, _ = self(idx, caches=caches)
                    else:  # later steps: only the newest token
                        logits, _ = self(idx[:, -1:], caches=caches)
                else:
                    caches = None
                    logits, _ = self(idx[:, -self.block_size :])
                next_token = self._sample(logits[:, -1], temperature, top_k, generator)  # (B, 1)
                idx = torch.cat([idx, next_token], dim=1)
        return idx

    @staticmethod
    def _sample(logits: Tensor, temperature: float, top_k: int | None, generator: torch.Generator | None) -> Tensor:
        if temperature == 0:
            return logits.argmax(dim=-1, keepdim=True)
        logits = logits / temperature  # (B, V)
        if top_k is not None:
            kth = torch.topk(logits, min(top_k, logits.size(-1))).values[:, -1:]  # (B, 1): the k-th largest
            logits = logits.masked_fill(logits < kth, float("-inf"))
        probs = logits.softmax(dim=-1)
        return torch.multinomial(probs, num_samples=1, generator=generator)  # (B, 1)


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
