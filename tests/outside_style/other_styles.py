"""A second suite for the probes (course_utils/teaching/probes.py), written apart from ``cases.py`` and run once
before the probes were adjusted to it: 57 of 58 planted bugs flagged, 57 with their cause, 3 false alarms in 38
correct modules (the probes now pass it, but for one limitation: see tests/test_probes_outside_style.py).

Modules written from scratch in styles other than nanoGPT / Annotated Transformer / HF:
  * d2l.ai (masked_softmax with valid_lens, transpose_qkv/transpose_output, PositionalEncoding X = pos/10000^(2i/d),
    AddNorm, post-norm encoder blocks, decoder causal via dec_valid_lens)
  * lucidrains/x-transformers (pre-norm, qkv chunk, rearrange by hand, rotary / learned absolute positions,
    True = keep masks filled with -finfo.max)
  * PyTorch word-language-model tutorial / fairseq (nn.TransformerEncoder, (T, B) inputs, additive float
    generate_square_subsequent_mask, src_key_padding_mask)
  * Keras-like attention layer with use_causal_mask and attention_mask (1 = attend)
  * T5-like clipped relative position bias
Every case names its expected cause code (or None for a correct module) BEFORE the probe runs.

Run: python -m tests.outside_style.other_styles  [-v]   (from the repository's root)
"""

from __future__ import annotations

import math
import sys
import time
import traceback
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

from course_utils.teaching.probes import (
    CAUSES,
    batch_probe,
    causality_probe,
    equality_probe,
    output_probe,
    padding_probe,
    position_probe,
)

warnings.filterwarnings("ignore")

V = 40  # vocabulary
PAD = 0  # padding id
D = 32  # d_model
H = 4  # heads

CASES = []


def case(name, probe, expected, note=""):
    """expected: a cause code of CAUSES for a bug, None for a correct module."""
    assert expected is None or expected in CAUSES, expected

    def deco(fn):
        CASES.append(dict(name=name, probe=probe, expected=expected, note=note, fn=fn))
        return fn

    return deco


def toks(B, T, seed, pad_tail=None):
    g = torch.Generator().manual_seed(seed)
    t = torch.randint(1, V, (B, T), generator=g)
    if pad_tail:
        for b, n in enumerate(pad_tail):
            if n:
                t[b, T - n :] = PAD
    return t


# ==================================================================================================== d2l.ai style
def sequence_mask(X, valid_len, value=0.0):
    maxlen = X.size(1)
    mask = torch.arange(maxlen, dtype=torch.float32, device=X.device)[None, :] < valid_len[:, None]
    X[~mask] = value
    return X


def masked_softmax(X, valid_lens, axis=-1):
    """X: (B*, Tq, Tk); valid_lens: (B*,) or (B*, Tq)."""
    if valid_lens is None:
        return F.softmax(X, dim=axis)
    shape = X.shape
    if valid_lens.dim() == 1:
        valid_lens = torch.repeat_interleave(valid_lens, shape[1])
    else:
        valid_lens = valid_lens.reshape(-1)
    X = sequence_mask(X.reshape(-1, shape[-1]), valid_lens, value=-1e6)
    return F.softmax(X.reshape(shape), dim=axis)


class DotProductAttention(nn.Module):
    def __init__(self, dropout, bugs=()):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.bugs = set(bugs)
        self.d_model = None  # set by the owner, for the sqrt(d_model) bug

    def forward(self, queries, keys, values, valid_lens=None):
        d = queries.shape[-1]
        scores = queries @ keys.transpose(1, 2)
        if "no_scale" in self.bugs:
            pass
        elif "scale_dmodel" in self.bugs:
            scores = scores / math.sqrt(self.d_model)
        elif "scale_twice" in self.bugs:
            scores = scores / math.sqrt(d) / math.sqrt(d)
        else:
            scores = scores / math.sqrt(d)
        axis = -2 if "softmax_queries" in self.bugs else -1
        self.attention_weights = masked_softmax(scores, valid_lens, axis=axis)
        return self.dropout(self.attention_weights) @ values


