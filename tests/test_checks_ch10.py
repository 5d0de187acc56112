"""Chapter 10's checkers accept right answers written in other styles, name each classic mistake, and report an
unwritten stub."""

import pytest
import torch
from helpers import todo, verdict

from course_utils.checks import check_expand_kv, check_gpt2_block_weights, check_rotary_halves

pytest.importorskip("transformers")

# --- rotary embeddings, Llama's pairing ----------------------------------------------------------------------


def rotary(*, pairing="halves", start=None, theta_override=None, two_i_twice=False, pair_index=False, sign=1.0,
           complex_form=False):  # fmt: skip
    """A rotary embedding with one switch per classic mistake."""

    def fn(x, positions, theta):
        theta = theta_override or theta
        d = x.size(-1)
        two_i = torch.arange(0, d, 2, dtype=torch.float64)
        exponent = 2 * two_i if two_i_twice else two_i / 2 if pair_index else two_i
        omega = theta ** (-exponent / d)  # (d/2,)
        pos = torch.arange(x.size(-2)) if start is not None else positions
        angles = sign * pos.double()[:, None] * omega  # (T, d/2)
        if complex_form:  # another style: complex numbers over the halves
            z = torch.complex(x[..., : d // 2].double(), x[..., d // 2 :].double()) * torch.polar(
                torch.ones_like(angles), angles
            )
            return torch.cat([z.real, z.imag], dim=-1).float()
        cos, sin = angles.cos().float(), angles.sin().float()
        if pairing == "halves":
            a, b = x[..., : d // 2], x[..., d // 2 :]
            return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)
        a, b = x[..., 0::2], x[..., 1::2]
        return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)

    return fn


@pytest.mark.parametrize("style", [{}, {"complex_form": True}])
def test_rotary_right_answers_pass(style, capsys):
    ok, out = verdict(check_rotary_halves, rotary(**style), capsys)
    assert ok and out.startswith("✅"), out


@pytest.mark.parametrize(
    "mistake, words",
    [
        ({"pairing": "interleaved"}, "pairs neighbours (2i, 2i+1)"),
        ({"start": 0}, "positions are 0 .. T-1"),
        ({"theta_override": 10000.0}, "theta is 10000"),
        ({"two_i_twice": True}, "2i is applied twice"),
        ({"sign": -1.0}, "rotates the other way"),
        ({"pair_index": True}, "the pair index i where the formula has 2i"),
    ],
)
def test_rotary_mistakes_are_named(mistake, words, capsys):
    ok, out = verdict(check_rotary_halves, rotary(**mistake), capsys)
    assert not ok and words in out, out


def test_rotary_stub_is_not_attempted(capsys):
    result = check_rotary_halves(todo)
    assert not result and result.status == "not attempted"


# --- key/value heads ---------------------------------------------------------------------------------------------


def test_expand_kv_right_answers_pass(capsys):
    for fn in (
        lambda x, n: x.repeat_interleave(n, dim=1),
        lambda x, n: x[:, :, None].expand(-1, -1, n, -1, -1).flatten(1, 2),
        lambda x, n: torch.stack([x] * n, dim=2).reshape(x.size(0), -1, *x.shape[2:]),
    ):
        ok, out = verdict(check_expand_kv, fn, capsys)
        assert ok, out


def test_expand_kv_tiling_is_named(capsys):
    ok, out = verdict(check_expand_kv, lambda x, n: x.repeat(1, n, 1, 1), capsys)
    assert not ok and ".repeat" in out
    # expanded on the wrong side of the heads: the same tiling, written with expand
    ok, out = verdict(check_expand_kv, lambda x, n: x[:, None].expand(-1, n, -1, -1, -1).flatten(1, 2), capsys)
    assert not ok and "tiled" in out


def test_expand_kv_wrong_shape_and_n_rep_1(capsys):
    ok, out = verdict(check_expand_kv, lambda x, n: x.repeat_interleave(n, dim=2), capsys)
    assert not ok and "shape" in out
    ok, out = verdict(check_expand_kv, lambda x, n: x.repeat_interleave(2, dim=1), capsys)
    assert not ok and "n_rep=1" in out


# --- one GPT-2 block's weights -----------------------------------------------------------------------------------

PAIRS = [("norm1", "ln_1"), ("norm2", "ln_2"), ("self_attn.w_o", "attn.c_proj"), ("feed_forward.w_1", "mlp.c_fc"),
         ("feed_forward.w_2", "mlp.c_proj")]  # fmt: skip


