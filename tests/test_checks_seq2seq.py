"""The checkers of ``course_utils.checks.seq2seq``, the encoder-decoder (chapters 05-06), against students' answers:
right answers written in other styles pass, each classic mistake fails with a message that names it, and an
unwritten stub is reported as not attempted.
"""

import pytest
import torch
import torch.nn.functional as F
from helpers import judged, todo, verdict
from torch.nn.utils.rnn import pad_sequence

from course_utils import causal_mask, greedy_decode
from course_utils.checks import (
    check_decoder_layer,
    check_greedy_decode,
    check_prefix_lm_mask,
    check_teacher_forcing_batch,
)

# --- 05: the decoder layer ---------------------------------------------------------------------------------------


def decoder_solution(layer, x, memory, src_mask, tgt_mask):  # the notebook's solution
    a = layer.norm1(x + layer.dropout1(layer.self_attn(query=x, key=x, value=x, mask=tgt_mask)[0]))  # (B, T, d)
    c = layer.norm2(a + layer.dropout2(layer.cross_attn(query=a, key=memory, value=memory, mask=src_mask)[0]))
    return layer.norm3(c + layer.dropout3(layer.feed_forward(c)))  # (B, T, d_model)


def decoder_positional(layer, x, memory, src_mask, tgt_mask):
    out, _ = layer.self_attn(x, x, x, tgt_mask)
    x = layer.norm1(x + out)
    out, _weights = layer.cross_attn(x, memory, memory, src_mask, need_weights=True)
    x = layer.norm2(x + out)
    return layer.norm3(x + layer.feed_forward(x))


def decoder_blocks(layer, x, memory, src_mask, tgt_mask):
    x = layer.norm1(x + layer.self_attention_block(x, tgt_mask))
    x = layer.norm2(x + layer.cross_attention_block(x, memory, src_mask))
    return layer.norm3(x + layer.feed_forward_block(x))


def decoder_causal_and_tgt(layer, x, memory, src_mask, tgt_mask):
    """An extra causal mask ANDed on tgt_mask changes nothing (tgt_mask is causal already)."""
    T = x.size(1)
    mask = tgt_mask & causal_mask(T, device=x.device)
    sublayers = [
        lambda h: layer.self_attn(query=h, key=h, value=h, mask=mask)[0],
        lambda h: layer.cross_attn(query=h, key=memory, value=memory, mask=src_mask)[0],
        layer.feed_forward,
    ]
    for sublayer, norm in zip(sublayers, [layer.norm1, layer.norm2, layer.norm3]):
        x = norm(x + sublayer(x))
    return x


def decoder(layer, x, memory, src_mask, tgt_mask, *, self_mask="tgt", cross_mask="src", cross_from_input=False,
            pre_norm=False, ffn_reads="c", ffn_residual=True):  # fmt: skip
    """The post-norm decoder layer, with switches for the classic mistakes."""
    if pre_norm:
        h = layer.norm1(x)
        x = x + layer.self_attn(h, h, h, tgt_mask)[0]
        h = layer.norm2(x)
        x = x + layer.cross_attn(h, memory, memory, src_mask)[0]
        return x + layer.feed_forward(layer.norm3(x))
    T = x.size(1)
    self_masks = {
        "tgt": tgt_mask,
        "none": None,
        "causal": causal_mask(T, device=x.device),
        "flipped": ~tgt_mask,
        "causal 4": causal_mask(4),
    }
    cross_masks = {"src": src_mask, "none": None, "flipped": ~src_mask}
    a = layer.norm1(x + layer.self_attn(query=x, key=x, value=x, mask=self_masks[self_mask])[0])
    q = x if cross_from_input else a
    c = layer.norm2(a + layer.cross_attn(query=q, key=memory, value=memory, mask=cross_masks[cross_mask])[0])
    ffn = layer.feed_forward(a if ffn_reads == "a" else c)
    return layer.norm3(c + ffn if ffn_residual else ffn)


def decoder_norm_then_add(layer, x, memory, src_mask, tgt_mask):
    x = x + layer.norm1(layer.self_attn(query=x, key=x, value=x, mask=tgt_mask)[0])
    x = x + layer.norm2(layer.cross_attn(query=x, key=memory, value=memory, mask=src_mask)[0])
    return x + layer.norm3(layer.feed_forward(x))


