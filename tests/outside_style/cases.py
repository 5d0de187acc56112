"""The catalogue: each case builds outside-style modules (``modules.py``) with a fixed seed, runs one of the course's
probes on them and returns its ``ProbeReport``. ``buggy`` says whether a bug is planted; ``cause`` is the code of the
cause the probe should name ("" for correct cases).

Cause codes, by probe:
- causality: no_causal_mask, mask_convention, off_by_one_mask, cross_attention_queries, masked_row_nan
- equality: unbiased_std, eps_outside_sqrt, wrong_scale, head_split, softmax_axis, mask_convention, 2i_twice,
  sin_cos_layout, log_of_zero, shape, dropout_on
- padding: no_padding_mask, mask_wrong_axis, mean_over_padding, mask_convention, off_by_one_mask
- position: no_positions, weak_positions
- batch: batch_mixing
- output: probabilities, log_softmax_axis, softmax_axis
- any probe: dropout_on
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_utils import (
    ProbeReport,
    batch_probe,
    causality_probe,
    equality_probe,
    output_probe,
    padding_probe,
    position_probe,
)

from . import modules as m

PROBES = ("causality", "equality", "padding", "position", "batch", "output")
CAUSES = {
    "causality": {"no_causal_mask", "mask_convention", "off_by_one_mask", "cross_attention_queries", "masked_row_nan"},
    "equality": {
        "unbiased_std",
        "eps_outside_sqrt",
        "wrong_scale",
        "head_split",
        "softmax_axis",
        "mask_convention",
        "2i_twice",
        "sin_cos_layout",
        "log_of_zero",
        "shape",
    },
    "padding": {"no_padding_mask", "mask_wrong_axis", "mean_over_padding", "mask_convention", "off_by_one_mask"},
    "position": {"no_positions", "weak_positions"},
    "batch": {"batch_mixing"},
    "output": {"probabilities", "log_softmax_axis", "softmax_axis"},
}


@dataclass(frozen=True)
class Case:
    name: str
    style: str
    probe: str
    run: Callable[[], ProbeReport]
    buggy: bool
    cause: str = ""


CASES: list[Case] = []


def _add(name: str, probe: str, run: Callable[[], ProbeReport], cause: str = "") -> None:
    """Register a case; it is buggy exactly when it names a cause."""
    assert probe in PROBES, probe
    assert cause == "" or cause == "dropout_on" or cause in CAUSES[probe], (name, cause)
    assert all(c.name != name for c in CASES), name
    CASES.append(Case(name, name.split("/")[0], probe, run, bool(cause), cause))


V, PAD, D, H = 16, 0, 32, 4  # vocabulary (0 is padding), model width, heads


def ids(B: int = 3, T: int = 8, seed: int = 0, pads: tuple[int, ...] = ()) -> Tensor:
    """Token ids in 1..V-1; ``pads[b]`` trailing positions of sequence b set to PAD."""
    tokens = torch.randint(1, V, (B, T), generator=torch.Generator().manual_seed(seed))
    for b, n in enumerate(pads):
        if n:
            tokens[b, T - n :] = PAD
    return tokens


def floats(*shape: int, seed: int = 0, scale: float = 1.0) -> Tensor:
    return scale * torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# --- references built from the module under test ---------------------------------------------------------------------


def _torch_mha(q: nn.Linear, k: nn.Linear, v: nn.Linear, o: nn.Linear, heads: int, dropout: float = 0.0):
    """nn.MultiheadAttention with the given projections (its in_proj_weight stacks q, k, v)."""
    d = q.in_features
    ref = nn.MultiheadAttention(d, heads, dropout=dropout, batch_first=True)
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([q.weight, k.weight, v.weight]))
        ref.in_proj_bias.copy_(torch.cat([q.bias, k.bias, v.bias]))
        ref.out_proj.weight.copy_(o.weight)
        ref.out_proj.bias.copy_(o.bias)
    return ref.eval()


def torch_mha_from_annotated(mha: m.MultiHeadedAttention, dropout: float = 0.0) -> nn.MultiheadAttention:
    return _torch_mha(*mha.linears, heads=mha.h, dropout=dropout)


def torch_mha_from_hf(attn: m.HFAttention) -> nn.MultiheadAttention:
    return _torch_mha(attn.q_proj, attn.k_proj, attn.v_proj, attn.o_proj, heads=attn.num_heads)


def torch_mha_from_nanogpt(attn: m.CausalSelfAttention) -> nn.MultiheadAttention:
    d = attn.n_embd
    ref = nn.MultiheadAttention(d, attn.n_head, batch_first=True)
    with torch.no_grad():
        ref.in_proj_weight.copy_(attn.c_attn.weight)  # c_attn's rows are q, k, v: the same stacking
        ref.in_proj_bias.copy_(attn.c_attn.bias)
        ref.out_proj.weight.copy_(attn.c_proj.weight)
        ref.out_proj.bias.copy_(attn.c_proj.bias)
    return ref.eval()


def torch_reference(ref: nn.MultiheadAttention, **masks: Tensor | None) -> Callable[..., Any]:
    """Call nn.MultiheadAttention returning per-head weights (True = blocked in its bool masks)."""
    return lambda q, k, v: ref(q, k, v, need_weights=True, average_attn_weights=False, **masks)


def blocked_future(T: int) -> Tensor:
    return torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)


def sinusoid_table(n_pos: int, d: int) -> Tensor:
    """The paper's table, entry by entry: PE(p, 2i) = sin(p / 10000^(2i/d)), PE(p, 2i+1) = cos(the same)."""
    table = torch.zeros(n_pos, d, dtype=torch.float64)
    for p in range(n_pos):
        for i in range(0, d, 2):
            angle = p / 10000 ** (i / d)
            table[p, i] = math.sin(angle)
            table[p, i + 1] = math.cos(angle)
    return table.float()


