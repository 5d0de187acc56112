"""Checkers for translation (chapter 08): one step of beam search, byte-pair segmentation, BLEU's n-gram counts."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from ._core import NotYet, Verdict, call, name_mistake, same, verdict

__all__ = ["check_beam_step", "check_bpe_segment", "check_ngram_matches"]


# --- one step of beam search ------------------------------------------------------------------------------------


def _beam_step(scores: Tensor, log_probs: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The reference: every hypothesis extended by every token, the best K of each sentence kept, best first."""
    B, K = scores.shape
    V = log_probs.size(-1)
    candidates = (scores.reshape(B * K, 1) + log_probs).view(B, K * V)  # (B, K*V)
    new_scores, index = candidates.topk(K, dim=-1)  # (B, K)
    parent = (torch.arange(B)[:, None] * K + index // V).view(-1)  # (B*K,)
    return new_scores, parent, (index % V).view(-1)


def _unpack(got: object, B: int, K: int) -> tuple[Tensor, Tensor, Tensor]:
    if not (isinstance(got, tuple | list) and len(got) == 3):
        raise NotYet("return three tensors: (new_scores (B, K), parent (B*K,), token (B*K,))")
    new_scores, parent, token = got
    for name, x, shape in (
        ("new_scores", new_scores, (B, K)),
        ("parent", parent, (B * K,)),
        ("token", token, (B * K,)),
    ):
        if not isinstance(x, Tensor) or tuple(x.shape) != shape:
            got_shape = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
            raise NotYet(f"{name} should have shape {shape}; got {got_shape}")
    return new_scores, parent, token


def check_beam_step(fn: Callable[..., Any]) -> Verdict:
    """``fn(scores (B, K), log_probs (B*K, V))`` keeps, for each sentence, the K best extensions of its K
    hypotheses: ``(new_scores (B, K), parent (B*K,), token (B*K,))``, best first, where ``parent`` is the row of
    ``log_probs`` (the hypothesis) that each new one extends and ``token`` the token it adds."""

    def run() -> str:
        g = torch.Generator().manual_seed(0)
        B, K, V = 3, 4, 7
        cases = []
        first = torch.full((B, K), float("-inf"))
        first[:, 0] = 0.0  # the first step: one live hypothesis per sentence, the K - 1 others -inf
        cases.append(("at the first step (scores[:, 1:] = -inf)", first))
        cases.append(("later (K live hypotheses)", -torch.rand(B, K, generator=g).mul(5).sort(-1, descending=True)[0]))
        for when, scores in cases:
            log_probs = torch.randn(B * K, V, generator=g).log_softmax(-1)  # (B*K, V)
            try:
                result = call(fn, scores.clone(), log_probs.clone())
            except NotYet as e:
                if "must match the size of tensor" in str(e):  # scores (B, K) added to log_probs (B*K, V) as they are
                    raise NotYet(
                        f"{e}. scores is (B, K) and log_probs (B*K, V): they do not broadcast; give each row "
                        "of log_probs its hypothesis's score with scores.reshape(B * K, 1) + log_probs"
                    ) from None
                raise
            new_scores, parent, token = _unpack(result, B, K)
            expected_scores, expected_parent, expected_token = _beam_step(scores, log_probs)
            by_token_alone = log_probs.view(B, K * V).topk(K, dim=-1).values
            name_mistake(new_scores, expected_scores, [(by_token_alone, "the hypotheses are ranked by the new "
                         "token's log-probability alone: add each hypothesis's score (scores[b, k] + log_probs[b*K + k]), "
                         "since a hypothesis is scored by the sum of its tokens' log-probabilities")], when)  # fmt: skip
            if isinstance(new_scores, Tensor) and torch.allclose(new_scores.sort(-1, descending=True)[0], expected_scores) \
                    and not torch.allclose(new_scores, expected_scores):  # fmt: skip
                raise NotYet(f"{when}: the right scores in another order: put each sentence's best first "
                             "(topk sorts them so)")  # fmt: skip
            same(new_scores, expected_scores, f"{when}: new_scores")
            if parent.is_floating_point() or token.is_floating_point():
                raise NotYet("parent and token are indices: return integer tensors (e.g. with // and %)")
            index = (expected_parent % K) * V + expected_token  # (B*K,): the position in each sentence's K*V row
            name_mistake(parent, expected_parent, [
                (expected_parent % K, "parent must index the rows of log_probs (B*K of them): sentence b's "
                 "hypothesis k is row b*K + k; add b*K to index // V"),
                *((offset + expected_token, "parent and token are swapped: index // V is the hypothesis, index % V "
                   "the token") for offset in (torch.arange(B).repeat_interleave(K) * K, 0)),
            ], when)  # fmt: skip
            same(parent, expected_parent, f"{when}: parent")
            name_mistake(token, expected_token, [(index, "token should be the vocabulary id, index % V, not the "
                                                  "position index among the K*V candidates")], when)  # fmt: skip
            same(token, expected_token, f"{when}: token")
        return "one step of beam search is right: the best K extensions of each sentence, with their parents."

    return verdict(run)


# --- byte-pair segmentation --------------------------------------------------------------------------------------

_MERGES = [("a", "n"), ("b", "an"), ("an", "a"), ("▁", "b"), ("l", "a"), ("a", "a"), ("▁b", "an"), ("n", "a")]
_PIECES = ["▁banana", "banana", "▁bandana", "aaaa", "alana", "naan", "▁a", "x", "lana"]


def _segment(piece: str, merges: Sequence[tuple[str, str]]) -> list[str]:
    from ..data.bpe import BPETokenizer

    return BPETokenizer(sorted(set("".join(_PIECES) + "".join(a + b for a, b in merges))), merges).segment(piece)


def _by_string_replace(piece: str, merges: Sequence[tuple[str, str]]) -> list[str]:
    """The classic shortcut: merges replaced in the space-joined string, which matches across symbol boundaries."""
    text = " ".join(piece)
    for a, b in merges:
        text = text.replace(f"{a} {b}", a + b)
    return text.split(" ")


def _first_occurrence_only(piece: str, merges: Sequence[tuple[str, str]]) -> list[str]:
    symbols = list(piece)
    for pair in merges:
        for i in range(len(symbols) - 1):
            if (symbols[i], symbols[i + 1]) == pair:
                symbols[i : i + 2] = [pair[0] + pair[1]]
                break
    return symbols


def _longest_match(piece: str, merges: Sequence[tuple[str, str]]) -> list[str]:
    """WordPiece's rule: the longest known symbol from the left, again and again."""
    vocab = set(piece) | {a + b for a, b in merges}
    out, i = [], 0
    while i < len(piece):
        j = max(j for j in range(i + 1, len(piece) + 1) if piece[i:j] in vocab or j == i + 1)
        out.append(piece[i:j])
        i = j
    return out


def _reverse_order(piece: str, merges: Sequence[tuple[str, str]]) -> list[str]:
    from ..data.bpe import merge_pair

    symbols = list(piece)
    for _ in merges:  # as many passes as merges, so that late merges can build on early ones
        for pair in reversed(merges):
            symbols = merge_pair(symbols, pair)
    return symbols


def check_bpe_segment(fn: Callable[..., Any]) -> Verdict:
    """``fn(piece, merges)`` splits one piece (e.g. ``"▁banana"``) into symbols with ``merges``, a list of pairs in
    the order they were learned: start from its characters and apply each merge, in that order, to every
    occurrence; the answer is a list of strings, e.g. ``['▁ban', 'ana']``."""

    def run() -> str:
        mistakes = [
            (
                _by_string_replace,
                "a merge matched inside longer symbols: in the space-joined string '▁ ban ana', "
                "replacing '▁ b' by '▁b' also hits the start of 'ban'; merge whole symbols (as merge_pair does)",
            ),
            (
                _first_occurrence_only,
                "each merge is applied to its first occurrence only: apply it to every occurrence, left to right",
            ),
            (
                _longest_match,
                "this takes the longest known symbol from the left (WordPiece's rule); BPE replays "
                "its merges in the order they were learned",
            ),
            (_reverse_order, "the merges are applied latest first: the order they were learned is the priority"),
        ]
        for piece in _PIECES:
            got = call(fn, piece, list(_MERGES))
            expected = _segment(piece, _MERGES)
            if not (isinstance(got, list) and all(isinstance(s, str) for s in got)):
                raise NotYet(f"return a list of strings (the symbols); got {type(got).__name__} for {piece!r}")
            if "".join(got) != piece:
                raise NotYet(f"the symbols of {piece!r} should join back to it; got {got}")
            for wrong, message in mistakes:
                if got == wrong(piece, _MERGES) != expected:
                    raise NotYet(f"{piece!r} -> {got}, expected {expected}: {message}")
            if got != expected:
                raise NotYet(f"{piece!r} -> {got}; expected {expected} (merges, in order: {_MERGES})")
        return f"segmentation is right on {len(_PIECES)} pieces, equal to BPETokenizer.segment."

    return verdict(run)


# --- BLEU's clipped n-gram matches --------------------------------------------------------------------------------

_SENTENCES = [
    ("the the the the the the the", "the cat is on the mat"),  # the classic example of clipping
    ("a man in a blue shirt is riding a bike .", "a man in a blue shirt rides a bike down the street ."),
    ("two dogs play", "two dogs are playing in the snow ."),
    ("a a a b a a", "a a b a"),
    ("dogs", "two dogs play ."),  # shorter than n for n > 1: no n-grams, never a negative count
]


def _ngrams(tokens: Sequence[str], n: int) -> Counter[tuple[str, ...]]:
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def check_ngram_matches(fn: Callable[..., Any]) -> Verdict:
    """``fn(hypothesis, reference, n)`` takes two token lists and returns ``(matches, total)``: BLEU's clipped
    matches (each hypothesis n-gram counts at most as often as it occurs in the reference) and the number of
    n-grams in the hypothesis. The checker compares with sacreBLEU's own counts."""

    def run() -> str:
        from sacrebleu.metrics.bleu import BLEU

        metric = BLEU(tokenize="none", effective_order=True)
        for hyp, ref in _SENTENCES:
            h, r = hyp.split(), ref.split()
            stats = metric.sentence_score(hyp, [ref])  # sacreBLEU's counts for n = 1 ... 4
            for n in range(1, 5):
                expected = (stats.counts[n - 1], stats.totals[n - 1])
                got = call(fn, list(h), list(r), n)
                if not (isinstance(got, tuple | list) and len(got) == 2):
                    raise NotYet(f"return a pair of numbers (matches, total); got {got!r}")
                got = (int(got[0]), int(got[1]))
                hc, rc = _ngrams(h, n), _ngrams(r, n)
                unclipped = sum(c for g, c in hc.items() if g in rc)
                where = f"n={n}, hypothesis {hyp!r}, reference {ref!r}: got {got}, expected {expected}"
                if got[0] == unclipped != expected[0]:
                    raise NotYet(f"{where}. The matches are not clipped: an n-gram counts at most as often as the "
                                 "reference has it (min of the two counts), else 'the the the ...' scores perfectly")  # fmt: skip
                if got[1] == max(len(r) - n + 1, 0) != expected[1]:
                    raise NotYet(f"{where}. total counts the reference's n-grams: BLEU is a precision, over the "
                                 "hypothesis's n-grams (the brevity penalty handles length)")  # fmt: skip
                if got[0] == sum((hc & rc).values()) and got[1] != expected[1]:
                    raise NotYet(f"{where}. The matches are right; total should be the number of n-grams in the "
                                 "hypothesis, len(hypothesis) - n + 1, and never below 0 (a hypothesis shorter than n has none)")  # fmt: skip
                if got != expected:
                    raise NotYet(where)
        return "clipped n-gram matches are right, equal to sacreBLEU's counts for n = 1 ... 4."

    return verdict(run)
