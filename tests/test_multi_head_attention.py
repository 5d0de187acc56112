"""MultiHeadAttention against nn.MultiheadAttention (whose bool masks mean True = blocked)."""

import pytest
import torch
from helpers import no_empty_rows, operators
from torch import nn
from torch.testing import assert_close

from course_utils import KVCache, MultiHeadAttention, causal_mask, padding_mask, record_attention


def pair(d_model=16, n_heads=4, bias=True):
    torch_mha = nn.MultiheadAttention(d_model, n_heads, batch_first=True, bias=bias).eval()
    return torch_mha, MultiHeadAttention.from_torch(torch_mha).eval()


def test_projections_are_named_after_the_paper():
    mha = MultiHeadAttention(16, 4)
    assert [name for name, _ in mha.named_children()] == ["w_q", "w_k", "w_v", "w_o"]
    assert all(isinstance(m, nn.Linear) for m in mha.children())
    assert (mha.d_k, mha.n_heads) == (4, 4)


def test_self_attention_and_per_head_weights_match_torch():
    theirs, ours = pair()
    x = torch.randn(2, 5, 16)
    expected, expected_weights = theirs(x, x, x, average_attn_weights=False)
    out, weights = ours(x, x, x, need_weights=True)
    assert_close(out, expected)
    assert weights.shape == (2, 4, 5, 5)
    assert_close(weights, expected_weights)


def test_cross_attention_with_different_lengths_matches_torch():
    theirs, ours = pair()
    query, memory = torch.randn(2, 3, 16), torch.randn(2, 7, 16)  # T_q != T_k
    expected, expected_weights = theirs(query, memory, memory, average_attn_weights=False)
    out, weights = ours(query=query, key=memory, value=memory, need_weights=True)
    assert out.shape == (2, 3, 16)
    assert_close(out, expected)
    assert_close(weights, expected_weights)


def test_padding_mask_matches_torch_key_padding_mask():
    theirs, ours = pair()
    tokens = torch.tensor([[3, 4, 5, 0, 0], [6, 7, 0, 0, 0]])
    x = torch.randn(2, 5, 16)
    expected, _ = theirs(x, x, x, key_padding_mask=tokens == 0)  # torch: True = ignore
    for need_weights in (False, True):
        out, weights = ours(x, x, x, mask=padding_mask(tokens, 0), need_weights=need_weights)
        assert_close(out, expected)
    assert torch.all(weights[:, :, :, 3:][tokens[:, None, None, 3:].expand(-1, 4, 5, -1) == 0] == 0)


def test_causal_mask_matches_torch_inverted_attn_mask():
    theirs, ours = pair()
    x = torch.randn(2, 6, 16)
    expected, _ = theirs(x, x, x, attn_mask=~causal_mask(6))  # torch: True = blocked
    for need_weights in (False, True):
        assert_close(ours(x, x, x, mask=causal_mask(6), need_weights=need_weights)[0], expected)
        assert_close(ours(x, x, x, is_causal=True, need_weights=need_weights)[0], expected)


def test_from_torch_without_bias():
    theirs, ours = pair(bias=False)
    x = torch.randn(1, 4, 16)
    assert ours.w_q.bias is None
    assert_close(ours(x, x, x)[0], theirs(x, x, x)[0])


def test_the_default_fused_path_computes_what_the_readable_path_computes_and_returns_no_weights():
    mha = MultiHeadAttention(16, 4).eval()
    q, kv = torch.randn(2, 4, 16, requires_grad=True), torch.randn(2, 6, 16)
    mask = no_empty_rows(torch.rand(2, 1, 4, 6) > 0.4)
    fused, no_weights = mha(q, kv, kv, mask)
    readable, weights = mha(q, kv, kv, mask, need_weights=True)
    assert no_weights is None and weights.shape == (2, 4, 4, 6)
    assert_close(fused, readable)
    (grad_fused,) = torch.autograd.grad(fused.sum(), q)
    (grad_readable,) = torch.autograd.grad(readable.sum(), q)
    assert_close(grad_fused, grad_readable)


def test_each_causal_case_takes_its_own_branch_and_all_agree():
    """Plain causal (fused triangle), causal with padding (explicit mask), and new queries after a cache."""
    mha = MultiHeadAttention(16, 4).eval()
    x = torch.randn(2, 7, 16)
    tokens = torch.tensor([[5, 6, 7, 8, 9, 0, 0], [5, 6, 7, 8, 9, 9, 9]])
    full = causal_mask(7) & padding_mask(tokens, 0)
    for need_weights in (False, True):
        assert_close(mha(x, x, x, is_causal=True, need_weights=need_weights)[0], mha(x, x, x, causal_mask(7))[0])
        padded = mha(x, x, x, padding_mask(tokens, 0), is_causal=True, need_weights=need_weights)[0]
        assert_close(padded, mha(x, x, x, full, need_weights=True)[0])
        cache = KVCache()
        first = mha(x[:, :4], x[:, :4], x[:, :4], is_causal=True, cache=cache, need_weights=need_weights)[0]
        rest = mha(x[:, 4:], x[:, 4:], x[:, 4:], is_causal=True, cache=cache, need_weights=need_weights)[0]
        assert_close(torch.cat([first, rest], dim=1), mha(x, x, x, is_causal=True)[0])


