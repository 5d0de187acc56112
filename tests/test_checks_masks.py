"""The checkers of ``course_utils.checks.masks``, masks (chapter 01), against students' answers: right answers
written in other styles pass, each classic mistake fails with a message that names it, and an unwritten stub is
reported as not attempted.
"""

import numpy as np
import pytest
import torch
from helpers import verdict, verdict_rows, verdict_table_test

from course_utils.checks import (
    check_causal_mask,
    check_masked_mean,
    check_padding_mask,
    check_sliding_window_mask,
)
from course_utils.checks._core import MISTAKES

FLIPPED = "the mask's convention is flipped: in this course True means *may attend*"
HARD_CODED = "is a value written into the code"


def ids(cases):
    return [name for name, *_ in cases]


def test_the_flipped_wording_is_the_shared_one():
    assert MISTAKES["flipped mask"].startswith(FLIPPED)


# --- Exercise 1: my_causal_mask(size) ---------------------------------------------------------------------------


def causal_solution(size):  # the notebook's solution
    return torch.tril(torch.ones(size, size, dtype=torch.bool))


def causal_loops(size):
    mask = torch.zeros(size, size, dtype=torch.bool)
    for i in range(size):
        for j in range(i + 1):
            mask[i, j] = True
    return mask


def causal_from_numpy(size):
    return torch.from_numpy(np.tril(np.ones((size, size), dtype=bool)))


CAUSAL_RIGHT = [
    ("solution", causal_solution),
    ("loops", causal_loops),
    ("arange comparison", lambda size: torch.arange(size)[:, None] >= torch.arange(size)),
    ("not the strict upper triangle", lambda size: ~torch.ones(size, size, dtype=torch.bool).triu(diagonal=1)),
    ("float tril then .bool()", lambda size: torch.ones(size, size).tril().bool()),
    ("tril == 1", lambda size: torch.tril(torch.ones(size, size)) == 1),
    ("list comprehension", lambda size: torch.tensor([[j <= i for j in range(size)] for i in range(size)])),
    ("numpy then from_numpy", causal_from_numpy),
    ("keyword argument", lambda size: torch.ones((size, size), dtype=torch.bool).tril(diagonal=0)),
]


CAUSAL_WRONG = [
    ("transposed (triu)", lambda size: torch.ones(size, size, dtype=torch.bool).triu(), "transposed"),
    ("flipped: True = future", lambda size: torch.ones(size, size, dtype=torch.bool).triu(1), FLIPPED),
    ("flipped: True = future", lambda size: torch.ones(size, size, dtype=torch.bool).triu(1), "True marks the future"),
    ("float 0/1", lambda size: torch.ones(size, size).tril(), "holds the numbers 0 and 1 (dtype torch.float32)"),
    ("int 0/1", lambda size: torch.ones(size, size, dtype=torch.long).tril(), "not bools"),
    (
        "additive 0/-inf",
        lambda size: torch.full((size, size), float("-inf")).triu(1),
        "additive float mask (0 where allowed, -inf where hidden)",
    ),
    ("additive 0/-1e9", lambda size: torch.full((size, size), -1e9).triu(1), "in this course a mask is bool"),
    ("diagonal hidden", lambda size: torch.ones(size, size, dtype=torch.bool).tril(-1), "attend to itself"),
    ("one future token", lambda size: torch.ones(size, size, dtype=torch.bool).tril(1), "one future position"),
    ("size hard-coded", lambda size: causal_solution(4), f"not with size = 1: {HARD_CODED}"),
    ("size hard-coded, shape", lambda size: causal_solution(4), "has shape (4, 4); expected (1, 1)"),
    (
        "on another device",
        lambda size: causal_solution(size).to("meta"),
        "is on the meta device, which holds no values",
    ),
    ("numpy array", lambda size: np.tril(np.ones((size, size), dtype=bool)), "should be a torch.Tensor; got ndarray"),
    ("extra batch axis", lambda size: causal_solution(size)[None], "has shape (1, 4, 4); expected (4, 4)"),
    ("all True", lambda size: torch.ones(size, size, dtype=torch.bool), MISTAKES["no causal mask"]),
]


# --- Exercise 2: my_padding_mask(tokens, pad_id) ----------------------------------------------------------------


def padding_solution(tokens, pad_id):  # the notebook's solution
    return (tokens != pad_id)[:, None, None, :]


