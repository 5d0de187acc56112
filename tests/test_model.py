"""The full Transformer: shapes, causality, padding invariance, initialisation, greedy decoding."""

import pytest
import torch
from torch.testing import assert_close

from course_utils import (
    KVCache,
    MultiHeadAttention,
    TorchTransformer,
    Transformer,
    causal_mask,
    count_parameters,
    greedy_decode,
    padding_mask,
    target_mask,
)

PAD, BOS, EOS = 0, 1, 2


def small(cls=Transformer, **kw):
    return cls(src_vocab_size=20, tgt_vocab_size=15, d_model=32, n_heads=4, n_layers=2, d_ff=64, **kw).eval()


def test_encode_decode_forward_shapes():
    model = small()
    src, tgt = torch.randint(3, 20, (2, 9)), torch.randint(3, 15, (2, 5))
    memory = model.encode(src, padding_mask(src, PAD))
    assert memory.shape == (2, 9, 32)
    logits = model.decode(tgt, memory, padding_mask(src, PAD), causal_mask(5))
    assert logits.shape == (2, 5, 15)
    assert_close(model(src, tgt, padding_mask(src, PAD), causal_mask(5)), logits)


@pytest.mark.parametrize("cls", [Transformer, TorchTransformer])
def test_changing_future_target_tokens_never_changes_earlier_logits(cls):
    model = small(cls)
    src, tgt = torch.randint(3, 20, (2, 7)), torch.randint(3, 15, (2, 6))
    logits = model(src, tgt, padding_mask(src, PAD), target_mask(tgt, PAD))
    changed = tgt.clone()
    changed[:, 4:] = torch.randint(3, 15, (2, 2))
    new = model(src, changed, padding_mask(src, PAD), target_mask(changed, PAD))
    assert_close(new[:, :4], logits[:, :4])
    assert not torch.allclose(new[:, 4:], logits[:, 4:])


@pytest.mark.parametrize("cls", [Transformer, TorchTransformer])
def test_changing_padded_source_tokens_never_changes_the_logits(cls):
    model = small(cls)
    src = torch.tensor([[5, 6, 7, 8, PAD, PAD], [9, 10, PAD, PAD, PAD, PAD]])
    tgt = torch.randint(3, 15, (2, 4))
    logits = model(src, tgt, padding_mask(src, PAD), causal_mask(4))
    garbage = src.clone()
    garbage[src == PAD] = 17  # same positions, other tokens, still masked as padding
    assert_close(model(garbage, tgt, padding_mask(src, PAD), causal_mask(4)), logits)


def test_embeddings_are_scaled_to_the_size_of_the_positional_signal():
    model = Transformer(1000, 1000, d_model=256, n_heads=4, n_layers=1, d_ff=64)
    scaled = model.src_embed.weight * 256**0.5
    assert 0.9 < scaled.std().item() < 1.1


def test_greedy_decode_takes_the_argmax_at_each_step_and_stops_at_eos():
    model = small()
    src = torch.randint(3, 20, (3, 6))
    out = greedy_decode(model, src, padding_mask(src, PAD), max_len=7, bos_id=BOS, eos_id=EOS, pad_id=PAD)
    assert out.dtype == torch.long and out.shape[0] == 3 and out.shape[1] <= 7
    assert torch.all(out[:, 0] == BOS)
    memory = model.encode(src, padding_mask(src, PAD))
    for t in range(1, out.size(1)):  # each token is the argmax given the tokens before it
        logits = model.decode(out[:, :t], memory, padding_mask(src, PAD), causal_mask(t))
        expected = logits[:, -1].argmax(-1)
        finished = (out[:, 1:t] == EOS).any(dim=1)
        assert torch.equal(out[~finished, t], expected[~finished])
        assert torch.all(out[finished, t] == PAD)


def test_greedy_decode_stops_early_once_every_row_has_ended():
    model = small()
    with torch.no_grad():
        model.generator.bias.fill_(-1e4)
        model.generator.bias[EOS] = 1e4  # always predicts <eos>
    src = torch.randint(3, 20, (2, 5))
    out = greedy_decode(model, src, None, max_len=10, bos_id=BOS, eos_id=EOS)
    assert out.tolist() == [[BOS, EOS], [BOS, EOS]]


def test_greedy_decode_runs_in_eval_mode_and_restores_the_mode():
    model = small(dropout=0.5).train()
    src = torch.randint(3, 20, (2, 5))
    first = greedy_decode(model, src, None, max_len=6, bos_id=BOS, eos_id=EOS)
    assert model.training
    assert torch.equal(first, greedy_decode(model, src, None, max_len=6, bos_id=BOS, eos_id=EOS))  # no dropout inside


