"""Data: tokenizers, and the datasets the chapters learn from. Imports nothing of the package but ``settings``.

- ``tokenizers``: the ``Tokenizer`` protocol every tokenizer follows (special ids 0-3), ``CharTokenizer``
- ``bpe``: byte-pair encoding, ``learn_bpe`` (readable) and ``learn_bpe_fast``, ``BPETokenizer``
- ``merges``: BPE merges learned with incremental pair counts, ``learn_merges``, ``learn_bpe_incremental``
- ``byte_bpe``: GPT-2's byte-level BPE rebuilt, ``ByteBPE``, ``load_gpt2_tokenizer``, ``merge_tree``, ``train_byte_bpe``
- ``pairs``: string-pair tasks: ``reversal_pairs``, ``encode_pairs``, ``random_batches``
- ``dates``: chapter 06's date-normalisation task, ``DateTask``
- ``text``: files downloaded once and checked (``DataFile``, ``fetch``), Tiny Shakespeare, ``random_windows``
- ``multi30k``: the German-English corpus of chapter 08, ``load_multi30k``
- ``download``: every file the course downloads, fetched at once (``download_all``; ``python -m course_utils.data``,
  through ``__main__``)
- ``instructions``: instructions to tune a model on and score it offline (dates, words to reverse, sort, count),
  ``instruction_pairs``, and the text the model tuned on them was pretrained on, ``pretraining_texts``
"""

from .bpe import BPETokenizer, learn_bpe, learn_bpe_fast, merge_pair, pretokenize
from .byte_bpe import (
    GPT2_PATTERN,
    ByteBPE,
    bytes_to_unicode,
    gpt2_files,
    load_gpt2_tokenizer,
    merge_tree,
    train_byte_bpe,
)
from .dates import DateTask
from .download import download_all
from .instructions import instruction_pairs, pretraining_texts
from .merges import learn_bpe_incremental, learn_merges
from .multi30k import load_multi30k
from .pairs import encode_pairs, random_batches, reversal_pairs
from .text import load_tiny_shakespeare, random_windows, split_ids
from .tokenizers import SPECIALS, CharTokenizer, SpecialTokens, Tokenizer

__all__ = [
    "GPT2_PATTERN",
    "SPECIALS",
    "BPETokenizer",
    "ByteBPE",
    "CharTokenizer",
    "DateTask",
    "SpecialTokens",
    "Tokenizer",
    "bytes_to_unicode",
    "download_all",
    "encode_pairs",
    "gpt2_files",
    "instruction_pairs",
    "learn_bpe",
    "learn_bpe_fast",
    "learn_bpe_incremental",
    "learn_merges",
    "load_gpt2_tokenizer",
    "load_multi30k",
    "load_tiny_shakespeare",
    "merge_pair",
    "merge_tree",
    "pretokenize",
    "pretraining_texts",
    "random_batches",
    "random_windows",
    "reversal_pairs",
    "split_ids",
    "train_byte_bpe",
]
