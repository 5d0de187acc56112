"""Checkers for chapter 12: adapting a pretrained model (GPT-2's byte table, a token's merge tree, the LoRA forward,
the loss mask of an instruction and of a conversation, bytes decoded as a stream)."""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable
from itertools import pairwise
from typing import Any

import torch
from torch import Tensor, nn

from ..data.byte_bpe import bytes_to_unicode, merge_tree
from ..training.instruct import IGNORE
from ..training.instruct import mask_prompt as prompt_mask  # the reference: one example's mask
from ._core import Named, NotWritten, NotYet, Verdict, backpropagates, call, each_case, name_mistake, same, verdict

__all__ = [
    "check_byte_table",
    "check_lora_forward",
    "check_merge_tree",
    "check_multi_turn_mask",
    "check_prompt_mask",
    "check_stream_decode",
]


def _shown(b: int) -> str:
    return f"byte {b} ({chr(b)!r})" if 32 < b < 127 else f"byte {b}"


def check_byte_table(fn: Callable[[], Any]) -> Verdict:
    """``fn()`` returns GPT-2's table from the 256 bytes to printable characters (``bytes_to_unicode()``)."""

    def run() -> str:
        got = call(fn)
        expected = bytes_to_unicode()
        if not isinstance(got, dict):
            raise NotYet(f"return a dict from each byte (an int, 0-255) to one character; got {type(got).__name__}")
        table: dict[Any, Any] = dict(got)  # pyright: ignore[reportUnknownArgumentType]
        missing = [b for b in range(256) if b not in table]
        if missing or len(table) != 256:
            extra = [k for k in table if k not in expected]
            raise NotYet(
                f"the table has {len(table)} entries; it needs one for each of the 256 bytes, keyed by the byte as an "
                f"int: {f'byte {missing[0]} is missing' if missing else f'{extra[0]!r} is not a byte'}"
            )
        bad = [b for b in range(256) if not (isinstance(table[b], str) and len(table[b]) == 1)]
        if bad:
            raise NotYet(
                f"{_shown(bad[0])} maps to {table[bad[0]]!r}: each byte maps to one character (a str of length 1)"
            )
        if len(set(table.values())) < 256:
            raise NotYet(
                "two bytes map to the same character, so decoding could not tell them apart: each byte needs its own"
            )
        if all(table[b] == chr(b) for b in range(256)):
            raise NotYet(
                "every byte maps to itself, control characters and the space included: a token such as ' the' or "
                "'\\n' would hold an invisible character, and a vocabulary file split on spaces breaks. Keep the "
                "printable bytes ('!'-'~', '¡'-'¬', '®'-'ÿ') and move each other byte, in order, to chr(256 + n)"
            )
        if all(table[b] == chr(256 + b) for b in range(256) if expected[b] != chr(b)):
            raise NotYet(
                "the moved bytes go to chr(256 + b): the n-th byte that is not printable goes to chr(256 + n), n "
                "counting only those bytes (the space, the 33rd of them, becomes 'Ġ', chr(288))"
            )
        for b in range(256):
            if table[b] != expected[b]:
                kept = expected[b] == chr(b)
                raise NotYet(
                    f"{_shown(b)} maps to {table[b]!r}; GPT-2's table gives {expected[b]!r}: "
                    + (
                        "it is printable, so it stays itself (the kept ranges are '!'-'~', '¡'-'¬' and '®'-'ÿ')"
                        if kept
                        else "it is not printable, so it moves to chr(256 + n), n counting the moved bytes in order"
                    )
                )
        return "the byte table is GPT-2's: every byte a printable character, the space 'Ġ', the newline 'Ċ'."

    return verdict(run)


def _as_tree(value: Any) -> Any:
    """An answer's tree with lists read as pairs (``[a, b]`` is ``(a, b)``), so either is accepted."""
    if isinstance(value, list | tuple):
        return tuple(_as_tree(v) for v in value)  # pyright: ignore[reportUnknownVariableType]
    return value


def _leaves(tree: Any) -> str:
    return tree if isinstance(tree, str) else "".join(_leaves(t) for t in tree)


