"""Checkers for chapter 10: from the course's GPT to GPT-2 and Llama (rotary pairing, key/value heads, weights)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from ..model.attention import expand_kv
from ..model.positional import apply_rotary
from ._core import NotYet, Verdict, backpropagates, call, same, verdict

__all__ = ["check_expand_kv", "check_gpt2_block_weights", "check_rotary_halves"]


def _rotary(x: Tensor, positions: Tensor, theta: float, *, exponent: float = 1.0, sign: float = 1.0) -> Tensor:
    """Classic wrong variants of the "halves" rotary embedding, for the checker to name."""
    d = x.size(-1)
    omega = 1.0 / theta ** (exponent * torch.arange(0, d, 2, dtype=torch.float64) / d)  # (d/2,)
    angles = sign * positions.double()[:, None] * omega  # (T, d/2)
    cos, sin = angles.cos(), angles.sin()
    a, b = x.double()[..., : d // 2], x.double()[..., d // 2 :]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1).float()


def check_rotary_halves(fn: Callable[..., Any]) -> Verdict:
    """``fn(x, positions, theta)`` rotates pair i = (i, i + d/2) of ``x (B, h, T, d)`` at position m by the angle
    m * theta^(-2i/d), as Hugging Face's Llama does (``apply_rotary(x, positions, theta)``)."""

    def run() -> str:
        g = torch.Generator().manual_seed(0)
        x = torch.randn(2, 3, 7, 8, generator=g)  # (B, h, T, d)
        positions = torch.arange(5, 12)  # (T,): after 5 cached positions, as in generation
        theta = 500.0  # not 10000: a theta written into the function instead of read shows
        got = call(fn, x, positions, theta)
        named = {
            "it pairs neighbours (2i, 2i+1), as chapter 03 and Meta's original code do. Hugging Face's Llama, whose "
            "weights this model loads, pairs dimension i with i + d/2: x[..., :d//2] with x[..., d//2:]": apply_rotary(
                x, positions, theta, pairing="interleaved"
            ),
            "the positions are 0 .. T-1 instead of those given: use `positions` (after a cache they start later)": (
                apply_rotary(x, torch.arange(7), theta)
            ),
            "theta is 10000 instead of the `theta` given (Llama 3 uses 500000)": apply_rotary(x, positions, 10000.0),
            "2i is applied twice: arange(0, d, 2) already steps by 2, so omega_i = theta ** (-two_i / d)": _rotary(
                x, positions, theta, exponent=2.0
            ),
            "the exponent uses the pair index i where the formula has 2i: omega_i = theta ** (-two_i / d) with "
            "two_i = arange(0, d, 2)": _rotary(x, positions, theta, exponent=0.5),
            "it rotates the other way: map (a, b) to (a cos - b sin, a sin + b cos) with a the first half": _rotary(
                x, positions, theta, sign=-1.0
            ),
        }
        for mistake, buggy in named.items():
            if isinstance(got, Tensor) and got.shape == buggy.shape and torch.allclose(got, buggy, atol=1e-4):
                raise NotYet(mistake)
        same(got, apply_rotary(x, positions, theta), "the rotated tensor", atol=1e-4)
        backpropagates(fn, x, positions, theta, what="the rotated tensor")
        return "rotary embedding with Llama's pairing (i, i + d/2) is right."

    return verdict(run)


def check_expand_kv(fn: Callable[..., Any]) -> Verdict:
    """``fn(x, n_rep)`` turns ``(B, g, T, d)`` into ``(B, g * n_rep, T, d)``, key head j // n_rep for query head j."""

    def run() -> str:
        g = torch.Generator().manual_seed(0)
        x = torch.randn(2, 3, 4, 5, generator=g)  # (B, g=3 key/value heads, T, d)
        got = call(fn, x, 2)
        tiled = x.repeat(1, 2, 1, 1)  # heads 0, 1, 2, 0, 1, 2
        if isinstance(got, Tensor) and got.shape == tiled.shape and torch.equal(got, tiled):
            raise NotYet(
                "the heads are tiled (0, 1, 2, 0, 1, 2), as .repeat gives: query head j then reads key head j % g. "
                "Llama's query heads 0 and 1 share key head 0: each head repeated next to itself (0, 0, 1, 1, 2, 2)"
            )
        same(got, expand_kv(x, 2), "the expanded keys")
        same(call(fn, x, 1), x, "with n_rep=1 (multi-head attention) the keys themselves")
        return "expand_kv is right: query head j reads key head j // n_rep, as in Llama."

    return verdict(run)


def _gpt2_pair(seed: int = 0) -> tuple[Any, Any]:
    """A random one-block GPT-2 of ``transformers`` and the course's copy of it (``from_hf``)."""
    try:
        import transformers  # pyright: ignore[reportMissingTypeStubs]
    except ImportError:
        raise NotYet("this check needs Hugging Face transformers: pip install transformers") from None
    from ..model.hf_names import from_hf

    torch.manual_seed(seed)
    config = transformers.GPT2Config(vocab_size=50, n_positions=16, n_embd=24, n_layer=1, n_head=4)
    hf = transformers.GPT2LMHeadModel(config).eval()
    with torch.no_grad():
        for p in hf.parameters():  # biases and LayerNorm scales away from their initial 0 and 1, so each one shows
            p.add_(torch.randn_like(p) * 0.3)
    return hf, from_hf(hf).eval()


