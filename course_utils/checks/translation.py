"""Checkers for translation (chapter 08): one step of beam search, byte-pair segmentation, BLEU's n-gram counts."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from ._core import NotYet, Verdict, call, each_case, name_mistake, on_meta, one_number, same, verdict, wrong_device

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


def _unpack(got: object, B: int, K: int, device: torch.device) -> tuple[Tensor, Tensor, Tensor]:
    if not (isinstance(got, tuple | list) and len(got) == 3):
        raise NotYet("return three tensors: (new_scores (B, K), parent (B*K,), token (B*K,))")
    new_scores, parent, token = got
    if isinstance(new_scores, Tensor) and tuple(new_scores.shape) == (B * K, K):
        raise NotYet(
            f"new_scores has shape {(B * K, K)}: the top K of each hypothesis's own row. The K best of a sentence "
            "are chosen among all its K x V candidates at once: view them as (B, K*V), then topk"
        )
    for name, x, shape in (
        ("new_scores", new_scores, (B, K)),
        ("parent", parent, (B * K,)),
        ("token", token, (B * K,)),
    ):
        if not isinstance(x, Tensor) or tuple(x.shape) != shape:
            got_shape = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
            raise NotYet(f"{name} should have shape {shape}; got {got_shape}")
        if x.device != device:
            raise wrong_device(
                name,
                x.device,
                device,
                how="create new tensors on the inputs' device (torch.arange(B, device=scores.device)) and do not "
                "move the results",
            )
    return new_scores, parent, token


def check_beam_step(fn: Callable[..., Any]) -> Verdict:
    """``fn(scores (B, K), log_probs (B*K, V))`` keeps, for each sentence, the K best extensions of its K
    hypotheses: ``(new_scores (B, K), parent (B*K,), token (B*K,))``, best first, where ``parent`` is the row of
    ``log_probs`` (the hypothesis) that each new one extends and ``token`` the token it adds. It is tested at the
    first step, later, and with finished hypotheses (extended only by ``<pad>``, id 0, at no cost), for two sizes
    (B, K, V)."""

    def one(B: int, K: int, V: int, seed: int) -> str:
        g = torch.Generator().manual_seed(seed)
        cases = []
        first = torch.full((B, K), float("-inf"))
        first[:, 0] = 0.0  # the first step: one live hypothesis per sentence, the K - 1 others -inf
        cases.append(("at the first step (scores[:, 1:] = -inf)", first, None))
        later = -torch.rand(B, K, generator=g).mul(5).sort(-1, descending=True)[0]
        cases.append(("later (K live hypotheses)", later, None))
        cases.append(("with finished hypotheses (log_probs -inf but 0 at <pad>)", later, 1))
        for when, scores, finished in cases:
            log_probs = torch.randn(B * K, V, generator=g).log_softmax(-1)  # (B*K, V)
            if finished is not None:  # hypothesis `finished` of each sentence has written <eos>: only <pad> follows
                rows = torch.arange(B) * K + finished
                log_probs[rows] = float("-inf")
                log_probs[rows, 0] = 0.0
            try:
                result = call(fn, scores.clone(), log_probs.clone())
            except NotYet as e:
                if "must match the size of tensor" in str(e):  # scores (B, K) added to log_probs (B*K, V) as they are
                    raise NotYet(
                        f"{e}. scores is (B, K) and log_probs (B*K, V): they do not broadcast; give each row "
                        "of log_probs its hypothesis's score with scores.reshape(B * K, 1) + log_probs"
                    ) from None
                raise
            new_scores, parent, token = _unpack(result, B, K, scores.device)
            expected_scores, expected_parent, expected_token = _beam_step(scores, log_probs)
            by_token_alone = log_probs.view(B, K * V).topk(K, dim=-1).values
            times = (scores.reshape(B * K, 1) * log_probs).view(B, K * V).topk(K, dim=-1).values
            tiled = (scores.repeat(1, V) + log_probs.view(B, K * V)).topk(K, dim=-1).values
            pad_banned = _beam_step(scores, log_probs.index_fill(1, torch.tensor([0]), float("-inf")))[0]
            own_best = (scores.reshape(B * K, 1) + log_probs).max(-1).values.view(B, K)  # one token per hypothesis
            name_mistake(new_scores, expected_scores, [
                (tiled, "scores.repeat(1, V) lays the scores out as k0 k1 ... k0 k1 ..., but in log_probs.view(B, K*V) "
                 "each hypothesis's V tokens are side by side: repeat each score V times in a row, "
                 "scores.repeat_interleave(V, dim=1), or add scores.reshape(B * K, 1) to log_probs before the view"),
                (pad_banned, "<pad> (id 0) is banned: a finished hypothesis, one that wrote <eos>, is carried on by "
                 "<pad> at no cost (its row of log_probs is 0 at <pad>, -inf elsewhere), so it keeps its place "
                 "among the K; let <pad> compete like any token"),
                *((best, "each hypothesis is extended by its own best token only, so the K new hypotheses "
                   "are the K old ones, one token longer: choose the K best among all K x V candidates of a "
                   "sentence at once (two may extend the same hypothesis), (scores.reshape(B * K, 1) + "
                   "log_probs).view(B, K * V).topk(K)") for best in (own_best.sort(-1, descending=True)[0], own_best)),
                (by_token_alone, "the hypotheses are ranked by the new token's log-probability alone: add each "
                 "hypothesis's score (scores[b, k] + log_probs[b*K + k]), since a hypothesis is scored by the sum of "
                 "its tokens' log-probabilities"),
                (expected_scores.exp(), "new_scores are probabilities (the product of the probabilities): keep "
                 "log-probabilities and add them, scores + log_probs; a product of many probabilities underflows "
                 "to 0 over a long sentence"),
                (times, "the log-probabilities are multiplied: a sentence's probability is a product, so its "
                 "log-probability is a SUM, scores + log_probs"),
            ], when)  # fmt: skip
            if torch.allclose(new_scores.sort(-1, descending=True)[0].double(), expected_scores.double()) \
                    and not torch.allclose(new_scores.double(), expected_scores.double()):  # fmt: skip
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

    def run() -> str:
        message = each_case(one, [dict(B=3, K=4, V=7, seed=0), dict(B=2, K=3, V=11, seed=1)])
        g = torch.Generator().manual_seed(2)
        scores, log_probs = -torch.rand(2, 3, generator=g), torch.randn(6, 5, generator=g).log_softmax(-1)
        got = on_meta(fn, scores, log_probs)
        if got is not None:  # on the GPU: every result on the inputs' device
            _unpack(got, 2, 3, torch.device("meta"))
        return message

    return verdict(run)


# --- byte-pair segmentation --------------------------------------------------------------------------------------

_MERGES = [("a", "n"), ("b", "an"), ("an", "a"), ("▁", "b"), ("l", "a"), ("a", "a"), ("▁b", "an"), ("n", "a")]
# Another vocabulary, learned in another order, so that merges written into the code show.
_OTHER_MERGES = [
    ("n", "a"), ("a", "n"), ("b", "a"), ("ba", "na"), ("▁", "ba"), ("a", "a"), ("na", "na"), ("l", "a"), ("aa", "a"),
]  # fmt: skip
# In "aaa" the occurrences of ("a", "a") overlap: they are merged left to right, aa a. In "▁ananas" two wrong rules,
# the leftmost pair first and WordPiece's longest symbol, give different answers.
_PIECES = ["▁banana", "banana", "▁bandana", "aaaa", "alana", "naan", "▁a", "x", "lana", "aaa", "▁ananas"]


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


def _right_to_left(piece: str, merges: Sequence[tuple[str, str]]) -> list[str]:
    """Every merge, in order, applied to each occurrence from the right: ("a", "a") makes a a a into a aa."""
    symbols = list(piece)
    for pair in merges:
        out: list[str] = []
        i = len(symbols) - 1
        while i >= 0:
            if i >= 1 and (symbols[i - 1], symbols[i]) == pair:
                out.append(symbols[i - 1] + symbols[i])
                i -= 2
            else:
                out.append(symbols[i])
                i -= 1
        symbols = out[::-1]
    return symbols


def _joined_match(piece: str, merges: Sequence[tuple[str, str]]) -> list[str]:
    """Every merge, in order, but a pair of neighbours matched by its joined string: '▁' 'ban' taken for '▁b' 'an'."""
    symbols = list(piece)
    for a, b in merges:
        out: list[str] = []
        i = 0
        while i < len(symbols):
            if i + 1 < len(symbols) and symbols[i] + symbols[i + 1] == a + b:
                out.append(a + b)
                i += 2
            else:
                out.append(symbols[i])
                i += 1
        symbols = out
    return symbols


def _longest_match(piece: str, merges: Sequence[tuple[str, str]], from_right: bool = False) -> list[str]:
    """WordPiece's rule: the longest known symbol from the left (or, here, from the right), again and again."""
    if from_right:
        flipped = [(b[::-1], a[::-1]) for a, b in merges]
        return [symbol[::-1] for symbol in reversed(_longest_match(piece[::-1], flipped))]
    vocab = set(piece) | {a + b for a, b in merges}
    out, i = [], 0
    while i < len(piece):
        j = max(j for j in range(i + 1, len(piece) + 1) if piece[i:j] in vocab or j == i + 1)
        out.append(piece[i:j])
        i = j
    return out


