"""A third outside-style suite for the course's probes, written BLIND: its author learned the probes only from
``help(course_utils.teaching.probes)`` (module docstring, signatures, docstrings, ``CAUSES``), never read their
source nor the two other suites, and fixed every case's expected cause before running anything.

Styles (none of them in the first two suites):

1. Sebastian Raschka's LLMs-from-scratch: ``register_buffer("mask", torch.triu(ones, diagonal=1))``,
   ``masked_fill_(mask_bool, -torch.inf)``, ``keys.shape[-1]**0.5``, hand LayerNorm with scale/shift, tanh GELU,
   ``FeedForward``, ``GPTModel`` with ``tok_emb + pos_emb``; the chapter-6 classifier reading the last token.
2. Karpathy's minGPT: separate key/query/value Linears, ``bias`` buffer ``view(1, 1, T, T)``,
   ``masked_fill(self.bias[:, :, :T, :T] == 0, float('-inf'))``, ``* (1.0 / math.sqrt(k.size(-1)))``, N(0, 0.02)
   init, ``(logits, loss)`` output.
3. Stanford CS336 assignment 1: einsum everywhere (``"... q d, ... k d -> ... q k"``), hand softmax, RMSNorm,
   SwiGLU, interleaved RoPE with ``token_positions``, causal mask from ``torch.tril`` used with ``torch.where``.
4. timm / ViT: packed ``qkv`` Linear, ``reshape(B, N, 3, h, d).permute(2, 0, 3, 1, 4)``, ``unbind(0)``,
   ``* self.scale``, ``attn.softmax(dim=-1)``; a text classifier with a [CLS] token and cls / mean / max pooling.
5. Hugging Face BERT: ``get_extended_attention_mask`` (``(1.0 - mask[:, None, None, :]) * finfo.min`` or
   ``* -10000.0``) ADDED to the scores, ``transpose_for_scores``, post-norm ``BertSelfOutput``, pooler.
6. GPT-NeoX / Pythia: packed per-head ``query_key_value``, parallel residual ``x + attn(ln1(x)) + mlp(ln2(x))``,
   partial rotary (a quarter of each head), rotate_half, ``F.scaled_dot_product_attention(is_causal=True)``.
7. Mistral: sliding-window causal attention (window W, itself included), grouped-query attention, RoPE,
   RMSNorm with rsqrt, SwiGLU MLP, SDPA with a boolean True = keep mask.
8. fairseq / OpenNMT encoder-decoder: (T, B, C) layout inside, a (B, T) wrapper outside, bmm attention over
   ``(B * h, T, d)`` with the query scaled first, post-norm layers, additive ``-inf`` future mask,
   ``embed_scale = sqrt(d)`` with N(0, d^-0.5) init, sinusoidal positions, cross-attention, key padding masks.
9. Others: a Flax/JAX model written in PyTorch (DenseGeneral kernels ``(C, h, d)``, einsum ``"bqhd,bkhd->bhqk"``,
   float 1 = attend masks, ``torch.where(mask, w, finfo.min)`` or the labml ``w * m + (1 - m) * -1e9``
   arithmetic, Flax LayerNorm ``E[x^2] - E[x]^2``, a dataclass output); ALiBi (BLOOM-style) attention biases;
   models assembled from PyTorch's own ``nn.MultiheadAttention`` / ``nn.TransformerEncoderLayer``.

FIRST-RUN score (before any change, see the report at the end of the scorecard):
    bugs flagged 64/66, bugs with the right cause 58/66, false alarms 0/53 (119 cases, 1.7 s on 1 thread).
    Per probe: causality 18/18 right cause, 0/10 false alarms; equality 17/17 flagged but 12/17 right cause,
    0/14; padding 10/10, 0/9; position 8/9 (2-layer causal model without positions missed), 0/10; batch 5/6,
    0/5; output 6/6 flagged, 5/6 right cause, 0/5.
    One of the 66 came from a mistake in this file, not the probes: ``fairseq_layout_not_transposed`` crashed
    (RuntimeError, counted as missed) because its target (length 6) and source (length 8) make the
    forgotten-transpose model fail loudly. After the first run the target was made length 8, so the bug runs
    silently as intended; the expectation was not changed. No other case was changed.

AFTER the probes were adjusted to what this suite found (causes read from NaN rows, a mask broadcast along the
queries, a leak into earlier positions measured without attention weights, a reshape that moves values between
positions, a missing square root named by its own code ``no_root``, softmax over another axis also named as
probabilities; ``position_probe(..., added=True)`` for a model meant to add an encoding):
    bugs flagged 65/66, bugs with the right cause 65/66, false alarms 0/53. The one left is
    ``raschka_no_pos_emb_2layers``: a causal model of two layers without any encoding reads order through its mask,
    and from its outputs cannot be told from a rotary one; told ``added=True``, the probe flags it. The expectation
    ``unknown`` of ``cs336_rmsnorm_no_sqrt`` (no code fitted when it was written) is read as ``no_root`` by the tests.

Run: ``.venv/bin/python -m tests.outside_style.third_styles``.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_num_threads(1)

from course_utils.teaching.probes import (  # noqa: E402
    CAUSES,
    batch_probe,
    causality_probe,
    equality_probe,
    output_probe,
    padding_probe,
    position_probe,
)

D, H, V, PAD = 32, 4, 40, 0
CTX = 32

CASES = []


def case(name, probe, expected, note=""):
    assert expected is None or expected in CAUSES, expected

    def deco(fn):
        CASES.append(dict(name=name, probe=probe, expected=expected, note=note, fn=fn))
        return fn

    return deco


def ids(B=3, T=8, seed=1, low=1, high=V):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(low, high, (B, T), generator=g)


def padded_ids(lengths=(8, 5, 6, 3), T=8, seed=2):
    x = ids(len(lengths), T, seed)
    for b, n in enumerate(lengths):
        x[b, n:] = PAD
    return x


def blocked_future(T):
    """True = blocked, the convention of nn.MultiheadAttention's attn_mask."""
    return torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)


# ======================================================================================================
# 1. Raschka, LLMs-from-scratch
# ======================================================================================================


class RaschkaLayerNorm(nn.Module):
    def __init__(self, emb_dim, unbiased=False, eps_outside=False):
        super().__init__()
        self.eps = 1e-5
        self.scale = nn.Parameter(torch.ones(emb_dim))
        self.shift = nn.Parameter(torch.zeros(emb_dim))
        self.unbiased = unbiased
        self.eps_outside = eps_outside

    def forward(self, x):
        mean = x.mean(dim=-1, keepdim=True)
        var = x.var(dim=-1, keepdim=True, unbiased=self.unbiased)
        if self.eps_outside:
            norm_x = (x - mean) / (torch.sqrt(var) + self.eps)
        else:
            norm_x = (x - mean) / torch.sqrt(var + self.eps)
        return self.scale * norm_x + self.shift


class RaschkaGELU(nn.Module):
    def forward(self, x):
        return 0.5 * x * (1 + torch.tanh(torch.sqrt(torch.tensor(2.0 / torch.pi)) * (x + 0.044715 * torch.pow(x, 3))))


class RaschkaFeedForward(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(cfg["emb_dim"], 4 * cfg["emb_dim"]), RaschkaGELU(), nn.Linear(4 * cfg["emb_dim"], cfg["emb_dim"])
        )

    def forward(self, x):
        return self.layers(x)


class RaschkaMultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False, bug=None):
        super().__init__()
        assert d_out % num_heads == 0, "d_out must be divisible by num_heads"
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.bug = bug
        diagonal = {"triu_diagonal_2": 2, "triu_diagonal_0": 0}.get(bug, 1)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=diagonal))

    def forward(self, x):
        b, num_tokens, _d_in = x.shape
        keys = self.W_key(x)
        queries = self.W_query(x)
        values = self.W_value(x)
        if self.bug == "split_without_transpose":
            keys = keys.view(b, self.num_heads, num_tokens, self.head_dim)
            values = values.view(b, self.num_heads, num_tokens, self.head_dim)
            queries = queries.view(b, self.num_heads, num_tokens, self.head_dim)
        else:
            keys = keys.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
            values = values.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
            queries = queries.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)

        attn_scores = queries @ keys.transpose(2, 3)
        mask_bool = self.mask.bool()[:num_tokens, :num_tokens]
        if self.bug == "masked_fill_not_inplace":
            attn_scores.masked_fill(mask_bool, -torch.inf)  # result dropped
        else:
            attn_scores.masked_fill_(mask_bool, -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)

        context_vec = attn_weights @ values
        if self.bug == "split_without_transpose":
            context_vec = context_vec.contiguous().view(b, num_tokens, self.d_out)
        else:
            context_vec = context_vec.transpose(1, 2).contiguous().view(b, num_tokens, self.d_out)
        return self.out_proj(context_vec)


class RaschkaTransformerBlock(nn.Module):
    def __init__(self, cfg, bug=None):
        super().__init__()
        self.att = RaschkaMultiHeadAttention(
            d_in=cfg["emb_dim"],
            d_out=cfg["emb_dim"],
            context_length=cfg["context_length"],
            num_heads=cfg["n_heads"],
            dropout=cfg["drop_rate"],
            qkv_bias=cfg["qkv_bias"],
            bug=bug,
        )
        self.ff = RaschkaFeedForward(cfg)
        self.norm1 = RaschkaLayerNorm(cfg["emb_dim"])
        self.norm2 = RaschkaLayerNorm(cfg["emb_dim"])
        self.drop_shortcut = nn.Dropout(cfg["drop_rate"])

    def forward(self, x):
        shortcut = x
        x = self.norm1(x)
        x = self.att(x)
        x = self.drop_shortcut(x)
        x = x + shortcut
        shortcut = x
        x = self.norm2(x)
        x = self.ff(x)
        x = self.drop_shortcut(x)
        x = x + shortcut
        return x


class RaschkaGPTModel(nn.Module):
    def __init__(self, cfg, bug=None, use_pos=True, output="logits"):
        super().__init__()
        self.tok_emb = nn.Embedding(cfg["vocab_size"], cfg["emb_dim"])
        self.pos_emb = nn.Embedding(cfg["context_length"], cfg["emb_dim"])
        self.drop_emb = nn.Dropout(cfg["drop_rate"])
        self.trf_blocks = nn.Sequential(*[RaschkaTransformerBlock(cfg, bug) for _ in range(cfg["n_layers"])])
        self.final_norm = RaschkaLayerNorm(cfg["emb_dim"])
        self.out_head = nn.Linear(cfg["emb_dim"], cfg["vocab_size"], bias=False)
        self.use_pos = use_pos
        self.output = output

    def forward(self, in_idx):
        _batch_size, seq_len = in_idx.shape
        tok_embeds = self.tok_emb(in_idx)
        if self.use_pos:
            pos_embeds = self.pos_emb(torch.arange(seq_len, device=in_idx.device))
            x = tok_embeds + pos_embeds
        else:
            x = tok_embeds
        x = self.drop_emb(x)
        x = self.trf_blocks(x)
        x = self.final_norm(x)
        logits = self.out_head(x)
        if self.output == "probs":
            return torch.softmax(logits, dim=-1)
        return logits


def raschka_cfg(n_layers=1, drop_rate=0.0):
    return {
        "vocab_size": V,
        "context_length": CTX,
        "emb_dim": D,
        "n_heads": H,
        "n_layers": n_layers,
        "drop_rate": drop_rate,
        "qkv_bias": False,
    }


def raschka_gpt(seed=0, n_layers=1, drop_rate=0.0, **kw):
    torch.manual_seed(seed)
    return RaschkaGPTModel(raschka_cfg(n_layers, drop_rate), **kw).eval()


