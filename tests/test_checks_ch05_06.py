"""Chapters 05-06: each new checker accepts the reference, names each classic mistake, and reports an unwritten
stub as not attempted; each prediction accepts its answer and explains every wrong letter."""

import pytest
import torch
import torch.nn.functional as F
from helpers import todo, verdict

from course_utils import causal_mask, greedy_decode
from course_utils.checks import (
    check_decoder_layer,
    check_greedy_decode,
    check_label_smoothing,
    check_prefix_lm_mask,
    check_sequence_accuracy,
    check_teacher_forcing_batch,
    check_weight_tying,
)

# --- 05: the decoder layer ---------------------------------------------------------------------------------------


def decoder_layer(layer, x, memory, src_mask, tgt_mask, *, queries_from_memory=False, self_mask="tgt",
                  cross_mask=True, cross_from_input=False, pre_norm=False):  # fmt: skip
    """The post-norm decoder layer, with switches for the classic mistakes."""
    if pre_norm:
        h = layer.norm1(x)
        x = x + layer.self_attn(h, h, h, tgt_mask)[0]
        h = layer.norm2(x)
        x = x + layer.cross_attn(h, memory, memory, src_mask)[0]
        return x + layer.feed_forward(layer.norm3(x))
    mask = {"tgt": tgt_mask, "none": None, "padding": tgt_mask[:, :, -1:, :]}[self_mask]
    a = layer.norm1(x + layer.self_attn(query=x, key=x, value=x, mask=mask)[0])
    q = x if cross_from_input else a
    if queries_from_memory:
        out = layer.cross_attn(query=memory, key=a, value=a)[0]
    else:
        out = layer.cross_attn(query=q, key=memory, value=memory, mask=src_mask if cross_mask else None)[0]
    c = layer.norm2(a + out)
    return layer.norm3(c + layer.feed_forward(c))


def test_decoder_layer_reference_passes(capsys):
    ok, out = verdict(check_decoder_layer, decoder_layer, capsys)
    assert ok and "nn.TransformerDecoderLayer" in out


def test_decoder_layer_with_dropout_modules_passes(capsys):
    def with_dropout(layer, x, memory, src_mask, tgt_mask):
        x = layer.norm1(x + layer.dropout1(layer.self_attn(x, x, x, tgt_mask)[0]))
        x = layer.norm2(x + layer.dropout2(layer.cross_attn(x, memory, memory, src_mask)[0]))
        return layer.norm3(x + layer.dropout3(layer.feed_forward(x)))

    ok, _ = verdict(check_decoder_layer, with_dropout, capsys)
    assert ok


def test_decoder_layer_not_written_is_not_attempted(capsys):
    ok, out = verdict(check_decoder_layer, todo, capsys)
    assert not ok and "not written yet" in out


@pytest.mark.parametrize(
    ("mistake", "named"),
    [
        ({"queries_from_memory": True}, "queries from memory"),
        ({"self_mask": "padding"}, "causal mask is forgotten"),
        ({"self_mask": "none"}, "without tgt_mask"),
        ({"cross_mask": False}, "memory mask is ignored"),
        ({"cross_from_input": True}, "output of the first sublayer"),
        ({"pre_norm": True}, "pre-norm"),
    ],
)
def test_decoder_layer_mistakes_are_named(mistake, named, capsys):
    ok, out = verdict(check_decoder_layer, lambda *args: decoder_layer(*args, **mistake), capsys)
    assert not ok and named in out


def test_decoder_layer_calling_the_layer_itself_is_named(capsys):
    ok, out = verdict(check_decoder_layer, lambda layer, *args: layer(*args), capsys)
    assert not ok and "called layer(...) itself" in out


# --- 05: the prefix-LM mask --------------------------------------------------------------------------------------


def prefix_lm(prefix_len, size, shift=0):
    j = torch.arange(size)
    return (causal_mask(size) | (j < (prefix_len + shift)[:, None, None]))[:, None]


def test_prefix_lm_mask_reference_passes(capsys):
    ok, _ = verdict(check_prefix_lm_mask, prefix_lm, capsys)
    assert ok


def test_prefix_lm_mask_not_written_is_not_attempted(capsys):
    ok, out = verdict(check_prefix_lm_mask, todo, capsys)
    assert not ok and "not written yet" in out


@pytest.mark.parametrize(
    ("fn", "named"),
    [
        (lambda p, size: prefix_lm(p, size, shift=1), "off by one"),
        (lambda p, size: prefix_lm(p, size, shift=-1), "off by one"),
        (lambda p, size: causal_mask(size).expand(len(p), 1, size, size), "the prefix is ignored"),
        (lambda p, size: ~prefix_lm(p, size), "inverted"),
        (lambda p, size: prefix_lm(p, size)[:, 0], "add the head axis"),
        (
            lambda p, size: prefix_lm(p, size) | (torch.arange(size)[:, None] < p[:, None, None, None]),
            "sees the future beyond it",
        ),
    ],
)
def test_prefix_lm_mask_mistakes_are_named(fn, named, capsys):
    ok, out = verdict(check_prefix_lm_mask, fn, capsys)
    assert not ok and named in out


