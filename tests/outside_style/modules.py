"""Transformer modules written in the style of three public code bases, independent of ``course_utils``:

1. nanoGPT: ``CausalSelfAttention``, ``MLP``, ``Block``, ``GPT`` (fused ``c_attn``, a registered ``bias`` triangle).
2. The Annotated Transformer: ``attention``, ``MultiHeadedAttention``, a hand-written ``LayerNorm``,
   ``SublayerConnection``, ``EncoderLayer``/``Encoder``, ``DecoderLayer``/``Decoder``, ``Embeddings``,
   ``PositionalEncoding``, ``Generator``, ``subsequent_mask``, ``EncoderDecoder``.
3. Hugging Face: ``HFAttention`` (``q_proj``/``k_proj``/``v_proj``/``o_proj``, an additive float mask of 0 and
   ``finfo.min``), ``_make_causal_mask``/``_expand_mask``, a small ``HFModel`` and a mean-pooling classifier, and
   sinusoidal tables in the interleaved layout and in the "sines then cosines" layout.

Every planted bug is switched on by a ``bug=...`` argument (a short string; "" is the correct code) and marked by a
``# BUG`` comment that says what is wrong and where the bug comes from.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def _check(bug: str, known: set[str]) -> str:
    if bug not in known | {""}:
        raise ValueError(f"unknown bug {bug!r}; known: {sorted(known)}")
    return bug


# =====================================================================================================================
# 1. nanoGPT style
# =====================================================================================================================


@dataclass
class GPTConfig:
    block_size: int = 16
    vocab_size: int = 16
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 32
    dropout: float = 0.0
    bias: bool = True
    flash: bool = False  # F.scaled_dot_product_attention instead of the explicit softmax
    init_std: float = 0.02  # nanoGPT's; larger stands in for trained weights, whose layers mix more
    bug: str = ""  # one of NANOGPT_BUGS, planted in every attention layer


NANOGPT_BUGS = {"no_causal_mask", "off_by_one_mask", "flipped_mask", "no_diagonal", "no_scale", "flash_not_causal"}


class LayerNormNG(nn.Module):
    """LayerNorm with an optional bias (PyTorch's nn.LayerNorm had no bias=False until 2.1)."""

    def __init__(self, ndim: int, bias: bool) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, input: Tensor) -> Tensor:
        return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        assert config.n_embd % config.n_head == 0
        self.bug = _check(config.bug, NANOGPT_BUGS)
        # key, query, value projections for all heads, in one batch
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.dropout = config.dropout
        self.flash = config.flash
        ones = torch.ones(config.block_size, config.block_size)
        if self.bug == "off_by_one_mask":
            # BUG: tril(diagonal=1) keeps j <= i + 1, so each position also sees the next token (diagonal= confused
            # with triu's, where diagonal=1 is what a *blocked* triangle needs). Leaks one step per layer.
            tri = torch.tril(ones, diagonal=1)
        elif self.bug == "no_diagonal":
            # BUG: tril(diagonal=-1) masks the diagonal too: position 0 keeps no key, its row is all -inf -> NaN.
            tri = torch.tril(ones, diagonal=-1)
        else:
            tri = torch.tril(ones)  # causal mask: only attend to the left in the input sequence
        self.register_buffer("bias", tri.view(1, 1, config.block_size, config.block_size))

    def forward(self, x: Tensor) -> Tensor:
        B, T, C = x.size()  # batch size, sequence length, embedding dimensionality (n_embd)
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        if self.flash:
            # BUG (flash_not_causal): is_causal left at its default False when switching to the fused kernel.
            y = F.scaled_dot_product_attention(
                q,
                k,
                v,
                attn_mask=None,
                dropout_p=self.dropout if self.training else 0.0,
                is_causal=self.bug != "flash_not_causal",
            )
        else:
            scale = 1.0 / math.sqrt(k.size(-1))
            if self.bug == "no_scale":
                scale = 1.0  # BUG: the 1/sqrt(hs) factor dropped ("it trains anyway")
            att = (q @ k.transpose(-2, -1)) * scale
            keep = self.bias[:, :, :T, :T]
            if self.bug == "no_causal_mask":
                pass  # BUG: the masked_fill line deleted (an encoder block reused as a decoder block)
            elif self.bug == "flipped_mask":
                # BUG: == 1 instead of == 0: blocks the past and keeps the future; the last row is all -inf -> NaN.
                att = att.masked_fill(keep == 1, float("-inf"))
            else:
                att = att.masked_fill(keep == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v  # (B, nh, T, T) x (B, nh, T, hs) -> (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # re-assemble all head outputs side by side
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.ln_1 = LayerNormNG(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = LayerNormNG(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(config.vocab_size, config.n_embd),
                wpe=nn.Embedding(config.block_size, config.n_embd),
                drop=nn.Dropout(config.dropout),
                h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
                ln_f=LayerNormNG(config.n_embd, bias=config.bias),
            )
        )
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():  # scaled init of the residual projections, per GPT-2
            if pn.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=config.init_std / math.sqrt(2 * config.n_layer))

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=self.config.init_std)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=self.config.init_std)

    def forward(self, idx: Tensor, targets: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        _, t = idx.size()
        assert t <= self.config.block_size, (
            f"Cannot forward sequence of length {t}, block size is only {self.config.block_size}"
        )
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        tok_emb = self.transformer.wte(idx)  # (b, t, n_embd)
        pos_emb = self.transformer.wpe(pos)  # (t, n_embd)
        x = self.transformer.drop(tok_emb + pos_emb)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        logits = self.lm_head(x)  # (unlike nanoGPT, every position also at inference: the probes need (B, T, V))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss


# =====================================================================================================================
# 2. Annotated Transformer style
# =====================================================================================================================


def clones(module: nn.Module, N: int) -> nn.ModuleList:
    "Produce N identical layers."
    return nn.ModuleList([copy.deepcopy(module) for _ in range(N)])


LAYERNORM_BUGS = {"unbiased_std", "eps_outside_sqrt", "both"}


class LayerNorm(nn.Module):
    "Construct a layernorm module (the correct form: biased variance, epsilon inside the root)."

    def __init__(self, features: int, eps: float = 1e-6, bug: str = "") -> None:
        super().__init__()
        self.a_2 = nn.Parameter(torch.ones(features))
        self.b_2 = nn.Parameter(torch.zeros(features))
        self.eps = eps
        self.bug = _check(bug, LAYERNORM_BUGS)

    def forward(self, x: Tensor) -> Tensor:
        mean = x.mean(-1, keepdim=True)
        if self.bug == "unbiased_std":
            # BUG: x.std() divides by n - 1 (Bessel's correction); LayerNorm uses the biased variance.
            std = x.std(-1, keepdim=True)
            return self.a_2 * (x - mean) / torch.sqrt(std**2 + self.eps) + self.b_2
        if self.bug == "eps_outside_sqrt":
            # BUG: eps added to the std instead of to the variance under the root.
            std = x.var(-1, keepdim=True, unbiased=False).sqrt()
            return self.a_2 * (x - mean) / (std + self.eps) + self.b_2
        if self.bug == "both":
            # BUG: both at once, as in the original Annotated Transformer: unbiased std, eps outside the root.
            std = x.std(-1, keepdim=True)
            return self.a_2 * (x - mean) / (std + self.eps) + self.b_2
        var = x.var(-1, keepdim=True, unbiased=False)
        return self.a_2 * (x - mean) / torch.sqrt(var + self.eps) + self.b_2


class SublayerConnection(nn.Module):
    """A residual connection followed by a layer norm (pre-norm, as in the Annotated Transformer's code)."""

    def __init__(self, size: int, dropout: float, ln_bug: str = "") -> None:
        super().__init__()
        self.norm = LayerNorm(size, bug=ln_bug)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, sublayer) -> Tensor:
        "Apply residual connection to any sublayer with the same size."
        return x + self.dropout(sublayer(self.norm(x)))