def test_the_weights_returned_with_a_cache_are_aligned_to_the_end():
    mha = MultiHeadAttention(16, 4).eval()
    x = torch.randn(1, 6, 16)
    cache = KVCache()
    mha(x[:, :4], x[:, :4], x[:, :4], is_causal=True, cache=cache)
    _, weights = mha(x[:, 4:], x[:, 4:], x[:, 4:], is_causal=True, cache=cache, need_weights=True)
    assert weights.shape == (1, 4, 2, 6)
    assert torch.all(weights[..., 0, 5] == 0) and torch.all(weights[..., 0, :5] > 0)  # position 4 sees 0..4
    assert torch.all(weights[..., 1, :] > 0)  # position 5 sees everything


def test_record_attention_asks_every_attention_module_for_its_weights_and_then_stops():
    from course_utils import Transformer, target_mask

    model = Transformer(11, 13, d_model=16, n_heads=4, n_layers=2, d_ff=32).eval()
    src, tgt = torch.randint(3, 11, (2, 5)), torch.randint(3, 13, (2, 4))
    args = (src, tgt, padding_mask(src, 0), target_mask(tgt, 0))
    plain = model(*args)
    with record_attention(model) as attention:
        recorded = model(*args)
    assert_close(recorded, plain)  # recording changes which kernel runs, not what it computes
    assert sorted(attention) == sorted(
        [f"encoder.layers.{i}.self_attn" for i in range(2)]
        + [f"decoder.layers.{i}.{kind}" for i in range(2) for kind in ("self_attn", "cross_attn")]
    )
    assert attention["decoder.layers.1.cross_attn"].shape == (2, 4, 4, 5)  # (B, h, T_target, S_source)
    assert_close(attention["decoder.layers.0.self_attn"].sum(-1), torch.ones(2, 4, 4))
    model(*args)
    assert len(attention) == 6  # nothing more recorded after the block
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())


def test_record_attention_refuses_a_model_without_attention():
    with pytest.raises(ValueError, match="no MultiHeadAttention"):
        with record_attention(nn.Linear(3, 3)):
            pass


def test_d_model_not_divisible_by_n_heads_says_what_to_change():
    with pytest.raises(
        ValueError, match=r"d_model=10 is not divisible by n_heads=3.*n_heads in \[1, 2, 5, 10\].*9 or 12"
    ):
        MultiHeadAttention(10, 3)


def test_bad_inputs_give_clear_errors():
    mha = MultiHeadAttention(16, 4)
    with pytest.raises(ValueError, match="d_model=16"):
        mha(torch.randn(2, 5, 8), torch.randn(2, 5, 8), torch.randn(2, 5, 8))
    with pytest.raises(ValueError, match="key and value must have the same shape"):
        mha(torch.randn(2, 5, 16), torch.randn(2, 5, 16), torch.randn(2, 4, 16))
    with pytest.raises(ValueError, match="is_causal needs T_q == T_k"):
        mha(torch.randn(2, 3, 16), torch.randn(2, 5, 16), torch.randn(2, 5, 16), is_causal=True)
    with pytest.raises(TypeError, match="True = may attend"):
        mha(torch.randn(1, 3, 16), torch.randn(1, 3, 16), torch.randn(1, 3, 16), mask=torch.zeros(3, 3))
    with pytest.raises(ValueError, match="dropout"):
        MultiHeadAttention(16, 4, dropout=1.5)


def test_from_torch_refuses_what_it_cannot_mirror():
    with pytest.raises(ValueError, match="kdim"):
        MultiHeadAttention.from_torch(nn.MultiheadAttention(16, 4, kdim=8, vdim=8, batch_first=True))
    with pytest.raises(ValueError, match="add_bias_kv"):
        MultiHeadAttention.from_torch(nn.MultiheadAttention(16, 4, add_bias_kv=True, batch_first=True))
    with pytest.raises(TypeError, match=r"nn\.MultiheadAttention"):
        MultiHeadAttention.from_torch(nn.Linear(4, 4))


class RenamedOutput(MultiHeadAttention):
    """A maintainer renames W^O from ``w_o`` to ``w_out`` (forward still reads ``self.w_o`` through the property)."""

    w_o = property(lambda self: self.w_out)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._modules["w_out"] = self._modules.pop("w_o")


