"""Training and using a model: the training loop, the recipes, the shipped weights, the sequence-to-sequence loss
and batches, decoding (greedy and beam search) and the metrics. Imports ``model`` and ``data``, never ``teaching``.

- ``loop``: ``TrainConfig``, the learning-rate schedules, ``train_step`` and ``train``, ``History``
- ``checkpoint``: what ``train(checkpoint=...)`` saves and resumes from (``save_checkpoint``, ``load_checkpoint``,
  ``CheckpointMismatch``): training that survives a disconnect
- ``distributed``: data-parallel pieces on ``torch.distributed`` (``average_gradients``, ``shard``,
  ``backend_for``, ``same_on_every_rank``, ``spawn``: local gloo processes under a timeout), proven equal to DDP and FSDP2
- ``train_gpt``: chapter 07's GPT trained data-parallel under ``torchrun`` (``torchrun --standalone
  --nproc-per-node=2 -m course_utils.training.train_gpt``), with DDP, ``train`` and its checkpoints
- ``recipes``: every training run of the course, once (``DATE_TRANSFORMER``, ``SHAKESPEARE_GPT_CPU``...)
- ``pretrained``: ``load_pretrained``, the weights those recipes gave (``course_utils/checkpoints/``)
- ``seq2seq``: ``seq2seq_loss`` (teacher forcing), ``pad_batch``, ``translation_batches``, ``validation_loss``
- ``decoding``: ``beam_search``, ``greedy_decode`` (one beam), ``length_penalty``, ``translate``
- ``metrics``: ``exact_match``, ``bleu``, ``bleu_difference`` (a paired bootstrap), ``estimate_loss``
- ``translation``: chapter 08's ``train_translator`` and ``evaluate_bleu``
- ``instruct``: supervised instruction tuning: ``ChatTemplate``, ``encode_example`` (the loss masked on the prompt),
  ``pad_examples``
"""

from .checkpoint import CheckpointMismatch, checkpoint_path, load_checkpoint, save_checkpoint
from .decoding import beam_search, greedy_decode, length_penalty, translate
from .distributed import average_gradients, backend_for, same_on_every_rank, shard, spawn
from .instruct import IGNORE, ChatTemplate, encode_example, mask_prompt, pad_examples
from .loop import History, TrainConfig, lr_factor, make_optimizer, noam_lr, train, train_step
from .metrics import BleuDifference, bleu, bleu_difference, estimate_loss, exact_match
from .pretrained import load_pretrained
from .recipes import (
    BYTE_GPT,
    DATE_TRANSFORMER,
    MULTI30K_QUICK,
    MULTI30K_TRANSLATOR,
    SHAKESPEARE_GPT_CPU,
    SHAKESPEARE_GPT_GPU,
    ByteGPTRecipe,
    Recipe,
    TranslationRecipe,
)
from .seq2seq import encode_corpus, pad_batch, seq2seq_loss, translation_batches, validation_loss
from .translation import evaluate_bleu, train_translator

__all__ = [
    "BYTE_GPT",
    "DATE_TRANSFORMER",
    "IGNORE",
    "MULTI30K_QUICK",
    "MULTI30K_TRANSLATOR",
    "SHAKESPEARE_GPT_CPU",
    "SHAKESPEARE_GPT_GPU",
    "BleuDifference",
    "ByteGPTRecipe",
    "ChatTemplate",
    "CheckpointMismatch",
    "History",
    "Recipe",
    "TrainConfig",
    "TranslationRecipe",
    "average_gradients",
    "backend_for",
    "beam_search",
    "bleu",
    "bleu_difference",
    "checkpoint_path",
    "encode_corpus",
    "encode_example",
    "estimate_loss",
    "evaluate_bleu",
    "exact_match",
    "greedy_decode",
    "length_penalty",
    "load_checkpoint",
    "load_pretrained",
    "lr_factor",
    "make_optimizer",
    "mask_prompt",
    "noam_lr",
    "pad_batch",
    "pad_examples",
    "same_on_every_rank",
    "save_checkpoint",
    "seq2seq_loss",
    "shard",
    "spawn",
    "train",
    "train_step",
    "train_translator",
    "translate",
    "translation_batches",
    "validation_loss",
]
