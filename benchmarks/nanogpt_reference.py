"""A reference GPT with the architecture of nanoGPT's ``model.py`` (Karpathy, MIT), written for this benchmark:
what the course's ``GPT`` is timed against.

Same function as ``course_utils.GPT`` with ``bias=False``: token and position embeddings, pre-norm blocks of causal
self-attention and a GELU MLP, a final LayerNorm, a head tied to the token embedding. It differs where nanoGPT is
built for speed: one fused ``c_attn`` projection for queries, keys and values (the course keeps the paper's
``w_q``, ``w_k``, ``w_v``), and no input checks.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class _LayerNorm(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x: Tensor) -> Tensor:
        return F.layer_norm(x, self.weight.shape, self.weight, None, 1e-5)


class _Block(nn.Module):
    def __init__(self, d: int, n_heads: int, dropout: float) -> None:
        super().__init__()
        self.n_heads, self.dropout = n_heads, dropout
        self.ln_1, self.ln_2 = _LayerNorm(d), _LayerNorm(d)
        self.c_attn = nn.Linear(d, 3 * d, bias=False)  # W^Q, W^K, W^V in one matrix
        self.attn_proj = nn.Linear(d, d, bias=False)
        self.c_fc, self.mlp_proj = nn.Linear(d, 4 * d, bias=False), nn.Linear(4 * d, d, bias=False)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2) for t in (q, k, v))  # (B, h, T, d_k)
        p = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)  # (B, h, T, d_k)
        x = x + self.drop(self.attn_proj(y.transpose(1, 2).reshape(B, T, C)))
        return x + self.drop(self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)))))


class ReferenceGPT(nn.Module):
    """``ReferenceGPT(vocab_size, block_size, d_model, n_heads, n_layers, dropout)``; ``forward(idx, targets)``
    returns ``(logits, loss)`` as ``course_utils.GPT`` does."""

    def __init__(
        self, vocab_size: int, block_size: int, d_model: int, n_heads: int, n_layers: int, dropout: float = 0.0
    ) -> None:
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab_size, d_model), nn.Embedding(block_size, d_model)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(_Block(d_model, n_heads, dropout) for _ in range(n_layers))
        self.ln_f = _LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        self.head.weight = self.wte.weight
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                std = 0.02 / (2 * n_layers) ** 0.5 if name.endswith("proj.weight") else 0.02
                nn.init.normal_(p, mean=0.0, std=std)

    def forward(self, idx: Tensor, targets: Tensor) -> tuple[Tensor, Tensor]:
        positions = torch.arange(idx.size(1), device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(positions))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        return logits, F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))
