"""Character tokenizer, string-pair encoding and random batches.

Shape letters: B batch, T sequence length, N dataset size.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator, Sequence

import torch
from torch import Tensor

__all__ = ["CharTokenizer", "encode_pairs", "random_batches", "reversal_pairs"]


class CharTokenizer:
    """Maps characters to ids and back; ids 0-3 are ``<pad>``, ``<bos>``, ``<eos>``, ``<unk>``.

    >>> tok = CharTokenizer("abc")
    >>> tok.encode("cab", bos=True, eos=True)
    [1, 6, 4, 5, 2]
    >>> tok.decode([1, 6, 4, 5, 2, 0])
    'cab'

    ``specials=False`` gives a plain character vocabulary (for language models); unknown
    characters then raise instead of mapping to ``<unk>``.
    """

    SPECIALS = ("<pad>", "<bos>", "<eos>", "<unk>")

    def __init__(self, chars: Iterable[str], specials: bool = True) -> None:
        chars = sorted(set(chars))
        if any(len(c) != 1 for c in chars):
            raise ValueError("CharTokenizer takes single characters; pass a string or an iterable of them")
        self.specials = self.SPECIALS if specials else ()
        self.itos: list[str] = [*self.specials, *chars]
        self.stoi = {s: i for i, s in enumerate(self.itos)}

    def _special(self, index: int) -> int:
        if not self.specials:
            raise ValueError(f"this tokenizer has no {self.SPECIALS[index]}; build it with specials=True")
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

    @classmethod
    def from_texts(cls, texts: Iterable[str], specials: bool = True) -> CharTokenizer:
        return cls({c for text in texts for c in text}, specials)

    @property
    def vocab_size(self) -> int:
        return len(self.itos)

    def __len__(self) -> int:
        return len(self.itos)

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
        """Text of ``ids``, without special tokens; stops at the first ``<eos>`` by default."""
        out: list[str] = []
        for i in ids.tolist() if isinstance(ids, Tensor) else ids:
            if self.specials and stop_at_eos and i == self.eos_id:
                break
            if i >= len(self.specials):
                out.append(self.itos[i])
        return "".join(out)

    def tokens(self, ids: Iterable[int] | Tensor) -> list[str]:
        """One readable label per id (a space shows as '␣'), for plot axes."""
        ids = ids.tolist() if isinstance(ids, Tensor) else ids
        return ["␣" if self.itos[i] == " " else self.itos[i] for i in ids]

    def encode_batch(self, texts: Sequence[str], bos: bool = False, eos: bool = False) -> Tensor:
        """LongTensor ``(B, T_max)``, each row padded with ``<pad>`` on the right."""
        rows = [self.encode(t, bos, eos) for t in texts]
        width = max(map(len, rows), default=0)
        pad = self.pad_id if self.specials else 0
        return torch.tensor([row + [pad] * (width - len(row)) for row in rows], dtype=torch.long).view(len(rows), width)


def encode_pairs(
    pairs: Sequence[tuple[str, str]], src_tokenizer: CharTokenizer, tgt_tokenizer: CharTokenizer
) -> tuple[Tensor, Tensor]:
    """(source, target) strings -> ``src (N, S)`` and ``tgt (N, T)`` padded id tensors.

    The target is wrapped as ``<bos> target <eos>``: the decoder reads it shifted right.
    """
    src = src_tokenizer.encode_batch([s for s, _ in pairs])
    tgt = tgt_tokenizer.encode_batch([t for _, t in pairs], bos=True, eos=True)
    return src, tgt


def random_batches(*tensors: Tensor, batch_size: int, seed: int = 0) -> Iterator[tuple[Tensor, ...]]:
    """Endless batches of ``batch_size`` rows drawn without replacement, reshuffled every epoch."""
    n = tensors[0].size(0)
    if any(t.size(0) != n for t in tensors) or not 0 < batch_size <= n:
        raise ValueError(
            f"tensors must share their first dimension N and 0 < batch_size <= N; got batch_size={batch_size}"
        )
    generator = torch.Generator().manual_seed(seed)
    while True:
        order = torch.randperm(n, generator=generator)
        for start in range(0, n - batch_size + 1, batch_size):
            idx = order[start : start + batch_size]
            yield tuple(t[idx] for t in tensors)


def reversal_pairs(n: int, length: int = 8, alphabet: str = "abcdefghij", seed: int = 0) -> list[tuple[str, str]]:
    """``n`` (random string, the same string reversed) pairs: the classic toy copy task."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        s = "".join(rng.choice(alphabet) for _ in range(length))
        pairs.append((s, s[::-1]))
    return pairs