def decoder_no_cross(layer, x, memory, src_mask, tgt_mask):
    a = layer.norm1(x + layer.self_attn(query=x, key=x, value=x, mask=tgt_mask)[0])
    return layer.norm3(a + layer.feed_forward(a))


def decoder_attention_tuple(layer, x, memory, src_mask, tgt_mask):
    a = layer.norm1(x + layer.self_attn(query=x, key=x, value=x, mask=tgt_mask))
    c = layer.norm2(a + layer.cross_attn(query=a, key=memory, value=memory, mask=src_mask)[0])
    return layer.norm3(c + layer.feed_forward(c))


def decoder_is_causal(layer, x, memory, src_mask, tgt_mask):
    a = layer.norm1(x + layer.self_attn(query=x, key=x, value=x, is_causal=True)[0])
    c = layer.norm2(a + layer.cross_attn(query=a, key=memory, value=memory, mask=src_mask)[0])
    return layer.norm3(c + layer.feed_forward(c))


def decoder_no_grad(layer, x, memory, src_mask, tgt_mask):
    with torch.no_grad():
        return decoder_solution(layer, x, memory, src_mask, tgt_mask)


def decoder_memory_detached(layer, x, memory, src_mask, tgt_mask):
    return decoder_solution(layer, x, memory.detach(), src_mask, tgt_mask)


def decoder_in_place(layer, x, memory, src_mask, tgt_mask):
    x += layer.self_attn(query=x, key=x, value=x, mask=tgt_mask)[0]
    a = layer.norm1(x)
    c = layer.norm2(a + layer.cross_attn(query=a, key=memory, value=memory, mask=src_mask)[0])
    return layer.norm3(c + layer.feed_forward(c))


def decoder_swapped_roles(layer, x, memory, src_mask, tgt_mask):
    a = layer.norm1(x + layer.self_attn(query=x, key=x, value=x, mask=tgt_mask)[0])
    c = layer.norm2(a + layer.cross_attn(query=memory, key=a, value=a)[0])
    return layer.norm3(c + layer.feed_forward(c))


DECODER_ANSWERS = [
    pytest.param(decoder_solution, None, id="right: the notebook's solution"),
    pytest.param(decoder_positional, None, id="right: positional arguments, tuples unpacked"),
    pytest.param(decoder_blocks, None, id="right: the layer's own *_block methods"),
    pytest.param(decoder_causal_and_tgt, None, id="right: a loop over sublayers, causal & tgt_mask"),
    pytest.param(lambda layer, *args: layer(*args), "you called layer(...) itself", id="wrong: calls the layer"),
    pytest.param(
        lambda layer, x, memory, src_mask, tgt_mask: layer(x, memory, src_mask=src_mask, tgt_mask=tgt_mask),
        "you called layer(...) itself",
        id="wrong: calls the layer with keywords",
    ),
    pytest.param(lambda *a: decoder(*a, self_mask="none"), "without tgt_mask", id="wrong: no self-attention mask"),
    pytest.param(lambda *a: decoder(*a, self_mask="causal"), "tgt_mask is ignored", id="wrong: own causal mask"),
    pytest.param(lambda *a: decoder(*a, self_mask="causal 4"), "tgt_mask is ignored", id="wrong: causal_mask(4)"),
    pytest.param(decoder_is_causal, "tgt_mask is ignored", id="wrong: is_causal=True instead of tgt_mask"),
    pytest.param(lambda *a: decoder(*a, cross_mask="none"), "memory mask is ignored", id="wrong: no src_mask"),
    pytest.param(
        lambda *a: decoder(*a, self_mask="flipped", cross_mask="flipped"), "convention is flipped", id="wrong: ~masks"
    ),
    pytest.param(lambda *a: decoder(*a, self_mask="flipped"), "convention is flipped", id="wrong: ~tgt_mask"),
    pytest.param(lambda *a: decoder(*a, cross_mask="flipped"), "convention is flipped", id="wrong: ~src_mask"),
    pytest.param(
        lambda *a: decoder(*a, cross_from_input=True), "output of the first sublayer", id="wrong: cross reads x"
    ),
    pytest.param(lambda *a: decoder(*a, pre_norm=True), "pre-norm", id="wrong: pre-norm"),
    pytest.param(decoder_norm_then_add, "added after the norm", id="wrong: x + norm(sublayer(x))"),
    pytest.param(lambda *a: decoder(*a, ffn_reads="a"), "reads a, the first sublayer's output", id="wrong: ffn(a)"),
    pytest.param(lambda *a: decoder(*a, ffn_residual=False), "has no residual", id="wrong: no ffn residual"),
    pytest.param(decoder_no_cross, "cross-attention is skipped", id="wrong: no cross-attention"),
    pytest.param(decoder_attention_tuple, "take its [0]", id="wrong: the (output, weights) pair added"),
    pytest.param(
        lambda layer, *args: layer.forward(*args), "you called layer(...) itself", id="wrong: calls layer.forward"
    ),
    pytest.param(
        lambda layer, *args: type(layer).forward(layer, *args),
        "you called layer(...) itself",
        id="wrong: calls the class's forward on the layer",
    ),
    pytest.param(decoder_swapped_roles, "queries from memory", id="wrong: queries from memory"),
    pytest.param(decoder_no_grad, "cannot be trained through", id="wrong: torch.no_grad()"),
    pytest.param(lambda *a: decoder_solution(*a).detach(), "cannot be trained through", id="wrong: output detached"),
    pytest.param(decoder_memory_detached, "memory", id="wrong: memory detached"),
    pytest.param(decoder_in_place, "changed its input x in place", id="wrong: x += ... in place"),
    pytest.param(lambda *a: decoder_solution(*a).to("meta"), "is on meta", id="wrong: another device"),
]


