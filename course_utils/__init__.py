"""course_utils: the tested reference code of the course *Transformers from Scratch*.

Every notebook builds one concept live, checks it against this package and PyTorch, and from then
on imports it from here. Conventions: batch first, ``(B, T, d_model)``; heads
``(B, n_heads, T, d_k)``; bool masks with True = may attend.
"""

from .attention import KVCache, MultiHeadAttention, scaled_dot_product_attention
from .checks import (
    check_causal_mask,
    check_cross_attention,
    check_feed_forward,
    check_label_smoothing,
    check_layer_norm,
    check_merge_heads,
    check_mha_parameter_count,
    check_next_token_targets,
    check_noam_lr,
    check_padding_mask,
    check_position_shift,
    check_pre_norm_layer,
    check_scaled_dot_product_attention,
    check_shift_right,
    check_sinusoidal_encoding,
    check_split_heads,
    check_target_mask,
    check_temperature,
    check_top_k,
)
from .data import CharTokenizer, encode_pairs, random_batches, reversal_pairs
from .dates import DATE_FORMATS, DateTask
from .decoder import Decoder, DecoderLayer
from .encoder import Encoder, EncoderLayer
from .fast import fast_kernels
from .gpt import GPT, GPTBlock, estimate_loss
from .layers import FeedForward, LayerNorm
from .masks import causal_mask, padding_mask, target_mask
from .model import Transformer, greedy_decode
from .positional import PositionalEncoding, sinusoidal_encoding
from .pretrained import PRETRAINED_RECIPES, Pretrained, load_pretrained
from .reference import TorchTransformer
from .text import TINY_SHAKESPEARE, load_tiny_shakespeare, random_windows, split_ids
from .train import (
    History,
    TrainConfig,
    exact_match,
    lr_factor,
    make_optimizer,
    noam_lr,
    seq2seq_loss,
    train,
    train_step,
)
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

__version__ = "0.1.0"

__all__ = [
    "DATE_FORMATS",
    "GPT",
    "PRETRAINED_RECIPES",
    "TINY_SHAKESPEARE",
    "CharTokenizer",
    "DateTask",
    "Decoder",
    "DecoderLayer",
    "Encoder",
    "EncoderLayer",
    "FeedForward",
    "GPTBlock",
    "History",
    "KVCache",
    "LayerNorm",
    "MultiHeadAttention",
    "PositionalEncoding",
    "Pretrained",
    "TorchTransformer",
    "TrainConfig",
    "Transformer",
    "attention_chart",
    "attention_grid",
    "attention_heatmap",
    "causal_mask",
    "check_causal_mask",
    "check_cross_attention",
    "check_feed_forward",
    "check_label_smoothing",
    "check_layer_norm",
    "check_merge_heads",
    "check_mha_parameter_count",
    "check_next_token_targets",
    "check_noam_lr",
    "check_padding_mask",
    "check_position_shift",
    "check_pre_norm_layer",
    "check_scaled_dot_product_attention",
    "check_shift_right",
    "check_sinusoidal_encoding",
    "check_split_heads",
    "check_target_mask",
    "check_temperature",
    "check_top_k",
    "count_parameters",
    "encode_pairs",
    "estimate_loss",
    "evaluation_curve",
    "exact_match",
    "fast_kernels",
    "get_device",
    "greedy_decode",
    "load_pretrained",
    "load_tiny_shakespeare",
    "loss_curve",
    "lr_factor",
    "make_optimizer",
    "noam_lr",
    "padding_mask",
    "positional_encoding_chart",
    "positional_encoding_heatmap",
    "positional_waves",
    "random_batches",
    "random_windows",
    "reversal_pairs",
    "scaled_dot_product_attention",
    "seq2seq_loss",
    "set_seed",
    "sinusoidal_encoding",
    "split_ids",
    "target_mask",
    "train",
    "train_step",
    "use_offline_charts",
]
