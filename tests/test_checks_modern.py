"""The checkers of ``course_utils.checks.modern``, GPT-2 and Llama (chapter 10), against students' answers: right
answers written in other styles pass, each classic mistake fails with a message that names it, and an unwritten stub
is reported as not attempted.
"""

import re

import pytest
import torch
from helpers import rotary, todo, verdict, verdict_rows, verdict_table_test

from course_utils.checks import check_expand_kv, check_gpt2_block_weights, check_rotary_halves

pytest.importorskip("transformers")


HARD_CODED = "is a value written into the code"
GRADIENT = "cannot be trained through"


IN_PLACE = "changed its input"
DEVICE = "is on meta"


def ids(cases):
    return [name for name, *_ in cases]


# --- chapter 10: rotary embeddings, Llama's pairs (i, i + d/2) ------------------------------------------------------


def rotary_solution(x, positions, theta):  # the notebook's solution
    d = x.size(-1)
    omega = theta ** (
        -torch.arange(0, d, 2, dtype=torch.float32, device=x.device) / d
    )  # (d/2,): arange already gives 2i
    angles = positions.float()[:, None] * omega  # (T, d/2)
    cos, sin = angles.cos(), angles.sin()
    a, b = x[..., : d // 2], x[..., d // 2 :]  # (B, h, T, d/2) each: pair i = (i, i + d/2)
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)  # (B, h, T, d)


def rotary_rotate_half(x, positions, theta):  # Hugging Face's form
    d = x.shape[-1]
    inv_freq = 1.0 / (theta ** (torch.arange(0, d, 2, device=x.device).float() / d))
    freqs = torch.einsum("t,f->tf", positions.to(x.device).float(), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)  # (T, d)
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return x * emb.cos() + torch.cat((-x2, x1), dim=-1) * emb.sin()


def rotary_float64(x, positions, theta):
    half = x.shape[-1] // 2
    i = torch.arange(half, dtype=torch.float64, device=x.device)
    angles = positions.double().unsqueeze(-1) / torch.tensor(theta, dtype=torch.float64) ** (2 * i / (2 * half))
    a, b = x.double().split(half, dim=-1)
    return torch.cat((a * angles.cos() - b * angles.sin(), b * angles.cos() + a * angles.sin()), -1).float()


