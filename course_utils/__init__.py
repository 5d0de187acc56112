"""course_utils: the tested code of the course *Transformers from Scratch*.

Every notebook builds one concept live, checks it against this package and PyTorch, and from then on imports it
from here: ``from course_utils import MultiHeadAttention``. Conventions: batch first, ``(B, T, d_model)``; heads
``(B, n_heads, T, d_k)``; bool masks with True = may attend.

Five rooms (sub-packages) over three small modules, and the grader's command with its link to the kernel; imports go
down this list, never up (``tests/test_structure.py``):

========================  ==========================================================================================
``settings``, ``utils``   every ``COURSE_*`` environment variable; devices, seeds, train/eval modes
``dry_run``               what a GPU dry run (``make gpu-dry-run``) cuts short, and its record of each cut
``model/``                the Transformer proper: attention, masks, positions, layers, encoder, decoder,
                          ``Transformer``, ``GPT``, ``Llama`` (and ``CausalLM``, what both share), and their twins
                          from PyTorch's modules and Hugging Face's models (one name table per family); LoRA
                          adapters and a classifier head for a pretrained model
``data/``                 tokenizers (one protocol; GPT-2's byte-level BPE) and datasets: toy pairs, dates, Tiny
                          Shakespeare, Multi30k, instructions built from them
``training/``             training loop (with checkpoints it resumes from), recipes, shipped weights, seq2seq loss
                          and batches, decoding, metrics, data-parallel pieces on ``torch.distributed``, instruction
                          tuning (chat template, the loss masked on the prompt)
``teaching/``             probes that name bugs, plots and interactive charts
``checks/``               the exercise graders: ``from course_utils.checks import check_layer_norm``
``remote``                the grader's link to a kernel: the checkers call students' functions across it, as data
``grade``                 the notebook grader: ``python -m course_utils.grade submissions/*.ipynb``
========================  ==========================================================================================

``model`` and ``data`` do not import each other. This module re-exports every name the chapters use; each room's
``__init__`` lists its modules.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names, for readers and type checkers; at run time __getattr__ below imports them on first use
    from .data import (
        GPT2_PATTERN,
        BPETokenizer,
        ByteBPE,
        CharTokenizer,
        DateTask,
        bytes_to_unicode,
        download_all,
        encode_pairs,
        gpt2_files,
        instruction_pairs,
        learn_bpe,
        learn_bpe_fast,
        learn_bpe_incremental,
        learn_merges,
        load_gpt2_tokenizer,
        load_multi30k,
        load_tiny_shakespeare,
        merge_pair,
        merge_tree,
        pretokenize,
        pretraining_texts,
        random_batches,
        random_windows,
        reversal_pairs,
        split_ids,
        train_byte_bpe,
    )
    from .model import (
        GPT,
        GPT2_NAMES,
        GPT2_PACKED,
        LLAMA_NAMES,
        CausalLM,
        Decoder,
        DecoderLayer,
        Encoder,
        EncoderLayer,
        FeedForward,
        GPTBlock,
        GPTConfig,
        GroupedQueryAttention,
        KVCache,
        LayerNorm,
        Llama,
        LlamaConfig,
        LoRALinear,
        MultiHeadAttention,
        PositionalEncoding,
        RMSNorm,
        SequenceClassifier,
        SwiGLU,
        TorchTransformer,
        Transformer,
        TransformerConfig,
        add_lora,
        apply_rotary,
        causal_mask,
        expand_kv,
        from_hf,
        from_hf_state,
        lora_parameters,
        merge_lora,
        packed_linear,
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
        dependency_heatmap,
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
        BYTE_GPT,
        DATE_TRANSFORMER,
        IGNORE,
        MULTI30K_QUICK,
        MULTI30K_TRANSLATOR,
        SHAKESPEARE_GPT_CPU,
        SHAKESPEARE_GPT_GPU,
        ChatTemplate,
        CheckpointMismatch,
        History,
        Recipe,
        TrainConfig,
        average_gradients,
        backend_for,
        beam_search,
        bleu,
        bleu_difference,
        checkpoint_path,
        encode_example,
        estimate_loss,
        exact_match,
        greedy_decode,
        length_penalty,
        load_checkpoint,
        load_pretrained,
        lr_factor,
        mask_prompt,
        noam_lr,
        pad_batch,
        pad_examples,
        same_on_every_rank,
        seq2seq_loss,
        shard,
        spawn,
        train,
        train_translator,
        translate,
    )
    from .utils import count_parameters, get_device, gpu_branch, peak_memory, set_seed, synchronize

__version__ = "0.2.0"

__all__ = [
    "BYTE_GPT",
    "DATE_TRANSFORMER",
    "GPT",
    "GPT2_NAMES",
    "GPT2_PACKED",
    "GPT2_PATTERN",
    "IGNORE",
    "LLAMA_NAMES",
    "MULTI30K_QUICK",
    "MULTI30K_TRANSLATOR",
    "SHAKESPEARE_GPT_CPU",
    "SHAKESPEARE_GPT_GPU",
    "BPETokenizer",
    "ByteBPE",
    "CausalLM",
    "CharTokenizer",
    "ChatTemplate",
    "CheckpointMismatch",
    "DateTask",
    "Decoder",
    "DecoderLayer",
    "Encoder",
    "EncoderLayer",
    "FeedForward",
    "GPTBlock",
    "GPTConfig",
    "GroupedQueryAttention",
    "History",
    "KVCache",
    "LayerNorm",
    "Llama",
    "LlamaConfig",
    "LoRALinear",
    "MultiHeadAttention",
    "PositionalEncoding",
    "ProbeReport",
    "RMSNorm",
    "Recipe",
    "SequenceClassifier",
    "SwiGLU",
    "TorchTransformer",
    "TrainConfig",
    "Transformer",
    "TransformerConfig",
    "add_lora",
    "apply_rotary",
    "attention_chart",
    "attention_grid",
    "attention_heatmap",
    "average_gradients",
    "backend_for",
    "batch_probe",
    "beam_search",
    "bleu",
    "bleu_difference",
    "bytes_to_unicode",
    "causal_mask",
    "causality_probe",
    "checkpoint_path",
    "count_parameters",
    "dependency_heatmap",
    "download_all",
    "encode_example",
    "encode_pairs",
    "equality_probe",
    "estimate_loss",
    "evaluation_curve",
    "exact_match",
    "expand_kv",
    "from_hf",
    "from_hf_state",
    "get_device",
    "gpt2_files",
    "gpu_branch",
    "greedy_decode",
    "instruction_pairs",
    "learn_bpe",
    "learn_bpe_fast",
    "learn_bpe_incremental",
    "learn_merges",
    "length_penalty",
    "load_checkpoint",
    "load_gpt2_tokenizer",
    "load_multi30k",
    "load_pretrained",
    "load_tiny_shakespeare",
    "lora_parameters",
    "loss_curve",
    "lr_factor",
    "mask_prompt",
    "merge_lora",
    "merge_pair",
    "merge_tree",
    "noam_lr",
    "output_probe",
    "packed_linear",
    "pad_batch",
    "pad_examples",
    "padding_mask",
    "padding_probe",
    "peak_memory",
    "position_probe",
    "positional_encoding_chart",
    "positional_encoding_heatmap",
    "positional_waves",
    "pretokenize",
    "pretraining_texts",
    "random_batches",
    "random_windows",
    "record_attention",
    "reversal_pairs",
    "same_on_every_rank",
    "scaled_dot_product_attention",
    "seq2seq_loss",
    "set_seed",
    "shard",
    "sinusoidal_encoding",
    "spawn",
    "split_ids",
    "synchronize",
    "target_mask",
    "train",
    "train_byte_bpe",
    "train_translator",
    "translate",
    "use_offline_charts",
]


@functools.cache
def _exports() -> Any:
    """The import statements under ``TYPE_CHECKING`` above, compiled: the one list of what this module re-exports."""
    tree = ast.parse(Path(__file__).read_text(encoding="utf-8"))
    block = next(n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
    return compile(ast.Module(body=block.body, type_ignores=[]), __file__, "exec")


def __getattr__(name: str) -> Any:
    """The first name asked for imports every room, as ``import course_utils`` did before it was lazy; until then
    ``course_utils.grade``, ``course_utils.checks`` and ``course_utils.remote`` (the grader, its runner and a kernel's
    end of the link, each started once per graded notebook) load only what they use, not the plots' matplotlib or
    the conversions' libraries. A name that is not exported, a room's among them, is left to the import system."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    exec(_exports(), globals())
    return globals()[name]


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