def test_bad_tokens_give_clear_errors():
    model = small()
    with pytest.raises(ValueError, match=r"ids outside \[0, 20\)"):
        model.encode(torch.tensor([[3, 25]]))
    with pytest.raises(ValueError, match=r"shape \(B, T\)"):
        model.encode(torch.tensor([3, 4]))
    with pytest.raises(ValueError, match="max_len >= 1"):
        greedy_decode(model, torch.tensor([[3, 4]]), None, max_len=0, bos_id=BOS, eos_id=EOS)


@pytest.mark.parametrize("norm_first", [False, True])
def test_torch_transformer_from_course_is_the_same_function_built_from_torch_layers(norm_first):
    ours = small(norm_first=norm_first, dropout=0.0)
    theirs = TorchTransformer.from_course(ours)
    assert isinstance(theirs.encoder.stack.layers[0], torch.nn.TransformerEncoderLayer)
    assert sum(p.numel() for p in theirs.parameters()) == sum(p.numel() for p in ours.parameters())
    assert not theirs.training
    src = torch.tensor([[5, 6, 7, PAD], [8, 9, 10, 11]])
    tgt = torch.tensor([[BOS, 4, 5, PAD, PAD], [BOS, 6, 7, 8, 9]])
    args = (src, tgt, padding_mask(src, PAD), target_mask(tgt, PAD))
    real = tgt != PAD  # torch may leave padded query rows as it likes; they never reach the loss
    assert_close(theirs(*args)[real], ours(*args)[real])
    assert torch.equal(
        greedy_decode(theirs, src, padding_mask(src, PAD), max_len=6, bos_id=BOS, eos_id=EOS, pad_id=PAD),
        greedy_decode(ours, src, padding_mask(src, PAD), max_len=6, bos_id=BOS, eos_id=EOS, pad_id=PAD),
    )


def test_torch_transformer_refuses_a_target_mask_it_cannot_pass_on():
    model = small(TorchTransformer)
    src, tgt = torch.randint(3, 20, (1, 4)), torch.randint(3, 15, (1, 3))
    bidirectional = torch.ones(1, 1, 3, 3, dtype=torch.bool)  # not causal: torch's decoder would get it wrong
    with pytest.raises(ValueError, match="causal mask plus key padding"):
        model(src, tgt, padding_mask(src, PAD), bidirectional)
    with pytest.raises(ValueError, match=r"padding mask of shape \(B, 1, 1, S\)"):
        model(src, tgt, torch.ones(1, 1, 3, 4, dtype=torch.bool), causal_mask(3))


def test_shared_embeddings_are_one_matrix_used_three_times():
    tied = Transformer(50, 50, d_model=32, n_heads=4, n_layers=1, d_ff=64, share_embeddings=True)
    separate = Transformer(50, 50, d_model=32, n_heads=4, n_layers=1, d_ff=64)
    assert tied.src_embed.weight is tied.tgt_embed.weight is tied.generator.weight
    assert count_parameters(separate) - count_parameters(tied) == 2 * 50 * 32
    src, tgt = torch.randint(0, 50, (2, 5)), torch.randint(0, 50, (2, 4))
    tied(src, tgt).sum().backward()
    assert tied.src_embed.weight.grad is not None  # gradients of all three uses land in one place
    twin = TorchTransformer.from_course(tied.eval())
    assert twin.generator.weight is twin.src_embed.weight
    assert torch.allclose(twin(src, tgt), tied(src, tgt), atol=1e-5)


def test_shared_embeddings_need_one_vocabulary():
    with pytest.raises(ValueError, match="src_vocab_size=50 and tgt_vocab_size=60"):
        Transformer(50, 60, d_model=32, n_heads=4, n_layers=1, share_embeddings=True)


@pytest.mark.parametrize("norm_first", [False, True])
def test_incremental_decoding_gives_the_logits_of_the_full_decoder(norm_first):
    model = small(norm_first=norm_first)
    src, tgt = torch.randint(3, 20, (3, 9)), torch.randint(3, 15, (3, 6))
    src[1, 6:] = PAD
    src_mask = padding_mask(src, PAD)
    memory = model.encode(src, src_mask)
    full = model.decode(tgt, memory, src_mask, causal_mask(6))  # (B, T, V): every position at once
    caches = model.new_caches()
    first = model.decode(tgt[:, :2], memory, src_mask, caches=caches)  # two positions, then one at a time
    steps = [model.decode(tgt[:, t : t + 1], memory, src_mask, caches=caches) for t in range(2, 6)]
    assert_close(torch.cat([first, *steps], dim=1), full, atol=1e-5, rtol=1e-5)
    assert len(caches[0]) == 6


def test_incremental_decoding_refuses_a_target_mask_and_the_wrong_number_of_caches():
    model = small()
    src, tgt = torch.randint(3, 20, (2, 5)), torch.randint(3, 15, (2, 1))
    memory = model.encode(src)
    with pytest.raises(ValueError, match="tgt_mask=None"):
        model.decode(tgt, memory, None, causal_mask(1), caches=model.new_caches())
    with pytest.raises(ValueError, match="one cache per layer"):
        model.decode(tgt, memory, caches=model.new_caches()[:1])
    torch_model = small(TorchTransformer)
    with pytest.raises(ValueError, match="course's Decoder"):
        torch_model.decode(tgt, torch_model.encode(src), caches=model.new_caches())
    with pytest.raises(ValueError, match="course's Decoder"):
        torch_model.new_caches()