# --- 05: (decoder input, labels) from raw sequences ---------------------------------------------------------------


def teacher_forcing_batch(sequences, bos, eos, pad, *, eos_in_labels=True, eos_after_padding=False):
    width = max(len(s) for s in sequences) + 1
    rows = []
    for s in sequences:
        if eos_after_padding:
            row = [bos, *s] + [pad] * (width - 1 - len(s)) + [eos]
        else:
            row = [bos, *s] + ([eos] if eos_in_labels else [pad]) + [pad] * (width - 1 - len(s))
        rows.append(row)
    full = torch.tensor(rows)  # (B, L + 2)
    return full[:, :-1], full[:, 1:]


def test_teacher_forcing_batch_reference_passes(capsys):
    ok, _ = verdict(check_teacher_forcing_batch, teacher_forcing_batch, capsys)
    assert ok


def test_teacher_forcing_batch_with_pads_instead_of_eos_in_the_input_passes(capsys):
    def padded_input(sequences, bos, eos, pad):
        inputs, labels = teacher_forcing_batch(sequences, bos, eos, pad)
        return inputs.masked_fill(labels == pad, pad), labels

    ok, _ = verdict(check_teacher_forcing_batch, padded_input, capsys)
    assert ok


def test_teacher_forcing_batch_not_written_is_not_attempted(capsys):
    ok, out = verdict(check_teacher_forcing_batch, todo, capsys)
    assert not ok and "not written yet" in out


def full_rows(sequences, bos, eos, pad):
    width = max(len(s) for s in sequences) + 2
    return torch.tensor([[bos, *s, eos] + [pad] * (width - 2 - len(s)) for s in sequences])


@pytest.mark.parametrize(
    ("fn", "named"),
    [
        (lambda *a: teacher_forcing_batch(*a)[::-1], "swapped"),
        (lambda *a: (teacher_forcing_batch(*a)[1],) * 2, "the same sequence"),
        (lambda *a: teacher_forcing_batch(*a, eos_in_labels=False), "no <eos>"),
        (lambda *a: teacher_forcing_batch(*a, eos_after_padding=True), "after the padding"),
        (lambda *a: (full_rows(*a),) * 2, "L + 2"),
        (lambda *a: tuple(t.float() for t in teacher_forcing_batch(*a)), "torch.long"),
        (
            lambda s, bos, eos, pad: (
                teacher_forcing_batch(s, bos, eos, pad, eos_in_labels=False)[1],
                teacher_forcing_batch(s, bos, eos, pad)[1],
            ),
            "start with <bos>",
        ),
    ],
)
def test_teacher_forcing_batch_mistakes_are_named(fn, named, capsys):
    ok, out = verdict(check_teacher_forcing_batch, fn, capsys)
    assert not ok and named in out


# --- 06: label smoothing ------------------------------------------------------------------------------------------


def smoothed(logits, target, eps, *, others=None, true=None, reduce="mean"):
    V = logits.size(-1)
    log_p = logits.log_softmax(-1)
    q = torch.full_like(log_p, eps / V if others is None else others(eps, V))
    q.scatter_(1, target[:, None], 1 - eps + eps / V if true is None else true(eps, V))
    loss = -(q * log_p).sum(-1)
    return loss.mean() if reduce == "mean" else loss.sum()


def test_label_smoothing_reference_passes(capsys):
    ok, out = verdict(check_label_smoothing, smoothed, capsys)
    assert ok and "F.cross_entropy" in out


def test_label_smoothing_not_written_is_not_attempted(capsys):
    ok, out = verdict(check_label_smoothing, todo, capsys)
    assert not ok and "not written yet" in out


@pytest.mark.parametrize(
    ("fn", "named"),
    [
        (lambda logits, target, eps: F.cross_entropy(logits, target), "smoothing is ignored"),
        (lambda *a: smoothed(*a, others=lambda e, V: e / (V - 1), true=lambda e, V: 1 - e), "(V - 1)"),
        (lambda *a: smoothed(*a, true=lambda e, V: 1 - e), "sums to 1"),
        (lambda *a: smoothed(*a, reduce="sum"), "take the mean"),
    ],
)
def test_label_smoothing_mistakes_are_named(fn, named, capsys):
    ok, out = verdict(check_label_smoothing, fn, capsys)
    assert not ok and named in out


# --- 06: greedy decoding ------------------------------------------------------------------------------------------


@torch.no_grad()
def greedy(model, src, src_mask, max_len, bos_id, eos_id, *, stop=True, keep_bos=True, keep_eos=True, feed_back=True,
           limit=0, masked=True):  # fmt: skip
    memory = model.encode(src, src_mask)
    ys = torch.tensor([[bos_id]])
    out = ys
    while out.size(1) < max_len + limit:
        logits = model.decode(ys, memory, src_mask, causal_mask(ys.size(1)) if masked else None)
        next_id = logits[:, -1].argmax(-1, keepdim=True)  # (1, 1)
        out = torch.cat([out, next_id], dim=1)
        ys = out if feed_back else ys
        if stop and next_id.item() == eos_id:
            break
    if not keep_eos and out[0, -1] == eos_id:
        out = out[:, :-1]
    return out if keep_bos else out[:, 1:]