@pytest.mark.parametrize(("fn", "expected"), DECODER_ANSWERS)
def test_decoder_layer_answers(fn, expected, capsys):
    judged(check_decoder_layer, fn, expected, capsys)


# --- 05: the prefix-LM mask --------------------------------------------------------------------------------------


def prefix_solution(prefix_len, size):  # the notebook's solution
    j = torch.arange(size, device=prefix_len.device)  # key positions
    in_prefix = j < prefix_len[:, None, None]  # (B, 1, T): key j lies in the prefix, for every query
    causal = j[None, :] <= j[:, None]  # (T, T): key j <= query i
    return (causal | in_prefix)[:, None]  # (B, T, T) -> (B, 1, T, T)


def prefix_loops(prefix_len, size):
    B = len(prefix_len)
    mask = torch.zeros(B, 1, size, size, dtype=torch.bool)
    for b in range(B):
        P = int(prefix_len[b])
        for i in range(size):
            for j in range(size):
                mask[b, 0, i, j] = j < P or j <= i
    return mask


def prefix_blocks(prefix_len, size):
    """The causal triangle, then the prefix block made visible: each sequence its own square."""
    masks = []
    for P in prefix_len.tolist():
        m = torch.ones(size, size, device=prefix_len.device).tril().bool()
        m[:P, :P] = True
        masks.append(m)
    return torch.stack(masks).unsqueeze(1)


def prefix_both_in_prefix(prefix_len, size):
    """causal | (query in the prefix AND key in the prefix): the same mask, written another way."""
    pos = torch.arange(size, device=prefix_len.device)
    p = prefix_len.view(-1, 1, 1, 1)
    return (pos[None, None, None, :] <= pos[None, None, :, None]) | ((pos[:, None] < p) & (pos[None, :] < p))


def prefix_mask(prefix_len, size, *, shift=0, size_used=None):
    size = size if size_used is None else size_used
    j = torch.arange(size)
    return (causal_mask(size) | (j < (prefix_len + shift)[:, None, None]))[:, None]


def prefix_query_axis(prefix_len, size):
    """The prefix condition on the query axis (rows) instead of the key axis."""
    i = torch.arange(size)[:, None]  # (T, 1)
    return (causal_mask(size) | (i < prefix_len[:, None, None]))[:, None]


def prefix_in_place(prefix_len, size):
    prefix_len -= 1  # the last position of the prefix, in place
    j = torch.arange(size)
    return (causal_mask(size) | (j <= prefix_len[:, None, None]))[:, None]