# =====================================================================================================================
# nanoGPT
# =====================================================================================================================


def nanogpt(
    n_layer: int = 2, bug: str = "", flash: bool = False, dropout: float = 0.0, init_std: float = 0.02, seed: int = 0
) -> m.GPT:
    torch.manual_seed(seed)
    config = m.GPTConfig(block_size=16, vocab_size=V, n_layer=n_layer, n_head=H, n_embd=D, dropout=dropout)
    config.flash, config.bug, config.init_std = flash, bug, init_std
    return m.GPT(config).eval()


def logits_of(model: m.GPT) -> Callable[[Tensor], Tensor]:
    return lambda t: model(t)[0]


def _nanogpt_causality(
    n_layer=2, bug="", flash=False, B=3, T=8, train=False, dropout=0.0, init_std=0.02
) -> ProbeReport:
    model = nanogpt(n_layer, bug, flash, dropout, init_std)
    model.train(train)
    return causality_probe(logits_of(model), ids(B, T), V)


# 1, 2 and 3 layers with weights of a trained model's size (at nanoGPT's 0.02 init a leak fades layer by layer)
for n in (1, 2, 3):
    _add(
        f"nanogpt/causality/correct/{n}_layer{'s' * (n > 1)}",
        "causality",
        partial(_nanogpt_causality, n, init_std=0.1),
    )
_add("nanogpt/causality/correct/3_layers/init_0.02", "causality", partial(_nanogpt_causality, 3))
_add("nanogpt/causality/correct/T2", "causality", partial(_nanogpt_causality, T=2))
_add("nanogpt/causality/correct/T3", "causality", partial(_nanogpt_causality, T=3))
_add("nanogpt/causality/correct/B2", "causality", partial(_nanogpt_causality, B=2))
_add("nanogpt/causality/correct/B1_T10", "causality", partial(_nanogpt_causality, B=1, T=10))
_add("nanogpt/causality/correct/flash", "causality", partial(_nanogpt_causality, flash=True))
_add("nanogpt/causality/correct/dropout_0.1_eval", "causality", partial(_nanogpt_causality, dropout=0.1))
_add(
    "nanogpt/causality/no_causal_mask", "causality", partial(_nanogpt_causality, bug="no_causal_mask"), "no_causal_mask"
)
for n in (1, 2, 3):  # the leak is a band n tokens wide
    _add(
        f"nanogpt/causality/off_by_one/{n}_layer{'s' * (n > 1)}",
        "causality",
        partial(_nanogpt_causality, n, bug="off_by_one_mask", init_std=0.1),
        "off_by_one_mask",
    )