def raschka_mha_and_reference(bug=None, seed=0):
    torch.manual_seed(seed)
    att = RaschkaMultiHeadAttention(D, D, CTX, 0.0, H, qkv_bias=False, bug=bug).eval()
    mha = nn.MultiheadAttention(D, H, bias=True, batch_first=True).eval()
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([att.W_query.weight, att.W_key.weight, att.W_value.weight], 0))
        mha.in_proj_bias.zero_()
        mha.out_proj.weight.copy_(att.out_proj.weight)
        mha.out_proj.bias.copy_(att.out_proj.bias)

    def ref(x):
        return mha(x, x, x, attn_mask=blocked_future(x.shape[1]), need_weights=False)[0]

    return att, ref


@case("raschka_gpt_ok", "causality", None, "LLMs-from-scratch GPTModel, 2 layers")
def _():
    model = raschka_gpt(n_layers=2)
    return causality_probe(lambda x: model(x), ids(), V)


@case(
    "raschka_masked_fill_not_inplace",
    "causality",
    "no_causal_mask",
    "attn_scores.masked_fill(...) instead of masked_fill_(...), result dropped",
)
def _():
    model = raschka_gpt(n_layers=2, bug="masked_fill_not_inplace")
    return causality_probe(lambda x: model(x), ids(), V)


@case(
    "raschka_triu_diagonal_2", "causality", "off_by_one_mask", "torch.triu(ones, diagonal=2): also sees the next token"
)
def _():
    model = raschka_gpt(n_layers=1, bug="triu_diagonal_2")
    return causality_probe(lambda x: model(x), ids(), V)


@case(
    "raschka_triu_diagonal_0",
    "causality",
    "masked_row_nan",
    "torch.triu(ones, diagonal=0) blocks the diagonal: row 0 has nothing left, -inf gives NaN",
)
def _():
    model = raschka_gpt(n_layers=1, bug="triu_diagonal_0")
    return causality_probe(lambda x: model(x), ids(), V)


@case("raschka_dropout_left_on", "causality", "dropout_on", "drop_rate 0.1 and model.train() (eval forgotten)")
def _():
    model = raschka_gpt(n_layers=1, drop_rate=0.1).train()
    return causality_probe(lambda x: model(x), ids(), V)


@case("raschka_layernorm_ok", "equality", None, "hand LayerNorm (var unbiased=False) vs nn.LayerNorm")
def _():
    torch.manual_seed(0)
    ln = RaschkaLayerNorm(D)
    ref = nn.LayerNorm(D, eps=1e-5)
    with torch.no_grad():
        ln.scale.copy_(torch.randn(D))
        ln.shift.copy_(torch.randn(D))
        ref.weight.copy_(ln.scale)
        ref.bias.copy_(ln.shift)
    return equality_probe(ln, ref, torch.randn(4, 8, D))


@case(
    "raschka_layernorm_unbiased",
    "equality",
    "unbiased_std",
    "x.var(dim=-1, keepdim=True) with the default unbiased=True",
)
def _():
    torch.manual_seed(0)
    ln = RaschkaLayerNorm(D, unbiased=True)
    ref = nn.LayerNorm(D, eps=1e-5)
    return equality_probe(ln, ref, torch.randn(4, 8, D))


@case("raschka_layernorm_eps_outside", "equality", "eps_outside_sqrt", "(x - mean) / (torch.sqrt(var) + eps)")
def _():
    torch.manual_seed(0)
    ln = RaschkaLayerNorm(D, eps_outside=True)
    ref = nn.LayerNorm(D, eps=1e-5)
    return equality_probe(ln, ref, torch.randn(4, 8, D))


@case("raschka_gelu_tanh_ok", "equality", None, "hand tanh GELU vs nn.GELU(approximate='tanh')")
def _():
    torch.manual_seed(0)
    return equality_probe(RaschkaGELU(), nn.GELU(approximate="tanh"), 3 * torch.randn(4, 8, D))


@case(
    "raschka_mha_ok_vs_torch", "equality", None, "MultiHeadAttention vs nn.MultiheadAttention with a causal attn_mask"
)
def _():
    att, ref = raschka_mha_and_reference()
    return equality_probe(att, ref, torch.randn(2, 8, D))


@case(
    "raschka_mha_split_without_transpose",
    "equality",
    "head_split",
    "keys.view(b, num_heads, num_tokens, head_dim) without transpose (and merged back the same way)",
)
def _():
    att, ref = raschka_mha_and_reference(bug="split_without_transpose")
    return equality_probe(att, ref, torch.randn(2, 8, D))


@case("raschka_gpt_positions_ok", "position", None, "tok_emb + pos_emb, 1 layer")
def _():
    model = raschka_gpt(n_layers=1)
    return position_probe(lambda x: model(x), ids())


@case("raschka_no_pos_emb_1layer", "position", "no_positions", "x = tok_embeds (pos_emb built, never added), 1 layer")
def _():
    model = raschka_gpt(n_layers=1, use_pos=False)
    return position_probe(lambda x: model(x), ids())


@case(
    "raschka_no_pos_emb_2layers",
    "position",
    "no_positions",
    "same bug, 2 causal layers (the docstring warns the mask alone leaks some order)",
)
def _():
    model = raschka_gpt(n_layers=2, use_pos=False)
    return position_probe(lambda x: model(x), ids())


@case(
    "raschka_right_padding_no_pad_mask_ok",
    "padding",
    None,
    "causal GPT, no padding mask: padding appended AFTER the real tokens cannot reach them",
)
def _():
    model = raschka_gpt(n_layers=2)
    return padding_probe(lambda x: model(x), ids(), PAD)


@case(
    "raschka_classifier_last_token",
    "padding",
    "mean_over_padding",
    "chapter-6 classifier reads logits[:, -1, :]: with right padding that is a padding position",
)
def _():
    model = raschka_gpt(n_layers=2)
    torch.manual_seed(5)
    model.out_head = nn.Linear(D, 2)
    model.eval()
    return padding_probe(lambda x: model(x)[:, -1, :], ids(), PAD)


@case("raschka_logits_ok", "output", None, "out_head logits")
def _():
    model = raschka_gpt(n_layers=1)
    return output_probe(model(ids()))


@case("raschka_returns_softmax", "output", "probabilities", "torch.softmax(logits, dim=-1) returned to the loss")
def _():
    model = raschka_gpt(n_layers=1, output="probs")
    return output_probe(model(ids()))


# ======================================================================================================
# 2. minGPT
# ======================================================================================================


class MinGPTCausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size, attn_pdrop=0.1, resid_pdrop=0.1, bug=None):
        super().__init__()
        assert n_embd % n_head == 0
        self.key = nn.Linear(n_embd, n_embd)
        self.query = nn.Linear(n_embd, n_embd)
        self.value = nn.Linear(n_embd, n_embd)
        self.attn_drop = nn.Dropout(attn_pdrop)
        self.resid_drop = nn.Dropout(resid_pdrop)
        self.proj = nn.Linear(n_embd, n_embd)
        tri = torch.tril(torch.ones(block_size, block_size), diagonal=1 if bug == "tril_diagonal_1" else 0)
        self.register_buffer("bias", tri.view(1, 1, block_size, block_size))
        self.n_head = n_head
        self.bug = bug

    def forward(self, x):
        B, T, C = x.size()
        k = self.key(x).view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = self.query(x).view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = self.value(x).view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        if self.bug == "mask_eq_1":
            att = att.masked_fill(self.bias[:, :, :T, :T] == 1, float("-inf"))
        else:
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        att = self.attn_drop(att)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        y = self.resid_drop(self.proj(y))
        return y


class MinGPTBlock(nn.Module):
    def __init__(self, n_embd, n_head, block_size, pdrop, bug):
        super().__init__()
        self.ln1 = nn.LayerNorm(n_embd)
        self.ln2 = nn.LayerNorm(n_embd)
        self.attn = MinGPTCausalSelfAttention(n_embd, n_head, block_size, pdrop, pdrop, bug)
        self.mlp = nn.Sequential(
            nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd), nn.Dropout(pdrop)
        )

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        x = x + self.mlp(self.ln2(x))
        return x


