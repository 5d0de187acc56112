"""The Hugging Face bridge (``from_hf``), rotary embeddings and grouped-query attention, checked against code the
package did not write: Hugging Face ``transformers`` itself, and two references written here from public knowledge
of the architectures (a nanoGPT-style GPT-2 with one fused ``c_attn``, and a Meta-style Llama whose rotary
embedding turns *interleaved* pairs with complex numbers). Also hostile inputs to ``from_hf``.

Tiny models, float32 unless said, eval mode, seeded.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import Tensor, nn
from torch.testing import assert_close

transformers = pytest.importorskip("transformers")

from course_utils.model import (  # noqa: E402
    GPT,
    GroupedQueryAttention,
    KVCache,
    Llama,
    apply_rotary,
    expand_kv,
    from_hf,
)

VOCAB = 61
BLOCK = 24
TRANSFORMERS_MAJOR = int(transformers.__version__.split(".")[0])


# ----------------------------------------------------------------------------------------------------------------
# Tiny Hugging Face models with every parameter perturbed (so that biases, norms and positions all matter)
# ----------------------------------------------------------------------------------------------------------------


def _perturb(model: nn.Module, scale: float = 0.05) -> None:
    """Hugging Face initialises LayerNorm/RMSNorm to 1, biases to 0: add noise everywhere so that a misplaced
    bias, a swapped norm or a forgotten position table shows in the logits."""
    with torch.no_grad():
        for p in model.parameters():  # tied parameters appear once
            p.add_(torch.randn_like(p) * scale)


def gpt2_config(**kw):
    settings = dict(
        vocab_size=VOCAB,
        n_positions=BLOCK,
        n_embd=32,
        n_layer=2,
        n_head=4,
        attn_pdrop=0.0,
        embd_pdrop=0.0,
        resid_pdrop=0.0,
        bos_token_id=0,
        eos_token_id=0,
    )
    settings.update(kw)
    return transformers.GPT2Config(**settings)


def make_gpt2(seed: int = 0, scale: float = 0.05, **kw):
    torch.manual_seed(seed)
    model = transformers.GPT2LMHeadModel(gpt2_config(**kw))
    _perturb(model, scale)
    return model.eval()


def llama_config(**kw):
    settings = dict(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=BLOCK,
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
    )
    settings.update(kw)
    return transformers.LlamaConfig(**settings)


def make_llama(seed: int = 0, scale: float = 0.05, **kw):
    torch.manual_seed(seed)
    model = transformers.LlamaForCausalLM(llama_config(**kw))
    _perturb(model, scale)
    return model.eval()


def hf_logits(model, idx: Tensor) -> Tensor:
    with torch.no_grad():
        return model(idx).logits


def course_logits(model, idx: Tensor) -> Tensor:
    with torch.no_grad():
        return model(idx)[0]


def tokens(B: int = 2, T: int = 11, seed: int = 1) -> Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, VOCAB, (B, T), generator=g)


# ----------------------------------------------------------------------------------------------------------------
# 1. A nanoGPT-style GPT-2, written here: one fused c_attn, tanh GELU written out, nn.Linear everywhere
# ----------------------------------------------------------------------------------------------------------------


def gelu_tanh_by_hand(x: Tensor) -> Tensor:
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))


class NanoSelfAttention(nn.Module):
    def __init__(self, d: int, n_head: int) -> None:
        super().__init__()
        self.n_head = n_head
        self.c_attn = nn.Linear(d, 3 * d)  # q, k, v in one layer
        self.c_proj = nn.Linear(d, d)

    def forward(self, x: Tensor) -> Tensor:
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        future = torch.ones(T, T, dtype=torch.bool).triu(1)
        att = att.masked_fill(future, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class NanoMLP(nn.Module):
    def __init__(self, d: int, d_ff: int) -> None:
        super().__init__()
        self.c_fc = nn.Linear(d, d_ff)
        self.c_proj = nn.Linear(d_ff, d)

    def forward(self, x: Tensor) -> Tensor:
        return self.c_proj(gelu_tanh_by_hand(self.c_fc(x)))


class NanoBlock(nn.Module):
    def __init__(self, d: int, n_head: int, d_ff: int, eps: float) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(d, eps=eps)
        self.attn = NanoSelfAttention(d, n_head)
        self.ln_2 = nn.LayerNorm(d, eps=eps)
        self.mlp = NanoMLP(d, d_ff)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class NanoGPT2(nn.Module):
    def __init__(self, vocab: int, n_pos: int, d: int, n_head: int, n_layer: int, d_ff: int, eps: float) -> None:
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(n_pos, d)
        self.h = nn.ModuleList(NanoBlock(d, n_head, d_ff, eps) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(d, eps=eps)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied

    def forward(self, idx: Tensor) -> Tensor:
        x = self.wte(idx) + self.wpe(torch.arange(idx.size(1)))
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


CONV1D_SUFFIXES = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")


def nano_from_hf(hf) -> NanoGPT2:
    """The hand-written mapping: drop the ``transformer.`` prefix, transpose the four Conv1D weights."""
    c = hf.config
    ref = NanoGPT2(
        c.vocab_size, c.n_positions, c.n_embd, c.n_head, c.n_layer, c.n_inner or 4 * c.n_embd, c.layer_norm_epsilon
    )
    state = {}
    for name, tensor in hf.state_dict().items():
        if name.endswith(".attn.bias") or name.endswith(".attn.masked_bias"):
            continue  # causal-mask buffers of older transformers versions
        ours = name.removeprefix("transformer.")
        state[ours] = tensor.t().clone() if ours.endswith(CONV1D_SUFFIXES) else tensor.clone()
    ref.load_state_dict(state, strict=True)
    return ref.eval()


@pytest.mark.parametrize("n_inner", [None, 96])
def test_nanogpt_reference_hf_and_from_hf_agree_on_gpt2_logits(n_inner):
    hf = make_gpt2(n_inner=n_inner, layer_norm_epsilon=1e-4)
    ref = nano_from_hf(hf)
    ours = from_hf(hf)
    assert isinstance(ours, GPT)
    idx = tokens(2, BLOCK)  # the whole context: every learned position used
    expected = hf_logits(hf, idx)
    with torch.no_grad():
        assert_close(ref(idx), expected, atol=1e-5, rtol=0)
    assert_close(course_logits(ours, idx), expected, atol=1e-5, rtol=0)
    assert ours.blocks[0].feed_forward.w_1.out_features == (n_inner or 4 * 32)


# ----------------------------------------------------------------------------------------------------------------
# 2. A Meta-style Llama, written here: complex-number rotary on INTERLEAVED pairs (2i, 2i+1)
# ----------------------------------------------------------------------------------------------------------------


def meta_freqs_cis(head_dim: int, end: int, theta: float) -> Tensor:
    freqs = 1.0 / (theta ** (torch.arange(0, head_dim, 2)[: head_dim // 2].float() / head_dim))
    angles = torch.outer(torch.arange(end, dtype=torch.float32), freqs)  # (end, head_dim/2)
    return torch.polar(torch.ones_like(angles), angles)  # e^{i m omega}


def meta_rotate(x: Tensor, freqs_cis: Tensor) -> Tensor:
    """x (B, T, heads, head_dim): consecutive pairs read as complex numbers and multiplied by e^{i m omega}."""
    as_complex = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))  # (B, T, heads, head_dim/2)
    turned = as_complex * freqs_cis[None, :, None, :]
    return torch.view_as_real(turned).flatten(3).type_as(x)


class MetaRMSNorm(nn.Module):
    def __init__(self, d: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x: Tensor) -> Tensor:
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight


class MetaAttention(nn.Module):
    def __init__(self, d: int, n_heads: int, n_kv_heads: int) -> None:
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = n_heads, n_kv_heads, d // n_heads
        self.wq = nn.Linear(d, n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(d, n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(d, n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(n_heads * self.head_dim, d, bias=False)

    def forward(self, x: Tensor, freqs_cis: Tensor) -> Tensor:
        B, T, _ = x.shape
        q = self.wq(x).view(B, T, self.n_heads, self.head_dim)
        k = self.wk(x).view(B, T, self.n_kv_heads, self.head_dim)
        v = self.wv(x).view(B, T, self.n_kv_heads, self.head_dim)
        q, k = meta_rotate(q, freqs_cis), meta_rotate(k, freqs_cis)
        n_rep = self.n_heads // self.n_kv_heads
        k = k.repeat_interleave(n_rep, dim=2)  # key head j // n_rep serves query head j
        v = v.repeat_interleave(n_rep, dim=2)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (B, h, T, head_dim)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        scores = scores + torch.full((T, T), float("-inf")).triu(1)
        out = scores.float().softmax(dim=-1).type_as(q) @ v
        return self.wo(out.transpose(1, 2).reshape(B, T, -1))


class MetaFeedForward(nn.Module):
    def __init__(self, d: int, hidden: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(d, hidden, bias=False)  # gate
        self.w2 = nn.Linear(hidden, d, bias=False)  # down
        self.w3 = nn.Linear(d, hidden, bias=False)  # up

    def forward(self, x: Tensor) -> Tensor:
        gate = self.w1(x)
        return self.w2(gate * torch.sigmoid(gate) * self.w3(x))


class MetaBlock(nn.Module):
    def __init__(self, d: int, n_heads: int, n_kv_heads: int, hidden: int, eps: float) -> None:
        super().__init__()
        self.attention_norm = MetaRMSNorm(d, eps)
        self.attention = MetaAttention(d, n_heads, n_kv_heads)
        self.ffn_norm = MetaRMSNorm(d, eps)
        self.feed_forward = MetaFeedForward(d, hidden)

    def forward(self, x: Tensor, freqs_cis: Tensor) -> Tensor:
        h = x + self.attention(self.attention_norm(x), freqs_cis)
        return h + self.feed_forward(self.ffn_norm(h))


class MetaLlama(nn.Module):
    def __init__(self, vocab, d, n_layers, n_heads, n_kv_heads, hidden, eps, theta, max_len) -> None:
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(MetaBlock(d, n_heads, n_kv_heads, hidden, eps) for _ in range(n_layers))
        self.norm = MetaRMSNorm(d, eps)
        self.output = nn.Linear(d, vocab, bias=False)
        self.freqs_cis = meta_freqs_cis(d // n_heads, max_len, theta)

    def forward(self, idx: Tensor) -> Tensor:
        h = self.tok_embeddings(idx)
        freqs = self.freqs_cis[: idx.size(1)]
        for layer in self.layers:
            h = layer(h, freqs)
        return self.output(self.norm(h)).float()


def unpermute_hf_to_meta(w: Tensor, n_heads: int) -> Tensor:
    """The inverse of the permutation Meta->HF conversion applies to W_q and W_k rows, head by head: HF's row
    i (< head_dim/2) is Meta's row 2i, HF's row head_dim/2 + i is Meta's row 2i + 1."""
    rows, cols = w.shape
    return w.view(n_heads, 2, rows // n_heads // 2, cols).transpose(1, 2).reshape(rows, cols)


def hf_to_meta_permute(w: Tensor, n_heads: int) -> Tensor:
    """Meta->HF, as the public conversion script does it: (heads, head_dim/2, 2) -> (heads, 2, head_dim/2)."""
    rows, cols = w.shape
    return w.view(n_heads, rows // n_heads // 2, 2, cols).transpose(1, 2).reshape(rows, cols)


def meta_from_hf(hf, permute: bool = True) -> MetaLlama:
    c = hf.config
    theta = (getattr(c, "rope_parameters", None) or {}).get("rope_theta") or getattr(c, "rope_theta", 10000.0)
    kv = c.num_key_value_heads
    ref = MetaLlama(
        c.vocab_size,
        c.hidden_size,
        c.num_hidden_layers,
        c.num_attention_heads,
        kv,
        c.intermediate_size,
        c.rms_norm_eps,
        theta,
        c.max_position_embeddings,
    )
    sd = hf.state_dict()
    fix_q = (lambda w: unpermute_hf_to_meta(w, c.num_attention_heads)) if permute else (lambda w: w)
    fix_k = (lambda w: unpermute_hf_to_meta(w, kv)) if permute else (lambda w: w)
    state = {
        "tok_embeddings.weight": sd["model.embed_tokens.weight"],
        "norm.weight": sd["model.norm.weight"],
        "output.weight": sd["lm_head.weight"],
    }
    for i in range(c.num_hidden_layers):
        hf_layer, meta = f"model.layers.{i}.", f"layers.{i}."
        state[meta + "attention.wq.weight"] = fix_q(sd[hf_layer + "self_attn.q_proj.weight"])
        state[meta + "attention.wk.weight"] = fix_k(sd[hf_layer + "self_attn.k_proj.weight"])
        state[meta + "attention.wv.weight"] = sd[hf_layer + "self_attn.v_proj.weight"]
        state[meta + "attention.wo.weight"] = sd[hf_layer + "self_attn.o_proj.weight"]
        state[meta + "feed_forward.w1.weight"] = sd[hf_layer + "mlp.gate_proj.weight"]
        state[meta + "feed_forward.w2.weight"] = sd[hf_layer + "mlp.down_proj.weight"]
        state[meta + "feed_forward.w3.weight"] = sd[hf_layer + "mlp.up_proj.weight"]
        state[meta + "attention_norm.weight"] = sd[hf_layer + "input_layernorm.weight"]
        state[meta + "ffn_norm.weight"] = sd[hf_layer + "post_attention_layernorm.weight"]
    ref.load_state_dict({k: v.clone() for k, v in state.items()}, strict=True)
    return ref.eval()


def test_the_two_permutations_are_inverse():
    w = torch.randn(4 * 8, 5)
    assert_close(unpermute_hf_to_meta(hf_to_meta_permute(w, 4), 4), w, atol=0, rtol=0)
    assert not torch.equal(unpermute_hf_to_meta(w, 4), w)


@pytest.mark.parametrize("kv_heads", [4, 2, 1])
def test_meta_interleaved_llama_hf_and_from_hf_agree(kv_heads):
    hf = make_llama(num_key_value_heads=kv_heads)
    meta = meta_from_hf(hf)
    ours = from_hf(hf)
    assert isinstance(ours, Llama)
    idx = tokens(2, 13)
    expected = hf_logits(hf, idx)
    with torch.no_grad():
        assert_close(meta(idx), expected, atol=1e-5, rtol=0)
    assert_close(course_logits(ours, idx), expected, atol=1e-5, rtol=0)


def test_meta_llama_without_the_row_permutation_computes_something_else():
    """The halves/interleaved difference is real: skip the permutation and the logits change."""
    hf = make_llama()
    idx = tokens(2, 13)
    with torch.no_grad():
        wrong = meta_from_hf(hf, permute=False)(idx)
    assert (wrong - hf_logits(hf, idx)).abs().max() > 1e-3


def test_course_llama_reads_a_non_default_rope_theta():
    params = {"rope_type": "default", "rope_theta": 500000.0}
    kw = {"rope_parameters": params} if TRANSFORMERS_MAJOR >= 5 else {"rope_theta": 500000.0}
    hf = make_llama(**kw)
    ours = from_hf(hf)
    assert ours.blocks[0].self_attn.rope_theta == 500000.0
    idx = tokens(2, 13)
    expected = hf_logits(hf, idx)
    assert_close(course_logits(ours, idx), expected, atol=1e-5, rtol=0)
    with torch.no_grad():
        assert_close(meta_from_hf(hf)(idx), expected, atol=1e-5, rtol=0)


# ----------------------------------------------------------------------------------------------------------------
# 3. apply_rotary
# ----------------------------------------------------------------------------------------------------------------


def rotation_matrix_interleaved(position: float, d: int, theta: float = 10000.0) -> Tensor:
    """The (d, d) block-diagonal rotation of RoFormer, pairs (2i, 2i+1), built entry by entry in float64."""
    R = torch.zeros(d, d, dtype=torch.float64)
    for i in range(d // 2):
        a = position * theta ** (-2.0 * i / d)
        c, s = math.cos(a), math.sin(a)
        R[2 * i, 2 * i], R[2 * i, 2 * i + 1] = c, -s
        R[2 * i + 1, 2 * i], R[2 * i + 1, 2 * i + 1] = s, c
    return R


def halves_to_interleaved(d: int) -> list[int]:
    """Index list p with y = x[..., p]: y[2i] = x[i], y[2i+1] = x[i + d/2]."""
    return [j * (d // 2) + i for i in range(d // 2) for j in range(2)]


def test_interleaved_rotary_equals_the_explicit_rotation_matrices():
    d, positions = 12, torch.tensor([0, 1, 5, 17, 40])
    x = torch.randn(3, len(positions), d)
    got = apply_rotary(x, positions, pairing="interleaved")
    for t, m in enumerate(positions.tolist()):
        expected = x[:, t].double() @ rotation_matrix_interleaved(m, d).T
        assert_close(got[:, t].double(), expected, atol=2e-5, rtol=0)


def test_halves_rotary_equals_hugging_face_llama_rotary():
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

    config = llama_config(num_key_value_heads=4)
    rope = LlamaRotaryEmbedding(config)
    q, k = torch.randn(2, 4, 9, 8), torch.randn(2, 4, 9, 8)
    positions = torch.arange(3, 12)
    cos, sin = rope(q, positions[None].expand(2, -1))
    hf_q, hf_k = apply_rotary_pos_emb(q, k, cos, sin)
    assert_close(apply_rotary(q, positions), hf_q, atol=1e-6, rtol=0)
    assert_close(apply_rotary(k, positions, pairing="halves"), hf_k, atol=1e-6, rtol=0)


@pytest.mark.parametrize("pairing", ["halves", "interleaved"])
def test_rotary_preserves_norms(pairing):
    x = torch.randn(2, 3, 7, 16) * 3
    positions = torch.tensor([0, 3, 11, 50, 123, 999, 4096])
    out = apply_rotary(x, positions, theta=10000.0, pairing=pairing)
    assert out.shape == x.shape and out.dtype == x.dtype
    assert_close(out.norm(dim=-1), x.norm(dim=-1), atol=1e-4, rtol=1e-5)
    assert not torch.allclose(out[..., 1:, :], x[..., 1:, :])  # it did turn something


@pytest.mark.parametrize("pairing", ["halves", "interleaved"])
def test_rotated_dot_product_depends_only_on_distance(pairing):
    d = 16
    q, k = torch.randn(d), torch.randn(d)

    def score(m: int, n: int) -> Tensor:
        rq = apply_rotary(q[None], torch.tensor([m]), pairing=pairing)[0]
        rk = apply_rotary(k[None], torch.tensor([n]), pairing=pairing)[0]
        return rq @ rk

    for m, n in [(5, 2), (2, 5), (9, 9), (30, 0)]:
        base = score(m, n)
        for shift in (1, 7, 250):
            assert_close(score(m + shift, n + shift), base, atol=2e-4, rtol=0)
    by_distance = torch.stack([score(n + 3, n) for n in range(8)])
    assert_close(by_distance, by_distance[0].expand(8), atol=2e-4, rtol=0)  # distance 3 everywhere
    distances = torch.stack([score(m, 0) for m in range(8)])
    assert distances.std() > 1e-2  # and the score does change with the distance


@pytest.mark.parametrize("pairing", ["halves", "interleaved"])
def test_position_zero_is_the_identity(pairing):
    x = torch.randn(2, 4, 3, 10)
    out = apply_rotary(x, torch.zeros(3, dtype=torch.long), pairing=pairing)
    assert_close(out, x, atol=0, rtol=0)


def test_halves_and_interleaved_differ_by_a_permutation_of_dimensions():
    d = 16
    p = halves_to_interleaved(d)
    x = torch.randn(2, 3, 6, d)
    positions = torch.tensor([0, 1, 2, 9, 33, 100])
    halves = apply_rotary(x, positions, pairing="halves")
    interleaved = apply_rotary(x[..., p], positions, pairing="interleaved")
    assert_close(interleaved, halves[..., p], atol=1e-6, rtol=0)
    assert not torch.allclose(apply_rotary(x, positions, pairing="interleaved"), halves)


def test_rotary_rejects_bad_shapes_with_helpful_messages():
    with pytest.raises(ValueError, match=r"d_k=7 must be even"):
        apply_rotary(torch.randn(1, 4, 7), torch.arange(4))
    with pytest.raises(ValueError, match=r"positions must have shape \(T,\) = \(4,\)") as info:
        apply_rotary(torch.randn(1, 4, 8), torch.arange(5))
    assert "(5,)" in str(info.value)
    with pytest.raises(ValueError, match="positions"):
        apply_rotary(torch.randn(1, 4, 8), torch.arange(4)[None])  # (1, T): not (T,)
    with pytest.raises(ValueError, match="positions"):
        apply_rotary(torch.randn(1, 4, 8), torch.tensor(3))  # a scalar
    with pytest.raises(ValueError, match="pairing"):
        apply_rotary(torch.randn(1, 4, 8), torch.arange(4), pairing="neox")


# ----------------------------------------------------------------------------------------------------------------
# 4. GroupedQueryAttention against plain causal attention written here
# ----------------------------------------------------------------------------------------------------------------


def rope_halves_by_hand(x: Tensor, positions: Tensor, theta: float) -> Tensor:
    d = x.size(-1)
    half = d // 2
    inv = theta ** (-2.0 * torch.arange(half, dtype=torch.float64) / d)
    angles = positions.double()[:, None] * inv  # (T, half)
    cos, sin = angles.cos(), angles.sin()
    x1, x2 = x[..., :half].double(), x[..., half:].double()
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).to(x.dtype)


def reference_attention(gqa: GroupedQueryAttention, x: Tensor) -> Tensor:
    """Causal multi-head attention with rotary (halves) in plain tensor ops, from gqa's weights."""
    B, T, _ = x.shape
    h, g, d_k = gqa.n_heads, gqa.n_kv_heads, gqa.d_k
    q = (x @ gqa.w_q.weight.T).view(B, T, h, d_k).transpose(1, 2)
    k = (x @ gqa.w_k.weight.T).view(B, T, g, d_k).transpose(1, 2)
    v = (x @ gqa.w_v.weight.T).view(B, T, g, d_k).transpose(1, 2)
    positions = torch.arange(T)
    q, k = rope_halves_by_hand(q, positions, gqa.rope_theta), rope_halves_by_hand(k, positions, gqa.rope_theta)
    heads = []
    for j in range(h):
        kj, vj = k[:, j * g // h], v[:, j * g // h]  # query head j reads key head j // (h / g)
        s = q[:, j] @ kj.transpose(-2, -1) / math.sqrt(d_k)
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
        heads.append(s.softmax(-1) @ vj)
    return torch.cat(heads, dim=-1) @ gqa.w_o.weight.T


@pytest.mark.parametrize("n_kv_heads", [4, 2, 1])
def test_gqa_equals_plain_causal_attention_with_rotary(n_kv_heads):
    torch.manual_seed(0)
    gqa = GroupedQueryAttention(32, 4, n_kv_heads, rope_theta=1000.0).eval()
    x = torch.randn(2, 9, 32)
    with torch.no_grad():
        out, weights = gqa(x)
        assert weights is None
        assert_close(out, reference_attention(gqa, x), atol=1e-5, rtol=0)


@pytest.mark.parametrize("n_kv_heads", [4, 2, 1])
def test_gqa_kv_cache_token_by_token_and_prompt_then_tokens(n_kv_heads):
    torch.manual_seed(0)
    gqa = GroupedQueryAttention(48, 6 if n_kv_heads != 4 else 4, n_kv_heads).eval()
    B, T = 2, 10
    x = torch.randn(B, T, 48)
    with torch.no_grad():
        full, _ = gqa(x)
        cache = KVCache()
        steps = [gqa(x[:, t : t + 1], cache)[0] for t in range(T)]
        assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=0)
        assert cache.keys is not None and cache.values is not None
        assert cache.keys.shape == (B, n_kv_heads, T, gqa.d_k)
        assert cache.values.shape == (B, n_kv_heads, T, gqa.d_k)

        cache = KVCache()
        prompt, _ = gqa(x[:, :4], cache)
        chunk, _ = gqa(x[:, 4:7], cache)  # several new positions after cached ones
        rest = [gqa(x[:, t : t + 1], cache)[0] for t in range(7, T)]
        assert_close(torch.cat([prompt, chunk, *rest], dim=1), full, atol=1e-5, rtol=0)
        assert len(cache) == T


def test_gqa_rejects_n_kv_heads_that_do_not_divide_n_heads():
    with pytest.raises(ValueError, match=r"n_kv_heads in \[1, 2, 3, 6\]"):
        GroupedQueryAttention(48, 6, 4)
    with pytest.raises(ValueError, match=r"n_kv_heads in \[1, 2, 4\]"):
        GroupedQueryAttention(32, 4, 8)  # more key/value heads than query heads
    with pytest.raises(ValueError, match="positive"):
        GroupedQueryAttention(32, 4, 0)


def test_gqa_need_weights_equals_the_fused_path_and_weights_are_causal():
    torch.manual_seed(0)
    gqa = GroupedQueryAttention(32, 4, 2).eval()
    x = torch.randn(2, 7, 32)
    with torch.no_grad():
        fused, none = gqa(x)
        readable, weights = gqa(x, need_weights=True)
    assert none is None
    assert_close(readable, fused, atol=1e-6, rtol=0)
    assert weights.shape == (2, 4, 7, 7)
    assert_close(weights.sum(-1), torch.ones(2, 4, 7))
    assert torch.all(weights.triu(1) == 0)
    assert torch.all(weights[..., torch.ones(7, 7, dtype=torch.bool).tril()] > 0)

    with torch.no_grad():  # with a cache: 3 queries after 4 cached keys
        cache = KVCache()
        gqa(x[:, :4], cache)
        out, w = gqa(x[:, 4:], cache, need_weights=True)
    assert_close(out, fused[:, 4:], atol=1e-5, rtol=0)
    assert w.shape == (2, 4, 3, 7)
    assert_close(w.sum(-1), torch.ones(2, 4, 3))
    assert torch.all(w.triu(5) == 0)  # query 4 + i sees keys 0 ... 4 + i
    assert torch.all(w[..., torch.ones(3, 7, dtype=torch.bool).tril(4)] > 0)


# ----------------------------------------------------------------------------------------------------------------
# 5. expand_kv
# ----------------------------------------------------------------------------------------------------------------


def test_expand_kv_is_repeat_interleave_not_repeat():
    x = torch.randn(2, 3, 5, 4)
    for n_rep in (2, 3):
        out = expand_kv(x, n_rep)
        assert out.shape == (2, 3 * n_rep, 5, 4)
        assert_close(out, x.repeat_interleave(n_rep, dim=1), atol=0, rtol=0)
        assert not torch.equal(out, x.repeat(1, n_rep, 1, 1))
        for j in range(3 * n_rep):
            assert torch.equal(out[:, j], x[:, j // n_rep])
    assert torch.equal(expand_kv(x, 1), x)
    with pytest.raises(ValueError, match="at least 1; got 0"):
        expand_kv(x, 0)  # no head at all, where a silent empty tensor would follow


# ----------------------------------------------------------------------------------------------------------------
# 6. from_hf on hostile and edge inputs
# ----------------------------------------------------------------------------------------------------------------


def test_from_hf_refuses_a_model_without_lm_head():
    torch.manual_seed(0)
    with pytest.raises(TypeError, match="head"):
        from_hf(transformers.GPT2Model(gpt2_config()))
    with pytest.raises(TypeError, match="head"):
        from_hf(transformers.LlamaModel(llama_config()))


def test_from_hf_refuses_other_models_and_objects():
    torch.manual_seed(0)
    bert = transformers.BertModel(
        transformers.BertConfig(
            vocab_size=VOCAB, hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64
        )
    )
    with pytest.raises(TypeError, match="bert"):
        from_hf(bert)
    with pytest.raises(TypeError, match="Linear"):
        from_hf(nn.Linear(4, 4))
    with pytest.raises(TypeError):
        from_hf("gpt2")  # a name is not a model


@pytest.mark.parametrize(
    ("settings", "words"),
    [
        ({"activation_function": "relu"}, "relu"),
        ({"scale_attn_by_inverse_layer_idx": True}, "scaled"),
        ({"scale_attn_weights": False}, "scaled"),
        ({"tie_word_embeddings": False}, "tie_word_embeddings"),
    ],
)
def test_from_hf_refuses_gpt2_settings_it_cannot_compute(settings, words):
    with pytest.raises(ValueError, match=words):
        from_hf(make_gpt2(**settings))


def _scaled_rope(kind: str) -> dict:
    if TRANSFORMERS_MAJOR >= 5:
        return {"rope_parameters": {"rope_type": kind, "factor": 2.0, "rope_theta": 10000.0}}
    return {"rope_scaling": {"type": kind, "factor": 2.0}}


@pytest.mark.parametrize(
    ("settings", "words"),
    [
        (_scaled_rope("linear"), "linear"),
        (_scaled_rope("dynamic"), "dynamic"),
        ({"attention_bias": True}, "attention_bias"),
        ({"mlp_bias": True}, "mlp_bias"),
        ({"hidden_act": "gelu"}, "gelu"),
        ({"head_dim": 16}, "head_dim"),
    ],
)
def test_from_hf_refuses_llama_settings_it_cannot_compute(settings, words):
    with pytest.raises(ValueError, match=words):
        from_hf(make_llama(**settings))


def test_llama_with_tied_embeddings_loads_and_matches():
    hf = make_llama(tie_word_embeddings=True)
    assert hf.lm_head.weight is hf.model.embed_tokens.weight
    ours = from_hf(hf)
    assert ours.head.weight is ours.token_embed.weight
    idx = tokens(2, 9)
    assert_close(course_logits(ours, idx), hf_logits(hf, idx), atol=1e-5, rtol=0)


def test_gpt2_in_float64_copies_to_float64_and_matches_closely():
    hf = make_gpt2().double()
    ours = from_hf(hf)
    assert all(p.dtype == torch.float64 for p in ours.parameters())
    idx = tokens(2, 12)
    got = course_logits(ours, idx)
    assert got.dtype == torch.float64
    assert_close(got, hf_logits(hf, idx), atol=1e-10, rtol=0)


def test_llama_in_float64_copies_to_float64_and_matches_closely():
    hf = make_llama().double()
    ours = from_hf(hf)
    assert all(p.dtype == torch.float64 for p in ours.parameters())
    idx = tokens(2, 12)
    got = course_logits(ours, idx)
    assert got.dtype == torch.float64
    assert_close(got, hf_logits(hf, idx), atol=1e-10, rtol=0)


def test_apply_rotary_keeps_float64_and_its_dtype():
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    out = apply_rotary(x, torch.arange(5))
    assert out.dtype == torch.float64
    half = torch.randn(2, 5, 8, dtype=torch.bfloat16)
    assert apply_rotary(half, torch.arange(5)).dtype == torch.bfloat16


def test_apply_rotary_in_float64_rotates_in_float64():
    d = 8
    x = torch.randn(3, 4, d, dtype=torch.float64)
    positions = torch.tensor([0, 1, 2, 3])
    # Angles rounded to float32 as Llama does, then rotation carried out in float64: what transformers computes.
    omega = 1.0 / 10000.0 ** (torch.arange(0, d, 2, dtype=torch.float32) / d)
    angles = (positions.float()[:, None] * omega).repeat(1, 2)
    cos, sin = angles.cos().double(), angles.sin().double()
    rotated_half = torch.cat([-x[..., d // 2 :], x[..., : d // 2]], dim=-1)
    expected = x * cos + rotated_half * sin
    assert_close(apply_rotary(x, positions), expected, atol=1e-12, rtol=0)


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_copy_keeps_train_mode_and_eval_mode(family):
    hf = make_gpt2() if family == "gpt2" else make_llama()
    hf.train()
    ours = from_hf(hf)
    assert ours.training and all(m.training for m in ours.modules())
    hf.eval()
    ours = from_hf(hf)
    assert not ours.training and not any(m.training for m in ours.modules())
    hf.train()  # no dropout configured: train mode computes the same logits
    idx = tokens(2, 8)
    assert_close(course_logits(ours.train(), idx), hf_logits(hf, idx), atol=1e-5, rtol=0)


def test_gpt2_train_mode_dropout_is_kept_or_refused():
    hf = make_gpt2(embd_pdrop=0.5).train()
    try:
        ours = from_hf(hf)
    except ValueError:
        return  # refusing a setting it cannot reproduce is acceptable
    idx = tokens(2, 8)
    torch.manual_seed(1)
    a, b = hf_logits(hf, idx), hf_logits(hf, idx)
    assert not torch.allclose(a, b)  # Hugging Face's model drops embeddings
    c, d = course_logits(ours, idx), course_logits(ours, idx)
    assert not torch.allclose(c, d)  # so should the copy


def _storages(module: nn.Module) -> set[int]:
    return {t.untyped_storage().data_ptr() for t in module.state_dict().values() if t.numel()}


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_copy_shares_no_storage_with_the_hf_model(family):
    hf = make_gpt2() if family == "gpt2" else make_llama(tie_word_embeddings=True)
    ours = from_hf(hf)
    assert not (_storages(hf) & _storages(ours))
    idx = tokens(2, 8)
    before_hf, before_ours = hf_logits(hf, idx), course_logits(ours, idx)
    with torch.no_grad():
        for p in hf.parameters():
            p.mul_(-1.5)
    assert_close(course_logits(ours, idx), before_ours, atol=0, rtol=0)
    with torch.no_grad():
        for p in hf.parameters():
            p.div_(-1.5)
        for p in ours.parameters():
            p.zero_()
    assert_close(hf_logits(hf, idx), before_hf, atol=1e-6, rtol=0)


# ----------------------------------------------------------------------------------------------------------------
# 7. Greedy generation: Hugging Face's generate against the course's
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("family", ["gpt2", "llama"])
@pytest.mark.parametrize("use_cache", [True, False])
@pytest.mark.parametrize("shape", [(1, 1), (2, 5)])
def test_greedy_generation_matches_hugging_face(family, use_cache, shape):
    # Larger weights than elsewhere: a tiny random model otherwise soon repeats one token forever.
    hf = make_gpt2(scale=0.3) if family == "gpt2" else make_llama(scale=0.3)
    ours = from_hf(hf)
    prompt = tokens(*shape, seed=3)
    new = 10
    with torch.no_grad():
        expected = hf.generate(
            prompt,
            attention_mask=torch.ones_like(prompt),
            do_sample=False,
            max_new_tokens=new,
            min_new_tokens=new,
            eos_token_id=None,
            pad_token_id=0,
        )
    got = ours.generate(prompt, new, temperature=0, use_cache=use_cache)
    assert got.shape == (shape[0], shape[1] + new)
    assert torch.equal(got, expected)
    assert len(set(got[:, shape[1] :].flatten().tolist())) >= 4  # a varied continuation, not one token repeated
    assert not ours.training


# ----------------------------------------------------------------------------------------------------------------
# Past the context window: the course's models slide theirs, Hugging Face's do not (from_hf's docstring says so)
# ----------------------------------------------------------------------------------------------------------------


def hf_greedy(model, idx: Tensor, n: int) -> Tensor:
    """Hugging Face's model, greedy, each step on the whole text so far (no window)."""
    with torch.no_grad():
        for _ in range(n):
            idx = torch.cat([idx, model(idx).logits[:, -1:].argmax(-1)], dim=1)
    return idx


@pytest.mark.parametrize("make", [make_gpt2, make_llama], ids=["gpt2", "llama"])
def test_greedy_text_is_the_same_up_to_the_window_and_the_course_slides_past_it(make):
    hf = make(seed=3, scale=0.5)
    ours = from_hf(hf)
    assert ours.block_size == BLOCK  # n_positions or max_position_embeddings
    prompt = tokens(B=1, T=6, seed=4)
    fits = BLOCK - prompt.size(1)  # new tokens while the whole text fits the window
    assert torch.equal(ours.generate(prompt, fits, temperature=0.0), hf_greedy(hf, prompt, fits))
    longer = ours.generate(prompt, fits + 8, temperature=0.0)  # the window slides: the last BLOCK tokens are read
    assert longer.shape == (1, BLOCK + 8) and torch.equal(longer[:, :BLOCK], hf_greedy(hf, prompt, fits))
    if make is make_gpt2:  # GPT-2's position table ends at n_positions: reading BLOCK + 1 tokens, Hugging Face's fails
        hf_greedy(hf, prompt, fits + 1)  # it reads BLOCK tokens to write token BLOCK + 1
        with pytest.raises(IndexError):
            hf_greedy(hf, prompt, fits + 2)
    else:  # rotary angles have no table: Hugging Face's Llama goes on reading the whole text, the course's crops
        theirs = hf_greedy(hf, prompt, fits + 8)
        assert theirs.shape == longer.shape
        with pytest.raises(ValueError, match="exceed block_size"):  # the forward pass itself refuses, never crops
            ours(theirs)
