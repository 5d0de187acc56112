"""Learning BPE merges with incremental pair counts: the same merges as chapter 08's readable ``learn_bpe``, without
recounting every pair of the corpus before each merge.

The readable trainer counts every adjacent pair of every distinct piece, merges the most frequent pair, then counts
them all again. Most counts do not change: a merge of ``(a, b)`` touches only the pieces that hold ``a`` next to
``b``. So count once, remember which pieces hold each pair, and after a merge update only those pieces: take their
old pairs off the counts, merge, put their new pairs on. A heap keeps the most frequent pair on top; an entry whose
count has changed since it was pushed is stale, and is skipped when it comes up.

**The tie rule.** When two pairs are equally frequent, the merge goes to the pair whose first symbol entered the
vocabulary first, then the one whose second did (the rule of Hugging Face's ``tokenizers`` trainer and of
``learn_bpe``). Any fixed rule would do; this one depends only on the corpus, never on the order a dictionary
happens to list its pairs in, so two trainers that keep it learn the very same merges.
"""

from __future__ import annotations

import heapq
import itertools
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping

from .bpe import BPETokenizer, merge_pair, word_counts
from .tokenizers import SPECIALS

__all__ = ["learn_bpe_incremental", "learn_merges"]

Pair = tuple[str, str]


def learn_merges(
    words: Mapping[str, int], symbols: Iterable[str], vocab_size: int, min_frequency: int = 2
) -> list[Pair]:
    """The merges learned on ``words`` (each piece and how often it occurs; its characters are its first symbols)
    until the vocabulary, ``symbols`` (in id order: the tie rule reads it) and each new merged string, has
    ``vocab_size`` entries, or no pair occurs ``min_frequency`` times."""
    ids = {s: i for i, s in enumerate(symbols)}
    splits = [list(word) for word in words]  # each piece, as its current symbols
    counts = list(words.values())
    pairs: Counter[Pair] = Counter()
    holders: defaultdict[Pair, set[int]] = defaultdict(set)  # pair -> the pieces (indices of splits) that hold it
    for w, symbols_of_w in enumerate(splits):
        for pair in itertools.pairwise(symbols_of_w):
            pairs[pair] += counts[w]
            holders[pair].add(w)

    def entry(pair: Pair) -> tuple[int, int, int, Pair]:  # the heap's smallest entry: most frequent, then tie rule
        return (-pairs[pair], ids[pair[0]], ids[pair[1]], pair)

    heap = [entry(pair) for pair in pairs]
    heapq.heapify(heap)
    merges: list[Pair] = []
    while heap and len(ids) < vocab_size:
        minus_count, _, _, best = heapq.heappop(heap)
        if -minus_count != pairs[best]:  # stale: its count changed after it was pushed
            if pairs[best] > 0:
                heapq.heappush(heap, entry(best))
            continue
        if pairs[best] < min_frequency:
            break
        merges.append(best)
        ids.setdefault(best[0] + best[1], len(ids))  # a string two merges make keeps its first id
        changed: set[Pair] = set()
        for w in holders.pop(best):
            old = splits[w]
            for pair in itertools.pairwise(old):  # this piece's pairs off the counts...
                pairs[pair] -= counts[w]
                holders[pair].discard(w)
            splits[w] = new = merge_pair(old, best)
            for pair in itertools.pairwise(new):  # ...and its new pairs on
                pairs[pair] += counts[w]
                holders[pair].add(w)
                changed.add(pair)
        del pairs[best]
        for pair in changed:  # a count that went up needs a new entry; one that went down is found stale
            if pairs[pair] > 0:
                heapq.heappush(heap, entry(pair))
    return merges


def learn_bpe_incremental(texts: Iterable[str], vocab_size: int, min_frequency: int = 2) -> BPETokenizer:
    """``learn_bpe`` with incremental counts: the same pieces, specials, tie rule and stopping rule, hence the same
    tokenizer, many times faster on a whole corpus."""
    words = word_counts(texts)
    alphabet = sorted({c for word in words for c in word})
    merges = learn_merges(words, [*SPECIALS, *alphabet], vocab_size, min_frequency)
    return BPETokenizer(alphabet, merges)
