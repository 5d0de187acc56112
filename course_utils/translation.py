"""Translation with the full Transformer: batches of sentence pairs, training, decoding and BLEU.

Shape letters: B batch, S source length, T target length, K beam size, V vocabulary size. Sentences are
encoded by one ``BPETokenizer`` shared by both languages; targets carry ``<bos>`` and ``<eos>``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, replace

import torch
import torch.nn.functional as F
from torch import Tensor

from .bpe import BPETokenizer
from .masks import causal_mask, padding_mask
from .model import Transformer
from .recipes import TranslationRecipe
from .seq2seq import seq2seq_loss
from .train import History, train
from .utils import eval_mode, set_seed

__all__ = [
    "beam_search",
    "bleu",
    "encode_corpus",
    "evaluate_bleu",
    "length_penalty",
    "pad_batch",
    "train_translator",
    "translate",
    "translation_batches",
    "validation_loss",
]

Example = tuple[list[int], list[int]]  # (source ids, target ids with <bos> and <eos>)


def encode_corpus(pairs: Sequence[tuple[str, str]], tokenizer: BPETokenizer) -> list[Example]:
    """Each (source, target) sentence pair as ids: the source plain, the target between ``<bos>`` and ``<eos>``."""
    return [(tokenizer.encode(src), tokenizer.encode(tgt, bos=True, eos=True)) for src, tgt in pairs]


def pad_batch(rows: Sequence[Sequence[int]], pad_id: int) -> Tensor:
    """Token lists of different lengths -> one LongTensor ``(B, longest)``, padded on the right with ``pad_id``."""
    out = torch.full((len(rows), max(len(r) for r in rows)), pad_id, dtype=torch.long)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row, dtype=torch.long)
    return out


def translation_batches(
    examples: Sequence[Example], batch_size: int, pad_id: int, seed: int = 0, pool: int = 50
) -> Iterator[tuple[Tensor, Tensor]]:
    """Endless ``(src (B, S), tgt (B, T))`` batches, epoch after epoch. Each epoch shuffles the examples, sorts
    every ``pool`` batches' worth by length so that a batch holds sentences of similar lengths (little
    padding), and shuffles the order of the batches."""
    rng = random.Random(seed)
    order = list(range(len(examples)))
    while True:
        rng.shuffle(order)
        batches = []
        for start in range(0, len(order), batch_size * pool):
            chunk = sorted(
                order[start : start + batch_size * pool], key=lambda i: (len(examples[i][0]), len(examples[i][1]))
            )
            batches += [chunk[k : k + batch_size] for k in range(0, len(chunk), batch_size)]
        rng.shuffle(batches)
        for batch in batches:
            yield (
                pad_batch([examples[i][0] for i in batch], pad_id),
                pad_batch([examples[i][1] for i in batch], pad_id),
            )


@torch.no_grad()
def validation_loss(model: Transformer, examples: Sequence[Example], pad_id: int, batch_size: int = 128) -> float:
    """Mean cross-entropy per target token (teacher forcing, no label smoothing) over ``examples``."""
    device = next(model.parameters()).device
    total, count = 0.0, 0
    for start in range(0, len(examples), batch_size):
        chunk = examples[start : start + batch_size]
        src, tgt = (
            pad_batch([s for s, _ in chunk], pad_id).to(device),
            pad_batch([t for _, t in chunk], pad_id).to(device),
        )
        n = int((tgt[:, 1:] != pad_id).sum())  # the target tokens the loss averages over
        total += float(seq2seq_loss(model, src, tgt, pad_id)) * n
        count += n
    return total / max(count, 1)


def train_translator(
    recipe: TranslationRecipe,
    tokenizer: BPETokenizer,
    train_pairs: Sequence[tuple[str, str]],
    val_pairs: Sequence[tuple[str, str]] = (),
    *,
    steps: int | None = None,
    device: torch.device | str | None = None,
    seed: int = 0,
    progress: bool = True,
    on_eval: Callable[[Transformer], None] | None = None,
) -> tuple[Transformer, History]:
    """Build the recipe's ``Transformer`` (one vocabulary, shared embeddings) and train it on ``train_pairs``,
    measuring the validation loss every ``recipe.eval_every`` steps and at the end; ``on_eval(model)``, if given,
    runs then too (e.g. to translate a few sentences). ``steps`` shortens the run (the schedule is then squeezed
    to fit)."""
    config = recipe.training if steps is None else replace(recipe.training, steps=steps)
    set_seed(seed)
    vocab = tokenizer.vocab_size
    model = Transformer(vocab, vocab, **asdict(recipe.model)).to(device or "cpu")
    examples = encode_corpus(train_pairs, tokenizer)
    val_examples = encode_corpus(val_pairs, tokenizer)
    pad, smoothing = tokenizer.pad_id, config.label_smoothing

    def evaluate(_: object) -> dict[str, float]:  # train calls it with the model being trained: `model`
        if on_eval is not None:
            on_eval(model)
        return {"val_loss": validation_loss(model, val_examples, pad)} if val_examples else {}

    history = train(
        model,
        translation_batches(examples, config.batch_size, pad, seed=seed),
        lambda m, src, tgt: seq2seq_loss(m, src, tgt, pad, smoothing),
        config,
        device=device,
        eval_fn=evaluate if val_examples or on_eval else None,
        eval_every=recipe.eval_every,
        progress=progress,
        desc="translator",
    )
    return model, history


def length_penalty(lengths: Tensor, alpha: float) -> Tensor:
    r"""GNMT's length penalty (Wu et al., 2016): :math:`((5 + |y|) / 6)^\alpha`. A hypothesis is ranked by its
    log-probability divided by this, so that longer ones, which sum more negative terms, are not always beaten
    by short ones. ``alpha = 0`` ranks by log-probability alone."""
    return ((5.0 + lengths.float()) / 6.0) ** alpha


@torch.no_grad()
def beam_search(
    model: Transformer,
    src: Tensor,
    src_mask: Tensor | None,
    beam_size: int,
    max_len: int,
    bos_id: int,
    eos_id: int,
    pad_id: int,
    alpha: float = 1.0,
    use_cache: bool = True,
) -> Tensor:
    """Batched beam search: keep the ``beam_size`` most probable prefixes of each sentence, extend every one by
    every token, keep the best ``beam_size`` again; stop when all have produced ``eos_id`` or ``max_len`` tokens.
    A finished hypothesis stays in its beam, extended only by ``pad_id`` at no cost. At the end each sentence
    returns the hypothesis with the best log-probability divided by ``length_penalty(length, alpha)``.

    ``src (B, S)`` -> LongTensor ``(B, <= max_len)`` starting with ``bos_id``, padded with ``pad_id``. With
    ``beam_size=1`` this is greedy decoding; with a beam as large as the number of possible outputs, it is
    exhaustive search. ``use_cache`` decodes incrementally (``Transformer.decode`` with caches): the same
    hypotheses, several times faster.
    """
    if beam_size < 1 or max_len < 1:
        raise ValueError(f"need beam_size >= 1 and max_len >= 1; got beam_size={beam_size}, max_len={max_len}")
    with eval_mode(model):
        B, K, device = src.size(0), beam_size, src.device
        memory = model.encode(src, src_mask).repeat_interleave(K, dim=0)  # (B*K, S, d_model): K copies per sentence
        mask = None if src_mask is None else src_mask.repeat_interleave(K, dim=0)  # (B*K, 1, 1, S)
        ys = torch.full((B * K, 1), bos_id, dtype=torch.long, device=device)  # (B*K, t)
        scores = torch.full((B, K), float("-inf"), device=device)
        scores[:, 0] = 0.0  # at the start the K beams are identical: only one may be extended
        finished = torch.zeros(B * K, dtype=torch.bool, device=device)
        caches = model.new_caches() if use_cache else None
        lengths = torch.zeros(B * K, dtype=torch.long, device=device)  # tokens generated, <eos> included
        for _ in range(max_len - 1):
            if caches is None:  # the whole prefix again
                logits = model.decode(ys, memory, mask, causal_mask(ys.size(1), device=device))[:, -1]  # (B*K, V)
            else:  # only the newest token; the caches hold the keys and values of the earlier ones
                logits = model.decode(ys[:, -1:], memory, mask, caches=caches)[:, -1]
            log_probs = F.log_softmax(logits.float(), dim=-1)
            V = log_probs.size(-1)
            log_probs[finished] = float("-inf")  # a finished hypothesis has one continuation: <pad>, costing nothing
            log_probs[finished, pad_id] = 0.0
            candidates = (scores.view(B * K, 1) + log_probs).view(B, K * V)  # every beam extended by every token
            scores, index = candidates.topk(K, dim=-1)  # (B, K)
            parent = (torch.arange(B, device=device)[:, None] * K + index // V).view(-1)  # (B*K,): the beam extended
            token = (index % V).view(-1)  # (B*K,): the token it was extended with
            ys = torch.cat([ys[parent], token[:, None]], dim=1)  # (B*K, t + 1)
            for cache in caches if caches and K > 1 else ():  # each hypothesis continues its parent's self-attention
                cache.self_attn.reorder(parent)  # keys and values; the cross-attention's are the same for all K beams
            grew = ~finished[parent]  # False where a finished hypothesis only got <pad>
            lengths = lengths[parent] + grew.long()
            finished = ~grew | (token == eos_id)
            if bool(finished.all()):
                break
        best = (scores / length_penalty(lengths.view(B, K), alpha)).argmax(dim=-1)  # (B,)
        return ys.view(B, K, -1)[torch.arange(B, device=device), best]


@torch.no_grad()
def translate(
    model: Transformer,
    tokenizer: BPETokenizer,
    sentences: Sequence[str],
    *,
    beam_size: int = 1,
    alpha: float = 1.0,
    batch_size: int = 100,
    max_extra: int = 50,
) -> list[str]:
    """Translate ``sentences`` (greedy with ``beam_size=1``, else beam search), in batches of similar lengths;
    outputs are at most ``max_extra`` tokens longer than their source."""
    device = next(model.parameters()).device
    encoded = [tokenizer.encode(s) for s in sentences]
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
    out = [""] * len(encoded)
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        src = pad_batch([encoded[i] for i in chunk], tokenizer.pad_id).to(device)  # (B, S)
        mask, max_len = padding_mask(src, tokenizer.pad_id), src.size(1) + max_extra
        bos, eos, pad = tokenizer.bos_id, tokenizer.eos_id, tokenizer.pad_id
        ys = beam_search(model, src, mask, beam_size, max_len, bos, eos, pad, alpha)  # beam 1: greedy
        for i, row in zip(chunk, ys.cpu().tolist()):
            out[i] = tokenizer.decode(row)
    return out


def bleu(hypotheses: Sequence[str], references: Sequence[str]) -> tuple[float, str]:
    """Corpus BLEU by sacreBLEU on detokenised, case-sensitive text, and sacreBLEU's signature, which says
    exactly how it was computed (tokenizer, casing, smoothing, version) so that scores can be compared."""
    from sacrebleu.metrics.bleu import BLEU

    metric = BLEU()
    score = metric.corpus_score(list(hypotheses), [list(references)])
    return float(score.score), str(metric.get_signature())


ALPHAS = (0.6, 0.8, 1.0, 1.2, 1.5, 2.0, 2.5)  # the length-penalty alphas tried on the validation set


def evaluate_bleu(
    model: Transformer,
    tokenizer: BPETokenizer,
    test_pairs: Sequence[tuple[str, str]],
    val_pairs: Sequence[tuple[str, str]],
    beam_size: int = 4,
    alphas: Sequence[float] = ALPHAS,
) -> dict[str, float]:
    """Choose the length penalty's ``alpha`` for ``beam_size`` on ``val_pairs`` (the best BLEU of ``alphas``), then
    measure BLEU on ``test_pairs``, greedy and with that beam. Returns ``{"val_bleu_beam1": ...,
    "val_bleu_beam4_alpha0.6": ..., ..., "alpha": ..., "bleu_beam1": ..., "bleu_beam4": ...}``."""

    def score(pairs: Sequence[tuple[str, str]], k: int, alpha: float = 1.0) -> float:
        sources, references = [s for s, _ in pairs], [t for _, t in pairs]
        return bleu(translate(model, tokenizer, sources, beam_size=k, alpha=alpha), references)[0]

    metrics = {"val_bleu_beam1": score(val_pairs, 1)}
    for alpha in alphas:
        metrics[f"val_bleu_beam{beam_size}_alpha{alpha}"] = score(val_pairs, beam_size, alpha)
    best = max(alphas, key=lambda a: metrics[f"val_bleu_beam{beam_size}_alpha{a}"])
    metrics["alpha"] = best
    metrics["bleu_beam1"] = score(test_pairs, 1)
    metrics[f"bleu_beam{beam_size}"] = score(test_pairs, beam_size, best)
    return metrics