def transpose_qkv(X, num_heads, bug=False):
    B, T, _ = X.shape
    if bug:  # view(B, h, T, d_k) without the transpose
        return X.reshape(B, num_heads, T, -1).reshape(-1, T, X.shape[-1] // num_heads)
    X = X.reshape(B, T, num_heads, -1).permute(0, 2, 1, 3)
    return X.reshape(-1, X.shape[2], X.shape[3])


def transpose_output(X, num_heads, bug=False):
    if bug:  # (B*h, T, d_k) -> (B, T, h*d_k) without the transpose
        return X.reshape(-1, X.shape[1], X.shape[2] * num_heads)
    X = X.reshape(-1, num_heads, X.shape[1], X.shape[2])
    X = X.permute(0, 2, 1, 3)
    return X.reshape(X.shape[0], X.shape[1], -1)


class D2LMultiHeadAttention(nn.Module):
    def __init__(self, num_hiddens, num_heads, dropout=0.0, bias=False, bugs=()):
        super().__init__()
        self.num_heads = num_heads
        self.bugs = set(bugs)
        self.attention = DotProductAttention(dropout, bugs)
        self.attention.d_model = num_hiddens
        self.W_q = nn.Linear(num_hiddens, num_hiddens, bias=bias)
        self.W_k = nn.Linear(num_hiddens, num_hiddens, bias=bias)
        self.W_v = nn.Linear(num_hiddens, num_hiddens, bias=bias)
        self.W_o = nn.Linear(num_hiddens, num_hiddens, bias=bias)

    def forward(self, queries, keys, values, valid_lens=None):
        split_bug = "split_no_transpose" in self.bugs
        queries = transpose_qkv(self.W_q(queries), self.num_heads, split_bug)
        keys = transpose_qkv(self.W_k(keys), self.num_heads, split_bug)
        values = transpose_qkv(self.W_v(values), self.num_heads, split_bug)
        if valid_lens is not None:
            valid_lens = torch.repeat_interleave(valid_lens, repeats=self.num_heads, dim=0)
        output = self.attention(queries, keys, values, valid_lens)
        output_concat = transpose_output(output, self.num_heads, "merge_no_transpose" in self.bugs)
        return self.W_o(output_concat)

    def with_weights(self, q, k, v, valid_lens=None):
        out = self(q, k, v, valid_lens)
        w = self.attention.attention_weights
        B, Tq, Tk = q.shape[0], w.shape[1], w.shape[2]
        return out, w.reshape(B, self.num_heads, Tq, Tk)


def d2l_pe_table(d, max_len=100, bug=None):
    P = torch.zeros((1, max_len, d))
    if bug == "2i_twice":
        X = torch.arange(max_len, dtype=torch.float32).reshape(-1, 1) / torch.pow(
            10000, 2 * torch.arange(0, d, 2, dtype=torch.float32) / d
        )
    else:
        X = torch.arange(max_len, dtype=torch.float32).reshape(-1, 1) / torch.pow(
            10000, torch.arange(0, d, 2, dtype=torch.float32) / d
        )
    if bug == "sin_cos_layout":
        P[:, :, :] = torch.cat([torch.sin(X), torch.cos(X)], dim=-1)
    else:
        P[:, :, 0::2] = torch.sin(X)
        P[:, :, 1::2] = torch.cos(X)
    return P


class D2LPositionalEncoding(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=100, bug=None):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.bug = bug
        self.P = d2l_pe_table(num_hiddens, max_len, bug if bug in ("2i_twice", "sin_cos_layout") else None)

    def forward(self, X):
        if self.bug == "not_assigned":
            X + self.P[:, : X.shape[1], :].to(X.device)
        elif self.bug == "scaled_down":
            X = X + 0.01 * self.P[:, : X.shape[1], :]
        else:
            X = X + self.P[:, : X.shape[1], :].to(X.device)
        return self.dropout(X)


class AddNorm(nn.Module):
    def __init__(self, norm_shape, dropout):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.ln = nn.LayerNorm(norm_shape)

    def forward(self, X, Y):
        return self.ln(self.dropout(Y) + X)


class PositionWiseFFN(nn.Module):
    def __init__(self, ffn_num_hiddens, ffn_num_outputs):
        super().__init__()
        self.dense1 = nn.Linear(ffn_num_outputs, ffn_num_hiddens)
        self.relu = nn.ReLU()
        self.dense2 = nn.Linear(ffn_num_hiddens, ffn_num_outputs)

    def forward(self, X):
        return self.dense2(self.relu(self.dense1(X)))


class D2LBlock(nn.Module):
    def __init__(self, num_hiddens, ffn_num_hiddens, num_heads, dropout, bugs=()):
        super().__init__()
        self.attention = D2LMultiHeadAttention(num_hiddens, num_heads, dropout, bugs=bugs)
        self.addnorm1 = AddNorm(num_hiddens, dropout)
        self.ffn = PositionWiseFFN(ffn_num_hiddens, num_hiddens)
        self.addnorm2 = AddNorm(num_hiddens, dropout)

    def forward(self, X, valid_lens):
        Y = self.addnorm1(X, self.attention(X, X, X, valid_lens))
        return self.addnorm2(Y, self.ffn(Y))


class D2LEncoder(nn.Module):
    """Bidirectional encoder (causal=False) or decoder-only LM in d2l's way: dec_valid_lens = 1..T in training,
    None in eval (d2l's decoder decodes one step at a time at inference)."""

    def __init__(
        self,
        vocab_size,
        num_hiddens,
        ffn_num_hiddens,
        num_heads,
        num_blks,
        dropout,
        pe_bug=None,
        causal=False,
        causal_lens="train_only",
        emb_scale=True,
        bugs=(),
    ):
        super().__init__()
        self.num_hiddens = num_hiddens
        self.embedding = nn.Embedding(vocab_size, num_hiddens)
        self.pos_encoding = D2LPositionalEncoding(num_hiddens, dropout, bug=pe_bug)
        self.blks = nn.Sequential()
        for i in range(num_blks):
            self.blks.add_module(f"block{i}", D2LBlock(num_hiddens, ffn_num_hiddens, num_heads, dropout, bugs))
        self.causal, self.causal_lens = causal, causal_lens
        self.emb_scale = emb_scale
        self.head = nn.Linear(num_hiddens, vocab_size)

    def forward(self, X, valid_lens=None):
        B, T = X.shape
        emb = self.embedding(X) * (math.sqrt(self.num_hiddens) if self.emb_scale else 1.0)
        X = self.pos_encoding(emb)
        if self.causal:
            if self.causal_lens == "always":
                valid_lens = torch.arange(1, T + 1).repeat(B, 1)
            elif self.causal_lens == "off_by_one":
                valid_lens = torch.arange(2, T + 2).repeat(B, 1)
            else:  # d2l: only in training
                valid_lens = torch.arange(1, T + 1).repeat(B, 1) if self.training else None
        for blk in self.blks:
            X = blk(X, valid_lens)
        return self.head(X)


def d2l_model(seed, **kw):
    torch.manual_seed(seed)
    args = dict(vocab_size=V, num_hiddens=D, ffn_num_hiddens=48, num_heads=H, num_blks=2, dropout=0.1)
    args.update(kw)
    return D2LEncoder(**args).eval()


# ============================================================================================ x-transformers style
def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rotary(n, dim_head):
    inv_freq = 1.0 / (10000 ** (torch.arange(0, dim_head, 2).float() / dim_head))
    freqs = torch.outer(torch.arange(n).float(), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


class RelBias(nn.Module):
    """T5-like: a learned bias per head for each (clipped) relative distance key - query."""

    def __init__(self, heads, max_distance=8, causal=False):
        super().__init__()
        self.max_distance, self.causal = max_distance, causal
        self.emb = nn.Embedding(2 * max_distance + 1, heads)
        nn.init.normal_(self.emb.weight, std=1.0)

    def forward(self, n):
        q = torch.arange(n)[:, None]
        k = torch.arange(n)[None, :]
        rel = (k - q).clamp(-self.max_distance, self.max_distance) + self.max_distance
        return self.emb(rel).permute(2, 0, 1)  # (h, n, n)


class XAttention(nn.Module):
    def __init__(self, dim, heads=H, causal=False, use_rotary=False, rel_bias=None, dropout=0.0, bugs=()):
        super().__init__()
        self.heads, self.causal, self.use_rotary, self.rel_bias = heads, causal, use_rotary, rel_bias
        self.scale = (dim // heads) ** -0.5
        self.to_qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.to_out = nn.Linear(dim, dim)
        self.attn_dropout = nn.Dropout(dropout)
        self.bugs = set(bugs)

    def forward(self, x, mask=None):  # mask: (b, n) True = keep (x-transformers convention)
        b, n, _ = x.shape
        h = self.heads
        q, k, v = self.to_qkv(x).chunk(3, dim=-1)
        q, k, v = (t.reshape(b, n, h, -1).transpose(1, 2) for t in (q, k, v))  # 'b n (h d) -> b h n d'
        if self.use_rotary:
            cos, sin = rotary(n, q.shape[-1])
            q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        dots = (q @ k.transpose(-1, -2)) * self.scale
        if self.rel_bias is not None:
            dots = dots + self.rel_bias(n)
        mask_value = -torch.finfo(dots.dtype).max
        if mask is not None:
            if "mask_query_axis" in self.bugs:
                dots = dots.masked_fill(~mask[:, None, :, None], mask_value)
            elif "mask_query_axis_inf" in self.bugs:
                dots = dots.masked_fill(~mask[:, None, :, None], float("-inf"))
            else:
                dots = dots.masked_fill(~mask[:, None, None, :], mask_value)
        if self.causal:
            diag = 2 if "off_by_one" in self.bugs else 1
            causal_mask = torch.ones(n, n, dtype=torch.bool).triu(diag)
            if "mask_not_assigned" in self.bugs:
                dots.masked_fill(causal_mask, mask_value)  # result thrown away
            else:
                dots = dots.masked_fill(causal_mask, mask_value)
        attn = dots.softmax(dim=0 if "softmax_dim0" in self.bugs else -1)
        attn = self.attn_dropout(attn)
        out = attn @ v
        out = out.transpose(1, 2).reshape(b, n, -1)  # 'b h n d -> b n (h d)'
        return self.to_out(out)


class FeedForward(nn.Module):
    def __init__(self, dim, mult=2, dropout=0.0):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim, dim * mult), nn.GELU(), nn.Dropout(dropout), nn.Linear(dim * mult, dim))

    def forward(self, x):
        return self.net(x)


class XTransformer(nn.Module):
    def __init__(
        self,
        num_tokens=V,
        dim=D,
        depth=2,
        heads=H,
        causal=False,
        pos="none",
        max_seq_len=64,
        dropout=0.0,
        bugs=(),
        causal_flag_forgotten=False,
    ):
        super().__init__()
        self.token_emb = nn.Embedding(num_tokens, dim)
        self.pos = pos
        self.pos_emb = nn.Embedding(max_seq_len, dim) if pos == "abs" else None
        attn_causal = causal and not causal_flag_forgotten
        self.layers = nn.ModuleList()
        for _ in range(depth):
            rb = RelBias(heads, causal=causal) if pos == "relbias" else None
            self.layers.append(
                nn.ModuleList(
                    [
                        nn.LayerNorm(dim),
                        XAttention(
                            dim,
                            heads,
                            causal=attn_causal,
                            use_rotary=(pos == "rotary"),
                            rel_bias=rb,
                            dropout=dropout,
                            bugs=bugs,
                        ),
                        nn.LayerNorm(dim),
                        FeedForward(dim, dropout=dropout),
                    ]
                )
            )
        self.norm = nn.LayerNorm(dim)
        self.to_logits = nn.Linear(dim, num_tokens)

    def forward(self, x, mask=None):
        n = x.shape[1]
        x = self.token_emb(x)
        if self.pos_emb is not None:
            x = x + self.pos_emb(torch.arange(n))
        for norm1, attn, norm2, ff in self.layers:
            x = attn(norm1(x), mask=mask) + x
            x = ff(norm2(x)) + x
        return self.to_logits(self.norm(x))


def xmodel(seed, train=False, **kw):
    torch.manual_seed(seed)
    m = XTransformer(**kw)
    return m.train() if train else m.eval()


# ============================================================== PyTorch word-language-model tutorial / fairseq style
def generate_square_subsequent_mask(sz, diagonal=1):
    return torch.triu(torch.full((sz, sz), float("-inf")), diagonal=diagonal)


class TutorialPE(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=64):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, 1, d_model)
        pe[:, 0, 0::2] = torch.sin(position * div_term)
        pe[:, 0, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x):  # x: (T, B, d)
        x = x + self.pe[: x.size(0)]
        return self.dropout(x)