def padding_loops(tokens, pad_id):
    rows = [[token != pad_id for token in row] for row in tokens.tolist()]
    return torch.tensor(rows, device=tokens.device).view(len(rows), 1, 1, -1)


PADDING_RIGHT = [
    ("solution", padding_solution),
    ("unsqueeze twice", lambda tokens, pad_id: (tokens != pad_id).unsqueeze(1).unsqueeze(2)),
    ("ne and view", lambda tokens, pad_id: tokens.ne(pad_id).view(tokens.size(0), 1, 1, tokens.size(1))),
    ("not equal", lambda tokens, pad_id: ~(tokens == pad_id)[:, None, None]),
    ("reshape with -1", lambda tokens, pad_id: (tokens != pad_id).reshape(tokens.shape[0], 1, 1, -1)),
    ("loops over lists", padding_loops),
    ("torch.where", lambda tokens, pad_id: torch.where(tokens == pad_id, False, True)[:, None, None, :]),
    ("subtract then bool", lambda tokens, pad_id: (tokens - pad_id).bool()[:, None, None, :]),
    ("keyword arguments", lambda tokens, pad_id: torch.ne(tokens, other=pad_id).unsqueeze(dim=1).unsqueeze(dim=1)),
]


def padding_in_place(tokens, pad_id):
    return tokens.ne_(pad_id).bool()[:, None, None, :]


def padded_queries(tokens, pad_id):
    real = tokens != pad_id
    return real[:, None, :, None] & real[:, None, None, :]  # (B, 1, T, T)


def padding_from_lengths(tokens, pad_id):
    lengths = (tokens != pad_id).sum(dim=1)  # (B,): as if the padding were all at the end
    return (torch.arange(tokens.size(1)) < lengths[:, None])[:, None, None, :]


PADDING_WRONG = [
    ("built from the lengths", padding_from_lengths, "the mask is built from each sequence's length"),
    ("tokens > pad_id", lambda tokens, pad_id: (tokens > pad_id)[:, None, None, :], "tokens > pad_id takes the real"),
    ("(B, T)", lambda tokens, pad_id: tokens != pad_id, "shape (B, T): add two axes"),
    ("flipped: True = pad", lambda tokens, pad_id: (tokens == pad_id)[:, None, None, :], FLIPPED),
    ("flipped: True = pad", lambda tokens, pad_id: (tokens == pad_id)[:, None, None, :], "True marks the padding"),
    ("padded queries hidden too", padded_queries, MISTAKES["padded query"]),
    (
        "queries instead of keys",
        lambda tokens, pad_id: (tokens != pad_id)[:, None, :, None],
        "shape (B, 1, T, 1) masks the padded *queries*",
    ),
    (
        "expanded to (B, 1, T, T)",
        lambda tokens, pad_id: padding_solution(tokens, pad_id).expand(-1, -1, tokens.size(1), -1),
        "shape (3, 1, 5, 5): the values are right, but keep the two singleton axes",
    ),
    (
        "axes in front",
        lambda tokens, pad_id: (tokens != pad_id)[None, None],
        "shape (1, 1, 3, 5): the values are right; the axes must be (B, 1, 1, T)",
    ),
    (
        "pad_id hard-coded (!= 0)",
        lambda tokens, pad_id: (tokens != 0)[:, None, None, :],
        f"not with pad_id = 3, B = 2, T = 7: {HARD_CODED}",
    ),
    (
        "pad_id hard-coded (!= 0), the token",
        lambda tokens, pad_id: (tokens != 0)[:, None, None, :],
        "where tokens[0, 0] = 0 and pad_id = 3: True exactly where tokens != pad_id",
    ),
    ("pad_id hard-coded (> 0)", lambda tokens, pad_id: (tokens > 0)[:, None, None, :], HARD_CODED),
    (
        "pad_id guessed as the smallest id",
        lambda tokens, pad_id: (tokens != tokens.min())[:, None, None, :],
        "not with pad_id = 3, B = 2, T = 7: is a value written into the code that should come from the arguments? "
        "(padding mask differs at index (0, 0, 0, 0): got False, expected True, where tokens[0, 0] = 0 and pad_id = 3",
    ),
    (
        "pad_id guessed as the last token",
        lambda tokens, pad_id: (tokens != tokens[:, -1:])[:, None, None, :],
        "padding mask differs at index (2, 0, 0, 0): got False, expected True, where tokens[2, 0] = 4 and pad_id = 0",
    ),
    ("tokens > pad_id", lambda tokens, pad_id: (tokens > pad_id)[:, None, None, :], "real ids below pad_id = 3"),
    (
        "float 0/1",
        lambda tokens, pad_id: (tokens != pad_id).float()[:, None, None, :],
        "holds the numbers 0 and 1 (dtype torch.float32), not bools",
    ),
    (
        "float 0/1, flipped",
        lambda tokens, pad_id: (tokens == pad_id).float()[:, None, None, :],
        f"not bools: return a bool tensor (dtype=torch.bool, or .bool()), True = may attend. Also, {FLIPPED}",
    ),
    ("int 0/1", lambda tokens, pad_id: (tokens != pad_id).long()[:, None, None, :], "(dtype torch.int64), not bools"),
    (
        "additive 0/-inf",
        lambda tokens, pad_id: torch.zeros(tokens.shape).masked_fill(tokens == pad_id, float("-inf"))[:, None, None],
        "additive float mask",
    ),
    ("changes its input in place", padding_in_place, "changed its input tokens in place"),
    ("on another device", lambda tokens, pad_id: padding_solution(tokens, pad_id).to("meta"), "is on meta"),
]