def test_renaming_a_submodule_takes_one_edit_of_the_name_table(monkeypatch):
    """Our names and PyTorch's live in one table, read both ways: with ``w_o`` renamed, editing its entry is enough
    for ``from_torch`` (PyTorch's weights into ours) and ``torch_state_dict`` (ours into PyTorch's)."""
    from course_utils.model import convert_torch

    theirs = nn.MultiheadAttention(16, 4, batch_first=True).eval()
    with pytest.raises(RuntimeError, match="w_out"):  # before the edit the weights find no home
        RenamedOutput.from_torch(theirs)
    renamed = [("w_out", b) if a == "w_o" else (a, b) for a, b in convert_torch.NAMES]
    monkeypatch.setattr(convert_torch, "NAMES", renamed)  # the one edit

    ours = RenamedOutput.from_torch(theirs).eval()  # PyTorch -> ours
    x = torch.randn(2, 5, 16)
    assert_close(ours(x, x, x)[0], theirs(x, x, x)[0])
    back = nn.MultiheadAttention(16, 4, batch_first=True).eval()
    back.load_state_dict(convert_torch.torch_state_dict(ours.state_dict()))  # ours -> PyTorch, strictly
    assert_close(back(x, x, x)[0], theirs(x, x, x)[0])


def test_the_name_table_is_read_the_same_both_ways():
    from course_utils.model.convert_torch import course_state_dict, torch_state_dict

    layer = nn.TransformerDecoderLayer(16, 4, 32, batch_first=True)
    state = layer.state_dict()
    ours = course_state_dict(state)
    assert "cross_attn.w_q.weight" in ours and "feed_forward.w_2.bias" in ours and "self_attn.w_o.weight" in ours
    again = torch_state_dict(ours)
    assert again.keys() == state.keys()
    assert all(torch.equal(again[k], state[k]) for k in state)


def _three_projections(mha, query, key, value):
    """The module's function with w_q, w_k and w_v called one by one: the reference the packed product must equal."""
    B, T_q, _ = query.shape
    q, k, v = (w(x).view(B, x.size(1), mha.n_heads, mha.d_k).transpose(1, 2)
               for w, x in ((mha.w_q, query), (mha.w_k, key), (mha.w_v, value)))  # fmt: skip
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, h, T_q, d_k)
    return mha.w_o(out.transpose(1, 2).reshape(B, T_q, mha.d_model))


@pytest.mark.parametrize("bias", [True, False])
def test_self_attention_packed_into_one_product_equals_three_projections_values_and_gradients(bias):
    from course_utils.model.attention import packed_linear

    mha = MultiHeadAttention(16, 4, bias=bias)
    twin = MultiHeadAttention(16, 4, bias=bias)
    twin.load_state_dict(mha.state_dict())  # same names: the packed path keeps w_q, w_k, w_v
    x = torch.randn(2, 5, 16, requires_grad=True)
    x2 = x.detach().clone().requires_grad_()
    out, _ = mha(x, x, x, is_causal=True)
    expected = _three_projections(twin, x2, x2, x2)
    assert_close(out, expected)
    out.square().sum().backward()
    expected.square().sum().backward()
    assert_close(x.grad, x2.grad)
    for (name, p), q in zip(mha.named_parameters(), twin.parameters(), strict=True):
        assert_close(p.grad, q.grad, msg=name)
    q, k, v = packed_linear(x, mha.w_q, mha.w_k, mha.w_v)
    assert_close(torch.cat([q, k, v], -1), torch.cat([mha.w_q(x), mha.w_k(x), mha.w_v(x)], -1))


def _matrix_products(fn) -> int:
    counted = operators(fn)
    return counted["mm"] + counted["addmm"] + counted["bmm"]


def test_self_attention_runs_two_matrix_products_and_cross_attention_three():
    mha = MultiHeadAttention(16, 4, bias=False)
    x, memory = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    assert _matrix_products(lambda: mha(x, x, x, is_causal=True)) == 2  # Q, K, V in one; W^O
    assert _matrix_products(lambda: mha(x, memory, memory)) == 3  # Q; K and V of the memory in one; W^O
    assert _matrix_products(lambda: mha(x, memory, memory.clone())) == 4  # three tensors: three products
    with torch.no_grad():  # generation: stacking the weights at every token would cost more than it saves
        assert _matrix_products(lambda: mha(x, x, x, is_causal=True)) == 4


def test_a_hooked_or_adapted_projection_is_still_called():
    """A hook on w_q (a probe), or a layer that is not a plain nn.Linear (an adapter), must see its call: the packed
    product would skip it."""

    class Doubled(torch.nn.Linear):
        def forward(self, x):
            return 2 * super().forward(x)

    mha = MultiHeadAttention(16, 4)
    x = torch.randn(2, 5, 16)
    seen = []
    handle = mha.w_q.register_forward_hook(lambda _m, _i, out: seen.append(out.shape))
    mha(x, x, x)
    handle.remove()
    assert seen == [(2, 5, 16)]
    plain, _ = mha(x, x, x)
    doubled = Doubled(16, 16)
    doubled.load_state_dict(mha.w_v.state_dict())
    mha.w_v = doubled
    adapted, _ = mha(x, x, x)
    assert not torch.allclose(adapted, plain), "the adapter's forward must run"