def prefix_without_device(prefix_len, size):
    """The notebook's solution with its positions made on the CPU, whatever prefix_len's device."""
    j = torch.arange(size)
    return ((j[None, :] <= j[:, None]) | (j < prefix_len[:, None, None]))[:, None]


PREFIX_ANSWERS = [
    pytest.param(prefix_solution, None, id="right: the notebook's solution"),
    pytest.param(prefix_loops, None, id="right: three loops"),
    pytest.param(prefix_blocks, None, id="right: tril, then the prefix square"),
    pytest.param(prefix_both_in_prefix, None, id="right: causal | (query and key in the prefix)"),
    pytest.param(lambda p, size: ~prefix_solution(p, size), "inverted", id="wrong: inverted"),
    pytest.param(
        prefix_without_device,
        "A tensor made without device= is made on the CPU",
        id="wrong: arange without device= (right on the CPU)",
    ),
    pytest.param(lambda p, size: prefix_mask(p, size, shift=1), "off by one", id="wrong: j <= P"),
    pytest.param(lambda p, size: prefix_mask(p, size, shift=-1), "off by one", id="wrong: j < P - 1"),
    pytest.param(prefix_query_axis, "sees the future beyond it", id="wrong: the prefix on the query axis"),
    pytest.param(
        lambda p, size: prefix_solution(p, size).transpose(-2, -1), "transposed", id="wrong: rows and columns swapped"
    ),
    pytest.param(lambda p, size: prefix_mask(p, 6, size_used=6), "size = 8", id="wrong: size hard-coded to 6"),
    pytest.param(
        lambda p, size: causal_mask(size).expand(len(p), 1, size, size), "prefix is ignored", id="wrong: causal only"
    ),
    pytest.param(lambda p, size: prefix_solution(p, size).int(), "bool mask", id="wrong: int mask"),
    pytest.param(lambda p, size: prefix_solution(p, size)[:, 0], "head axis", id="wrong: no head axis"),
    pytest.param(prefix_in_place, "changed its input prefix_len in place", id="wrong: prefix_len -= 1, in place"),
    pytest.param(lambda p, size: prefix_solution(p, size).to("meta"), "is on meta", id="wrong: another device"),
]


@pytest.mark.parametrize(("fn", "expected"), PREFIX_ANSWERS)
def test_prefix_lm_mask_answers(fn, expected, capsys):
    judged(check_prefix_lm_mask, fn, expected, capsys)


# --- 05: a teacher-forcing batch ----------------------------------------------------------------------------------


def forcing_solution(sequences, bos_id, eos_id, pad_id):  # the notebook's solution
    width = max(len(s) for s in sequences) + 2  # <bos> y <eos>
    rows = [[bos_id, *s, eos_id] + [pad_id] * (width - 2 - len(s)) for s in sequences]
    full = torch.tensor(rows, dtype=torch.long)  # (B, L + 2)
    return full[:, :-1], full[:, 1:]  # (B, L + 1) each: read shifted right, predict shifted left


def forcing_pad_sequence(sequences, bos_id, eos_id, pad_id):
    inputs = pad_sequence([torch.tensor([bos_id, *s]) for s in sequences], batch_first=True, padding_value=pad_id)
    labels = pad_sequence([torch.tensor([*s, eos_id]) for s in sequences], batch_first=True, padding_value=pad_id)
    return [inputs, labels]  # a list, not a tuple


def forcing_fill(sequences, bos_id, eos_id, pad_id):
    B, L = len(sequences), max(map(len, sequences))
    inputs = torch.full((B, L + 1), pad_id)
    labels = torch.full((B, L + 1), pad_id)
    for b, s in enumerate(sequences):
        n = len(s)
        inputs[b, 0] = bos_id
        inputs[b, 1 : n + 1] = torch.tensor(s)
        labels[b, :n] = torch.tensor(s)
        labels[b, n] = eos_id
    return inputs, labels


def forcing_from_labels(sequences, bos_id, eos_id, pad_id):
    """Labels first, then the input: <bos> followed by the labels without their last column."""
    L = max(len(s) for s in sequences)
    labels = torch.tensor([tuple(s) + (eos_id,) + (pad_id,) * (L - len(s)) for s in sequences])
    bos = torch.full((len(sequences), 1), bos_id, dtype=labels.dtype)
    return torch.cat([bos, labels[:, :-1]], dim=1), labels


