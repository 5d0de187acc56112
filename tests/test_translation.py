import itertools

import pytest
import torch
import torch.nn.functional as F

from course_utils import Transformer, causal_mask, greedy_decode, padding_mask
from course_utils.training import beam_search, bleu, length_penalty, pad_batch, translation_batches

BOS, EOS, PAD = 1, 2, 0


def tiny_model(vocab: int = 5, seed: int = 0, sharpness: float = 40.0) -> Transformer:
    torch.manual_seed(seed)
    model = Transformer(vocab, vocab, d_model=16, n_heads=2, n_layers=1, d_ff=32, dropout=0.0).eval()
    with torch.no_grad():  # sharper output distributions than the near-uniform start, so beams disagree
        model.generator.weight.mul_(sharpness)
    return model


def exhaustive(model: Transformer, src: torch.Tensor, max_len: int, alpha: float) -> list[int]:
    """Score every output of at most max_len - 1 tokens (ending at the first <eos>) and return the best."""
    vocab = model.tgt_vocab_size
    memory = model.encode(src, None)
    best, best_score = [], float("-inf")
    for n in range(1, max_len):
        for tokens in itertools.product(range(vocab), repeat=n):
            if EOS in tokens[:-1] or (n < max_len - 1 and tokens[-1] != EOS):
                continue  # <eos> ends an output; only outputs cut at max_len may lack it
            ys = torch.tensor([[BOS, *tokens]])
            log_probs = F.log_softmax(model.decode(ys[:, :-1], memory, None, causal_mask(n)), dim=-1)[0]
            score = float(log_probs.gather(1, ys[0, 1:, None]).sum()) / float(length_penalty(torch.tensor(n), alpha))
            if score > best_score:
                best, best_score = [BOS, *tokens], score
    return best