_add(
    "nanogpt/causality/off_by_one/3_layers/init_0.02",
    "causality",
    partial(_nanogpt_causality, 3, bug="off_by_one_mask"),
    "off_by_one_mask",
)
# 3 layers, 4 tokens: the band (3 wide) spans every later token, as no mask would
_add(
    "nanogpt/causality/off_by_one/3_layers_T4",
    "causality",
    partial(_nanogpt_causality, 3, bug="off_by_one_mask", T=4, init_std=0.1),
    "off_by_one_mask",
)
_add(
    "nanogpt/causality/flipped_mask_-inf",
    "causality",
    partial(_nanogpt_causality, bug="flipped_mask"),
    "masked_row_nan",
)
_add("nanogpt/causality/diagonal_masked", "causality", partial(_nanogpt_causality, bug="no_diagonal"), "masked_row_nan")
_add(
    "nanogpt/causality/flash_not_causal",
    "causality",
    partial(_nanogpt_causality, flash=True, bug="flash_not_causal"),
    "no_causal_mask",
)
_add(
    "nanogpt/causality/train_mode_dropout",
    "causality",
    partial(_nanogpt_causality, dropout=0.1, train=True),
    "dropout_on",
)


def _nanogpt_attention_vs_torch(bug: str = "", T: int = 8) -> ProbeReport:
    torch.manual_seed(0)
    attn = m.CausalSelfAttention(m.GPTConfig(n_head=H, n_embd=D, bug=bug)).eval()
    ref = torch_mha_from_nanogpt(attn)
    mask = blocked_future(T)
    return equality_probe(attn, lambda x: ref(x, x, x, attn_mask=mask, need_weights=False)[0], floats(2, T, D))


def _nanogpt_flash_vs_manual() -> ProbeReport:
    torch.manual_seed(0)
    flash = m.CausalSelfAttention(m.GPTConfig(n_head=H, n_embd=D, flash=True)).eval()
    manual = m.CausalSelfAttention(m.GPTConfig(n_head=H, n_embd=D)).eval()
    manual.load_state_dict(flash.state_dict())
    return equality_probe(flash, manual, floats(2, 8, D))


_add("nanogpt/equality/attention_vs_torch_mha", "equality", _nanogpt_attention_vs_torch)
_add("nanogpt/equality/flash_vs_manual", "equality", _nanogpt_flash_vs_manual)
_add(
    "nanogpt/equality/no_scale_vs_torch_mha",
    "equality",
    partial(_nanogpt_attention_vs_torch, "no_scale"),
    "wrong_scale",
)


def _nanogpt_position(B: int = 3, T: int = 8) -> ProbeReport:
    return position_probe(logits_of(nanogpt()), ids(B, T))


_add("nanogpt/position/correct", "position", _nanogpt_position)
_add("nanogpt/position/correct/T3_B2", "position", partial(_nanogpt_position, 2, 3))
_add("nanogpt/position/correct/T4_B2", "position", partial(_nanogpt_position, 2, 4))
_add(
    "nanogpt/padding/causal_model_right_padding",
    "padding",
    lambda: padding_probe(logits_of(nanogpt()), ids(), PAD),
)
_add("nanogpt/batch/correct", "batch", lambda: batch_probe(logits_of(nanogpt()), ids(4, 8)))
_add("nanogpt/batch/correct/B2_T3", "batch", lambda: batch_probe(logits_of(nanogpt(1)), ids(2, 3)))
_add("nanogpt/output/logits", "output", lambda: output_probe(logits_of(nanogpt())(ids())))


# =====================================================================================================================
# Annotated Transformer
# =====================================================================================================================

# --- LayerNorm against nn.LayerNorm ----------------------------------------------------------------------------------


def _layernorm(bug: str = "", affine: bool = False, scale: float = 1.0, d: int = 16) -> ProbeReport:
    torch.manual_seed(0)
    ours = m.LayerNorm(d, eps=1e-6, bug=bug)
    if affine:  # a trained LayerNorm: gains and biases away from 1 and 0
        with torch.no_grad():
            ours.a_2.copy_(1 + 0.3 * torch.randn(d))
            ours.b_2.copy_(0.3 * torch.randn(d))
    ref = nn.LayerNorm(d, eps=1e-6)
    with torch.no_grad():
        ref.weight.copy_(ours.a_2)
        ref.bias.copy_(ours.b_2)
    return equality_probe(ours, ref, floats(2, 5, d, scale=scale))


