"""Hugging Face ``transformers`` models in the course's own classes: ``from_hf(GPT2LMHeadModel)`` is a ``GPT``,
``from_hf(LlamaForCausalLM)`` a ``Llama``, with the same weights and the same outputs.

One name table per model family, read with ``convert_torch.rename`` as the PyTorch twins read theirs:
``GPT2_NAMES`` and ``LLAMA_NAMES`` pair our submodule names with Hugging Face's. Two more differences for GPT-2:

- **Packed projections**: GPT-2 computes queries, keys and values with one layer ``attn.c_attn``
  ``(d_model -> 3 d_model)``; we keep ``w_q``, ``w_k``, ``w_v`` (``GPT2_PACKED``).
- **Transposed weights**: GPT-2's layers are ``Conv1D`` modules (a name kept from the original TensorFlow code;
  they are linear layers), which store their weight as ``(in, out)`` and compute ``x @ W + b``; ``nn.Linear``
  stores ``(out, in)`` and computes ``x @ W.T + b``. Every ``Conv1D`` weight is transposed on the way.

``transformers`` is not imported here: ``from_hf`` reads the model it is given (its ``config`` and
``state_dict()``), so the package does not need ``transformers`` installed.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from .convert_torch import rename
from .gpt import GPT
from .llama import Llama

__all__ = ["GPT2_NAMES", "GPT2_PACKED", "LLAMA_NAMES", "from_hf", "from_hf_state"]

# (our name, GPT-2's name) for every submodule named differently, in GPT2LMHeadModel.
GPT2_NAMES: list[tuple[str, str]] = [
    ("token_embed", "transformer.wte"),  # word token embedding
    ("position_embed", "transformer.wpe"),  # word position embedding (learned, as in chapter 07)
    ("blocks", "transformer.h"),  # the stack of blocks
    ("norm1", "ln_1"),  # the LayerNorm before attention
    ("self_attn.w_o", "attn.c_proj"),  # attention's output projection W^O
    ("self_attn", "attn"),
    ("norm2", "ln_2"),  # the LayerNorm before the feed-forward network
    ("feed_forward.w_1", "mlp.c_fc"),  # the feed-forward's first layer, d_model -> 4 d_model
    ("feed_forward.w_2", "mlp.c_proj"),  # and its second, 4 d_model -> d_model
    ("norm", "transformer.ln_f"),  # the final LayerNorm
    ("head", "lm_head"),  # the output head (tied to the token embedding)
]

# GPT-2's one layer for queries, keys and values, and our three layers it holds, in its order.
GPT2_PACKED: tuple[str, tuple[str, str, str]] = ("c_attn", ("w_q", "w_k", "w_v"))

# (our name, Llama's name), in LlamaForCausalLM.
LLAMA_NAMES: list[tuple[str, str]] = [
    ("token_embed", "model.embed_tokens"),
    ("blocks", "model.layers"),
    ("norm1", "input_layernorm"),  # the RMSNorm before attention
    ("norm2", "post_attention_layernorm"),  # the RMSNorm before the feed-forward (after attention, hence its name)
    ("self_attn.w_q", "self_attn.q_proj"),
    ("self_attn.w_k", "self_attn.k_proj"),
    ("self_attn.w_v", "self_attn.v_proj"),
    ("self_attn.w_o", "self_attn.o_proj"),
    ("feed_forward.w_gate", "mlp.gate_proj"),  # SwiGLU's gate, which goes through SiLU
    ("feed_forward.w_up", "mlp.up_proj"),
    ("feed_forward.w_down", "mlp.down_proj"),
    ("norm", "model.norm"),
    ("head", "lm_head"),
]


def from_hf_state(
    state: dict[str, Tensor],
    table: list[tuple[str, str]],
    transposed: set[str] | frozenset[str] = frozenset(),
    packed: tuple[str, tuple[str, ...]] | None = None,
) -> dict[str, Tensor]:
    """A Hugging Face state dict with our names: ``table`` read right to left; the weights named in ``transposed``
    (Conv1D's ``(in, out)``) transposed to ``nn.Linear``'s ``(out, in)``; a ``packed`` layer's weight and bias split
    into its parts along the output dimension."""
    reverse = [(theirs, ours) for ours, theirs in table]
    out: dict[str, Tensor] = {}
    for name, tensor in state.items():
        if name in transposed:
            tensor = tensor.t()  # (in, out) -> (out, in)
        owner, _, kind = name.rpartition(".")  # "transformer.h.0.attn.c_attn", "weight"
        parent, _, layer = owner.rpartition(".")  # "transformer.h.0.attn", "c_attn"
        if packed is not None and layer == packed[0]:
            parts = packed[1]
            for part, piece in zip(parts, tensor.chunk(len(parts), dim=0)):  # (3 d_model, ...) -> 3 x (d_model, ...)
                out[rename(f"{parent}.{part}.{kind}", reverse)] = piece
        else:
            out[rename(name, reverse)] = tensor
    return out


def _setting(config: Any, name: str, default: Any = None) -> Any:
    return getattr(config, name, default)


def _gpt2_arguments(config: Any) -> dict[str, Any]:
    activations = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu"}
    act = _setting(config, "activation_function", "gelu_new")
    if act not in activations:
        raise ValueError(
            f"cannot copy a GPT-2 with activation_function={act!r}: the course's GPT has {sorted(activations)}"
        )
    if not _setting(config, "scale_attn_weights", True) or _setting(config, "scale_attn_by_inverse_layer_idx", False):
        raise ValueError("cannot copy a GPT-2 whose attention is not scaled by 1/sqrt(d_k) alone")
    if _setting(config, "add_cross_attention", False):
        raise ValueError("cannot copy a GPT-2 with cross-attention: the course's GPT is decoder-only")
    if not _setting(config, "tie_word_embeddings", True):
        raise ValueError("cannot copy a GPT-2 with tie_word_embeddings=False: the course's GPT ties its head")
    rates = {name: _setting(config, name, 0.0) for name in ("embd_pdrop", "attn_pdrop", "resid_pdrop")}
    if len(set(rates.values())) > 1:
        raise ValueError(f"cannot copy a GPT-2 with different dropout rates {rates}: the course's GPT has one rate")
    return dict(
        vocab_size=config.vocab_size,
        block_size=config.n_positions,
        d_model=config.n_embd,
        n_heads=config.n_head,
        n_layers=config.n_layer,
        d_ff=_setting(config, "n_inner") or 4 * config.n_embd,
        dropout=rates["resid_pdrop"],
        bias=True,
        activation=activations[act],
        norm_eps=config.layer_norm_epsilon,
    )


def _rope_theta(config: Any) -> float:
    """The rotary base, wherever this version of ``transformers`` keeps it; an error for scaled variants."""
    scaling = _setting(config, "rope_scaling") or _setting(config, "rope_parameters") or {}
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind != "default":
        raise ValueError(f"cannot copy a Llama with rope_type={kind!r}: the course's rotary embedding is the plain one")
    theta = scaling.get("rope_theta", _setting(config, "rope_theta"))
    return float(theta if theta is not None else 10000.0)


def _llama_arguments(config: Any) -> dict[str, Any]:
    act = _setting(config, "hidden_act", "silu")
    if act != "silu":
        raise ValueError(f"cannot copy a Llama with hidden_act={act!r}: SwiGLU's gate uses SiLU")
    if _setting(config, "attention_bias", False) or _setting(config, "mlp_bias", False):
        raise ValueError("cannot copy a Llama with attention_bias or mlp_bias: the course's Llama has no biases")
    if _setting(config, "attention_dropout", 0.0):
        raise ValueError(
            "cannot copy a Llama with attention_dropout > 0: the course's Llama has one dropout rate, for the "
            "attention weights, the embeddings and the residual connections alike"
        )
    heads, d_model = config.num_attention_heads, config.hidden_size
    head_dim = _setting(config, "head_dim") or d_model // heads
    if head_dim * heads != d_model:
        raise ValueError(f"cannot copy a Llama with head_dim={head_dim} != hidden_size / num_attention_heads")
    return dict(
        vocab_size=config.vocab_size,
        block_size=config.max_position_embeddings,
        d_model=d_model,
        n_heads=heads,
        n_kv_heads=_setting(config, "num_key_value_heads") or heads,
        n_layers=config.num_hidden_layers,
        d_ff=config.intermediate_size,
        rope_theta=_rope_theta(config),
        norm_eps=config.rms_norm_eps,
        tie_embeddings=bool(_setting(config, "tie_word_embeddings", False)),
    )


def from_hf(model: nn.Module) -> GPT | Llama:
    """The course's ``GPT`` (from a ``GPT2LMHeadModel``) or ``Llama`` (from a ``LlamaForCausalLM``) with the weights of
    a Hugging Face ``transformers`` model: the same logits, up to float rounding.

    The sizes come from ``model.config``, the weights from ``model.state_dict()`` through ``GPT2_NAMES`` or
    ``LLAMA_NAMES``. The copy has the model's dtype, device and train/eval mode; it shares no tensor with it.
    Settings the course's classes do not have (another activation, scaled rotary angles, biases in Llama...)
    raise a ``ValueError`` that names them, rather than give a model that computes something else.

    The context: ``block_size`` is ``n_positions`` (GPT-2) or ``max_position_embeddings`` (Llama). Past it the copy's
    forward pass refuses the input and its ``generate`` slides its window over the last ``block_size`` tokens, where
    Hugging Face's GPT-2 stops (its table of positions ends) and its Llama reads on (rotary angles have no table).
    Greedy text is the same up to ``block_size`` tokens; past them the course's Llama may write other tokens.
    """
    config = getattr(model, "config", None)
    kind = getattr(config, "model_type", None)
    if not isinstance(model, nn.Module) or kind not in ("gpt2", "llama"):
        raise TypeError(
            "from_hf copies Hugging Face transformers' GPT-2 and Llama language models (GPT2LMHeadModel, "
            f"LlamaForCausalLM); got {type(model).__name__}" + (f" (model_type={kind!r})" if kind else "")
        )
    state = {name: t.detach().clone() for name, t in model.state_dict().items()}
    if "lm_head.weight" not in state:
        raise TypeError(
            f"from_hf needs the model with its language-model head (GPT2LMHeadModel, LlamaForCausalLM); "
            f"got {type(model).__name__}, which has none"
        )
    if kind == "gpt2":
        conv1d = {f"{name}.weight" for name, m in model.named_modules() if type(m).__name__ == "Conv1D"}
        ours: GPT | Llama = GPT(**_gpt2_arguments(config))
        renamed = from_hf_state(state, GPT2_NAMES, transposed=conv1d, packed=GPT2_PACKED)
    else:
        ours = Llama(**_llama_arguments(config))
        renamed = from_hf_state(state, LLAMA_NAMES)
    first = next(model.parameters())
    ours.to(device=first.device, dtype=first.dtype)
    missing, unexpected = ours.load_state_dict(renamed, strict=False)
    if missing or unexpected:
        raise ValueError(
            f"the weights of {type(model).__name__} do not fit the course's {type(ours).__name__}: "
            f"missing {missing[:5]}, unexpected {unexpected[:5]}"
        )
    with torch.no_grad():  # load_state_dict filled the tied head through the embedding; both must agree
        if not torch.equal(ours.head.weight, renamed["head.weight"]):
            raise ValueError(f"the output head of {type(model).__name__} is not its token embedding, as tied")
    return ours.train(model.training)