def exhaustive_case(seed: int, alpha: float) -> tuple[Transformer, torch.Tensor, list[int]]:
    """A tiny model (sharpness 10: greedy decoding often misses the best output), a source, the best output."""
    model = tiny_model(seed=seed, sharpness=10.0)
    src = torch.randint(3, 5, (1, 3), generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        return model, src, exhaustive(model, src, 4, alpha)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("alpha", [0.0, 0.6, 2.0])
def test_wide_beam_search_equals_exhaustive_search(seed: int, alpha: float) -> None:
    model, src, expected = exhaustive_case(seed, alpha)
    with torch.no_grad():
        found = beam_search(
            model, src, None, beam_size=5**3, max_len=4, bos_id=BOS, eos_id=EOS, pad_id=PAD, alpha=alpha
        )[0].tolist()
    assert found[: len(expected)] == expected
    assert all(t == PAD for t in found[len(expected) :])


def test_greedy_decoding_misses_the_best_output_in_some_of_those_cases() -> None:
    """Else the test above could not tell beam search from greedy decoding."""
    misses = 0
    for seed, alpha in itertools.product(range(8), [0.0, 0.6, 2.0]):
        model, src, expected = exhaustive_case(seed, alpha)
        greedy = beam_search(model, src, None, beam_size=1, max_len=4, bos_id=BOS, eos_id=EOS, pad_id=PAD, alpha=alpha)[
            0
        ].tolist()
        misses += greedy[: len(expected)] != expected or any(t != PAD for t in greedy[len(expected) :])
    assert misses >= 6


def test_beam_of_one_is_greedy_decoding() -> None:
    model = tiny_model(vocab=12, seed=1)
    src = torch.randint(3, 12, (6, 7), generator=torch.Generator().manual_seed(0))
    src[3:, 5:] = PAD
    mask = padding_mask(src, PAD)
    greedy = greedy_decode(model, src, mask, max_len=10, bos_id=BOS, eos_id=EOS, pad_id=PAD)
    beam = beam_search(model, src, mask, beam_size=1, max_len=10, bos_id=BOS, eos_id=EOS, pad_id=PAD)
    assert torch.equal(beam[:, : greedy.size(1)], greedy)


def test_batched_beam_search_equals_one_sentence_at_a_time() -> None:
    model = tiny_model(vocab=12, seed=2)
    src = torch.randint(3, 12, (5, 6), generator=torch.Generator().manual_seed(1))
    src[2:, 4:] = PAD
    batched = beam_search(
        model, src, padding_mask(src, PAD), beam_size=3, max_len=9, bos_id=BOS, eos_id=EOS, pad_id=PAD
    )
    for i in range(5):
        row = src[i : i + 1, : int((src[i] != PAD).sum())]
        alone = beam_search(
            model, row, padding_mask(row, PAD), beam_size=3, max_len=9, bos_id=BOS, eos_id=EOS, pad_id=PAD
        )[0]
        n = alone.size(0)
        assert torch.equal(batched[i, :n], alone) and bool((batched[i, n:] == PAD).all())


def test_beam_search_rejects_bad_sizes() -> None:
    with pytest.raises(ValueError, match="beam_size"):
        beam_search(
            tiny_model(),
            torch.ones(1, 2, dtype=torch.long),
            None,
            beam_size=0,
            max_len=5,
            bos_id=BOS,
            eos_id=EOS,
            pad_id=PAD,
        )


def test_length_penalty_is_gnmts() -> None:
    assert float(length_penalty(torch.tensor(1), 0.6)) == pytest.approx(1.0)
    assert float(length_penalty(torch.tensor(7), 1.0)) == pytest.approx(2.0)
    assert float(length_penalty(torch.tensor(30), 0.0)) == 1.0


def test_translation_batches_group_similar_lengths_and_cover_an_epoch() -> None:
    examples = [([5] * (1 + i % 9), [BOS, *[6] * (1 + i % 7), EOS]) for i in range(200)]
    batches = translation_batches(examples, batch_size=10, pad_id=PAD, seed=0, pool=20)
    seen = 0
    for _ in range(20):
        src, tgt = next(batches)
        assert src.shape[0] == tgt.shape[0] == 10
        lengths = (src != PAD).sum(1)
        assert int(lengths.max() - lengths.min()) <= 1  # sorted by length before cutting batches
        seen += int((tgt == EOS).sum())
    assert seen == 200


def test_pad_batch() -> None:
    assert pad_batch([[1, 2, 3], [4]], PAD).tolist() == [[1, 2, 3], [4, 0, 0]]


def test_bleu_is_sacrebleus_with_its_signature() -> None:
    score, signature = bleu(["A dog runs on the grass."], ["A dog runs on the grass."])
    assert score == pytest.approx(100.0)
    assert "case:mixed" in signature and "tok:13a" in signature
    lower, _ = bleu(["a dog runs on the grass."], ["A dog runs on the grass."])
    assert lower < 100.0  # case-sensitive
    with pytest.raises(TypeError, match="a list of sentences"):
        bleu("A dog runs.", "A dog runs.")  # would score 17 one-character sentences
    with pytest.raises(ValueError, match="got 1 hypotheses for 2 references"):
        bleu(["A dog runs."], ["A dog runs.", "A cat sleeps."])
    with pytest.raises(ValueError, match="none to score"):
        bleu([], [])
    with pytest.raises(ValueError, match="at least one row"):
        pad_batch([], PAD)
    assert pad_batch(torch.tensor([[1, 2], [3, 4]]), PAD).tolist() == [[1, 2], [3, 4]]  # a tensor of rows too


@pytest.mark.parametrize("beam_size", [1, 3])
def test_beam_search_finds_the_same_hypotheses_with_and_without_the_cache(beam_size: int) -> None:
    model = tiny_model(vocab=12, seed=2)
    src = torch.randint(3, 12, (5, 8), generator=torch.Generator().manual_seed(1))
    src[2:, 6:] = PAD
    mask = padding_mask(src, PAD)
    with torch.no_grad():
        cached = beam_search(
            model, src, mask, beam_size=beam_size, max_len=12, bos_id=BOS, eos_id=EOS, pad_id=PAD, use_cache=True
        )
        full = beam_search(
            model, src, mask, beam_size=beam_size, max_len=12, bos_id=BOS, eos_id=EOS, pad_id=PAD, use_cache=False
        )
    assert torch.equal(cached, full)


def test_the_paired_bootstrap_scores_as_corpus_bleu_and_brackets_the_difference() -> None:
    from course_utils import bleu_difference

    references = [f"a dog number {i} runs on the green grass" for i in range(60)]
    weak = [f"a dog {i} runs on grass" for i in range(60)]
    strong = [r if i % 3 else f"a dog number {i} runs on grass" for i, r in enumerate(references)]
    gain = bleu_difference(weak, strong, references, samples=300)
    assert gain.bleu_a == pytest.approx(bleu(weak, references)[0]) and gain.bleu_b == pytest.approx(
        bleu(strong, references)[0]
    )
    assert 0 < gain.low <= gain.difference <= gain.high
    same = bleu_difference(weak, weak, references, samples=50)
    assert same.difference == same.low == same.high == 0
    assert bleu_difference(weak, strong, references, samples=300).low == gain.low  # seeded: the same draws
    with pytest.raises(ValueError, match="as many translations"):
        bleu_difference(weak, strong[:-1], references)
