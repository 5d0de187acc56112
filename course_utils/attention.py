"""Scaled dot-product attention and multi-head attention (Vaswani et al. 2017, section 3.2).

Shape letters: B batch, h = n_heads, T_q query length, T_k key/value length,
d_k = d_v = d_model // n_heads. Masks are bool, **True = may attend** (see ``masks``).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["KVCache", "MultiHeadAttention", "scaled_dot_product_attention"]


def check_mask(mask: Tensor, scores_shape: torch.Size) -> None:
    """Raise a clear error unless ``mask`` is bool and broadcasts to ``scores_shape``."""
    if mask.dtype != torch.bool:
        raise TypeError(
            f"mask must be a bool tensor with True = may attend; got dtype {mask.dtype}. "
            "From a 0/1 mask use mask.bool(); from an additive float mask (0 / -inf) use mask == 0."
        )
    try:
        fits = torch.broadcast_shapes(mask.shape, scores_shape) == scores_shape
    except RuntimeError:
        fits = False
    if not fits:
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not broadcast to the attention scores "
            f"{tuple(scores_shape)} = (..., T_q, T_k). padding_mask() gives (B, 1, 1, T_k) and "
            "causal_mask() gives (T, T)."
        )


def scaled_dot_product_attention(
    query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None, *, dropout_p: float = 0.0
) -> tuple[Tensor, Tensor]:
    r"""Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V, equation (1) of the paper.

    Args:
        query: ``(..., T_q, d_k)``; key: ``(..., T_k, d_k)``; value: ``(..., T_k, d_v)``.
        mask: bool, True = may attend, broadcastable to ``(..., T_q, T_k)``.
        dropout_p: dropout on the attention weights (pass 0 in evaluation).

    Returns:
        ``(output, weights)``: output ``(..., T_q, d_v)`` and the attention weights
        ``(..., T_q, T_k)`` (before dropout). Masked weights are exactly 0 and every row sums to 1,
        except a query row whose keys are *all* masked: it gets all-zero weights and a zero output,
        as ``F.scaled_dot_product_attention`` gives, instead of the NaN a plain softmax over
        ``-inf`` would produce.
    """
    if query.size(-1) != key.size(-1):
        raise ValueError(
            f"query and key must share their last dimension d_k; got query {tuple(query.shape)} "
            f"and key {tuple(key.shape)}"
        )
    if key.size(-2) != value.size(-2):
        raise ValueError(
            f"key and value must have the same length T_k (dimension -2); got key "
            f"{tuple(key.shape)} and value {tuple(value.shape)}"
        )
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))  # (..., T_q, T_k)
    if mask is not None:
        check_mask(mask, scores.shape)
        scores = scores.masked_fill(~mask, float("-inf"))
        no_key = ~mask.any(dim=-1, keepdim=True)  # (..., T_q, 1): rows with nothing to attend to
        scores = scores.masked_fill(no_key, 0.0)  # keeps their softmax finite (and gradients too)
    weights = scores.softmax(dim=-1)  # (..., T_q, T_k), each row sums to 1
    if mask is not None:
        weights = weights.masked_fill(no_key, 0.0)
    dropped = F.dropout(weights, dropout_p) if dropout_p > 0 else weights
    return dropped @ value, weights  # (..., T_q, d_v), (..., T_q, T_k)


def _divisibility_error(d_model: int, n_heads: int) -> ValueError:
    heads = [h for h in range(1, min(d_model, 16) + 1) if d_model % h == 0]
    models = sorted({max(n_heads, d_model // n_heads * n_heads), (d_model // n_heads + 1) * n_heads})
    return ValueError(
        f"d_model={d_model} is not divisible by n_heads={n_heads}: every head gets "
        f"d_model // n_heads dimensions. Use n_heads in {heads}, or a d_model that is a multiple "
        f"of {n_heads} (e.g. {' or '.join(map(str, models))})."
    )


class KVCache:
    """The keys and values one attention module has computed so far, ``(B, h, T_past, d_k)`` each.

    During generation each new token needs attention over all earlier ones; their keys and values do
    not change, so they are kept here and only the new token's are computed (see ``GPT.generate``).
    """

    def __init__(self) -> None:
        self.keys: Tensor | None = None
        self.values: Tensor | None = None

    def __len__(self) -> int:
        return 0 if self.keys is None else self.keys.size(2)

    def extend(self, keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
        """Append the new positions' keys and values; return all of them."""
        if self.keys is None:
            self.keys, self.values = keys, values
        else:
            self.keys = torch.cat([self.keys, keys], dim=2)  # (B, h, T_past + T_new, d_k)
            self.values = torch.cat([self.values, values], dim=2)
        return self.keys, self.values