def _malformed(tree: Any) -> str | None:
    """What makes ``tree`` no tree of strings and pairs, in words (``None`` if it is one)."""
    if isinstance(tree, str):
        return None
    if tree is None:
        return (
            "part of it is None, so some path of your function returns nothing: a token of one character returns "
            "itself, every other token a pair"
        )
    if not isinstance(tree, tuple):
        return (
            f"it holds {tree!r} (of type {type(tree).__name__}): a tree holds only strings (its leaves) and pairs "
            "(left, right); leave out ranks and anything else"
        )
    parts: tuple[Any, ...] = tree  # pyright: ignore[reportUnknownVariableType]
    odd = next((part for part in parts if not isinstance(part, str | tuple)), "")  # None, a rank, ...
    if odd != "":
        return _malformed(odd)
    if len(parts) != 2:
        items = f"{len(parts)} item" + ("" if len(parts) == 1 else "s")
        return f"it holds a tuple of {items}: every merge joins two tokens, so each node is a pair (left, right)"
    return next((m for m in map(_malformed, parts) if m), None)


def _leaves_wrapped(tree: Any) -> Any:
    """A tree with each leaf in a tuple of its own (``'a'`` -> ``('a',)``): a classic mistake."""
    return (tree,) if isinstance(tree, str) else tuple(_leaves_wrapped(t) for t in tree)


def _cut_into_tokens(token: str, ranks: dict[tuple[str, str], int], from_right: bool) -> Any:
    """The classic mistake: the first cut (from the left, or from the right) into two strings that are both tokens,
    whether or not that pair is a merge."""
    tokens = {a + b for a, b in ranks} | {c for pair in ranks for part in pair for c in part}
    if len(token) == 1:
        return token
    for i in range(len(token) - 1, 0, -1) if from_right else range(1, len(token)):
        if token[:i] in tokens and token[i:] in tokens:
            return _cut_into_tokens(token[:i], ranks, from_right), _cut_into_tokens(token[i:], ranks, from_right)
    return token


def _first_non_merge(tree: Any, ranks: dict[tuple[str, str], int]) -> tuple[str, str, str] | None:
    """The first node of ``tree`` (from the root) whose two parts are no merge in ``ranks``: (the node's token, its
    left part, its right part); None if every pair is a merge."""
    if isinstance(tree, str):
        return None
    a, b = _leaves(tree[0]), _leaves(tree[1])
    if (a, b) not in ranks:
        return a + b, a, b
    return _first_non_merge(tree[0], ranks) or _first_non_merge(tree[1], ranks)