ATTENTION_BUGS = {
    "scale_d_model",
    "no_scale",
    "softmax_queries",
    "mask_eq_1",
    "split_no_transpose",
    "merge_no_transpose",
}


def attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    mask: Tensor | None = None,
    dropout: nn.Module | None = None,
    *,
    d_k: int | None = None,
    bug: str = "",
) -> tuple[Tensor, Tensor]:
    "Compute 'Scaled Dot Product Attention'"
    d_k = query.size(-1) if d_k is None else d_k
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
    if bug == "no_scale":
        scores = torch.matmul(query, key.transpose(-2, -1))  # BUG: no division by sqrt(d_k)
    if mask is not None:
        if bug == "mask_eq_1":
            # BUG: mask == 1 instead of mask == 0: fills the positions to keep, keeps the ones to block.
            scores = scores.masked_fill(mask == 1, -1e9)
        else:
            scores = scores.masked_fill(mask == 0, -1e9)
    # BUG (softmax_queries): normalised over the queries (dim=-2) instead of the keys (dim=-1).
    p_attn = scores.softmax(dim=-2 if bug == "softmax_queries" else -1)
    if dropout is not None:
        p_attn = dropout(p_attn)
    return torch.matmul(p_attn, value), p_attn


class MultiHeadedAttention(nn.Module):
    def __init__(self, h: int, d_model: int, dropout: float = 0.1, bug: str = "", mask_head_axis: bool = True) -> None:
        "Take in model size and number of heads."
        super().__init__()
        assert d_model % h == 0
        self.d_k = d_model // h  # We assume d_v always equals d_k
        self.h = h
        self.linears = clones(nn.Linear(d_model, d_model), 4)
        self.attn: Tensor | None = None
        self.dropout = nn.Dropout(p=dropout)
        self.bug = _check(bug, ATTENTION_BUGS)
        self.mask_head_axis = mask_head_axis

    def forward(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None) -> Tensor:
        "Implements Figure 2"
        if mask is not None and self.mask_head_axis:
            mask = mask.unsqueeze(1)  # Same mask applied to all h heads.
        # (mask_head_axis=False) BUG: the unsqueeze(1) forgotten: a (B, 1, T) mask then broadcasts as (1, B, 1, T),
        # so head b gets example b's padding mask whenever B == h (and fails to broadcast otherwise).
        nbatches = query.size(0)
        # 1) Do all the linear projections in batch from d_model => h x d_k
        if self.bug == "split_no_transpose":
            # BUG: view(B, h, T, d_k) straight away: each "head" gets a run of T consecutive d_k-slices that mixes
            # positions, instead of view(B, T, h, d_k).transpose(1, 2).
            query, key, value = [
                lin(x).view(nbatches, self.h, -1, self.d_k) for lin, x in zip(self.linears, (query, key, value))
            ]
        else:
            query, key, value = [
                lin(x).view(nbatches, -1, self.h, self.d_k).transpose(1, 2)
                for lin, x in zip(self.linears, (query, key, value))
            ]
        # 2) Apply attention on all the projected vectors in batch.
        # BUG (scale_d_model): d_model passed as the d_k to scale by: scores divided by sqrt(d_model), not sqrt(d_k).
        d_k = self.h * self.d_k if self.bug == "scale_d_model" else self.d_k
        inner_bug = self.bug if self.bug in {"no_scale", "softmax_queries", "mask_eq_1"} else ""
        x, self.attn = attention(query, key, value, mask=mask, dropout=self.dropout, d_k=d_k, bug=inner_bug)
        # 3) "Concat" using a view and apply a final linear.
        if self.bug == "merge_no_transpose":
            # BUG: heads merged with view(B, T, h * d_k) on (B, h, T, d_k), without transposing back first.
            x = x.contiguous().view(nbatches, -1, self.h * self.d_k)
        else:
            x = x.transpose(1, 2).contiguous().view(nbatches, -1, self.h * self.d_k)
        del query, key, value
        return self.linears[-1](x)