# --- Exercise 3: sliding_window_mask(size, window) --------------------------------------------------------------


def window_solution(size, window):  # the notebook's solution
    i, j = torch.arange(size)[:, None], torch.arange(size)  # (size, 1) queries, (size,) keys
    return (j <= i) & (j > i - window)  # (size, size)


def window_loops(size, window):
    mask = torch.zeros(size, size, dtype=torch.bool)
    for i in range(size):
        for j in range(max(0, i - window + 1), i + 1):
            mask[i, j] = True
    return mask


def window_tril_triu(size, window):
    ones = torch.ones(size, size, dtype=torch.bool)
    return torch.tril(ones) & torch.triu(ones, diagonal=1 - window)


WINDOW_RIGHT = [
    ("solution", window_solution),
    ("loops", window_loops),
    ("tril & triu", window_tril_triu),
    ("causal minus the far past", lambda s, w: torch.ones(s, s).tril().bool() & ~torch.ones(s, s).tril(-w).bool()),
    ("distance", lambda s, w: ((torch.arange(s)[:, None] - torch.arange(s)) >= 0) & ((torch.arange(s)[:, None] - torch.arange(s)) < w)),
    ("min(window, size)", lambda s, w: window_solution(s, min(w, s))),
    ("float then bool", lambda s, w: torch.ones(s, s).tril().triu(-(w - 1)) > 0),
]  # fmt: skip


def window_negative_slices(size, window):
    mask = torch.zeros(size, size, dtype=torch.bool)
    for i in range(size):
        mask[i, i - window + 1 : i + 1] = True  # negative start for the first rows: counts from the end
    return mask


WINDOW_WRONG = [
    (
        "| for &",
        lambda s, w: (torch.arange(s) <= torch.arange(s)[:, None]) | (torch.arange(s) > torch.arange(s)[:, None] - w),
        "joined by | (or)",
    ),
    ("negative slice start", window_negative_slices, "a slice that starts at i - window + 1 < 0 counts from the end"),
    ("flipped", lambda s, w: ~window_solution(s, w), FLIPPED),
    ("off by one, more", lambda s, w: window_solution(s, w + 1), "with window=3 each query sees 4 positions"),
    ("off by one, fewer", lambda s, w: window_solution(s, w - 1), "with window=3 each query sees only 2 positions"),
    ("band", lambda s, w: (torch.arange(s)[:, None] - torch.arange(s)).abs() < w, "the future is allowed"),
    ("transposed", lambda s, w: window_solution(s, w).T, "transposed"),
    ("window ignored", lambda s, w: torch.ones(s, s, dtype=torch.bool).tril(), "the window=3 is ignored"),
    ("itself left out", lambda s, w: window_solution(s, w + 1) & ~torch.eye(s, dtype=torch.bool), "attend to itself"),
    ("window hard-coded", lambda s, w: window_solution(s, 3), "not with size = 5, window = 1: " + HARD_CODED),
    ("size hard-coded", lambda s, w: window_solution(6, w), "has shape (6, 6); expected (5, 5)"),
    ("float 0/1", lambda s, w: window_solution(s, w).float(), "holds the numbers 0 and 1"),
    (
        "additive 0/-inf",
        lambda s, w: torch.zeros(s, s).masked_fill(~window_solution(s, w), float("-inf")),
        "additive float mask (0 where allowed, -inf where hidden)",
    ),
    (
        "on another device",
        lambda s, w: window_solution(s, w).to("meta"),
        "is on the meta device, which holds no values",
    ),
]