def forcing(sequences, bos_id, eos_id, pad_id, *, eos=True, eos_after_padding=False, left=False):
    width = max(len(s) for s in sequences) + 2
    rows = []
    for s in sequences:
        padding = [pad_id] * (width - 2 - len(s))
        if eos_after_padding:
            rows.append([bos_id, *s, *padding, eos_id])
        elif left:
            rows.append([*padding, bos_id, *s, eos_id])
        else:
            rows.append([bos_id, *s, eos_id if eos else pad_id, *padding])
    full = torch.tensor(rows)
    return full[:, :-1], full[:, 1:]


def forcing_hard_coded(sequences, bos_id, eos_id, pad_id, *, bos=None, eos=None, pad=None):
    return forcing_solution(
        sequences, bos_id if bos is None else bos, eos_id if eos is None else eos, pad_id if pad is None else pad
    )


def forcing_first_length(sequences, bos_id, eos_id, pad_id):
    L = len(sequences[0])
    inputs = torch.full((len(sequences), L + 1), pad_id)
    labels = torch.full((len(sequences), L + 1), pad_id)
    for b, s in enumerate(sequences):
        s = s[:L]
        inputs[b, : len(s) + 1] = torch.tensor([bos_id, *s])
        labels[b, : len(s) + 1] = torch.tensor([*s, eos_id])
    return inputs, labels


def forcing_lexicographic_max(sequences, bos_id, eos_id, pad_id):
    L = len(max(sequences))  # max compares the lists themselves, not their lengths
    rows = [[bos_id, *s, eos_id] + [pad_id] * (L - len(s)) for s in sequences]
    full = torch.tensor(rows)
    return full[:, :-1], full[:, 1:]


def forcing_batch_of_three(sequences, bos_id, eos_id, pad_id):
    inputs, labels = forcing_solution(sequences, bos_id, eos_id, pad_id)
    return inputs[:3], labels[:3]  # B written into the code


def forcing_appends(sequences, bos_id, eos_id, pad_id):
    L = max(len(s) for s in sequences)
    labels, inputs = [], []
    for s in sequences:
        s.append(eos_id)  # changes the caller's list
        labels.append(s + [pad_id] * (L + 1 - len(s)))
        inputs.append([bos_id, *labels[-1][:-1]])
    return torch.tensor(inputs), torch.tensor(labels)


def forcing_left_shift(sequences, bos_id, eos_id, pad_id):
    _, labels = forcing_solution(sequences, bos_id, eos_id, pad_id)
    return F.pad(labels[:, 1:], (0, 1), value=pad_id), labels


def forcing_wrapped(sequences, bos_id, eos_id, pad_id):
    L = max(len(s) for s in sequences)
    return torch.tensor([[bos_id, *s, eos_id] + [pad_id] * (L - len(s)) for s in sequences])


def forcing_zeros(sequences, bos_id, eos_id, pad_id):
    inputs, labels = forcing_fill(sequences, bos_id, eos_id, pad_id)
    return torch.zeros(inputs.shape) + inputs, torch.zeros(labels.shape) + labels


def forcing_labels_minus_100(sequences, bos_id, eos_id, pad_id):  # Hugging Face's habit, where this batch uses pad_id
    inputs, labels = forcing_solution(sequences, bos_id, eos_id, pad_id)
    return inputs, labels.masked_fill(labels == pad_id, -100)


