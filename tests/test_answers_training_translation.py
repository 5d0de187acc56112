"""Students' answers to the exercises of chapters 06 (label smoothing, weight tying, sequence accuracy), 08 (beam
step, BPE segmentation, BLEU's n-gram matches) and 09 (the causality probe's core step): every right answer, however
it is written, passes; every classic wrong one fails with a message that names its mistake."""

import heapq
import itertools
import re
from collections import Counter, defaultdict

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers import judged, verdict

from course_utils.checks import (
    check_beam_step,
    check_bpe_segment,
    check_future_leak,
    check_label_smoothing,
    check_ngram_matches,
    check_sequence_accuracy,
    check_weight_tying,
)
from course_utils.data.bpe import merge_pair

# --- 06: label smoothing ------------------------------------------------------------------------------------------


def ls_solution(logits, target, smoothing):  # the notebook's solution
    log_p = logits.log_softmax(dim=-1)  # (N, V)
    V = logits.size(-1)
    q = torch.full_like(log_p, smoothing / V)  # (N, V): the smoothed target distribution
    q.scatter_(1, target[:, None], 1 - smoothing + smoothing / V)
    return -(q * log_p).sum(dim=-1).mean()  # (N,) -> ()


def ls_numpy_normaliser(logits, target, smoothing):
    """log p = logits - log sum exp(logits), the normaliser computed in NumPy: the right loss, a wrong gradient."""
    log_z = torch.from_numpy(np.log(np.exp(logits.detach().numpy()).sum(-1, keepdims=True)))
    log_p = logits - log_z
    q = torch.full_like(log_p, smoothing / logits.size(-1)).scatter(1, target[:, None], 1 - smoothing)
    q = q + F.one_hot(target, logits.size(-1)) * smoothing / logits.size(-1)
    return -(q * log_p).sum(-1).mean()


def ls_smoothing_term_detached(logits, target, smoothing):
    log_p = logits.log_softmax(-1)
    nll = F.nll_loss(log_p, target)
    return (1 - smoothing) * nll + smoothing * (-log_p.mean(dim=1)).mean().detach()


def ls_mixture(logits, target, smoothing):
    """(1 - eps) x NLL + eps x the mean of -ln p over the vocabulary: the same loss, another formula."""
    log_p = F.log_softmax(logits, dim=1)
    nll = F.nll_loss(log_p, target)
    return (1 - smoothing) * nll + smoothing * (-log_p.mean(dim=1)).mean()


def ls_loop(logits, target, smoothing):
    """An explicit loop over positions and tokens."""
    N, V = logits.shape
    total = 0.0
    for i in range(N):
        log_p = logits[i] - torch.logsumexp(logits[i], dim=0)
        for c in range(V):
            q = smoothing / V + (1 - smoothing if c == int(target[i]) else 0.0)
            total = total - q * log_p[c]
    return total / N


def ls_one_hot_float64(logits, target, smoothing):
    """One-hot targets, computed in float64, cast back; softmax then log; keyword arguments."""
    V = logits.shape[-1]
    q = F.one_hot(target, num_classes=V).double() * (1 - smoothing) + smoothing / V
    log_p = torch.log(torch.softmax(logits.double(), dim=-1))
    return torch.sum(-q * log_p, dim=-1).mean().to(dtype=logits.dtype)


def ls_einsum_where(logits, target, smoothing):
    """torch.where for the target, einsum for the dot product, keeping the device from the input."""
    V = logits.size(1)
    is_true = torch.arange(V, device=logits.device)[None, :] == target[:, None]
    q = torch.where(is_true, 1 - smoothing + smoothing / V, smoothing / V)
    return -torch.einsum("nv,nv->", q, logits.log_softmax(-1)) / logits.size(0)


def ls_pytorch(logits, target, smoothing):
    return F.cross_entropy(logits, target, label_smoothing=smoothing)


def ls_shape_1(logits, target, smoothing):
    """A loss of shape (1,), the rows' mean kept as a dimension: one number all the same."""
    V = logits.size(-1)
    q = torch.full_like(logits, smoothing / V).scatter(1, target.unsqueeze(1), 1 - smoothing + smoothing / V)
    return (-(q * logits.log_softmax(-1)).sum(-1, keepdim=True)).mean(0)


def ls_numpy_float(logits, target, smoothing):
    """NumPy, a NumPy float back: the right number, nothing to backpropagate through."""
    x = logits.detach().numpy().astype(np.float64)
    log_p = x - np.log(np.exp(x).sum(-1, keepdims=True))
    V = x.shape[-1]
    q = np.full_like(log_p, smoothing / V)
    q[np.arange(len(q)), target.numpy()] += 1 - smoothing
    return -(q * log_p).sum(-1).mean()


