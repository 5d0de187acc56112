"""Chapter 08's checkers accept the reference, name each classic mistake, and report an unwritten stub."""

import itertools
from collections import Counter

import pytest
import torch
from helpers import todo, verdict

from course_utils.checks import check_beam_step, check_bpe_segment, check_ngram_matches
from course_utils.data.bpe import merge_pair

# --- one step of beam search -----------------------------------------------------------------------------------


def beam_step(*, add_scores=True, offset=True, swap=False, flat_token=False, ascending=False):
    """One beam-search step with one switch per classic mistake."""

    def step(scores, log_probs):
        B, K = scores.shape
        V = log_probs.size(-1)
        candidates = (scores.reshape(B * K, 1) + log_probs if add_scores else log_probs).view(B, K * V)
        new_scores, index = candidates.topk(K, dim=-1)
        if ascending:
            new_scores, index = new_scores.flip(-1), index.flip(-1)
        beam, token = index // V, index % V
        if swap:
            beam, token = token, beam
        parent = (torch.arange(B)[:, None] * K if offset else 0) + beam
        return new_scores, parent.view(-1), (index if flat_token else token).view(-1)

    return step


def test_beam_step_reference_passes(capsys):
    ok, out = verdict(check_beam_step, beam_step(), capsys)
    assert ok and out.startswith("✅")


def test_beam_step_with_a_loop_over_sentences_passes(capsys):
    def step(scores, log_probs):
        B, K = scores.shape
        V = log_probs.size(-1)
        rows = [(scores[b][:, None] + log_probs[b * K : (b + 1) * K]).flatten().topk(K) for b in range(B)]
        new_scores = torch.stack([r.values for r in rows])
        parent = torch.cat([b * K + r.indices // V for b, r in enumerate(rows)])
        return new_scores, parent, torch.cat([r.indices % V for r in rows])

    ok, out = verdict(check_beam_step, step, capsys)
    assert ok, out


@pytest.mark.parametrize(
    ("mistake", "words"),
    [
        ({"add_scores": False}, "log-probability alone"),
        ({"offset": False}, "add b*K"),
        ({"swap": True}, "swapped"),
        ({"flat_token": True}, "index % V"),
        ({"ascending": True}, "best first"),
    ],
)
def test_beam_step_mistakes_are_named(mistake, words, capsys):
    ok, out = verdict(check_beam_step, beam_step(**mistake), capsys)
    assert not ok and words in out, out


def test_beam_step_with_wrong_shapes_says_which(capsys):
    ok, out = verdict(check_beam_step, lambda s, lp: (s, lp.argmax(-1), lp.argmax(-1)[:1]), capsys)
    assert not ok and "token should have shape" in out


# --- byte-pair segmentation ------------------------------------------------------------------------------------


def segment_in_order(piece, merges):
    symbols = list(piece)
    for pair in merges:
        symbols = merge_pair(symbols, pair)
    return symbols


def segment_by_rank(piece, merges):
    """The other correct way: repeatedly apply the earliest-learned merge present."""
    rank = {pair: i for i, pair in enumerate(merges)}
    symbols = list(piece)
    while True:
        present = [p for p in itertools.pairwise(symbols) if p in rank]
        if not present:
            return symbols
        symbols = merge_pair(symbols, min(present, key=rank.get))


def by_string_replace(piece, merges):
    text = " ".join(piece)
    for a, b in merges:
        text = text.replace(f"{a} {b}", a + b)
    return text.split(" ")


def first_occurrence_only(piece, merges):
    symbols = list(piece)
    for pair in merges:
        for i in range(len(symbols) - 1):
            if (symbols[i], symbols[i + 1]) == pair:
                symbols[i : i + 2] = [pair[0] + pair[1]]
                break
    return symbols


def latest_first(piece, merges):
    symbols = list(piece)
    for pair in reversed(merges):
        symbols = merge_pair(symbols, pair)
    return symbols


@pytest.mark.parametrize("fn", [segment_in_order, segment_by_rank])
def test_bpe_segment_reference_passes(fn, capsys):
    ok, out = verdict(check_bpe_segment, fn, capsys)
    assert ok and out.startswith("✅"), out


@pytest.mark.parametrize(
    ("fn", "words"),
    [
        (by_string_replace, "inside longer symbols"),
        (first_occurrence_only, "first occurrence only"),
        (latest_first, "latest first"),
        (lambda piece, merges: list(piece), "expected"),
        (lambda piece, merges: [piece[1:]], "join back"),
        (lambda piece, merges: "".join(piece), "list of strings"),
    ],
)
def test_bpe_segment_mistakes_are_named(fn, words, capsys):
    ok, out = verdict(check_bpe_segment, fn, capsys)
    assert not ok and words in out, out


# --- BLEU's clipped n-gram matches -----------------------------------------------------------------------------


def ngrams(tokens, n):
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def ngram_matches(hyp, ref, n):
    return sum((ngrams(hyp, n) & ngrams(ref, n)).values()), max(len(hyp) - n + 1, 0)


def test_ngram_matches_reference_passes(capsys):
    ok, out = verdict(check_ngram_matches, ngram_matches, capsys)
    assert ok and "sacreBLEU" in out, out


@pytest.mark.parametrize(
    ("fn", "words"),
    [
        (lambda h, r, n: (sum(c for g, c in ngrams(h, n).items() if g in ngrams(r, n)), len(h) - n + 1), "not clipped"),
        (lambda h, r, n: (ngram_matches(h, r, n)[0], max(len(r) - n + 1, 0)), "reference's n-grams"),
        (lambda h, r, n: (ngram_matches(h, r, n)[0], len(h)), "len(hypothesis) - n + 1"),
        (lambda h, r, n: ngram_matches(h, r, n)[0], "pair of numbers"),
    ],
)
def test_ngram_matches_mistakes_are_named(fn, words, capsys):
    ok, out = verdict(check_ngram_matches, fn, capsys)
    assert not ok and words in out, out


@pytest.mark.parametrize("check", [check_beam_step, check_bpe_segment, check_ngram_matches])
def test_an_unwritten_stub_is_not_attempted(check, capsys):
    ok, out = verdict(check, todo, capsys)
    assert not ok and "not written yet" in out