class MinGPT(nn.Module):
    def __init__(
        self, vocab_size=V, block_size=CTX, n_layer=2, n_head=H, n_embd=D, pdrop=0.1, bug=None, output="logits"
    ):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab_size, n_embd)
        self.pos_emb = nn.Parameter(torch.zeros(1, block_size, n_embd))
        self.drop = nn.Dropout(pdrop)
        self.blocks = nn.Sequential(*[MinGPTBlock(n_embd, n_head, block_size, pdrop, bug) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.head = nn.Linear(n_embd, vocab_size, bias=False)
        self.block_size = block_size
        self.output = output
        self.apply(self._init_weights)
        nn.init.normal_(self.pos_emb, mean=0.0, std=0.02)

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            module.weight.data.normal_(mean=0.0, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                module.bias.data.zero_()
        elif isinstance(module, nn.LayerNorm):
            module.bias.data.zero_()
            module.weight.data.fill_(1.0)

    def forward(self, idx, targets=None):
        _b, t = idx.size()
        assert t <= self.block_size, "Cannot forward, model block size is exhausted."
        token_embeddings = self.tok_emb(idx)
        position_embeddings = self.pos_emb[:, :t, :]
        x = self.drop(token_embeddings + position_embeddings)
        x = self.blocks(x)
        x = self.ln_f(x)
        logits = self.head(x)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        if self.output == "probs":
            return F.softmax(logits, dim=-1), loss
        return logits, loss


def mingpt(seed=0, **kw):
    torch.manual_seed(seed)
    return MinGPT(**kw).eval()


def mingpt_attention_and_reference(bug=None, seed=0):
    torch.manual_seed(seed)
    m = MinGPTCausalSelfAttention(D, H, CTX, 0.0, 0.0, bug).eval()

    def ref(x):
        B, T, C = x.shape
        k = m.key(x).view(B, T, H, C // H).transpose(1, 2)
        q = m.query(x).view(B, T, H, C // H).transpose(1, 2)
        v = m.value(x).view(B, T, H, C // H).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return m.proj(y.transpose(1, 2).reshape(B, T, C))

    return m, ref


@case("mingpt_ok", "causality", None, "minGPT, 2 layers, pdrop 0.1 but eval()")
def _():
    model = mingpt()
    return causality_probe(lambda x: model(x)[0], ids(), V)


@case(
    "mingpt_mask_eq_1",
    "causality",
    "mask_convention",
    "masked_fill(self.bias[...] == 1, -inf): keeps the future, 2 layers",
)
def _():
    model = mingpt(bug="mask_eq_1")
    return causality_probe(lambda x: model(x)[0], ids(), V)


@case("mingpt_tril_diagonal_1", "causality", "off_by_one_mask", "torch.tril(ones, diagonal=1), 2 layers")
def _():
    model = mingpt(bug="tril_diagonal_1")
    return causality_probe(lambda x: model(x)[0], ids(), V)


@case("mingpt_train_mode", "causality", "dropout_on", "pdrop 0.1, model.train() after a training loop")
def _():
    model = mingpt().train()
    return causality_probe(lambda x: model(x)[0], ids(), V)


@case("mingpt_attention_ok_vs_sdpa", "equality", None, "CausalSelfAttention vs SDPA(is_causal=True), same weights")
def _():
    m, ref = mingpt_attention_and_reference()
    return equality_probe(m, ref, torch.randn(2, 8, D))


@case("mingpt_attention_mask_eq_1_vs_sdpa", "equality", "mask_convention", "bias == 1 filled instead of bias == 0")
def _():
    m, ref = mingpt_attention_and_reference(bug="mask_eq_1")
    return equality_probe(m, ref, torch.randn(2, 8, D))


@case("mingpt_attention_tril_diag1_vs_sdpa", "equality", "off_by_one_mask", "tril(diagonal=1) vs SDPA(is_causal=True)")
def _():
    m, ref = mingpt_attention_and_reference(bug="tril_diagonal_1")
    return equality_probe(m, ref, torch.randn(2, 8, D))


@case("mingpt_logits_loss_ok", "output", None, "returns (logits, loss)")
def _():
    model = mingpt()
    x = ids()
    return output_probe(model(x, torch.roll(x, -1, 1)))


@case("mingpt_probs_loss", "output", "probabilities", "returns (F.softmax(logits, -1), loss)")
def _():
    model = mingpt(output="probs")
    x = ids()
    return output_probe(model(x, torch.roll(x, -1, 1)))


# ======================================================================================================
# 3. Stanford CS336 assignment style
# ======================================================================================================


class CSLinear(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        std = math.sqrt(2.0 / (in_features + out_features))
        w = torch.empty(out_features, in_features)
        nn.init.trunc_normal_(w, std=std, a=-3 * std, b=3 * std)
        self.weight = nn.Parameter(w)

    def forward(self, x):
        return torch.einsum("... i, o i -> ... o", x, self.weight)


class CSEmbedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim):
        super().__init__()
        w = torch.empty(num_embeddings, embedding_dim)
        nn.init.trunc_normal_(w, std=1.0, a=-3.0, b=3.0)
        self.weight = nn.Parameter(w)

    def forward(self, token_ids):
        return self.weight[token_ids]


class CSRMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5, bug=None):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bug = bug

    def forward(self, x):
        in_dtype = x.dtype
        x = x.to(torch.float32)
        ms = torch.einsum("... d, ... d -> ...", x, x).unsqueeze(-1) / x.shape[-1]
        if self.bug == "eps_outside_sqrt":
            rms = torch.sqrt(ms) + self.eps
        elif self.bug == "no_sqrt":
            rms = ms + self.eps
        else:
            rms = torch.sqrt(ms + self.eps)
        return (x / rms * self.weight).to(in_dtype)


def cs_silu(x):
    return x * torch.sigmoid(x)


class CSSwiGLU(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.w1 = CSLinear(d_model, d_ff)
        self.w2 = CSLinear(d_ff, d_model)
        self.w3 = CSLinear(d_model, d_ff)

    def forward(self, x):
        return self.w2(cs_silu(self.w1(x)) * self.w3(x))


class CSRoPE(nn.Module):
    def __init__(self, theta, d_k, max_seq_len):
        super().__init__()
        inv_freq = 1.0 / theta ** (torch.arange(0, d_k, 2, dtype=torch.float32) / d_k)
        ang = torch.einsum("i, j -> i j", torch.arange(max_seq_len, dtype=torch.float32), inv_freq)
        self.register_buffer("cos", ang.cos(), persistent=False)
        self.register_buffer("sin", ang.sin(), persistent=False)

    def forward(self, x, token_positions):
        cos = self.cos[token_positions]
        sin = self.sin[token_positions]
        x_even, x_odd = x[..., 0::2], x[..., 1::2]
        out_even = x_even * cos - x_odd * sin
        out_odd = x_even * sin + x_odd * cos
        return torch.stack([out_even, out_odd], dim=-1).flatten(-2)


def cs_softmax(x, dim):
    x = x - x.amax(dim=dim, keepdim=True)
    e = torch.exp(x)
    return e / e.sum(dim=dim, keepdim=True)


def cs_scaled_dot_product_attention(Q, K, V_, mask=None, scale=None):
    d_k = Q.shape[-1]
    scores = torch.einsum("... q d, ... k d -> ... q k", Q, K) / (math.sqrt(d_k) if scale is None else scale)
    if mask is not None:
        scores = torch.where(mask, scores, float("-inf"))
    return torch.einsum("... q k, ... k d -> ... q d", cs_softmax(scores, dim=-1), V_)


class CSMultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model, num_heads, rope=None, bug=None, impl="einsum"):
        super().__init__()
        self.d_model, self.num_heads = d_model, num_heads
        self.q_proj = CSLinear(d_model, d_model)
        self.k_proj = CSLinear(d_model, d_model)
        self.v_proj = CSLinear(d_model, d_model)
        self.output_proj = CSLinear(d_model, d_model)
        self.rope = rope
        self.bug = bug
        self.impl = impl

    def forward(self, x, token_positions=None):
        T = x.shape[-2]
        h = self.num_heads
        d_k = self.d_model // h

        def split(t):
            return t.unflatten(-1, (h, d_k)).transpose(-3, -2)

        Q, K, Vv = split(self.q_proj(x)), split(self.k_proj(x)), split(self.v_proj(x))
        if self.rope is not None:
            if token_positions is None:
                token_positions = torch.arange(T)
            if self.bug == "rope_zero_positions":
                token_positions = torch.zeros(T, dtype=torch.long)
            Q = self.rope(Q, token_positions)
            K = self.rope(K, token_positions)
        causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
        if self.impl == "sdpa":
            out = F.scaled_dot_product_attention(Q, K, Vv, is_causal=True)
        elif self.bug == "where_flipped":
            scores = torch.einsum("... q d, ... k d -> ... q k", Q, K) / math.sqrt(d_k)
            scores = torch.where(causal, float("-inf"), scores)
            out = torch.einsum("... q k, ... k d -> ... q d", cs_softmax(scores, dim=-1), Vv)
        elif self.bug == "tril_scores":
            scores = torch.einsum("... q d, ... k d -> ... q k", Q, K) / math.sqrt(d_k)
            scores = scores.tril()
            out = torch.einsum("... q k, ... k d -> ... q d", cs_softmax(scores, dim=-1), Vv)
        elif self.bug == "scale_d_model":
            out = cs_scaled_dot_product_attention(Q, K, Vv, causal, scale=math.sqrt(self.d_model))
        elif self.bug == "no_scale":
            out = cs_scaled_dot_product_attention(Q, K, Vv, causal, scale=1.0)
        elif self.bug == "sqrt_twice":
            out = cs_scaled_dot_product_attention(Q / math.sqrt(d_k), K, Vv, causal)
        else:
            out = cs_scaled_dot_product_attention(Q, K, Vv, causal)
        out = out.transpose(-3, -2).flatten(-2)
        return self.output_proj(out)


class CSTransformerBlock(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, rope, bug):
        super().__init__()
        self.ln1 = CSRMSNorm(d_model)
        self.attn = CSMultiHeadSelfAttention(d_model, num_heads, rope, bug)
        self.ln2 = CSRMSNorm(d_model)
        self.ffn = CSSwiGLU(d_model, d_ff)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        x = x + self.ffn(self.ln2(x))
        return x


class CSTransformerLM(nn.Module):
    def __init__(
        self,
        vocab_size=V,
        context_length=CTX,
        d_model=D,
        num_layers=2,
        num_heads=H,
        d_ff=64,
        rope_theta=10000.0,
        bug=None,
        output="logits",
    ):
        super().__init__()
        rope = CSRoPE(rope_theta, d_model // num_heads, context_length)
        self.token_embeddings = CSEmbedding(vocab_size, d_model)
        self.layers = nn.ModuleList(
            [CSTransformerBlock(d_model, num_heads, d_ff, rope, bug) for _ in range(num_layers)]
        )
        self.ln_final = CSRMSNorm(d_model)
        self.lm_head = CSLinear(d_model, vocab_size)
        self.output = output

    def forward(self, in_indices):
        x = self.token_embeddings(in_indices)
        for layer in self.layers:
            x = layer(x)
        logits = self.lm_head(self.ln_final(x))
        if self.output == "log_softmax_nodim":
            return F.log_softmax(logits)
        if self.output == "log_softmax":
            return F.log_softmax(logits, dim=-1)
        if self.output == "softmax_T":
            return F.softmax(logits, dim=1)
        return logits


def cs_lm(seed=0, **kw):
    torch.manual_seed(seed)
    return CSTransformerLM(**kw).eval()


def cs_mha_and_reference(bug, seed=0):
    torch.manual_seed(seed)
    ours = CSMultiHeadSelfAttention(D, H, bug=bug).eval()
    ref = CSMultiHeadSelfAttention(D, H, impl="sdpa").eval()
    ref.load_state_dict(ours.state_dict())
    return ours, ref


@case("cs336_lm_ok", "causality", None, "einsum, RoPE, RMSNorm, SwiGLU, torch.where(tril, scores, -inf)")
def _():
    model = cs_lm()
    return causality_probe(lambda x: model(x), ids(), V)


@case("cs336_where_flipped", "causality", "mask_convention", "torch.where(causal, -inf, scores), 1 layer")
def _():
    model = cs_lm(num_layers=1, bug="where_flipped")
    return causality_probe(lambda x: model(x), ids(), V)


@case("cs336_tril_scores", "causality", "no_causal_mask", "scores.tril(): future scores set to 0, not -inf")
def _():
    model = cs_lm(bug="tril_scores")
    return causality_probe(lambda x: model(x), ids(), V)


@case("cs336_rmsnorm_ok", "equality", None, "hand RMSNorm vs nn.RMSNorm(eps=1e-5)")
def _():
    torch.manual_seed(0)
    ours = CSRMSNorm(D)
    ref = nn.RMSNorm(D, eps=1e-5)
    with torch.no_grad():
        ours.weight.copy_(torch.randn(D))
        ref.weight.copy_(ours.weight)
    return equality_probe(ours, ref, torch.randn(4, 8, D))


@case("cs336_rmsnorm_eps_outside", "equality", "eps_outside_sqrt", "x / (sqrt(mean(x^2)) + eps)")
def _():
    torch.manual_seed(0)
    return equality_probe(CSRMSNorm(D, bug="eps_outside_sqrt"), nn.RMSNorm(D, eps=1e-5), torch.randn(4, 8, D))


@case("cs336_rmsnorm_no_sqrt", "equality", "unknown", "x / (mean(x^2) + eps): the root forgotten (no dedicated cause)")
def _():
    torch.manual_seed(0)
    return equality_probe(CSRMSNorm(D, bug="no_sqrt"), nn.RMSNorm(D, eps=1e-5), torch.randn(4, 8, D))


@case("cs336_attention_scale_d_model", "equality", "wrong_scale", "scores / sqrt(d_model) instead of sqrt(d_k)")
def _():
    ours, ref = cs_mha_and_reference("scale_d_model")
    return equality_probe(ours, ref, torch.randn(2, 8, D))


@case("cs336_attention_no_scale", "equality", "wrong_scale", "scores not scaled")
def _():
    ours, ref = cs_mha_and_reference("no_scale")
    return equality_probe(ours, ref, torch.randn(2, 8, D))


@case("cs336_attention_sqrt_twice", "equality", "wrong_scale", "Q / sqrt(d_k) and then scores / sqrt(d_k) again")
def _():
    ours, ref = cs_mha_and_reference("sqrt_twice")
    return equality_probe(ours, ref, torch.randn(2, 8, D))


@case("cs336_attention_ok_vs_sdpa", "equality", None, "einsum attention vs SDPA(is_causal=True), same weights")
def _():
    ours, ref = cs_mha_and_reference(None)
    return equality_probe(ours, ref, torch.randn(2, 8, D))


@case(
    "cs336_sdpa_function_bool_keep_ok",
    "equality",
    None,
    "torch.where(mask True = keep) vs SDPA's bool attn_mask, a sliding-window mask",
)
def _():
    torch.manual_seed(0)
    keep = sliding_window_mask(8, 3)
    return equality_probe(
        lambda q, k, v: cs_scaled_dot_product_attention(q, k, v, keep),
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=keep),
        torch.randn(2, H, 8, 8),
        torch.randn(2, H, 8, 8),
        torch.randn(2, H, 8, 8),
    )


def llama_rope_reference(x, theta=10000.0):
    T, d = x.shape[-2], x.shape[-1]
    freqs = 1.0 / (theta ** (torch.arange(0, d, 2)[: d // 2].float() / d))
    angles = torch.outer(torch.arange(T).float(), freqs)
    freqs_cis = torch.polar(torch.ones_like(angles), angles)
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(xc * freqs_cis).flatten(-2)


@case("cs336_rope_ok_vs_complex", "equality", None, "interleaved cos/sin RoPE vs a LLaMA-style complex reference")
def _():
    torch.manual_seed(0)
    rope = CSRoPE(10000.0, 8, CTX)
    return equality_probe(lambda x: rope(x, torch.arange(x.shape[-2])), llama_rope_reference, torch.randn(2, H, 8, 8))


@case("cs336_rope_positions_ok", "position", None, "RoPE on q and k, 1 layer")
def _():
    model = cs_lm(num_layers=1)
    return position_probe(lambda x: model(x), ids())


@case(
    "cs336_rope_zero_positions",
    "position",
    "no_positions",
    "token_positions = zeros: every rotation is the identity, 1 layer",
)
def _():
    model = cs_lm(num_layers=1, bug="rope_zero_positions")
    return position_probe(lambda x: model(x), ids())


@case("cs336_log_softmax_nodim_batch", "batch", "batch_mixing", "F.log_softmax(logits) without dim on (B, T, V)")
def _():
    model = cs_lm(output="log_softmax_nodim")
    return batch_probe(lambda x: model(x), ids())


@case("cs336_batch_ok", "batch", None, "CS336 LM")
def _():
    model = cs_lm()
    return batch_probe(lambda x: model(x), ids())


@case("cs336_log_softmax_ok", "output", None, "F.log_softmax(logits, dim=-1): fine for F.cross_entropy")
def _():
    return output_probe(cs_lm(output="log_softmax")(ids()))


@case("cs336_log_softmax_nodim_output", "output", "log_softmax_axis", "F.log_softmax(logits) without dim on (B, T, V)")
def _():
    return output_probe(cs_lm(output="log_softmax_nodim")(ids()))


@case("cs336_softmax_over_T", "output", "probabilities", "F.softmax(logits, dim=1): probabilities, over T")
def _():
    return output_probe(cs_lm(output="softmax_T")(ids()))


# ======================================================================================================
# 4. timm / ViT encoder attention, used as a text classifier with a [CLS] token
# ======================================================================================================


class TimmAttention(nn.Module):
    def __init__(self, dim, num_heads=8, qkv_bias=False, attn_drop=0.0, proj_drop=0.0, bug=None, return_attn=False):
        super().__init__()
        assert dim % num_heads == 0, "dim should be divisible by num_heads"
        self.num_heads = num_heads
        head_dim = dim // num_heads
        self.scale = head_dim**0.5 if bug == "scale_mul" else head_dim**-0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.attn_drop = nn.Dropout(attn_drop)
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(proj_drop)
        self.bug = bug
        self.return_attn = return_attn

    def forward(self, x, key_padding_mask=None):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        attn = (q @ k.transpose(-2, -1)) * self.scale
        if key_padding_mask is not None:
            attn = attn.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
        attn = attn.softmax(dim=-2 if self.bug == "softmax_dim_-2" else -1)
        attn = self.attn_drop(attn)
        if self.bug == "merge_without_transpose":
            x = (attn @ v).reshape(B, N, C)
        else:
            x = (attn @ v).transpose(1, 2).reshape(B, N, C)
        x = self.proj(x)
        x = self.proj_drop(x)
        return (x, attn) if self.return_attn else x


class TimmMlp(nn.Module):
    def __init__(self, in_features, hidden_features):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden_features)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden_features, in_features)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class TimmBlock(nn.Module):
    def __init__(self, dim, num_heads, mlp_ratio=4.0):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = TimmAttention(dim, num_heads, qkv_bias=True)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = TimmMlp(dim, int(dim * mlp_ratio))

    def forward(self, x, key_padding_mask=None):
        x = x + self.attn(self.norm1(x), key_padding_mask)
        x = x + self.mlp(self.norm2(x))
        return x


class TimmTextClassifier(nn.Module):
    def __init__(self, num_classes=5, depth=2, pool="cls", use_pos=True, pos_std=0.02, tok_std=0.02, mask_padding=True):
        super().__init__()
        self.tok_embed = nn.Embedding(V, D)
        nn.init.trunc_normal_(self.tok_embed.weight, std=tok_std, a=-2 * tok_std, b=2 * tok_std)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, D))
        self.pos_embed = nn.Parameter(torch.zeros(1, CTX + 1, D))
        nn.init.trunc_normal_(self.cls_token, std=0.02)
        nn.init.trunc_normal_(self.pos_embed, std=pos_std, a=-2 * pos_std, b=2 * pos_std)
        self.blocks = nn.ModuleList([TimmBlock(D, H) for _ in range(depth)])
        self.norm = nn.LayerNorm(D, eps=1e-6)
        self.head = nn.Linear(D, num_classes)
        self.pool, self.use_pos, self.mask_padding = pool, use_pos, mask_padding

    def forward_features(self, tokens):
        B, N = tokens.shape
        x = self.tok_embed(tokens)
        x = torch.cat([self.cls_token.expand(B, -1, -1), x], dim=1)
        if self.use_pos:
            x = x + self.pos_embed[:, : N + 1]
        pad = None
        if self.mask_padding:
            pad = torch.cat([torch.zeros(B, 1, dtype=torch.bool), tokens == PAD], dim=1)
        for blk in self.blocks:
            x = blk(x, pad)
        return self.norm(x), pad

    def forward(self, tokens):
        x, pad = self.forward_features(tokens)
        if self.pool == "tokens":
            return x[:, 1:]
        if self.pool == "cls":
            feat = x[:, 0]
        elif self.pool == "mean":
            feat = x[:, 1:].mean(dim=1)
        elif self.pool == "max":
            feat = x[:, 1:].max(dim=1).values
        elif self.pool == "masked_mean":
            keep = (~pad[:, 1:]).unsqueeze(-1).to(x.dtype)
            feat = (x[:, 1:] * keep).sum(dim=1) / keep.sum(dim=1).clamp(min=1.0)
        else:
            raise ValueError(self.pool)
        return self.head(feat)


def timm_classifier(seed=0, **kw):
    torch.manual_seed(seed)
    return TimmTextClassifier(**kw).eval()


def timm_attention_and_mha(bug=None, seed=0):
    torch.manual_seed(seed)
    attn = TimmAttention(D, H, qkv_bias=True, bug=bug, return_attn=True).eval()
    mha = nn.MultiheadAttention(D, H, bias=True, batch_first=True).eval()
    with torch.no_grad():
        mha.in_proj_weight.copy_(attn.qkv.weight)
        mha.in_proj_bias.copy_(attn.qkv.bias)
        mha.out_proj.weight.copy_(attn.proj.weight)
        mha.out_proj.bias.copy_(attn.proj.bias)
    return attn, (lambda x: mha(x, x, x, need_weights=True, average_attn_weights=False))


@case(
    "timm_attention_ok_vs_mha",
    "equality",
    None,
    "packed qkv, permute(2, 0, 3, 1, 4), unbind, vs nn.MultiheadAttention (+ weights)",
)
def _():
    attn, ref = timm_attention_and_mha()
    return equality_probe(attn, ref, torch.randn(2, 7, D))


@case("timm_scale_multiplied", "equality", "wrong_scale", "self.scale = head_dim ** 0.5 (multiplied, not divided)")
def _():
    attn, ref = timm_attention_and_mha("scale_mul")
    return equality_probe(attn, ref, torch.randn(2, 7, D))


@case("timm_softmax_dim_-2", "equality", "softmax_axis", "attn.softmax(dim=-2)")
def _():
    attn, ref = timm_attention_and_mha("softmax_dim_-2")
    return equality_probe(attn, ref, torch.randn(2, 7, D))


@case("timm_merge_without_transpose", "equality", "head_split", "(attn @ v).reshape(B, N, C) without transpose(1, 2)")
def _():
    attn, ref = timm_attention_and_mha("merge_without_transpose")
    return equality_probe(attn, ref, torch.randn(2, 7, D))


@case("timm_cls_pool_ok", "padding", None, "[CLS] pooling, key padding mask on the keys")
def _():
    model = timm_classifier(pool="cls")
    return padding_probe(lambda x: model(x), ids(), PAD)


@case("timm_masked_mean_ok", "padding", None, "mean over real tokens only")
def _():
    model = timm_classifier(pool="masked_mean")
    return padding_probe(lambda x: model(x), ids(), PAD)


@case("timm_mean_pool_over_padding", "padding", "mean_over_padding", "x[:, 1:].mean(dim=1) counts the padding")
def _():
    model = timm_classifier(pool="mean")
    return padding_probe(lambda x: model(x), ids(), PAD)


@case("timm_max_pool_over_padding", "padding", "mean_over_padding", "x[:, 1:].max(dim=1) pools over padding too")
def _():
    model = timm_classifier(pool="max")
    return padding_probe(lambda x: model(x), ids(), PAD)


@case(
    "timm_vit_has_no_padding_mask",
    "padding",
    "no_padding_mask",
    "ViT code ported to text: images never pad, so no mask",
)
def _():
    model = timm_classifier(pool="cls", mask_padding=False)
    return padding_probe(lambda x: model(x), ids(), PAD)


@case("timm_no_pos_embed", "position", "no_positions", "bidirectional encoder, pos_embed never added (token outputs)")
def _():
    model = timm_classifier(pool="tokens", use_pos=False)
    return position_probe(lambda x: model(x), ids())


@case("timm_positions_ok", "position", None, "learned pos_embed, std 0.02 like the token embeddings")
def _():
    model = timm_classifier(pool="tokens")
    return position_probe(lambda x: model(x), ids())


@case(
    "timm_large_positions_ok",
    "position",
    None,
    "pos_embed std 1.0 vs token embeddings std 0.3: a strong but legitimate signal",
)
def _():
    model = timm_classifier(pool="tokens", pos_std=1.0, tok_std=0.3)
    return position_probe(lambda x: model(x), ids())


# ======================================================================================================
# 5. Hugging Face BERT (extended attention mask)
# ======================================================================================================


class BertEmbeddings(nn.Module):
    def __init__(self, vocab_size, hidden, max_pos, pad_token_id, bug=None):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab_size, hidden, padding_idx=pad_token_id)
        self.position_embeddings = nn.Embedding(max_pos, hidden)
        self.token_type_embeddings = nn.Embedding(2, hidden)
        self.LayerNorm = nn.LayerNorm(hidden, eps=1e-12)
        self.dropout = nn.Dropout(0.1)
        self.register_buffer("position_ids", torch.arange(max_pos).expand((1, -1)), persistent=False)
        self.bug = bug

    def forward(self, input_ids, token_type_ids=None, position_ids=None):
        seq_length = input_ids.size(1)
        if position_ids is None:
            if self.bug == "position_ids_zeros":
                position_ids = torch.zeros_like(input_ids)
            else:
                position_ids = self.position_ids[:, :seq_length]
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        embeddings = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
        embeddings = embeddings + self.position_embeddings(position_ids)
        return self.dropout(self.LayerNorm(embeddings))


class BertSelfAttention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.num_attention_heads = heads
        self.attention_head_size = hidden // heads
        self.all_head_size = hidden
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.dropout = nn.Dropout(0.1)

    def transpose_for_scores(self, x):
        new_x_shape = (*x.size()[:-1], self.num_attention_heads, self.attention_head_size)
        return x.view(new_x_shape).permute(0, 2, 1, 3)

    def forward(self, hidden_states, attention_mask=None, output_attentions=False):
        query_layer = self.transpose_for_scores(self.query(hidden_states))
        key_layer = self.transpose_for_scores(self.key(hidden_states))
        value_layer = self.transpose_for_scores(self.value(hidden_states))
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        attention_scores = attention_scores / math.sqrt(self.attention_head_size)
        if attention_mask is not None:
            attention_scores = attention_scores + attention_mask
        attention_probs = nn.functional.softmax(attention_scores, dim=-1)
        attention_probs = self.dropout(attention_probs)
        context_layer = torch.matmul(attention_probs, value_layer)
        context_layer = context_layer.permute(0, 2, 1, 3).contiguous()
        context_layer = context_layer.view((*context_layer.size()[:-2], self.all_head_size))
        return (context_layer, attention_probs) if output_attentions else (context_layer,)


class BertSelfOutput(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.dense = nn.Linear(hidden, hidden)
        self.LayerNorm = nn.LayerNorm(hidden, eps=1e-12)
        self.dropout = nn.Dropout(0.1)

    def forward(self, hidden_states, input_tensor):
        return self.LayerNorm(self.dropout(self.dense(hidden_states)) + input_tensor)


class BertLayer(nn.Module):
    def __init__(self, hidden, heads, intermediate):
        super().__init__()
        self.self_attn = BertSelfAttention(hidden, heads)
        self.self_output = BertSelfOutput(hidden)
        self.intermediate = nn.Linear(hidden, intermediate)
        self.output_dense = nn.Linear(intermediate, hidden)
        self.output_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.output_dropout = nn.Dropout(0.1)

    def forward(self, hidden_states, attention_mask=None):
        attn = self.self_output(self.self_attn(hidden_states, attention_mask)[0], hidden_states)
        inter = F.gelu(self.intermediate(attn))
        return self.output_norm(self.output_dropout(self.output_dense(inter)) + attn)


class BertModel(nn.Module):
    def __init__(self, num_layers=2, mask_mode="finfo", bug=None, pad_token_id=PAD, num_labels=None, output="logits"):
        super().__init__()
        self.embeddings = BertEmbeddings(V, D, CTX, pad_token_id, bug)
        self.layer = nn.ModuleList([BertLayer(D, H, 4 * D) for _ in range(num_layers)])
        self.mask_mode, self.bug, self.output = mask_mode, bug, output
        if num_labels is not None:
            self.pooler = nn.Linear(D, D)
            self.classifier = nn.Linear(D, num_labels)
        self.num_labels = num_labels
        self.apply(self._init_weights)

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            module.weight.data.normal_(mean=0.0, std=0.02)
            if module.bias is not None:
                module.bias.data.zero_()
        elif isinstance(module, nn.Embedding):
            module.weight.data.normal_(mean=0.0, std=0.02)
            if module.padding_idx is not None:
                module.weight.data[module.padding_idx].zero_()
        elif isinstance(module, nn.LayerNorm):
            module.bias.data.zero_()
            module.weight.data.fill_(1.0)

    def get_extended_attention_mask(self, attention_mask, dtype):
        if self.bug == "mask_query_axis":
            ext = attention_mask[:, None, :, None]
        elif self.bug == "mask_no_head_axis":
            ext = attention_mask[:, None, :]
        elif self.mask_mode == "query_and_key":
            ext = attention_mask[:, None, :, None] * attention_mask[:, None, None, :]
        else:
            ext = attention_mask[:, None, None, :]
        ext = ext.to(dtype=dtype)
        if self.bug == "mask_times_neg":
            return ext * -10000.0
        if self.mask_mode == "minus_10000":
            return (1.0 - ext) * -10000.0
        return (1.0 - ext) * torch.finfo(dtype).min

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        hidden = self.embeddings(input_ids, token_type_ids)
        ext = self.get_extended_attention_mask(attention_mask, hidden.dtype)
        for layer in self.layer:
            hidden = layer(hidden, None if self.bug == "mask_not_passed" else ext)
        if self.num_labels is None:
            return hidden
        pooled = torch.tanh(self.pooler(hidden[:, 0]))
        logits = self.classifier(pooled)
        return F.softmax(logits, dim=-1) if self.output == "probs" else logits


def bert(seed=0, **kw):
    torch.manual_seed(seed)
    return BertModel(**kw).eval()


def bert_fn(model, pad=PAD):
    return lambda x: model(x, attention_mask=(x != pad).long())


def bert_self_attention_and_mha(mask_mode="finfo", bug=None, seed=0):
    torch.manual_seed(seed)
    holder = BertModel(num_layers=1, mask_mode=mask_mode, bug=bug)
    sa = holder.layer[0].self_attn
    for p in sa.parameters():
        nn.init.normal_(p, std=0.2)
    holder.eval()
    mha = nn.MultiheadAttention(D, H, bias=True, batch_first=True).eval()
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([sa.query.weight, sa.key.weight, sa.value.weight]))
        mha.in_proj_bias.copy_(torch.cat([sa.query.bias, sa.key.bias, sa.value.bias]))
        mha.out_proj.weight.copy_(torch.eye(D))
        mha.out_proj.bias.zero_()

    def ours(x, am):
        return sa(x, holder.get_extended_attention_mask(am, x.dtype), output_attentions=True)

    def ref(x, am):
        return mha(x, x, x, key_padding_mask=am == 0, need_weights=True, average_attn_weights=False)

    return ours, ref


def bert_equality(mask_mode="finfo", bug=None):
    ours, ref = bert_self_attention_and_mha(mask_mode, bug)
    torch.manual_seed(3)
    am = (padded_ids((8, 5, 6, 3)) != PAD).long()
    return equality_probe(ours, ref, torch.randn(4, 8, D), am)


@case(
    "bert_self_attention_ok_vs_mha",
    "equality",
    None,
    "extended mask (1 - m) * finfo.min vs key_padding_mask (+ weights)",
)
def _():
    return bert_equality()


@case("bert_self_attention_minus_10000_ok", "equality", None, "(1 - m) * -10000.0, the older HF convention")
def _():
    return bert_equality(mask_mode="minus_10000")


@case("bert_self_attention_mask_times_neg", "equality", "mask_convention", "mask * -10000.0: blocks the real tokens")
def _():
    return bert_equality(bug="mask_times_neg")


@case("bert_self_attention_mask_query_axis", "equality", "mask_wrong_axis", "attention_mask[:, None, :, None]")
def _():
    return bert_equality(bug="mask_query_axis")


@case("bert_padding_finfo_ok", "padding", None, "(1.0 - mask[:, None, None, :]) * finfo.min")
def _():
    return padding_probe(bert_fn(bert()), ids(), PAD)


@case("bert_padding_minus_10000_ok", "padding", None, "(1.0 - mask) * -10000.0")
def _():
    return padding_probe(bert_fn(bert(mask_mode="minus_10000")), ids(), PAD)


@case(
    "bert_padding_query_and_key_ok",
    "padding",
    None,
    "mask on both axes (B, 1, T, T), finfo.min: padded rows are uniform, real rows unaffected",
)
def _():
    return padding_probe(bert_fn(bert(mask_mode="query_and_key")), ids(), PAD)


@case("bert_padding_mask_times_neg", "padding", "mask_convention", "extended mask = mask * -10000.0 (1 = real)")
def _():
    return padding_probe(bert_fn(bert(bug="mask_times_neg")), ids(), PAD)


@case("bert_padding_mask_not_passed", "padding", "no_padding_mask", "extended mask computed, layers called with None")
def _():
    return padding_probe(bert_fn(bert(bug="mask_not_passed")), ids(), PAD)


@case("bert_padding_mask_query_axis", "padding", "mask_wrong_axis", "attention_mask[:, None, :, None]")
def _():
    return padding_probe(bert_fn(bert(bug="mask_query_axis")), ids(), PAD)


@case(
    "bert_pad_id_mismatch",
    "padding",
    "no_padding_mask",
    "tokenizer pads with id 1, attention_mask computed as ids != 0",
)
def _():
    model = bert(pad_token_id=1)
    return padding_probe(bert_fn(model, pad=0), ids(low=2), 1)


@case("bert_classifier_ok", "padding", None, "pooler on [CLS] + classifier, (B, num_labels)")
def _():
    return padding_probe(bert_fn(bert(num_labels=5)), ids(), PAD)


@case(
    "bert_mask_no_head_axis",
    "batch",
    "batch_mixing",
    "attention_mask[:, None, :] (B, 1, T) added to (B, h, T, T): example b's mask lands on head b (B == h == 4)",
)
def _():
    model = bert(bug="mask_no_head_axis")
    x = padded_ids((8, 5, 6, 3))
    return batch_probe(lambda i, m: model(i, attention_mask=m), (x, (x != PAD).long()))


@case("bert_batch_ok", "batch", None, "(input_ids, attention_mask) tuple, padded batch")
def _():
    model = bert()
    x = padded_ids((8, 5, 6, 3))
    return batch_probe(lambda i, m: model(i, attention_mask=m), (x, (x != PAD).long()))


@case("bert_position_ids_zeros", "position", "no_positions", "position_ids defaulted to zeros_like(input_ids)")
def _():
    return position_probe(bert_fn(bert(bug="position_ids_zeros")), ids())


@case("bert_positions_ok", "position", None, "learned absolute position embeddings")
def _():
    return position_probe(bert_fn(bert()), ids())


@case("bert_classifier_logits_ok", "output", None, "sequence classifier logits (B, 5)")
def _():
    model = bert(num_labels=5)
    return output_probe(bert_fn(model)(ids(B=6)))


@case("bert_classifier_probs", "output", "probabilities", "sequence classifier returns softmax(logits)")
def _():
    model = bert(num_labels=5, output="probs")
    return output_probe(bert_fn(model)(ids(B=6)))


# ======================================================================================================
# 6. GPT-NeoX / Pythia
# ======================================================================================================


class NeoXRotaryEmbedding(nn.Module):
    def __init__(self, dim, max_position_embeddings=CTX, base=10000):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        t = torch.arange(max_position_embeddings).float()
        freqs = torch.einsum("i,j->ij", t, inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos_cached", emb.cos()[None, None, :, :], persistent=False)
        self.register_buffer("sin_cached", emb.sin()[None, None, :, :], persistent=False)

    def forward(self, seq_len):
        return self.cos_cached[:, :, :seq_len], self.sin_cached[:, :, :seq_len]


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin):
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


class NeoXAttention(nn.Module):
    def __init__(self, hidden, heads, rotary_pct=0.25, bug=None):
        super().__init__()
        self.num_attention_heads = heads
        self.head_size = hidden // heads
        self.hidden = hidden
        self.rotary_ndims = int(self.head_size * rotary_pct)
        self.rotary_emb = NeoXRotaryEmbedding(self.rotary_ndims)
        self.query_key_value = nn.Linear(hidden, 3 * hidden)
        self.dense = nn.Linear(hidden, hidden)
        self.bug = bug

    def forward(self, hidden_states):
        B, T, _ = hidden_states.shape
        qkv = self.query_key_value(hidden_states)
        qkv = qkv.view(B, T, self.num_attention_heads, 3 * self.head_size)
        query = qkv[..., : self.head_size].permute(0, 2, 1, 3)
        key = qkv[..., self.head_size : 2 * self.head_size].permute(0, 2, 1, 3)
        value = qkv[..., 2 * self.head_size :].permute(0, 2, 1, 3)
        query_rot, query_pass = query[..., : self.rotary_ndims], query[..., self.rotary_ndims :]
        key_rot, key_pass = key[..., : self.rotary_ndims], key[..., self.rotary_ndims :]
        cos, sin = self.rotary_emb(T)
        query_rot, key_rot = apply_rotary_pos_emb(query_rot, key_rot, cos, sin)
        query = torch.cat((query_rot, query_pass), dim=-1)
        key = torch.cat((key_rot, key_pass), dim=-1)
        if self.bug == "no_is_causal":
            out = F.scaled_dot_product_attention(query, key, value)
        elif self.bug == "sdpa_mask_true_blocked":
            out = F.scaled_dot_product_attention(query, key, value, attn_mask=blocked_future(T))
        else:
            out = F.scaled_dot_product_attention(query, key, value, is_causal=True)
        out = out.permute(0, 2, 1, 3).reshape(B, T, self.hidden)
        return self.dense(out)


class NeoXMLP(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.dense_h_to_4h = nn.Linear(hidden, 4 * hidden)
        self.dense_4h_to_h = nn.Linear(4 * hidden, hidden)

    def forward(self, x):
        return self.dense_4h_to_h(F.gelu(self.dense_h_to_4h(x)))


class NeoXLayer(nn.Module):
    def __init__(self, hidden, heads, bug):
        super().__init__()
        self.input_layernorm = nn.LayerNorm(hidden, eps=1e-5)
        self.post_attention_layernorm = nn.LayerNorm(hidden, eps=1e-5)
        self.attention = NeoXAttention(hidden, heads, bug=bug)
        self.mlp = NeoXMLP(hidden)
        self.use_parallel_residual = True

    def forward(self, x):
        attn_output = self.attention(self.input_layernorm(x))
        if self.use_parallel_residual:
            mlp_output = self.mlp(self.post_attention_layernorm(x))
            return mlp_output + attn_output + x
        x = attn_output + x
        return self.mlp(self.post_attention_layernorm(x)) + x


class NeoXModel(nn.Module):
    def __init__(self, num_layers=2, bug=None, output="logits"):
        super().__init__()
        self.embed_in = nn.Embedding(V, D)
        self.layers = nn.ModuleList([NeoXLayer(D, H, bug) for _ in range(num_layers)])
        self.final_layer_norm = nn.LayerNorm(D, eps=1e-5)
        self.embed_out = nn.Linear(D, V, bias=False)
        self.output = output
        std = math.sqrt(2.0 / (5 * D))  # NeoX small_init
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=std)
                if getattr(m, "bias", None) is not None:
                    nn.init.zeros_(m.bias)

    def forward(self, input_ids):
        x = self.embed_in(input_ids)
        for layer in self.layers:
            x = layer(x)
        logits = self.embed_out(self.final_layer_norm(x))
        if self.output == "log_softmax_dim1":
            return F.log_softmax(logits, dim=1)
        return logits


def neox(seed=0, **kw):
    torch.manual_seed(seed)
    return NeoXModel(**kw).eval()


@case("neox_parallel_residual_ok", "causality", None, "parallel residual, partial rotary, SDPA(is_causal=True)")
def _():
    model = neox()
    return causality_probe(lambda x: model(x), ids(), V)


@case(
    "neox_sdpa_no_is_causal",
    "causality",
    "no_causal_mask",
    "F.scaled_dot_product_attention(q, k, v): is_causal forgotten",
)
def _():
    model = neox(bug="no_is_causal")
    return causality_probe(lambda x: model(x), ids(), V)


@case(
    "neox_sdpa_mask_true_blocked",
    "causality",
    "mask_convention",
    "SDPA given attn_mask=triu(ones, 1).bool() (nn.MultiheadAttention's True = blocked; SDPA's True = keep)",
)
def _():
    model = neox(bug="sdpa_mask_true_blocked")
    return causality_probe(lambda x: model(x), ids(), V)


@case("neox_partial_rotary_positions_ok", "position", None, "rotary on a quarter of each head, 1 layer")
def _():
    model = neox(num_layers=1)
    return position_probe(lambda x: model(x), ids())


@case("neox_batch_ok", "batch", None, "NeoX LM")
def _():
    model = neox()
    return batch_probe(lambda x: model(x), ids())


@case("neox_log_softmax_dim1", "output", "log_softmax_axis", "F.log_softmax(logits, dim=1) on (B, T, V)")
def _():
    return output_probe(neox(output="log_softmax_dim1")(ids()))


# ======================================================================================================
# 7. Mistral sliding-window attention
# ======================================================================================================


def sliding_window_mask(T, W, bug=None):
    """True = may attend: key j is visible from query i when i - W < j <= i."""
    i = torch.arange(T).unsqueeze(1)
    j = torch.arange(T).unsqueeze(0)
    if bug == "window_forgets_causal":
        return (i - j) < W
    if bug == "window_tril_diagonal_1":
        ones = torch.ones(T, T, dtype=torch.bool)
        return torch.tril(ones, diagonal=1) & torch.triu(ones, diagonal=-(W - 1))
    return (j <= i) & ((i - j) < W)


class MistralRMSNorm(nn.Module):
    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.variance_epsilon = eps

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + self.variance_epsilon))


class MistralAttention(nn.Module):
    def __init__(self, hidden=D, heads=H, kv_heads=2, window=3, bug=None):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, hidden // heads
        self.q_proj = nn.Linear(hidden, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(heads * self.head_dim, hidden, bias=False)
        self.rotary_emb = NeoXRotaryEmbedding(self.head_dim)
        self.window, self.bug = window, bug

    def forward(self, x):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.kv_heads, self.head_dim).transpose(1, 2)
        cos, sin = self.rotary_emb(T)
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        k = k.repeat_interleave(self.heads // self.kv_heads, dim=1)
        v = v.repeat_interleave(self.heads // self.kv_heads, dim=1)
        keep = sliding_window_mask(T, self.window, self.bug)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
        return self.o_proj(out.transpose(1, 2).reshape(B, T, -1))


class MistralMLP(nn.Module):
    def __init__(self, hidden, inter):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, inter, bias=False)
        self.up_proj = nn.Linear(hidden, inter, bias=False)
        self.down_proj = nn.Linear(inter, hidden, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class MistralDecoderLayer(nn.Module):
    def __init__(self, window, bug):
        super().__init__()
        self.input_layernorm = MistralRMSNorm(D)
        self.self_attn = MistralAttention(window=window, bug=bug)
        self.post_attention_layernorm = MistralRMSNorm(D)
        self.mlp = MistralMLP(D, 64)

    def forward(self, x):
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class MistralModel(nn.Module):
    def __init__(self, num_layers=2, window=3, bug=None):
        super().__init__()
        self.embed_tokens = nn.Embedding(V, D)
        self.layers = nn.ModuleList([MistralDecoderLayer(window, bug) for _ in range(num_layers)])
        self.norm = MistralRMSNorm(D)
        self.lm_head = nn.Linear(D, V, bias=False)

    def forward(self, input_ids):
        x = self.embed_tokens(input_ids)
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.norm(x))


def mistral(seed=0, **kw):
    torch.manual_seed(seed)
    return MistralModel(**kw).eval()


@case("mistral_sliding_window_ok", "causality", None, "window 3 (itself included), 2 layers, SDPA bool True = keep")
def _():
    model = mistral()
    return causality_probe(lambda x: model(x), ids(), V)


@case(
    "mistral_window_forgets_causal",
    "causality",
    "no_causal_mask",
    "keep = (i - j) < W: the upper bound j <= i forgotten",
)
def _():
    model = mistral(bug="window_forgets_causal")
    return causality_probe(lambda x: model(x), ids(), V)


@case("mistral_window_tril_diagonal_1", "causality", "off_by_one_mask", "tril(diagonal=1) & triu(diagonal=-(W-1))")
def _():
    model = mistral(bug="window_tril_diagonal_1")
    return causality_probe(lambda x: model(x), ids(), V)


@case("mistral_rope_window_positions_ok", "position", None, "RoPE + sliding window, 1 layer")
def _():
    model = mistral(num_layers=1)
    return position_probe(lambda x: model(x), ids())


# ======================================================================================================
# 8. fairseq / OpenNMT encoder-decoder, (T, B, C) inside
# ======================================================================================================


def opennmt_pe(max_len, dim):
    pe = torch.zeros(max_len, dim)
    position = torch.arange(0, max_len).unsqueeze(1).float()
    div_term = torch.exp(torch.arange(0, dim, 2, dtype=torch.float) * -(math.log(10000.0) / dim))
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe


class FSMultiheadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, softmax_nodim=False):
        super().__init__()
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.head_dim = embed_dim // num_heads
        self.scaling = self.head_dim**-0.5
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)
        self.softmax_nodim = softmax_nodim

    def forward(self, query, key, value, key_padding_mask=None, attn_mask=None):
        tgt_len, bsz, embed_dim = query.size()
        src_len = key.size(0)
        q = self.q_proj(query) * self.scaling
        k = self.k_proj(key)
        v = self.v_proj(value)
        q = q.contiguous().view(tgt_len, bsz * self.num_heads, self.head_dim).transpose(0, 1)
        k = k.contiguous().view(src_len, bsz * self.num_heads, self.head_dim).transpose(0, 1)
        v = v.contiguous().view(src_len, bsz * self.num_heads, self.head_dim).transpose(0, 1)
        attn_weights = torch.bmm(q, k.transpose(1, 2))
        if attn_mask is not None:
            attn_weights = attn_weights + attn_mask.unsqueeze(0)
        if key_padding_mask is not None:
            attn_weights = attn_weights.view(bsz, self.num_heads, tgt_len, src_len)
            attn_weights = attn_weights.masked_fill(
                key_padding_mask.unsqueeze(1).unsqueeze(2).to(torch.bool), float("-inf")
            )
            attn_weights = attn_weights.view(bsz * self.num_heads, tgt_len, src_len)
        if self.softmax_nodim:
            attn_weights = F.softmax(attn_weights)
        else:
            attn_weights = F.softmax(attn_weights, dim=-1)
        attn = torch.bmm(attn_weights, v)
        attn = attn.transpose(0, 1).contiguous().view(tgt_len, bsz, embed_dim)
        return self.out_proj(attn)


