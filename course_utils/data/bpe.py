"""Byte-pair encoding (Sennrich et al., 2016): a subword vocabulary learned from a corpus.

Text is first cut into *pieces*: a run of letters and digits, or one other character, each carrying the
space before it as a leading ``▁`` (U+2581), so that joining the pieces and turning ``▁`` back into a space
gives the text back exactly. Learning starts from the characters and repeatedly merges the most frequent
adjacent pair of symbols inside the pieces; encoding applies those merges, in the order they were learned.

``learn_bpe`` is the readable version, which recounts every pair before each merge. It learns exactly the
merges of the Hugging Face ``tokenizers`` trainer (``learn_bpe_fast``) set up the same way, which keeps its
counts up to date incrementally in Rust and is the one to use on a whole corpus.
"""

from __future__ import annotations

import itertools
import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence

from torch import Tensor

from .tokenizers import SPECIALS, SpecialTokens

__all__ = ["BPETokenizer", "learn_bpe", "learn_bpe_fast", "merge_pair", "pretokenize"]

SPACE = "\u2581"  # ▁ stands for the space before a piece
# A piece: optional ▁, then a run of word characters (letters, digits, _) or one other character; or a lone ▁
PIECE = re.compile(rf"{SPACE}?\w+|{SPACE}?[^\w{SPACE}]|{SPACE}")


def pretokenize(text: str) -> list[str]:
    """Cut ``text`` into the pieces that merges never cross: ``"A dog, run."`` ->
    ``['▁A', '▁dog', ',', '▁run', '.']``. Joining them and replacing ``▁`` by a space gives ``" " + text``."""
    if SPACE in text:
        raise ValueError(f"text contains {SPACE!r} (U+2581), which this tokenizer reserves for spaces")
    return PIECE.findall(SPACE + text.replace(" ", SPACE))


def merge_pair(symbols: Sequence[str], pair: tuple[str, str]) -> list[str]:
    """Replace every occurrence of ``pair`` in ``symbols``, left to right: ``(a, a)`` in ``a a a`` -> ``aa a``."""
    out: list[str] = []
    i = 0
    while i < len(symbols):
        if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == pair:
            out.append(symbols[i] + symbols[i + 1])
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return out


class BPETokenizer(SpecialTokens):
    """Encodes text to ids with learned merges and decodes ids back to the exact text.

    Ids 0-3 are ``<pad>``, ``<bos>``, ``<eos>``, ``<unk>``; then the characters in Unicode order, then every
    merged symbol in the order it was learned. A character never seen in training becomes ``<unk>``.
    """

    def __init__(self, alphabet: Iterable[str], merges: Iterable[tuple[str, str]]) -> None:
        self.merges = [(a, b) for a, b in merges]
        self.alphabet = sorted(set(alphabet))
        self.itos: list[str] = [*SPECIALS, *self.alphabet]
        self.stoi = {s: i for i, s in enumerate(self.itos)}
        for a, b in self.merges:
            if a not in self.stoi or b not in self.stoi:
                raise ValueError(f"merge {(a, b)} uses a symbol that neither the alphabet nor an earlier merge makes")
            if a + b not in self.stoi:  # two merges can make the same string: it keeps its first id
                self.stoi[a + b] = len(self.itos)
                self.itos.append(a + b)
        self.rank = {pair: i for i, pair in enumerate(self.merges)}
        self._cache: dict[str, list[int]] = {}

    def __repr__(self) -> str:
        return f"BPETokenizer(vocab_size={self.vocab_size}, merges={len(self.merges)})"

    def segment(self, piece: str) -> list[str]:
        """The symbols of one piece: start from its characters and apply the earliest-learned merge that
        applies, until none does."""
        symbols = list(piece)
        while len(symbols) > 1:
            pairs = [(self.rank.get(pair, len(self.rank)), pair) for pair in itertools.pairwise(symbols)]
            rank, pair = min(pairs)
            if rank == len(self.rank):
                break
            symbols = merge_pair(symbols, pair)
        return symbols

    def tokenize(self, text: str) -> list[str]:
        """The subword strings of ``text``: ``"Zwei Hunde"`` -> e.g. ``['▁Zwei', '▁Hun', 'de']``."""
        return [self.itos[i] for i in self.encode(text)]

    def encode(self, text: str, bos: bool = False, eos: bool = False) -> list[int]:
        ids = [self.bos_id] if bos else []
        for piece in pretokenize(text):
            if piece not in self._cache:
                self._cache[piece] = [self.stoi.get(s, self.unk_id) for s in self.segment(piece)]
            ids += self._cache[piece]
        return [*ids, self.eos_id] if eos else ids

    def decode(self, ids: Iterable[int] | Tensor) -> str:
        """The text of ``ids``; reading stops at ``<eos>``, and ``<pad>`` and ``<bos>`` are skipped. The space that
        ``pretokenize`` puts before the text is taken off, if the ids begin with it: any slice of ids decodes to its
        own piece of the text (``decode(ids[2:])`` of "a dog, a cat." is ", a cat."), one token alone included."""
        text = "".join(self.itos[i] for i in self.shown(ids)).replace(SPACE, " ")
        return text.removeprefix(" ")

    def to_dict(self) -> dict[str, list[str]]:
        """Plain strings, for a checkpoint: ``BPETokenizer.from_dict(tok.to_dict())`` rebuilds it."""
        return {"alphabet": list(self.alphabet), "merges": [f"{a} {b}" for a, b in self.merges]}

    @classmethod
    def from_dict(cls, saved: dict[str, list[str]]) -> BPETokenizer:
        pairs = [tuple(m.split(" ")) for m in saved["merges"]]
        return cls(saved["alphabet"], [(a, b) for a, b in pairs])