def _q(logits, target, others, true):
    return torch.full_like(logits, others).scatter(1, target[:, None], true)


def ls_annotated(logits, target, smoothing):
    """The Annotated Transformer's LabelSmoothing: eps / (V - 2), 1 - eps, the padding column and rows zeroed."""
    V = logits.size(-1)
    q = _q(logits, target, smoothing / (V - 2), 1 - smoothing)
    q[:, 0] = 0
    q[target == 0] = 0
    return -(q * logits.log_softmax(-1)).sum(-1).mean()


def ls_annotated_no_padding(logits, target, smoothing):
    V = logits.size(-1)
    return -(_q(logits, target, smoothing / (V - 2), 1 - smoothing) * logits.log_softmax(-1)).sum(-1).mean()


def ls_v_minus_1(logits, target, smoothing):
    V = logits.size(-1)
    return -(_q(logits, target, smoothing / (V - 1), 1 - smoothing) * logits.log_softmax(-1)).sum(-1).mean()


def ls_true_one_minus_eps(logits, target, smoothing):
    V = logits.size(-1)
    return -(_q(logits, target, smoothing / V, 1 - smoothing) * logits.log_softmax(-1)).sum(-1).mean()


def ls_skips_zero_as_padding(logits, target, smoothing):
    keep = target != 0
    return ls_solution(logits[keep], target[keep], smoothing)


def ls_hard_coded_eps(logits, target, smoothing):
    return ls_solution(logits, target, 0.1)


def ls_hard_coded_v(logits, target, smoothing):
    V = 5
    q = _q(logits, target, smoothing / V, 1 - smoothing + smoothing / V)
    return -(q * logits.log_softmax(-1)).sum(-1).mean()


def ls_item(logits, target, smoothing):
    return ls_solution(logits, target, smoothing).item()


def ls_detach(logits, target, smoothing):
    return ls_solution(logits.detach(), target, smoothing)


def ls_no_grad(logits, target, smoothing):
    with torch.no_grad():
        return ls_solution(logits, target, smoothing)


def ls_in_place(logits, target, smoothing):
    logits -= logits.max(dim=-1, keepdim=True).values  # stabilised, but in the caller's tensor
    return ls_solution(logits, target, smoothing)


def ls_kl(logits, target, smoothing):
    """Sum q (ln q - ln p): NaN where q = 0 (chapter 06's pitfall table)."""
    V = logits.size(-1)
    q = _q(logits, target, smoothing / V, 1 - smoothing + smoothing / V)
    return (q * (q.log() - logits.log_softmax(-1))).sum(-1).mean()


def ls_kl_div(logits, target, smoothing):
    V = logits.size(-1)
    q = _q(logits, target, smoothing / V, 1 - smoothing + smoothing / V)
    return F.kl_div(logits.log_softmax(-1), q, reduction="batchmean")


def ls_mean_over_entries(logits, target, smoothing):
    V = logits.size(-1)
    return -(_q(logits, target, smoothing / V, 1 - smoothing + smoothing / V) * logits.log_softmax(-1)).mean()


def ls_logits_not_log_p(logits, target, smoothing):
    V = logits.size(-1)
    return -(_q(logits, target, smoothing / V, 1 - smoothing + smoothing / V) * logits).sum(-1).mean()


@pytest.mark.parametrize(
    "fn",
    [ls_solution, ls_mixture, ls_loop, ls_one_hot_float64, ls_einsum_where, ls_pytorch, ls_shape_1],
    ids=["notebook", "mixture-formula", "loops", "one-hot-float64", "einsum-where", "F.cross_entropy", "shape-1"],
)
def test_label_smoothing_right_answers_pass(fn, capsys):
    judged(check_label_smoothing, fn, None, capsys)