class FSEncoderLayer(nn.Module):
    def __init__(self, softmax_nodim=False):
        super().__init__()
        self.self_attn = FSMultiheadAttention(D, H, softmax_nodim)
        self.self_attn_layer_norm = nn.LayerNorm(D)
        self.fc1 = nn.Linear(D, 64)
        self.fc2 = nn.Linear(64, D)
        self.final_layer_norm = nn.LayerNorm(D)

    def forward(self, x, encoder_padding_mask):
        residual = x
        x = self.self_attn(x, x, x, key_padding_mask=encoder_padding_mask)
        x = self.self_attn_layer_norm(residual + x)
        residual = x
        x = self.fc2(F.relu(self.fc1(x)))
        return self.final_layer_norm(residual + x)


class FSDecoderLayer(nn.Module):
    def __init__(self, bug=None, softmax_nodim=False):
        super().__init__()
        self.self_attn = FSMultiheadAttention(D, H, softmax_nodim)
        self.self_attn_layer_norm = nn.LayerNorm(D)
        self.encoder_attn = FSMultiheadAttention(D, H, softmax_nodim)
        self.encoder_attn_layer_norm = nn.LayerNorm(D)
        self.fc1 = nn.Linear(D, 64)
        self.fc2 = nn.Linear(64, D)
        self.final_layer_norm = nn.LayerNorm(D)
        self.bug = bug

    def forward(self, x, encoder_out, encoder_padding_mask, self_attn_mask):
        residual = x
        x = self.self_attn(x, x, x, attn_mask=self_attn_mask)
        x = self.self_attn_layer_norm(residual + x)
        residual = x
        if self.bug == "cross_queries_from_encoder":
            x = self.encoder_attn(encoder_out, x, x)
        elif self.bug == "no_memory_pad_mask":
            x = self.encoder_attn(x, encoder_out, encoder_out)
        else:
            x = self.encoder_attn(x, encoder_out, encoder_out, key_padding_mask=encoder_padding_mask)
        x = self.encoder_attn_layer_norm(residual + x)
        residual = x
        x = self.fc2(F.relu(self.fc1(x)))
        return self.final_layer_norm(residual + x)


