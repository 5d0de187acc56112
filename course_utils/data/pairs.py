"""Toy tasks of string pairs: the reversal task, pairs encoded as padded id tensors, and random batches.

Shape letters: B batch, N dataset size, S source length, T target length.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

import torch
from torch import Tensor

from .tokenizers import CharTokenizer

__all__ = ["encode_pairs", "random_batches", "reversal_pairs"]


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
        order = torch.randperm(n, generator=generator, device="cpu")  # a CPU generator; indexes any device
        for start in range(0, n - batch_size + 1, batch_size):
            idx = order[start : start + batch_size]
            yield tuple(t[idx] for t in tensors)


def reversal_pairs(n: int, length: int = 8, alphabet: str = "abcdefghij", seed: int = 0) -> list[tuple[str, str]]:
    """``n`` (random string, the same string reversed) pairs: the classic toy copy task."""
    if not alphabet or length < 1:
        raise ValueError(f"need a non-empty alphabet and length >= 1; got {alphabet!r} and {length}")
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        s = "".join(rng.choice(alphabet) for _ in range(length))
        pairs.append((s, s[::-1]))
    return pairs