# --- Exercise 4: masked_mean(x, mask) ---------------------------------------------------------------------------


def mean_solution(x, mask):  # the notebook's solution
    keep = mask.unsqueeze(-1).to(x.dtype)  # (B, T, 1)
    return (x * keep).sum(dim=1) / keep.sum(dim=1)  # (B, d) / (B, 1)


def mean_loops(x, mask):
    out = torch.zeros(x.size(0), x.size(2), device=x.device)
    for b in range(x.size(0)):
        out[b] = x[b][mask[b]].mean(dim=0)
    return out


def mean_stack(x, mask):
    return torch.stack([row[keep].mean(0) for row, keep in zip(x, mask, strict=True)])


def mean_float64(x, mask):
    keep = mask.double().unsqueeze(-1)
    return ((x.double() * keep).sum(1) / keep.sum(1)).to(x.dtype)


MEAN_RIGHT = [
    ("solution", mean_solution),
    ("loops with boolean indexing", mean_loops),
    ("stack of row means", mean_stack),
    ("einsum", lambda x, m: torch.einsum("btd,bt->bd", x, m.float()) / m.sum(dim=1, keepdim=True)),
    ("torch.where", lambda x, m: torch.where(m[..., None], x, 0.0).sum(1) / m.sum(1)[:, None]),
    ("bool times float", lambda x, m: (x * m.unsqueeze(-1)).sum(dim=1) / m.sum(dim=-1, keepdim=True)),
    ("clamped count", lambda x, m: (x * m[..., None]).sum(1) / m.sum(1, keepdim=True).clamp(min=1)),
    ("float64 inside", mean_float64),
    ("nanmean", lambda x, m: torch.nanmean(x.masked_fill(~m.unsqueeze(-1), float("nan")), dim=1)),
    ("masked_fill (not in place)", lambda x, m: x.masked_fill(~m[..., None], 0).sum(1) / m.sum(1, keepdim=True)),
]


def mean_in_place(x, mask):
    x.masked_fill_(~mask.unsqueeze(-1), 0.0)
    return x.sum(dim=1) / mask.sum(dim=1, keepdim=True)


def mean_in_place_multiply(x, mask):
    x *= mask.unsqueeze(-1)
    return x.sum(dim=1) / mask.sum(dim=1, keepdim=True)


def mean_of_first_positions(x, mask):  # assumes the padding is at the end
    return torch.stack([x[b, : int(mask[b].sum())].mean(dim=0) for b in range(x.size(0))])


def mean_numpy(x, mask):
    keep = mask.numpy()[..., None]
    return torch.from_numpy((x.detach().numpy() * keep).sum(1) / keep.sum(1))


def mean_no_grad(x, mask):
    with torch.no_grad():
        return mean_solution(x, mask)


def mean_item(x, mask):
    return torch.tensor([[x[b][mask[b]][:, k].mean().item() for k in range(x.size(2))] for b in range(x.size(0))])


def mean_batch_hard_coded(x, mask):
    return torch.stack([x[b][mask[b]].mean(0) for b in range(3)])