def _reverse_order(piece: str, merges: Sequence[tuple[str, str]], passes: int | None = None) -> list[str]:
    """The merges replayed latest first: once, or as many times as there are merges (so that late merges can build
    on early ones)."""
    from ..data.bpe import merge_pair

    symbols = list(piece)
    for _ in range(len(merges) if passes is None else passes):
        for pair in reversed(merges):
            symbols = merge_pair(symbols, pair)
    return symbols


def _by_rank(piece: str, merges: Sequence[tuple[str, str]], choose: str, passes: int | None = None) -> list[str]:
    """Merging by rank, but choosing the wrong pair: the highest rank (``"latest"``), the leftmost pair that is a
    merge (``"leftmost"``), the alphabetically first (``"alphabetical"``); or the right one (``"earliest"``) but
    stopping after ``passes`` merges."""
    from ..data.bpe import merge_pair

    rank = {pair: r for r, pair in enumerate(merges)}
    symbols, merged = list(piece), 0
    while passes is None or merged < passes:
        present = [pair for pair in itertools.pairwise(symbols) if pair in rank]
        if not present:
            break
        if choose == "leftmost":
            pair = present[0]
        elif choose == "alphabetical":  # min(present) without key=: tuples of strings compare letter by letter
            pair = min(present)
        else:
            pair = (max if choose == "latest" else min)(present, key=rank.__getitem__)
        symbols, merged = merge_pair(symbols, pair), merged + 1
    return symbols