_add("annotated/layernorm/correct", "equality", _layernorm)
_add("annotated/layernorm/correct/trained_affine", "equality", partial(_layernorm, affine=True))
_add("annotated/layernorm/correct/small_inputs", "equality", partial(_layernorm, scale=1e-3))
_add("annotated/layernorm/unbiased_std", "equality", partial(_layernorm, "unbiased_std"), "unbiased_std")
_add(
    "annotated/layernorm/unbiased_std/trained_affine",
    "equality",
    partial(_layernorm, "unbiased_std", affine=True),
    "unbiased_std",
)
_add(
    "annotated/layernorm/eps_outside_sqrt/ordinary_scale",
    "equality",
    partial(_layernorm, "eps_outside_sqrt"),
    "eps_outside_sqrt",
)
_add(
    "annotated/layernorm/eps_outside_sqrt/small_scale",
    "equality",
    partial(_layernorm, "eps_outside_sqrt", scale=1e-3),
    "eps_outside_sqrt",
)
# both bugs at once (the original Annotated Transformer's LayerNorm): the unbiased std is the one that shows
_add("annotated/layernorm/both_unbiased_and_eps", "equality", partial(_layernorm, "both"), "unbiased_std")


# --- MultiHeadedAttention against nn.MultiheadAttention -------------------------------------------------------------


def _annotated_mha(
    bug: str = "", mask: str = "none", B: int = 2, T: int = 8, train: bool = False, ref_dropout: float = 0.0
) -> ProbeReport:
    torch.manual_seed(0)
    mha = m.MultiHeadedAttention(H, D, dropout=0.1, bug=bug).train(train)
    ref = torch_mha_from_annotated(mha, dropout=ref_dropout).train(ref_dropout > 0)
    x = floats(B, T, D)
    if mask == "causal":
        ours_mask, masks = m.subsequent_mask(T), {"attn_mask": blocked_future(T)}
    elif mask == "padding":
        tokens = ids(B, T, pads=(0, 3))
        ours_mask, masks = m.src_mask_of(tokens, PAD), {"key_padding_mask": tokens == PAD}
    else:
        ours_mask, masks = None, {}
    ours = lambda q, k, v: (mha(q, k, v, ours_mask), mha.attn)  # noqa: E731 -- (output, per-head weights)
    return equality_probe(ours, torch_reference(ref, **masks), x, x, x)


def _annotated_cross_attention(queries_from_encoder: bool = False) -> ProbeReport:
    torch.manual_seed(0)
    mha = m.MultiHeadedAttention(H, D, dropout=0.0).eval()
    ref = torch_mha_from_annotated(mha)
    x, memory = floats(2, 6, D, seed=1), floats(2, 9, D, seed=2)  # target length 6, source length 9
    if queries_from_encoder:
        # the DecoderLayer's bug, src_attn(m, x, x): queries from the encoder
        ours = lambda x, mem: (mha(mem, x, x), mha.attn)  # noqa: E731
    else:
        ours = lambda x, mem: (mha(x, mem, mem), mha.attn)  # noqa: E731
    return equality_probe(
        ours, lambda x, mem: ref(x, mem, mem, need_weights=True, average_attn_weights=False), x, memory
    )


_add("annotated/mha/correct/no_mask", "equality", _annotated_mha)
_add("annotated/mha/correct/causal", "equality", partial(_annotated_mha, mask="causal"))
_add("annotated/mha/correct/padding", "equality", partial(_annotated_mha, mask="padding"))
_add("annotated/mha/correct/T2_B2", "equality", partial(_annotated_mha, mask="causal", T=2))
_add("annotated/mha/correct/cross_attention", "equality", _annotated_cross_attention)
_add("annotated/mha/scale_sqrt_d_model", "equality", partial(_annotated_mha, "scale_d_model"), "wrong_scale")
_add("annotated/mha/no_scale", "equality", partial(_annotated_mha, "no_scale", mask="causal"), "wrong_scale")
_add("annotated/mha/split_view_no_transpose", "equality", partial(_annotated_mha, "split_no_transpose"), "head_split")
_add("annotated/mha/merge_no_transpose", "equality", partial(_annotated_mha, "merge_no_transpose"), "head_split")
_add("annotated/mha/softmax_over_queries", "equality", partial(_annotated_mha, "softmax_queries"), "softmax_axis")
_add(
    "annotated/mha/mask_eq_1/causal",
    "equality",
    partial(_annotated_mha, "mask_eq_1", mask="causal"),
    "mask_convention",
)
_add(
    "annotated/mha/mask_eq_1/padding",
    "equality",
    partial(_annotated_mha, "mask_eq_1", mask="padding"),
    "mask_convention",
)
_add("annotated/mha/train_mode_dropout", "equality", partial(_annotated_mha, train=True), "dropout_on")
_add(
    "annotated/mha/reference_in_train_mode",
    "equality",
    partial(_annotated_mha, mask="causal", ref_dropout=0.1),
    "dropout_on",
)
_add(
    "annotated/cross_attention/queries_from_encoder/equality",
    "equality",
    partial(_annotated_cross_attention, True),
    "shape",
)