class PositionwiseFeedForward(nn.Module):
    "Implements FFN equation."

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.w_2(self.dropout(self.w_1(x).relu()))


class EncoderLayer(nn.Module):
    "Encoder is made up of self-attn and feed forward (defined below)"

    def __init__(self, size: int, self_attn: MultiHeadedAttention, feed_forward: nn.Module, dropout: float) -> None:
        super().__init__()
        self.self_attn = self_attn
        self.feed_forward = feed_forward
        self.sublayer = clones(SublayerConnection(size, dropout), 2)
        self.size = size

    def forward(self, x: Tensor, mask: Tensor | None) -> Tensor:
        x = self.sublayer[0](x, lambda x: self.self_attn(x, x, x, mask))
        return self.sublayer[1](x, self.feed_forward)


class Encoder(nn.Module):
    "Core encoder is a stack of N layers"

    def __init__(self, layer: EncoderLayer, N: int) -> None:
        super().__init__()
        self.layers = clones(layer, N)
        self.norm = LayerNorm(layer.size)

    def forward(self, x: Tensor, mask: Tensor | None) -> Tensor:
        "Pass the input (and mask) through each layer in turn."
        for layer in self.layers:
            x = layer(x, mask)
        return self.norm(x)


class DecoderLayer(nn.Module):
    "Decoder is made of self-attn, src-attn, and feed forward (defined below)"

    def __init__(self, size: int, self_attn, src_attn, feed_forward, dropout: float, bug: str = "") -> None:
        super().__init__()
        self.size = size
        self.self_attn = self_attn
        self.src_attn = src_attn
        self.feed_forward = feed_forward
        self.sublayer = clones(SublayerConnection(size, dropout), 3)
        self.bug = _check(bug, {"queries_from_encoder"})

    def forward(self, x: Tensor, memory: Tensor, src_mask: Tensor | None, tgt_mask: Tensor | None) -> Tensor:
        m = memory
        x = self.sublayer[0](x, lambda x: self.self_attn(x, x, x, tgt_mask))
        if self.bug == "queries_from_encoder":
            # BUG: src_attn(m, x, x): queries from the encoder, keys and values from the decoder (the argument order
            # of (query, key, value) misread). Runs only when source and target have the same length.
            x = self.sublayer[1](x, lambda x: self.src_attn(m, x, x, src_mask))
        else:
            x = self.sublayer[1](x, lambda x: self.src_attn(x, m, m, src_mask))
        return self.sublayer[2](x, self.feed_forward)