class FSTransformer(nn.Module):
    def __init__(self, enc_layers=1, dec_layers=2, bug=None, embed_init="fairseq", softmax_nodim=False):
        super().__init__()
        self.embed_tokens = nn.Embedding(V, D, padding_idx=PAD)
        if embed_init == "fairseq":
            nn.init.normal_(self.embed_tokens.weight, mean=0, std=D**-0.5)
        with torch.no_grad():
            self.embed_tokens.weight[PAD].zero_()
        self.embed_scale = math.sqrt(D)
        self.register_buffer("pe", opennmt_pe(CTX, D), persistent=False)
        self.encoder_layers = nn.ModuleList([FSEncoderLayer(softmax_nodim) for _ in range(enc_layers)])
        self.decoder_layers = nn.ModuleList([FSDecoderLayer(bug, softmax_nodim) for _ in range(dec_layers)])
        self.output_projection = nn.Linear(D, V, bias=False)
        self.bug = bug

    def embed(self, tokens):  # (T, B)
        x = self.embed_scale * self.embed_tokens(tokens)
        pe = self.pe[: tokens.size(0)].unsqueeze(1)
        if self.bug == "pe_discarded":
            x.add(pe)
        else:
            x = x + pe
        return x

    def encode(self, src_tokens):  # (S, B)
        encoder_padding_mask = src_tokens.eq(PAD).transpose(0, 1)
        x = self.embed(src_tokens)
        for layer in self.encoder_layers:
            x = layer(x, encoder_padding_mask)
        return x, encoder_padding_mask

    def decode(self, prev_output_tokens, encoder_out, encoder_padding_mask):
        T = prev_output_tokens.size(0)
        future_mask = None
        if self.bug != "no_future_mask":
            future_mask = torch.triu(torch.full((T, T), float("-inf")), 1)
        x = self.embed(prev_output_tokens)
        for layer in self.decoder_layers:
            x = layer(x, encoder_out, encoder_padding_mask, future_mask)
        return self.output_projection(x)

    def forward(self, src_tokens, prev_output_tokens):  # (S, B), (T, B) -> (T, B, V)
        encoder_out, pad = self.encode(src_tokens)
        return self.decode(prev_output_tokens, encoder_out, pad)