class TutorialLM(nn.Module):
    def __init__(
        self, ntoken=V, d_model=D, nhead=H, d_hid=48, nlayers=2, dropout=0.1, batch_first=False, emb_init="uniform"
    ):
        super().__init__()
        self.batch_first = batch_first
        self.pos_encoder = TutorialPE(d_model, dropout)
        layer = nn.TransformerEncoderLayer(d_model, nhead, d_hid, dropout, batch_first=batch_first)
        self.transformer_encoder = nn.TransformerEncoder(layer, nlayers, enable_nested_tensor=False)
        self.embedding = nn.Embedding(ntoken, d_model)
        self.d_model = d_model
        self.linear = nn.Linear(d_model, ntoken)
        if emb_init == "uniform":
            self.embedding.weight.data.uniform_(-0.1, 0.1)  # the tutorial's init_weights
        # else: nn.Embedding's N(0, 1)

    def forward(self, src, src_mask=None, src_key_padding_mask=None):
        src = self.embedding(src) * math.sqrt(self.d_model)
        src = self.pos_encoder(src)
        output = self.transformer_encoder(src, src_mask, src_key_padding_mask=src_key_padding_mask)
        return self.linear(output)


def tut_model(seed, **kw):
    torch.manual_seed(seed)
    return TutorialLM(**kw).eval()


def tut_fn(model, mask_fn=None, kpm_fn=None):
    """(B, T) ids -> (B, T, V) through a (T, B) model."""

    def fn(tokens):
        T = tokens.size(1)
        mask = mask_fn(T) if mask_fn else None
        kpm = kpm_fn(tokens) if kpm_fn else None
        return model(tokens.t(), mask, kpm).transpose(0, 1)

    return fn


# ================================================================================================ Keras-like layer
class KerasMHA(nn.Module):
    """call(query, value, key=None, attention_mask=None, use_causal_mask=False); attention_mask 1/True = attend."""

    def __init__(self, num_heads, key_dim):
        super().__init__()
        self.h, self.dk = num_heads, key_dim
        dm = num_heads * key_dim
        self.q, self.k, self.v, self.o = (nn.Linear(dm, dm) for _ in range(4))

    def forward(self, query, value, key=None, attention_mask=None, use_causal_mask=False):
        key = value if key is None else key
        B, Tq, _ = query.shape
        Tk = key.shape[1]
        q = self.q(query).view(B, Tq, self.h, self.dk).transpose(1, 2)
        k = self.k(key).view(B, Tk, self.h, self.dk).transpose(1, 2)
        v = self.v(value).view(B, Tk, self.h, self.dk).transpose(1, 2)
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.dk)
        keep = torch.ones(B, 1, Tq, Tk, dtype=torch.bool)
        if attention_mask is not None:
            keep = (
                keep & attention_mask.bool().reshape(B, 1, Tq, Tk)
                if attention_mask.dim() == 3
                else keep & attention_mask.bool()
            )
        if use_causal_mask:
            keep = keep & torch.ones(Tq, Tk, dtype=torch.bool).tril()
        scores = torch.where(keep, scores, torch.full_like(scores, -1e9))
        w = scores.softmax(-1)
        return self.o((w @ v).transpose(1, 2).reshape(B, Tq, -1))