FORCING_ANSWERS = [
    pytest.param(forcing_solution, None, id="right: the notebook's solution"),
    pytest.param(forcing_pad_sequence, None, id="right: pad_sequence, a list returned"),
    pytest.param(forcing_fill, None, id="right: torch.full and a loop, <pad> under padded labels"),
    pytest.param(forcing_from_labels, None, id="right: tuples, labels first, then <bos> + labels[:, :-1]"),
    pytest.param(lambda *a: forcing(*a)[::-1], "swapped", id="wrong: shifted the wrong way (swapped)"),
    pytest.param(forcing_left_shift, "shifted LEFT", id="wrong: the input is the labels shifted left"),
    pytest.param(lambda *a: (forcing(*a)[1],) * 2, "the same sequence", id="wrong: the same tensor twice"),
    pytest.param(lambda *a: forcing(*a, eos=False), "no <eos>", id="wrong: no <eos>"),
    pytest.param(lambda *a: forcing(*a, eos_after_padding=True), "after the padding", id="wrong: <eos> after pads"),
    pytest.param(lambda *a: forcing(*a, left=True), "on the left", id="wrong: padded on the left"),
    pytest.param(lambda *a: (forcing_wrapped(*a),) * 2, "L + 2", id="wrong: the wrapped rows, L + 2 columns"),
    pytest.param(forcing_zeros, "torch.long", id="wrong: float tensors"),
    pytest.param(forcing_labels_minus_100, "padded with -100", id="wrong: labels padded with -100"),
    pytest.param(lambda *a: forcing_hard_coded(*a, pad=0), "pad_id = 3", id="wrong: pad_id hard-coded"),
    pytest.param(lambda *a: forcing_hard_coded(*a, bos=1), "bos_id = 3", id="wrong: bos_id hard-coded"),
    pytest.param(lambda *a: forcing_hard_coded(*a, eos=2), "eos_id = 10", id="wrong: eos_id hard-coded"),
    pytest.param(forcing_first_length, "L is taken from the first sequence", id="wrong: L from the first sequence"),
    pytest.param(forcing_lexicographic_max, "compares lists element by element", id="wrong: len(max(sequences))"),
    pytest.param(forcing_batch_of_three, "is a value written into the code", id="wrong: B hard-coded"),
    pytest.param(forcing_appends, "changed its input sequences in place", id="wrong: s.append(eos_id)"),
    pytest.param(lambda *a: tuple(t.to("meta") for t in forcing_solution(*a)), "meta", id="wrong: another device"),
]


@pytest.mark.parametrize(("fn", "expected"), FORCING_ANSWERS)
def test_teacher_forcing_batch_answers(fn, expected, capsys):
    judged(check_teacher_forcing_batch, fn, expected, capsys)


# --- 06: greedy decoding ------------------------------------------------------------------------------------------


def greedy_solution(model, src, src_mask, *, max_len, bos_id, eos_id):  # the notebook's solution
    with torch.no_grad():
        memory = model.encode(src, src_mask)  # (1, S, d_model): computed once
        ys = torch.full((1, 1), bos_id, dtype=torch.long, device=src.device)  # (1, t): the output so far
        while ys.size(1) < max_len and ys[0, -1] != eos_id:
            logits = model.decode(ys, memory, src_mask, causal_mask(ys.size(1), device=src.device))  # (1, t, V)
            next_id = logits[:, -1].argmax(dim=-1, keepdim=True)  # (1, 1): the last position predicts the next token
            ys = torch.cat([ys, next_id], dim=1)  # (1, t + 1)
    return ys


def greedy_parameters_device(model, src, src_mask, *, max_len, bos_id, eos_id):
    """The device from the model's parameters; no eval(), no no_grad(); a for loop with break."""
    device = next(model.parameters()).device
    memory = model.encode(src, src_mask)
    ys = torch.tensor([[bos_id]], device=device)
    for _ in range(max_len - 1):
        logits = model.decode(ys, memory, src_mask, causal_mask(ys.shape[1], device=device))
        next_id = logits[0, -1].argmax().item()
        ys = torch.cat([ys, torch.tensor([[next_id]], device=device)], dim=1)
        if next_id == eos_id:
            break
    return ys


def greedy_list(model, src, src_mask, *, max_len, bos_id, eos_id):
    """A Python list of ids, the whole model called each step, a tensor at the end."""
    model.eval()
    ids = [bos_id]
    while len(ids) < max_len:
        ys = torch.tensor([ids], device=src.device)
        logits = model(src, ys, src_mask, causal_mask(len(ids), device=src.device))
        ids.append(int(logits[0, -1].softmax(-1).argmax()))
        if ids[-1] == eos_id:
            break
    return torch.tensor(ids).unsqueeze(0)


