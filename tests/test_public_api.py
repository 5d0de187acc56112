"""The public names are a contract: notebooks and other chapters rely on them."""

import inspect

import torch
from torch import nn

import course_utils

EXPECTED = {
    # 01-02 attention and masks
    "scaled_dot_product_attention", "causal_mask", "padding_mask", "MultiHeadAttention", "record_attention",
    "packed_linear",
    # 03 positions
    "sinusoidal_encoding", "PositionalEncoding",
    # 04-05 layers and stacks
    "LayerNorm", "FeedForward", "EncoderLayer", "Encoder", "DecoderLayer", "Decoder", "target_mask",
    # 05-06 the full model, sequence to sequence, training
    "Transformer", "TransformerConfig", "TorchTransformer", "seq2seq_loss", "greedy_decode", "exact_match",
    "CharTokenizer", "encode_pairs", "random_batches", "reversal_pairs", "DateTask",
    "TrainConfig", "History", "train", "noam_lr", "lr_factor", "Recipe", "DATE_TRANSFORMER", "load_pretrained",
    # 07 the GPT
    "GPT", "GPTBlock", "GPTConfig", "KVCache", "estimate_loss", "load_tiny_shakespeare", "split_ids",
    "random_windows", "SHAKESPEARE_GPT_CPU", "SHAKESPEARE_GPT_GPU", "synchronize", "gpu_branch",
    # 08 translation
    "BPETokenizer", "pretokenize", "merge_pair", "learn_bpe", "learn_bpe_fast", "load_multi30k", "MULTI30K_QUICK",
    "MULTI30K_TRANSLATOR", "train_translator", "beam_search", "length_penalty", "translate", "bleu", "bleu_difference", "pad_batch",
    # 09
    "ProbeReport", "causality_probe", "dependency_heatmap", "equality_probe", "padding_probe", "position_probe", "batch_probe",
    "output_probe",
    # 10 GPT-2 and Llama
    "from_hf", "from_hf_state", "GPT2_NAMES", "GPT2_PACKED", "LLAMA_NAMES", "CausalLM", "Llama", "LlamaConfig",
    "RMSNorm", "SwiGLU", "apply_rotary", "expand_kv", "GroupedQueryAttention", "peak_memory",
    # every chapter
    "set_seed", "get_device", "count_parameters", "attention_heatmap", "attention_grid", "attention_chart",
    "positional_encoding_heatmap", "positional_waves", "positional_encoding_chart", "loss_curve",
    "evaluation_curve", "use_offline_charts",
}  # fmt: skip
GRADERS = {
    # 01-02
    "check_scaled_dot_product_attention", "check_causal_mask", "check_padding_mask", "check_sliding_window_mask",
    "check_masked_mean", "check_attention_with_bias", "check_split_heads", "check_merge_heads",
    "check_fused_head_projections", "check_grouped_query_attention",
    # 03-04
    "check_sinusoidal_encoding", "check_rotary_embedding", "check_alibi_bias", "check_layer_norm",
    "check_encoder_layer", "check_rms_norm", "check_pre_norm_layer",
    # 05-06
    "check_decoder_layer", "check_prefix_lm_mask", "check_teacher_forcing_batch", "check_label_smoothing",
    "check_greedy_decode", "check_weight_tying", "check_sequence_accuracy",
    # 07
    "check_gpt_block", "check_sampling_step", "check_top_p", "check_kv_cache_step",
    # 08
    "check_beam_step", "check_bpe_segment", "check_ngram_matches",
    # 09
    "check_future_leak", "check_diagnosis",
    # 10
    "check_rotary_halves", "check_expand_kv", "check_gpt2_block_weights",
    # every chapter: predict, then run
    "check_prediction",
}  # fmt: skip


def test_public_names_are_pinned():
    assert set(course_utils.__all__) == EXPECTED
    assert all(hasattr(course_utils, name) for name in EXPECTED)


