"""The Transformer proper: attention, layers, masks, positions, the encoder and decoder, the two models, and their
twins built from PyTorch's own modules.

Imports only ``torch`` and ``course_utils.utils``: the model knows nothing of data, training or teaching.

- ``attention``: ``scaled_dot_product_attention``, ``MultiHeadAttention``, ``KVCache``, ``record_attention``,
  ``GroupedQueryAttention``, ``expand_kv``, ``packed_linear``
- ``masks``: ``causal_mask``, ``padding_mask``, ``target_mask``
- ``positional``: ``sinusoidal_encoding``, ``PositionalEncoding``, ``apply_rotary``
- ``layers``: ``LayerNorm``, ``FeedForward``, ``RMSNorm``, ``SwiGLU``
- ``encoder``, ``decoder``: the layers and their stacks (``DecoderCache`` for incremental decoding)
- ``transformer``: the encoder-decoder ``Transformer`` and its ``TransformerConfig``
- ``causal_lm``: ``CausalLM``, what ``GPT`` and ``Llama`` share: the forward pass around the blocks, and ``generate``
- ``gpt``: ``GPT``, ``GPTBlock``, ``GPTConfig``
- ``llama``: ``Llama``, ``LlamaBlock``, ``LlamaConfig``: the GPT with RMSNorm, rotary positions, GQA and SwiGLU
- ``classifier``: ``SequenceClassifier``, a language model's last hidden state through a new head
- ``lora``: ``LoRALinear``, ``add_lora``, ``merge_lora``, ``lora_parameters``: low-rank adapters, as ``peft``'s
- ``convert_torch``: the one table between our parameter names and PyTorch's (every ``from_torch`` uses it)
- ``convert_hf``: ``from_hf``, GPT-2's and Llama's name tables (Hugging Face ``transformers`` models into ours)
- ``torch_reference``: ``TorchTransformer``, our ``Transformer`` with ``nn.TransformerEncoder``/``Decoder`` inside
"""

from .attention import (
    GroupedQueryAttention,
    KVCache,
    MultiHeadAttention,
    expand_kv,
    packed_linear,
    record_attention,
    scaled_dot_product_attention,
)
from .causal_lm import CausalLM
from .classifier import SequenceClassifier
from .convert_hf import GPT2_NAMES, GPT2_PACKED, LLAMA_NAMES, from_hf, from_hf_state
from .decoder import Decoder, DecoderCache, DecoderLayer
from .encoder import Encoder, EncoderLayer
from .gpt import GPT, GPTBlock, GPTConfig
from .layers import FeedForward, LayerNorm, RMSNorm, SwiGLU
from .llama import Llama, LlamaBlock, LlamaConfig
from .lora import LoRALinear, add_lora, lora_parameters, merge_lora
from .masks import causal_mask, padding_mask, target_mask
from .positional import PositionalEncoding, apply_rotary, sinusoidal_encoding
from .torch_reference import TorchTransformer
from .transformer import Transformer, TransformerConfig

__all__ = [
    "GPT",
    "GPT2_NAMES",
    "GPT2_PACKED",
    "LLAMA_NAMES",
    "CausalLM",
    "Decoder",
    "DecoderCache",
    "DecoderLayer",
    "Encoder",
    "EncoderLayer",
    "FeedForward",
    "GPTBlock",
    "GPTConfig",
    "GroupedQueryAttention",
    "KVCache",
    "LayerNorm",
    "Llama",
    "LlamaBlock",
    "LlamaConfig",
    "LoRALinear",
    "MultiHeadAttention",
    "PositionalEncoding",
    "RMSNorm",
    "SequenceClassifier",
    "SwiGLU",
    "TorchTransformer",
    "Transformer",
    "TransformerConfig",
    "add_lora",
    "apply_rotary",
    "causal_mask",
    "expand_kv",
    "from_hf",
    "from_hf_state",
    "lora_parameters",
    "merge_lora",
    "packed_linear",
    "padding_mask",
    "record_attention",
    "scaled_dot_product_attention",
    "sinusoidal_encoding",
    "target_mask",
]
