"""GPT-2's tokenizer rebuilt: byte-level BPE (Radford et al., 2019), which reads any text, in any script, with no
unknown token.

1. **Bytes, shown as characters.** Text becomes its UTF-8 bytes, and each of the 256 bytes is drawn as one printable
   character (``bytes_to_unicode``): printable bytes as themselves, the others (space, newline, control bytes) as
   characters from U+0100 on, so the space is ``Ġ`` and the newline ``Ċ``. The vocabulary starts from these 256.
2. **Pieces.** A regular expression (``GPT2_PATTERN``) cuts text into pieces that merges never cross: English
   contractions, a letter run with the space before it, a number run, a punctuation run, whitespace.
3. **Merges by rank.** Inside a piece, the pair of adjacent symbols learned earliest (lowest rank) is merged, again
   and again, until no learned pair is left. Each resulting symbol is a token.
4. **Special tokens** (``<|endoftext|>``) are cut out of the text first, longest first, and only where allowed.

``ByteBPE`` encodes and decodes; ``load_gpt2_tokenizer`` reads GPT-2's own files (checked against their SHA-256);
``train_byte_bpe`` learns a vocabulary with incremental pair counts (``merges.learn_merges``).
"""

from __future__ import annotations

import codecs
import itertools
import json
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Literal, TypeAlias

import regex
from torch import Tensor

from .bpe import merge_pair
from .merges import learn_merges
from .text import DataFile, fetch
from .tokenizers import outside_vocabulary

__all__ = [
    "GPT2_PATTERN",
    "ByteBPE",
    "bytes_to_unicode",
    "gpt2_files",
    "load_gpt2_tokenizer",
    "merge_tree",
    "train_byte_bpe",
]

# GPT-2's pre-tokenizer: contractions, letters, numbers, other characters, each with one optional space before it;
# then whitespace, keeping the last space of a run for the word after it. \p{L} is any letter, \p{N} any number.
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
END_OF_TEXT = "<|endoftext|>"
_OPENAI = "https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/"
GPT2_FILES = {
    "encoder": DataFile(
        "gpt2/encoder.json",
        _OPENAI + "encoder.json",
        "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",
        1_042_301,
    ),
    "merges": DataFile(
        "gpt2/vocab.bpe",
        _OPENAI + "vocab.bpe",
        "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
        456_318,
    ),
}
Allowed = Collection[str] | Literal["all"]