@pytest.mark.parametrize(
    ("fn", "named"),
    [
        (ls_annotated, "Annotated Transformer's convention"),
        (ls_annotated_no_padding, "Annotated Transformer's convention"),
        (ls_v_minus_1, "smoothing / (V - 1) on each of the V - 1 other tokens"),
        (ls_true_one_minus_eps, "so that the smoothed target sums to 1"),
        (ls_skips_zero_as_padding, "as if 0 were padding"),
        (ls_hard_coded_eps, "the loss at smoothing=0.1 whatever smoothing is given"),
        (ls_hard_coded_v, "not with N = 4, V = 9, seed = 1"),
        (lambda logits, target, smoothing: F.cross_entropy(logits, target), "smoothing is ignored"),
        (ls_item, "cannot be trained through"),
        (ls_detach, "cannot be trained through"),
        (ls_no_grad, "cannot be trained through"),
        (ls_numpy_float, "cannot be trained through"),
        (ls_numpy_normaliser, "right values but not the right gradient with respect to logits"),
        (ls_smoothing_term_detached, "right values but not the right gradient with respect to logits"),
        (ls_in_place, "changed its input logits in place"),
        (ls_kl, "takes log(0)"),
        (ls_kl_div, "KL divergence"),
        (lambda *a: ls_solution(*a) * len(a[1]), "the sum over positions: take the mean"),
        (lambda *a: -ls_solution(*a), "the sign is flipped"),
        (ls_mean_over_entries, "the mean over all N x V entries"),
        (ls_logits_not_log_p, "the logits themselves are not log-probabilities"),
        (lambda *a: ls_solution(*a).to("meta"), "is on meta"),
        (
            lambda logits, target, smoothing: F.cross_entropy(
                logits, target, label_smoothing=smoothing, reduction="none"
            ),
            "one loss per position",
        ),
    ],
    ids=[
        "annotated-eps-over-V-2",
        "annotated-without-padding",
        "eps-over-V-1",
        "true-1-minus-eps",
        "skips-target-0",
        "hard-coded-eps",
        "hard-coded-V",
        "no-smoothing",
        "item",
        "detach",
        "no-grad",
        "numpy",
        "numpy-normaliser",
        "smoothing-term-detached",
        "in-place",
        "kl-nan",
        "kl-div",
        "sum",
        "sign",
        "mean-over-NV",
        "logits",
        "meta-device",
        "per-position",
    ],
)
def test_label_smoothing_wrong_answers_fail(fn, named, capsys):
    judged(check_label_smoothing, fn, named, capsys)


# --- 06: weight tying ---------------------------------------------------------------------------------------------


def tie_solution(model):  # the notebook's solution
    model.generator.weight = model.tgt_embed.weight  # one Parameter, (V, d_model), used twice


def tie_the_other_way(model):
    """The embedding takes the projection's Parameter: one Parameter all the same."""
    model.tgt_embed.weight = model.generator.weight


def tie_register_and_return(model):
    model.generator.register_parameter("weight", model.tgt_embed.weight)
    return model


def tie_new_linear_without_bias(model):
    """A new output projection, without its bias (not asked, but counted apart in the message)."""
    V, d_model = model.tgt_embed.weight.shape
    model.generator = torch.nn.Linear(d_model, V, bias=False)
    model.generator.weight = model.tgt_embed.weight


def tie_by_copy(model):
    with torch.no_grad():
        model.generator.weight.copy_(model.tgt_embed.weight)


def tie_new_parameter_same_storage(model):
    model.generator.weight = torch.nn.Parameter(model.tgt_embed.weight)


def tie_data(model):
    model.generator.weight.data = model.tgt_embed.weight.data


def tie_clone(model):
    model.generator.weight = torch.nn.Parameter(model.tgt_embed.weight.clone())


def tie_transposed(model):
    model.generator.weight = torch.nn.Parameter(model.tgt_embed.weight.t())


def tie_source(model):
    model.generator.weight = model.src_embed.weight


def tie_a_copy(model):
    import copy

    other = copy.deepcopy(model)
    other.generator.weight = other.tgt_embed.weight
    return other


def tie_and_freeze(model):
    model.generator.weight = model.tgt_embed.weight
    model.generator.weight.requires_grad_(False)


def tie_hard_coded(model):
    model.generator = torch.nn.Linear(16, 13)
    model.generator.weight = model.tgt_embed.weight


@pytest.mark.parametrize(
    "fn",
    [tie_solution, tie_the_other_way, tie_register_and_return, tie_new_linear_without_bias],
    ids=["notebook", "embedding-takes-projection", "register-returns-model", "new-linear-no-bias"],
)
def test_weight_tying_right_answers_pass(fn, capsys):
    judged(check_weight_tying, fn, None, capsys)


