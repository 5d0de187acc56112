import pytest
import torch
from torch import nn
from torch.testing import assert_close

from course_utils import FeedForward, LayerNorm


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
    with torch.no_grad():
        ours.weight.normal_()
        ours.bias.normal_()
    mean = x.mean(-1, keepdim=True)
    variance = (x - mean).pow(2).mean(-1, keepdim=True)  # divided by d_model: biased
    assert_close(ours(x), (x - mean) / torch.sqrt(variance + 0.5) * ours.weight + ours.bias)
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


@pytest.mark.parametrize(("activation", "function"), [("relu", torch.relu), ("gelu", nn.functional.gelu)])
def test_feed_forward_applies_the_activation_it_is_given(activation, function):
    ff = FeedForward(4, 8, activation=activation).eval()
    x = torch.randn(3, 5, 4) * 3
    assert_close(ff(x), ff.w_2(function(ff.w_1(x))))
    other = nn.functional.gelu if activation == "relu" else torch.relu
    assert not torch.allclose(ff(x), ff.w_2(other(ff.w_1(x))), atol=1e-3)


def test_feed_forward_refuses_an_unknown_activation():
    with pytest.raises(ValueError, match="activation must be one of"):
        FeedForward(4, 8, activation="swish")


def test_a_size_that_builds_nothing_is_refused_where_it_was_passed():
    """d_ff=0, n_layers=0, a vocabulary or context of 0: each would build a model that runs and means nothing (d_ff=0
    was even replaced by the default width in GPT and Llama)."""
    from course_utils import GPT, Decoder, Encoder, Llama, Transformer

    tiny = dict(d_model=8, n_heads=2)
    cases = [
        (lambda: FeedForward(8, 0), "FeedForward", "d_ff=0"),
        (lambda: Encoder(8, 2, 16, n_layers=0), "Encoder", "n_layers=0"),
        (lambda: Decoder(8, 2, 16, n_layers=0), "Decoder", "n_layers=0"),
        (lambda: GPT(vocab_size=10, block_size=8, n_layers=1, d_ff=0, **tiny), "GPT", "d_ff=0"),
        (lambda: GPT(vocab_size=10, block_size=0, n_layers=1, **tiny), "GPT", "block_size=0"),
        (lambda: GPT(vocab_size=10.0, block_size=8, n_layers=1, **tiny), "GPT", "vocab_size=10.0"),
        (lambda: Llama(vocab_size=10, block_size=8, n_layers=0, **tiny), "Llama", "n_layers=0"),
        (lambda: Llama(vocab_size=10, block_size=8, n_layers=1, d_ff=0, **tiny), "Llama", "d_ff=0"),
        (lambda: Transformer(0, 10, n_layers=1, d_ff=16, **tiny), "Transformer", "src_vocab_size=0"),
        (lambda: Transformer(10, 10, n_layers=0, d_ff=16, **tiny), "Transformer", "n_layers=0"),
    ]
    for build, owner, got in cases:
        with pytest.raises(ValueError, match=f"^{owner} needs sizes that are ints >= 1; got {got}$"):
            build()
    assert GPT(vocab_size=torch.tensor(10).numpy()[()], block_size=8, n_layers=1, **tiny).vocab_size == 10  # NumPy int
