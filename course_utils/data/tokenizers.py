"""What the course's tokenizers share, and the character tokenizer.

Every tokenizer here (``CharTokenizer``, ``BPETokenizer``) follows one protocol, ``Tokenizer``: ids 0-3 are the special
tokens ``<pad>``, ``<bos>``, ``<eos>``, ``<unk>`` (``SPECIALS``), named by ``pad_id``, ``bos_id``, ``eos_id``,
``unk_id``; ``encode(text, bos, eos)`` gives ids; ``decode(ids)`` gives text, stopping at the first ``<eos>`` and
skipping ``<pad>`` and ``<bos>`` (an ``<unk>`` reads as ``<unk>``). ``SpecialTokens`` implements the shared part.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Protocol, runtime_checkable

import torch
from torch import Tensor

__all__ = ["SPECIALS", "CharTokenizer", "SpecialTokens", "Tokenizer"]

SPECIALS = ("<pad>", "<bos>", "<eos>", "<unk>")  # ids 0, 1, 2, 3


@runtime_checkable
class Tokenizer(Protocol):
    """What batching, decoding and evaluation need of a tokenizer."""

    @property
    def vocab_size(self) -> int: ...

    @property
    def pad_id(self) -> int: ...

    @property
    def bos_id(self) -> int: ...

    @property
    def eos_id(self) -> int: ...

    @property
    def unk_id(self) -> int: ...

    def encode(self, text: str, bos: bool = False, eos: bool = False) -> list[int]: ...

    def decode(self, ids: Iterable[int] | Tensor) -> str: ...


def outside_vocabulary(i: int, vocab_size: int) -> ValueError:
    """The error for an id that no token of a vocabulary of ``vocab_size`` has, with the likely cause."""
    return ValueError(
        f"id {i} is not in this tokenizer's vocabulary (ids 0 to {vocab_size - 1}): were the ids made by another "
        "tokenizer, or by a model with a larger vocab_size?"
    )


class SpecialTokens:
    """The members every tokenizer shares: its vocabulary ``itos`` (id -> string), the special tokens' ids, and
    which ids ``decode`` shows. ``specials`` is ``SPECIALS``, or ``()`` for a vocabulary without them (then asking
    for ``pad_id`` is an error)."""

    specials: tuple[str, ...] = SPECIALS
    itos: list[str]

    def _special(self, index: int) -> int:
        if not self.specials:
            raise ValueError(f"this tokenizer has no {SPECIALS[index]}; build it with specials=True")
        return index

    @property
    def pad_id(self) -> int:
        return self._special(0)

    @property
    def bos_id(self) -> int:
        return self._special(1)

    @property
    def eos_id(self) -> int:
        return self._special(2)

    @property
    def unk_id(self) -> int:
        return self._special(3)

    @property
    def vocab_size(self) -> int:
        return len(self.itos)

    def __len__(self) -> int:
        return len(self.itos)

    def known(self, i: int) -> int:
        """``i`` as an int, if it is an id of this vocabulary; a negative or too large id would otherwise index
        ``itos`` from its end, or fail without saying why."""
        i = int(i)
        if not 0 <= i < len(self.itos):
            raise outside_vocabulary(i, len(self.itos))
        return i

    def shown(self, ids: Iterable[int] | Tensor, stop_at_eos: bool = True) -> Iterator[int]:
        """The ids ``decode`` turns into text: up to the first ``<eos>`` (unless ``stop_at_eos=False``), without
        ``<pad>`` and ``<bos>``."""
        for i in ids.tolist() if isinstance(ids, Tensor) else ids:
            i = self.known(i)
            if self.specials and i == self.eos_id and stop_at_eos:
                return
            if not self.specials or i not in (self.pad_id, self.bos_id, self.eos_id):
                yield i


class CharTokenizer(SpecialTokens):
    """Maps characters to ids and back; ids 0-3 are ``<pad>``, ``<bos>``, ``<eos>``, ``<unk>``.

    >>> tok = CharTokenizer("abc")
    >>> tok.encode("cab", bos=True, eos=True)
    [1, 6, 4, 5, 2]
    >>> tok.decode([1, 6, 4, 5, 2, 0])
    'cab'

    ``specials=False`` gives a plain character vocabulary (for language models); unknown
    characters then raise instead of mapping to ``<unk>``.
    """

    SPECIALS = SPECIALS

    def __init__(self, chars: Iterable[str], specials: bool = True) -> None:
        chars = sorted(set(chars))
        if any(len(c) != 1 for c in chars):
            raise ValueError("CharTokenizer takes single characters; pass a string or an iterable of them")
        self.specials = SPECIALS if specials else ()
        self.itos: list[str] = [*self.specials, *chars]
        self.stoi = {s: i for i, s in enumerate(self.itos)}

    @classmethod
    def from_texts(cls, texts: Iterable[str], specials: bool = True) -> CharTokenizer:
        return cls({c for text in texts for c in text}, specials)

    def __repr__(self) -> str:
        return f"CharTokenizer(vocab_size={self.vocab_size}, specials={bool(self.specials)})"

    def encode(self, text: str, bos: bool = False, eos: bool = False) -> list[int]:
        if (bos or eos) and not self.specials:
            raise ValueError("this tokenizer has no <bos>/<eos>; build it with specials=True")
        if self.specials:
            unk = self.unk_id
            ids = [self.stoi.get(c, unk) for c in text]
        else:
            unknown = sorted(set(text) - self.stoi.keys())
            if unknown:
                raise ValueError(f"characters not in the vocabulary: {unknown}")
            ids = [self.stoi[c] for c in text]
        return ([self.bos_id] if bos else []) + ids + ([self.eos_id] if eos else [])

    def decode(self, ids: Iterable[int] | Tensor, stop_at_eos: bool = True) -> str:
        """Text of ``ids``: stops at the first ``<eos>`` (unless ``stop_at_eos=False``), skips ``<pad>``,
        ``<bos>`` and ``<eos>``; an unknown character reads as ``<unk>``."""
        return "".join(self.itos[i] for i in self.shown(ids, stop_at_eos))

    def tokens(self, ids: Iterable[int] | Tensor) -> list[str]:
        """One readable label per id (a space shows as '␣'), for plot axes."""
        ids = ids.tolist() if isinstance(ids, Tensor) else ids
        return ["␣" if self.itos[i] == " " else self.itos[i] for i in map(self.known, ids)]

    def encode_batch(self, texts: Sequence[str], bos: bool = False, eos: bool = False) -> Tensor:
        """LongTensor ``(B, T_max)`` on the CPU (move it with ``.to(device)``), each row padded with ``<pad>`` on the
        right."""
        rows = [self.encode(t, bos, eos) for t in texts]
        width = max(map(len, rows), default=0)
        pad = self.pad_id if self.specials else 0
        ids = [row + [pad] * (width - len(row)) for row in rows]
        return torch.tensor(ids, dtype=torch.long, device="cpu").view(len(rows), width)