def test_weight_tying_message_arithmetic_is_true(capsys):
    """The success message's numbers add up: V x d_model for the shared matrix, plus what the answer removed or
    added besides."""

    def numbers(out):
        return [int(x.replace(",", "")) for x in re.findall(r"\d[\d,]*", out)]

    _, out = verdict(check_weight_tying, tie_solution, capsys)
    before, after, saved, matrix, V, d_model = numbers(out)
    assert before - after == saved == matrix == V * d_model == 13 * 16, out
    _, out = verdict(check_weight_tying, tie_new_linear_without_bias, capsys)
    assert "221 fewer: 208 = V x d_model = 13 x 16 for the shared matrix (counted once) and 13 for the output " in out

    def tie_and_add(model):
        model.generator.weight = model.tgt_embed.weight
        model.scale = torch.nn.Parameter(torch.ones(5))

    _, out = verdict(check_weight_tying, tie_and_add, capsys)
    before, after, saved, matrix, V, d_model, added = numbers(out.split(";")[0])
    assert before - after == saved == matrix - added == 208 - 5, out


@pytest.mark.parametrize(
    ("fn", "named"),
    [
        (tie_by_copy, "copied, not shared"),
        (tie_new_parameter_same_storage, "still two Parameters (nn.Parameter(...)"),
        (tie_data, "still two Parameters"),
        (tie_clone, "copied, not shared"),
        (tie_transposed, "transposed"),
        (tie_source, "SOURCE embedding"),
        (tie_a_copy, "returned another model"),
        (tie_and_freeze, "frozen"),
        (tie_hard_coded, "not with src_vocab = 7, V = 9, d_model = 8"),
        (lambda model: None, "not model.tgt_embed.weight"),
    ],
    ids=[
        "copy",
        "new-parameter",
        "data",
        "clone",
        "transposed",
        "source",
        "returns-copy",
        "frozen",
        "hard-coded",
        "nothing",
    ],
)
def test_weight_tying_wrong_answers_fail(fn, named, capsys):
    judged(check_weight_tying, fn, named, capsys)


# --- 06: sequence accuracy ----------------------------------------------------------------------------------------


def acc_solution(predictions, labels, pad_id):  # the notebook's solution
    fine = (predictions == labels) | (labels == pad_id)  # (B, T): right, or not a real label
    return fine.all(dim=1).float().mean().item()  # (B,) -> the fraction of rows right


def acc_loop(predictions, labels, pad_id):
    right = 0
    for p_row, y_row in zip(predictions.tolist(), labels.tolist(), strict=True):
        if all(p == y for p, y in zip(p_row, y_row, strict=True) if y != pad_id):
            right += 1
    return right / len(labels)


def acc_tensor_masked_fill(predictions, labels, pad_id):
    """A 0-d tensor; the padded predictions overwritten with the label's value (a new tensor)."""
    filled = predictions.masked_fill(labels == pad_id, pad_id)
    return (filled == labels).all(-1).double().mean()


def acc_wrong_any(predictions, labels, pad_id):
    wrong = (predictions != labels) & (labels != pad_id)
    return 1 - wrong.any(dim=1).sum() / labels.size(0)


def acc_numpy(predictions, labels, pad_id):
    p, y = predictions.numpy(), labels.numpy()
    return np.mean(np.all((p == y) | (y == pad_id), axis=1)).astype(np.float32)


def acc_in_place(predictions, labels, pad_id):
    predictions[labels == pad_id] = pad_id
    return (predictions == labels).all(1).float().mean().item()


@pytest.mark.parametrize(
    "fn",
    [acc_solution, acc_loop, acc_tensor_masked_fill, acc_wrong_any, acc_numpy],
    ids=["notebook", "loops", "tensor-masked-fill", "not-any-wrong", "numpy-float32"],
)
def test_sequence_accuracy_right_answers_pass(fn, capsys):
    judged(check_sequence_accuracy, fn, None, capsys)


@pytest.mark.parametrize(
    ("fn", "named"),
    [
        (lambda p, y, pad: acc_solution(p, y, 0), "not with batch = 1, pad_id = 3"),
        (lambda p, y, pad: ((p == y) | (y == pad)).all(1).sum().item() / 7, "not with batch = 1, pad_id = 3"),
        (lambda p, y, pad: (p == y).all(1).float().mean(), "the padded positions count: row 1"),
        (lambda p, y, pad: ((p == y) & (y != pad)).sum() / (y != pad).sum(), "token-level accuracy: a row"),
        (lambda p, y, pad: (p == y).float().mean(), "token-level accuracy, padding included"),
        (lambda p, y, pad: ((p == y) | (y == pad)).float().mean(), "every padded position counted as right"),
        (lambda p, y, pad: ((p == y) | (y == pad)).all(1).sum(), "number of rows right"),
        (lambda p, y, pad: ((p == y) | (p == pad)).all(1).float().mean(), "looked up in the predictions"),
        (lambda p, y, pad: ((p == y) | (y == pad)).any(1).float().mean(), "ANY of its positions"),
        (lambda p, y, pad: ((p == y) | (y == pad)).all(0).float().mean(), ".all(dim=0) runs down the batch"),
        (acc_in_place, "changed its input predictions in place"),
        (lambda p, y, pad: torch.tensor(acc_solution(p, y, pad), device="meta"), "is on meta"),
    ],
    ids=[
        "hard-coded-pad",
        "hard-coded-B",
        "padding-counts",
        "token-accuracy",
        "token-accuracy-with-pads",
        "token-accuracy-pads-right",
        "count-not-fraction",
        "pad-from-predictions",
        "any",
        "dim-0",
        "in-place",
        "meta-device",
    ],
)
def test_sequence_accuracy_wrong_answers_fail(fn, named, capsys):
    judged(check_sequence_accuracy, fn, named, capsys)


