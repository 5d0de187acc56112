"""course_utils: the tested code of the course *Transformers from Scratch*.

Every notebook builds one concept live, checks it against this package and PyTorch, and from then
on imports it from here. Conventions: batch first, ``(B, T, d_model)``; heads
``(B, n_heads, T, d_k)``; bool masks with True = may attend.

The top level holds what the chapters teach and use. The exercise graders live in ``course_utils.checks``
(``from course_utils.checks import check_layer_norm``); the course's training runs are defined once, in
``course_utils.recipes``.
"""

from .attention import KVCache, MultiHeadAttention, record_attention, scaled_dot_product_attention
from .bpe import BPETokenizer, learn_bpe, learn_bpe_fast, merge_pair, pretokenize
from .data import CharTokenizer, encode_pairs, random_batches, reversal_pairs
from .dates import DateTask
from .decoder import Decoder, DecoderLayer
from .encoder import Encoder, EncoderLayer
from .gpt import GPT, GPTBlock, GPTConfig, estimate_loss
from .layers import FeedForward, LayerNorm
from .masks import causal_mask, padding_mask, target_mask
from .model import Transformer, TransformerConfig
from .multi30k import load_multi30k
from .positional import PositionalEncoding, sinusoidal_encoding
from .pretrained import load_pretrained
from .probes import (
    ProbeReport,
    batch_probe,
    causality_probe,
    equality_probe,
    output_probe,
    padding_probe,
    position_probe,
)
from .recipes import (
    DATE_TRANSFORMER,
    MULTI30K_QUICK,
    MULTI30K_TRANSLATOR,
    SHAKESPEARE_GPT_CPU,
    SHAKESPEARE_GPT_GPU,
    Recipe,
)
from .seq2seq import exact_match, greedy_decode, seq2seq_loss
from .text import load_tiny_shakespeare, random_windows, split_ids
from .torch_reference import TorchTransformer
from .train import History, TrainConfig, lr_factor, noam_lr, train
from .translation import beam_search, bleu, length_penalty, train_translator, translate
from .utils import count_parameters, get_device, set_seed
from .viz import (
    attention_chart,
    attention_grid,
    attention_heatmap,
    evaluation_curve,
    loss_curve,
    positional_encoding_chart,
    positional_encoding_heatmap,
    positional_waves,
    use_offline_charts,
)

__version__ = "0.2.0"

__all__ = [
    "DATE_TRANSFORMER",
    "GPT",
    "MULTI30K_QUICK",
    "MULTI30K_TRANSLATOR",
    "SHAKESPEARE_GPT_CPU",
    "SHAKESPEARE_GPT_GPU",
    "BPETokenizer",
    "CharTokenizer",
    "DateTask",
    "Decoder",
    "DecoderLayer",
    "Encoder",
    "EncoderLayer",
    "FeedForward",
    "GPTBlock",
    "GPTConfig",
    "History",
    "KVCache",
    "LayerNorm",
    "MultiHeadAttention",
    "PositionalEncoding",
    "ProbeReport",
    "Recipe",
    "TorchTransformer",
    "TrainConfig",
    "Transformer",
    "TransformerConfig",
    "attention_chart",
    "attention_grid",
    "attention_heatmap",
    "batch_probe",
    "beam_search",
    "bleu",
    "causal_mask",
    "causality_probe",
    "count_parameters",
    "encode_pairs",
    "equality_probe",
    "estimate_loss",
    "evaluation_curve",
    "exact_match",
    "get_device",
    "greedy_decode",
    "learn_bpe",
    "learn_bpe_fast",
    "length_penalty",
    "load_multi30k",
    "load_pretrained",
    "load_tiny_shakespeare",
    "loss_curve",
    "lr_factor",
    "merge_pair",
    "noam_lr",
    "output_probe",
    "padding_mask",
    "padding_probe",
    "position_probe",
    "positional_encoding_chart",
    "positional_encoding_heatmap",
    "positional_waves",
    "pretokenize",
    "random_batches",
    "random_windows",
    "record_attention",
    "reversal_pairs",
    "scaled_dot_product_attention",
    "seq2seq_loss",
    "set_seed",
    "sinusoidal_encoding",
    "split_ids",
    "target_mask",
    "train",
    "train_translator",
    "translate",
    "use_offline_charts",
]
