"""The checkers of ``course_utils.checks.translation``, translation (chapter 08), against students' answers: right
answers written in other styles pass, each classic mistake fails with a message that names it, and an unwritten stub
is reported as not attempted.
"""

import functools
import heapq
import itertools
import re
from collections import Counter, defaultdict

import numpy as np
import pytest
import torch
from helpers import judged, todo, verdict

from course_utils.checks import (
    check_beam_step,
    check_bpe_segment,
    check_ngram_matches,
)
from course_utils.data.bpe import merge_pair

# --- 08: one step of beam search -----------------------------------------------------------------------------------


def beam_solution(scores, log_probs):  # the notebook's solution
    B, K = scores.shape
    V = log_probs.size(-1)
    candidates = (scores.reshape(B * K, 1) + log_probs).view(B, K * V)  # (B, K*V): every hypothesis x every token
    new_scores, index = candidates.topk(K, dim=-1)  # (B, K) each, best first
    parent = (torch.arange(B, device=scores.device)[:, None] * K + index // V).view(-1)  # (B*K,): rows of log_probs
    return new_scores, parent, (index % V).view(-1)


def beam_3d_sort(scores, log_probs):
    """(B, K, V) with broadcasting, sort instead of topk, a list instead of a tuple, the device from the input."""
    B, K = scores.shape
    V = log_probs.shape[1]
    candidates = (scores[:, :, None] + log_probs.view(B, K, V)).flatten(1)
    ordered, index = candidates.sort(dim=1, descending=True)
    index = index[:, :K]
    parent = torch.arange(B, device=scores.device).repeat_interleave(K) * K + index.flatten() // V
    return [ordered[:, :K], parent, torch.remainder(index, V).flatten()]


def beam_probabilities_then_log(scores, log_probs):
    """Probabilities multiplied, then the log taken back: the same ranking and the same log-probabilities."""
    B, K = scores.shape
    V = log_probs.size(-1)
    probs = (scores.double().exp().reshape(B * K, 1) * log_probs.double().exp()).view(B, K * V)
    best, index = probs.topk(K, dim=1)
    return (
        best.log().float(),
        (torch.arange(B, device=scores.device)[:, None] * K + index // V).flatten(),
        (index % V).flatten(),
    )


def beam_python_heap(scores, log_probs):
    """Per sentence, heapq.nlargest over (score, hypothesis, token) triples."""
    B, K = scores.shape
    V = log_probs.size(-1)
    new_scores, parent, token = [], [], []
    for b in range(B):
        triples = [(float(scores[b, k] + log_probs[b * K + k, v]), k, v) for k in range(K) for v in range(V)]
        best = heapq.nlargest(K, triples, key=lambda t: t[0])
        new_scores.append(torch.stack([scores[b, k] + log_probs[b * K + k, v] for _, k, v in best]))
        parent += [b * K + k for _, k, _ in best]
        token += [v for _, _, v in best]
    return torch.stack(new_scores), torch.tensor(parent), torch.tensor(token)


def beam_float64(scores, log_probs):
    """Computed in float64: the scores come back in float64."""
    B, K = scores.shape
    V = log_probs.size(-1)
    candidates = (scores.double().reshape(B * K, 1) + log_probs.double()).view(B, K * V)
    new_scores, index = candidates.topk(K, dim=-1)
    return new_scores, (torch.arange(B, device=scores.device)[:, None] * K + index // V).view(-1), (index % V).view(-1)


def beam_numpy(scores, log_probs):
    """Through NumPy: argsort over each sentence's K*V candidates."""
    B, K = scores.shape
    V = log_probs.shape[-1]
    candidates = (scores.numpy().reshape(B * K, 1) + log_probs.numpy()).reshape(B, K * V)
    index = np.argsort(-candidates, axis=1, kind="stable")[:, :K]
    new_scores = np.take_along_axis(candidates, index, axis=1)
    parent = np.arange(B)[:, None] * K + index // V
    return torch.from_numpy(new_scores), torch.from_numpy(parent).flatten(), torch.from_numpy(index % V).flatten()


def beam_step_with(mistake):
    def step(scores, log_probs):
        B, K = scores.shape
        V = log_probs.size(-1)
        if mistake == "multiplied-log-probs":
            candidates = scores.reshape(B * K, 1) * log_probs
        elif mistake == "repeat-not-interleave":
            candidates = scores.repeat(1, V) + log_probs.view(B, K * V)
        elif mistake == "pad-banned":
            candidates = scores.reshape(B * K, 1) + log_probs.index_fill(1, torch.tensor([0]), float("-inf"))
        elif mistake == "probabilities":
            candidates = scores.exp().reshape(B * K, 1) * log_probs.exp()
        elif mistake == "token-alone":
            candidates = log_probs
        else:
            candidates = scores.reshape(B * K, 1) + log_probs
        if mistake in ("own-best-token", "own-best-token-unsorted"):  # each hypothesis keeps its best token
            best, token = candidates.max(-1)  # (B*K,)
            new_scores, order = best.view(B, K), torch.arange(K).expand(B, K)
            if mistake == "own-best-token":
                new_scores, order = new_scores.sort(-1, descending=True)
            parent = (torch.arange(B)[:, None] * K + order).view(-1)
            return new_scores, parent, token[parent]
        if mistake == "per-hypothesis":
            new_scores, index = candidates.topk(K, dim=-1)
            return new_scores, index.flatten() // V, index.flatten() % V
        k = 4 if mistake == "hard-coded-K" else K
        new_scores, index = candidates.view(B, -1).topk(k, dim=-1)
        if mistake == "ascending":
            new_scores, index = new_scores.flip(-1), index.flip(-1)
        offset = 0 if mistake == "no-offset" else torch.arange(B, device=scores.device)[:, None] * K
        if mistake == "arange-without-device":
            offset = torch.arange(B)[:, None] * K
        parent, token = offset + index // V, index % V
        if mistake == "swapped":
            parent, token = offset + index % V, index // V
        if mistake == "flat-token":
            token = index
        if mistake == "meta":
            new_scores = new_scores.to("meta")
        if mistake == "in-place":
            scores += 0.5
        return new_scores, parent.view(-1), token.view(-1)

    return step


@pytest.mark.parametrize(
    "fn",
    [beam_solution, beam_3d_sort, beam_probabilities_then_log, beam_python_heap, beam_float64, beam_numpy],
    ids=["notebook", "3d-sort-list", "probabilities-then-log", "python-heap", "float64", "numpy"],
)
def test_beam_step_right_answers_pass(fn, capsys):
    judged(check_beam_step, fn, None, capsys)


@pytest.mark.parametrize(
    ("mistake", "named"),
    [
        ("multiplied-log-probs", "log-probabilities are multiplied"),
        ("repeat-not-interleave", "repeat_interleave(V, dim=1)"),
        ("pad-banned", "<pad> (id 0) is banned"),
        ("probabilities", "new_scores are probabilities"),
        ("token-alone", "log-probability alone"),
        ("per-hypothesis", "the top K of each hypothesis's own row"),
        ("own-best-token", "extended by its own best token only"),
        ("own-best-token-unsorted", "extended by its own best token only"),
        ("hard-coded-K", "not with B = 2, K = 3, V = 11, seed = 1"),
        ("ascending", "best first"),
        ("no-offset", "add b*K"),
        ("swapped", "swapped"),
        ("flat-token", "index % V"),
        ("meta", "new_scores is on meta"),
        ("in-place", "changed its input scores in place"),
        ("arange-without-device", "A tensor made without device= is made on the CPU"),
    ],
)
def test_beam_step_wrong_answers_fail(mistake, named, capsys):
    judged(check_beam_step, beam_step_with(mistake), named, capsys)


# --- 08: byte-pair segmentation -------------------------------------------------------------------------------------


def bpe_solution(piece, merges):  # the notebook's solution
    rank = {pair: r for r, pair in enumerate(merges)}
    symbols = list(piece)
    while len(symbols) > 1:
        present = [pair for pair in itertools.pairwise(symbols) if pair in rank]
        if not present:
            break
        symbols = merge_pair(
            symbols, min(present, key=lambda pair: rank[pair])
        )  # every occurrence of the earliest merge
    return symbols


def bpe_replay(piece, merges):
    """Every merge in the order learned, each over the whole piece, with a loop of its own."""
    symbols = list(piece)
    for a, b in merges:
        i, out = 0, []
        while i < len(symbols):
            if i < len(symbols) - 1 and symbols[i] == a and symbols[i + 1] == b:
                out.append(a + b)
                i += 2
            else:
                out.append(symbols[i])
                i += 1
        symbols = out
    return symbols


def bpe_rank_first_occurrence_tuple(piece, merges):
    """By rank, merging one occurrence at a time (the next round finds the others), returning a tuple."""
    rank = {tuple(pair): r for r, pair in enumerate(merges)}
    symbols = list(piece)
    while True:
        found = [(rank[(x, y)], i) for i, (x, y) in enumerate(zip(symbols, symbols[1:])) if (x, y) in rank]  # noqa: RUF007
        if not found:
            return tuple(symbols)
        _, i = min(found)
        symbols[i : i + 2] = [symbols[i] + symbols[i + 1]]


def bpe_regex(piece, merges):
    """The space-joined string, each merge a regular expression that matches whole symbols only."""
    text = " ".join(piece)
    for a, b in merges:
        text = re.sub(rf"(?<!\S){re.escape(a)} {re.escape(b)}(?!\S)", a + b, text)
    return text.split(" ")


def bpe_latest_rank(piece, merges):
    rank = {pair: r for r, pair in enumerate(merges)}
    symbols = list(piece)
    while present := [p for p in itertools.pairwise(symbols) if p in rank]:
        symbols = merge_pair(symbols, max(present, key=rank.get))
    return symbols


def bpe_leftmost(piece, merges):
    known = set(merges)
    symbols = list(piece)
    while present := [p for p in itertools.pairwise(symbols) if p in known]:
        symbols = merge_pair(symbols, present[0])
    return symbols


def bpe_right_to_left(piece, merges):
    symbols = list(piece)[::-1]
    for a, b in merges:
        i, out = 0, []
        while i < len(symbols):
            if i < len(symbols) - 1 and symbols[i] == b and symbols[i + 1] == a:
                out.append(a + b)
                i += 2
            else:
                out.append(symbols[i])
                i += 1
        symbols = out
    return symbols[::-1]


def bpe_string_replace(piece, merges):
    text = " ".join(piece)
    for a, b in merges:
        text = text.replace(f"{a} {b}", a + b)
    return text.split(" ")


def bpe_pops_merges(piece, merges):
    symbols = list(piece)
    while merges:
        symbols = merge_pair(symbols, merges.pop(0))
    return symbols


def bpe_hard_coded(piece, merges):
    checker_merges = [
        ("a", "n"),
        ("b", "an"),
        ("an", "a"),
        ("▁", "b"),
        ("l", "a"),
        ("a", "a"),
        ("▁b", "an"),
        ("n", "a"),
    ]
    return bpe_replay(piece, checker_merges)


def bpe_one_merge(piece, merges):
    """Only the earliest merge present, once."""
    rank = {pair: r for r, pair in enumerate(merges)}
    symbols = list(piece)
    present = [p for p in itertools.pairwise(symbols) if p in rank]
    return merge_pair(symbols, min(present, key=rank.get)) if present else symbols


def bpe_joined_pair(piece, merges):
    """Every merge in order, but a pair of neighbours compared by its joined string."""
    symbols = list(piece)
    for a, b in merges:
        i = 0
        while i < len(symbols) - 1:
            if symbols[i] + symbols[i + 1] == a + b:
                symbols[i : i + 2] = [a + b]
            i += 1
    return symbols


def bpe_greedy_longest(piece, merges, from_right=False):
    """The longest symbol that the merges can make, taken greedily from one end."""
    known = {a + b for a, b in merges}
    text, out = piece[::-1] if from_right else piece, []
    while text:
        for length in range(len(text), 0, -1):
            head = text[:length][::-1] if from_right else text[:length]
            if length == 1 or head in known:
                out.append(head)
                text = text[length:]
                break
    return out[::-1] if from_right else out


@pytest.mark.parametrize(
    "fn",
    [bpe_solution, bpe_replay, bpe_rank_first_occurrence_tuple, bpe_regex],
    ids=["notebook", "replay-own-loop", "rank-one-occurrence-tuple", "regex-whole-symbols"],
)
def test_bpe_segment_right_answers_pass(fn, capsys):
    judged(check_bpe_segment, fn, None, capsys)


@pytest.mark.parametrize(
    ("fn", "named"),
    [
        (bpe_latest_rank, "latest first"),
        (bpe_leftmost, "the leftmost pair that is a merge is merged first"),
        (bpe_right_to_left, "merged from the right"),
        (bpe_string_replace, "inside longer symbols"),
        (bpe_pops_merges, "changed its input merges in place"),
        (bpe_hard_coded, "not with merges = [('n', 'a')"),
        (bpe_one_merge, "only one merge is applied"),
        (bpe_joined_pair, "matched by its joined string"),
        (bpe_greedy_longest, "longest known symbol from the left (WordPiece's rule)"),
        (functools.partial(bpe_greedy_longest, from_right=True), "longest known symbol from the right"),
        (lambda piece, merges: "".join(bpe_solution(piece, merges)), "list of strings"),
    ],
    ids=[
        "highest-rank",
        "leftmost-pair",
        "right-to-left",
        "string-replace",
        "mutates-merges",
        "hard-coded-merges",
        "one-merge-only",
        "joined-pair",
        "longest-from-left",
        "longest-from-right",
        "a-string",
    ],
)
def test_bpe_segment_wrong_answers_fail(fn, named, capsys):
    judged(check_bpe_segment, fn, named, capsys)


# --- 08: BLEU's clipped n-gram matches ------------------------------------------------------------------------------


def ngram_solution(hypothesis, reference, n):  # the notebook's solution
    def ngrams(words):
        return Counter(tuple(words[i : i + n]) for i in range(len(words) - n + 1))

    return sum((ngrams(hypothesis) & ngrams(reference)).values()), max(len(hypothesis) - n + 1, 0)


def ngram_dicts(hypothesis, reference, n):
    """Plain dicts and min(), a list as the pair."""
    hyp, ref = defaultdict(int), defaultdict(int)
    for i in range(len(hypothesis) - n + 1):
        hyp[" ".join(hypothesis[i : i + n])] += 1
    for i in range(len(reference) - n + 1):
        ref[" ".join(reference[i : i + n])] += 1
    return [sum(min(c, ref[g]) for g, c in hyp.items()), sum(hyp.values())]


def ngram_zip_tensors(hypothesis, reference, n):
    """n-grams by zip, the counts as 0-d tensors."""
    hyp = Counter(zip(*(hypothesis[i:] for i in range(n))))
    ref = Counter(zip(*(reference[i:] for i in range(n))))
    matches = sum(min(count, ref[gram]) for gram, count in hyp.items())
    return torch.tensor(matches), torch.tensor(hyp.total())


def ngram_used_list(hypothesis, reference, n):
    """Clipping by crossing off: each reference n-gram can be used once."""
    left = [tuple(reference[i : i + n]) for i in range(len(reference) - n + 1)]
    grams = [tuple(hypothesis[i : i + n]) for i in range(len(hypothesis) - n + 1)]
    matches = 0
    for g in grams:
        if g in left:
            left.remove(g)
            matches += 1
    return matches, len(grams)


def ngram_with(mistake):
    def count(hypothesis, reference, n):
        m = 2 if mistake == "hard-coded-n" else n
        stop = 0 if mistake == "off-by-one" else 1

        def grams(words):
            if mistake == "lower-cased":
                words = [w.lower() for w in words]
            key = {"unordered": lambda g: tuple(sorted(g)), "joined": "".join}.get(mistake, tuple)
            return Counter(key(words[i : i + m]) for i in range(len(words) - m + stop))

        h, r = grams(hypothesis), grams(reference)
        matches = {
            "unclipped": sum(c for g, c in h.items() if g in r),
            "distinct": len(set(h) & set(r)),
            "reference-side": sum(c for g, c in r.items() if g in h),
        }.get(mistake, sum((h & r).values()))
        total = {"reference-total": max(len(reference) - n + 1, 0), "negative-total": len(hypothesis) - n + 1}.get(
            mistake, sum(h.values())
        )
        if mistake == "pops":
            hypothesis.pop()
        return matches, total

    return count


@pytest.mark.parametrize(
    "fn",
    [ngram_solution, ngram_dicts, ngram_zip_tensors, ngram_used_list, ngram_with(None)],
    ids=["notebook", "dicts-list", "zip-tensors", "cross-off", "counter-helper"],
)
def test_ngram_matches_right_answers_pass(fn, capsys):
    judged(check_ngram_matches, fn, None, capsys)


@pytest.mark.parametrize(
    ("mistake", "named"),
    [
        ("unclipped", "not clipped"),
        ("distinct", "Each distinct n-gram is counted once"),
        ("reference-side", "count the reference's occurrences"),
        ("reference-total", "total counts the reference's n-grams"),
        ("negative-total", "never below 0"),
        ("hard-coded-n", "These are the counts for n=2"),
        ("off-by-one", "The last n-gram is left out"),
        ("pops", "changed its input"),
        ("unordered", "ignore word order"),
        ("joined", "joined without a separator"),
        ("lower-cased", "lower-cased"),
    ],
)
def test_ngram_matches_wrong_answers_fail(mistake, named, capsys):
    judged(check_ngram_matches, ngram_with(mistake), named, capsys)


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
        parent = (torch.arange(B, device=scores.device)[:, None] * K if offset else 0) + beam
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


def by_rank_without_key(piece, merges):
    """segment_by_rank with min(present) and no key=: the alphabetically first pair."""
    rank = {pair: i for i, pair in enumerate(merges)}
    symbols = list(piece)
    while present := [p for p in itertools.pairwise(symbols) if p in rank]:
        symbols = merge_pair(symbols, min(present))
    return symbols


def pairs_found_once(piece, merges):
    rank = {pair: i for i, pair in enumerate(merges)}
    symbols = list(piece)
    present = sorted((p for p in itertools.pairwise(symbols) if p in rank), key=rank.get)  # before any merge
    for pair in present:
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
        (by_rank_without_key, "min(pairs) without key="),
        (pairs_found_once, "a merge makes new pairs"),
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
