"""The public names are a contract: notebooks and other chapters rely on them."""

import inspect

import torch
from torch import nn

import course_utils

EXPECTED = {
    "GPT", "GPTBlock", "KVCache", "TINY_SHAKESPEARE", "load_tiny_shakespeare", "random_windows", "split_ids",
    "estimate_loss", "evaluation_curve", "check_next_token_targets", "check_temperature", "check_top_k",
    "CharTokenizer", "DATE_FORMATS", "DateTask", "Decoder", "DecoderLayer", "Encoder", "EncoderLayer",
    "FeedForward", "History", "LayerNorm", "MultiHeadAttention", "PositionalEncoding", "TorchTransformer",
    "TrainConfig", "Transformer", "attention_chart", "attention_grid", "attention_heatmap", "causal_mask",
    "check_causal_mask", "check_label_smoothing", "check_layer_norm", "check_merge_heads",
    "check_mha_parameter_count", "check_padding_mask", "check_position_shift", "check_feed_forward",
    "check_pre_norm_layer", "check_cross_attention", "check_target_mask", "check_noam_lr",
    "check_scaled_dot_product_attention", "check_shift_right", "check_sinusoidal_encoding", "check_split_heads",
    "count_parameters", "encode_pairs", "exact_match", "fast_kernels", "get_device", "greedy_decode",
    "loss_curve", "lr_factor", "make_optimizer", "noam_lr", "padding_mask", "positional_encoding_chart",
    "positional_encoding_heatmap", "positional_waves", "random_batches", "reversal_pairs",
    "scaled_dot_product_attention", "seq2seq_loss", "set_seed", "sinusoidal_encoding", "target_mask", "train", "train_step",
    "use_offline_charts", "PRETRAINED_RECIPES", "Pretrained", "load_pretrained",
}  # fmt: skip


def test_public_names_are_pinned():
    assert set(course_utils.__all__) == EXPECTED
    assert all(hasattr(course_utils, name) for name in EXPECTED)


def test_contract_signatures():
    sig = lambda f: list(inspect.signature(f).parameters)  # noqa: E731
    assert sig(course_utils.scaled_dot_product_attention)[:4] == ["query", "key", "value", "mask"]
    assert sig(course_utils.MultiHeadAttention)[:3] == ["d_model", "n_heads", "dropout"]
    assert sig(course_utils.MultiHeadAttention.forward)[1:5] == ["query", "key", "value", "mask"]
    assert sig(course_utils.DecoderLayer.forward)[1:5] == ["x", "memory", "src_mask", "tgt_mask"]
    assert sig(course_utils.Transformer)[:8] == [
        "src_vocab_size", "tgt_vocab_size", "d_model", "n_heads", "n_layers", "d_ff", "dropout", "max_len",
    ]  # fmt: skip
    assert sig(course_utils.greedy_decode)[:6] == ["model", "src", "src_mask", "max_len", "bos_id", "eos_id"]


def test_every_public_module_builds_and_runs():
    x = torch.randn(2, 4, 8)
    modules = [
        course_utils.MultiHeadAttention(8, 2), course_utils.PositionalEncoding(8),
        course_utils.LayerNorm(8), course_utils.FeedForward(8, 16),
        course_utils.EncoderLayer(8, 2, 16), course_utils.Encoder(8, 2, 16, 2),
    ]  # fmt: skip
    for m in modules:
        assert isinstance(m, nn.Module)
        out = m(x, x, x) if isinstance(m, course_utils.MultiHeadAttention) else m(x)
        assert out.shape == x.shape
    assert course_utils.DecoderLayer(8, 2, 16)(x, torch.randn(2, 3, 8)).shape == x.shape
    assert course_utils.Decoder(8, 2, 16, 2)(x, torch.randn(2, 3, 8)).shape == x.shape
    for cls in (course_utils.Transformer, course_utils.TorchTransformer):
        model = cls(5, 6, d_model=8, n_heads=2, n_layers=1, d_ff=16)
        assert model(torch.randint(0, 5, (2, 3)), torch.randint(0, 6, (2, 4))).shape == (2, 4, 6)


def test_no_misspelled_names_ship():
    names = " ".join(dir(course_utils)).lower()
    assert "casual" not in names


def test_get_device_can_be_forced(monkeypatch):
    monkeypatch.setenv("COURSE_DEVICE", "cpu")
    assert course_utils.get_device() == torch.device("cpu")