def fairseq(seed=0, **kw):
    torch.manual_seed(seed)
    return FSTransformer(**kw).eval()


def batch_first(model):
    return lambda src, tgt: model(src.t(), tgt.t()).transpose(0, 1)


SRC = ids(3, 8, seed=7)


@case("fairseq_seq2seq_ok", "causality", None, "decoder output vs target tokens, source fixed, (T, B) inside")
def _():
    f = batch_first(fairseq())
    return causality_probe(lambda tgt: f(SRC, tgt), ids(seed=8), V, exclude=(PAD,))


@case("fairseq_no_future_mask", "causality", "no_causal_mask", "decoder self-attention called without the future mask")
def _():
    f = batch_first(fairseq(bug="no_future_mask"))
    return causality_probe(lambda tgt: f(SRC, tgt), ids(seed=8), V, exclude=(PAD,))


@case(
    "fairseq_cross_queries_from_encoder",
    "causality",
    "cross_attention_queries",
    "encoder_attn(encoder_out, x, x): queries from the encoder (source and target both length 8)",
)
def _():
    f = batch_first(fairseq(bug="cross_queries_from_encoder"))
    return causality_probe(lambda tgt: f(SRC, tgt), ids(seed=8), V, exclude=(PAD,))


@case(
    "fairseq_source_padding_ok",
    "padding",
    None,
    "pad the SOURCE; decoder output (B, T*V) per sequence with a fixed target",
)
def _():
    f = batch_first(fairseq())
    tgt = ids(3, 6, seed=9)
    return padding_probe(lambda src: f(src, tgt).flatten(1), ids(3, 8, seed=7), PAD)


