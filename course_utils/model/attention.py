"""Scaled dot-product attention and multi-head attention (Vaswani et al. 2017, section 3.2).

Shape letters: B batch, h = n_heads, T_q query length, T_k key/value length,
d_k = d_v = d_model // n_heads. Masks are bool, **True = may attend** (see ``masks``).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Generator
from typing import Any, TypeGuard

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.modules import module as _module_hooks

from .convert_torch import course_state_dict
from .positional import rotary_angles, rotate

__all__ = [
    "GroupedQueryAttention",
    "KVCache",
    "MultiHeadAttention",
    "expand_kv",
    "packed_linear",
    "record_attention",
    "scaled_dot_product_attention",
]


# PyTorch 2.11 runs F.scaled_dot_product_attention through cuDNN first on Hopper GPUs (H100, H200). Given an explicit
# mask, that kernel failed in the course's own GPU run (a mask broadcast over the keys: "mha_graph.execute(...)
# .is_good()" in the backward pass, then "misaligned address" on every later CUDA call). It also builds a plan for
# each new pair of lengths (in that run the first steps of chapter 08's translator, whose batches vary in length,
# took seconds each, which such plans would explain). A call with a mask therefore leaves cuDNN out: the
# memory-efficient kernel (or the plain math) computes it.
# Calls without a mask (the GPT's causal attention) keep PyTorch's own choice.
_MASKED_BACKENDS = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
_CUDNN_DEVICES = ("cuda",)  # where PyTorch may pick cuDNN (a test puts "cpu" here to take the branch without a GPU)


def _fused_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, dropout_p: float, is_causal: bool) -> Tensor:
    """``F.scaled_dot_product_attention``, without cuDNN's kernel when a mask is given on a GPU (see above)."""
    if mask is None or q.device.type not in _CUDNN_DEVICES:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal)
    with sdpa_kernel(_MASKED_BACKENDS):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal)


def validate_mask(mask: Tensor, scores_shape: torch.Size) -> None:
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
    if mask is None:
        weights = scores.softmax(dim=-1)  # (..., T_q, T_k), each row sums to 1
    else:
        validate_mask(mask, scores.shape)
        scores = scores.masked_fill(~mask, float("-inf"))
        no_key = ~mask.any(dim=-1, keepdim=True)  # (..., T_q, 1): rows with nothing to attend to
        scores = scores.masked_fill(no_key, 0.0)  # keeps their softmax finite (and gradients too)
        weights = scores.softmax(dim=-1).masked_fill(no_key, 0.0)
    dropped = F.dropout(weights, dropout_p) if dropout_p > 0 else weights
    return dropped @ value, weights  # (..., T_q, d_v), (..., T_q, T_k)


def packed_linear(x: Tensor, *layers: nn.Module) -> tuple[Tensor, ...]:
    r"""``tuple(layer(x) for layer in layers)``, computed as one matrix product while training: the layers' weights
    stacked into one ``(sum of d_out, d_in)`` matrix (and their biases into one vector), the result split after.

    Output feature j of ``x W^T + b`` is the dot product of ``x`` with row j of ``W`` (plus ``b_j``): the first
    layer's features come from its own rows, the next layer's from its rows, and so on, so stacking the weights
    changes no value. It is the same function with one matrix product instead of three in the forward pass and, in
    the backward pass, one weight-gradient product instead of three: what nanoGPT's ``c_attn`` and PyTorch's
    ``in_proj_weight`` compute for queries, keys and values. The parameters stay three layers under their own names.

    Without gradients (generation, one token at a time) the stacking would copy the weights at every call for a
    product too small to gain from it, so the layers run one by one; so do layers that are not plain ``nn.Linear`` (a
    subclass, an adapter), whose ``forward`` was replaced or that a hook watches, so that what they add still
    happens, and layers whose weights differ in dtype or device, or of which only some have a bias.
    """
    linears = [layer for layer in layers if _plain_linear(layer)]
    biases: list[Tensor] = [layer.bias for layer in linears if layer.bias is not None]
    alike = len({(layer.weight.dtype, layer.weight.device) for layer in linears}) == 1
    if not torch.is_grad_enabled() or len(linears) < len(layers) or not alike or len(biases) not in (0, len(linears)):
        return tuple(layer(x) for layer in layers)
    weight = torch.cat([layer.weight for layer in linears])  # (sum of d_out, d_in): the weights stacked
    bias = torch.cat(biases) if biases else None  # (sum of d_out,)
    return F.linear(x, weight, bias).split([layer.out_features for layer in linears], dim=-1)