def test_the_graders_live_in_checks_and_only_there():
    import course_utils.checks

    assert set(course_utils.checks.__all__) == GRADERS | {"Verdict"}
    assert all(callable(getattr(course_utils.checks, name)) for name in GRADERS)
    assert not [name for name in dir(course_utils) if name.startswith("check_")]


def test_only_graders_are_named_check():
    """Input validators say `validate_`; a name starting with `check_` is always an exercise grader."""
    import pkgutil

    for info in pkgutil.walk_packages(course_utils.__path__, "course_utils."):
        if info.name.startswith("course_utils.checks"):
            continue
        module = __import__(info.name, fromlist=["_"])
        assert not [n for n in vars(module) if n.startswith("check_")], info.name


def test_contract_signatures():
    sig = lambda f: list(inspect.signature(f).parameters)  # noqa: E731
    assert sig(course_utils.scaled_dot_product_attention)[:4] == ["query", "key", "value", "mask"]
    assert sig(course_utils.MultiHeadAttention)[:3] == ["d_model", "n_heads", "dropout"]
    assert sig(course_utils.MultiHeadAttention.forward)[1:6] == ["query", "key", "value", "mask", "need_weights"]
    assert inspect.signature(course_utils.MultiHeadAttention.forward).parameters["need_weights"].default is False
    assert sig(course_utils.DecoderLayer.forward)[1:5] == ["x", "memory", "src_mask", "tgt_mask"]
    assert sig(course_utils.Transformer)[:8] == [
        "src_vocab_size", "tgt_vocab_size", "d_model", "n_heads", "n_layers", "d_ff", "dropout", "max_len",
    ]  # fmt: skip
    assert sig(course_utils.greedy_decode)[:6] == ["model", "src", "src_mask", "max_len", "bos_id", "eos_id"]
    for decode in (course_utils.greedy_decode, course_utils.beam_search):  # after the source mask: keywords only
        parameters = list(inspect.signature(decode).parameters.values())[3:]
        assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in parameters), decode.__name__


def test_every_public_module_builds_and_runs():
    x = torch.randn(2, 4, 8)
    modules = [
        course_utils.MultiHeadAttention(8, 2), course_utils.PositionalEncoding(8),
        course_utils.LayerNorm(8), course_utils.FeedForward(8, 16),
        course_utils.EncoderLayer(8, 2, 16), course_utils.Encoder(8, 2, 16, 2),
    ]  # fmt: skip
    for m in modules:
        assert isinstance(m, nn.Module)
        out = m(x, x, x)[0] if isinstance(m, course_utils.MultiHeadAttention) else m(x)
        assert out.shape == x.shape
    assert course_utils.DecoderLayer(8, 2, 16)(x, torch.randn(2, 3, 8)).shape == x.shape
    assert course_utils.Decoder(8, 2, 16, 2)(x, torch.randn(2, 3, 8)).shape == x.shape
    for cls in (course_utils.Transformer, course_utils.TorchTransformer):
        model = cls(5, 6, d_model=8, n_heads=2, n_layers=1, d_ff=16)
        assert model(torch.randint(0, 5, (2, 3)), torch.randint(0, 6, (2, 4))).shape == (2, 4, 6)


def test_no_misspelled_names_ship():
    names = " ".join(dir(course_utils)).lower()
    assert "casual" not in names


def test_get_device_prefers_a_gpu_unless_told_otherwise(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # pretend there is a GPU
    monkeypatch.delenv("COURSE_DEVICE", raising=False)
    assert course_utils.get_device() == torch.device("cuda")
    monkeypatch.setenv("COURSE_DEVICE", "cpu")
    assert course_utils.get_device() == torch.device("cpu")


def test_get_device_falls_back_to_the_cpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    monkeypatch.delenv("COURSE_DEVICE", raising=False)
    assert course_utils.get_device() == torch.device("cpu")