def check_gpt2_block_weights(fn: Callable[..., Any]) -> Verdict:
    """``fn(block_state)`` turns the state dict of one GPT-2 block (keys ``ln_1.weight``, ``attn.c_attn.weight``...)
    into one of the course's ``GPTBlock`` (keys ``norm1.weight``, ``self_attn.w_q.weight``...)."""

    def run() -> str:
        hf, ours = _gpt2_pair()
        prefix = "transformer.h.0."
        block_state = {k.removeprefix(prefix): v.clone() for k, v in hf.state_dict().items() if k.startswith(prefix)}
        got = call(fn, block_state)
        if not isinstance(got, dict):
            raise NotYet(f"return a dict of tensors (a state dict); got {type(got).__name__}")
        state: dict[str, Any] = dict(got)  # pyright: ignore[reportUnknownArgumentType]
        expected = {name: t.clone() for name, t in ours.blocks[0].state_dict().items()}  # copies: reloaded below
        missing, extra = sorted(set(expected) - set(state)), sorted(set(state) - set(expected))
        if missing or extra:
            raise NotYet(f"the keys differ from GPTBlock's: missing {missing[:4]}, unexpected {extra[:4]}")
        for name, want in expected.items():
            have = state[name]
            if not isinstance(have, Tensor):
                raise NotYet(f"{name} should be a tensor; got {type(have).__name__}")
            if have.shape != want.shape:
                hint = (
                    " GPT-2's Conv1D stores its weight as (in, out), nn.Linear as (out, in): transpose it with .t()"
                    if have.shape == want.shape[::-1]
                    else " c_attn's weight is (d_model, 3 d_model), (in, out): transpose it to (3 d_model, d_model), "
                    "then split it in three along dim 0"
                    if name.startswith("self_attn.w_")
                    else ""
                )
                raise NotYet(f"{name} has shape {tuple(have.shape)}; GPTBlock needs {tuple(want.shape)}.{hint}")
        idx = torch.randint(0, 50, (2, 12), generator=torch.Generator().manual_seed(1))
        with torch.no_grad():
            reference = hf(idx).logits
            ours.blocks[0].load_state_dict(state)
            logits, _ = ours(idx)
        if torch.allclose(logits, reference, atol=1e-4):
            return "the block's weights are right: the course's GPT now computes GPT-2's logits."
        # Which classic mistake? Undo one candidate at a time and see whether the logits come right.
        fixes: list[tuple[str, dict[str, Tensor]]] = [
            (
                "w_q, w_k and w_v are square, so they loaded, but they are c_attn's pieces untransposed: Conv1D stores "
                "(in, out); transpose c_attn's weight (d_model, 3 d_model) to (3 d_model, d_model), then split it",
                {f"self_attn.w_{p}.weight": state[f"self_attn.w_{p}.weight"].t() for p in "qkv"},
            )
        ]
        for layer in ("self_attn.w_q", "self_attn.w_k", "self_attn.w_v", "self_attn.w_o"):
            fixes.append(
                (
                    f"{layer}.weight is square, so it loaded, but it is GPT-2's weight untransposed: Conv1D stores "
                    "(in, out), nn.Linear (out, in); transpose it with .t()",
                    {f"{layer}.weight": state[f"{layer}.weight"].t()},
                )
            )
        q, k, v = (state[f"self_attn.w_{p}.weight"] for p in "qkv")
        qb, kb, vb = (state[f"self_attn.w_{p}.bias"] for p in "qkv")
        for order in ((k, q, v), (q, v, k), (v, k, q), (k, v, q), (v, q, k)):
            fixes.append(
                (
                    "queries, keys and values are in the wrong order: c_attn holds them as (queries, keys, values)",
                    {f"self_attn.w_{p}.weight": t for p, t in zip("qkv", order)},
                )
            )
        for biases in ((kb, qb, vb), (qb, vb, kb), (vb, kb, qb), (kb, vb, qb), (vb, qb, kb)):
            fixes.append(
                (
                    "the biases of queries, keys and values are in the wrong order: c_attn's bias is "
                    "(queries, keys, values) too",
                    {f"self_attn.w_{p}.bias": t for p, t in zip("qkv", biases)},
                )
            )
        fixes.append(
            (
                "ln_1 and ln_2 are swapped: ln_1 comes before attention (norm1), ln_2 before the feed-forward (norm2)",
                {
                    "norm1.weight": state["norm2.weight"],
                    "norm1.bias": state["norm2.bias"],
                    "norm2.weight": state["norm1.weight"],
                    "norm2.bias": state["norm1.bias"],
                },
            )
        )
        for message, fix in fixes:
            with torch.no_grad():
                ours.blocks[0].load_state_dict({**state, **fix})
                fixed, _ = ours(idx)
            if torch.allclose(fixed, reference, atol=1e-4):
                raise NotYet(message)
        wrong = max(expected, key=lambda n: float((state[n].double() - expected[n].double()).abs().max()))
        raise NotYet(
            f"the logits differ from GPT-2's (largest difference {float((logits - reference).abs().max()):.3g}); "
            f"the weight furthest from the right one is {wrong}"
        )

    return verdict(run)