def check_merge_tree(fn: Callable[..., Any]) -> Verdict:
    """``fn(token, ranks)``: the token's merge tree, as ``merge_tree`` builds it."""

    def one(token: str, ranks: dict[tuple[str, str], int]) -> str:
        got = _as_tree(call(fn, token, dict(ranks)))
        expected = merge_tree(token, ranks)
        if got == expected:
            return "the merge tree is right: each token cut where the cut is a merge, down to single characters."
        if len(token) == 1:
            raise NotYet(f"{token!r} gives {got!r}: a token of one character is a leaf, returned as itself")
        top = expected if isinstance(expected, str) else (_leaves(expected[0]), _leaves(expected[1]))
        if isinstance(got, str):
            raise NotYet(
                f"{token!r} gives the string {got!r}: return the token itself only when it is one character; "
                f"otherwise a pair (left, right), here the trees of {top[0]!r} and {top[1]!r}"
            )
        if got == tuple(token):
            raise NotYet(
                f"{token!r} gives its characters side by side, {got}: a tree nests its merges, one pair per merge; "
                f"here the last merge joined {top[0]!r} and {top[1]!r}"
            )
        if got == _leaves_wrapped(expected):
            raise NotYet(
                f"{token!r} gives {got}: a token of one character is a leaf, returned as itself (the str), "
                "not in a tuple of its own"
            )
        malformed = _malformed(got)
        if malformed:
            raise NotYet(f"{token!r} gives {got!r}: {malformed}")
        if got == top:
            raise NotYet(
                f"{token!r} gives {got}, the last merge only: {top[0]!r} and {top[1]!r} are tokens made by merges too, "
                "so each part is a tree built the same way, down to single characters (call your function on each "
                "part; only a token of one character is a leaf)"
            )
        for wrong_cut in (_cut_into_tokens(token, ranks, from_right) for from_right in (False, True)):
            if got != wrong_cut or wrong_cut == expected:
                continue
            a, b = _leaves(wrong_cut[0]), _leaves(wrong_cut[1])
            raise NotYet(
                f"{token!r} is cut as {a!r} + {b!r}: both are tokens, but ({a!r}, {b!r}) is not a merge, so GPT-2 did "
                f"not make {token!r} from them. Of the ways to cut a token in two, keep the one whose pair is in ranks "
                f"(here {top[0]!r} + {top[1]!r})"
            )
        wrong = _first_non_merge(got, ranks) if _leaves(got) == token else None
        if wrong is not None:
            node, a, b = wrong
            right = merge_tree(node, ranks)
            made = "" if isinstance(right, str) else f" (here {_leaves(right[0])!r} + {_leaves(right[1])!r})"
            raise NotYet(
                f"{token!r} gives {got}: {node!r} is cut as {a!r} + {b!r}, but ({a!r}, {b!r}) is not a merge in "
                f"ranks, so GPT-2 did not make {node!r} from them. Of the ways to cut a token in two, keep the one "
                f"whose pair is in ranks{made}"
            )
        raise NotYet(f"{token!r} gives {got}; expected {expected}")

    def run() -> str:
        # 'Ġth' starts a merge and begins 'Ġthe', which is not made from it
        ranks = {
            ("h", "e"): 0, ("Ġ", "t"): 1, ("Ġt", "he"): 2, ("t", "he"): 3, ("Ġt", "h"): 4, ("l", "o"): 5,
            ("lo", "w"): 6, ("e", "r"): 7, ("Ġ", "low"): 8, ("Ġlow", "er"): 9, ("a", "t"): 10, ("Ġth", "at"): 11,
        }  # fmt: skip
        return each_case(
            one,
            [
                dict(token="Ġthe", ranks=ranks),
                dict(token="Ġlower", ranks=ranks),
                dict(token="the", ranks=ranks),
                dict(token="x", ranks=ranks),
                dict(token="aaaa", ranks={("a", "a"): 0, ("aa", "a"): 1, ("aa", "aa"): 2}),
            ],
        )

    return verdict(run)


def lora_forward(x: Tensor, base: nn.Linear, A: Tensor, B: Tensor, alpha: float) -> Tensor:
    """LoRA's forward: the frozen layer plus the low-rank update, ``base(x) + (alpha / r) x Aᵀ Bᵀ``, r = A's rows."""
    return base(x) + (alpha / A.size(0)) * (x @ A.T @ B.T)


