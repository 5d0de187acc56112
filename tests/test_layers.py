import pytest
import torch
from torch import nn
from torch.testing import assert_close

from course_utils import EncoderLayer, FeedForward, LayerNorm, fast_kernels


def test_layer_norm_equals_nn_layer_norm_including_its_state_dict():
    theirs = nn.LayerNorm(12)
    with torch.no_grad():
        theirs.weight.normal_()
        theirs.bias.normal_()
    ours = LayerNorm(12)
    ours.load_state_dict(theirs.state_dict())
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["weight", "bias"]
    x = torch.randn(3, 5, 12) * 4 + 2
    assert_close(ours(x), theirs(x))


def test_layer_norm_uses_biased_variance_with_eps_inside_the_root():
    x = torch.randn(4, 6) * 3
    ours = LayerNorm(6, eps=0.5)  # a large eps makes its place visible
    assert_close(ours(x), nn.functional.layer_norm(x, (6,), eps=0.5))
    common_bug = (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + 0.5)
    assert not torch.allclose(ours(x), common_bug, atol=1e-3)


def test_layer_norm_rejects_the_wrong_width():
    with pytest.raises(ValueError, match="LayerNorm\\(6\\) got input with last dimension 5"):
        LayerNorm(6)(torch.randn(2, 5))


def test_feed_forward_is_position_wise():
    ff = FeedForward(8, 32).eval()
    x = torch.randn(2, 5, 8)
    out = ff(x)
    assert out.shape == (2, 5, 8)
    assert_close(out[:, 2], ff(x[:, 2:3])[:, 0])  # each position on its own
    assert_close(out, ff.w_2(torch.relu(ff.w_1(x))))


def test_feed_forward_activation_is_checked():
    assert_close(FeedForward(4, 8, activation="gelu").eval()(torch.zeros(1, 1, 4)).shape, torch.Size([1, 1, 4]))
    with pytest.raises(ValueError, match="activation must be one of"):
        FeedForward(4, 8, activation="swish")


def test_fast_kernels_compute_the_same_layer_and_restore_the_readable_path():
    layer = EncoderLayer(16, 4, 32, dropout=0.0).eval()
    with torch.no_grad():
        layer.norm1.weight.normal_()
    x = torch.randn(2, 5, 16, requires_grad=True)
    readable = layer(x)
    with fast_kernels(layer):
        assert layer.norm1.fused and not layer.self_attn.need_weights
        fast = layer(x)
    assert not layer.norm1.fused and layer.self_attn.need_weights
    assert_close(fast, readable)
    (grad_fast,) = torch.autograd.grad(fast.sum(), x)
    (grad_readable,) = torch.autograd.grad(readable.sum(), x)
    assert_close(grad_fast, grad_readable)