def _pairs_found_once(piece: str, merges: Sequence[tuple[str, str]]) -> list[str]:
    """Merging by rank, but only the pairs present in the piece's characters, found once before any merge."""
    from ..data.bpe import merge_pair

    rank = {pair: r for r, pair in enumerate(merges)}
    symbols = list(piece)
    for pair in sorted({p for p in itertools.pairwise(symbols) if p in rank}, key=rank.__getitem__):
        symbols = merge_pair(symbols, pair)
    return symbols


_LATEST_FIRST = "the merges are applied latest first: the order they were learned is the priority (lowest rank first)"


def check_bpe_segment(fn: Callable[..., Any]) -> Verdict:
    """``fn(piece, merges)`` splits one piece (e.g. ``"▁banana"``) into symbols with ``merges``, a list of pairs in
    the order they were learned: start from its characters and apply each merge, in that order, to every
    occurrence; the answer is a list of strings, e.g. ``['▁ban', 'ana']`` (a tuple will do). It is tested with two
    lists of merges."""
    mistakes: list[tuple[Callable[[str, Sequence[tuple[str, str]]], list[str]], str]] = [
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
            _right_to_left,
            "the occurrences are merged from the right: where they overlap, as ('a', 'a') in 'a a a', merge left to "
            "right, aa a (as merge_pair does)",
        ),
        (
            _longest_match,
            "this takes the longest known symbol from the left (WordPiece's rule); BPE replays "
            "its merges in the order they were learned",
        ),
        (
            lambda piece, merges: _longest_match(piece, merges, from_right=True),
            "this takes the longest known symbol from the right; BPE replays its merges in the order they were learned",
        ),
        (
            _joined_match,
            "a pair of neighbours is matched by its joined string: '▁' 'ban' joins to '▁ban' as '▁b' 'an' does, but "
            "only the pair ('▁b', 'an') is that merge; compare the two symbols, (symbols[i], symbols[i + 1]) == pair",
        ),
        (_reverse_order, _LATEST_FIRST),
        (lambda piece, merges: _reverse_order(piece, merges, passes=1), _LATEST_FIRST),
        (lambda piece, merges: _by_rank(piece, merges, "latest"), _LATEST_FIRST),
        (
            lambda piece, merges: _by_rank(piece, merges, "earliest", passes=1),
            "only one merge is applied, the earliest learned one present: a piece is done only when no pair of "
            "neighbouring symbols is a merge any more; repeat until none is",
        ),
        (
            lambda piece, merges: _by_rank(piece, merges, "alphabetical"),
            "the pair chosen is the alphabetically first (min(pairs) without key= compares the strings): choose by "
            "rank, the pair learned earliest, min(pairs, key=rank.get) with rank = {pair: i for i, pair in "
            "enumerate(merges)}",
        ),
        (
            _pairs_found_once,
            "the pairs are looked for once, in the piece's characters: a merge makes new pairs (('▁', 'b') merged, "
            "('▁b', 'an') appears); look for the pairs present again after each merge",
        ),
        (
            lambda piece, merges: _by_rank(piece, merges, "leftmost"),
            "the leftmost pair that is a merge is merged first; the rank decides: merge the pair learned earliest "
            "(the lowest rank), wherever it is in the piece",
        ),
    ]

    def one(merges: list[tuple[str, str]]) -> str:
        results: dict[str, list[str]] = {}
        for piece in _PIECES:
            given = list(merges)
            got = call(fn, piece, given)
            if not (isinstance(got, list | tuple) and all(isinstance(s, str) for s in got)):  # pyright: ignore[reportUnknownVariableType]
                raise NotYet(f"return a list of strings (the symbols); got {type(got).__name__} for {piece!r}")
            got = list(got)  # pyright: ignore[reportUnknownArgumentType]
            if "".join(got) != piece:
                raise NotYet(f"the symbols of {piece!r} should join back to it; got {got}")
            results[piece] = got
        expected = {piece: _segment(piece, merges) for piece in _PIECES}
        wrong = [piece for piece in _PIECES if results[piece] != expected[piece]]
        if wrong:
            for mistake, message in mistakes:  # the mistake that gives the answer's symbols on every piece
                theirs = {piece: mistake(piece, merges) for piece in _PIECES}
                if theirs == results:
                    piece = wrong[0]
                    raise NotYet(f"{piece!r} -> {results[piece]}, expected {expected[piece]}: {message}")
            piece = wrong[0]
            raise NotYet(f"{piece!r} -> {results[piece]}; expected {expected[piece]} (merges, in order: {merges})")
        return f"segmentation is right on {len(_PIECES)} pieces, equal to BPETokenizer.segment."

    def run() -> str:
        return each_case(one, [dict(merges=_MERGES), dict(merges=_OTHER_MERGES)])

    return verdict(run)