@case("fairseq_no_memory_pad_mask", "padding", "no_padding_mask", "cross-attention without the encoder padding mask")
def _():
    f = batch_first(fairseq(bug="no_memory_pad_mask"))
    tgt = ids(3, 6, seed=9)
    return padding_probe(lambda src: f(src, tgt).flatten(1), ids(3, 8, seed=7), PAD)


@case("fairseq_softmax_without_dim", "batch", "batch_mixing", "F.softmax(attn_weights) on (B*h, T, S): implicit dim 0")
def _():
    f = batch_first(fairseq(softmax_nodim=True))
    return batch_probe(f, (ids(3, 8, seed=7), ids(3, 6, seed=9)))


@case(
    "fairseq_layout_not_transposed",
    "batch",
    "batch_mixing",
    "(B, T) ids given to the (T, B) model without .t(): attention runs across the batch "
    "(target as long as the source, else it crashes; fixed after the first run, see the docstring)",
)
def _():
    model = fairseq()
    return batch_probe(lambda src, tgt: model(src, tgt), (ids(3, 8, seed=7), ids(3, 8, seed=9)))


@case("fairseq_batch_ok", "batch", None, "(src, tgt) tuple, padded source")
def _():
    f = batch_first(fairseq())
    src = ids(3, 8, seed=7)
    src[1, 5:] = PAD
    return batch_probe(f, (src, ids(3, 6, seed=9)))


def fairseq_encoder_fn(model):
    return lambda src: model.encode(src.t())[0].transpose(0, 1)


@case("fairseq_encoder_positions_ok", "position", None, "embed_scale sqrt(d), embeddings N(0, d^-0.5), sinusoids")
def _():
    return position_probe(fairseq_encoder_fn(fairseq()), ids())


@case("fairseq_encoder_pe_discarded", "position", "no_positions", "x.add(pe) instead of x = x + pe")
def _():
    return position_probe(fairseq_encoder_fn(fairseq(bug="pe_discarded")), ids())


@case(
    "fairseq_embed_scale_default_init",
    "position",
    "weak_positions",
    "embed_scale sqrt(d) kept, but nn.Embedding's N(0, 1) init instead of N(0, d^-0.5)",
)
def _():
    return position_probe(fairseq_encoder_fn(fairseq(embed_init="default")), ids())


# Positional encoding tables, and embedding-level functions


def paper_pe_table(max_len, d):
    pe = torch.zeros(max_len, d, dtype=torch.float64)
    for pos in range(max_len):
        for i in range(0, d, 2):
            angle = pos / (10000 ** (i / d))
            pe[pos, i] = math.sin(angle)
            pe[pos, i + 1] = math.cos(angle)
    return pe.float()


@case("pe_table_opennmt_ok", "equality", None, "exp/log form of the paper's table")
def _():
    return equality_probe(opennmt_pe(50, D), paper_pe_table(50, D))


@case("pe_table_2i_twice", "equality", "2i_twice", "10000 ** (2 * i / d) with i in range(0, d, 2)")
def _():
    pe = torch.zeros(50, D)
    pos = torch.arange(50).float().unsqueeze(1)
    i = torch.arange(0, D, 2).float()
    pe[:, 0::2] = torch.sin(pos / 10000 ** (2 * i / D))
    pe[:, 1::2] = torch.cos(pos / 10000 ** (2 * i / D))
    return equality_probe(pe, paper_pe_table(50, D))


@case("pe_table_sin_cos_concat", "equality", "sin_cos_layout", "torch.cat([sin, cos], dim=1), as fairseq lays them out")
def _():
    pos = torch.arange(50).float().unsqueeze(1)
    freq = torch.exp(torch.arange(0, D, 2).float() * -(math.log(10000.0) / D))
    pe = torch.cat([torch.sin(pos * freq), torch.cos(pos * freq)], dim=1)
    return equality_probe(pe, paper_pe_table(50, D))


def embedding_layer(scale_pe=1.0, discard=False, seed=0):
    torch.manual_seed(seed)
    emb = nn.Embedding(V, D)
    pe = opennmt_pe(CTX, D)

    def fn(x):
        e = emb(x)
        if discard:
            e.add(pe[: x.shape[1]])
            return e
        return e + scale_pe * pe[: x.shape[1]]

    return fn


@case("embedding_plus_pe_ok", "position", None, "first-layer input only: nn.Embedding N(0,1) + sinusoids")
def _():
    return position_probe(embedding_layer(), ids())


@case("embedding_pe_scaled_down", "position", "weak_positions", "pe * 0.01 'so it does not disturb the embeddings'")
def _():
    return position_probe(embedding_layer(scale_pe=0.01), ids())


@case("embedding_pe_add_not_inplace", "position", "no_positions", "e.add(pe) whose result is dropped")
def _():
    return position_probe(embedding_layer(discard=True), ids())


# ======================================================================================================
# 9a. Flax/JAX-style model written in PyTorch (explicit mask arithmetic, dataclass output)
# ======================================================================================================


@dataclass
class FlaxCausalLMOutput:
    logits: torch.Tensor
    hidden_states: torch.Tensor | None = None


def flax_make_causal_mask(T):
    idxs = torch.arange(T)
    return (idxs[:, None] >= idxs[None, :]).float()[None, None]  # (1, 1, T, T), 1 = attend


def flax_dot_product_attention(query, key, value, mask=None, mode="where", bug=None):
    depth = query.shape[-1]
    query = query / math.sqrt(depth)
    attn_weights = torch.einsum("bqhd,bkhd->bhqk", query, key)
    if mask is not None:
        if bug == "multiply_only":
            attn_weights = attn_weights * mask
        elif mode == "arithmetic":
            attn_weights = attn_weights * mask + (1.0 - mask) * -1e9
        else:
            big_neg = torch.finfo(attn_weights.dtype).min
            attn_weights = torch.where(mask.bool(), attn_weights, big_neg)
    attn_weights = torch.softmax(attn_weights, dim=-1)
    return torch.einsum("bhqk,bkhd->bqhd", attn_weights, value)


def lecun_normal(shape, fan_in):
    return torch.randn(shape) / math.sqrt(fan_in)


class FlaxLayerNorm(nn.Module):
    def __init__(self, features, eps=1e-6, bug=None):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(features))
        self.bias = nn.Parameter(torch.zeros(features))
        self.eps, self.bug = eps, bug

    def forward(self, x):
        axes = (0, 1) if self.bug == "batch_stats" else (-1,)
        mean = x.mean(dim=axes, keepdim=True)
        mean2 = (x * x).mean(dim=axes, keepdim=True)
        var = torch.clamp(mean2 - mean * mean, min=0.0)
        y = (x - mean) * torch.rsqrt(var + self.eps)
        return y * self.scale + self.bias


class FlaxSelfAttention(nn.Module):
    def __init__(self, features=D, num_heads=H, mode="where", bug=None):
        super().__init__()
        hd = features // num_heads
        self.query_kernel = nn.Parameter(lecun_normal((features, num_heads, hd), features))
        self.key_kernel = nn.Parameter(lecun_normal((features, num_heads, hd), features))
        self.value_kernel = nn.Parameter(lecun_normal((features, num_heads, hd), features))
        self.out_kernel = nn.Parameter(lecun_normal((num_heads, hd, features), features))
        self.mode, self.bug = mode, bug

    def forward(self, x, mask):
        q = torch.einsum("btc,chd->bthd", x, self.query_kernel)
        k = torch.einsum("btc,chd->bthd", x, self.key_kernel)
        v = torch.einsum("btc,chd->bthd", x, self.value_kernel)
        y = flax_dot_product_attention(q, k, v, mask, self.mode, self.bug)
        return torch.einsum("bthd,hdc->btc", y, self.out_kernel)


class FlaxDecoderBlock(nn.Module):
    def __init__(self, mode, bug, ln_bug, dropout_rate):
        super().__init__()
        self.ln1 = FlaxLayerNorm(D, bug=ln_bug)
        self.attn = FlaxSelfAttention(mode=mode, bug=bug)
        self.ln2 = FlaxLayerNorm(D, bug=ln_bug)
        self.dense1 = nn.Parameter(lecun_normal((D, 4 * D), D))
        self.dense2 = nn.Parameter(lecun_normal((4 * D, D), 4 * D))
        self.dropout_rate = dropout_rate
        self.functional_dropout = bug == "functional_dropout"

    def forward(self, x, mask):
        y = self.attn(self.ln1(x), mask)
        if self.functional_dropout:
            y = F.dropout(y, self.dropout_rate)  # training defaults to True
        else:
            y = F.dropout(y, self.dropout_rate, training=self.training)
        x = x + y
        y = F.gelu(self.ln2(x) @ self.dense1) @ self.dense2
        return x + y


