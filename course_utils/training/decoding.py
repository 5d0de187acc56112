"""Decoding a trained encoder-decoder: beam search, greedy decoding (beam search with one beam), and translation.

Shape letters: B batch, S source length, t tokens so far, K beam size, V vocabulary size. ``model`` is a
``Transformer`` or anything with its ``encode(src, src_mask)`` and ``decode(tgt, memory, src_mask, tgt_mask)``
(``TorchTransformer``).

``use_cache``: True decodes incrementally (the course's ``Transformer``, ``new_caches()``): each step computes one
new position and reuses the keys and values of the earlier ones; False feeds the whole prefix back at every step,
which any model supports; None decodes incrementally when the model can. The tokens are the same up to float
rounding; the cache is several times faster. ``beam_search`` defaults to None; ``greedy_decode`` to False, the loop
chapter 06 writes, which also serves attention variants that ignore a cache (the bug lab's).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from ..data import Tokenizer
from ..dry_run import DRY_RUN_TOKENS, at_most
from ..model import Decoder, DecoderCache, Transformer, causal_mask, padding_mask
from ..utils import eval_mode
from .seq2seq import pad_batch

__all__ = ["beam_search", "greedy_decode", "length_penalty", "translate"]


def length_penalty(lengths: Tensor, alpha: float) -> Tensor:
    r"""GNMT's length penalty (Wu et al., 2016): :math:`((5 + |y|) / 6)^\alpha`. A hypothesis is ranked by its
    log-probability divided by this, so that longer ones, which sum more negative terms, are not always beaten
    by short ones. ``alpha = 0`` ranks by log-probability alone."""
    return ((5.0 + lengths.float()) / 6.0) ** alpha


def _next_log_probs(
    model: Transformer, ys: Tensor, memory: Tensor, src_mask: Tensor | None, caches: list[DecoderCache] | None
) -> Tensor:
    """Log-probabilities ``(B*K, V)`` of the token after each hypothesis ``ys`` ``(B*K, t)``."""
    if caches is None:  # the whole prefix again, under the causal mask it was trained with
        logits = model.decode(ys, memory, src_mask, causal_mask(ys.size(1), device=ys.device))
    else:  # only the newest token: the caches hold the keys and values of the earlier ones
        logits = model.decode(ys[:, -1:], memory, src_mask, caches=caches)
    return F.log_softmax(logits[:, -1].float(), dim=-1)  # the last position predicts the next token


def _caches(model: Transformer, use_cache: bool | None) -> list[DecoderCache] | None:
    """Fresh caches for incremental decoding, or None to feed the whole prefix back at every step."""
    can = isinstance(getattr(model, "decoder", None), Decoder)  # the course's decoder keeps keys and values
    if use_cache is None:
        use_cache = can
    return model.new_caches() if use_cache else None


@torch.no_grad()
def beam_search(
    model: Transformer,
    src: Tensor,
    src_mask: Tensor | None,
    *,
    beam_size: int,
    max_len: int,
    bos_id: int,
    eos_id: int,
    pad_id: int,
    alpha: float = 1.0,
    use_cache: bool | None = None,
) -> Tensor:
    """Batched beam search: keep the ``beam_size`` most probable prefixes of each sentence, extend every one by
    every token, keep the best ``beam_size`` again; stop when all have produced ``eos_id`` or ``max_len`` tokens.
    A finished hypothesis stays in its beam, extended only by ``pad_id`` at no cost. At the end each sentence
    returns the hypothesis with the best log-probability divided by ``length_penalty(length, alpha)``.

    ``src (B, S)`` -> LongTensor ``(B, <= max_len)`` starting with ``bos_id``, padded with ``pad_id``. With
    ``beam_size=1`` this is greedy decoding (``greedy_decode``); with a beam as large as the number of possible
    outputs, it is exhaustive search. ``use_cache``: see the module's docstring. It runs in eval mode (no dropout)
    and restores the mode. (A GPU dry run writes at most ``DRY_RUN_TOKENS`` after ``<bos>``: ``course_utils.dry_run``.)
    """
    if beam_size < 1 or max_len < 1:
        raise ValueError(
            f"need beam_size >= 1 and max_len >= 1 (max_len counts every id, <bos> included); "
            f"got beam_size={beam_size}, max_len={max_len}"
        )
    max_len = at_most("decode", max_len, 1 + DRY_RUN_TOKENS)
    B, K, device = src.size(0), beam_size, src.device
    with eval_mode(model):
        memory = model.encode(src, src_mask).repeat_interleave(K, dim=0)  # (B*K, S, d_model): K copies per sentence
        mask = None if src_mask is None else src_mask.repeat_interleave(K, dim=0)  # (B*K, 1, 1, S)
        caches = _caches(model, use_cache)
        ys = torch.full((B * K, 1), bos_id, dtype=torch.long, device=device)  # (B*K, t): every hypothesis so far
        scores = torch.full((B, K), float("-inf"), device=device)  # (B, K): each hypothesis's log-probability
        scores[:, 0] = 0.0  # at the start the K hypotheses are identical: only one may be extended
        finished = torch.zeros(B * K, dtype=torch.bool, device=device)
        lengths = torch.zeros(B * K, dtype=torch.long, device=device)  # tokens generated, <eos> included
        first_row = torch.arange(B, device=device) * K  # (B,): the row in ys of each sentence's first hypothesis
        for _ in range(max_len - 1):
            log_probs = _next_log_probs(model, ys, memory, mask, caches)  # (B*K, V)
            V = log_probs.size(-1)
            log_probs[finished] = float("-inf")  # a finished hypothesis has one continuation: <pad>, costing nothing
            log_probs[finished, pad_id] = 0.0
            candidates = scores.view(B * K, 1) + log_probs  # (B*K, V): every hypothesis extended by every token
            scores, best = candidates.view(B, K * V).topk(K, dim=-1)  # (B, K): the K best of each sentence's K * V
            extended = best // V  # (B, K): which of its sentence's K hypotheses each new one extends
            parent = (first_row[:, None] + extended).view(-1)  # (B*K,): that hypothesis's row in ys
            token = (best % V).view(-1)  # (B*K,): the token it was extended with
            ys = torch.cat([ys[parent], token[:, None]], dim=1)  # (B*K, t + 1)
            if caches is not None and K > 1:  # each hypothesis continues its parent's self-attention keys and values
                for cache in caches:  # (the cross-attention's are the same for all K copies of a sentence)
                    cache.self_attn.reorder(parent)
            was_finished = finished[parent]  # these only got <pad>: their length stays
            lengths = lengths[parent] + (~was_finished).long()
            finished = was_finished | (token == eos_id)
            if bool(finished.all()):
                break
        ranking = scores / length_penalty(lengths.view(B, K), alpha)  # (B, K)
        winner = ranking.argmax(dim=-1)  # (B,): the best of each sentence's K hypotheses
        return ys[first_row + winner]  # (B, t)


def greedy_decode(
    model: Transformer,
    src: Tensor,
    src_mask: Tensor | None,
    *,
    max_len: int,
    bos_id: int,
    eos_id: int,
    pad_id: int | None = None,
    use_cache: bool | None = False,
) -> Tensor:
    """Decode ``src`` ``(B, S)`` one token at a time, always taking the most likely next token: ``beam_search``
    with one beam.

    Returns a LongTensor ``(B, <= max_len)`` that starts with ``bos_id``. Decoding stops when every
    row has produced ``eos_id`` or ``max_len`` tokens; a finished row is filled with ``pad_id`` (or
    ``eos_id`` when no ``pad_id`` is given). It runs in eval mode (no dropout) and restores the mode.
    ``use_cache``: see the module's docstring (by default False, the loop chapter 06 writes).
    """
    return beam_search(
        model,
        src,
        src_mask,
        beam_size=1,
        max_len=max_len,
        bos_id=bos_id,
        eos_id=eos_id,
        pad_id=eos_id if pad_id is None else pad_id,
        alpha=0.0,  # one hypothesis per sentence: nothing to rank
        use_cache=use_cache,
    )


@torch.no_grad()
def translate(
    model: Transformer,
    tokenizer: Tokenizer,
    sentences: Sequence[str],
    *,
    beam_size: int = 1,
    alpha: float = 1.0,
    batch_size: int = 32,
    max_extra: int = 50,
) -> list[str]:
    """Translate ``sentences`` (greedy with ``beam_size=1``, else beam search), in batches of similar lengths;
    outputs are at most ``max_extra`` tokens longer than their source. (A batch decodes until its longest output
    ends: on a CPU, Multi30k's test set took a fifth less time in batches of 32 than of 100, the same translations.)"""
    if isinstance(sentences, str):  # a string is a sequence too: of one-character sentences
        raise TypeError("translate takes a list of sentences; got one string: put it in a list, [sentence]")
    device = next(model.parameters()).device
    encoded = [tokenizer.encode(s) for s in sentences]
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
    out = [""] * len(encoded)
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        src = pad_batch([encoded[i] for i in chunk], tokenizer.pad_id).to(device)  # (B, S)
        ys = beam_search(
            model,
            src,
            padding_mask(src, tokenizer.pad_id),
            beam_size=beam_size,
            max_len=src.size(1) + max_extra,
            bos_id=tokenizer.bos_id,
            eos_id=tokenizer.eos_id,
            pad_id=tokenizer.pad_id,
            alpha=alpha,
        )
        for i, row in zip(chunk, ys.cpu().tolist()):
            out[i] = tokenizer.decode(row)
    return out