# --- BLEU's clipped n-gram matches --------------------------------------------------------------------------------

_SENTENCES = [
    ("the the the the the the the", "the cat is on the mat"),  # the classic example of clipping
    ("a man in a blue shirt is riding a bike .", "a man in a blue shirt rides a bike down the street ."),
    ("two dogs play", "two dogs are playing in the snow ."),
    ("a a a b a a", "a a b a"),
    ("dogs", "two dogs play ."),  # shorter than n for n > 1: no n-grams, never a negative count
    ("the cat sat on the mat", "the cat and the dog and the bird sat on the mat"),  # the reference repeats more
    ("cat the sat mat", "the cat sat on the mat"),  # the same words in another order: an n-gram is ordered
    ("a bc d", "ab c d"),  # words joined without a separator would collide: ("a", "bc") is not ("ab", "c")
    ("The dog runs", "the dog runs"),  # case matters: sacreBLEU's default, case:mixed
]


def _windows(tokens: Sequence[str], n: int) -> list[tuple[str, ...]]:
    """The n-grams of ``tokens`` in order, as tuples."""
    return [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


def _ngrams(tokens: Sequence[str], n: int) -> Counter[tuple[str, ...]]:
    return Counter(_windows(tokens, n))


def _clipped_as(key: Callable[[tuple[str, ...]], object], h: Sequence[str], r: Sequence[str], n: int) -> int:
    """Clipped matches with each n-gram seen through ``key``: what an answer that keys its n-grams so counts."""
    return sum((Counter(map(key, _windows(h, n))) & Counter(map(key, _windows(r, n)))).values())


def _count(x: object) -> int | None:
    """A count an answer returned, as an int: a Python or NumPy number with an integer value, or a tensor of one
    element; None if it is none of these."""
    value = one_number(x)
    return None if value is None or not value.is_integer() else int(value)


def _clipped(h: Sequence[str], r: Sequence[str], n: int) -> int:
    return sum((_ngrams(h, n) & _ngrams(r, n)).values())


# The classic mistakes, as the (matches, total) they give; None where a mistake says nothing of that count.
_NGRAM_MISTAKES: list[tuple[Callable[[list[str], list[str], int], tuple[int | None, int | None]], str]] = [
    *(
        (
            lambda h, r, n, m=m: (_clipped(h, r, m), max(len(h) - m + 1, 0)),
            f"These are the counts for n={m}: use the argument n, not a number written into the code",
        )
        for m in range(1, 5)
    ),
    (
        lambda h, r, n: (_clipped(h[:-1], r[:-1], n), None),
        "The last n-gram is left out: a list of L words has L - n + 1 n-grams, range(len(words) - n + 1)",
    ),
    (
        lambda h, r, n: (sum(c for g, c in _ngrams(h, n).items() if g in _ngrams(r, n)), None),
        "The matches are not clipped: an n-gram counts at most as often as the reference has it (min of the two "
        "counts), else 'the the the ...' scores perfectly",
    ),
    (
        lambda h, r, n: (len(set(_ngrams(h, n)) & set(_ngrams(r, n))), None),
        "Each distinct n-gram is counted once: an n-gram the hypothesis repeats counts as often as it occurs in "
        "both, min(hypothesis count, reference count)",
    ),
    (
        lambda h, r, n: (sum(c for g, c in _ngrams(r, n).items() if g in _ngrams(h, n)), None),
        "The matches count the reference's occurrences: count the hypothesis's n-grams, each at most as often as "
        "the reference has it",
    ),
    (
        lambda h, r, n: (_clipped_as(lambda g: tuple(sorted(g)), h, r, n), None),
        "The n-grams ignore word order (sorted, or a set of words): 'cat the' is not 'the cat', and word order "
        "is what BLEU's 2- to 4-grams measure. Keep each n-gram as the tuple of its words in order",
    ),
    (
        lambda h, r, n: (_clipped_as("".join, h, r, n), None),
        "The words of an n-gram are joined without a separator, so ('a', 'bc') and ('ab', 'c') become one "
        "string: keep the tuple of words, tuple(words[i : i + n])",
    ),
    (
        lambda h, r, n: (_clipped([w.lower() for w in h], [w.lower() for w in r], n), None),
        "The words are lower-cased: BLEU here is case-sensitive (sacreBLEU's case:mixed, section 7), so 'The' "
        "and 'the' are two words; compare them as they are",
    ),
    (
        lambda h, r, n: (None, max(len(r) - n + 1, 0)),
        "total counts the reference's n-grams: BLEU is a precision, over the hypothesis's n-grams (the brevity "
        "penalty handles length)",
    ),
]


def check_ngram_matches(fn: Callable[..., Any]) -> Verdict:
    """``fn(hypothesis, reference, n)`` takes two token lists and returns ``(matches, total)``: BLEU's clipped
    matches (each hypothesis n-gram counts at most as often as it occurs in the reference) and the number of
    n-grams in the hypothesis. The checker compares with sacreBLEU's own counts."""

    def run() -> str:
        from sacrebleu.metrics.bleu import BLEU

        metric = BLEU(tokenize="none", effective_order=True)
        cases: list[tuple[str, str, int, tuple[int, int], tuple[int, int]]] = []  # hyp, ref, n, got, expected
        for hyp, ref in _SENTENCES:
            h, r = hyp.split(), ref.split()
            stats = metric.sentence_score(hyp, [ref])  # sacreBLEU's counts for n = 1 ... 4
            for n in range(1, 5):
                given_h, given_r = list(h), list(r)
                answer = call(fn, given_h, given_r, n)
                if not (isinstance(answer, tuple | list) and len(answer) == 2):  # pyright: ignore[reportUnknownArgumentType]
                    raise NotYet(f"return a pair of numbers (matches, total); got {answer!r:.80}")
                matches, total = _count(answer[0]), _count(answer[1])
                if matches is None or total is None:
                    raise NotYet(f"return a pair of whole numbers (matches, total); got {answer!r:.80}")
                cases.append((hyp, ref, n, (matches, total), (stats.counts[n - 1], stats.totals[n - 1])))
        wrong = [case for case in cases if case[3] != case[4]]
        if wrong:
            hyp, ref, n, got, expected = wrong[0]
            where = f"n={n}, hypothesis {hyp!r}, reference {ref!r}: got {got}, expected {expected}"
            for mistake, message in _NGRAM_MISTAKES:  # the mistake that gives the answer's counts in every case
                theirs = [(mistake(hyp.split(), ref.split(), n), got, expected) for hyp, ref, n, got, expected in cases]
                if all(
                    all(m is None or m == g for m, g in zip(counts, got, strict=True)) for counts, got, _ in theirs
                ) and any(
                    any(m is not None and m != e for m, e in zip(counts, expected, strict=True))
                    for counts, _, expected in theirs
                ):
                    raise NotYet(f"{where}. {message}")
            if got[0] == expected[0]:
                raise NotYet(f"{where}. The matches are right; total should be the number of n-grams in the "
                             "hypothesis, len(hypothesis) - n + 1, and never below 0 (a hypothesis shorter than n "
                             "has none)")  # fmt: skip
            raise NotYet(where)
        return "clipped n-gram matches are right, equal to sacreBLEU's counts for n = 1 ... 4."

    return verdict(run)
