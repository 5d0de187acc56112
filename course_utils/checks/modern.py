"""Checkers for chapter 10: from the course's GPT to GPT-2 and Llama (rotary pairing, key/value heads, weights)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from ..model.attention import expand_kv
from ..model.positional import apply_rotary
from ._core import (
    NotYet,
    Verdict,
    backpropagates,
    call,
    differs,
    each_case,
    off_the_cpu,
    on_meta,
    same,
    verdict,
    wrong_device,
)
from .positional import MIXED_LAYOUTS, PAIRINGS, frequency_mistakes, like, mixed_layouts

__all__ = ["check_expand_kv", "check_gpt2_block_weights", "check_rotary_halves"]


def _rotary(x: Tensor, positions: Tensor, theta: float, *, exponent: float = 1.0, sign: float = 1.0) -> Tensor:
    """Classic wrong variants of the "halves" rotary embedding, for the checker to name: ``exponent`` as in chapter
    03's checker (0: ``theta ** -two_i / d``, the precedence bug), ``sign`` -1 rotates the other way."""
    d = x.size(-1)
    two_i = torch.arange(0, d, 2, dtype=torch.float64)
    omega = theta**-two_i / d if exponent == 0 else theta ** (-exponent * two_i / d)  # (d/2,)
    angles = sign * positions.double()[:, None] * omega  # (T, d/2)
    cos, sin = angles.cos(), angles.sin()
    a, b = x.double()[..., : d // 2], x.double()[..., d // 2 :]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1).float()


def check_rotary_halves(fn: Callable[..., Any]) -> Verdict:
    """``fn(x, positions, theta)`` rotates pair i = (i, i + d/2) of ``x (B, h, T, d)`` at position m by the angle
    m * theta^(-2i/d), as Hugging Face's Llama does (``apply_rotary(x, positions, theta)``)."""
    frequencies = frequency_mistakes("theta ** -two_i", "d", "omega_i = theta ** (-two_i / d)")

    def one(T: int, d: int, start: int, theta: float, seed: int) -> str:
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(2, 3, T, d, generator=g)  # (B, h, T, d)
        positions = torch.arange(start, start + T)  # (T,): after `start` cached positions, as in generation
        got = call(fn, x, positions, theta)
        reference = apply_rotary(x, positions, theta)
        if not isinstance(got, Tensor) or got.device != x.device:
            same(got, reference, "the rotated tensor")  # says what is wrong: not a tensor, or on another device
        named = {
            f"it pairs {PAIRINGS['interleaved']}, as chapter 03 and Meta's original code do. Hugging Face's Llama, "
            f"whose weights this model loads, pairs {PAIRINGS['halves']}: x[..., :d//2] with x[..., d//2:]": (
                apply_rotary(x, positions, theta, pairing="interleaved")
            ),
            "the positions are 0 .. T-1 instead of those given: use `positions` (after a cache they start later)": (
                apply_rotary(x, torch.arange(T), theta)
            ),
            "theta is 10000 instead of the `theta` given (Llama 3 uses 500000)": apply_rotary(x, positions, 10000.0),
            "theta is 500000 (Llama 3's) instead of the `theta` given": apply_rotary(x, positions, 500000.0),
            frequencies["2"]: _rotary(x, positions, theta, exponent=2.0),
            frequencies["0.5"]: _rotary(x, positions, theta, exponent=0.5),
            frequencies["-1"]: _rotary(x, positions, theta, exponent=-1.0),
            frequencies["precedence"]: _rotary(x, positions, theta, exponent=0.0),
            "it rotates the other way: map (a, b) to (a cos - b sin, a sin + b cos) with a the first half": _rotary(
                x, positions, theta, sign=-1.0
            ),
            **{
                MIXED_LAYOUTS[layout] + f"here {PAIRINGS['halves']}, angle i at i and i + d/2": mixed_layouts(
                    x, positions, theta, layout
                )
                for layout in ("interleaved", "halves")
            },
        }
        for mistake, buggy in named.items():
            if like(got, buggy, reference):
                raise NotYet(mistake)
        same(got, reference, "the rotated tensor", atol=1e-4)
        backpropagates(fn, x, positions, theta, what="the rotated tensor", reference=apply_rotary)
        return "rotary embedding with Llama's pairing (i, i + d/2) is right."

    def run() -> str:
        # theta 500, not 10000 first: a theta written into the function instead of read shows
        message = each_case(
            one, [dict(T=7, d=8, start=5, theta=500.0, seed=0), dict(T=4, d=6, start=9, theta=10000.0, seed=1)]
        )
        got = on_meta(fn, torch.randn(2, 3, 4, 8), torch.arange(3, 7), 500.0)  # the positions on the GPU too
        off_the_cpu("the rotated tensor", got, getattr(fn, "__name__", "it"))
        return message

    return verdict(run)


def check_expand_kv(fn: Callable[..., Any]) -> Verdict:
    """``fn(x, n_rep)`` turns ``(B, g, T, d)`` into ``(B, g * n_rep, T, d)``, key head j // n_rep for query head j."""

    def one(B: int, g: int, n_rep: int, seed: int) -> str:
        T, d = 4, 5
        x = torch.randn(B, g, T, d, generator=torch.Generator().manual_seed(seed))  # (B, g key/value heads, T, d)
        got = call(fn, x, n_rep)
        what = f"with n_rep={n_rep} (multi-head attention), the result" if n_rep == 1 else "the expanded tensor"
        reference = expand_kv(x, n_rep)
        if not isinstance(got, Tensor) or got.device != x.device:
            same(got, reference, what)  # says what is wrong: not a tensor, or on another device
        if n_rep > 1 and got.shape == (B, g, T * n_rep, d):
            raise NotYet(
                f"{what} has shape {tuple(got.shape)}: the positions (dim 2) are repeated instead of the heads. "
                f"Repeat along dim 1, to (B, g * n_rep, T, d) = {tuple(reference.shape)}"
            )
        tiled = ", ".join(str(h) for h in list(range(g)) * n_rep)
        grouped = ", ".join(str(h) for h in range(g) for _ in range(n_rep))
        sharing = "0 and 1" if n_rep == 2 else f"0 to {n_rep - 1}"
        named = {
            f"the heads are tiled ({tiled}), as .repeat gives: query head j then reads key head j % g. Llama's "
            f"query heads {sharing} share key head 0: each head repeated next to itself ({grouped})": (
                x.repeat(1, n_rep, 1, 1)
            ),
            "the new axis is after T (x[:, :, :, None]), so the merge mixes positions into heads: put it right after "
            "the heads, x[:, :, None] (B, g, 1, T, d), expand it to n_rep, then merge it with the heads": (
                x[:, :, :, None].expand(-1, -1, -1, n_rep, -1).reshape(reference.shape)
            ),
        }
        for mistake, buggy in named.items():
            if not differs(got, buggy) and differs(buggy, reference):
                raise NotYet(mistake)
        same(got, reference, what)
        if n_rep > 1:
            backpropagates(fn, x, n_rep, what="the expanded tensor", reference=expand_kv)
        return "expand_kv is right: query head j reads key head j // n_rep, as in Llama."

    def run() -> str:
        cases = [dict(B=2, g=3, n_rep=2, seed=0), dict(B=2, g=3, n_rep=1, seed=0), dict(B=1, g=2, n_rep=3, seed=1)]
        message = each_case(one, cases)
        off_the_cpu("the expanded tensor", on_meta(fn, torch.randn(2, 3, 4, 5), 2), getattr(fn, "__name__", "it"))
        return message

    return verdict(run)


def _gpt2_pair(n_embd: int = 24, seed: int = 0) -> tuple[Any, Any]:
    """A random one-block GPT-2 of ``transformers`` and the course's copy of it (``from_hf``)."""
    try:
        import transformers  # pyright: ignore[reportMissingTypeStubs]
    except ImportError:
        raise NotYet("this check needs Hugging Face transformers: pip install transformers") from None
    from ..model.convert_hf import from_hf

    torch.manual_seed(seed)
    config = transformers.GPT2Config(
        vocab_size=50, n_positions=16, n_embd=n_embd, n_layer=1, n_head=4, bos_token_id=None, eos_token_id=None
    )
    hf = transformers.GPT2LMHeadModel(config).eval()
    with torch.no_grad():
        for p in hf.parameters():  # biases and LayerNorm scales away from their initial 0 and 1, so each one shows
            p.add_(torch.randn_like(p) * 0.3)
    return hf, from_hf(hf).eval()


def check_gpt2_block_weights(fn: Callable[..., Any]) -> Verdict:
    """``fn(block_state)`` turns the state dict of one GPT-2 block (keys ``ln_1.weight``, ``attn.c_attn.weight``...)
    into one of the course's ``GPTBlock`` (keys ``norm1.weight``, ``self_attn.w_q.weight``...)."""

    def one(n_embd: int, seed: int) -> str:
        hf, ours = _gpt2_pair(n_embd, seed)
        prefix = "transformer.h.0."
        block_state = {k.removeprefix(prefix): v.clone() for k, v in hf.state_dict().items() if k.startswith(prefix)}
        got = call(fn, block_state)
        if not isinstance(got, dict):
            raise NotYet(f"return a dict of tensors (a state dict); got {type(got).__name__}")
        state: dict[str, Any] = dict(got)  # pyright: ignore[reportUnknownArgumentType]
        expected = {name: t.clone() for name, t in ours.blocks[0].state_dict().items()}  # copies: reloaded below
        _check_block_keys_and_shapes(state, expected)
        idx = torch.randint(0, 50, (2, 12), generator=torch.Generator().manual_seed(1))
        with torch.no_grad():
            reference = hf(idx).logits
            ours.blocks[0].load_state_dict(state)
            logits, _ = ours(idx)
        if torch.allclose(logits, reference, atol=1e-4):
            return "the block's weights are right: the course's GPT now computes GPT-2's logits."
        # Which classic mistake? Undo one candidate at a time and see whether the logits come right.
        for message, fix in _gpt2_block_fixes(state, expected):
            with torch.no_grad():
                ours.blocks[0].load_state_dict({**state, **fix})
                fixed, _ = ours(idx)
            if torch.allclose(fixed, reference, atol=1e-4):
                raise NotYet(message)
        wrong = [n for n, want in expected.items() if not torch.allclose(state[n].double(), want.double(), atol=1e-6)]
        raise NotYet(
            f"the logits differ from GPT-2's (largest difference {float((logits - reference).abs().max()):.3g}): "
            f"these weights are not GPT-2's: {', '.join(wrong[:6]) or 'none, yet the logits differ'}"
        )

    def run() -> str:
        return each_case(one, [dict(n_embd=24, seed=0), dict(n_embd=32, seed=1)])

    return verdict(run)


def _check_block_keys_and_shapes(state: dict[str, Any], expected: dict[str, Tensor]) -> None:
    """GPTBlock's keys, each a tensor of its shape on its device; a shape transposed or not split is told so."""
    missing, extra = sorted(set(expected) - set(state)), sorted(set(state) - set(expected))
    if missing or extra:

        def listed(keys: list[str]) -> str:  # the first few, and how many more
            return f"{keys[:4]}" + (f" and {len(keys) - 4} more" if len(keys) > 4 else "")

        raise NotYet(
            f"the keys differ from GPTBlock's ({len(missing)} missing, {len(extra)} unexpected): missing "
            f"{listed(missing)}, unexpected {listed(extra)}"
        )
    for name, want in expected.items():
        have = state[name]
        if not isinstance(have, Tensor):
            raise NotYet(f"{name} should be a tensor; got {type(have).__name__}")
        if have.device != want.device:
            raise wrong_device(
                name,
                have.device,
                want.device,
                "block_state's tensors are",
                "keep the weights where they are (no .to(...))",
            )
        if have.shape != want.shape:
            belongs = [n for n, w in expected.items() if n != name and w.shape == have.shape and torch.equal(w, have)]
            if belongs:  # the right weight, in the course's layout, under another key
                raise NotYet(
                    f"{name} holds the weight that belongs in {belongs[0]}: "
                    + (
                        "c_fc is the feed-forward's first layer (w_1, d_model -> 4 d_model), c_proj its second (w_2)"
                        if name.startswith("feed_forward.")
                        else "each of GPT-2's weights has one place in GPTBlock"
                    )
                )
            if name.endswith(".bias") and name.startswith("self_attn.w_") and have.numel() == 3 * want.numel():
                raise NotYet(
                    f"{name} has shape {tuple(have.shape)}, all of c_attn's bias; GPTBlock needs {tuple(want.shape)}: "
                    "c_attn's bias (3 d_model,) holds the queries', keys' and values' biases in that order: split it "
                    "in three, .chunk(3)"
                )
            hint = (
                " GPT-2's Conv1D stores its weight as (in, out), nn.Linear as (out, in): transpose it with .t()"
                if have.shape == want.shape[::-1]
                else " c_attn's weight is (d_model, 3 d_model), (in, out): transpose it to (3 d_model, d_model), "
                "then split it in three along dim 0"
                if name.startswith("self_attn.w_") and have.numel() == want.numel()
                else " Split c_attn's (transposed) weight into three equal blocks, .chunk(3, dim=0), sized from "
                "the weight itself"
                if name.startswith("self_attn.w_")
                else ""
            )
            raise NotYet(f"{name} has shape {tuple(have.shape)}; GPTBlock needs {tuple(want.shape)}.{hint}")


def _gpt2_block_fixes(state: dict[str, Any], expected: dict[str, Tensor]) -> list[tuple[str, dict[str, Tensor]]]:
    """Each classic mistake, as the weights that would undo it: (its message, the weights to load instead)."""
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
    orders = ((1, 0, 2), (0, 2, 1), (2, 1, 0), (1, 2, 0), (2, 0, 1))  # every order of (q, k, v) but the right one
    for order in orders:  # weights and biases in the same wrong order
        fixes.append(
            (
                "queries, keys and values are in the wrong order, weights and biases alike: c_attn holds them as "
                "(queries, keys, values), its weight's blocks and its bias's",
                {
                    **{f"self_attn.w_{p}.weight": (q, k, v)[i] for p, i in zip("qkv", order)},
                    **{f"self_attn.w_{p}.bias": (qb, kb, vb)[i] for p, i in zip("qkv", order)},
                },
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
    fixes.append(
        (
            "w_q, w_k and w_v have the right shape but are not c_attn's three blocks of columns (a reshape or "
            "view of the (d_model, 3 d_model) weight mixes them): transpose c_attn's weight to (3 d_model, "
            "d_model), then split it in three along dim 0 (.chunk(3, dim=0))",
            {f"self_attn.w_{p}.weight": expected[f"self_attn.w_{p}.weight"] for p in "qkv"},
        )
    )
    return fixes