class FlaxLM(nn.Module):
    def __init__(self, num_layers=2, mode="where", bug=None, ln_bug=None, dropout_rate=0.1):
        super().__init__()
        self.embedding = nn.Parameter(torch.randn(V, D) / math.sqrt(D))
        self.pos_embedding = nn.Parameter(torch.randn(CTX, D) / math.sqrt(D))
        self.blocks = nn.ModuleList([FlaxDecoderBlock(mode, bug, ln_bug, dropout_rate) for _ in range(num_layers)])
        self.ln_f = FlaxLayerNorm(D, bug=ln_bug)

    def forward(self, input_ids):
        T = input_ids.shape[1]
        x = self.embedding[input_ids] + self.pos_embedding[:T]
        mask = flax_make_causal_mask(T)
        for blk in self.blocks:
            x = blk(x, mask)
        x = self.ln_f(x)
        return FlaxCausalLMOutput(logits=x @ self.embedding.T, hidden_states=x)


def flax_lm(seed=0, **kw):
    torch.manual_seed(seed)
    return FlaxLM(**kw).eval()


@case("flax_where_finfo_ok", "causality", None, "torch.where(mask, w, finfo.min), float 1 = attend mask")
def _():
    model = flax_lm()
    return causality_probe(lambda x: model(x).logits, ids(), V)


@case("flax_labml_arithmetic_ok", "causality", None, "w * m + (1 - m) * -1e9")
def _():
    model = flax_lm(mode="arithmetic")
    return causality_probe(lambda x: model(x).logits, ids(), V)


@case("flax_multiply_only", "causality", "no_causal_mask", "w * m: blocked scores become 0, not -inf")
def _():
    model = flax_lm(mode="arithmetic", bug="multiply_only")
    return causality_probe(lambda x: model(x).logits, ids(), V)


@case("flax_functional_dropout", "causality", "dropout_on", "F.dropout(y, rate) without training=: on even in eval()")
def _():
    model = flax_lm(bug="functional_dropout")
    return causality_probe(lambda x: model(x).logits, ids(), V)


@case("flax_layernorm_ok", "equality", None, "Flax LayerNorm: var = E[x^2] - E[x]^2, rsqrt, vs nn.LayerNorm(eps=1e-6)")
def _():
    torch.manual_seed(0)
    return equality_probe(FlaxLayerNorm(D), nn.LayerNorm(D, eps=1e-6), torch.randn(4, 8, D))


@case("labml_additive_float_mask_ok", "equality", None, "scores + (0 / -inf) float mask vs SDPA(is_causal=True)")
def _():
    def labml_attention(q, k, v):
        T = q.shape[-2]
        additive = torch.zeros(T, T).masked_fill(blocked_future(T), float("-inf"))
        scores = q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5 + additive
        return scores.softmax(dim=-1) @ v

    torch.manual_seed(0)
    qkv = [torch.randn(2, H, 8, 8) for _ in range(3)]
    return equality_probe(
        labml_attention, lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), *qkv
    )


@case("flax_layernorm_over_batch", "batch", "batch_mixing", "LayerNorm statistics over axes (0, 1): a batch norm")
def _():
    model = flax_lm(ln_bug="batch_stats")
    return batch_probe(lambda x: model(x).logits, ids())


@case("flax_batch_ok", "batch", None, "Flax-style LM")
def _():
    model = flax_lm()
    return batch_probe(lambda x: model(x).logits, ids())


@case("flax_dataclass_logits_ok", "output", None, "FlaxCausalLMOutput(...).logits, tied embedding head")
def _():
    return output_probe(flax_lm()(ids()).logits)


# ======================================================================================================
# 9b. ALiBi (BLOOM-style) causal attention, no position embedding
# ======================================================================================================


def alibi_slopes(n):
    start = 2 ** (-8 / n)
    return torch.tensor([start ** (i + 1) for i in range(n)])


class AlibiLM(nn.Module):
    def __init__(self, num_layers=1):
        super().__init__()
        self.word_embeddings = nn.Embedding(V, D)
        self.ln_emb = nn.LayerNorm(D)
        self.qkv = nn.ModuleList([nn.Linear(D, 3 * D) for _ in range(num_layers)])
        self.dense = nn.ModuleList([nn.Linear(D, D) for _ in range(num_layers)])
        self.ln = nn.ModuleList([nn.LayerNorm(D) for _ in range(num_layers)])
        self.ln_f = nn.LayerNorm(D)
        self.lm_head = nn.Linear(D, V, bias=False)
        self.register_buffer("slopes", alibi_slopes(H), persistent=False)

    def forward(self, input_ids):
        B, T = input_ids.shape
        x = self.ln_emb(self.word_embeddings(input_ids))
        i = torch.arange(T)[:, None]
        j = torch.arange(T)[None, :]
        bias = -self.slopes[:, None, None] * (i - j).clamp(min=0).float()
        bias = bias.masked_fill(j > i, float("-inf"))
        for qkv, dense, ln in zip(self.qkv, self.dense, self.ln):
            q, k, v = qkv(ln(x)).view(B, T, 3, H, D // H).permute(2, 0, 3, 1, 4)
            scores = q @ k.transpose(-1, -2) / math.sqrt(D // H) + bias
            x = x + dense((scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D))
        return self.lm_head(self.ln_f(x))


@case("alibi_causal_ok", "causality", None, "ALiBi bias + -inf above the diagonal")
def _():
    torch.manual_seed(0)
    model = AlibiLM().eval()
    return causality_probe(lambda x: model(x), ids(), V)


@case("alibi_positions_ok", "position", None, "ALiBi, no added encoding, 1 layer")
def _():
    torch.manual_seed(0)
    model = AlibiLM().eval()
    return position_probe(lambda x: model(x), ids())


# ======================================================================================================
# 9c. Models assembled from PyTorch's own nn.MultiheadAttention / nn.TransformerEncoderLayer
# ======================================================================================================


class TorchNativeLM(nn.Module):
    def __init__(self, causal="float", pad_mask=None, num_layers=1):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.pos = nn.Embedding(CTX, D)
        self.attn = nn.ModuleList([nn.MultiheadAttention(D, H, batch_first=True) for _ in range(num_layers)])
        self.ln1 = nn.ModuleList([nn.LayerNorm(D) for _ in range(num_layers)])
        self.ff = nn.ModuleList(
            [nn.Sequential(nn.Linear(D, 64), nn.ReLU(), nn.Linear(64, D)) for _ in range(num_layers)]
        )
        self.ln2 = nn.ModuleList([nn.LayerNorm(D) for _ in range(num_layers)])
        self.head = nn.Linear(D, V)
        self.causal, self.pad_mask = causal, pad_mask

    def forward(self, ids_):
        _B, T = ids_.shape
        x = self.emb(ids_) + self.pos(torch.arange(T))
        if self.causal == "float":
            m = nn.Transformer.generate_square_subsequent_mask(T)
        elif self.causal == "tril_bool":
            m = torch.tril(torch.ones(T, T, dtype=torch.bool))
        else:
            m = None
        kpm = None
        if self.pad_mask == "ok":
            kpm = ids_ == PAD
        elif self.pad_mask == "flipped":
            kpm = ids_ != PAD
        for attn, ln1, ff, ln2 in zip(self.attn, self.ln1, self.ff, self.ln2):
            h = ln1(x)
            a, _ = attn(h, h, h, attn_mask=m, key_padding_mask=kpm, need_weights=False)
            x = x + a
            x = x + ff(ln2(x))
        return self.head(x)


def torch_native(seed=0, **kw):
    torch.manual_seed(seed)
    return TorchNativeLM(**kw).eval()


@case(
    "torch_mha_square_subsequent_ok", "causality", None, "nn.Transformer.generate_square_subsequent_mask (float -inf)"
)
def _():
    model = torch_native(num_layers=2)
    return causality_probe(lambda x: model(x), ids(), V)


@case(
    "torch_mha_tril_bool_mask",
    "causality",
    "mask_convention",
    "attn_mask=torch.tril(ones).bool() given to nn.MultiheadAttention (True = blocked there)",
)
def _():
    model = torch_native(causal="tril_bool")
    return causality_probe(lambda x: model(x), ids(), V)


@case("torch_mha_key_padding_flipped", "padding", "mask_convention", "key_padding_mask=(ids != pad): True = real token")
def _():
    model = torch_native(causal=None, pad_mask="flipped")
    return padding_probe(lambda x: model(x), ids(), PAD)


@case("torch_mha_key_padding_ok", "padding", None, "key_padding_mask=(ids == pad), bidirectional")
def _():
    model = torch_native(causal=None, pad_mask="ok")
    return padding_probe(lambda x: model(x), ids(), PAD)


@case(
    "torch_encoder_layer_not_batch_first",
    "batch",
    "batch_mixing",
    "nn.TransformerEncoderLayer (batch_first=False by default) given (B, T, E)",
)
def _():
    torch.manual_seed(0)
    emb = nn.Embedding(V, D)
    layer = nn.TransformerEncoderLayer(D, H, dim_feedforward=64, dropout=0.1).eval()
    return batch_probe(lambda x: layer(emb(x)), ids())


# ======================================================================================================
# scorecard
# ======================================================================================================


def run_case(c):
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with torch.no_grad():
                rep = c["fn"]()
        err = None
    except Exception as e:  # a crash counts as a failure
        rep, err = None, f"{type(e).__name__}: {e}"
    dt = time.perf_counter() - t0
    flagged = bool(rep is not None and rep.flagged)
    causes = tuple(rep.causes) if rep is not None else ()
    if c["expected"] is None:
        verdict = "quiet" if (rep is not None and not flagged) else "FALSE ALARM"
    elif flagged and c["expected"] in causes:
        verdict = "right cause"
    elif flagged:
        verdict = "flagged, wrong cause"
    else:
        verdict = "missed"
    return dict(case=c, report=rep, error=err, flagged=flagged, causes=causes, verdict=verdict, seconds=dt)


def main():
    t0 = time.perf_counter()
    results = [run_case(c) for c in CASES]
    print(f"{'case':42s} {'probe':10s} {'expected':24s} {'flag':5s} {'verdict':21s} causes")
    for r in results:
        c = r["case"]
        print(
            f"{c['name']:42s} {c['probe']:10s} {c['expected']!s:24s} {r['flagged']!s:5s} "
            f"{r['verdict']:21s} {r['causes']}"
        )
    bad = [r for r in results if r["verdict"] not in ("right cause", "quiet")]
    if bad:
        print("\n--- details of cases that went wrong ---")
        for r in bad:
            c = r["case"]
            print(f"\n[{r['verdict']}] {c['name']} ({c['probe']}, expected {c['expected']}): {c['note']}")
            print(f"  error: {r['error']}" if r["error"] else "  " + str(r["report"]).replace("\n", "\n  "))
    bugs = [r for r in results if r["case"]["expected"] is not None]
    good = [r for r in results if r["case"]["expected"] is None]
    n_flag = sum(r["flagged"] for r in bugs)
    n_right = sum(r["verdict"] == "right cause" for r in bugs)
    n_false = sum(r["verdict"] == "FALSE ALARM" for r in good)
    print("\nper probe (bugs right cause / bugs, false alarms / correct):")
    for probe in ("causality", "equality", "padding", "position", "batch", "output"):
        pb = [r for r in bugs if r["case"]["probe"] == probe]
        pg = [r for r in good if r["case"]["probe"] == probe]
        print(
            f"  {probe:10s} flagged {sum(r['flagged'] for r in pb)}/{len(pb)}, right cause "
            f"{sum(r['verdict'] == 'right cause' for r in pb)}/{len(pb)}, false alarms "
            f"{sum(r['verdict'] == 'FALSE ALARM' for r in pg)}/{len(pg)}"
        )
    print(f"\nbugs flagged: {n_flag}/{len(bugs)}")
    print(f"bugs with the right cause: {n_right}/{len(bugs)}")
    print(f"false alarms: {n_false}/{len(good)}")
    print(f"errors: {sum(r['error'] is not None for r in results)}; time {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
