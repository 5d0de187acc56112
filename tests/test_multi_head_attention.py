"""MultiHeadAttention against nn.MultiheadAttention (whose bool masks mean True = blocked)."""

import pytest
import torch
from conftest import no_empty_rows
from torch import nn
from torch.testing import assert_close

from course_utils import MultiHeadAttention, causal_mask, fast_kernels, padding_mask


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
    assert_close(ours(x, x, x), expected)
    assert ours.attn_weights.shape == (2, 4, 5, 5)
    assert_close(ours.attn_weights, expected_weights)


def test_cross_attention_with_different_lengths_matches_torch():
    theirs, ours = pair()
    query, memory = torch.randn(2, 3, 16), torch.randn(2, 7, 16)  # T_q != T_k
    expected, expected_weights = theirs(query, memory, memory, average_attn_weights=False)
    out = ours(query=query, key=memory, value=memory)
    assert out.shape == (2, 3, 16)
    assert_close(out, expected)
    assert_close(ours.attn_weights, expected_weights)


def test_padding_mask_matches_torch_key_padding_mask():
    theirs, ours = pair()
    tokens = torch.tensor([[3, 4, 5, 0, 0], [6, 7, 0, 0, 0]])
    x = torch.randn(2, 5, 16)
    expected, _ = theirs(x, x, x, key_padding_mask=tokens == 0)  # torch: True = ignore
    assert_close(ours(x, x, x, mask=padding_mask(tokens, 0)), expected)
    assert torch.all(ours.attn_weights[:, :, :, 3:][tokens[:, None, None, 3:].expand(-1, 4, 5, -1) == 0] == 0)


def test_causal_mask_matches_torch_inverted_attn_mask():
    theirs, ours = pair()
    x = torch.randn(2, 6, 16)
    expected, _ = theirs(x, x, x, attn_mask=~causal_mask(6))  # torch: True = blocked
    assert_close(ours(x, x, x, mask=causal_mask(6)), expected)
    assert_close(ours(x, x, x, is_causal=True), expected)


def test_from_torch_without_bias():
    theirs, ours = pair(bias=False)
    x = torch.randn(1, 4, 16)
    assert ours.w_q.bias is None
    assert_close(ours(x, x, x), theirs(x, x, x)[0])


def test_fused_path_matches_the_explicit_path_and_keeps_no_weights():
    mha = MultiHeadAttention(16, 4).eval()
    q, kv = torch.randn(2, 4, 16), torch.randn(2, 6, 16)
    mask = no_empty_rows(torch.rand(2, 1, 4, 6) > 0.4)
    explicit = mha(q, kv, kv, mask)
    with fast_kernels(mha):
        fused = mha(q, kv, kv, mask)
        assert mha.attn_weights is None
        x = torch.randn(2, 5, 16)
        fused_causal = mha(x, x, x, is_causal=True)
    assert mha.need_weights  # restored
    assert_close(fused, explicit)
    assert_close(fused_causal, mha(x, x, x, mask=causal_mask(5)))


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
