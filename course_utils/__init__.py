"""course_utils: the tested code of the course *Transformers from Scratch*.

Every notebook builds one concept live, checks it against this package and PyTorch, and from then on imports it
from here: ``from course_utils import MultiHeadAttention``. Conventions: batch first, ``(B, T, d_model)``; heads
``(B, n_heads, T, d_k)``; bool masks with True = may attend.

Five rooms (sub-packages) over two small modules, and the grader's command; imports go down this list, never up
(``tests/test_structure.py``):

========================  ==========================================================================================
``settings``, ``utils``   every ``COURSE_*`` environment variable; devices, seeds, train/eval modes
``model/``                the Transformer proper: attention, masks, positions, layers, encoder, decoder,
                          ``Transformer``, ``GPT``, and their twins from PyTorch's modules (one name table)
``data/``                 tokenizers (one protocol) and datasets: toy pairs, dates, Tiny Shakespeare, Multi30k
``training/``             training loop, recipes, shipped weights, seq2seq loss and batches, decoding, metrics
``teaching/``             probes that name bugs, plots and interactive charts
``checks/``               the exercise graders: ``from course_utils.checks import check_layer_norm``
``grade``                 the notebook grader: ``python -m course_utils.grade submissions/*.ipynb``
========================  ==========================================================================================

``model`` and ``data`` do not import each other. This module re-exports every name the chapters use; each room's
``__init__`` lists its modules.
"""

from .data import (
    BPETokenizer,
    CharTokenizer,
    DateTask,
    encode_pairs,
    learn_bpe,
    learn_bpe_fast,
    load_multi30k,
    load_tiny_shakespeare,
    merge_pair,
    pretokenize,
    random_batches,
    random_windows,
    reversal_pairs,
    split_ids,
)
from .model import (
    GPT,
    Decoder,
    DecoderLayer,
    Encoder,
    EncoderLayer,
    FeedForward,
    GPTBlock,
    GPTConfig,
    KVCache,
    LayerNorm,
    MultiHeadAttention,
    PositionalEncoding,
    TorchTransformer,
    Transformer,
    TransformerConfig,
    causal_mask,
    padding_mask,
    record_attention,
    scaled_dot_product_attention,
    sinusoidal_encoding,
    target_mask,
)
from .teaching import (
    ProbeReport,
    attention_chart,
    attention_grid,
    attention_heatmap,
    batch_probe,
    causality_probe,
    equality_probe,
    evaluation_curve,
    loss_curve,
    output_probe,
    padding_probe,
    position_probe,
    positional_encoding_chart,
    positional_encoding_heatmap,
    positional_waves,
    use_offline_charts,
)
from .training import (
    DATE_TRANSFORMER,
    MULTI30K_QUICK,
    MULTI30K_TRANSLATOR,
    SHAKESPEARE_GPT_CPU,
    SHAKESPEARE_GPT_GPU,
    History,
    Recipe,
    TrainConfig,
    beam_search,
    bleu,
    estimate_loss,
    exact_match,
    greedy_decode,
    length_penalty,
    load_pretrained,
    lr_factor,
    noam_lr,
    pad_batch,
    seq2seq_loss,
    train,
    train_translator,
    translate,
)
from .utils import count_parameters, get_device, set_seed, synchronize

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
    "pad_batch",
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
    "synchronize",
    "target_mask",
    "train",
    "train_translator",
    "translate",
    "use_offline_charts",
]