# --- the attention function against F.scaled_dot_product_attention (which returns no weights) ----------------------


def _attention_fn_vs_sdpa(bug: str = "") -> ProbeReport:
    q, k, v = (floats(2, H, 8, D // H, seed=s) for s in (1, 2, 3))
    mask = m.subsequent_mask(8)  # True = may attend: SDPA's bool convention too
    return equality_probe(
        lambda q, k, v: m.attention(q, k, v, mask, bug=bug),
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
        q,
        k,
        v,
    )


_add("annotated/attention_fn/vs_sdpa/causal", "equality", _attention_fn_vs_sdpa)
_add(
    "annotated/attention_fn/mask_eq_1/vs_sdpa",
    "equality",
    partial(_attention_fn_vs_sdpa, "mask_eq_1"),
    "mask_convention",
)
_add("annotated/attention_fn/no_scale/vs_sdpa", "equality", partial(_attention_fn_vs_sdpa, "no_scale"), "wrong_scale")


# --- the positional table and the Generator --------------------------------------------------------------------------


def _annotated_pe_table(bug: str = "", n_pos: int = 20, d: int = 16) -> ProbeReport:
    pe = m.PositionalEncoding(d, 0.0, max_len=n_pos, bug=bug).pe[0]
    return equality_probe(pe, sinusoid_table(n_pos, d))


_add("annotated/pe_table/correct", "equality", _annotated_pe_table)
_add("annotated/pe_table/2i_twice", "equality", partial(_annotated_pe_table, "2i_twice"), "2i_twice")


def _generator_vs_log_softmax(bug: str = "", scale: float = 1.0) -> ProbeReport:
    torch.manual_seed(0)
    gen = m.Generator(D, V, bug=bug).eval()
    return equality_probe(gen, lambda x: F.log_softmax(gen.proj(x), dim=-1), floats(2, 6, D, scale=scale))


_add("annotated/generator/correct_vs_log_softmax", "equality", _generator_vs_log_softmax)
_add(
    "annotated/generator/log_of_softmax/large_scale",
    "equality",
    partial(_generator_vs_log_softmax, "log_of_softmax", scale=300.0),
    "log_of_zero",
)


# --- causality of the encoder-decoder's decoder ----------------------------------------------------------------------


def _annotated_decoder(
    N: int = 2, mask_bug: str = "", attn_bug: str = "", decoder_bug: str = "", T: int = 8, train: bool = False
) -> ProbeReport:
    torch.manual_seed(0)
    model = m.make_model(V, V, N=N, d_model=D, d_ff=64, h=H, attn_bug=attn_bug, decoder_bug=decoder_bug)
    model.train(train)
    src = ids(3, T, seed=5, pads=(0, 2, 0))  # same length as the target: the queries_from_encoder bug needs it
    src_mask = m.src_mask_of(src, PAD)
    with torch.no_grad():
        memory = model.encode(src, src_mask)

    def fn(tgt: Tensor) -> Tensor:
        return model.generator(model.decode(memory, src_mask, tgt, m.tgt_mask_of(tgt, PAD, bug=mask_bug)))

    return causality_probe(fn, ids(3, T), V, exclude=(PAD,))


_add("annotated/causality/decoder/correct/2_layers", "causality", _annotated_decoder)
_add("annotated/causality/decoder/correct/1_layer_T3", "causality", partial(_annotated_decoder, 1, T=3))
_add(
    "annotated/causality/decoder/off_by_one/2_layers",
    "causality",
    partial(_annotated_decoder, mask_bug="off_by_one_mask"),
    "off_by_one_mask",
)
_add(
    "annotated/causality/decoder/mask_eq_1",
    "causality",
    partial(_annotated_decoder, attn_bug="mask_eq_1"),
    "mask_convention",
)
_add(
    "annotated/causality/decoder/no_subsequent_mask",
    "causality",
    partial(_annotated_decoder, mask_bug="no_subsequent"),
    "no_causal_mask",
)
_add(
    "annotated/causality/decoder/queries_from_encoder",
    "causality",
    partial(_annotated_decoder, decoder_bug="queries_from_encoder"),
    "cross_attention_queries",
)
_add(
    "annotated/causality/decoder/train_mode_dropout", "causality", partial(_annotated_decoder, train=True), "dropout_on"
)


# --- an encoder-only model: padding, positions, batch ----------------------------------------------------------------


def annotated_encoder(**kwargs: Any) -> m.AnnotatedEncoderModel:
    torch.manual_seed(0)
    return m.AnnotatedEncoderModel(V, N=kwargs.pop("N", 2), d_model=D, d_ff=64, h=H, **kwargs).eval()


def _annotated_padding(pads: tuple[int, ...] = (), **kwargs: Any) -> ProbeReport:
    return padding_probe(annotated_encoder(**kwargs), ids(3, 8, pads=pads), PAD)


_add("annotated/padding/encoder/correct", "padding", partial(_annotated_padding, pad=PAD))
_add("annotated/padding/encoder/correct/already_padded", "padding", partial(_annotated_padding, (0, 3, 5), pad=PAD))
_add("annotated/padding/encoder/no_mask", "padding", partial(_annotated_padding, pad=None), "no_padding_mask")
_add(
    "annotated/padding/encoder/mask_along_queries",
    "padding",
    partial(_annotated_padding, pad=PAD, mask_bug="wrong_axis"),
    "mask_wrong_axis",
)
_add(
    "annotated/padding/encoder/mask_true_at_padding",
    "padding",
    partial(_annotated_padding, pad=PAD, mask_bug="convention"),
    "mask_convention",
)


def _annotated_position(**kwargs: Any) -> ProbeReport:
    return position_probe(annotated_encoder(**kwargs), ids(3, 8))


_add("annotated/position/encoder/correct", "position", _annotated_position)
_add(
    "annotated/position/encoder/correct/1_layer_T3_B2",
    "position",
    lambda: position_probe(annotated_encoder(N=1), ids(2, 3)),
)
_add(
    "annotated/position/encoder/pe_not_added",
    "position",
    partial(_annotated_position, pe_bug="not_added"),
    "no_positions",
)
_add(
    "annotated/position/encoder/embeddings_drown_pe",
    "position",
    partial(_annotated_position, xavier=False),
    "weak_positions",
)


def _annotated_batch(**kwargs: Any) -> ProbeReport:
    return batch_probe(annotated_encoder(pad=PAD, **kwargs), ids(4, 8, pads=(0, 2, 4, 1)))


_add("annotated/batch/encoder/correct_mixed_lengths", "batch", _annotated_batch)
_add(
    "annotated/batch/encoder/mask_without_head_axis",
    "batch",
    partial(_annotated_batch, mask_head_axis=False),  # B == h == 4: head b reads example b's mask
    "batch_mixing",
)


def _generator(bug: str = "") -> m.Generator:
    torch.manual_seed(0)
    return m.Generator(D, V, bug=bug).eval()


def _generator_batch(bug: str) -> ProbeReport:
    return batch_probe(_generator(bug), floats(3, 6, D))


def _generator_output(bug: str = "", B: int = 3) -> ProbeReport:
    with torch.no_grad():
        return output_probe(_generator(bug)(floats(B, 6, D)))


_add(
    "annotated/batch/generator/log_softmax_no_dim",
    "batch",
    partial(_generator_batch, "log_softmax_no_dim"),
    "batch_mixing",
)
_add("annotated/batch/generator/softmax_dim0", "batch", partial(_generator_batch, "softmax_dim0"), "batch_mixing")
_add("annotated/output/generator/log_probs", "output", _generator_output)
_add("annotated/output/generator/softmax", "output", partial(_generator_output, "softmax"), "probabilities")
_add(
    "annotated/output/generator/log_softmax_no_dim",
    "output",
    partial(_generator_output, "log_softmax_no_dim"),
    "log_softmax_axis",
)
_add(
    "annotated/output/generator/log_softmax_no_dim/B1",
    "output",
    partial(_generator_output, "log_softmax_no_dim", B=1),
    "log_softmax_axis",
)
_add(
    "annotated/output/generator/log_softmax_dim1",
    "output",
    partial(_generator_output, "log_softmax_dim1"),
    "log_softmax_axis",
)
_add("annotated/output/generator/softmax_dim0", "output", partial(_generator_output, "softmax_dim0"), "softmax_axis")
_add("annotated/output/generator/softmax_dim1", "output", partial(_generator_output, "softmax_dim1"), "softmax_axis")


# =====================================================================================================================
# Hugging Face
# =====================================================================================================================


def _hf_attention(bug: str = "", mask: str = "causal", B: int = 2, T: int = 8, mask_bug: str = "") -> ProbeReport:
    torch.manual_seed(0)
    attn = m.HFAttention(D, H, bug=bug).eval()
    ref = torch_mha_from_hf(attn)
    x = floats(B, T, D)
    if mask == "causal":
        additive = m._make_causal_mask(torch.Size((B, T)), torch.float32, bug=mask_bug)
        masks = {"attn_mask": blocked_future(T)}
    else:
        tokens = ids(B, T, pads=(0, 3))
        additive = m._expand_mask((tokens != PAD).long(), torch.float32, bug=mask_bug)
        masks = {"key_padding_mask": tokens == PAD}
    return equality_probe(
        lambda q, k, v: attn(q, attention_mask=additive, output_attentions=True),
        torch_reference(ref, **masks),
        x,
        x,
        x,
    )


_add("hf/attention/correct/causal", "equality", _hf_attention)
_add("hf/attention/correct/padding", "equality", partial(_hf_attention, mask="padding"))
_add("hf/attention/correct/T2_B2", "equality", partial(_hf_attention, T=2))
_add("hf/attention/scale_by_hidden_size", "equality", partial(_hf_attention, "scale_hidden"), "wrong_scale")
_add("hf/attention/split_reshape_no_transpose", "equality", partial(_hf_attention, "split_reshape"), "head_split")
_add("hf/attention/merge_no_transpose", "equality", partial(_hf_attention, "merge_no_transpose"), "head_split")
_add("hf/attention/softmax_over_queries", "equality", partial(_hf_attention, "softmax_queries"), "softmax_axis")
_add(
    "hf/attention/padding_mask_not_inverted",
    "equality",
    partial(_hf_attention, mask="padding", mask_bug="convention"),
    "mask_convention",
)
_add(
    "hf/attention/causal_mask_not_inverted",
    "equality",
    partial(_hf_attention, mask_bug="convention"),
    "mask_convention",
)


def _hf_table(table: Tensor) -> ProbeReport:
    return equality_probe(table, sinusoid_table(20, 16))


_add("hf/sinusoid/interleaved", "equality", lambda: _hf_table(m.create_sinusoidal_embeddings(20, 16)))
_add(
    "hf/sinusoid/2i_twice",
    "equality",
    lambda: _hf_table(m.create_sinusoidal_embeddings(20, 16, bug="2i_twice")),
    "2i_twice",
)
_add(
    "hf/sinusoid/sines_then_cosines",
    "equality",
    lambda: _hf_table(m.get_sinusoidal_embedding_concat(20, 16)),
    "sin_cos_layout",
)
_add(
    "hf/sinusoid/sines_then_cosines/fairseq_frequencies",
    "equality",
    lambda: _hf_table(m.get_sinusoidal_embedding_concat(20, 16, fairseq_frequencies=True)),
    "sin_cos_layout",
)


def hf_model(**kwargs: Any) -> m.HFModel:
    torch.manual_seed(0)
    return m.HFModel(m.HFConfig(vocab_size=V, hidden_size=D, num_attention_heads=H, pad_token_id=PAD, **kwargs)).eval()


def with_mask(model: m.HFModel) -> Callable[[Tensor], Tensor]:
    """What a careful caller does: pass attention_mask (1 = real token)."""
    return lambda t: model(t, attention_mask=(t != PAD).long())


def _hf_causality(pads: tuple[int, ...] = (), **kwargs: Any) -> ProbeReport:
    return causality_probe(with_mask(hf_model(**kwargs)), ids(3, 8, pads=pads), V, exclude=(PAD,))


_add("hf/causality/decoder/correct", "causality", _hf_causality)
_add("hf/causality/decoder/correct/with_padding", "causality", partial(_hf_causality, (0, 3, 1)))
_add("hf/causality/decoder/is_decoder_false", "causality", partial(_hf_causality, is_decoder=False), "no_causal_mask")
_add(
    "hf/causality/decoder/off_by_one/1_layer",
    "causality",
    partial(_hf_causality, num_hidden_layers=1, causal_mask_bug="off_by_one_mask"),
    "off_by_one_mask",
)
_add(
    "hf/causality/decoder/causal_mask_not_inverted",
    "causality",
    partial(_hf_causality, causal_mask_bug="convention"),
    "mask_convention",
)
# with one layer no output reads an earlier token (only later ones): the trace of a mask of the other convention
_add(
    "hf/causality/decoder/causal_mask_not_inverted/1_layer",
    "causality",
    partial(_hf_causality, num_hidden_layers=1, causal_mask_bug="convention"),
    "mask_convention",
)


def _hf_padding(fn: Callable[[Tensor], Tensor]) -> ProbeReport:
    return padding_probe(fn, ids(3, 8, pads=(0, 2, 0)), PAD)


_add("hf/padding/encoder/correct", "padding", lambda: _hf_padding(with_mask(hf_model(is_decoder=False))))
_add("hf/padding/decoder/correct", "padding", lambda: _hf_padding(with_mask(hf_model())))
_add(
    "hf/padding/encoder/attention_mask_not_passed",
    "padding",
    lambda: _hf_padding(hf_model(is_decoder=False)),
    "no_padding_mask",
)
_add(
    "hf/padding/encoder/expand_mask_along_queries",
    "padding",
    lambda: _hf_padding(with_mask(hf_model(is_decoder=False, padding_mask_bug="wrong_axis"))),
    "mask_wrong_axis",
)
_add(
    "hf/padding/encoder/expand_mask_not_inverted",
    "padding",
    lambda: _hf_padding(with_mask(hf_model(is_decoder=False, padding_mask_bug="convention"))),
    "mask_convention",
)


def hf_classifier(bug: str = "") -> m.MeanPoolClassifier:
    torch.manual_seed(0)
    config = m.HFConfig(vocab_size=V, hidden_size=D, num_attention_heads=H, pad_token_id=PAD, is_decoder=False)
    return m.MeanPoolClassifier(config, bug=bug).eval()


_add("hf/padding/classifier/masked_mean", "padding", lambda: _hf_padding(hf_classifier()))
_add(
    "hf/padding/classifier/mean_over_padding",
    "padding",
    lambda: _hf_padding(hf_classifier("mean_over_padding")),
    "mean_over_padding",
)


def _hf_position(B: int = 3, T: int = 8, **kwargs: Any) -> ProbeReport:
    return position_probe(with_mask(hf_model(is_decoder=False, **kwargs)), ids(B, T))


_add("hf/position/encoder/interleaved", "position", _hf_position)
# for a model built from scratch the sines-then-cosines layout is as good as the interleaved one
_add("hf/position/encoder/sines_then_cosines", "position", partial(_hf_position, position_layout="concat"))
_add("hf/position/encoder/correct/T3_B2", "position", partial(_hf_position, 2, 3))
_add(
    "hf/batch/decoder/correct_with_padding",
    "batch",
    lambda: batch_probe(with_mask(hf_model()), ids(3, 8, pads=(0, 2, 5))),
)
_add("hf/batch/classifier/correct", "batch", lambda: batch_probe(hf_classifier(), ids(3, 8, pads=(0, 2, 5))))
_add("hf/output/decoder/logits", "output", lambda: output_probe(with_mask(hf_model())(ids())))
_add("hf/output/decoder/logits/T2_B2", "output", lambda: output_probe(with_mask(hf_model())(ids(2, 2))))