class KerasLM(nn.Module):
    def __init__(self, causal_flag=True, layers=2):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.pos = nn.Embedding(64, D)
        self.att = nn.ModuleList(KerasMHA(H, D // H) for _ in range(layers))
        self.ln = nn.ModuleList(nn.LayerNorm(D) for _ in range(layers))
        self.out = nn.Linear(D, V)
        self.causal_flag = causal_flag

    def forward(self, x):
        h = self.emb(x) + self.pos(torch.arange(x.shape[1]))
        for att, ln in zip(self.att, self.ln):
            h = ln(h + att(h, h, use_causal_mask=self.causal_flag))
        return self.out(h)


# ================================================================ hand-written block around nn.MultiheadAttention / SDPA
class TorchMHABlockLM(nn.Module):
    """Embedding + learned positions + N post-norm blocks of nn.MultiheadAttention (batch_first) with a mask from
    mask_fn(T); mode='sdpa' uses F.scaled_dot_product_attention (True = attend) instead."""

    def __init__(self, mask_fn, layers=1, mode="mha", is_causal=False):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.pos = nn.Embedding(64, D)
        self.attn = nn.ModuleList(nn.MultiheadAttention(D, H, batch_first=True) for _ in range(layers))
        self.ln = nn.ModuleList(nn.LayerNorm(D) for _ in range(layers))
        self.out = nn.Linear(D, V)
        self.mask_fn, self.mode, self.is_causal = mask_fn, mode, is_causal

    def _sdpa(self, mha, x, mask):
        B, T, _ = x.shape
        q, k, v = F.linear(x, mha.in_proj_weight, mha.in_proj_bias).chunk(3, -1)
        q, k, v = (t.view(B, T, H, D // H).transpose(1, 2) for t in (q, k, v))
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=self.is_causal)
        return mha.out_proj(o.transpose(1, 2).reshape(B, T, D))

    def forward(self, x):
        T = x.shape[1]
        h = self.emb(x) + self.pos(torch.arange(T))
        mask = self.mask_fn(T) if self.mask_fn else None
        for attn, ln in zip(self.attn, self.ln):
            if self.mode == "sdpa":
                a = self._sdpa(attn, h, mask)
            else:
                a = attn(h, h, h, attn_mask=mask, need_weights=False)[0]
            h = ln(h + a)
        return self.out(h)


class HandMaskLM(nn.Module):
    """Hand-written single-head-per-block attention with masked_fill(mask == <fill_where>, -inf) and a tril mask."""

    def __init__(self, fill_where, layers=1):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.pos = nn.Embedding(64, D)
        self.qkv = nn.ModuleList(nn.Linear(D, 3 * D) for _ in range(layers))
        self.out = nn.Linear(D, V)
        self.fill_where = fill_where

    def forward(self, x):
        T = x.shape[1]
        h = self.emb(x) + self.pos(torch.arange(T))
        mask = torch.tril(torch.ones(T, T))  # 1 = may attend
        for qkv in self.qkv:
            q, k, v = qkv(h).chunk(3, -1)
            s = q @ k.transpose(-1, -2) / math.sqrt(D)
            s = s.masked_fill(mask == self.fill_where, float("-inf"))
            h = h + s.softmax(-1) @ v
        return self.out(h)


class EncDec(nn.Module):
    """Encoder (nn.TransformerEncoderLayer) + hand-written decoder layer: causal self-attention, then
    cross-attention; queries_from_encoder=True swaps the cross-attention's query and key/value."""

    def __init__(self, queries_from_encoder=False):
        super().__init__()
        self.src_emb = nn.Embedding(V, D)
        self.tgt_emb = nn.Embedding(V, D)
        self.pos = nn.Embedding(64, D)
        self.enc = nn.TransformerEncoderLayer(D, H, 48, 0.0, batch_first=True)
        self.self_attn = nn.MultiheadAttention(D, H, batch_first=True)
        self.cross_attn = nn.MultiheadAttention(D, H, batch_first=True)
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.out = nn.Linear(D, V)
        self.qfe = queries_from_encoder

    def forward(self, src, tgt):
        S, T = src.shape[1], tgt.shape[1]
        memory = self.enc(self.src_emb(src) + self.pos(torch.arange(S)))
        x = self.tgt_emb(tgt) + self.pos(torch.arange(T))
        causal = torch.ones(T, T, dtype=torch.bool).triu(1)
        x = self.ln1(x + self.self_attn(x, x, x, attn_mask=causal, need_weights=False)[0])
        if self.qfe:
            c = self.cross_attn(memory, x, x, need_weights=False)[0]
        else:
            c = self.cross_attn(x, memory, memory, need_weights=False)[0]
        x = self.ln2(x + c)
        return self.out(x)


# ========================================================================================= hand-written LayerNorms
class HandLayerNorm(nn.Module):
    def __init__(self, d, eps=1e-5, variant="ok"):
        super().__init__()
        self.gamma, self.beta = nn.Parameter(torch.ones(d)), nn.Parameter(torch.zeros(d))
        self.eps, self.variant = eps, variant

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        if self.variant == "ok":
            y = (x - mean) / torch.sqrt(x.var(-1, keepdim=True, unbiased=False) + self.eps)
        elif self.variant == "unbiased_var":  # var() defaults to unbiased
            y = (x - mean) / torch.sqrt(x.var(-1, keepdim=True) + self.eps)
        elif self.variant == "eps_outside":
            y = (x - mean) / (x.var(-1, keepdim=True, unbiased=False).sqrt() + self.eps)
        elif self.variant == "std_eps_outside":  # x.std() (unbiased) + eps
            y = (x - mean) / (x.std(-1, keepdim=True) + self.eps)
        return self.gamma * y + self.beta


# ============================================================================================ classifier (pooling)
class Classifier(nn.Module):
    def __init__(self, pooling="masked"):
        super().__init__()
        self.enc = XTransformer(causal=False, pos="abs", depth=1)
        self.enc.to_logits = nn.Identity()
        self.cls = nn.Linear(D, 3)
        self.pooling = pooling

    def forward(self, tokens):
        keep = tokens != PAD
        h = self.enc(tokens, mask=keep)
        if self.pooling == "masked":
            pooled = (h * keep[..., None]).sum(1) / keep.sum(1, keepdim=True)
        else:
            pooled = h.mean(1)
        return self.cls(pooled)


# ============================================================================================ batch-probe models
class HeadlessMaskAttn(nn.Module):
    """Attention with a per-example (B, T, T) padding mask; head_axis=False forgets unsqueeze(1)."""

    def __init__(self, head_axis=True):
        super().__init__()
        self.mha_w = nn.Linear(D, 3 * D)
        self.head_axis = head_axis

    def forward(self, x, lens):
        B, T, _ = x.shape
        q, k, v = (t.view(B, T, H, D // H).transpose(1, 2) for t in self.mha_w(x).chunk(3, -1))
        s = q @ k.transpose(-1, -2) / math.sqrt(D // H)  # (B, h, T, T)
        keep = torch.arange(T)[None, :] < lens[:, None]  # (B, T)
        m = keep[:, None, :].expand(B, T, T)  # (B, T, T)
        if self.head_axis:
            m = m[:, None]
        s = s.masked_fill(~m, -1e9)
        return (s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D)


class NormModel(nn.Module):
    def __init__(self, train_bn):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.bn = nn.BatchNorm1d(D)
        self.out = nn.Linear(D, V)
        self.bn.train(train_bn)

    def forward(self, x):
        h = self.emb(x)
        h = self.bn(h.transpose(1, 2)).transpose(1, 2)
        return self.out(h)


# ============================================================================================================ cases
T8 = toks(2, 8, 1)
T12 = toks(2, 12, 2)
T3 = toks(2, 3, 3)
T4 = toks(2, 4, 4)


# ---------------------------------------------------------------------------------------------- causality: bugs
@case("x_causal_flag_forgotten (2 layers, rotary)", "causality", "no_causal_mask")
def _():
    m = xmodel(10, causal=True, pos="rotary", causal_flag_forgotten=True)
    return causality_probe(m, T8, V)


@case("x_causal_mask_not_assigned (dots.masked_fill result dropped)", "causality", "no_causal_mask")
def _():
    m = xmodel(11, causal=True, pos="abs", bugs=("mask_not_assigned",))
    return causality_probe(m, T8, V)


@case("x_off_by_one triu(2), 1 layer, T=8", "causality", "off_by_one_mask")
def _():
    m = xmodel(12, causal=True, pos="rotary", depth=1, bugs=("off_by_one",))
    return causality_probe(m, T8, V)


@case("x_off_by_one triu(2), 2 layers, T=8", "causality", "off_by_one_mask")
def _():
    m = xmodel(13, causal=True, pos="abs", depth=2, bugs=("off_by_one",))
    return causality_probe(m, T8, V)


@case("x_off_by_one 2 layers, T=3 (band reaches T-1)", "causality", "off_by_one_mask")
def _():
    m = xmodel(14, causal=True, pos="abs", depth=2, bugs=("off_by_one",))
    return causality_probe(m, T3, V)


@case("x_off_by_one 1 layer, T=4", "causality", "off_by_one_mask")
def _():
    m = xmodel(15, causal=True, pos="rotary", depth=1, bugs=("off_by_one",))
    return causality_probe(m, T4, V)


@case("tut_src_mask_not_passed", "causality", "no_causal_mask")
def _():
    m = tut_model(20)
    return causality_probe(tut_fn(m), T8, V)


@case("tut_bool_tril_keep_mask (True=keep given to TransformerEncoder)", "causality", "mask_convention")
def _():
    m = tut_model(21)
    return causality_probe(tut_fn(m, lambda T: torch.tril(torch.ones(T, T, dtype=torch.bool))), T8, V)


@case("tut_additive_mask_swapped (-inf on/below diag, 0 above)", "causality", "mask_convention")
def _():
    m = tut_model(22)
    mk = lambda T: torch.zeros(T, T).masked_fill(torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))  # noqa: E731
    return causality_probe(tut_fn(m, mk), T8, V)


@case("tut_additive_mask_swapped_keep_diag (-inf strictly below)", "causality", "mask_convention")
def _():
    m = tut_model(23)
    mk = lambda T: torch.zeros(T, T).masked_fill(torch.ones(T, T, dtype=torch.bool).tril(-1), float("-inf"))  # noqa: E731
    return causality_probe(tut_fn(m, mk), T12, V)


@case("tut_off_by_one generate_square_subsequent_mask(diagonal=2), 1 layer", "causality", "off_by_one_mask")
def _():
    m = tut_model(24, nlayers=1)
    return causality_probe(tut_fn(m, lambda T: generate_square_subsequent_mask(T, 2)), T8, V)


@case("d2l_decoder_eval_branch (dec_valid_lens=None in eval)", "causality", "no_causal_mask")
def _():
    m = d2l_model(30, causal=True, causal_lens="train_only")
    return causality_probe(m, T8, V)


@case("d2l_dec_valid_lens_off_by_one arange(2,T+2), 2 layers", "causality", "off_by_one_mask")
def _():
    m = d2l_model(31, causal=True, causal_lens="off_by_one")
    return causality_probe(m, T8, V)


@case("encdec_cross_attention_queries_from_encoder (S=T)", "causality", "cross_attention_queries")
def _():
    torch.manual_seed(40)
    m = EncDec(queries_from_encoder=True).eval()
    src = toks(2, 8, 41)
    return causality_probe(lambda t: m(src, t), T8, V)


@case("keras_use_causal_mask_not_passed", "causality", "no_causal_mask")
def _():
    torch.manual_seed(42)
    m = KerasLM(causal_flag=False).eval()
    return causality_probe(m, T8, V)


@case("keras_style_tril_mask (True=attend) given to nn.MultiheadAttention", "causality", "mask_convention")
def _():
    torch.manual_seed(43)
    m = TorchMHABlockLM(lambda T: torch.ones(T, T, dtype=torch.bool).tril(), layers=1).eval()
    return causality_probe(m, T8, V)


@case("hand masked_fill(mask == 1) with tril ones (1=keep)", "causality", "mask_convention")
def _():
    torch.manual_seed(44)
    m = HandMaskLM(fill_where=1).eval()
    return causality_probe(m, T8, V)


@case("sdpa_given_triu(1) True=blocked mask (SDPA takes True=attend)", "causality", "mask_convention")
def _():
    torch.manual_seed(45)
    m = TorchMHABlockLM(lambda T: torch.ones(T, T, dtype=torch.bool).triu(1), layers=1, mode="sdpa").eval()
    return causality_probe(m, T8, V)


@case("x_causal_dropout_left_on (train mode)", "causality", "dropout_on")
def _():
    m = xmodel(46, train=True, causal=True, pos="rotary", dropout=0.1)
    return causality_probe(m, T8, V)


# ---------------------------------------------------------------------------------------------- causality: correct
@case("x_causal_rotary 2 layers T=8", "causality", None)
def _():
    return causality_probe(xmodel(100, causal=True, pos="rotary"), T8, V)


@case("x_causal_rotary T=3", "causality", None)
def _():
    return causality_probe(xmodel(101, causal=True, pos="rotary"), T3, V)


@case("x_causal_learned_abs T=4 B=2", "causality", None)
def _():
    return causality_probe(xmodel(102, causal=True, pos="abs"), T4, V)


@case("tut_square_subsequent_mask 2 layers T=8 (dropout 0.1, eval)", "causality", None)
def _():
    m = tut_model(103)
    return causality_probe(tut_fn(m, generate_square_subsequent_mask), T8, V)


@case("tut_bool_triu_mask True=blocked T=12", "causality", None)
def _():
    m = tut_model(104)
    return causality_probe(tut_fn(m, lambda T: torch.ones(T, T, dtype=torch.bool).triu(1)), T12, V)


@case("d2l_decoder dec_valid_lens=1..T always", "causality", None)
def _():
    return causality_probe(d2l_model(105, causal=True, causal_lens="always"), T8, V)


@case("keras_use_causal_mask=True", "causality", None)
def _():
    torch.manual_seed(106)
    return causality_probe(KerasLM(causal_flag=True).eval(), T8, V)


@case("sdpa_is_causal=True", "causality", None)
def _():
    torch.manual_seed(107)
    m = TorchMHABlockLM(None, layers=2, mode="sdpa", is_causal=True).eval()
    return causality_probe(m, T8, V)


@case("t5_relbias_causal 2 layers", "causality", None)
def _():
    return causality_probe(xmodel(108, causal=True, pos="relbias"), T8, V)


@case("encdec_cross_attention_queries_from_decoder", "causality", None)
def _():
    torch.manual_seed(109)
    m = EncDec(queries_from_encoder=False).eval()
    src = toks(2, 6, 110)
    return causality_probe(lambda t: m(src, t), T8, V, exclude=(PAD,))


# ---------------------------------------------------------------------------------------------- equality: bugs
X = torch.randn(2, 6, D, generator=torch.Generator().manual_seed(5))


def ref_ln():
    return nn.LayerNorm(D).eval()


@case("ln_unbiased_var (x.var() default)", "equality", "unbiased_std")
def _():
    return equality_probe(HandLayerNorm(D, variant="unbiased_var"), ref_ln(), X)


@case("ln_eps_outside_sqrt (biased std + eps)", "equality", "eps_outside_sqrt")
def _():
    return equality_probe(HandLayerNorm(D, variant="eps_outside"), ref_ln(), X)


@case("ln_x.std()+eps (unbiased and eps outside)", "equality", "unbiased_std")
def _():
    return equality_probe(HandLayerNorm(D, variant="std_eps_outside"), ref_ln(), X)


def mha_pair(seed, bugs=(), dropout_ref=0.0):
    torch.manual_seed(seed)
    ours = D2LMultiHeadAttention(D, H, bugs=bugs).eval()
    ref = nn.MultiheadAttention(D, H, bias=False, batch_first=True, dropout=dropout_ref).eval()
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([ours.W_q.weight, ours.W_k.weight, ours.W_v.weight]))
        ref.out_proj.weight.copy_(ours.W_o.weight)
    return ours, ref


def ref_call(ref, **kw):
    return lambda q, k, v: ref(q, k, v, need_weights=True, average_attn_weights=False, **kw)


@case("d2l_mha_scale_sqrt_d_model", "equality", "wrong_scale")
def _():
    ours, ref = mha_pair(50, ("scale_dmodel",))
    return equality_probe(ours.with_weights, ref_call(ref), X, X, X)


@case("d2l_mha_no_scale", "equality", "wrong_scale")
def _():
    ours, ref = mha_pair(51, ("no_scale",))
    return equality_probe(ours.with_weights, ref_call(ref), X, X, X)


@case("d2l_mha_scale_applied_twice", "equality", "wrong_scale")
def _():
    ours, ref = mha_pair(52, ("scale_twice",))
    return equality_probe(ours.with_weights, ref_call(ref), X, X, X)


@case("d2l_mha_split_without_transpose", "equality", "head_split")
def _():
    ours, ref = mha_pair(53, ("split_no_transpose",))
    return equality_probe(ours.with_weights, ref_call(ref), X, X, X)


@case("d2l_mha_merge_without_transpose", "equality", "head_split")
def _():
    ours, ref = mha_pair(54, ("merge_no_transpose",))
    return equality_probe(ours.with_weights, ref_call(ref), X, X, X)


@case("d2l_mha_softmax_over_queries (axis=-2)", "equality", "softmax_axis")
def _():
    ours, ref = mha_pair(55, ("softmax_queries",))
    return equality_probe(ours.with_weights, ref_call(ref), X, X, X)


@case("torch_mha_key_padding_mask_inverted (True=keep)", "equality", "mask_convention")
def _():
    torch.manual_seed(56)
    mha = nn.MultiheadAttention(D, H, batch_first=True).eval()
    lens = torch.tensor([4, 5])
    blocked = torch.arange(6)[None, :] >= lens[:, None]
    ours = lambda q, k, v: mha(q, k, v, key_padding_mask=~blocked, average_attn_weights=False)  # noqa: E731
    ref = lambda q, k, v: mha(q, k, v, key_padding_mask=blocked, average_attn_weights=False)  # noqa: E731
    return equality_probe(ours, ref, X, X, X)


@case("d2l_mha_no_scale, outputs only (no weights)", "equality", "wrong_scale")
def _():
    ours, ref = mha_pair(57, ("no_scale",))
    return equality_probe(lambda x: ours(x, x, x), lambda x: ref(x, x, x, need_weights=False)[0], X)


@case("pe_table_2i_twice (d2l form)", "equality", "2i_twice")
def _():
    return equality_probe(d2l_pe_table(D, 20, "2i_twice")[0], TutorialPE(D, 0.0, 20).pe[:, 0])


@case("pe_table_sin_cos_concatenated", "equality", "sin_cos_layout")
def _():
    return equality_probe(d2l_pe_table(D, 20, "sin_cos_layout")[0], TutorialPE(D, 0.0, 20).pe[:, 0])


@case("reference_dropout_on (nn.MultiheadAttention dropout=0.3 in train mode)", "equality", "dropout_on")
def _():
    ours, ref = mha_pair(58, (), dropout_ref=0.3)
    ref.train()
    return equality_probe(ours.with_weights, ref_call(ref), X, X, X)


@case(
    "encdec cross-attention with queries from the encoder vs reference (S=6, T=4)",
    "equality",
    "shape",
    note="added after run 1",
)
def _():
    ours, ref = mha_pair(59)
    memory, x = X, X[:, :4] * 0.5
    return equality_probe(lambda m, t: ours.with_weights(m, t, t), lambda m, t: ref_call(ref)(t, m, m), memory, x)


# ---------------------------------------------------------------------------------------------- equality: correct
@case("ln_correct vs nn.LayerNorm", "equality", None)
def _():
    return equality_probe(HandLayerNorm(D, variant="ok"), ref_ln(), X)


@case("ln_correct vs nn.LayerNorm on tiny inputs (x*1e-3)", "equality", None)
def _():
    return equality_probe(HandLayerNorm(D, variant="ok"), ref_ln(), X * 1e-3)


@case("d2l_mha vs nn.MultiheadAttention (per-head weights)", "equality", None)
def _():
    ours, ref = mha_pair(60)
    return equality_probe(ours.with_weights, ref_call(ref), X, X, X)


@case("d2l_mha valid_lens vs nn.MHA key_padding_mask", "equality", None)
def _():
    ours, ref = mha_pair(61)
    lens = torch.tensor([4, 6])
    blocked = torch.arange(6)[None, :] >= lens[:, None]
    return equality_probe(
        lambda q, k, v: ours.with_weights(q, k, v, lens), ref_call(ref, key_padding_mask=blocked), X, X, X
    )


@case("x_attention (qkv chunk) vs nn.MHA, averaged weights not returned", "equality", None)
def _():
    torch.manual_seed(62)
    ours = XAttention(D, H)
    ref = nn.MultiheadAttention(D, H, bias=True, batch_first=True).eval()
    with torch.no_grad():
        ref.in_proj_weight.copy_(ours.to_qkv.weight)
        ref.in_proj_bias.zero_()
        ref.out_proj.weight.copy_(ours.to_out.weight)
        ref.out_proj.bias.copy_(ours.to_out.bias)
    return equality_probe(lambda x: ours(x), lambda x: ref(x, x, x, need_weights=False)[0], X)


@case("pe_table d2l vs tutorial exp/log form", "equality", None)
def _():
    return equality_probe(d2l_pe_table(D, 20)[0], TutorialPE(D, 0.0, 20).pe[:, 0])


@case("d2l_mha cross-attention Tq=4, Tk=6 vs nn.MHA", "equality", None)
def _():
    ours, ref = mha_pair(63)
    q = X[:, :4] * 0.5 + 0.1
    return equality_probe(lambda a, b: ours.with_weights(a, b, b), lambda a, b: ref_call(ref)(a, b, b), q, X)


# ---------------------------------------------------------------------------------------------- padding: bugs
PTOK = toks(2, 8, 6, pad_tail=[0, 3])  # the second sequence already padded


@case("d2l_encoder_valid_lens_ignored", "padding", "no_padding_mask")
def _():
    m = d2l_model(70)
    return padding_probe(lambda t: m(t, None), PTOK, PAD)


@case("x_padding_mask_along_queries (-finfo.max fill)", "padding", "mask_wrong_axis")
def _():
    m = xmodel(71, pos="abs", bugs=("mask_query_axis",))
    return padding_probe(lambda t: m(t, mask=t != PAD), PTOK, PAD)


@case("x_padding_mask_along_queries (-inf fill)", "padding", "mask_wrong_axis")
def _():
    m = xmodel(72, pos="abs", bugs=("mask_query_axis_inf",))
    return padding_probe(lambda t: m(t, mask=t != PAD), PTOK, PAD)


@case("tut_key_padding_mask_inverted (tokens != pad)", "padding", "mask_convention")
def _():
    m = tut_model(73)
    return padding_probe(tut_fn(m, kpm_fn=lambda t: t != PAD), PTOK, PAD)


@case("tut_key_padding_mask_missing", "padding", "no_padding_mask")
def _():
    m = tut_model(74)
    return padding_probe(tut_fn(m), PTOK, PAD)


@case("classifier_mean_over_padding", "padding", "mean_over_padding")
def _():
    torch.manual_seed(75)
    return padding_probe(Classifier("mean").eval(), PTOK, PAD)


@case("d2l_encoder_dropout_left_on", "padding", "dropout_on")
def _():
    m = d2l_model(76).train()
    return padding_probe(lambda t: m(t, (t != PAD).sum(1)), PTOK, PAD)


@case("keras_attention_mask_given_as_pad_positions (1=pad, Keras wants 1=attend)", "padding", "mask_convention")
def _():
    torch.manual_seed(77)
    layer = KerasMHA(H, D // H).eval()
    emb = nn.Embedding(V, D)

    def fn(t):
        h = emb(t)
        am = (t == PAD)[:, None, :].expand(-1, t.shape[1], -1)  # (B, Tq, Tk), meant as "blocked"
        return layer(h, h, attention_mask=am)

    return padding_probe(fn, PTOK, PAD)


# ---------------------------------------------------------------------------------------------- padding: correct
@case("d2l_encoder_valid_lens", "padding", None)
def _():
    m = d2l_model(80)
    return padding_probe(lambda t: m(t, (t != PAD).sum(1)), PTOK, PAD)


@case("tut_key_padding_mask_correct", "padding", None)
def _():
    m = tut_model(81)
    return padding_probe(tut_fn(m, kpm_fn=lambda t: t == PAD), PTOK, PAD)


@case("classifier_masked_mean", "padding", None)
def _():
    torch.manual_seed(82)
    return padding_probe(Classifier("masked").eval(), PTOK, PAD)


@case("x_causal_LM_without_padding_mask", "padding", None)
def _():
    m = xmodel(83, causal=True, pos="rotary")
    return padding_probe(m, PTOK, PAD)


@case("x_bidirectional_key_mask (-finfo.max)", "padding", None)
def _():
    m = xmodel(84, pos="rotary")
    return padding_probe(lambda t: m(t, mask=t != PAD), PTOK, PAD)


@case("tut_causal_LM_without_key_padding_mask", "padding", None)
def _():
    m = tut_model(85)
    return padding_probe(tut_fn(m, generate_square_subsequent_mask), PTOK, PAD)


@case("keras_attention_mask_correct (1=attend), extra=1", "padding", None)
def _():
    torch.manual_seed(86)
    layer = KerasMHA(H, D // H).eval()
    emb = nn.Embedding(V, D)

    def fn(t):
        h = emb(t)
        am = (t != PAD)[:, None, :].expand(-1, t.shape[1], -1)
        return layer(h, h, attention_mask=am)

    return padding_probe(fn, PTOK, PAD, extra=1)


# ---------------------------------------------------------------------------------------------- position: bugs
@case("x_no_positional_encoding (bidirectional)", "position", "no_positions")
def _():
    return position_probe(xmodel(90, pos="none"), T8)


@case("x_causal_no_positional_encoding", "position", "no_positions")
def _():
    return position_probe(xmodel(91, causal=True, pos="none"), T8)


@case("x_causal_no_positional_encoding 1 layer", "position", "no_positions", note="added after run 1")
def _():
    return position_probe(xmodel(97, causal=True, pos="none", depth=1), T8)


@case("x_no_positional_encoding T=3", "position", "no_positions")
def _():
    return position_probe(xmodel(92, pos="none"), T3)


@case("d2l_pe_computed_not_assigned", "position", "no_positions")
def _():
    m = d2l_model(93, pe_bug="not_assigned")
    return position_probe(lambda t: m(t, None), T8)


@case("tut_pe_on_batch_axis (batch_first model, pe[:x.size(0)])", "position", "no_positions")
def _():
    m = tut_model(94, batch_first=True)
    return position_probe(lambda t: m(t), T8)


@case("d2l_pe_scaled_down x0.01", "position", "weak_positions")
def _():
    m = d2l_model(95, pe_bug="scaled_down")
    return position_probe(lambda t: m(t, None), T8)


@case(
    "tut_embedding_N(0,1)*sqrt(d_model) drowns PE",
    "position",
    "weak_positions",
    note="borderline by design: embeddings ~8x the encoding's norm",
)
def _():
    m = tut_model(96, emb_init="normal", batch_first=False)
    return position_probe(tut_fn(m), T8)


# ---------------------------------------------------------------------------------------------- position: correct
@case(
    "d2l_encoder_sinusoidal T=8, the book's code: N(0,1) embedding * sqrt(d_model) + PE",
    "position",
    "weak_positions",
    note="RELABELLED after the first run (was None): it is the exact pattern CAUSES['weak_positions'] "
    "names, and the same as my own tut_embedding_N(0,1) bug case",
)
def _():
    m = d2l_model(110)
    return position_probe(lambda t: m(t, None), T8)


@case("d2l_encoder_sinusoidal T=8, embedding not scaled by sqrt(d_model)", "position", None, note="added after run 1")
def _():
    m = d2l_model(117, emb_scale=False)
    return position_probe(lambda t: m(t, None), T8)


@case(
    "x_learned_abs, left-padded batch (first half all PAD, no pad mask)",
    "position",
    None,
    note="added after run 1: edge, the shuffle of identical ids is a no-op",
)
def _():
    t = T8.clone()
    t[:, :4] = PAD
    return position_probe(xmodel(118, pos="abs"), t)


@case("x_learned_abs T=3, first two ids equal in each row", "position", None, note="added after run 1: edge")
def _():
    t = torch.tensor([[7, 7, 3], [9, 9, 12]])
    return position_probe(xmodel(119, pos="abs"), t)


@case("x_rotary_bidirectional T=8", "position", None)
def _():
    return position_probe(xmodel(111, pos="rotary"), T8)


@case("t5_relbias_bidirectional T=12", "position", None)
def _():
    return position_probe(xmodel(112, pos="relbias"), T12)


@case("x_learned_abs T=8", "position", None)
def _():
    return position_probe(xmodel(113, pos="abs"), T8)


@case("d2l_encoder T=3 B=2", "position", None)
def _():
    m = d2l_model(114)
    return position_probe(lambda t: m(t, None), T3)


@case("x_causal_rotary T=4", "position", None)
def _():
    return position_probe(xmodel(115, causal=True, pos="rotary"), T4)


@case("tut_LM (uniform emb init, PE) causal", "position", None)
def _():
    m = tut_model(116)
    return position_probe(tut_fn(m, generate_square_subsequent_mask), T8)


# ---------------------------------------------------------------------------------------------- batch: bugs
class LogSoftmaxHead(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.body = XTransformer(pos="abs", depth=1)
        self.dim = dim

    def forward(self, x):
        logits = self.body(x)
        return F.log_softmax(logits) if self.dim is None else F.log_softmax(logits, dim=self.dim)


@case("log_softmax_without_dim on (B,T,V)", "batch", "batch_mixing")
def _():
    torch.manual_seed(120)
    return batch_probe(LogSoftmaxHead(None).eval(), T8)


@case("batchnorm_left_in_train_mode", "batch", "batch_mixing")
def _():
    torch.manual_seed(121)
    return batch_probe(NormModel(train_bn=True), T8)


@case("padding_mask_without_head_axis (B == heads)", "batch", "batch_mixing")
def _():
    torch.manual_seed(122)
    m = HeadlessMaskAttn(head_axis=False).eval()
    x = torch.randn(4, 6, D, generator=torch.Generator().manual_seed(7))
    # B = 4 = H: the (B, T, T) mask broadcasts against the heads axis without an error
    return batch_probe(m, (x, torch.tensor([3, 6, 4, 5])))


@case("attention_softmax_over_dim0", "batch", "batch_mixing")
def _():
    return batch_probe(xmodel(123, pos="abs", bugs=("softmax_dim0",)), T8)


# ---------------------------------------------------------------------------------------------- batch: correct
@case("d2l_encoder (tokens, valid_lens) tuple", "batch", None)
def _():
    m = d2l_model(130)
    return batch_probe(m, (PTOK, (PTOK != PAD).sum(1)))


@case("log_softmax(dim=-1)", "batch", None)
def _():
    torch.manual_seed(131)
    return batch_probe(LogSoftmaxHead(-1).eval(), T8)


@case("padding_mask_with_head_axis (B == heads)", "batch", None)
def _():
    torch.manual_seed(132)
    m = HeadlessMaskAttn(head_axis=True).eval()
    x = torch.randn(4, 6, D, generator=torch.Generator().manual_seed(7))
    return batch_probe(m, (x, torch.tensor([3, 6, 4, 5])))


@case("batchnorm_eval_mode", "batch", None)
def _():
    torch.manual_seed(133)
    return batch_probe(NormModel(train_bn=False), T8)


# ---------------------------------------------------------------------------------------------- output: bugs
def logits_of(seed, tokens=T8):
    m = xmodel(seed, pos="abs")
    with torch.no_grad():
        return m(tokens)


@case("output_probabilities softmax(-1)", "output", "probabilities")
def _():
    return output_probe(logits_of(140).softmax(-1))


@case("output_softmax_dim1 (over T)", "output", "softmax_axis")
def _():
    return output_probe(logits_of(141).softmax(1))


@case("output_log_softmax_no_dim B=2 (dim 0)", "output", "log_softmax_axis")
def _():
    return output_probe(F.log_softmax(logits_of(142)))


@case("output_log_softmax_no_dim B=1", "output", "log_softmax_axis")
def _():
    return output_probe(F.log_softmax(logits_of(143, T8[:1])))


@case("output_log_softmax_dim1", "output", "log_softmax_axis")
def _():
    return output_probe(F.log_softmax(logits_of(144), dim=1))


@case("output_probabilities in (logits, loss) tuple", "output", "probabilities")
def _():
    return output_probe((logits_of(145).softmax(-1), torch.tensor(1.0)))


# ---------------------------------------------------------------------------------------------- output: correct
@case("output_raw_logits", "output", None)
def _():
    return output_probe(logits_of(150))


@case("output_log_softmax(-1)", "output", None)
def _():
    return output_probe(F.log_softmax(logits_of(151), -1))


@case("output_raw_logits 2-d (B*T, V)", "output", None)
def _():
    return output_probe(logits_of(152).reshape(-1, V))


# ------------------------------------------------------------------------------- informational (not counted)
INFO = []


def info(name):
    def deco(fn):
        INFO.append((name, fn))
        return fn

    return deco


@info("hand LayerNorm eps=1e-6 (inside sqrt) vs nn.LayerNorm eps=1e-5: a different eps, not a misplaced one")
def _():
    return equality_probe(HandLayerNorm(D, eps=1e-6, variant="ok"), ref_ln(), X)


@info("position share over seeds 200-205 (drowned threshold 0.2)")
def _():
    lines = []
    for label, kw in [
        ("rotary bidirectional", dict(pos="rotary")),
        ("T5 relbias bidirectional", dict(pos="relbias")),
        ("learned abs bidirectional", dict(pos="abs")),
        ("rotary causal", dict(pos="rotary", causal=True)),
        ("NoPE causal 2 layers", dict(pos="none", causal=True)),
    ]:
        vals = []
        for s in range(200, 206):
            r = position_probe(xmodel(s, **kw), T8)
            vals.append(f"{r.value:.2f}{'*' if r.flagged else ''}")
        lines.append(f"{label:<27} {' '.join(vals)}")
    return "\n          ".join(lines) + "\n          (* = flagged)"


ERRORS = [  # (name, thunk): bad inputs, a clear ValueError/TypeError is the right answer
    ("position_probe T=2", lambda: position_probe(xmodel(1, pos="abs"), toks(2, 2, 1))),
    ("position_probe B=1", lambda: position_probe(xmodel(1, pos="abs"), toks(1, 8, 1))),
    ("position_probe on a classifier (B, C)", lambda: position_probe(Classifier().eval(), T8)),
    ("position_probe identical sequences", lambda: position_probe(xmodel(1, pos="abs"), toks(1, 8, 1).repeat(2, 1))),
    ("causality_probe T=1", lambda: causality_probe(xmodel(1, causal=True), toks(2, 1, 1), V)),
    ("causality_probe float tokens", lambda: causality_probe(xmodel(1, causal=True), T8.float(), V)),
    ("causality_probe vocab 2 exclude pad", lambda: causality_probe(xmodel(1, causal=True), T8 % 2, 2, exclude=(0,))),
    ("causality_probe per-sequence output", lambda: causality_probe(Classifier().eval(), T8, V)),
    ("padding_probe all padding", lambda: padding_probe(xmodel(1), torch.zeros(2, 8, dtype=torch.long), PAD)),
    ("padding_probe extra=0", lambda: padding_probe(xmodel(1), T8, PAD, extra=0)),
    ("batch_probe B=1", lambda: batch_probe(xmodel(1), T8[:1])),
    ("batch_probe mismatched B", lambda: batch_probe(lambda a, b: a, (T8, T12[:1]))),
    ("output_probe V=1", lambda: output_probe(torch.zeros(2, 3, 1))),
    ("model returning a dict", lambda: causality_probe(lambda t: {"logits": t}, T8, V)),
]


# ============================================================================================================ run
def main():
    verbose = "-v" in sys.argv
    start = time.time()
    rows = []
    for c in CASES:
        t0 = time.time()
        try:
            r = c["fn"]()
            err = None
        except Exception as e:
            r, err = None, f"{type(e).__name__}: {e}"
            if verbose:
                traceback.print_exc()
        rows.append(dict(c, report=r, error=err, secs=time.time() - t0))

    bugs = [r for r in rows if r["expected"] is not None]
    oks = [r for r in rows if r["expected"] is None]
    flagged = [r for r in bugs if r["report"] is not None and r["report"].flagged]
    right = [r for r in flagged if r["expected"] in r["report"].causes]
    right_first = [r for r in right if r["report"].causes[0] == r["expected"]]
    alarms = [r for r in oks if r["report"] is not None and r["report"].flagged]
    errors = [r for r in rows if r["error"]]

    print(f"cases: {len(bugs)} buggy, {len(oks)} correct  ({time.time() - start:.1f}s)")
    print(f"buggy flagged:            {len(flagged)}/{len(bugs)}")
    print(f"expected cause in causes: {len(right)}/{len(bugs)}  (ranked first: {len(right_first)}/{len(bugs)})")
    print(f"false alarms:             {len(alarms)}/{len(oks)}")
    print(f"exceptions:               {len(errors)}")
    print()
    for r in rows:
        rep = r["report"]
        if r["error"]:
            status = "ERROR"
        elif r["expected"] is None:
            status = "ok   " if not rep.flagged else "ALARM"
        elif not rep.flagged:
            status = "MISS "
        elif r["expected"] not in rep.causes:
            status = "WRONG"
        elif rep.causes[0] != r["expected"]:
            status = "ok(2)"
        else:
            status = "ok   "
        line = f"[{status}] {r['probe']:<9} {r['name']}  expected={r['expected']}"
        if rep is not None:
            line += f"  -> flagged={rep.flagged} causes={rep.causes}"
        if r["error"]:
            line += f"  -> {r['error']}"
        print(line)
        if verbose or status.strip() in ("MISS", "WRONG", "ALARM", "ERROR"):
            if rep is not None:
                print(f"          finding: {rep.finding}")
                if rep.likely_bug:
                    print(f"          likely_bug: {rep.likely_bug}")
    print("\ninformational (not counted):")
    for name, fn in INFO:
        try:
            r = fn()
        except Exception as e:
            r = f"{type(e).__name__}: {e}"
        if isinstance(r, str):
            print(f"  {name}:\n          {r}")
        else:
            print(f"  {name}: flagged={r.flagged} causes={r.causes}\n          finding: {r.finding}")
    print("\nbad inputs (a clear error expected):")
    for name, thunk in ERRORS:
        torch.manual_seed(0)
        try:
            r = thunk()
            print(f"  [NO ERROR] {name}: flagged={r.flagged} causes={r.causes} finding: {r.finding}")
        except Exception as e:
            print(f"  [raised] {name}: {type(e).__name__}: {str(e)[:160]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