def check_lora_forward(fn: Callable[..., Any]) -> Verdict:
    """``fn(x, base, A, B, alpha)``: ``base(x) + (alpha / r) * x @ A.T @ B.T`` with ``A (r, in)``, ``B (out, r)``."""

    def one(d_in: int, d_out: int, r: int, alpha: float, seed: int) -> str:
        g = torch.Generator().manual_seed(seed)
        base = nn.Linear(d_in, d_out)
        with torch.no_grad():
            for p in base.parameters():
                p.copy_(torch.randn(p.shape, generator=g))
        x = torch.randn(2, 5, d_in, generator=g)  # (B, T, d_in)
        A, B = torch.randn(r, d_in, generator=g), torch.randn(d_out, r, generator=g)
        with torch.no_grad():
            expected = lora_forward(x, base, A, B, alpha)  # before the answer runs: it may change base
            frozen = {name: p.detach().clone() for name, p in base.named_parameters()}
            try:
                got = call(fn, x, base, A, B, alpha)
            except NotYet as e:
                if re.search(r"must be a matrix|shapes cannot be multiplied|size mismatch|must match", str(e)):
                    raise NotYet(
                        f"{e}: x here is {tuple(x.shape)}, (B, T, in), a batch of sequences as a model passes it, A "
                        f"{tuple(A.shape)} = (r, in) and B {tuple(B.shape)} = (out, r). The update is x @ A.T @ B.T: "
                        "@ keeps x's leading axes (torch.mm takes matrices only)"
                    ) from None
                raise
            changed = [name for name, p in base.named_parameters() if not torch.equal(p, frozen[name])]
            if changed:
                raise NotYet(
                    f"base.{changed[0]} was changed in place: the frozen layer stays as it is, and the update is "
                    "added to its output, base(x) + (alpha / r) * x @ A.T @ B.T (merging B @ A into the weight is for "
                    "after training, and on a copy)"
                )
            for p, value in zip(base.parameters(), frozen.values(), strict=True):
                p.copy_(value)
            update = x @ A.T @ B.T
            mistakes = [
                (base(x) + update, "the update is not scaled: multiply it by alpha / r (r = A.shape[0])"),
                (base(x) + (r / alpha) * update, "the scale is r / alpha; LoRA's is alpha / r"),
                (base(x) + alpha * update, "the scale is alpha; LoRA's is alpha / r, so that another rank r needs "
                 "roughly no new learning rate"),
                (x @ base.weight.T + (alpha / r) * update, "the base layer's bias is missing: call base(x)"),
                ((alpha / r) * update, "only the update is returned: add the frozen layer's own output, base(x)"),
                (base(x) + (alpha // r) * update, f"alpha // r rounds down ({alpha:g} // {r} = {alpha // r:g}): "
                 "divide with /, alpha / r"),
                (base(x) + (alpha / d_out) * update, f"the scale is alpha / {d_out}, with B.shape[0], the layer's "
                 "output size: r is A.shape[0] (A is (r, in), B is (out, r))"),
                (base(x) + (alpha / r**0.5) * update, "the scale is alpha / sqrt(r), rsLoRA's; LoRA's (and peft's "
                 "default) is alpha / r"),
                (base(x) + base.bias + (alpha / r) * update, "the bias is added twice: base(x) already adds it"),
                (base(x) + (alpha / 8) * update, f"the scale is alpha / 8, with peft's default rank written in: r "
                 f"is these matrices' rank, A.shape[0] (here {r})"),
            ]  # fmt: skip
        name_mistake(got, expected, mistakes)
        same(got, expected, "the LoRA layer's output")
        backpropagates(fn, x, base, A, B, alpha, what="the LoRA layer's output", reference=lora_forward)
        return "the LoRA forward is right: base(x) + (alpha / r) · x Aᵀ Bᵀ, and the gradients reach A and B."

    def run() -> str:
        return each_case(
            # alpha / r, r / alpha, alpha / 8 and alpha / d_out all differ, so that each scale is told apart
            one,
            [dict(d_in=6, d_out=4, r=2, alpha=5.0, seed=0), dict(d_in=5, d_out=7, r=3, alpha=1.5, seed=1)],
        )

    return verdict(run)


def _inputs_and_targets(got: Any) -> tuple[list[int], list[int]]:
    """An answer's ``(inputs, targets)``, each as a list of ints, or ``NotYet`` saying what it returned instead."""
    if not isinstance(got, tuple | list) or len(got) != 2:  # pyright: ignore[reportUnknownArgumentType]
        raise NotYet("return two things, (inputs, targets)")
    return _ints(got[0], "inputs"), _ints(got[1], "targets")


def _ints(value: Any, what: str) -> list[int]:
    if isinstance(value, Tensor):
        value = value.tolist()
    if not isinstance(value, list | tuple) or not all(isinstance(v, int) for v in value):  # pyright: ignore[reportUnknownVariableType]
        raise NotYet(f"{what} should be a list of ints (or a 1-D tensor); got {type(value).__name__}")
    return [int(v) for v in value]  # pyright: ignore[reportUnknownArgumentType, reportUnknownVariableType]


def check_prompt_mask(fn: Callable[..., Any]) -> Verdict:
    """``fn(prompt_ids, response_ids)`` returns ``(inputs, targets)`` as ``prompt_mask`` does."""

    def one(prompt_ids: list[int], response_ids: list[int]) -> str:
        got = call(fn, list(prompt_ids), list(response_ids))
        inputs, targets = _inputs_and_targets(got)
        want_inputs, want_targets = prompt_mask(prompt_ids, response_ids)
        ids = [*prompt_ids, *response_ids]
        if inputs == ids:
            raise NotYet(
                "the inputs are all the ids; the last id is only ever a target (nothing comes after it to predict): "
                "inputs = ids[:-1]"
            )
        if inputs != want_inputs:
            raise NotYet(f"the inputs are {inputs}; expected the ids but the last, {want_inputs}")
        p = len(prompt_ids)
        named = {
            "the prompt is not masked: the model would learn to write prompts. Put IGNORE (-100) at each position "
            "whose next token is still the prompt's": ids[1:],
            "the prompt is masked with 0, which is a token id, so the model learns to predict token 0 there: use "
            "IGNORE (-100), the index F.cross_entropy skips": [0] * (p - 1) + list(response_ids),
            "the first response token is masked too: the last prompt token (the assistant token) is the position "
            "that predicts it, so its target must stay": [IGNORE] * p + list(response_ids[1:]),
            "the targets are not shifted: position t predicts the token at t + 1, so the targets are ids[1:] with the "
            "prompt part masked": ([IGNORE] * p + list(response_ids))[: len(want_targets)],
            "the last prompt token is a target: the assistant token is part of the prompt, which the model is given, "
            "not asked to write": [IGNORE] * (p - 2) + [prompt_ids[-1], *response_ids],
            "the end token is masked; the model must learn to write it, or it will never stop": (
                [IGNORE] * (p - 1) + list(response_ids[:-1]) + [IGNORE]
            ),
            "the prompt is masked by its token values, so a response token that also occurs in the prompt is masked "
            "too: mask by position, the first len(prompt_ids) - 1 targets": [
                IGNORE if t in set(prompt_ids) else t for t in ids[1:]
            ],
        }
        if len(targets) != len(want_targets):
            raise NotYet(f"{len(targets)} targets for {len(inputs)} inputs: one target per input position")
        for message, buggy in named.items():
            if targets == buggy and buggy != want_targets:
                raise NotYet(message)
        if targets != want_targets:
            raise NotYet(f"the targets are {targets}; expected {want_targets}")
        return "the mask is right: the loss sees the response and its end token, never the prompt."

    def run() -> str:
        return each_case(
            one,
            [
                dict(prompt_ids=[1021, 72, 105, 33, 1022], response_ids=[88, 41, 1023]),
                dict(prompt_ids=[7, 8, 9], response_ids=[5, 6, 4, 3, 2]),
                # "reverse: a b" -> "b a": the response repeats the prompt's ids
                dict(prompt_ids=[1021, 60, 5, 6, 1022], response_ids=[6, 5, 1023]),
            ],
        )

    return verdict(run)


def multi_turn_mask(turns: list[tuple[list[int], list[int]]]) -> tuple[list[int], list[int]]:
    """The inputs and targets of a conversation of several turns, each ``(prompt_ids, response_ids)``: every response
    (with its end token) a target, every prompt masked; ``prompt_mask`` for one turn."""
    ids: list[int] = []
    labels: list[int] = []  # what each id is as a target: IGNORE for a prompt's ids
    for prompt_ids, response_ids in turns:
        ids += [*prompt_ids, *response_ids]
        labels += [IGNORE] * len(prompt_ids) + list(response_ids)
    return ids[:-1], labels[1:]  # position t predicts ids[t + 1]


def check_multi_turn_mask(fn: Callable[..., Any]) -> Verdict:
    """``fn(turns)`` returns ``(inputs, targets)`` of a conversation, as ``multi_turn_mask`` does."""

    def one(turns: list[tuple[list[int], list[int]]]) -> str:
        given = [(list(p), list(r)) for p, r in turns]
        got = call(fn, given)
        inputs, targets = _inputs_and_targets(got)
        want_inputs, want_targets = multi_turn_mask(turns)
        ids = [i for p, r in turns for i in (*p, *r)]
        if inputs == ids:
            raise NotYet("the inputs are all the ids; the last id is only ever a target: inputs = ids[:-1]")
        joined = len(want_inputs) - (len(turns) - 1)  # each turn shifted alone, then the pieces joined
        if len(turns) > 1 and (len(inputs) == joined or len(targets) == joined):
            raise NotYet(
                "each turn was shifted on its own and the pieces joined: the conversation is one sequence, so shift "
                "it once; the last token of one turn's response predicts the next turn's first prompt token"
            )
        if inputs != want_inputs:
            raise NotYet(f"the inputs are {inputs}; expected all the ids of all the turns but the last, {want_inputs}")
        if len(targets) != len(want_targets):
            raise NotYet(f"{len(targets)} targets for {len(inputs)} inputs: one target per input position")
        first_only = [IGNORE] * len(turns[0][0]) + list(turns[0][1]) + ids[len(turns[0][0]) + len(turns[0][1]) :]
        last_only = [IGNORE] * (len(ids) - len(turns[-1][1])) + list(turns[-1][1])
        prompts = {t for p, _ in turns for t in p}
        starts: set[int] = set()  # the positions in ids where a later turn's prompt begins
        ends: set[int] = set()  # the positions in ids of each prompt's last token
        position = 0
        for k, (p, r) in enumerate(turns):
            if k:
                starts.add(position)
            ends.add(position + len(p) - 1)
            position += len(p) + len(r)
        labels = [IGNORE, *want_targets]  # each id of ids as a target (the first is none)

        def relabelled(keep: Callable[[int, int, int], bool]) -> list[int]:
            """Each id's label, not shifted: a prompt's ids IGNORE, a response's id kept where ``keep(turn, its index
            in the response, the response's length)``."""
            out: list[int] = []
            for k, (p, r) in enumerate(turns):
                out += [IGNORE] * len(p) + [t if keep(k, i, len(r)) else IGNORE for i, t in enumerate(r)]
            return out

        last = len(turns) - 1
        boundary = [ids[i] if i in starts else label for i, label in enumerate(labels)][1:]
        zeroed = [0 if label == IGNORE else label for label in want_targets]
        named = {
            "the prompt ids are masked by their values, so a response token that also occurs in a prompt is masked "
            "too: mask by position, each prompt's span": [IGNORE if t in prompts else t for t in ids[1:]],
            "the last token of a response predicts the next turn's first prompt token (the user's turn begins), and "
            "that target is kept: it is the user's to write, so mask it too, as every prompt token": boundary,
            "the prompts are masked with 0, which is a token id, so the model learns to predict token 0 there: use "
            "IGNORE (-100), the index F.cross_entropy skips": zeroed,
            "only the first prompt is masked: every prompt of the conversation is given, not written, so each one's "
            "ids are IGNORE as targets": first_only[1:],
            "only the last response is a target: every response of the conversation is the assistant's and is "
            "learned (a trainer may choose otherwise, but this exercise keeps them all)": last_only[1:],
            "the prompts are not masked: the model would learn to write the user's turns": ids[1:],
            "the targets are not shifted: position t predicts the token at t + 1, so label every id first (IGNORE "
            "for a prompt's), then drop the first label; inputs drop the last id": labels[: len(targets)],
            "each response's end token is masked: the model must learn to write it at the end of every turn, or it "
            "will not stop": relabelled(lambda _k, i, n: i < n - 1)[1:],
            "the end token is a target in the last turn only: every response's end token is written by the "
            "assistant, and ends its turn": relabelled(lambda k, i, n: k == last or i < n - 1)[1:],
            "each response's first token is masked too: the prompt's last token (the assistant token) is the "
            "position that predicts it, so that target must stay": relabelled(lambda _k, i, _n: i > 0)[1:],
            "the assistant token ending each prompt is a target: it is part of the prompt, given to the model, not "
            "written by it": [
                t if (i + 1) in ends else label for i, (t, label) in enumerate(zip(ids[1:], want_targets, strict=True))
            ],
        }
        for message, buggy in named.items():
            if targets == buggy and buggy != want_targets:
                raise NotYet(message)
        if targets != want_targets:
            raise NotYet(f"the targets are {targets}; expected {want_targets}")
        return "the conversation's mask is right: every response a target, every prompt masked, one shift."

    def run() -> str:
        return each_case(
            one,
            [
                dict(turns=[([1021, 40, 41, 1022], [50, 51, 1023]), ([1021, 42, 1022], [52, 1023])]),
                dict(turns=[([1, 2], [3, 4]), ([5, 6, 7], [8]), ([9], [10, 11, 12])]),
                dict(turns=[([7, 8, 9], [5, 6, 4])]),
                dict(turns=[([1021, 60, 5, 6, 1022], [6, 5, 1023]), ([1021, 5, 1022], [5, 1023])]),
            ],
        )

    return verdict(run)


def stream_decode(chunks: list[bytes]) -> list[str]:
    """The text each chunk of UTF-8 bytes completes, as soon as its characters are whole: bytes that end in the middle
    of a character wait for the next chunk (``ByteBPE.decode_stream``'s rule, the standard library's incremental
    decoder)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    return [decoder.decode(chunk) for chunk in chunks]


def check_stream_decode(fn: Callable[..., Any]) -> Verdict:
    """``fn(chunks)``: one string per chunk of bytes, the text that chunk completes (``stream_decode``)."""

    def one(text: str, cuts: list[int]) -> str:
        data = text.encode("utf-8")
        bounds = [0, *cuts, len(data)]
        chunks = [data[a:b] for a, b in pairwise(bounds)]
        try:
            got = call(fn, list(chunks))
        except NotYet as e:
            if "UnicodeDecodeError" not in str(e) or isinstance(e, NotWritten):
                raise
            raise NotYet(
                f"{e}. A chunk may end inside a character: keep its last bytes for the next chunk (a character is 1 to "
                "4 bytes; decode the longest start that decodes)"
            ) from None
        if isinstance(got, tuple):
            got = list(got)  # pyright: ignore[reportUnknownArgumentType]
        if not isinstance(got, list) or not all(isinstance(t, str) for t in got):  # pyright: ignore[reportUnknownVariableType]
            raise NotYet(
                f'return a list of str, one per chunk ("" when a chunk completes no character); got {got!r:.60}'
            )
        expected = stream_decode(chunks)
        shown = "".join(got)
        if "\ufffd" in shown:
            raise NotYet(
                "'\ufffd' appears: a chunk that ends inside a character was decoded alone (errors='replace'). Keep the "
                "bytes of an unfinished character and decode them with the next chunk"
            )
        if len(got) != len(chunks):
            raise NotYet(
                f'{len(got)} strings for {len(chunks)} chunks: return one per chunk, "" when it completes none'
            )
        so_far = ["".join(expected[: k + 1]) for k in range(len(expected))]
        if got == so_far and got != expected:
            raise NotYet(
                f"each string is the whole text so far ({got[-1]!r} for the last chunk): return only what each chunk "
                "adds, the characters it completes, so that the pieces join to the text once"
            )
        if shown != text:
            raise NotYet(
                f"the pieces join to {shown!r}, not the text {text!r}: "
                + ("characters are lost (errors='ignore' drops the bytes of a cut character)" if len(shown) < len(text)
                   else "the text differs")
            )  # fmt: skip
        for k, (a, b) in enumerate(zip(got, expected, strict=True)):
            if a != b:
                early = "".join(expected[: k + 1])
                raise Named(
                    f"after chunk {k} ({chunks[k]!r}) your pieces so far make {''.join(got[: k + 1])!r}; every "
                    f"character complete by then is {early!r}: show each character as soon as its last byte arrives"
                )
        return "streaming decode is right: every character shown once, whole, as soon as its last byte arrives."

    def run() -> str:
        return each_case(
            one,
            [
                dict(text=" a 🤖 robot", cuts=[3, 4, 6, 7]),
                dict(text="café 東京 ok", cuts=[4, 7, 8, 9]),
                dict(text="plain text", cuts=[5]),
                # whole characters, then 2 or 3 bytes of a 4-byte one; 2 bytes of a 3-byte one
                dict(text="ok🤖!", cuts=[4]),
                dict(text="ok🤖!", cuts=[5]),
                dict(text="a東b", cuts=[3]),
            ],
        )

    return verdict(run)