class Decoder(nn.Module):
    "Generic N layer decoder with masking."

    def __init__(self, layer: DecoderLayer, N: int) -> None:
        super().__init__()
        self.layers = clones(layer, N)
        self.norm = LayerNorm(layer.size)

    def forward(self, x: Tensor, memory: Tensor, src_mask: Tensor | None, tgt_mask: Tensor | None) -> Tensor:
        for layer in self.layers:
            x = layer(x, memory, src_mask, tgt_mask)
        return self.norm(x)


class Embeddings(nn.Module):
    def __init__(self, d_model: int, vocab: int) -> None:
        super().__init__()
        self.lut = nn.Embedding(vocab, d_model)
        self.d_model = d_model

    def forward(self, x: Tensor) -> Tensor:
        return self.lut(x) * math.sqrt(self.d_model)


PE_BUGS = {"2i_twice", "not_added"}


class PositionalEncoding(nn.Module):
    "Implement the PE function."

    def __init__(self, d_model: int, dropout: float, max_len: int = 64, bug: str = "") -> None:
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        self.bug = _check(bug, PE_BUGS)
        # Compute the positional encodings once in log space.
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len).unsqueeze(1)
        if self.bug == "2i_twice":
            # BUG: arange(0, d_model, 2) already steps through 2i; multiplying by 2 again stretches every wavelength.
            div_term = torch.exp(torch.arange(0, d_model, 2) * 2 * -(math.log(10000.0) / d_model))
        else:
            div_term = torch.exp(torch.arange(0, d_model, 2) * -(math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        pe = pe.unsqueeze(0)
        self.register_buffer("pe", pe)

    def forward(self, x: Tensor) -> Tensor:
        if self.bug == "not_added":
            # BUG: the sum is computed and thrown away (x + pe not assigned): the model never sees positions.
            x + self.pe[:, : x.size(1)].requires_grad_(False)
        else:
            x = x + self.pe[:, : x.size(1)].requires_grad_(False)
        return self.dropout(x)


GENERATOR_BUGS = {"softmax", "softmax_dim0", "softmax_dim1", "log_softmax_no_dim", "log_softmax_dim1", "log_of_softmax"}


class Generator(nn.Module):
    "Define standard linear + softmax generation step."

    def __init__(self, d_model: int, vocab: int, bug: str = "") -> None:
        super().__init__()
        self.proj = nn.Linear(d_model, vocab)
        self.bug = _check(bug, GENERATOR_BUGS)

    def forward(self, x: Tensor) -> Tensor:
        logits = self.proj(x)
        if self.bug == "softmax":
            return F.softmax(logits, dim=-1)  # BUG: probabilities, then fed to a loss that expects log-probs/logits
        if self.bug == "softmax_dim0":
            return F.softmax(logits, dim=0)  # BUG: softmax over the batch axis
        if self.bug == "softmax_dim1":
            return F.softmax(logits, dim=1)  # BUG: softmax over the positions of (B, T, V)
        if self.bug == "log_softmax_no_dim":
            # BUG: no dim: the legacy rule picks dim 0 (the batch) for a 3-d input, with a deprecation warning.
            return F.log_softmax(logits)
        if self.bug == "log_softmax_dim1":
            return F.log_softmax(logits, dim=1)  # BUG: dim=1 is the time axis of (B, T, V), not the vocabulary
        if self.bug == "log_of_softmax":
            # BUG: log(softmax(x)): a probability that underflows to 0 gives -inf; log_softmax does not.
            return torch.log(F.softmax(logits, dim=-1))
        return F.log_softmax(logits, dim=-1)


def subsequent_mask(size: int, bug: str = "") -> Tensor:
    "Mask out subsequent positions (True = may attend)."
    attn_shape = (1, size, size)
    # BUG (off_by_one_mask): diagonal=2 blocks from j = i + 2 on, so each position also sees the next token.
    diagonal = 2 if bug == "off_by_one_mask" else 1
    mask = torch.triu(torch.ones(attn_shape), diagonal=diagonal).type(torch.uint8)
    return mask == 0


def src_mask_of(src: Tensor, pad: int, bug: str = "") -> Tensor:
    """The Batch class's source mask: (B, 1, T), True at real tokens, broadcast along the queries."""
    if bug == "wrong_axis":
        # BUG: unsqueeze(-1) gives (B, T, 1), which MultiHeadedAttention turns into (B, 1, T, 1): it masks the
        # padding *queries*, while every real query still reads the padding keys.
        return (src != pad).unsqueeze(-1)
    if bug == "convention":
        return (src == pad).unsqueeze(-2)  # BUG: True at the padding (the nn.MultiheadAttention convention)
    return (src != pad).unsqueeze(-2)


def tgt_mask_of(tgt: Tensor, pad: int, bug: str = "") -> Tensor:
    "Create a mask to hide padding and future words."
    tgt_mask = (tgt != pad).unsqueeze(-2)
    if bug == "no_subsequent":
        return tgt_mask  # BUG: only the padding mask; the subsequent_mask was never combined in
    return tgt_mask & subsequent_mask(tgt.size(-1), bug=bug).type_as(tgt_mask.data)


class EncoderDecoder(nn.Module):
    """A standard Encoder-Decoder architecture."""

    def __init__(
        self, encoder: Encoder, decoder: Decoder, src_embed: nn.Module, tgt_embed: nn.Module, generator: Generator
    ) -> None:
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder
        self.src_embed = src_embed
        self.tgt_embed = tgt_embed
        self.generator = generator

    def forward(self, src: Tensor, tgt: Tensor, src_mask: Tensor | None, tgt_mask: Tensor | None) -> Tensor:
        return self.decode(self.encode(src, src_mask), src_mask, tgt, tgt_mask)

    def encode(self, src: Tensor, src_mask: Tensor | None) -> Tensor:
        return self.encoder(self.src_embed(src), src_mask)

    def decode(self, memory: Tensor, src_mask: Tensor | None, tgt: Tensor, tgt_mask: Tensor | None) -> Tensor:
        return self.decoder(self.tgt_embed(tgt), memory, src_mask, tgt_mask)


def make_model(
    src_vocab: int,
    tgt_vocab: int,
    N: int = 2,
    d_model: int = 32,
    d_ff: int = 64,
    h: int = 4,
    dropout: float = 0.1,
    *,
    attn_bug: str = "",
    decoder_bug: str = "",
    pe_bug: str = "",
    generator_bug: str = "",
) -> EncoderDecoder:
    "Helper: Construct a model from hyperparameters."
    c = copy.deepcopy
    attn = MultiHeadedAttention(h, d_model, dropout, bug=attn_bug)
    ff = PositionwiseFeedForward(d_model, d_ff, dropout)
    position = PositionalEncoding(d_model, dropout, bug=pe_bug)
    model = EncoderDecoder(
        Encoder(EncoderLayer(d_model, c(attn), c(ff), dropout), N),
        Decoder(DecoderLayer(d_model, c(attn), c(attn), c(ff), dropout, bug=decoder_bug), N),
        nn.Sequential(Embeddings(d_model, src_vocab), c(position)),
        nn.Sequential(Embeddings(d_model, tgt_vocab), c(position)),
        Generator(d_model, tgt_vocab, bug=generator_bug),
    )
    # This was important from their code. Initialize parameters with Glorot / fan_avg.
    for p in model.parameters():
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)
    return model


class AnnotatedEncoderModel(nn.Module):
    """An encoder-only model from the Annotated Transformer's parts: ids (B, T) -> states (B, T, d_model). The source
    mask is built from the ids (``pad`` given) or left out (``pad=None``)."""

    def __init__(
        self,
        vocab: int,
        N: int = 2,
        d_model: int = 32,
        d_ff: int = 64,
        h: int = 4,
        *,
        pad: int | None = None,
        mask_bug: str = "",
        pe_bug: str = "",
        xavier: bool = True,
        mask_head_axis: bool = True,
    ) -> None:
        super().__init__()
        attn = MultiHeadedAttention(h, d_model, 0.0, mask_head_axis=mask_head_axis)
        self.encoder = Encoder(EncoderLayer(d_model, attn, PositionwiseFeedForward(d_model, d_ff, 0.0), 0.0), N)
        self.embed = nn.Sequential(Embeddings(d_model, vocab), PositionalEncoding(d_model, 0.0, bug=pe_bug))
        self.pad = pad
        self.mask_bug = mask_bug
        if xavier:
            for p in self.parameters():
                if p.dim() > 1:
                    nn.init.xavier_uniform_(p)
        # (xavier=False) BUG for the positions: nn.Embedding keeps its N(0, 1) start, times sqrt(d_model) in
        # Embeddings: token vectors of norm ~ d_model against a positional encoding of norm ~ sqrt(d_model / 2).

    def forward(self, src: Tensor) -> Tensor:
        mask = None if self.pad is None else src_mask_of(src, self.pad, bug=self.mask_bug)
        return self.encoder(self.embed(src), mask)


# =====================================================================================================================
# 3. Hugging Face style
# =====================================================================================================================


def create_sinusoidal_embeddings(n_pos: int, dim: int, bug: str = "") -> Tensor:
    """The interleaved table (sin at even columns, cos at odd ones), as DistilBERT builds it."""
    pos = torch.arange(n_pos, dtype=torch.float64)[:, None]
    j = torch.arange(dim, dtype=torch.float64)[None, :]
    if bug == "2i_twice":
        # BUG: 2 * j instead of 2 * (j // 2): j already runs over 2i and 2i + 1, so 2i is applied twice.
        position_enc = pos / torch.pow(10000.0, 2 * j / dim)
    else:
        position_enc = pos / torch.pow(10000.0, 2 * (j // 2) / dim)
    out = torch.zeros(n_pos, dim)
    out[:, 0::2] = torch.sin(position_enc[:, 0::2]).float()
    out[:, 1::2] = torch.cos(position_enc[:, 1::2]).float()
    return out


def get_sinusoidal_embedding_concat(
    num_embeddings: int, embedding_dim: int, fairseq_frequencies: bool = False
) -> Tensor:
    """Sines then cosines, concatenated (tensor2tensor / fairseq / Marian layout): column k is sin(pos * w_k) for
    k < d/2 and cos(pos * w_(k - d/2)) after. A layout of its own: comparing it to an interleaved table, or loading
    weights trained with the other one, is the bug. ``fairseq_frequencies`` uses fairseq's w_k = 10000^(-k/(d/2 - 1))
    instead of 10000^(-2k/d)."""
    half_dim = embedding_dim // 2
    if fairseq_frequencies:
        emb = math.log(10000) / (half_dim - 1)
    else:
        emb = math.log(10000) / half_dim
    emb = torch.exp(torch.arange(half_dim, dtype=torch.float) * -emb)
    emb = torch.arange(num_embeddings, dtype=torch.float).unsqueeze(1) * emb.unsqueeze(0)
    return torch.cat([torch.sin(emb), torch.cos(emb)], dim=1).view(num_embeddings, -1)


def _make_causal_mask(input_ids_shape: torch.Size, dtype: torch.dtype, bug: str = "") -> Tensor:
    """Additive causal mask (bsz, 1, tgt_len, tgt_len): 0 where allowed, finfo.min where blocked."""
    bsz, tgt_len = input_ids_shape
    mask = torch.full((tgt_len, tgt_len), torch.finfo(dtype).min)
    mask_cond = torch.arange(mask.size(-1))
    if bug == "off_by_one_mask":
        # BUG: (mask_cond + 2) unblocks j <= i + 1: every position also sees the next token.
        mask.masked_fill_(mask_cond < (mask_cond + 2).view(mask.size(-1), 1), 0)
    elif bug == "convention":
        # BUG: a keep-mask (1 = may attend) multiplied by finfo.min, without inverting it first: blocks the past and
        # the diagonal, opens the future (the last row is all finfo.min: uniform, not NaN).
        keep = torch.tril(torch.ones(tgt_len, tgt_len))
        mask = keep * torch.finfo(dtype).min
    else:
        mask.masked_fill_(mask_cond < (mask_cond + 1).view(mask.size(-1), 1), 0)
    mask = mask.to(dtype)
    return mask[None, None, :, :].expand(bsz, 1, tgt_len, tgt_len)


def _expand_mask(mask: Tensor, dtype: torch.dtype, tgt_len: int | None = None, bug: str = "") -> Tensor:
    """Expands attention_mask from [bsz, seq_len] (1 = real token) to [bsz, 1, tgt_seq_len, src_seq_len]."""
    bsz, src_len = mask.size()
    tgt_len = tgt_len if tgt_len is not None else src_len
    if bug == "wrong_axis":
        # BUG: mask[:, None, :, None]: the padding mask broadcast along the queries, not the keys.
        expanded_mask = mask[:, None, :, None].expand(bsz, 1, src_len, tgt_len).to(dtype)
    else:
        expanded_mask = mask[:, None, None, :].expand(bsz, 1, tgt_len, src_len).to(dtype)
    if bug == "convention":
        # BUG: the 1 = keep mask turned into an additive one without "1.0 - ...": blocks the real tokens instead.
        return expanded_mask.masked_fill(expanded_mask.to(torch.bool), torch.finfo(dtype).min)
    inverted_mask = 1.0 - expanded_mask
    return inverted_mask.masked_fill(inverted_mask.to(torch.bool), torch.finfo(dtype).min)


@dataclass
class HFConfig:
    vocab_size: int = 16
    hidden_size: int = 32
    num_attention_heads: int = 4
    num_hidden_layers: int = 2
    intermediate_size: int = 64
    max_position_embeddings: int = 32
    attention_dropout: float = 0.0
    is_decoder: bool = True
    pad_token_id: int = 0
    position_layout: str = "interleaved"  # "interleaved" (create_sinusoidal_embeddings) or "concat"
    attn_bug: str = ""  # one of HF_ATTENTION_BUGS
    causal_mask_bug: str = ""  # "off_by_one_mask", "convention"
    padding_mask_bug: str = ""  # "wrong_axis", "convention"


HF_ATTENTION_BUGS = {"scale_hidden", "split_reshape", "merge_no_transpose", "softmax_queries"}


class HFAttention(nn.Module):
    """Multi-headed attention from 'Attention Is All You Need' paper (BART/OPT style)."""

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True, bug: str = "") -> None:
        super().__init__()
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.head_dim = embed_dim // num_heads
        if (self.head_dim * num_heads) != self.embed_dim:
            raise ValueError(
                f"embed_dim must be divisible by num_heads (got `embed_dim`: {self.embed_dim} and `num_heads`: {num_heads})."
            )
        self.bug = _check(bug, HF_ATTENTION_BUGS)
        self.scaling = self.head_dim**-0.5
        if self.bug == "scale_hidden":
            self.scaling = self.embed_dim**-0.5  # BUG: hidden_size ** -0.5 instead of head_dim ** -0.5
        self.k_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.v_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.o_proj = nn.Linear(embed_dim, embed_dim, bias=bias)

    def _shape(self, tensor: Tensor, seq_len: int, bsz: int) -> Tensor:
        if self.bug == "split_reshape":
            # BUG: reshape straight to (bsz, heads, seq, head_dim), skipping the transpose(1, 2).
            return tensor.reshape(bsz, self.num_heads, seq_len, self.head_dim).contiguous()
        return tensor.view(bsz, seq_len, self.num_heads, self.head_dim).transpose(1, 2).contiguous()

    def forward(
        self,
        hidden_states: Tensor,
        key_value_states: Tensor | None = None,
        attention_mask: Tensor | None = None,
        output_attentions: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Input shape: Batch x Time x Channel; attention_mask additive, (bsz, 1, tgt_len, src_len)."""
        bsz, tgt_len, _ = hidden_states.size()
        kv = hidden_states if key_value_states is None else key_value_states
        query_states = self._shape(self.q_proj(hidden_states) * self.scaling, tgt_len, bsz)
        key_states = self._shape(self.k_proj(kv), -1, bsz)
        value_states = self._shape(self.v_proj(kv), -1, bsz)
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3))
        if attention_mask is not None:
            attn_weights = attn_weights + attention_mask
        # upcast to fp32 for the softmax
        # BUG (softmax_queries): dim=-2 normalises each key's column over the queries.
        dim = -2 if self.bug == "softmax_queries" else -1
        attn_weights = nn.functional.softmax(attn_weights, dim=dim, dtype=torch.float32).to(query_states.dtype)
        attn_probs = nn.functional.dropout(attn_weights, p=self.dropout, training=self.training)
        attn_output = torch.matmul(attn_probs, value_states)
        if self.bug == "merge_no_transpose":
            # BUG: (bsz, heads, tgt_len, head_dim) reshaped to (bsz, tgt_len, embed_dim) without transpose(1, 2).
            attn_output = attn_output.reshape(bsz, tgt_len, self.embed_dim)
        else:
            attn_output = attn_output.transpose(1, 2).reshape(bsz, tgt_len, self.embed_dim)
        attn_output = self.o_proj(attn_output)
        return attn_output, attn_weights if output_attentions else None


class HFDecoderLayer(nn.Module):
    def __init__(self, config: HFConfig) -> None:
        super().__init__()
        self.self_attn = HFAttention(
            config.hidden_size, config.num_attention_heads, config.attention_dropout, bug=config.attn_bug
        )
        self.self_attn_layer_norm = nn.LayerNorm(config.hidden_size)
        self.fc1 = nn.Linear(config.hidden_size, config.intermediate_size)
        self.fc2 = nn.Linear(config.intermediate_size, config.hidden_size)
        self.final_layer_norm = nn.LayerNorm(config.hidden_size)

    def forward(self, hidden_states: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        residual = hidden_states
        hidden_states = self.self_attn_layer_norm(hidden_states)  # do_layer_norm_before (OPT)
        hidden_states, _ = self.self_attn(hidden_states, attention_mask=attention_mask)
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.fc2(F.gelu(self.fc1(self.final_layer_norm(hidden_states))))
        return residual + hidden_states


class HFModel(nn.Module):
    """Token embeddings + a frozen sinusoidal position table + layers + an LM head: ids -> logits (B, T, V). Causal
    when ``config.is_decoder``; the caller passes ``attention_mask`` (1 = real token), as with transformers."""

    def __init__(self, config: HFConfig) -> None:
        super().__init__()
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size, config.pad_token_id)
        self.embed_positions = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        if config.position_layout == "concat":
            table = get_sinusoidal_embedding_concat(config.max_position_embeddings, config.hidden_size)
        else:
            table = create_sinusoidal_embeddings(config.max_position_embeddings, config.hidden_size)
        self.embed_positions.weight.data.copy_(table)
        self.embed_positions.weight.requires_grad = False
        self.layers = nn.ModuleList([HFDecoderLayer(config) for _ in range(config.num_hidden_layers)])
        self.final_layer_norm = nn.LayerNorm(config.hidden_size)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.apply(self._init_weights)

    def _init_weights(self, module: nn.Module) -> None:
        std = 0.2
        if isinstance(module, nn.Linear):
            module.weight.data.normal_(mean=0.0, std=std)
            if module.bias is not None:
                module.bias.data.zero_()
        elif isinstance(module, nn.Embedding) and module.weight.requires_grad:
            module.weight.data.normal_(mean=0.0, std=1.0)
            if module.padding_idx is not None:
                module.weight.data[module.padding_idx].zero_()

    def hidden_states(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        seq_len = input_ids.size(1)
        inputs_embeds = self.embed_tokens(input_ids)
        positions = self.embed_positions(torch.arange(seq_len, device=input_ids.device))
        hidden_states = inputs_embeds + positions
        dtype = inputs_embeds.dtype
        mask = None
        if self.config.is_decoder:
            mask = _make_causal_mask(input_ids.shape, dtype, bug=self.config.causal_mask_bug)
        if attention_mask is not None:
            expanded = _expand_mask(attention_mask, dtype, tgt_len=seq_len, bug=self.config.padding_mask_bug)
            # the two additive masks summed, clamped so that finfo.min + finfo.min stays finite
            mask = expanded if mask is None else (mask + expanded).clamp_min(torch.finfo(dtype).min)
        for layer in self.layers:
            hidden_states = layer(hidden_states, attention_mask=mask)
        return self.final_layer_norm(hidden_states)

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        return self.lm_head(self.hidden_states(input_ids, attention_mask))


class MeanPoolClassifier(nn.Module):
    """Sentence classification on an encoder's states, mean-pooled as sentence-transformers does."""

    def __init__(self, config: HFConfig, num_labels: int = 3, bug: str = "") -> None:
        super().__init__()
        self.model = HFModel(config)
        self.classifier = nn.Linear(config.hidden_size, num_labels)
        self.bug = _check(bug, {"mean_over_padding"})

    def forward(self, input_ids: Tensor) -> Tensor:
        attention_mask = (input_ids != self.model.config.pad_token_id).long()
        token_embeddings = self.model.hidden_states(input_ids, attention_mask)
        if self.bug == "mean_over_padding":
            pooled = token_embeddings.mean(1)  # BUG: a plain mean over T counts the padding positions too
        else:
            input_mask_expanded = attention_mask.unsqueeze(-1).expand(token_embeddings.size()).float()
            pooled = torch.sum(token_embeddings * input_mask_expanded, 1) / torch.clamp(
                input_mask_expanded.sum(1), min=1e-9
            )
        return self.classifier(pooled)
