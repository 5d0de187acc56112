"""Checkers for the decoder and for decoding (chapters 05 and 06).

Shape letters: B batch, T target length, S source length, P prefix length. Masks are bool, True = may attend.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..model.masks import causal_mask, padding_mask, target_mask
from ._core import (
    MISTAKES,
    NotWritten,
    NotYet,
    Verdict,
    any_device,
    backpropagates,
    call,
    call_layer,
    differs,
    each_case,
    name_mistake,
    not_called,
    off_the_cpu,
    on_meta,
    same,
    same_gradients,
    verdict,
    wrong_device,
)

__all__ = ["check_decoder_layer", "check_greedy_decode", "check_prefix_lm_mask", "check_teacher_forcing_batch"]

PAD, BOS, EOS = 0, 1, 2  # the special ids of the test inputs, as CharTokenizer numbers them


def _query_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return args[0] if args else kwargs.get("query")


def _trains_through(
    fn: Callable[..., Any], layer: nn.Module, x: Tensor, memory: Tensor, src_mask: Tensor, tgt_mask: Tensor
) -> None:
    """The decoder is trained through: gradients must reach x (the layers below) and memory (the encoder, through
    cross-attention's keys and values), equal to those of the course's layer."""

    def through_x(x: Tensor) -> Any:
        return fn(layer, x, memory, src_mask, tgt_mask)

    def answer(x: Tensor, memory: Tensor) -> Any:
        return fn(layer, x, memory, src_mask, tgt_mask)

    through_x.__name__ = answer.__name__ = getattr(fn, "__name__", "your function")
    with not_called(layer):
        backpropagates(through_x, x, what="the layer's output")
    same_gradients(
        answer,
        (x, memory),
        lambda x, memory: layer(x, memory, src_mask, tgt_mask),
        ("x", "memory (the encoder learns through cross-attention's keys and values)"),
        "the layer's output",
    )


_DecoderCase = tuple[
    Any, nn.TransformerDecoderLayer, Tensor, Tensor, Tensor, Tensor
]  # layer, theirs, x, memory, src, tgt


def _decoder_case(B: int, T: int, S: int, seed: int) -> _DecoderCase:
    """A post-norm ``DecoderLayer`` copied from ``nn.TransformerDecoderLayer`` (dropout off, norms with random scales
    and shifts, so that every norm shows), its inputs x and memory, and the source and target ids: row 0 of each
    padded, row 1 not, further rows padded more."""
    from ..model.decoder import DecoderLayer

    torch.manual_seed(seed)
    theirs = nn.TransformerDecoderLayer(16, 4, 32, dropout=0.0, batch_first=True).eval()
    with torch.no_grad():
        for norm in (theirs.norm1, theirs.norm2, theirs.norm3):  # not 1 and 0, so that every norm shows
            for parameter in norm.parameters():
                parameter.normal_()
    layer = DecoderLayer.from_torch(theirs).eval()
    x, memory = torch.randn(B, T, 16), torch.randn(B, S, 16)

    def ids(start: int, length: int, first: int | None = None) -> list[int]:
        row = [start + i % 7 for i in range(length)]
        return ([first] if first is not None else []) + row

    src_lengths = [4, S] + [2] * (B - 2)  # S = 7: [[4, 5, 6, 7, PAD, PAD, PAD], [4, 5, 6, 7, 8, 9, 10]] ...
    tgt_lengths = [T - 1, T] + [2] * (B - 2)  # T = 4: [[BOS, 5, 6, PAD], [BOS, 5, 6, 7]] ...
    src = torch.tensor([ids(4, n) + [PAD] * (S - n) for n in src_lengths])
    tgt = torch.tensor([ids(5, n - 1, BOS) + [PAD] * (T - n) for n in tgt_lengths])
    return layer, theirs, x, memory, src, tgt


def check_decoder_layer(fn: Callable[..., Any]) -> Verdict:
    """``fn(layer, x (B, T, d), memory (B, S, d), src_mask (B, 1, 1, S), tgt_mask (B, 1, T, T))`` computes the
    paper's post-norm decoder layer from ``layer``'s submodules; the result must equal
    ``nn.TransformerDecoderLayer``'s. The test uses T = 4 != S = 7, so that swapped roles show, then other sizes."""

    def one(B: int, T: int, S: int, seed: int) -> str:
        layer, theirs, x, memory, src, tgt = _decoder_case(B, T, S, seed)
        src_mask, tgt_mask = padding_mask(src, PAD), target_mask(tgt, PAD)
        got = _decoder_output(fn, layer, x, memory, src_mask, tgt_mask)
        with torch.no_grad():
            expected = theirs(
                x, memory, tgt_mask=~causal_mask(T), tgt_key_padding_mask=tgt == PAD,
                memory_key_padding_mask=src == PAD,
            )  # fmt: skip
            mistakes = _decoder_mistakes(layer, x, memory, tgt, src_mask, tgt_mask)
        name_mistake(got, expected, mistakes)
        same(got, expected, "the layer's output")
        _trains_through(fn, layer, x, memory, src_mask, tgt_mask)
        return (
            "the decoder layer is right, equal to nn.TransformerDecoderLayer (T = 4, S = 7, both padded): masked "
            "self-attention, cross-attention with queries from the decoder, feed-forward, each followed by add & norm."
        )

    def run() -> str:
        return each_case(one, [dict(B=2, T=4, S=7, seed=0), dict(B=3, T=6, S=5, seed=1)])

    return verdict(run)


def _decoder_output(
    fn: Callable[..., Any], layer: Any, x: Tensor, memory: Tensor, src_mask: Tensor, tgt_mask: Tensor
) -> Any:
    """The answer's output, without gradients; cross-attention asked by the memory (its queries) is told so."""
    S = memory.size(1)
    queries: list[Any] = []
    hook = layer.cross_attn.register_forward_pre_hook(
        lambda _m, args, kwargs: queries.append(_query_of(args, kwargs)), with_kwargs=True
    )
    try:
        with not_called(layer):
            try:
                with torch.no_grad():
                    got = call_layer(fn, layer, x, memory, src_mask, tgt_mask)
            except NotYet:
                if any(q is memory for q in queries):
                    raise NotYet(
                        "cross-attention takes its queries from memory: the decoder asks, so "
                        "cross_attn(query=x, key=memory, value=memory, mask=src_mask)"
                    ) from None
                raise
    finally:
        hook.remove()
    source_long = isinstance(got, Tensor) and got.shape == memory.shape
    if any(q is memory for q in queries) or source_long:
        length = f" (the output has the source's length {S})" if source_long else ""
        raise NotYet(
            f"cross-attention takes its queries from memory{length}: the decoder asks, so "
            "cross_attn(query=x, key=memory, value=memory, mask=src_mask)"
        )
    return got


def _decoder_mistakes(
    layer: Any, x: Tensor, memory: Tensor, tgt: Tensor, src_mask: Tensor, tgt_mask: Tensor
) -> list[tuple[Tensor, str]]:
    """Each classic mistake of a decoder layer, as the output it gives: (output, its message)."""
    T = x.size(1)

    def variant(self_mask: Tensor | None, cross_mask: Tensor | None, cross_from_input: bool = False) -> Tensor:
        a = layer.norm1(x + layer.self_attn(x, x, x, self_mask)[0])
        q = x if cross_from_input else a
        c = layer.norm2(a + layer.cross_attn(q, memory, memory, cross_mask)[0])
        return layer.norm3(c + layer.feed_forward(c))

    h = layer.norm1(x)
    pre = x + layer.self_attn(h, h, h, tgt_mask)[0]
    h = layer.norm2(pre)
    pre = pre + layer.cross_attn(h, memory, memory, src_mask)[0]
    pre = pre + layer.feed_forward(layer.norm3(pre))
    flipped = MISTAKES["flipped mask"]
    mistakes = [
        (
            variant(None, src_mask),
            f"{MISTAKES['no causal mask']} (self-attention runs without tgt_mask): pass mask=tgt_mask",
        ),
        (
            variant(padding_mask(tgt, PAD), src_mask),
            "the causal mask is forgotten (only the padding is masked): pass tgt_mask, causal and padding, "
            "to self-attention",
        ),
        (
            variant(causal_mask(T), src_mask),
            "tgt_mask is ignored: a causal mask of your own (or is_causal=True) hides the future but not the "
            "target's padding; pass mask=tgt_mask, which hides both",
        ),
        (
            variant(tgt_mask, None),
            "the memory mask is ignored: cross-attention reads the source's padding; pass mask=src_mask",
        ),
        (variant(~tgt_mask, ~src_mask), f"{flipped}. Pass tgt_mask and src_mask as they are, without ~"),
        (variant(~tgt_mask, src_mask), f"{flipped}. Pass tgt_mask to self-attention as it is, without ~"),
        (variant(tgt_mask, ~src_mask), f"{flipped}. Pass src_mask to cross-attention as it is, without ~"),
        (
            variant(tgt_mask, src_mask, cross_from_input=True),
            "cross-attention's queries are the layer's input x: they must be the output of the first "
            "sublayer, a = norm1(x + SelfAttn(x))",
        ),
        (
            pre,
            "this is pre-norm (norm before each sublayer): the paper's layer normalises after the residual add",
        ),
    ]
    self_out = layer.self_attn(x, x, x, tgt_mask)[0]
    a = layer.norm1(x + self_out)
    cross_out = layer.cross_attn(a, memory, memory, src_mask)[0]
    c = layer.norm2(a + cross_out)
    b = x + layer.norm1(self_out)  # the residual added after the norm, in each sublayer
    b = b + layer.norm2(layer.cross_attn(b, memory, memory, src_mask)[0])
    mistakes += [
        (
            b + layer.norm3(layer.feed_forward(b)),
            "the residual is added after the norm, x + norm(sublayer(x)): the paper's order is norm(x + sublayer(x))",
        ),
        (
            layer.norm3(c + layer.feed_forward(a)),
            "the feed-forward network reads a, the first sublayer's output: it reads c, the cross-attention "
            "sublayer's, norm3(c + feed_forward(c))",
        ),
        (layer.norm3(layer.feed_forward(c)), "the feed-forward sublayer has no residual: norm3(c + feed_forward(c))"),
        (
            layer.norm3(a + layer.feed_forward(a)),
            "cross-attention is skipped: the decoder never reads the source; add the second sublayer, "
            "c = norm2(a + cross_attn(query=a, key=memory, value=memory, mask=src_mask)[0])",
        ),
    ]
    return mistakes


def _prefix_lm(prefix_len: Tensor, size: int) -> Tensor:
    j = torch.arange(size)
    return (causal_mask(size) | (j < prefix_len[:, None, None]))[:, None]  # (B, 1, T, T)


# The first half of MISTAKES["flipped mask"]: the same words for a function that builds a mask (the second half is
# about using one in attention).
_FLIPPED = MISTAKES["flipped mask"].split(", so ")[0]


def check_prefix_lm_mask(fn: Callable[..., Any]) -> Verdict:
    """``fn(prefix_len (B,), size)`` returns the prefix-LM mask ``(B, 1, T, T)``: query i may attend to key j
    when j < prefix_len (the prefix is read in both directions) or j <= i (causal after it)."""

    def one(prefix_len: list[int], size: int) -> str:
        lengths = torch.tensor(prefix_len)
        B = len(prefix_len)
        got = call(fn, lengths, size)
        expected = _prefix_lm(lengths, size)
        if isinstance(got, Tensor) and got.device != expected.device:
            raise wrong_device(
                "the prefix-LM mask",
                got.device,
                lengths.device,
                "prefix_len is",
                "create it on prefix_len's device, torch.arange(size, device=prefix_len.device), and do not move "
                "the result",
            )
        if isinstance(got, Tensor) and got.shape == (B, size, size):
            raise NotYet("shape (B, T, T): add the head axis, mask[:, None], to get (B, 1, T, T)")
        if isinstance(got, Tensor) and got.dtype != torch.bool:
            raise NotYet(f"return a bool mask (True = may attend); got dtype {got.dtype}")
        j = torch.arange(size)
        in_prefix = j[:, None] < lengths[:, None, None]  # (B, T, 1): query i lies in the prefix
        key_in_prefix = j < lengths[:, None, None]  # (B, 1, T): key j lies in the prefix
        mistakes = [
            (
                ~expected,
                f"{_FLIPPED}; here True marks the keys a query may NOT see (the mask is inverted): return the "
                "opposite mask (~ in front)",
            ),
            (
                expected.transpose(-2, -1),
                "the mask is transposed: row i is the query, column j the key; query i sees key j when j < P or j <= i",
            ),
            (
                causal_mask(size).expand(B, 1, size, size),
                "the prefix is ignored: this is the causal mask; add key j < prefix_len for every query",
            ),
            (_prefix_lm(lengths + 1, size), "off by one: a prefix of length P is positions 0 .. P - 1, so j < P"),
            (
                _prefix_lm((lengths - 1).clamp(min=0), size),
                "off by one: a prefix of length P includes position P - 1",
            ),
            (
                (expected[:, 0] | in_prefix)[:, None],
                "the prefix sees the future beyond it: a query inside the prefix may see the whole prefix, "
                "but nothing after it (compare the KEY position j with prefix_len, not the query's)",
            ),
            (
                (causal_mask(size) & key_in_prefix)[:, None],
                "& where | is needed: a key may be attended when it lies in the prefix OR j <= i; with & no query "
                "sees a key after the prefix, not even itself",
            ),
        ]
        name_mistake(got, expected, mistakes)
        same(got, expected, "the prefix-LM mask")
        return (
            "the prefix-LM mask is right: the prefix attends in both directions, the rest causally; "
            "prefix_len = 0 gives the causal mask, prefix_len = T no mask at all."
        )

    def run() -> str:
        first = dict(prefix_len=[3, 0, 6, 1], size=6)
        message = each_case(one, [first, dict(first, size=8), dict(first, prefix_len=[2, 5, 4])])
        off_the_cpu("the mask", on_meta(fn, torch.tensor([3, 0, 6, 1]), 6), getattr(fn, "__name__", "it"))
        return message

    return verdict(run)


def _forcing_rows(
    sequences: list[list[int]], bos: int, eos: int, pad: int, *, left: bool = False, eos_last: bool = False
) -> Tensor:
    """``<bos> y <eos>``, padded to ``(B, L + 2)``: on the right (or, for the mistakes, on the left, or with <eos>
    after the padding)."""
    width = max(len(s) for s in sequences) + 2
    rows: list[list[int]] = []
    for s in sequences:
        padding = [pad] * (width - 2 - len(s))
        if left:
            rows.append([*padding, bos, *s, eos])
        elif eos_last:
            rows.append([bos, *s, *padding, eos])
        else:
            rows.append([bos, *s, eos, *padding])
    return torch.tensor(rows)


def _forcing_case(fn: Callable[..., Any], sequences: list[list[int]], bos_id: int, eos_id: int, pad_id: int) -> str:
    bos, eos, pad = bos_id, eos_id, pad_id
    B, L = len(sequences), max(len(s) for s in sequences)
    given = [list(s) for s in sequences]
    got = call(fn, given, bos, eos, pad)
    full = _forcing_rows(sequences, bos, eos, pad)  # (B, L + 2)
    inputs, labels = full[:, :-1], full[:, 1:]  # (B, L + 1) each; <eos> in the input under a <pad> label
    if not (isinstance(got, tuple | list) and len(got) == 2):  # pyright: ignore[reportUnknownArgumentType]
        raise NotYet("return a pair (decoder_input, labels)")
    got_in, got_labels = cast(tuple[Any, Any], tuple(got))  # pyright: ignore[reportUnknownArgumentType]
    got_in, got_labels = any_device(got_in, labels, "decoder_input"), any_device(got_labels, labels, "labels")
    for what, tensor in (("decoder_input", got_in), ("labels", got_labels)):
        if not isinstance(tensor, Tensor):
            raise NotYet(f"{what} should be a torch.Tensor; got {type(tensor).__name__}")
        if tensor.shape == (B, L + 2):
            raise NotYet(
                f"{what} has {L + 2} columns = L + 2: that is the wrapped <bos> y <eos>; the decoder reads all but "
                "its last token and predicts all but its first, L + 1 each"
            )
        if tensor.dtype != torch.long:
            raise NotYet(f"{what} has dtype {tensor.dtype}: token ids are torch.long (nn.Embedding needs it)")
    assert isinstance(got_in, Tensor) and isinstance(got_labels, Tensor)
    real = labels != pad
    no_eos = labels.masked_fill(labels == eos, pad)
    if not differs(got_in, labels) and got_labels.shape == labels.shape and bool((got_labels[:, 0] == bos).all()):
        raise NotYet(
            "decoder_input and labels are swapped (shifted the wrong way): the decoder reads <bos> y ... and "
            "predicts y ... <eos>"
        )
    if torch.equal(got_in, got_labels):
        raise NotYet("decoder_input and labels are the same sequence: the model would learn to copy its input")
    if not differs(got_labels, no_eos):
        raise NotYet("the labels have no <eos>: the model would never learn to stop; end each row with eos_id")
    if not differs(got_labels, _forcing_rows(sequences, bos, eos, pad, eos_last=True)[:, 1:]):
        raise NotYet("<eos> comes after the padding: append it right after the last token, then pad")
    left = _forcing_rows(sequences, bos, eos, pad, left=True)
    if not differs(got_labels, left[:, 1:]) or not differs(got_in, left[:, :-1]):
        raise NotYet("the rows are padded on the left: put the padding on the right, after <eos>")
    if not differs(got_in, no_eos):
        raise NotYet("the decoder input does not start with <bos>: it must be shifted right by one, <bos> first")
    if not differs(got_in, F.pad(labels[:, 1:], (0, 1), value=pad)):
        raise NotYet(
            "decoder_input is the labels shifted LEFT (y_2 .. <eos>): shift them right by one instead, "
            "<bos> y_1 .. y_n, so that position t reads y_t and predicts y_t+1"
        )
    if got_labels.shape == labels.shape and torch.equal(got_labels, labels.masked_fill(~real, -100)):
        raise NotYet(
            "the labels are padded with -100, F.cross_entropy's default ignore_index: this batch pads both tensors "
            "with pad_id, and the loss is told ignore_index=pad_id (as seq2seq_loss does)"
        )
    same(got_labels, labels, "labels")
    # Where the label is <pad>, the loss ignores the prediction: <pad> or <eos> may stand there in the input.
    ok = (
        torch.where(real, got_in == inputs, (got_in == pad) | (got_in == eos)) if got_in.shape == labels.shape else None
    )
    if ok is None or not bool(ok.all()):
        same(got_in, inputs, "decoder_input")  # names the shape, or the first value that differs
    return (
        "the batch is right: the decoder reads <bos> y_1 .. y_n, learns to predict y_1 .. y_n <eos>, "
        "and positions whose label is <pad> leave the loss (ignore_index=pad_id)."
    )


def check_teacher_forcing_batch(fn: Callable[..., Any]) -> Verdict:
    """``fn(sequences, bos_id, eos_id, pad_id)``: from raw id lists of different lengths (no special tokens), the
    padded LongTensors ``(decoder_input, labels)``, each ``(B, L + 1)`` with L the longest length:
    ``<bos> y_1 .. y_n`` and ``y_1 .. y_n <eos>``, padded with ``pad_id``. Each special id takes two values, and
    the longest sequence comes first, then not."""

    def one(sequences: list[list[int]], bos_id: int, eos_id: int, pad_id: int) -> str:
        return _forcing_case(fn, sequences, bos_id, eos_id, pad_id)

    def run() -> str:
        first: dict[str, Any] = dict(sequences=[[7, 8, 9], [5], [4, 6]], bos_id=1, eos_id=2, pad_id=0)
        shorter_first = [[5], [7, 8, 9, 6], [4, 6], [8, 8, 7]]  # L = 4, from the second sequence
        cases = [first, dict(first, pad_id=3), dict(first, bos_id=3), dict(first, eos_id=10)]
        message = each_case(one, cases)

        def passes(sequences: list[list[int]]) -> bool:
            try:
                _forcing_case(fn, sequences, 1, 2, 0)
            except NotYet:
                return False
            return True

        # L = 4 comes from the second sequence, and max(sequences), which compares lists element by element, is
        # [8, 8, 7], of length 3: an answer that takes L from either is right only when they are the longest.
        shorter_first = [[5], [7, 8, 9, 6], [4, 6], [8, 8, 7]]
        try:
            _forcing_case(fn, shorter_first, 1, 2, 0)
        except NotWritten:
            raise
        except NotYet as e:
            if passes(sorted(shorter_first, key=len, reverse=True)):
                raise NotYet(
                    f"L is taken from the first sequence: right while the longest comes first, but not for "
                    f"{shorter_first}, whose first sequence has length 1 and its longest 4; L is the longest length, "
                    "max(len(s) for s in sequences)"
                ) from None
            if passes([[5], [9, 8, 9, 6], [4, 6], [8, 8, 7]]):
                raise NotYet(
                    f"L is taken from max(sequences), which compares lists element by element, not by length: for "
                    f"{shorter_first} it is [8, 8, 7], of length 3, while the longest has length 4; use "
                    "max(len(s) for s in sequences)"
                ) from None
            raise NotYet(
                f"right for the first test cases but not with sequences = {shorter_first} (B = 4, L = 4): is a "
                f"value written into the code that should come from the arguments? ({e})"
            ) from None
        return message

    return verdict(run)


class _NextInSource(nn.Module):
    """A stand-in for ``Transformer`` whose greedy output is known: reading token k, it predicts the source token
    after k (``bos``: the first one; the last one, ``eos`` or anything else: ``eos``). Its predictions
    depend on the tokens fed back, so a decoder that does not feed back its argmax goes astray."""

    vocab_size = 12

    def __init__(self, bos: int = BOS, eos: int = EOS) -> None:
        super().__init__()
        self.bos, self.eos = bos, eos
        # Unused, but a real model has parameters: an answer that reads its device from them must work here too.
        self.scale = nn.Parameter(torch.ones(()))

    def encode(self, src: Tensor, src_mask: Tensor | None = None) -> Tensor:
        return src  # the "memory": the source ids themselves, (B, S)

    def decode(
        self, tgt: Tensor, memory: Tensor, src_mask: Tensor | None = None, tgt_mask: Tensor | None = None
    ) -> Tensor:
        logits = torch.zeros(*tgt.shape, self.vocab_size)  # (B, t, V)
        for b in range(tgt.size(0)):
            source = [int(i) for i in memory[b] if int(i) != PAD]
            for i, k in enumerate(tgt[b].tolist()):
                if k == self.bos:
                    nxt = source[0]
                elif k in source and source.index(k) + 1 < len(source):
                    nxt = source[source.index(k) + 1]
                else:
                    nxt = self.eos
                logits[b, i, nxt] = 5.0
        return logits

    def forward(
        self, src: Tensor, tgt: Tensor, src_mask: Tensor | None = None, tgt_mask: Tensor | None = None
    ) -> Tensor:
        return self.decode(tgt, self.encode(src, src_mask), src_mask, tgt_mask)


def _greedy_output(got: object, expected: Tensor, max_len: int, bos_id: int, eos_id: int, what: str) -> None:
    """Name how a greedy output ``got`` differs from ``expected``, then compare them."""
    if not isinstance(got, Tensor):
        raise NotYet(f"return a tensor of ids (1, t); got {type(got).__name__}")
    if got.dim() == 1:
        raise NotYet("return shape (1, t), with the batch axis: ys, as built with torch.cat along dim=1")
    if got.device != expected.device:
        raise wrong_device(
            what,
            got.device,
            expected.device,
            "src is",
            "create ys on src's device (device=src.device) and do not move the result",
        )
    if got.dim() != 2 or got.size(0) != 1:
        same(got, expected, what)  # names the shape
    stopped = bool(expected[0, -1] == eos_id)
    t, n = expected.size(1), got.size(1)
    if stopped and n > t and torch.equal(got[:, :t], expected):
        raise NotYet("it does not stop at <eos>: end the loop once the token appended is eos_id")
    if n == max_len + 1 and torch.equal(got[:, :t], expected):
        raise NotYet(f"{n} ids for max_len={max_len}: max_len counts every id, <bos> included")
    if n > max_len:
        raise NotYet(
            f"{n} ids for max_len={max_len}: the loop does not stop once ys holds max_len ids (<bos> included); "
            "take the limit from the argument max_len"
        )
    if n == t - 1 and torch.equal(got, expected[:, 1:]):
        raise NotYet("the output must start with <bos>, as greedy_decode's does")
    if stopped and n == t - 1 and torch.equal(got, expected[:, :-1]):
        raise NotYet("keep the <eos> at the end: it says where the output stops")
    if not stopped and n == t - 1 and torch.equal(got, expected[:, :-1]):
        raise NotYet(f"one id short: max_len={max_len} counts every id, <bos> included, so stop at {max_len}")
    if n >= 1 and int(got[0, 0]) != bos_id:
        raise NotYet(f"the output starts with {int(got[0, 0])}, not bos_id = {bos_id}: start ys from bos_id")
    if n > 2 and bool((got[0, 1:] == got[0, 1]).all()) and differs(got, expected):
        raise NotYet(
            "every step writes the same token: feed back each argmax (ys = torch.cat([ys, next_id], dim=1)) "
            "and read the LAST position's logits, logits[:, -1]"
        )
    same(got, expected, what, atol=0)


def check_greedy_decode(fn: Callable[..., Any]) -> Verdict:
    """``fn(model, src (1, S), src_mask (1, 1, 1, S), *, max_len, bos_id, eos_id)`` returns the greedy output
    ``(1, <= max_len)``: ``<bos>``, then the argmax of the last position, fed back, until ``<eos>`` (kept) or
    ``max_len`` ids in all; compared with ``course_utils.greedy_decode``, on a stand-in model (several sources,
    max_len and special ids), then on a small untrained ``Transformer``."""

    def one(source: list[int], max_len: int, bos_id: int, eos_id: int) -> str:
        from ..training.decoding import greedy_decode

        stand_in = _NextInSource(bos_id, eos_id)
        src = torch.tensor([source])
        src_mask = padding_mask(src, PAD)
        expected = greedy_decode(cast(Any, stand_in), src, src_mask, max_len=max_len, bos_id=bos_id, eos_id=eos_id)
        got = call(fn, stand_in, src, src_mask, max_len=max_len, bos_id=bos_id, eos_id=eos_id)
        _greedy_output(
            got, expected, max_len, bos_id, eos_id, f"the output for the source {source} with max_len={max_len}"
        )
        return ""

    def run() -> str:
        from ..model.transformer import Transformer
        from ..training.decoding import greedy_decode

        first: dict[str, Any] = dict(source=[3, 4, 5], max_len=10, bos_id=BOS, eos_id=EOS)  # stops at <eos>
        each_case(one, [first, dict(first, bos_id=6), dict(first, eos_id=7)])  # the special ids changed
        for case in (dict(first, source=[3, 4, 5, 6, 7, 8, 9, 10, 11], max_len=6), dict(first, source=[7, 3, 9, 4])):
            one(**case)  # stops at max_len; a source whose order is not sorted
        torch.manual_seed(0)
        model = Transformer(12, 12, d_model=16, n_heads=2, n_layers=2, d_ff=32, dropout=0.0).eval()  # 2 layers: a
        # missing causal mask changes the last position only from the second layer on
        src = torch.tensor([[3, 4, 5, 6, 7, PAD]])
        src_mask = padding_mask(src, PAD)
        got = call(fn, model, src, src_mask, max_len=8, bos_id=BOS, eos_id=EOS)
        expected = greedy_decode(model, src, src_mask, max_len=8, bos_id=BOS, eos_id=EOS)
        with torch.no_grad():  # the same loop without the causal mask: each step's earlier positions see later ones
            memory, unmasked = model.encode(src, src_mask), torch.tensor([[BOS]])
            while unmasked.size(1) < 8 and unmasked[0, -1] != EOS:
                next_id = model.decode(unmasked, memory, src_mask, None)[:, -1].argmax(-1, keepdim=True)
                unmasked = torch.cat([unmasked, next_id], dim=1)
        if differs(unmasked, expected) and not differs(got, unmasked):
            raise NotYet(
                "the decoder runs without its causal mask: pass causal_mask(t) as the target mask, as in training, "
                "or the positions before the last see tokens they never saw in training"
            )
        _greedy_output(got, expected, 8, BOS, EOS, "the output of a small Transformer")
        return (
            "greedy decoding is right, equal to course_utils.greedy_decode: <bos> first, the last position's argmax "
            "fed back, stop at <eos> (kept) or after max_len ids."
        )

    return verdict(run)
