"""EncoderLayer / DecoderLayer against nn.TransformerEncoderLayer / nn.TransformerDecoderLayer."""

import pytest
import torch
from torch import nn
from torch.testing import assert_close

from course_utils import (
    Decoder,
    DecoderLayer,
    Encoder,
    EncoderLayer,
    causal_mask,
    padding_mask,
    record_attention,
    target_mask,
)

D, H, FF = 16, 4, 32


def randomise_norms(layer: nn.Module) -> nn.Module:
    """Non-trivial LayerNorm parameters, so that copying them is actually tested."""
    with torch.no_grad():
        for m in layer.modules():
            if isinstance(m, nn.LayerNorm):
                m.weight.normal_()
                m.bias.normal_()
    return layer


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_matches_torch(norm_first):
    theirs = randomise_norms(nn.TransformerEncoderLayer(D, H, FF, dropout=0.1, batch_first=True, norm_first=norm_first))
    theirs.eval()
    ours = EncoderLayer.from_torch(theirs).eval()
    assert ours.norm_first == norm_first
    src = torch.tensor([[4, 5, 6, 0, 0], [7, 8, 9, 10, 11]])
    x = torch.randn(2, 5, D)
    expected = theirs(x, src_key_padding_mask=src == 0)  # torch: True = padding
    out = ours(x, padding_mask(src, 0))
    assert_close(out[src != 0], expected[src != 0])  # torch's fast path may zero padded rows in eval
    assert_close(ours(x), theirs(x))


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_matches_torch_with_different_source_and_target_lengths(norm_first):
    theirs = randomise_norms(nn.TransformerDecoderLayer(D, H, FF, dropout=0.1, batch_first=True, norm_first=norm_first))
    theirs.eval()
    ours = DecoderLayer.from_torch(theirs).eval()
    src = torch.tensor([[4, 5, 6, 7, 0, 0, 0], [4, 5, 6, 7, 8, 9, 10]])  # S = 7
    tgt = torch.tensor([[1, 5, 6, 0], [1, 7, 8, 9]])  # T = 4
    x, memory = torch.randn(2, 4, D), torch.randn(2, 7, D)
    expected = theirs(
        x, memory, tgt_mask=~causal_mask(4), tgt_key_padding_mask=tgt == 0, memory_key_padding_mask=src == 0
    )
    out = ours(x, memory, src_mask=padding_mask(src, 0), tgt_mask=target_mask(tgt, 0))
    assert out.shape == (2, 4, D)
    assert_close(out, expected)


def test_decoder_cross_attention_queries_come_from_the_decoder():
    layer = DecoderLayer(D, H, FF, dropout=0.0).eval()
    x, memory = torch.randn(1, 3, D), torch.randn(1, 8, D)
    with record_attention(layer) as attention:
        layer(x, memory)
    assert attention["cross_attn"].shape == (1, H, 3, 8)  # (B, h, T_q = target, T_k = source)


def test_decoder_self_attention_is_causal():
    layer = DecoderLayer(D, H, FF, dropout=0.0).eval()
    x, memory = torch.randn(1, 5, D), torch.randn(1, 6, D)
    before = layer(x, memory, tgt_mask=causal_mask(5))
    x2 = x.clone()
    x2[:, 3:] = torch.randn(1, 2, D)  # change the future
    after = layer(x2, memory, tgt_mask=causal_mask(5))
    assert_close(after[:, :3], before[:, :3])


@pytest.mark.parametrize("norm_first", [False, True])
def test_stacks_keep_the_shape_and_pre_norm_stacks_end_with_a_norm(norm_first):
    enc = Encoder(D, H, FF, n_layers=3, norm_first=norm_first).eval()
    dec = Decoder(D, H, FF, n_layers=2, norm_first=norm_first).eval()
    memory = enc(torch.randn(2, 7, D))
    assert dec(torch.randn(2, 4, D), memory).shape == (2, 4, D)
    assert len(enc.layers) == 3 and isinstance(enc.norm, nn.Identity) != norm_first


def test_from_torch_refuses_what_it_cannot_mirror():
    with pytest.raises(ValueError, match=r"activation.*relu"):
        EncoderLayer.from_torch(nn.TransformerEncoderLayer(D, H, FF, activation="gelu", batch_first=True))
    with pytest.raises(ValueError, match="batch_first=True"):
        DecoderLayer.from_torch(nn.TransformerDecoderLayer(D, H, FF))
    with pytest.raises(ValueError, match="bias=False"):
        EncoderLayer.from_torch(nn.TransformerEncoderLayer(D, H, FF, batch_first=True, bias=False))
    with pytest.raises(TypeError, match=r"nn\.TransformerDecoderLayer"):
        DecoderLayer.from_torch(nn.TransformerEncoderLayer(D, H, FF, batch_first=True))


def test_from_torch_keeps_dropout_and_training_mode():
    theirs = nn.TransformerEncoderLayer(D, H, FF, dropout=0.25, batch_first=True)
    ours = EncoderLayer.from_torch(theirs)
    assert ours.training and ours.dropout1.p == 0.25 and ours.self_attn.dropout == 0.25


def test_a_subclass_overrides_one_sublayer_through_its_block_method():
    """The block methods are the layers' extension points: one signature each, called in training and in
    incremental decoding alike."""
    calls = []

    class Recorded(DecoderLayer):
        def self_attention_block(self, x, tgt_mask, cache=None):
            calls.append(("self", cache is None))
            return super().self_attention_block(x, tgt_mask, cache)

        def cross_attention_block(self, x, memory, src_mask, cache=None):
            calls.append(("cross", cache is None))
            return super().cross_attention_block(x, memory, src_mask, cache)

        def feed_forward_block(self, x):
            calls.append(("ff", True))
            return torch.zeros_like(x)  # a layer without its feed-forward network

    torch.manual_seed(0)
    plain = DecoderLayer(D, H, FF, dropout=0.0).eval()
    layer = Recorded(D, H, FF, dropout=0.0).eval()
    layer.load_state_dict(plain.state_dict())
    x, memory = torch.randn(2, 3, D), torch.randn(2, 5, D)
    out = layer(x, memory, tgt_mask=causal_mask(3))
    expected = plain.norm3(plain.norm2(plain.norm1(x + plain.self_attention_block(x, causal_mask(3)))
                                       + plain.cross_attention_block(
                                           plain.norm1(x + plain.self_attention_block(x, causal_mask(3))), memory,
                                           None)))  # fmt: skip
    assert_close(out, expected)
    assert calls == [("self", True), ("cross", True), ("ff", True)]

    from course_utils.model.decoder import DecoderCache

    calls.clear()
    layer(x[:, :1], memory, cache=DecoderCache())
    assert calls == [("self", False), ("cross", False), ("ff", True)]


def test_encoder_layer_blocks_compose_its_forward():
    torch.manual_seed(0)
    layer = EncoderLayer(D, H, FF, dropout=0.0).eval()
    x = torch.randn(2, 4, D)
    h = layer.norm1(x + layer.self_attention_block(x, None))
    assert_close(layer(x), layer.norm2(h + layer.feed_forward_block(h)))