def block_state(*, transpose_c_proj=True, transpose_c_attn=True, order=(0, 1, 2), bias_order=(0, 1, 2),
                swap_norms=False):  # fmt: skip
    """A GPT-2 block's state dict in the course's names, with one switch per classic mistake."""

    def fn(state):
        out = {}
        pairs = [(o, t) for o, t in PAIRS]
        if swap_norms:
            pairs[0], pairs[1] = ("norm1", "ln_2"), ("norm2", "ln_1")
        for ours, theirs in pairs:
            w = state[f"{theirs}.weight"]
            conv1d = theirs.startswith(("attn", "mlp"))
            keep = theirs == "attn.c_proj" and not transpose_c_proj
            out[f"{ours}.weight"] = w.t() if conv1d and not keep else w
            out[f"{ours}.bias"] = state[f"{theirs}.bias"]
        w = state["attn.c_attn.weight"]
        if transpose_c_attn:
            pieces = w.t().chunk(3, dim=0)
        else:
            pieces = w.chunk(3, dim=1)  # split along the right axis but left (in, out)
        biases = state["attn.c_attn.bias"].chunk(3)
        for name, i, j in zip(("w_q", "w_k", "w_v"), order, bias_order):
            out[f"self_attn.{name}.weight"] = pieces[i]
            out[f"self_attn.{name}.bias"] = biases[j]
        return out

    return fn


def test_gpt2_block_right_answer_passes(capsys):
    ok, out = verdict(check_gpt2_block_weights, block_state(), capsys)
    assert ok and out.startswith("✅"), out


def test_gpt2_block_written_with_einops_style_rename_passes(capsys):
    """Another style: a regex rename and a torch.split on the transposed packed weight."""
    import re

    def fn(state):
        table = {"ln_1": "norm1", "ln_2": "norm2", "attn.c_proj": "self_attn.w_o", "mlp.c_fc": "feed_forward.w_1",
                 "mlp.c_proj": "feed_forward.w_2"}  # fmt: skip
        out = {}
        for key, value in state.items():
            module, kind = key.rsplit(".", 1)
            if module == "attn.c_attn":
                value = value.t() if kind == "weight" else value
                for name, part in zip(("w_q", "w_k", "w_v"), torch.split(value, value.size(0) // 3, dim=0)):
                    out[f"self_attn.{name}.{kind}"] = part
                continue
            if re.match(r"(attn|mlp)\.", module) and kind == "weight":
                value = value.transpose(0, 1)
            out[f"{table[module]}.{kind}"] = value
        return out

    ok, out = verdict(check_gpt2_block_weights, fn, capsys)
    assert ok, out


@pytest.mark.parametrize(
    "mistake, words",
    [
        ({"transpose_c_proj": False}, "self_attn.w_o.weight is square"),
        ({"transpose_c_attn": False}, "c_attn's pieces untransposed"),
        ({"order": (1, 0, 2)}, "queries, keys and values are in the wrong order"),
        ({"bias_order": (0, 2, 1)}, "biases of queries, keys and values are in the wrong order"),
        ({"swap_norms": True}, "ln_1 and ln_2 are swapped"),
    ],
)
def test_gpt2_block_mistakes_are_named(mistake, words, capsys):
    ok, out = verdict(check_gpt2_block_weights, block_state(**mistake), capsys)
    assert not ok and words in out, out


def test_gpt2_block_untransposed_rectangular_and_missing_keys(capsys):
    def untransposed_fc(state):
        out = block_state()(state)
        out["feed_forward.w_1.weight"] = out["feed_forward.w_1.weight"].t()
        return out

    ok, out = verdict(check_gpt2_block_weights, untransposed_fc, capsys)
    assert not ok and "Conv1D stores its weight as (in, out)" in out

    def no_biases(state):
        return {k: v for k, v in block_state()(state).items() if not k.endswith("bias")}

    ok, out = verdict(check_gpt2_block_weights, no_biases, capsys)
    assert not ok and "missing" in out

    ok, out = verdict(check_gpt2_block_weights, lambda state: list(state.values()), capsys)
    assert not ok and "dict" in out


def test_gpt2_block_stub_is_not_attempted():
    result = check_gpt2_block_weights(todo)
    assert not result and result.status == "not attempted"