def greedy(model, src, src_mask, max_len, bos_id, eos_id, *, stop=True, keep_bos=True, keep_eos=True, feed_back=True,
           extra=0, masked=True, position=-1, bos=None, eos=None, max_len_used=None):  # fmt: skip
    bos_id = bos_id if bos is None else bos
    eos_id = eos_id if eos is None else eos
    max_len = max_len if max_len_used is None else max_len_used
    with torch.no_grad():
        memory = model.encode(src, src_mask)
        ys = torch.tensor([[bos_id]])
        out = ys
        while out.size(1) < max_len + extra:
            logits = model.decode(ys, memory, src_mask, causal_mask(ys.size(1)) if masked else None)
            next_id = logits[:, position].argmax(-1, keepdim=True)  # (1, 1)
            out = torch.cat([out, next_id], dim=1)
            ys = out if feed_back else ys
            if stop and next_id.item() == eos_id:
                break
    if not keep_eos and out[0, -1] == eos_id:
        out = out[:, :-1]
    return out if keep_bos else out[:, 1:]


GREEDY_ANSWERS = [
    pytest.param(greedy_solution, None, id="right: the notebook's solution"),
    pytest.param(greedy_parameters_device, None, id="right: device from the parameters, no no_grad"),
    pytest.param(greedy_list, None, id="right: a list of ids, model(...) each step"),
    pytest.param(lambda *a, **k: greedy(*a, **k), None, id="right: an out tensor apart from ys"),
    pytest.param(lambda *a, **k: greedy(*a, **k, stop=False), "does not stop at <eos>", id="wrong: never stops"),
    pytest.param(lambda *a, **k: greedy(*a, **k, keep_bos=False), "start with <bos>", id="wrong: drops <bos>"),
    pytest.param(lambda *a, **k: greedy(*a, **k, keep_eos=False), "keep the <eos>", id="wrong: drops <eos>"),
    pytest.param(lambda *a, **k: greedy(*a, **k, feed_back=False), "feed back", id="wrong: no feedback"),
    pytest.param(lambda *a, **k: greedy(*a, **k, extra=1), "<bos> included", id="wrong: max_len + 1 ids"),
    pytest.param(lambda *a, **k: greedy(*a, **k, extra=-1), "one id short", id="wrong: max_len - 1 ids"),
    pytest.param(lambda *a, **k: greedy(*a, **k, masked=False), "without its causal mask", id="wrong: no mask"),
    pytest.param(lambda *a, **k: greedy(*a, **k, position=0), "LAST position", id="wrong: the first position"),
    pytest.param(
        lambda *a, **k: greedy(*a, **k, max_len_used=10),
        "does not stop once ys holds max_len",
        id="wrong: max_len hard-coded",
    ),
    pytest.param(lambda *a, **k: greedy(*a, **k, bos=1), "bos_id = ", id="wrong: bos_id hard-coded"),
    pytest.param(lambda *a, **k: greedy(*a, **k, eos=2), "eos_id = ", id="wrong: eos_id hard-coded"),
    pytest.param(lambda *a, **k: greedy(*a, **k)[0], "shape (1, t)", id="wrong: 1-D output"),
    pytest.param(lambda *a, **k: greedy(*a, **k)[0].tolist(), "tensor of ids", id="wrong: a list returned"),
    pytest.param(lambda *a, **k: greedy(*a, **k).to("meta"), "is on meta", id="wrong: another device"),
]


@pytest.mark.parametrize(("fn", "expected"), GREEDY_ANSWERS)
def test_greedy_decode_answers(fn, expected, capsys):
    judged(check_greedy_decode, fn, expected, capsys)


def test_the_greedy_stand_in_has_a_parameter():
    from course_utils.checks.seq2seq import _NextInSource

    assert len(list(_NextInSource().parameters())) >= 1


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
    j = torch.arange(size, device=prefix_len.device)
    return (causal_mask(size, prefix_len.device) | (j < (prefix_len + shift)[:, None, None]))[:, None]


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


# --- 06: greedy decoding ------------------------------------------------------------------------------------------


@torch.no_grad()
def greedy_reference(model, src, src_mask, max_len, bos_id, eos_id, *, stop=True, keep_bos=True, keep_eos=True, feed_back=True,
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
    ok, out = verdict(check_greedy_decode, greedy_reference, capsys)
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
    ok, out = verdict(check_greedy_decode, lambda *args, **kwargs: greedy_reference(*args, **kwargs, **mistake), capsys)
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