def test_greedy_decode_reference_passes(capsys):
    ok, out = verdict(check_greedy_decode, greedy, capsys)
    assert ok and "course_utils.greedy_decode" in out


def test_greedy_decode_course_version_passes(capsys):
    ok, _ = verdict(check_greedy_decode, greedy_decode, capsys)
    assert ok


def test_greedy_decode_not_written_is_not_attempted(capsys):
    ok, out = verdict(check_greedy_decode, todo, capsys)
    assert not ok and "not written yet" in out


@pytest.mark.parametrize(
    ("mistake", "named"),
    [
        ({"stop": False}, "does not stop at <eos>"),
        ({"keep_bos": False}, "start with <bos>"),
        ({"keep_eos": False}, "keep the <eos>"),
        ({"feed_back": False}, "feed back each argmax"),
        ({"limit": 1}, "max_len counts every id"),
        ({"limit": -1}, "one id short"),
        ({"masked": False}, "without its causal mask"),
    ],
)
def test_greedy_decode_mistakes_are_named(mistake, named, capsys):
    ok, out = verdict(check_greedy_decode, lambda *args, **kwargs: greedy(*args, **kwargs, **mistake), capsys)
    assert not ok and named in out


def test_greedy_decode_reading_the_first_position_is_named(capsys):
    @torch.no_grad()
    def first_position(model, src, src_mask, *, max_len, bos_id, eos_id):
        memory, ys = model.encode(src, src_mask), torch.tensor([[bos_id]])
        while ys.size(1) < max_len and ys[0, -1] != eos_id:
            logits = model.decode(ys, memory, src_mask, causal_mask(ys.size(1)))
            ys = torch.cat([ys, logits[:, 0].argmax(-1, keepdim=True)], dim=1)
        return ys

    ok, out = verdict(check_greedy_decode, first_position, capsys)
    assert not ok and "LAST position" in out


# --- 06: weight tying ---------------------------------------------------------------------------------------------


def tie(model):
    model.generator.weight = model.tgt_embed.weight


def test_weight_tying_reference_passes_and_shows_the_saving(capsys):
    ok, out = verdict(check_weight_tying, tie, capsys)
    assert ok and "208 = V x d_model" in out


def test_weight_tying_counts_a_removed_bias_apart(capsys):
    def tie_without_bias(model):
        model.generator.weight = model.tgt_embed.weight
        model.generator.bias = None

    ok, out = verdict(check_weight_tying, tie_without_bias, capsys)
    assert ok and "221 fewer: 208 = V x d_model = 13 x 16" in out and "13 for the output projection's bias" in out


def test_weight_tying_not_written_is_not_attempted(capsys):
    ok, out = verdict(check_weight_tying, todo, capsys)
    assert not ok and "not written yet" in out


def copy_values(model):
    with torch.no_grad():
        model.generator.weight.copy_(model.tgt_embed.weight)


def share_data(model):
    model.generator.weight.data = model.tgt_embed.weight.data


def transpose(model):
    model.generator.weight = torch.nn.Parameter(model.tgt_embed.weight.T)


def source(model):
    model.generator.weight = model.src_embed.weight


@pytest.mark.parametrize(
    ("fn", "named"),
    [
        (copy_values, "copied, not shared"),
        (share_data, "still two Parameters"),
        (transpose, "transposed"),
        (source, "SOURCE embedding"),
        (lambda model: None, "not model.tgt_embed.weight"),
    ],
)
def test_weight_tying_mistakes_are_named(fn, named, capsys):
    ok, out = verdict(check_weight_tying, fn, capsys)
    assert not ok and named in out


# --- 06: sequence accuracy ----------------------------------------------------------------------------------------


def sequence_accuracy(predictions, labels, pad_id):
    real = labels != pad_id
    return ((predictions == labels) | ~real).all(dim=1).float().mean().item()


def test_sequence_accuracy_reference_passes(capsys):
    ok, _ = verdict(check_sequence_accuracy, sequence_accuracy, capsys)
    assert ok


def test_sequence_accuracy_not_written_is_not_attempted(capsys):
    ok, out = verdict(check_sequence_accuracy, todo, capsys)
    assert not ok and "not written yet" in out


@pytest.mark.parametrize(
    ("fn", "named"),
    [
        (lambda p, y, pad: (p == y).all(1).float().mean(), "padded positions count"),
        (lambda p, y, pad: ((p == y) & (y != pad)).sum() / (y != pad).sum(), "token-level accuracy: a row"),
        (lambda p, y, pad: (p == y).float().mean(), "padding included"),
        (lambda p, y, pad: ((p == y) | (y == pad)).all(1).sum(), "number of rows right"),
    ],
)
def test_sequence_accuracy_mistakes_are_named(fn, named, capsys):
    ok, out = verdict(check_sequence_accuracy, fn, capsys)
    assert not ok and named in out


# --- predictions --------------------------------------------------------------------------------------------------
