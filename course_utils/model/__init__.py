"""The Transformer proper: attention, layers, masks, positions, the encoder and decoder, the two models, and their
twins built from PyTorch's own modules.

Imports only ``torch`` and ``course_utils.utils``: the model knows nothing of data, training or teaching.

- ``attention``: ``scaled_dot_product_attention``, ``MultiHeadAttention``, ``KVCache``, ``record_attention``
- ``masks``: ``causal_mask``, ``padding_mask``, ``target_mask``
- ``positional``: ``sinusoidal_encoding``, ``PositionalEncoding``
- ``layers``: ``LayerNorm``, ``FeedForward``
- ``encoder``, ``decoder``: the layers and their stacks (``DecoderCache`` for incremental decoding)
- ``transformer``: the encoder-decoder ``Transformer`` and its ``TransformerConfig``
- ``gpt``: ``GPT``, ``GPTBlock``, ``GPTConfig``
- ``torch_names``: the one table between our parameter names and PyTorch's (every ``from_torch`` uses it)
- ``torch_reference``: ``TorchTransformer``, our ``Transformer`` with ``nn.TransformerEncoder``/``Decoder`` inside
"""

from .attention import KVCache, MultiHeadAttention, record_attention, scaled_dot_product_attention
from .decoder import Decoder, DecoderCache, DecoderLayer
from .encoder import Encoder, EncoderLayer
from .gpt import GPT, GPTBlock, GPTConfig
from .layers import FeedForward, LayerNorm
from .masks import causal_mask, padding_mask, target_mask
from .positional import PositionalEncoding, sinusoidal_encoding
from .torch_reference import TorchTransformer
from .transformer import Transformer, TransformerConfig

__all__ = [
    "GPT",
    "Decoder",
    "DecoderCache",
    "DecoderLayer",
    "Encoder",
    "EncoderLayer",
    "FeedForward",
    "GPTBlock",
    "GPTConfig",
    "KVCache",
    "LayerNorm",
    "MultiHeadAttention",
    "PositionalEncoding",
    "TorchTransformer",
    "Transformer",
    "TransformerConfig",
    "causal_mask",
    "padding_mask",
    "record_attention",
    "scaled_dot_product_attention",
    "sinusoidal_encoding",
    "target_mask",
]
