"""Checkers for the decoder and for decoding (chapters 05 and 06).

Shape letters: B batch, T target length, S source length, P prefix length. Masks are bool, True = may attend.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import torch
from torch import Tensor, nn

from ..model.masks import causal_mask, padding_mask, target_mask
from ._core import NotYet, Verdict, call, differs, name_mistake, same, verdict

__all__ = ["check_decoder_layer", "check_greedy_decode", "check_prefix_lm_mask", "check_teacher_forcing_batch"]

PAD, BOS, EOS = 0, 1, 2  # the special ids of the test inputs, as CharTokenizer numbers them


def _query_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return args[0] if args else kwargs.get("query")


def check_decoder_layer(fn: Callable[..., Any]) -> Verdict:
    """``fn(layer, x (B, T, d), memory (B, S, d), src_mask (B, 1, 1, S), tgt_mask (B, 1, T, T))`` computes the
    paper's post-norm decoder layer from ``layer``'s submodules; the result must equal
    ``nn.TransformerDecoderLayer``'s. The test uses T = 4 != S = 7, so that swapped roles show."""

    def run() -> str:
        from ..model.decoder import DecoderLayer

        torch.manual_seed(0)
        theirs = nn.TransformerDecoderLayer(16, 4, 32, dropout=0.0, batch_first=True).eval()
        with torch.no_grad():
            for norm in (theirs.norm1, theirs.norm2, theirs.norm3):  # not 1 and 0, so that every norm shows
                for parameter in norm.parameters():
                    parameter.normal_()
        layer = DecoderLayer.from_torch(theirs).eval()
        x, memory = torch.randn(2, 4, 16), torch.randn(2, 7, 16)
        src = torch.tensor([[4, 5, 6, 7, PAD, PAD, PAD], [4, 5, 6, 7, 8, 9, 3]])  # S = 7
        tgt = torch.tensor([[BOS, 5, 6, PAD], [BOS, 7, 8, 9]])  # T = 4
        src_mask, tgt_mask = padding_mask(src, PAD), target_mask(tgt, PAD)
        queries: list[Any] = []
        hooks = [
            layer.cross_attn.register_forward_pre_hook(
                lambda _m, args, kwargs: queries.append(_query_of(args, kwargs)), with_kwargs=True
            ),
            layer.register_forward_pre_hook(lambda _m, _args: queries.append("layer")),
        ]
        try:
            with torch.no_grad():
                got = call(fn, layer, x, memory, src_mask, tgt_mask)
        except NotYet:
            if any(q is memory for q in queries):
                raise NotYet(
                    "cross-attention takes its queries from memory: the decoder asks, so "
                    "cross_attn(query=x, key=memory, value=memory, mask=src_mask)"
                ) from None
            raise
        finally:
            for hook in hooks:
                hook.remove()
        if "layer" in queries:
            raise NotYet("you called layer(...) itself: write its forward from its submodules (layer.self_attn, ...)")
        if any(q is memory for q in queries) or (isinstance(got, Tensor) and got.shape == memory.shape):
            raise NotYet(
                "cross-attention takes its queries from memory (the output has the source's length 7): the decoder "
                "asks, so cross_attn(query=x, key=memory, value=memory, mask=src_mask)"
            )
        expected = theirs(
            x, memory, tgt_mask=~causal_mask(4), tgt_key_padding_mask=tgt == PAD, memory_key_padding_mask=src == PAD
        )

        def variant(self_mask: Tensor | None, cross_mask: Tensor | None, cross_from_input: bool = False) -> Tensor:
            a = layer.norm1(x + layer.self_attn(x, x, x, self_mask)[0])
            q = x if cross_from_input else a
            c = layer.norm2(a + layer.cross_attn(q, memory, memory, cross_mask)[0])
            return layer.norm3(c + layer.feed_forward(c))

        with torch.no_grad():
            h = layer.norm1(x)
            pre = x + layer.self_attn(h, h, h, tgt_mask)[0]
            h = layer.norm2(pre)
            pre = pre + layer.cross_attn(h, memory, memory, src_mask)[0]
            pre = pre + layer.feed_forward(layer.norm3(pre))
            mistakes = [
                (variant(None, src_mask), "self-attention without tgt_mask: each position sees the future"),
                (
                    variant(padding_mask(tgt, PAD), src_mask),
                    "the causal mask is forgotten (only the padding is masked): pass tgt_mask, causal and padding, "
                    "to self-attention",
                ),
                (
                    variant(tgt_mask, None),
                    "the memory mask is ignored: cross-attention reads the source's padding; pass mask=src_mask",
                ),
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
        name_mistake(got, expected, mistakes)
        same(got, expected, "the layer's output")
        return (
            "the decoder layer is right, equal to nn.TransformerDecoderLayer (T = 4, S = 7, both padded): masked "
            "self-attention, cross-attention with queries from the decoder, feed-forward, each followed by add & norm."
        )

    return verdict(run)


def _prefix_lm(prefix_len: Tensor, size: int) -> Tensor:
    j = torch.arange(size)
    return (causal_mask(size) | (j < prefix_len[:, None, None]))[:, None]  # (B, 1, T, T)


def check_prefix_lm_mask(fn: Callable[..., Any]) -> Verdict:
    """``fn(prefix_len (B,), size)`` returns the prefix-LM mask ``(B, 1, T, T)``: query i may attend to key j
    when j < prefix_len (the prefix is read in both directions) or j <= i (causal after it)."""

    def run() -> str:
        size = 6
        prefix_len = torch.tensor([3, 0, 6, 1])
        got = call(fn, prefix_len, size)
        expected = _prefix_lm(prefix_len, size)
        if isinstance(got, Tensor) and got.shape == (4, size, size):
            raise NotYet("shape (B, T, T): add the head axis, mask[:, None], to get (B, 1, T, T)")
        if isinstance(got, Tensor) and got.dtype != torch.bool:
            raise NotYet(f"return a bool mask (True = may attend); got dtype {got.dtype}")
        j = torch.arange(size)
        in_prefix = j[:, None] < prefix_len[:, None, None]  # (B, T, 1): query i lies in the prefix
        mistakes = [
            (~expected, "the mask is inverted: True means 'may attend'"),
            (
                causal_mask(size).expand(4, 1, size, size),
                "the prefix is ignored: this is the causal mask; add key j < prefix_len for every query",
            ),
            (_prefix_lm(prefix_len + 1, size), "off by one: a prefix of length P is positions 0 .. P - 1, so j < P"),
            (
                _prefix_lm((prefix_len - 1).clamp(min=0), size),
                "off by one: a prefix of length P includes position P - 1",
            ),
            (
                (expected[:, 0] | in_prefix)[:, None],
                "the prefix sees the future beyond it: a query inside the prefix may see the whole prefix, "
                "but nothing after it",
            ),
        ]
        name_mistake(got, expected, mistakes)
        same(got, expected, "the prefix-LM mask")
        return (
            "the prefix-LM mask is right: the prefix attends in both directions, the rest causally; "
            "prefix_len = 0 gives the causal mask, prefix_len = T no mask at all."
        )

    return verdict(run)


def check_teacher_forcing_batch(fn: Callable[..., Any]) -> Verdict:
    """``fn(sequences, bos_id, eos_id, pad_id)``: from raw id lists of different lengths (no special tokens), the
    padded LongTensors ``(decoder_input, labels)``, each ``(B, L + 1)`` with L the longest length:
    ``<bos> y_1 .. y_n`` and ``y_1 .. y_n <eos>``, padded with ``pad_id``."""

    def run() -> str:
        bos, eos, pad = 1, 2, 0
        sequences = [[7, 8, 9], [5], [4, 6]]
        got = call(fn, [list(s) for s in sequences], bos, eos, pad)
        labels = torch.tensor([[7, 8, 9, eos], [5, eos, pad, pad], [4, 6, eos, pad]])  # (B, L + 1)
        inputs = torch.tensor(
            [[bos, 7, 8, 9], [bos, 5, eos, pad], [bos, 4, 6, eos]]
        )  # shifted: <eos> under a pad label
        if not (isinstance(got, tuple | list) and len(got) == 2):
            raise NotYet("return a pair (decoder_input, labels)")
        got_in, got_labels = got
        for what, tensor in (("decoder_input", got_in), ("labels", got_labels)):
            if not isinstance(tensor, Tensor):
                raise NotYet(f"{what} should be a torch.Tensor; got {type(tensor).__name__}")
            if tensor.shape == (3, 5):
                raise NotYet(
                    f"{what} has 5 columns = L + 2: that is the wrapped <bos> y <eos>; the decoder reads all but its "
                    "last token and predicts all but its first, L + 1 each"
                )
            if tensor.dtype != torch.long:
                raise NotYet(f"{what} has dtype {tensor.dtype}: token ids are torch.long (nn.Embedding needs it)")
        real = labels != pad
        if not differs(got_in, labels) and bool((got_labels[:, 0] == bos).all()):
            raise NotYet("decoder_input and labels are swapped: the decoder reads <bos> y ... and predicts y ... <eos>")
        if isinstance(got_in, Tensor) and isinstance(got_labels, Tensor) and torch.equal(got_in, got_labels):
            raise NotYet("decoder_input and labels are the same sequence: the model would learn to copy its input")
        if not differs(got_labels, labels.masked_fill(labels == eos, pad)):
            raise NotYet("the labels have no <eos>: the model would never learn to stop; end each row with eos_id")
        eos_last = torch.tensor([[7, 8, 9, eos], [5, pad, pad, eos], [4, 6, pad, eos]])
        if not differs(got_labels, eos_last):
            raise NotYet("<eos> comes after the padding: append it right after the last token, then pad")
        if not differs(got_in, labels.masked_fill(labels == eos, pad)):
            raise NotYet("the decoder input does not start with <bos>: it must be shifted right by one, <bos> first")
        same(got_labels, labels, "labels")
        # Where the label is <pad>, the loss ignores the prediction: <pad> or <eos> may stand there in the input.
        ok = torch.where(real, got_in == inputs, (got_in == pad) | (got_in == eos))
        if not bool(ok.all()):
            where = tuple(int(i) for i in (~ok).nonzero()[0])
            raise NotYet(
                f"decoder_input differs at index {where}: got {int(got_in[where])}, expected {int(inputs[where])}"
            )
        return (
            "the batch is right: the decoder reads <bos> y_1 .. y_n, learns to predict y_1 .. y_n <eos>, "
            "and positions whose label is <pad> leave the loss (ignore_index=pad_id)."
        )

    return verdict(run)


class _NextInSource(nn.Module):
    """A stand-in for ``Transformer`` whose greedy output is known: reading token k, it predicts the source token
    after k (``<bos>``: the first one; the last one, ``<eos>`` or anything else: ``<eos>``). Its predictions
    depend on the tokens fed back, so a decoder that does not feed back its argmax goes astray."""

    vocab_size = 12

    def __init__(self) -> None:
        super().__init__()
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
                if k == BOS:
                    nxt = source[0]
                elif k in source and source.index(k) + 1 < len(source):
                    nxt = source[source.index(k) + 1]
                else:
                    nxt = EOS
                logits[b, i, nxt] = 5.0
        return logits

    def forward(
        self, src: Tensor, tgt: Tensor, src_mask: Tensor | None = None, tgt_mask: Tensor | None = None
    ) -> Tensor:
        return self.decode(tgt, self.encode(src, src_mask), src_mask, tgt_mask)


def check_greedy_decode(fn: Callable[..., Any]) -> Verdict:
    """``fn(model, src (1, S), src_mask (1, 1, 1, S), *, max_len, bos_id, eos_id)`` returns the greedy output
    ``(1, <= max_len)``: ``<bos>``, then the argmax of the last position, fed back, until ``<eos>`` (kept) or
    ``max_len`` ids in all; compared with ``course_utils.greedy_decode``."""

    def run() -> str:
        from ..model.transformer import Transformer
        from ..training.decoding import greedy_decode

        stand_in = _NextInSource()
        for source, max_len in (([3, 4, 5], 10), ([3, 4, 5, 6, 7, 8, 9, 10, 11], 6), ([7, 3, 9, 4], 10)):
            src = torch.tensor([source])
            src_mask = padding_mask(src, PAD)
            expected = greedy_decode(cast(Any, stand_in), src, src_mask, max_len=max_len, bos_id=BOS, eos_id=EOS)
            got = call(fn, stand_in, src, src_mask, max_len=max_len, bos_id=BOS, eos_id=EOS)
            what = f"the output for the source {source} with max_len={max_len}"
            if not isinstance(got, Tensor):
                raise NotYet(f"return a tensor of ids (1, t); got {type(got).__name__}")
            if got.dim() == 1:
                raise NotYet("return shape (1, t), with the batch axis: ys, as built with torch.cat along dim=1")
            stopped = bool(expected[0, -1] == EOS)
            t = expected.size(1)
            if got.size(1) > max_len:
                raise NotYet(f"{got.size(1)} ids for max_len={max_len}: max_len counts every id, <bos> included")
            if stopped and got.size(1) > t and torch.equal(got[:, :t], expected):
                raise NotYet("it does not stop at <eos>: end the loop once the token appended is eos_id")
            if got.size(1) == t - 1 and torch.equal(got, expected[:, 1:]):
                raise NotYet("the output must start with <bos>, as greedy_decode's does")
            if stopped and got.size(1) == t - 1 and torch.equal(got, expected[:, :-1]):
                raise NotYet("keep the <eos> at the end: it says where the output stops")
            if not stopped and got.size(1) == t - 1 and torch.equal(got, expected[:, :-1]):
                raise NotYet(f"one id short: max_len={max_len} counts every id, <bos> included, so stop at {max_len}")
            if got.size(1) > 2 and bool((got[0, 1:] == got[0, 1]).all()) and differs(got, expected):
                raise NotYet(
                    "every step writes the same token: feed back each argmax (ys = torch.cat([ys, next_id], dim=1)) "
                    "and read the LAST position's logits, logits[:, -1]"
                )
            same(got, expected, what, atol=0)
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
        same(got, expected, "the output of a small Transformer", atol=0)
        return (
            "greedy decoding is right, equal to course_utils.greedy_decode: <bos> first, the last position's argmax "
            "fed back, stop at <eos> (kept) or after max_len ids."
        )

    return verdict(run)