def bytes_to_unicode() -> dict[int, str]:
    """The 256 bytes as printable characters: ``!`` to ``~``, ``¡`` to ``¬`` and ``®`` to ``ÿ`` stand for
    themselves; each other byte, in order, for the next character from U+0100 (so byte 32, the space, is ``Ġ``)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    others = [b for b in range(256) if b not in printable]
    return {**{b: chr(b) for b in printable}, **{b: chr(256 + n) for n, b in enumerate(others)}}


MergeTree: TypeAlias = str | tuple["MergeTree", "MergeTree"]  # a token, or the pair of trees merged into it


def merge_tree(token: str, ranks: Mapping[tuple[str, str], int]) -> MergeTree:
    """How BPE made ``token`` (drawn as ``to_chars`` draws it): the token itself if it is one character, else the
    pair ``(left, right)`` of the trees of the two tokens whose merge made it: ``"Ġthe"`` -> ``(("Ġ", "t"),
    ("h", "e"))`` with GPT-2's ranks. Each token above the 256 bytes is the result of one merge, so exactly one cut of
    ``token`` into ``a + b`` has ``(a, b)`` in ``ranks``. Raises ``ValueError`` for a string that no merge made."""
    if len(token) == 1:
        return token
    for i in range(1, len(token)):
        if (token[:i], token[i:]) in ranks:
            return merge_tree(token[:i], ranks), merge_tree(token[i:], ranks)
    raise ValueError(f"{token!r} is not a token: no merge in ranks makes it, nor is it one character")


class ByteBPE:
    """A byte-level BPE tokenizer: ``encoder`` maps each token (bytes drawn as ``bytes_to_unicode`` characters) to
    its id, ``merges`` are the learned pairs in rank order, ``special_tokens`` map strings such as ``<|endoftext|>``
    to their ids. ``encode`` and ``decode`` give the ids and text of ``tiktoken`` and Hugging Face's GPT-2 tokenizer
    on the same files."""

    def __init__(
        self,
        encoder: Mapping[str, int],
        merges: Sequence[tuple[str, str]],
        special_tokens: Mapping[str, int] | None = None,
        pattern: str = GPT2_PATTERN,
    ) -> None:
        self.byte_to_char = bytes_to_unicode()
        self.char_to_byte = {c: b for b, c in self.byte_to_char.items()}
        self.special_tokens = dict(special_tokens or {})
        self.encoder = {token: i for token, i in encoder.items() if token not in self.special_tokens}
        missing = [c for c in self.byte_to_char.values() if c not in self.encoder]
        if missing:
            raise ValueError(f"the vocabulary lacks {len(missing)} of the 256 byte characters (first {missing[0]!r})")
        for a, b in merges:
            if a + b not in self.encoder:
                raise ValueError(f"the merge {a!r} {b!r} makes {a + b!r}, which is not in the vocabulary")
        self.ranks = {(a, b): rank for rank, (a, b) in enumerate(merges)}
        self.decoder = {i: bytes(self.char_to_byte[c] for c in token) for token, i in self.encoder.items()}
        self.decoder |= {i: token.encode("utf-8") for token, i in self.special_tokens.items()}
        self.pattern = regex.compile(pattern)
        self._cache: dict[str, list[int]] = {}

    @classmethod
    def from_merges(cls, merges: Sequence[tuple[str, str]], special_tokens: Sequence[str] = ()) -> ByteBPE:
        """The vocabulary ``train_byte_bpe`` builds from its merges: the 256 byte characters in code point order
        (GPT-2's order), each merge's result in rank order, then ``special_tokens``."""
        encoder = {c: i for i, c in enumerate(sorted(bytes_to_unicode().values()))}
        for a, b in merges:
            encoder.setdefault(a + b, len(encoder))
        return cls(encoder, merges, {token: len(encoder) + n for n, token in enumerate(special_tokens)})

    def to_dict(self) -> dict[str, list[str]]:
        """Plain strings, for a checkpoint, of a tokenizer ``from_merges`` (or ``train_byte_bpe``) built:
        ``ByteBPE.from_dict(tok.to_dict())`` rebuilds it."""
        return {"merges": [f"{a} {b}" for a, b in self.ranks], "special_tokens": list(self.special_tokens)}

    @classmethod
    def from_dict(cls, saved: Mapping[str, Sequence[str]]) -> ByteBPE:
        pairs = [merge.split(" ") for merge in saved["merges"]]
        return cls.from_merges([(a, b) for a, b in pairs], saved["special_tokens"])

    def __repr__(self) -> str:
        return f"ByteBPE(vocab_size={self.vocab_size}, merges={len(self.ranks)}, special_tokens={self.special_tokens})"

    @property
    def vocab_size(self) -> int:
        return max(self.decoder) + 1

    def pieces(self, text: str) -> list[str]:
        """The pieces merges never cross: ``"I'll go!!"`` -> ``['I', "'ll", ' go', '!!']``."""
        return self.pattern.findall(text)

    def to_chars(self, piece: str) -> str:
        """A piece's UTF-8 bytes, each drawn as its character: ``" été"`` -> ``'ĠÃ©tÃ©'``."""
        return "".join(self.byte_to_char[b] for b in piece.encode("utf-8"))

    def bpe(self, chars: str) -> list[str]:
        """The tokens of one piece (as ``to_chars`` draws it): merge the adjacent pair of the lowest rank, every
        occurrence of it, until no pair of the two symbols is a learned merge."""
        symbols = list(chars)
        while len(symbols) > 1:
            rank, pair = min((self.ranks.get(pair, len(self.ranks)), pair) for pair in itertools.pairwise(symbols))
            if rank == len(self.ranks):
                break
            symbols = merge_pair(symbols, pair)
        return symbols

    def piece_ids(self, piece: str) -> list[int]:
        """The ids of one piece (remembered: a corpus repeats its pieces)."""
        if piece not in self._cache:
            if len(self._cache) >= 50_000:  # bounded memory over an endless stream
                self._cache.clear()
            self._cache[piece] = [self.encoder[t] for t in self.bpe(self.to_chars(piece))]
        return self._cache[piece]

    def encode_ordinary(self, text: str) -> list[int]:
        """The ids of ``text``, special tokens' strings read as ordinary text."""
        return [i for piece in self.pieces(text) for i in self.piece_ids(piece)]

    def _specials(self, allowed_special: Allowed, disallowed_special: Allowed, text: str) -> list[str]:
        allowed = set(self.special_tokens) if allowed_special == "all" else set(allowed_special)
        unknown = allowed - set(self.special_tokens)
        if unknown:
            raise ValueError(f"{sorted(unknown)} are not special tokens of this tokenizer: {list(self.special_tokens)}")
        disallowed = set(self.special_tokens) - allowed if disallowed_special == "all" else set(disallowed_special)
        for token in disallowed:
            if token in text:
                raise ValueError(
                    f"the text contains the special token {token!r}: pass allowed_special={{{token!r}}} to encode it "
                    "as its id, or disallowed_special=() to encode it as ordinary text"
                )
        return sorted(allowed, key=len, reverse=True)  # longest first: of two that start alike, the longer wins

    @staticmethod
    def _splitter(specials: list[str]) -> regex.Pattern[str]:
        """The special tokens as one pattern, captured, so that ``split`` keeps them between the text's parts."""
        return regex.compile(f"({'|'.join(regex.escape(s) for s in specials)})")

    def encode(self, text: str, allowed_special: Allowed = (), disallowed_special: Allowed = "all") -> list[int]:
        """The ids of ``text``, as ``tiktoken``'s ``encode``: a special token's string becomes its id where
        ``allowed_special`` names it (or is ``"all"``); one that is neither allowed nor disallowed is read as text;
        a disallowed one (by default, every one not allowed) is an error, since text from users could forge it."""
        specials = self._specials(allowed_special, disallowed_special, text)
        if not specials:
            return self.encode_ordinary(text)
        ids: list[int] = []
        parts = self._splitter(specials).split(text)
        for i, part in enumerate(parts):  # ordinary text at even positions, a special token at odd ones
            ids += [self.special_tokens[part]] if i % 2 else self.encode_ordinary(part)
        return ids

    def encode_iterable(self, chunks: Iterable[str], allowed_special: Allowed = ()) -> Iterator[int]:
        """The ids of the text that ``chunks`` (lines of a file, say) make together, yielded as they are known, in
        memory bounded by a chunk and a piece. Special tokens not allowed are read as text.

        What the next chunk may change waits: the last two pieces (``" wor"`` may go on as ``" world"``, ``"'"`` and
        ``"l"`` become ``"'ll"``, a space may join the word after it), and the start of a special token
        (``"<|endo"``) with the piece before it, which a special token after it would end differently
        (``"a  <|endoftext|>"`` has the piece ``"  "``)."""
        specials = self._specials(allowed_special, (), "")
        splitter = self._splitter(specials) if specials else None
        buffer = ""
        for chunk in chunks:
            buffer += chunk
            done = max((m.end() for m in splitter.finditer(buffer)), default=0) if splitter else 0
            yield from self.encode(buffer[:done], allowed_special=specials, disallowed_special=())
            tail = buffer[done:]  # ordinary text, perhaps ending with the start of a special token
            pieces = self.pattern.findall(tail)
            starts = list(itertools.accumulate(map(len, pieces), initial=0))[:-1]  # pieces cover the text
            held = starts[-2] if len(starts) > 1 else 0
            for s in specials:
                for k in range(1, min(len(s), len(tail) + 1)):
                    if tail.endswith(s[:k]):  # a special token may begin at len(tail) - k
                        inside = max(i for i, start in enumerate(starts) if start <= len(tail) - k)
                        held = min(held, starts[max(inside - 1, 0)])
            yield from (i for piece, start in zip(pieces, starts) if start < held for i in self.piece_ids(piece))
            buffer = tail[held:]
        yield from self.encode(buffer, allowed_special=specials, disallowed_special=())

    def with_special_tokens(self, tokens: Iterable[str]) -> ByteBPE:
        """A copy that also knows ``tokens`` as special tokens, with new ids after the last (a model that reads its
        ids needs as many new rows in its embedding and output layers)."""
        specials, next_id = dict(self.special_tokens), self.vocab_size
        for token in tokens:
            if token not in specials:
                specials[token], next_id = next_id, next_id + 1
        return ByteBPE(self.encoder, list(self.ranks), specials, self.pattern.pattern)

    def decode_bytes(self, ids: Iterable[int] | Tensor) -> bytes:
        """The bytes of ``ids``: exact for any slice of ids, even one that cuts a character."""
        return b"".join(self._bytes(i) for i in (ids.tolist() if isinstance(ids, Tensor) else ids))

    def _bytes(self, i: int) -> bytes:
        """The bytes of id ``i``; an id outside the vocabulary is named, with the vocabulary's range."""
        try:
            return self.decoder[int(i)]
        except KeyError:
            raise outside_vocabulary(int(i), self.vocab_size) from None

    def decode(self, ids: Iterable[int] | Tensor, errors: str = "replace") -> str:
        """The text of ``ids``. A slice that cuts a character's bytes shows ``�`` for them (as ``tiktoken`` and
        Hugging Face do); ``decode_stream`` waits for the rest of the character instead."""
        return self.decode_bytes(ids).decode("utf-8", errors=errors)

    def decode_stream(self, ids: Iterable[int] | Tensor) -> Iterator[str]:
        """The text of ``ids`` one token at a time, as a model generates them: each token's text as soon as its
        characters are complete (an emoji of 4 bytes may come in 2 tokens and show once, whole)."""
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        for i in ids.tolist() if isinstance(ids, Tensor) else ids:
            if text := decoder.decode(self._bytes(i)):
                yield text
        if text := decoder.decode(b"", final=True):
            yield text


def read_gpt2_files(encoder_json: str | Path, vocab_bpe: str | Path) -> ByteBPE:
    """A tokenizer from files in GPT-2's format: ``encoder.json`` (token -> id) and ``vocab.bpe`` (a ``#version``
    line, then one merge a line, in rank order). Tokens of the form ``<|...|>`` are special."""
    encoder: dict[str, int] = json.loads(Path(encoder_json).read_text(encoding="utf-8"))
    lines = Path(vocab_bpe).read_text(encoding="utf-8").split("\n")
    merges = [(a, b) for a, b in (line.split(" ") for line in lines[1:] if line)]  # line 0: "#version: 0.2"
    specials = {t: i for t, i in encoder.items() if t.startswith("<|") and t.endswith("|>")}
    return ByteBPE(encoder, merges, specials)


def gpt2_files(data_dir: str | Path | None = None) -> dict[str, Path]:
    """The local paths of GPT-2's two tokenizer files, ``"encoder"`` (``encoder.json``) and ``"merges"``
    (``vocab.bpe``), downloaded once and checked against their SHA-256, for other libraries to read."""
    return {name: fetch(file, data_dir) for name, file in GPT2_FILES.items()}


def load_gpt2_tokenizer(data_dir: str | Path | None = None) -> ByteBPE:
    """GPT-2's tokenizer (50,257 tokens, 50,000 merges) from OpenAI's own files, downloaded once and checked against
    their SHA-256 (``$COURSE_DATA_MIRROR`` points at an offline copy)."""
    files = gpt2_files(data_dir)
    return read_gpt2_files(files["encoder"], files["merges"])


def train_byte_bpe(
    texts: Iterable[str], vocab_size: int, special_tokens: Sequence[str] = (END_OF_TEXT,), min_frequency: int = 2
) -> ByteBPE:
    """Learn a byte-level vocabulary of ``vocab_size`` tokens on ``texts``: ids 0-255 the bytes (in the order of
    ``bytes_to_unicode``'s characters, as GPT-2's), then the merged tokens, then ``special_tokens``. Pieces as
    GPT-2's; the most frequent pair merged first, ties to the pair whose symbols entered the vocabulary first."""
    table, pattern = bytes_to_unicode(), regex.compile(GPT2_PATTERN)
    alphabet = sorted(table.values())  # code point order is also GPT-2's order of the 256
    if vocab_size < len(alphabet) + len(special_tokens):
        raise ValueError(
            f"vocab_size={vocab_size} leaves no room: the bytes and special tokens need {256 + len(special_tokens)}"
        )
    words = Counter(
        "".join(table[b] for b in piece.encode("utf-8")) for text in texts for piece in pattern.findall(text)
    )
    merges = learn_merges(words, alphabet, vocab_size - len(special_tokens), min_frequency)
    return ByteBPE.from_merges(merges, special_tokens)