def test_a_cross_attention_cache_refuses_another_memory():
    """Caches filled for one batch of sources must not answer for the next: the old sentences' keys and values
    would be used silently."""
    model = small()
    first, second = torch.randint(3, 20, (2, 5)), torch.randint(3, 20, (2, 5))
    tgt = torch.randint(3, 15, (2, 1))
    caches = model.new_caches()
    model.decode(tgt, model.encode(first), caches=caches)
    with pytest.raises(ValueError, match=r"another memory .*new_caches"):
        model.decode(tgt, model.encode(second), caches=caches)  # same shape, other sentences
    with pytest.raises(ValueError, match=r"2 sequences; got 3.*new_caches"):
        model.decode(torch.randint(3, 15, (3, 1)), model.encode(torch.randint(3, 20, (3, 7))), caches=caches)
    cross = KVCache(static=True)
    attention = MultiHeadAttention(32, 4).eval()
    x, memory = torch.randn(2, 1, 32), torch.randn(2, 5, 32)
    attention(x, memory, memory, cache=cross)
    with pytest.raises(ValueError, match=r"another memory \(B=2, S=5; now B=3, S=7\)"):
        attention(torch.randn(3, 1, 32), *[torch.randn(3, 7, 32)] * 2, cache=cross)
    fresh = model.new_caches()  # what the message asks for works
    memory = model.encode(second)
    steps = [model.decode(tgt, memory, caches=fresh), model.decode(tgt, memory, caches=fresh)]
    full = model.decode(torch.cat([tgt, tgt], dim=1), memory, None, causal_mask(2))
    assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)


def test_greedy_decode_is_beam_search_with_one_beam_with_or_without_caches():
    from course_utils import beam_search

    model = small()
    src = torch.randint(3, 20, (4, 7))
    src[0, 5:] = PAD
    mask = padding_mask(src, PAD)
    greedy = greedy_decode(model, src, mask, max_len=9, bos_id=BOS, eos_id=EOS, pad_id=PAD)
    cached = greedy_decode(model, src, mask, max_len=9, bos_id=BOS, eos_id=EOS, pad_id=PAD, use_cache=True)
    beam = beam_search(model, src, mask, beam_size=1, max_len=9, bos_id=BOS, eos_id=EOS, pad_id=PAD)
    assert torch.equal(greedy, cached) and torch.equal(greedy, beam)
    with pytest.raises(TypeError):
        greedy_decode(model, src, mask, 9, BOS, EOS)  # type: ignore[misc]  # keywords after the mask


def test_decoding_uses_the_cache_when_the_model_has_one_and_works_without():
    """use_cache=None: incremental with the course's decoder, the whole prefix with PyTorch's; the same tokens."""
    from course_utils import beam_search

    ours = small()
    theirs = TorchTransformer.from_course(ours)
    src = torch.randint(3, 20, (3, 6))
    mask = padding_mask(src, PAD)
    kw = dict(beam_size=3, max_len=8, bos_id=BOS, eos_id=EOS, pad_id=PAD)
    assert torch.equal(beam_search(ours, src, mask, **kw), beam_search(theirs, src, mask, **kw))
    with pytest.raises(ValueError, match="course's Decoder"):
        beam_search(theirs, src, mask, **kw, use_cache=True)


def test_a_cache_refuses_the_other_kind_of_use():
    with pytest.raises(ValueError, match=r"growing .*static=True"):
        KVCache(static=True).extend(torch.zeros(1, 1, 1, 2), torch.zeros(1, 1, 1, 2))
    with pytest.raises(ValueError, match=r"static .*static=False"):
        KVCache().lookup(torch.zeros(1, 1, 2))


def test_an_attention_variant_that_ignores_its_cache_is_refused_not_decoded_wrongly():
    class NoCache(MultiHeadAttention):  # a bug-lab style variant: its forward drops cache= and is_causal=
        def forward(self, query, key, value, mask=None, **kwargs):
            return super().forward(query, key, value, mask)

    from course_utils import beam_search

    model = small()
    for layer in model.decoder.layers:
        layer.self_attn = NoCache(32, 4)
    src = torch.randint(3, 20, (2, 5))
    kw = dict(max_len=6, bos_id=BOS, eos_id=EOS, pad_id=PAD)
    with pytest.raises(ValueError, match=r"ignored its cache.*use_cache=False"):
        beam_search(model, src, None, beam_size=2, **kw)
    greedy_decode(model, src, None, **kw)  # greedy decoding feeds the prefix back by default: no cache to ignore