def _plain_linear(layer: nn.Module) -> TypeGuard[nn.Linear]:
    """An ``nn.Linear`` itself (not a subclass), with its own ``forward``, that no hook of its own or of every module
    watches."""
    hooks = (
        layer._forward_hooks,  # pyright: ignore[reportPrivateUsage]
        layer._forward_pre_hooks,  # pyright: ignore[reportPrivateUsage]
        layer._backward_hooks,  # pyright: ignore[reportPrivateUsage]
        layer._backward_pre_hooks,  # pyright: ignore[reportPrivateUsage]
        _module_hooks._global_forward_hooks,  # pyright: ignore[reportPrivateUsage]
        _module_hooks._global_forward_pre_hooks,  # pyright: ignore[reportPrivateUsage]
        _module_hooks._global_backward_hooks,  # pyright: ignore[reportPrivateUsage]
        _module_hooks._global_backward_pre_hooks,  # pyright: ignore[reportPrivateUsage]
    )
    return type(layer) is nn.Linear and "forward" not in vars(layer) and not any(hooks)


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

    ``static=True`` is for cross-attention, whose keys and values come from the encoder's memory and are
    the same at every step: they are computed at the first call and reused, never extended. Such a cache
    belongs to the memory it was filled from: given another one (a new batch of sentences), it raises
    instead of answering with the old sentences' keys and values.
    """

    def __init__(self, static: bool = False) -> None:
        self.static = static
        self.keys: Tensor | None = None
        self.values: Tensor | None = None
        self.memory: Tensor | None = None  # static: the tensor the keys and values were computed from

    def __len__(self) -> int:
        """The positions whose keys and values are kept (for a static cache, the memory's length S)."""
        return 0 if self.keys is None else self.keys.size(2)

    def _expect(self, static: bool, method: str) -> None:
        if self.static != static:
            kind = "a static (cross-attention) cache" if static else "a growing (self-attention) cache"
            raise ValueError(f"KVCache.{method} is for {kind}; this one has static={self.static}")

    def extend(self, keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
        """Append the new positions' keys and values; return all of them."""
        self._expect(False, "extend")
        if self.keys is None or self.values is None:
            self.keys, self.values = keys, values
        elif keys.size(0) != self.keys.size(0):
            raise ValueError(
                f"this cache holds the keys and values of {self.keys.size(0)} sequences; got {keys.size(0)}: a cache "
                "serves one batch. Call new_caches() again for each new batch."
            )
        else:
            self.keys = torch.cat([self.keys, keys], dim=2)  # (B, h, T_past + T_new, d_k)
            self.values = torch.cat([self.values, values], dim=2)
        return self.keys, self.values

    def store(self, memory: Tensor, keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
        """Static: keep the keys and values computed from ``memory`` ``(B, S, d_model)``; return them."""
        self._expect(True, "store")
        self.memory, self.keys, self.values = memory, keys, values
        return keys, values

    def lookup(self, memory: Tensor) -> tuple[Tensor, Tensor] | None:
        """Static: the keys and values stored for ``memory``; None while nothing is stored; an error if they
        were computed from another tensor (compared by identity: pass the same memory tensor at every step)."""
        self._expect(True, "lookup")
        if self.memory is None or self.keys is None or self.values is None:
            return None
        if memory is not self.memory:
            raise ValueError(
                f"this cross-attention cache holds the keys and values of another memory ({_batch_and_length(self.memory)}"
                f"; now {_batch_and_length(memory)}): a cache serves one batch of sources. Call new_caches() again "
                "for each new batch, and pass the same memory tensor at every step."
            )
        return self.keys, self.values

    def reorder(self, index: Tensor) -> None:
        """Keep the rows ``index`` ``(B',)`` of the batch, in that order (beam search: each new hypothesis takes
        its parent's keys and values)."""
        if self.keys is not None and self.values is not None:
            self.keys, self.values = self.keys[index], self.values[index]


def _batch_and_length(memory: Tensor) -> str:
    return f"B={memory.size(0)}, S={memory.size(1)}" if memory.dim() == 3 else f"shape {tuple(memory.shape)}"


class MultiHeadAttention(nn.Module):
    r"""MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O, head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V).

    The h per-head projections are stored as one ``nn.Linear(d_model, d_model)`` each for Q, K and
    V (``w_q``, ``w_k``, ``w_v``) whose outputs are split into heads; ``w_o`` is W^O. Where query, key and value
    are one tensor (self-attention) and gradients are on, the three run as one matrix product (``packed_linear``),
    the same function.

    ``forward(query (B, T_q, d_model), key (B, T_k, d_model), value (B, T_k, d_model), mask)`` returns
    ``(output, weights)`` as ``nn.MultiheadAttention`` does: output ``(B, T_q, d_model)``, and the per-head
    weights ``(B, n_heads, T_q, T_k)`` only when ``need_weights=True`` (else None). ``mask`` is bool
    (True = may attend) and broadcasts to ``(B, n_heads, T_q, T_k)``; a 3-axis mask whose first axis is the batch's
    (a mask per sequence without the head axis) is refused, since it would meet the heads.

    Two paths compute the same function (the tests hold them equal): by default PyTorch's fused
    ``F.scaled_dot_product_attention``, which never builds the ``(T_q, T_k)`` weights, so it is faster and
    lighter; with ``need_weights=True`` the readable ``scaled_dot_product_attention`` of this module, whose
    weights are returned for plotting. ``record_attention(model)`` asks every attention module of a model
    for its weights.

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

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        mask: Tensor | None = None,
        *,
        need_weights: bool = False,
        is_causal: bool = False,
        cache: KVCache | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        self._validate(query, key, value)
        q, k, v = self._project(query, key, value, cache)  # (B, h, T_q, d_k), (B, h, T_k, d_k) twice
        cached = cache is not None
        attn_mask, causal_kernel = self._attention_mask(mask, is_causal, q, k, cached=cached, explicit=need_weights)
        dropout_p = self.dropout if self.training else 0.0
        if need_weights:  # the readable path, keeping the weights
            out, weights = scaled_dot_product_attention(q, k, v, attn_mask, dropout_p=dropout_p)
        else:  # the fused kernel: the same function, without materialising the weights
            out, weights = _fused_attention(q, k, v, attn_mask, dropout_p, causal_kernel), None
        out = out.transpose(1, 2).reshape(out.size(0), q.size(2), self.d_model)  # (B, T_q, h * d_k): heads side by side
        return self.w_o(out), weights  # (B, T_q, d_model), (B, h, T_q, T_k) or None

    def _validate(self, query: Tensor, key: Tensor, value: Tensor) -> None:
        for name, x in (("query", query), ("key", key), ("value", value)):
            if x.dim() != 3 or x.size(-1) != self.d_model:
                raise ValueError(f"{name} must have shape (B, T, d_model={self.d_model}); got {tuple(x.shape)}")
        if key.shape != value.shape or key.size(0) != query.size(0):
            raise ValueError(
                "key and value must have the same shape (B, T_k, d_model) and the batch size of query; "
                f"got query {tuple(query.shape)}, key {tuple(key.shape)}, value {tuple(value.shape)}"
            )

    def _project(self, query: Tensor, key: Tensor, value: Tensor, cache: KVCache | None) -> tuple[Tensor, ...]:
        """Queries, keys and values split into heads, ``(B, h, T, d_k)`` each; keys and values taken from or added
        to ``cache``. Where the inputs are one tensor (``query is key is value``), one matrix product computes what
        ``w_q``, ``w_k``, ``w_v`` would (``packed_linear``), as ``nn.MultiheadAttention`` does: the same function,
        fewer operations."""
        stored = cache.lookup(key) if cache is not None and cache.static else None
        if stored is not None:  # cross-attention after the first step: the memory's keys and values, kept
            return self._split_heads(self.w_q(query)), *stored
        if query is key and key is value:  # self-attention
            q, k, v = packed_linear(query, self.w_q, self.w_k, self.w_v)
        elif key is value:  # cross-attention: keys and values from the same memory
            q, (k, v) = self.w_q(query), packed_linear(key, self.w_k, self.w_v)
        else:
            q, k, v = self.w_q(query), self.w_k(key), self.w_v(value)
        q, k, v = self._split_heads(q), self._split_heads(k), self._split_heads(v)  # (B, h, T, d_k) each
        if cache is not None and cache.static:
            k, v = cache.store(key, k, v)
        elif cache is not None:
            k, v = cache.extend(k, v)  # (B, h, T_past + T_k, d_k): earlier positions' keys and values too
        return q, k, v

    def _split_heads(self, x: Tensor) -> Tensor:
        B, T, _ = x.shape
        return x.view(B, T, self.n_heads, self.d_k).transpose(1, 2)  # (B, T, h, d_k) -> (B, h, T, d_k)

    def _attention_mask(
        self, mask: Tensor | None, is_causal: bool, q: Tensor, k: Tensor, *, cached: bool, explicit: bool
    ) -> tuple[Tensor | None, bool]:
        """The bool mask to pass on (True = may attend), and whether the fused kernel should apply the causal
        triangle itself. A triangle tensor is built only where it is needed."""
        B, T_q, T_k = q.size(0), q.size(2), k.size(2)
        if mask is not None and mask.dim() == 3 and mask.size(0) == B > 1:
            # (X, T_q, T_k) lines X up with the heads of (B, h, T_q, T_k): a mask per sequence, with B == h, would be
            # applied to the heads silently (with B != h it fails to broadcast; X == h != B is a mask per head)
            raise ValueError(
                f"mask of shape {tuple(mask.shape)} has 3 axes, the first of the batch's size {B}: it would line up "
                "with the heads of the scores (B, h, T_q, T_k), not with the batch. One mask per sequence: "
                "mask[:, None], (B, 1, T_q, T_k); one per head: mask[None], (1, h, T_q, T_k). (nn.MultiheadAttention "
                "reads a 3-axis mask as (B * h, T_q, T_k), True = blocked: from one, (~mask).view(B, h, T_q, T_k).)"
            )
        if is_causal and not cached and T_q != T_k:
            raise ValueError(f"is_causal needs T_q == T_k; got T_q={T_q}, T_k={T_k}")
        if not is_causal or T_q == 1:
            # No order to respect: the mask as given. (One query at the end of a causal sequence sees every key.)
            attn_mask, causal_kernel = mask, False
        elif T_q == T_k and mask is None and not explicit:
            # Plain causal self-attention: the fused kernel applies the triangle itself, no mask tensor needed.
            return None, True
        else:
            # Causal with padding, weights to return, or new queries after cached keys: an explicit triangle,
            # shifted so that the T_q queries are the last T_q of the T_k positions.
            triangle = torch.ones(T_q, T_k, dtype=torch.bool, device=q.device).tril(diagonal=T_k - T_q)
            attn_mask, causal_kernel = (triangle if mask is None else mask & triangle), False
        if attn_mask is not None and not explicit:  # the readable path checks its mask itself
            validate_mask(attn_mask, torch.Size((B, self.n_heads, T_q, T_k)))
        return attn_mask, causal_kernel

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
        if module.kdim != module.embed_dim or module.vdim != module.embed_dim:
            raise ValueError("cannot mirror nn.MultiheadAttention with kdim/vdim != embed_dim")
        if module.bias_k is not None or module.add_zero_attn:
            raise ValueError("cannot mirror nn.MultiheadAttention with add_bias_kv or add_zero_attn")
        ours = cls(module.embed_dim, module.num_heads, dropout=module.dropout, bias=module.in_proj_bias is not None)
        ours.to(device=module.in_proj_weight.device, dtype=module.in_proj_weight.dtype)
        ours.load_state_dict(course_state_dict(module.state_dict()))  # in_proj_weight split into w_q, w_k, w_v
        return ours.train(module.training)


def expand_kv(x: Tensor, n_rep: int) -> Tensor:
    """Each of the g key (or value) heads of ``x`` ``(B, g, T, d_k)`` repeated for the ``n_rep`` query heads it
    serves, next to each other: ``(B, g * n_rep, T, d_k)`` with heads 0, 0, 1, 1, ... for ``n_rep`` = 2.

    Query head j reads key head j // n_rep, as in Llama (``repeat_interleave``, not ``repeat``, whose order 0, 1,
    0, 1 would give query head j the key head j % g). A view (``expand``) then one copy (``reshape``)."""
    if n_rep == 1:
        return x
    if n_rep < 1:
        raise ValueError(f"n_rep is how many query heads share each key head, at least 1; got {n_rep}")
    B, g, T, d_k = x.shape
    return x[:, :, None].expand(B, g, n_rep, T, d_k).reshape(B, g * n_rep, T, d_k)


class GroupedQueryAttention(nn.Module):
    r"""Causal self-attention as in Llama: rotary positions, and ``n_kv_heads`` key/value heads shared by the
    ``n_heads`` query heads in groups of ``n_heads // n_kv_heads`` (grouped-query attention, Ainslie et al. 2023).

    ``n_kv_heads = n_heads`` is multi-head attention; ``n_kv_heads = 1`` is multi-query attention. The keys and
    values, and so a ``KVCache``, hold ``n_kv_heads`` heads ``(B, n_kv_heads, T, d_k)``: that is what grouping saves.
    Projections ``w_q`` ``(d_model -> n_heads d_k)``, ``w_k`` and ``w_v`` ``(d_model -> n_kv_heads d_k)``, ``w_o``;
    no biases unless ``bias=True``. Rotary embeddings (``apply_rotary``, with ``rotary_pairing``, ``"halves"`` as in
    Hugging Face's Llama) turn queries and keys by their positions, counted from the cache's length.

    ``forward(x (B, T, d_model), cache=None, need_weights=False)`` returns ``(output (B, T, d_model), weights)``,
    the weights ``(B, n_heads, T, T_past + T)`` only with ``need_weights`` (the readable path), as
    ``MultiHeadAttention`` does; otherwise PyTorch's fused ``F.scaled_dot_product_attention``.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        n_kv_heads: int | None = None,
        rope_theta: float = 10000.0,
        dropout: float = 0.0,
        bias: bool = False,
    ) -> None:
        super().__init__()
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        if not all(isinstance(n, int) and n > 0 for n in (d_model, n_heads, n_kv_heads)):
            raise ValueError(
                f"d_model, n_heads and n_kv_heads must be positive ints; got {d_model!r}, {n_heads!r}, {n_kv_heads!r}"
            )
        if d_model % n_heads:
            raise _divisibility_error(d_model, n_heads)
        if n_heads % n_kv_heads:
            options = [g for g in range(1, n_heads + 1) if n_heads % g == 0]
            raise ValueError(
                f"n_heads={n_heads} is not divisible by n_kv_heads={n_kv_heads}: each key/value head serves the same "
                f"number of query heads. Use n_kv_heads in {options}."
            )
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1); got {dropout}")
        self.d_model, self.n_heads, self.n_kv_heads = d_model, n_heads, n_kv_heads
        self.d_k, self.rope_theta, self.dropout = d_model // n_heads, rope_theta, dropout
        self.rotary_pairing = "halves"  # as Hugging Face's Llama; "interleaved" pairs (2i, 2i+1), see apply_rotary
        if self.d_k % 2:
            raise ValueError(f"rotary embeddings need an even head size; d_model // n_heads = {self.d_k}")
        self.w_q = nn.Linear(d_model, n_heads * self.d_k, bias=bias)
        self.w_k = nn.Linear(d_model, n_kv_heads * self.d_k, bias=bias)
        self.w_v = nn.Linear(d_model, n_kv_heads * self.d_k, bias=bias)
        self.w_o = nn.Linear(n_heads * self.d_k, d_model, bias=bias)

    def forward(
        self,
        x: Tensor,
        cache: KVCache | None = None,
        *,
        need_weights: bool = False,
        rotary: tuple[Tensor, Tensor] | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """``rotary``: the cosines and sines ``(T, d_k/2)`` of this call's positions (``rotary_angles``), which a
        model computes once for all its layers; None: computed here."""
        if x.dim() != 3 or x.size(-1) != self.d_model:
            raise ValueError(f"x must have shape (B, T, d_model={self.d_model}); got {tuple(x.shape)}")
        B, T, _ = x.shape
        q = self.w_q(x).view(B, T, self.n_heads, self.d_k).transpose(1, 2)  # (B, h, T, d_k)
        k = self.w_k(x).view(B, T, self.n_kv_heads, self.d_k).transpose(1, 2)  # (B, g, T, d_k), g = n_kv_heads
        v = self.w_v(x).view(B, T, self.n_kv_heads, self.d_k).transpose(1, 2)  # (B, g, T, d_k)
        if rotary is None:
            past = len(cache) if cache is not None else 0
            positions = torch.arange(past, past + T, device=x.device)  # (T,): after the cached positions
            rotary = rotary_angles(positions, self.d_k, self.rope_theta)
        q = rotate(q, *rotary, self.rotary_pairing)  # (B, h, T, d_k), turned by position
        k = rotate(k, *rotary, self.rotary_pairing)
        if cache is not None:
            k, v = cache.extend(k, v)  # (B, g, T_past + T, d_k): the cache keeps g heads, not h
        n_rep = self.n_heads // self.n_kv_heads
        k, v = expand_kv(k, n_rep), expand_kv(v, n_rep)  # (B, h, T_k, d_k): each key head for its group
        T_k = k.size(2)
        dropout_p = self.dropout if self.training else 0.0
        plain = T == T_k and T > 1  # no cache: the fused kernel applies the causal triangle itself
        # Otherwise the T new queries are the last T of the T_k positions: query i sees keys up to T_k - T + i
        # (one query sees them all: no mask). The triangle is built only where it is used.
        explicit = T > 1 and (need_weights or not plain)
        triangle = torch.ones(T, T_k, dtype=torch.bool, device=x.device).tril(diagonal=T_k - T) if explicit else None
        if need_weights:
            out, weights = scaled_dot_product_attention(q, k, v, triangle, dropout_p=dropout_p)
        else:
            out, weights = _fused_attention(q, k, v, triangle, dropout_p, plain), None
        out = out.transpose(1, 2).reshape(B, T, self.n_heads * self.d_k)  # (B, T, h * d_k): heads concatenated
        return self.w_o(out), weights  # (B, T, d_model), (B, h, T, T_k) or None

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, n_heads={self.n_heads}, n_kv_heads={self.n_kv_heads}, d_k={self.d_k}, "
            f"rope_theta={self.rope_theta}"
        )


@contextlib.contextmanager
def record_attention(model: nn.Module) -> Generator[dict[str, Tensor], None, None]:
    """Within the block, every ``MultiHeadAttention`` (or ``GroupedQueryAttention``) inside ``model`` is called with ``need_weights=True``,
    and its weights ``(B, n_heads, T_q, T_k)`` of the latest call are kept in the yielded dict under the
    module's name (as ``model.named_modules()`` gives it, e.g. ``"decoder.layers.1.cross_attn"``).

    >>> with record_attention(model) as attention:  # doctest: +SKIP
    ...     model(src, tgt, src_mask, tgt_mask)
    >>> attention["decoder.layers.1.cross_attn"].shape  # doctest: +SKIP

    Outside the block nothing is recorded and attention runs its fused kernel again.
    """
    recorded: dict[str, Tensor] = {}
    handles = []

    def ask_for_weights(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any]:
        return args, {**kwargs, "need_weights": True}

    def keeper(name: str) -> Any:
        def keep(module: nn.Module, args: Any, output: tuple[Tensor, Tensor | None]) -> None:
            if output[1] is not None:
                recorded[name] = output[1].detach()

        return keep

    for name, module in model.named_modules():
        if isinstance(module, MultiHeadAttention | GroupedQueryAttention):
            handles.append(module.register_forward_pre_hook(ask_for_weights, with_kwargs=True))
            handles.append(module.register_forward_hook(keeper(name or "attention")))
    if not handles:
        raise ValueError(f"{type(model).__name__} contains no MultiHeadAttention to record")
    try:
        yield recorded
    finally:
        for handle in handles:
            handle.remove()