def rotary_complex(x, positions, theta):
    d = x.size(-1)
    angles = torch.outer(positions.float(), theta ** (-torch.arange(0, d, 2, device=x.device).float() / d))
    z = torch.complex(x[..., : d // 2], x[..., d // 2 :]) * torch.exp(1j * angles)
    return torch.cat([z.real, z.imag], dim=-1)


def rotary_in_place(x, positions, theta):
    x[...] = rotary_solution(x, positions, theta)
    return x


def rotary_detached(x, positions, theta):
    return rotary_solution(x, positions, theta).detach()


def rotary_meta(x, positions, theta):
    return rotary_solution(x, positions, theta).to("meta")


def rotary_second_half_detached(x, positions, theta):
    d = x.size(-1)
    return rotary_solution(torch.cat([x[..., : d // 2], x[..., d // 2 :].detach()], dim=-1), positions, theta)


def rotary_mixed(angles):
    """Hugging Face's rotate_half with interleaved angles (repeat_interleave), or interleaved pairs rotated with the
    halves' angles (torch.cat)."""

    def fn(x, positions, theta):
        d = x.size(-1)
        freqs = positions.float()[:, None] * theta ** (-torch.arange(0, d, 2).float() / d)  # (T, d/2)
        if angles == "interleaved":
            emb = freqs.repeat_interleave(2, dim=-1)  # (T, d): angle i at 2i and 2i+1
            rotated = torch.cat([-x[..., d // 2 :], x[..., : d // 2]], dim=-1)  # rotate_half: the halves
        else:
            emb = torch.cat([freqs, freqs], dim=-1)  # (T, d): angle i at i and i + d/2
            rotated = torch.stack([-x[..., 1::2], x[..., 0::2]], dim=-1).flatten(-2)  # neighbours
        return x * emb.cos() + rotated * emb.sin()

    return fn


def rotary_without_device(x, positions, theta):
    """Right on the CPU; omega is made there whatever x's device (no device=)."""
    d = x.size(-1)
    angles = positions.float()[:, None] * theta ** (-torch.arange(0, d, 2).float() / d)  # (T, d/2)
    a, b = x[..., : d // 2], x[..., d // 2 :]
    return torch.cat([a * angles.cos() - b * angles.sin(), a * angles.sin() + b * angles.cos()], dim=-1)


ROTARY_HALVES_WRONG = [
    ("arange-without-device", rotary_without_device, "A tensor made without device= is made on the CPU"),
    ("interleaved-angles-rotate-half", rotary_mixed("interleaved"), "the angles and the pairs follow two layouts"),
    ("halves-angles-neighbours", rotary_mixed("halves"), "the angles and the pairs follow two layouts"),
    ("interleaved", lambda x, p, t: rotary(x, p, t, pairing="interleaved"), "pairs neighbours (2i, 2i+1)"),
    ("positions-ignored", lambda x, p, t: rotary(x, p, t, ignore_positions=True), "positions are 0 .. T-1"),
    ("theta-10000", lambda x, p, t: rotary(x, p, t, theta_=10000.0), "theta is 10000"),
    ("theta-500000", lambda x, p, t: rotary(x, p, t, theta_=500000.0), "theta is 500000"),
    ("theta-hard-coded", lambda x, p, t: rotary(x, p, t, theta_=500.0), HARD_CODED),
    ("2i-twice", lambda x, p, t: rotary(x, p, t, exponent=2.0), "2i is applied twice"),
    ("pair-index-i", lambda x, p, t: rotary(x, p, t, exponent=0.5), "pair index i where the formula has 2i"),
    ("inverted", lambda x, p, t: rotary(x, p, t, exponent=-1.0), "the frequencies are inverted"),
    ("precedence", lambda x, p, t: rotary(x, p, t, precedence=True), "theta ** -two_i / d is (theta ** -two_i)"),
    ("other-way", lambda x, p, t: rotary(x, p, t, sign=-1.0), "rotates the other way"),
    ("d-hard-coded", lambda x, p, t: rotary(x, p, t, d_=8), HARD_CODED),
    ("in-place", rotary_in_place, IN_PLACE),
    ("detach", rotary_detached, GRADIENT),
    ("half-detached", rotary_second_half_detached, "right values but not the right gradient with respect to x"),
    ("meta", rotary_meta, DEVICE),
]


# --- chapter 10: key/value heads ----------------------------------------------------------------------------------


def expand_solution(x, n_rep):  # the notebook's solution
    B, g, T, d = x.shape
    return x[:, :, None].expand(B, g, n_rep, T, d).reshape(B, g * n_rep, T, d)  # (B, g, n_rep, T, d) -> merged


def expand_index(x, n_rep):
    heads = torch.arange(x.size(1) * n_rep, device=x.device) // n_rep  # query head j reads key head j // n_rep
    return x[:, heads]


def expand_loop(x, n_rep):
    return torch.cat([x[:, j : j + 1] for j in range(x.shape[1]) for _ in range(n_rep)], dim=1)


def expand_stack(x, n_rep):
    return torch.stack([x] * n_rep, dim=2).flatten(1, 2)


def expand_interleave(x, n_rep):
    return torch.repeat_interleave(x, repeats=n_rep, dim=1)


def expand_in_place(x, n_rep):
    B, g, T, d = x.shape
    return x.unsqueeze_(2).expand(B, g, n_rep, T, d).reshape(B, g * n_rep, T, d)


def expand_axis_after_t(x, n_rep):
    B, g, T, d = x.shape
    return x[:, :, :, None].expand(B, g, T, n_rep, d).reshape(B, g * n_rep, T, d)  # positions mixed into heads


EXPAND_WRONG = [
    ("repeat", lambda x, n: x.repeat(1, n, 1, 1), "tiled"),
    ("expand-before-heads", lambda x, n: x[:, None].expand(-1, n, -1, -1, -1).flatten(1, 2), "tiled"),
    ("axis-after-T", expand_axis_after_t, "right after the heads"),
    ("positions-repeated", lambda x, n: x.repeat_interleave(n, dim=2), "shape"),
    ("n_rep-hard-coded", lambda x, n: x.repeat_interleave(2, dim=1), HARD_CODED),
    ("B-hard-coded", lambda x, n: x[:, :, None].expand(-1, -1, n, -1, -1).reshape(2, -1, *x.shape[2:]), HARD_CODED),
    ("in-place", expand_in_place, IN_PLACE),
    ("detach", lambda x, n: x.detach().repeat_interleave(n, dim=1), GRADIENT),
    ("meta", lambda x, n: x.repeat_interleave(n, dim=1).to("meta"), DEVICE),
]


# --- chapter 10: one GPT-2 block's weights --------------------------------------------------------------------------

PAIRS = [("norm1", "ln_1"), ("norm2", "ln_2"), ("self_attn.w_o", "attn.c_proj"), ("feed_forward.w_1", "mlp.c_fc"),
         ("feed_forward.w_2", "mlp.c_proj")]  # fmt: skip


def gpt2_solution(block_state):  # the notebook's solution
    state = {}
    for ours_name, theirs in [("norm1", "ln_1"), ("norm2", "ln_2"), ("self_attn.w_o", "attn.c_proj"),
                              ("feed_forward.w_1", "mlp.c_fc"), ("feed_forward.w_2", "mlp.c_proj")]:  # fmt: skip
        weight = block_state[f"{theirs}.weight"]
        state[f"{ours_name}.weight"] = weight.t() if theirs.startswith(("attn", "mlp")) else weight  # Conv1D: (in, out)
        state[f"{ours_name}.bias"] = block_state[f"{theirs}.bias"]
    qkv_weight = block_state["attn.c_attn.weight"].t()  # (d, 3d) -> (3d, d)
    qkv_bias = block_state["attn.c_attn.bias"]  # (3d,)
    for i, part in enumerate(("w_q", "w_k", "w_v")):
        state[f"self_attn.{part}.weight"] = qkv_weight.chunk(3, dim=0)[i]
        state[f"self_attn.{part}.bias"] = qkv_bias.chunk(3)[i]
    return state


def gpt2_split_then_transpose(block_state):
    d = block_state["ln_1.weight"].numel()
    out = {}
    for ours, theirs in PAIRS:
        w = block_state[theirs + ".weight"]
        out[ours + ".weight"] = w.T.contiguous() if w.dim() == 2 else w.clone()
        out[ours + ".bias"] = block_state[theirs + ".bias"].clone()
    w_q, w_k, w_v = torch.split(block_state["attn.c_attn.weight"], d, dim=1)  # (d, d) each, still (in, out)
    b_q, b_k, b_v = block_state["attn.c_attn.bias"].split(d)
    for name, w, b in (("w_q", w_q, b_q), ("w_k", w_k, b_k), ("w_v", w_v, b_v)):
        out[f"self_attn.{name}.weight"], out[f"self_attn.{name}.bias"] = w.transpose(0, 1), b
    return out


def gpt2_regex(block_state):
    table = {"ln_1": "norm1", "ln_2": "norm2", "attn.c_proj": "self_attn.w_o", "mlp.c_fc": "feed_forward.w_1",
             "mlp.c_proj": "feed_forward.w_2"}  # fmt: skip
    out = {}
    for key, value in block_state.items():
        module, kind = re.fullmatch(r"(.+)\.(weight|bias)", key).groups()
        if module == "attn.c_attn":
            parts = value.t().reshape(3, -1, value.size(0)) if kind == "weight" else value.view(3, -1)
            out.update({f"self_attn.w_{p}.{kind}": part for p, part in zip("qkv", parts)})
        else:
            out[f"{table[module]}.{kind}"] = value.t() if kind == "weight" and value.dim() == 2 else value
    return out


def gpt2_float64(block_state):
    return {name: t.double() for name, t in gpt2_solution(block_state).items()}


def gpt2(*, transpose_c_proj=True, transpose_c_fc=True, split="right", order="qkv", bias_order="qkv",
         swap_norms=False, d_model=None, swap_mlp=False, whole_bias=False):  # fmt: skip
    """A GPT-2 block's state dict in the course's names, with one switch per classic mistake."""

    def fn(block_state):
        out = gpt2_solution(block_state)
        if not transpose_c_proj:
            out["self_attn.w_o.weight"] = block_state["attn.c_proj.weight"]
        if not transpose_c_fc:
            out["feed_forward.w_1.weight"] = block_state["mlp.c_fc.weight"]
        w, b = block_state["attn.c_attn.weight"], block_state["attn.c_attn.bias"]
        d = d_model or w.size(0)
        pieces = {
            "right": lambda: w.t().split(d, dim=0),
            "untransposed": lambda: w.split(d, dim=1),  # the right columns, left (in, out)
            "rows": lambda: w.split(d // 3, dim=0),  # three slices of the input dimension
            "view": lambda: w.reshape(3, d, d),  # the packed (d, 3d) read as three (d, d) blocks
        }[split]()
        biases = b.split(d)
        for p, source in zip("qkv", order):
            out[f"self_attn.w_{p}.weight"] = pieces["qkv".index(source)]
        for p, source in zip("qkv", bias_order):
            out[f"self_attn.w_{p}.bias"] = biases["qkv".index(source)]
        if swap_mlp:  # c_fc and c_proj each transposed, but into each other's place
            out["feed_forward.w_1.weight"] = block_state["mlp.c_proj.weight"].t()
            out["feed_forward.w_2.weight"] = block_state["mlp.c_fc.weight"].t()
        if whole_bias:
            for p in "qkv":
                out[f"self_attn.w_{p}.bias"] = b
        if swap_norms:
            for kind in ("weight", "bias"):
                out[f"norm1.{kind}"], out[f"norm2.{kind}"] = out[f"norm2.{kind}"], out[f"norm1.{kind}"]
        return out

    return fn


def gpt2_in_place(block_state):
    block_state["attn.c_attn.weight"].t_()  # transposed where it lies
    w = block_state["attn.c_attn.weight"]
    out = gpt2_solution({**block_state, "attn.c_attn.weight": w.t()})
    return out


def gpt2_meta(block_state):
    return {name: t.to("meta") for name, t in gpt2_solution(block_state).items()}


GPT2_WRONG = [
    ("c_proj-untransposed", gpt2(transpose_c_proj=False), "self_attn.w_o.weight is square"),
    ("c_fc-untransposed", gpt2(transpose_c_fc=False), "Conv1D stores its weight as (in, out)"),
    ("c_attn-untransposed", gpt2(split="untransposed"), "c_attn's pieces untransposed"),
    ("c_attn-split-rows", gpt2(split="rows"), "transpose it to (3 d_model, d_model)"),
    ("c_attn-viewed", gpt2(split="view"), "c_attn's weight"),
    ("kqv-order", gpt2(order="kqv"), "queries, keys and values are in the wrong order"),
    ("bias-order", gpt2(bias_order="qvk"), "biases of queries, keys and values are in the wrong order"),
    ("kqv-order-weights-and-biases", gpt2(order="kqv", bias_order="kqv"), "wrong order, weights and biases alike"),
    ("mlp-swapped", gpt2(swap_mlp=True), "feed_forward.w_1.weight holds the weight that belongs in feed_forward.w_2"),
    ("whole-c_attn-bias", gpt2(whole_bias=True), "all of c_attn's bias"),
    ("norms-swapped", gpt2(swap_norms=True), "ln_1 and ln_2 are swapped"),
    ("d_model-hard-coded", gpt2(d_model=24), HARD_CODED),
    ("in-place", gpt2_in_place, IN_PLACE),
    ("meta", gpt2_meta, "is on meta"),
]


# --- rotary embeddings, Llama's pairing ----------------------------------------------------------------------


def rotary_answer(*, pairing="halves", start=None, theta_override=None, two_i_twice=False, pair_index=False, sign=1.0,
           complex_form=False):  # fmt: skip
    """A rotary_answer embedding with one switch per classic mistake."""

    def fn(x, positions, theta):
        theta = theta_override or theta
        d = x.size(-1)
        two_i = torch.arange(0, d, 2, dtype=torch.float64, device=x.device)
        exponent = 2 * two_i if two_i_twice else two_i / 2 if pair_index else two_i
        omega = theta ** (-exponent / d)  # (d/2,)
        pos = torch.arange(x.size(-2), device=x.device) if start is not None else positions
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
    ok, out = verdict(check_rotary_halves, rotary_answer(**style), capsys)
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
    ok, out = verdict(check_rotary_halves, rotary_answer(**mistake), capsys)
    assert not ok and words in out, out


def test_rotary_stub_is_not_attempted(capsys):
    result = check_rotary_halves(todo)
    assert not result and result.status == "not attempted"


# --- key/value heads ---------------------------------------------------------------------------------------------


def test_expand_kv_right_answers_in_other_styles_pass(capsys):
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

GPT2_PAIRS = [("norm1", "ln_1"), ("norm2", "ln_2"), ("self_attn.w_o", "attn.c_proj"), ("feed_forward.w_1", "mlp.c_fc"),
         ("feed_forward.w_2", "mlp.c_proj")]  # fmt: skip


def block_state(*, transpose_c_proj=True, transpose_c_attn=True, order=(0, 1, 2), bias_order=(0, 1, 2),
                swap_norms=False):  # fmt: skip
    """A GPT-2 block's state dict in the course's names, with one switch per classic mistake."""

    def fn(state):
        out = {}
        pairs = [(o, t) for o, t in GPT2_PAIRS]
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


# --- the verdict table: every answer above, the verdict it must get and the words its message must hold ---------

VERDICTS = [
    *verdict_rows(
        check_rotary_halves,
        [rotary_solution, rotary_rotate_half, rotary_float64, rotary_complex],
        ROTARY_HALVES_WRONG,
        says="✅ rotary embedding with Llama's pairing (i, i + d/2) is right.",
    ),
    *verdict_rows(
        check_expand_kv,
        [expand_solution, expand_index, expand_loop, expand_stack, expand_interleave],
        EXPAND_WRONG,
        says="✅ expand_kv is right: query head j reads key head j // n_rep, as in Llama.",
    ),
    *verdict_rows(
        check_gpt2_block_weights,
        [gpt2_solution, gpt2_split_then_transpose, gpt2_regex, gpt2_float64],
        GPT2_WRONG,
        says="✅ the block's weights are right",
    ),
]


test_each_answer_gets_its_verdict = verdict_table_test(VERDICTS)