def word_counts(texts: Iterable[str]) -> Counter[str]:
    """How often each piece occurs in ``texts``."""
    return Counter(piece for text in texts for piece in pretokenize(text))


def learn_bpe(texts: Iterable[str], vocab_size: int, min_frequency: int = 2) -> BPETokenizer:
    """Learn merges on ``texts`` until the vocabulary (specials, characters, merged symbols) has ``vocab_size``
    entries, or no pair occurs ``min_frequency`` times. Each step merges the most frequent pair; a tie goes to
    the pair whose first symbol entered the vocabulary first, then its second (the rule of ``learn_bpe_fast``)."""
    words = word_counts(texts)
    alphabet = sorted({c for word in words for c in word})
    ids = {s: i for i, s in enumerate([*SPECIALS, *alphabet])}
    splits = {word: list(word) for word in words}  # each piece, as its current symbols
    merges: list[tuple[str, str]] = []
    while len(ids) < vocab_size:
        pairs: Counter[tuple[str, str]] = Counter()
        for word, count in words.items():
            symbols = splits[word]
            for pair in itertools.pairwise(symbols):
                pairs[pair] += count
        if not pairs:
            break
        best = max(pairs, key=lambda p: (pairs[p], -ids[p[0]], -ids[p[1]]))
        if pairs[best] < min_frequency:
            break
        merges.append(best)
        ids.setdefault(best[0] + best[1], len(ids))
        for word, symbols in splits.items():
            if best[0] in symbols:
                splits[word] = merge_pair(symbols, best)
    return BPETokenizer(alphabet, merges)


def learn_bpe_fast(texts: Iterable[str], vocab_size: int, min_frequency: int = 2) -> BPETokenizer:
    """``learn_bpe`` done by the Hugging Face ``tokenizers`` trainer, with the same pieces, specials and
    stopping rule: the same merges, in a fraction of the time."""
    from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, trainers

    hf = Tokenizer(models.BPE(unk_token="<unk>"))
    hf.normalizer = normalizers.Sequence([normalizers.Replace(" ", SPACE), normalizers.Prepend(SPACE)])
    hf.pre_tokenizer = pre_tokenizers.Split(Regex(PIECE.pattern), behavior="isolated")
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=list(SPECIALS), show_progress=False
    )
    hf.train_from_iterator(texts, trainer)
    model = json.loads(hf.to_str())["model"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    alphabet = [s for s in model["vocab"] if len(s) == 1]  # merged symbols have two characters or more
    return BPETokenizer(alphabet, [(a, b) for a, b in merges])