# --- 08: one step of beam search -----------------------------------------------------------------------------------


def beam_solution(scores, log_probs):  # the notebook's solution
    B, K = scores.shape
    V = log_probs.size(-1)
    candidates = (scores.reshape(B * K, 1) + log_probs).view(B, K * V)  # (B, K*V): every hypothesis x every token
    new_scores, index = candidates.topk(K, dim=-1)  # (B, K) each, best first
    parent = (torch.arange(B)[:, None] * K + index // V).view(-1)  # (B*K,): rows of log_probs
    return new_scores, parent, (index % V).view(-1)


def beam_3d_sort(scores, log_probs):
    """(B, K, V) with broadcasting, sort instead of topk, a list instead of a tuple, the device from the input."""
    B, K = scores.shape
    V = log_probs.shape[1]
    candidates = (scores[:, :, None] + log_probs.view(B, K, V)).flatten(1)
    ordered, index = candidates.sort(dim=1, descending=True)
    index = index[:, :K]
    parent = torch.arange(B, device=scores.device).repeat_interleave(K) * K + index.flatten() // V
    return [ordered[:, :K], parent, torch.remainder(index, V).flatten()]


def beam_probabilities_then_log(scores, log_probs):
    """Probabilities multiplied, then the log taken back: the same ranking and the same log-probabilities."""
    B, K = scores.shape
    V = log_probs.size(-1)
    probs = (scores.double().exp().reshape(B * K, 1) * log_probs.double().exp()).view(B, K * V)
    best, index = probs.topk(K, dim=1)
    return best.log().float(), (torch.arange(B)[:, None] * K + index // V).flatten(), (index % V).flatten()


def beam_python_heap(scores, log_probs):
    """Per sentence, heapq.nlargest over (score, hypothesis, token) triples."""
    B, K = scores.shape
    V = log_probs.size(-1)
    new_scores, parent, token = [], [], []
    for b in range(B):
        triples = [(float(scores[b, k] + log_probs[b * K + k, v]), k, v) for k in range(K) for v in range(V)]
        best = heapq.nlargest(K, triples, key=lambda t: t[0])
        new_scores.append(torch.stack([scores[b, k] + log_probs[b * K + k, v] for _, k, v in best]))
        parent += [b * K + k for _, k, _ in best]
        token += [v for _, _, v in best]
    return torch.stack(new_scores), torch.tensor(parent), torch.tensor(token)


def beam_step_with(mistake):
    def step(scores, log_probs):
        B, K = scores.shape
        V = log_probs.size(-1)
        if mistake == "multiplied-log-probs":
            candidates = scores.reshape(B * K, 1) * log_probs
        elif mistake == "probabilities":
            candidates = scores.exp().reshape(B * K, 1) * log_probs.exp()
        elif mistake == "token-alone":
            candidates = log_probs
        else:
            candidates = scores.reshape(B * K, 1) + log_probs
        if mistake == "per-hypothesis":
            new_scores, index = candidates.topk(K, dim=-1)
            return new_scores, index.flatten() // V, index.flatten() % V
        k = 4 if mistake == "hard-coded-K" else K
        new_scores, index = candidates.view(B, -1).topk(k, dim=-1)
        if mistake == "ascending":
            new_scores, index = new_scores.flip(-1), index.flip(-1)
        offset = 0 if mistake == "no-offset" else torch.arange(B)[:, None] * K
        parent, token = offset + index // V, index % V
        if mistake == "swapped":
            parent, token = offset + index % V, index // V
        if mistake == "flat-token":
            token = index
        if mistake == "meta":
            new_scores = new_scores.to("meta")
        if mistake == "in-place":
            scores += 0.5
        return new_scores, parent.view(-1), token.view(-1)

    return step


@pytest.mark.parametrize(
    "fn",
    [beam_solution, beam_3d_sort, beam_probabilities_then_log, beam_python_heap],
    ids=["notebook", "3d-sort-list", "probabilities-then-log", "python-heap"],
)
def test_beam_step_right_answers_pass(fn, capsys):
    judged(check_beam_step, fn, None, capsys)


@pytest.mark.parametrize(
    ("mistake", "named"),
    [
        ("multiplied-log-probs", "log-probabilities are multiplied"),
        ("probabilities", "new_scores are probabilities"),
        ("token-alone", "log-probability alone"),
        ("per-hypothesis", "the top K of each hypothesis's own row"),
        ("hard-coded-K", "not with B = 2, K = 3, V = 11, seed = 1"),
        ("ascending", "best first"),
        ("no-offset", "add b*K"),
        ("swapped", "swapped"),
        ("flat-token", "index % V"),
        ("meta", "new_scores is on meta"),
        ("in-place", "changed its input scores in place"),
    ],
)
def test_beam_step_wrong_answers_fail(mistake, named, capsys):
    judged(check_beam_step, beam_step_with(mistake), named, capsys)


# --- 08: byte-pair segmentation -------------------------------------------------------------------------------------


def bpe_solution(piece, merges):  # the notebook's solution
    rank = {pair: r for r, pair in enumerate(merges)}
    symbols = list(piece)
    while len(symbols) > 1:
        present = [pair for pair in itertools.pairwise(symbols) if pair in rank]
        if not present:
            break
        symbols = merge_pair(
            symbols, min(present, key=lambda pair: rank[pair])
        )  # every occurrence of the earliest merge
    return symbols


def bpe_replay(piece, merges):
    """Every merge in the order learned, each over the whole piece, with a loop of its own."""
    symbols = list(piece)
    for a, b in merges:
        i, out = 0, []
        while i < len(symbols):
            if i < len(symbols) - 1 and symbols[i] == a and symbols[i + 1] == b:
                out.append(a + b)
                i += 2
            else:
                out.append(symbols[i])
                i += 1
        symbols = out
    return symbols


def bpe_rank_first_occurrence_tuple(piece, merges):
    """By rank, merging one occurrence at a time (the next round finds the others), returning a tuple."""
    rank = {tuple(pair): r for r, pair in enumerate(merges)}
    symbols = list(piece)
    while True:
        found = [(rank[(x, y)], i) for i, (x, y) in enumerate(zip(symbols, symbols[1:])) if (x, y) in rank]  # noqa: RUF007
        if not found:
            return tuple(symbols)
        _, i = min(found)
        symbols[i : i + 2] = [symbols[i] + symbols[i + 1]]


def bpe_regex(piece, merges):
    """The space-joined string, each merge a regular expression that matches whole symbols only."""
    text = " ".join(piece)
    for a, b in merges:
        text = re.sub(rf"(?<!\S){re.escape(a)} {re.escape(b)}(?!\S)", a + b, text)
    return text.split(" ")


def bpe_latest_rank(piece, merges):
    rank = {pair: r for r, pair in enumerate(merges)}
    symbols = list(piece)
    while present := [p for p in itertools.pairwise(symbols) if p in rank]:
        symbols = merge_pair(symbols, max(present, key=rank.get))
    return symbols


def bpe_leftmost(piece, merges):
    known = set(merges)
    symbols = list(piece)
    while present := [p for p in itertools.pairwise(symbols) if p in known]:
        symbols = merge_pair(symbols, present[0])
    return symbols


def bpe_right_to_left(piece, merges):
    symbols = list(piece)[::-1]
    for a, b in merges:
        i, out = 0, []
        while i < len(symbols):
            if i < len(symbols) - 1 and symbols[i] == b and symbols[i + 1] == a:
                out.append(a + b)
                i += 2
            else:
                out.append(symbols[i])
                i += 1
        symbols = out
    return symbols[::-1]


def bpe_string_replace(piece, merges):
    text = " ".join(piece)
    for a, b in merges:
        text = text.replace(f"{a} {b}", a + b)
    return text.split(" ")


def bpe_pops_merges(piece, merges):
    symbols = list(piece)
    while merges:
        symbols = merge_pair(symbols, merges.pop(0))
    return symbols


def bpe_hard_coded(piece, merges):
    checker_merges = [
        ("a", "n"),
        ("b", "an"),
        ("an", "a"),
        ("▁", "b"),
        ("l", "a"),
        ("a", "a"),
        ("▁b", "an"),
        ("n", "a"),
    ]
    return bpe_replay(piece, checker_merges)


def bpe_one_merge(piece, merges):
    """Only the earliest merge present, once."""
    rank = {pair: r for r, pair in enumerate(merges)}
    symbols = list(piece)
    present = [p for p in itertools.pairwise(symbols) if p in rank]
    return merge_pair(symbols, min(present, key=rank.get)) if present else symbols


@pytest.mark.parametrize(
    "fn",
    [bpe_solution, bpe_replay, bpe_rank_first_occurrence_tuple, bpe_regex],
    ids=["notebook", "replay-own-loop", "rank-one-occurrence-tuple", "regex-whole-symbols"],
)
def test_bpe_segment_right_answers_pass(fn, capsys):
    judged(check_bpe_segment, fn, None, capsys)


@pytest.mark.parametrize(
    ("fn", "named"),
    [
        (bpe_latest_rank, "latest first"),
        (bpe_leftmost, "the leftmost pair that is a merge is merged first"),
        (bpe_right_to_left, "merged from the right"),
        (bpe_string_replace, "inside longer symbols"),
        (bpe_pops_merges, "changed its input merges in place"),
        (bpe_hard_coded, "not with merges = [('n', 'a')"),
        (bpe_one_merge, "only one merge is applied"),
        (lambda piece, merges: "".join(bpe_solution(piece, merges)), "list of strings"),
    ],
    ids=[
        "highest-rank",
        "leftmost-pair",
        "right-to-left",
        "string-replace",
        "mutates-merges",
        "hard-coded-merges",
        "one-merge-only",
        "a-string",
    ],
)
def test_bpe_segment_wrong_answers_fail(fn, named, capsys):
    judged(check_bpe_segment, fn, named, capsys)


# --- 08: BLEU's clipped n-gram matches ------------------------------------------------------------------------------


def ngram_solution(hypothesis, reference, n):  # the notebook's solution
    def ngrams(words):
        return Counter(tuple(words[i : i + n]) for i in range(len(words) - n + 1))

    return sum((ngrams(hypothesis) & ngrams(reference)).values()), max(len(hypothesis) - n + 1, 0)


def ngram_dicts(hypothesis, reference, n):
    """Plain dicts and min(), a list as the pair."""
    hyp, ref = defaultdict(int), defaultdict(int)
    for i in range(len(hypothesis) - n + 1):
        hyp[" ".join(hypothesis[i : i + n])] += 1
    for i in range(len(reference) - n + 1):
        ref[" ".join(reference[i : i + n])] += 1
    return [sum(min(c, ref[g]) for g, c in hyp.items()), sum(hyp.values())]


def ngram_zip_tensors(hypothesis, reference, n):
    """n-grams by zip, the counts as 0-d tensors."""
    hyp = Counter(zip(*(hypothesis[i:] for i in range(n))))
    ref = Counter(zip(*(reference[i:] for i in range(n))))
    matches = sum(min(count, ref[gram]) for gram, count in hyp.items())
    return torch.tensor(matches), torch.tensor(hyp.total())


def ngram_used_list(hypothesis, reference, n):
    """Clipping by crossing off: each reference n-gram can be used once."""
    left = [tuple(reference[i : i + n]) for i in range(len(reference) - n + 1)]
    grams = [tuple(hypothesis[i : i + n]) for i in range(len(hypothesis) - n + 1)]
    matches = 0
    for g in grams:
        if g in left:
            left.remove(g)
            matches += 1
    return matches, len(grams)


def ngram_with(mistake):
    def count(hypothesis, reference, n):
        m = 2 if mistake == "hard-coded-n" else n
        stop = 0 if mistake == "off-by-one" else 1

        def grams(words):
            return Counter(tuple(words[i : i + m]) for i in range(len(words) - m + stop))

        h, r = grams(hypothesis), grams(reference)
        matches = {
            "unclipped": sum(c for g, c in h.items() if g in r),
            "distinct": len(set(h) & set(r)),
            "reference-side": sum(c for g, c in r.items() if g in h),
        }.get(mistake, sum((h & r).values()))
        total = {"reference-total": max(len(reference) - n + 1, 0), "negative-total": len(hypothesis) - n + 1}.get(
            mistake, sum(h.values())
        )
        if mistake == "pops":
            hypothesis.pop()
        return matches, total

    return count


@pytest.mark.parametrize(
    "fn",
    [ngram_solution, ngram_dicts, ngram_zip_tensors, ngram_used_list, ngram_with(None)],
    ids=["notebook", "dicts-list", "zip-tensors", "cross-off", "counter-helper"],
)
def test_ngram_matches_right_answers_pass(fn, capsys):
    judged(check_ngram_matches, fn, None, capsys)


@pytest.mark.parametrize(
    ("mistake", "named"),
    [
        ("unclipped", "not clipped"),
        ("distinct", "Each distinct n-gram is counted once"),
        ("reference-side", "count the reference's occurrences"),
        ("reference-total", "total counts the reference's n-grams"),
        ("negative-total", "never below 0"),
        ("hard-coded-n", "These are the counts for n=2"),
        ("off-by-one", "The last n-gram is left out"),
        ("pops", "changed its input"),
    ],
)
def test_ngram_matches_wrong_answers_fail(mistake, named, capsys):
    judged(check_ngram_matches, ngram_with(mistake), named, capsys)


# --- 09: the causality probe's core step ------------------------------------------------------------------------------


def leak_solution(fn, tokens, j, new_id):  # the notebook's solution
    changed = tokens.clone()
    changed[:, j] = new_id
    with torch.no_grad():
        return float((fn(changed)[:, :j] - fn(tokens)[:, :j]).abs().max())


def leak_where_one_call(fn, tokens, j, new_id):
    """torch.where builds the changed batch; both batches go through the model in one call; a 0-d tensor back."""
    B, T = tokens.shape
    at_j = torch.arange(T, device=tokens.device) == j
    changed = torch.where(at_j, torch.full_like(tokens, new_id), tokens)
    with torch.inference_mode():
        out = fn(torch.cat([tokens, changed]))
    return (out[B:, :j] - out[:B, :j]).abs().amax()


def leak_loop(fn, tokens, j, new_id):
    """A loop over the earlier positions, max() of Python floats, index_fill for the copy."""
    changed = tokens.index_fill(1, torch.tensor([j]), new_id)
    before, after = fn(tokens).detach(), fn(changed).detach()
    return max(float((after[:, i] - before[:, i]).abs().max()) for i in range(j))


def leak_numpy(fn, tokens, j, new_id):
    changed = tokens.detach().clone()
    changed[:, j].fill_(new_id)
    with torch.no_grad():
        a, b = fn(tokens).numpy(), fn(changed).numpy()
    return np.abs(b[:, :j] - a[:, :j]).max()


def leak_with(mistake):
    def probe(fn, tokens, j, new_id):
        changed = tokens if mistake == "in-place" else tokens.clone()
        before = fn(tokens).detach()
        position = 0 if mistake == "token-0" else j
        if mistake == "first-sequence":
            changed[0, position] = new_id
        elif mistake == "row-j":
            changed[j] = new_id
        else:
            changed[:, position] = 0 if mistake == "hard-coded-new-id" else new_id
        with torch.no_grad():
            diff = fn(changed) - before
        part = {
            "position-0": diff[:, :1],
            "position-j-1": diff[:, j - 1 : j],
            "through-j": diff[:, : j + 1],
            "everywhere": diff,
            "after-j": diff[:, j + 1 :],
        }.get(mistake, diff[:, :j])
        if mistake == "mean":
            return part.abs().mean().item()
        if mistake == "no-abs":
            return part.max().item()
        if mistake == "meta":
            return part.abs().max().to("meta")
        return part.abs().max().item()

    return probe


@pytest.mark.parametrize(
    "fn",
    [leak_solution, leak_where_one_call, leak_loop, leak_numpy, leak_with(None)],
    ids=["notebook", "where-one-call-tensor", "loop-index-fill", "numpy", "detached-base"],
)
def test_future_leak_right_answers_pass(fn, capsys):
    judged(check_future_leak, fn, None, capsys)


@pytest.mark.parametrize(
    ("mistake", "named"),
    [
        ("position-0", "only position 0 is compared"),
        ("position-j-1", "only position j - 1 is compared"),
        ("through-j", "you include position j itself"),
        ("everywhere", "you compare every position"),
        ("after-j", "you compare the positions after j"),
        ("token-0", "token 0 is changed, not token j"),
        ("first-sequence", "only the first sequence's token j is changed"),
        ("row-j", "j indexes dimension 0, the batch"),
        ("hard-coded-new-id", "token j is set to 0, not to new_id"),
        ("mean", "that is the mean change"),
        ("no-abs", "without .abs()"),
        ("in-place", "changed its input tokens in place"),
        ("meta", "tensor on meta"),
    ],
)
def test_future_leak_wrong_answers_fail(mistake, named, capsys):
    judged(check_future_leak, leak_with(mistake), named, capsys)