class MultiHeadAttention(nn.Module):
    r"""MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O, head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V).

    The h per-head projections are stored as one ``nn.Linear(d_model, d_model)`` each for Q, K and
    V (``w_q``, ``w_k``, ``w_v``) whose outputs are split into heads; ``w_o`` is W^O.

    ``forward(query (B, T_q, d_model), key (B, T_k, d_model), value (B, T_k, d_model), mask)``
    returns ``(B, T_q, d_model)``; ``mask`` is bool (True = may attend) broadcastable to
    ``(B, n_heads, T_q, T_k)``. After each forward the weights ``(B, n_heads, T_q, T_k)`` are kept
    in ``.attn_weights`` for plotting, unless ``need_weights`` is False: then the fused
    ``F.scaled_dot_product_attention`` kernel computes the same output faster and
    ``.attn_weights`` is None (see ``fast_kernels``).

    ``is_causal=True`` lets query i see keys up to its own position. With a ``cache`` (a ``KVCache``),
    the keys and values of earlier calls are reused and the queries are the *last* positions, so the
    causal mask is aligned to the end: a single new query sees every cached key and itself.
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True) -> None:
        super().__init__()
        if not (isinstance(d_model, int) and isinstance(n_heads, int) and d_model > 0 and n_heads > 0):
            raise ValueError(f"d_model and n_heads must be positive ints; got {d_model!r}, {n_heads!r}")
        if d_model % n_heads:
            raise _divisibility_error(d_model, n_heads)
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1); got {dropout}")
        self.d_model, self.n_heads, self.d_k = d_model, n_heads, d_model // n_heads
        self.dropout = dropout
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        self.need_weights = True
        self.attn_weights: Tensor | None = None

    def _split_heads(self, x: Tensor) -> Tensor:
        B, T, _ = x.shape
        return x.view(B, T, self.n_heads, self.d_k).transpose(1, 2)  # (B, T, h, d_k) -> (B, h, T, d_k)

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        mask: Tensor | None = None,
        *,
        is_causal: bool = False,
        cache: KVCache | None = None,
    ) -> Tensor:
        for name, x in (("query", query), ("key", key), ("value", value)):
            if x.dim() != 3 or x.size(-1) != self.d_model:
                raise ValueError(f"{name} must have shape (B, T, d_model={self.d_model}); got {tuple(x.shape)}")
        if key.shape != value.shape or key.size(0) != query.size(0):
            raise ValueError(
                "key and value must have the same shape (B, T_k, d_model) and the batch size of query; "
                f"got query {tuple(query.shape)}, key {tuple(key.shape)}, value {tuple(value.shape)}"
            )
        q = self._split_heads(self.w_q(query))  # (B, h, T_q, d_k)
        k = self._split_heads(self.w_k(key))  # (B, h, T_k, d_k)
        v = self._split_heads(self.w_v(value))  # (B, h, T_k, d_k)
        if cache is not None:
            k, v = cache.extend(k, v)  # (B, h, T_past + T_k, d_k): earlier positions' keys and values too
        if is_causal:  # query i sees keys up to its own position
            T_q, T_k = q.size(2), k.size(2)
            if T_q != T_k and cache is None:
                raise ValueError(f"is_causal needs T_q == T_k; got T_q={T_q}, T_k={T_k}")
            if T_q == 1:  # one new query, at the end: it may see every key
                is_causal = False
            elif T_q != T_k or mask is not None or self.need_weights:
                causal = torch.ones(T_q, T_k, dtype=torch.bool, device=q.device).tril(diagonal=T_k - T_q)
                mask, is_causal = (causal if mask is None else mask & causal), False
        dropout_p = self.dropout if self.training else 0.0
        if self.need_weights:
            out, weights = scaled_dot_product_attention(q, k, v, mask, dropout_p=dropout_p)
            self.attn_weights = weights.detach()  # (B, h, T_q, T_k)
        else:  # fused kernel; with is_causal still set, it needs no mask tensor at all
            if mask is not None:
                check_mask(mask, torch.Size((q.size(0), self.n_heads, q.size(2), k.size(2))))
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal
            )  # (B, h, T_q, d_k)
            self.attn_weights = None
        B, _, T_q, _ = out.shape
        out = out.transpose(1, 2).reshape(B, T_q, self.d_model)  # (B, T_q, h * d_k): heads concatenated
        return self.w_o(out)  # (B, T_q, d_model)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, n_heads={self.n_heads}, d_k={self.d_k}, dropout={self.dropout}"

    @classmethod
    def from_torch(cls, module: nn.MultiheadAttention) -> MultiHeadAttention:
        """An equivalent ``MultiHeadAttention`` with the weights of a ``nn.MultiheadAttention``.

        torch packs W^Q, W^K, W^V into one ``in_proj_weight`` (3 * d_model, d_model); they are
        split into ``w_q``, ``w_k``, ``w_v``. Remember that torch's bool masks mean the opposite of
        ours: pass ``attn_mask=~mask`` (True = blocked) to the torch module.
        """
        if not isinstance(module, nn.MultiheadAttention):
            raise TypeError(f"from_torch expects nn.MultiheadAttention; got {type(module).__name__}")
        if not module._qkv_same_embed_dim:
            raise ValueError("cannot mirror nn.MultiheadAttention with kdim/vdim != embed_dim")
        if module.bias_k is not None or module.add_zero_attn:
            raise ValueError("cannot mirror nn.MultiheadAttention with add_bias_kv or add_zero_attn")
        bias = module.in_proj_bias is not None
        ours = cls(module.embed_dim, module.num_heads, dropout=module.dropout, bias=bias)
        ref = module.in_proj_weight
        ours.to(device=ref.device, dtype=ref.dtype)
        with torch.no_grad():
            for linear, weight in zip((ours.w_q, ours.w_k, ours.w_v), module.in_proj_weight.chunk(3)):
                linear.weight.copy_(weight)
            ours.w_o.weight.copy_(module.out_proj.weight)
            if bias:
                for linear, b in zip((ours.w_q, ours.w_k, ours.w_v), module.in_proj_bias.chunk(3)):
                    linear.bias.copy_(b)
                ours.w_o.bias.copy_(module.out_proj.bias)
        return ours.train(module.training)