MEAN_WRONG = [
    ("padding averaged in", lambda x, m: x.mean(dim=1), "the padding is averaged in"),
    ("divided by T", lambda x, m: (x * m.unsqueeze(-1)).sum(dim=1) / x.size(1), "divided by T"),
    ("divided by T, hard-coded", lambda x, m: (x * m.unsqueeze(-1)).sum(dim=1) / 5, "divided by T"),
    ("a sum", lambda x, m: (x * m.unsqueeze(-1)).sum(dim=1), "a sum, not a mean"),
    ("padding summed in", lambda x, m: x.sum(dim=1) / m.sum(dim=1, keepdim=True), "the padding is summed in"),
    ("divided by mask.sum()", lambda x, m: (x * m[..., None]).sum(1) / m.sum(), "the whole batch's number"),
    ("mean over the padding", lambda x, m: mean_solution(x, ~m), "mean over the padding, as if True marked the"),
    ("mean over the padding", lambda x, m: mean_solution(x, ~m), "in this course True means *may attend*"),
    ("keepdim", lambda x, m: mean_solution(x, m)[:, None], "keepdim"),
    ("one mean for the batch", lambda x, m: x[m].mean(dim=0), "one mean over the whole batch"),
    ("over the features", lambda x, m: (x * m[..., None]).sum(-1) / m.sum(1, keepdim=True), "ran over the features"),
    ("mask not unsqueezed", lambda x, m: (x * m).sum(1) / m.sum(1, keepdim=True), "needs a trailing axis"),
    ("count without keepdim", lambda x, m: (x * m[..., None]).sum(1) / m.sum(1), "mask.sum(dim=1, keepdim=True)"),
    ("assumes right padding", mean_of_first_positions, "not always at the start"),
    ("masked_fill_ in place", mean_in_place, "changed its input x in place"),
    ("*= in place", mean_in_place_multiply, "changed its input x in place"),
    ("NumPy", mean_numpy, "cannot be trained through"),
    ("no_grad", mean_no_grad, "cannot be trained through"),
    (".item()", mean_item, "the mean cannot be trained through"),
    (".detach()", lambda x, m: mean_solution(x, m).detach(), "cannot be trained through"),
    ("batch size hard-coded", mean_batch_hard_coded, "not with B = 2"),
    ("on another device", lambda x, m: mean_solution(x, m).to("meta"), "the mean is on meta; the inputs were on cpu"),
]


def sliding_window(size, window):
    i, j = torch.arange(size)[:, None], torch.arange(size)
    return (j <= i) & (j > i - window)


def masked_mean(x, mask):
    keep = mask.unsqueeze(-1).float()  # (B, T, 1)
    return (x * keep).sum(dim=1) / keep.sum(dim=1)


@pytest.mark.parametrize(
    "buggy, named",
    [
        (lambda n, w: sliding_window(n, w + 1), "off by one"),
        (lambda n, w: sliding_window(n, w - 1), "sees only"),
        (lambda n, w: (torch.arange(n)[:, None] - torch.arange(n)).abs() < w, "future is allowed"),
        (lambda n, w: sliding_window(n, w).T, "transposed"),
        (lambda n, w: torch.ones(n, n, dtype=torch.bool).tril(), "window="),
    ],
)  # fmt: skip
def test_sliding_window_mistakes_are_named(buggy, named, capsys):
    ok, out = verdict(check_sliding_window_mask, buggy, capsys)
    assert not ok and named in out


def test_sliding_window_off_by_one_says_how_many_positions(capsys):
    _, out = verdict(check_sliding_window_mask, lambda n, w: sliding_window(n, w + 1), capsys)
    assert "sees 4 positions" in out


@pytest.mark.parametrize(
    "buggy, named",
    [
        (lambda x, m: x.mean(dim=1), "padding is averaged in"),
        (lambda x, m: (x * m.unsqueeze(-1)).sum(dim=1) / x.size(1), "divided by T"),
        (lambda x, m: (x * m.unsqueeze(-1)).sum(dim=1), "a sum, not a mean"),
        (lambda x, m: masked_mean(x, ~m), "mean over the padding"),
        (lambda x, m: masked_mean(x, m)[:, None], "keepdim"),
    ],
)
def test_masked_mean_mistakes_are_named(buggy, named, capsys):
    ok, out = verdict(check_masked_mean, buggy, capsys)
    assert not ok and named in out


# --- the verdict table: every answer above, the verdict it must get and the words its message must hold ---------

VERDICTS = [
    *verdict_rows(check_causal_mask, CAUSAL_RIGHT, CAUSAL_WRONG, says="✅ your causal mask is right"),
    *verdict_rows(check_padding_mask, PADDING_RIGHT, PADDING_WRONG, says="✅ your padding mask is right"),
    *verdict_rows(check_sliding_window_mask, WINDOW_RIGHT, WINDOW_WRONG, says="✅ sliding_window_mask is right"),
    *verdict_rows(check_masked_mean, MEAN_RIGHT, MEAN_WRONG, says="✅ masked_mean is right"),
]


test_each_answer_gets_its_verdict = verdict_table_test(VERDICTS)
