"""The checkers of ``course_utils.checks.training``, training (chapter 06, and the probes of chapter 09), against
students' answers: right answers written in other styles pass, each classic mistake fails with a message that names
it, and an unwritten stub is reported as not attempted.
"""

import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers import judged, todo, verdict

from course_utils.checks import check_label_smoothing, check_sequence_accuracy, check_weight_tying

# --- 06: label smoothing ------------------------------------------------------------------------------------------


def ls_solution(logits, target, smoothing):  # the notebook's solution
    log_p = logits.log_softmax(dim=-1)  # (N, V)
    V = logits.size(-1)
    q = torch.full_like(log_p, smoothing / V)  # (N, V): the smoothed target distribution
    q.scatter_(1, target[:, None], 1 - smoothing + smoothing / V)
    return -(q * log_p).sum(dim=-1).mean()  # (N,) -> ()


def ls_target_made_on_the_cpu(logits, target, smoothing):  # right on the CPU; torch.full makes q there in Colab too
    N, V = logits.shape
    q = torch.full((N, V), smoothing / V)
    q[torch.arange(N), target] += 1 - smoothing
    return -(q * logits.log_softmax(dim=-1)).sum(dim=-1).mean()


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


def ls_log_of_softmax(logits, target, smoothing):  # right until p underflows: -inf where log_softmax stays finite
    V = logits.size(-1)
    q = _q(logits, target, smoothing / V, 1 - smoothing + smoothing / V)
    return -(q * torch.log(torch.softmax(logits, dim=-1))).sum(-1).mean()


def ls_softmax_down_the_batch(logits, target, smoothing):
    V = logits.size(-1)
    return -(_q(logits, target, smoothing / V, 1 - smoothing + smoothing / V) * logits.log_softmax(0)).sum(-1).mean()


def ls_scatter_not_in_place(logits, target, smoothing):
    V = logits.size(-1)
    q = torch.full_like(logits, smoothing / V)
    q.scatter(1, target[:, None], 1 - smoothing + smoothing / V)  # a new tensor, thrown away
    return -(q * logits.log_softmax(-1)).sum(-1).mean()


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
        (ls_log_of_softmax, "log(softmax(...)) is -inf where p underflows"),
        (ls_softmax_down_the_batch, "runs over dim=0, down the batch"),
        (ls_scatter_not_in_place, "q.scatter(...) returns a new tensor"),
        (lambda *a: ls_solution(*a).to("meta"), "is on meta"),
        (ls_target_made_on_the_cpu, "create new tensors on the inputs' device"),
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
        "log-of-softmax",
        "softmax-dim-0",
        "scatter-not-in-place",
        "meta-device",
        "target-made-on-the-cpu",
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
        (lambda p, y, pad: ((p == y) & (y != pad)).all(1).float().mean(), "right OR padded (|)"),
        (lambda p, y, pad: (((p == y) & (y != pad)).sum(1) / (y != pad).sum(1)).mean(), "mean of each row's token"),
        (lambda p, y, pad: ((p == y) | (y == pad))[:, 1:].all(1).float().mean(), "column 0 is skipped"),
        (lambda p, y, pad: ((p == y) | (y == pad))[:, :-1].all(1).float().mean(), "the last column is left out"),
        (lambda p, y, pad: ((p == y) | (y == pad) | (y == 2)).all(1).float().mean(), "<eos> is left out"),
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
        "and-not-or",
        "mean-of-row-accuracy",
        "skips-column-0",
        "drops-last-column",
        "ignores-eos",
        "in-place",
        "meta-device",
    ],
)
def test_sequence_accuracy_wrong_answers_fail(fn, named, capsys):
    judged(check_sequence_accuracy, fn, named, capsys)


def test_each_sequence_accuracy_mistake_gives_its_own_values_on_the_test_batches():
    """A mistake is named by the values it gives on the checker's two batches: no two mistakes, and no mistake and
    the right answer, may give the same pair, or one mistake would be named for another."""
    from course_utils.checks.training import _ACCURACY_BATCHES, _accuracy_mistakes

    pairs = []
    for batch, pad_id in ((0, 0), (1, 3)):
        y, p = (torch.tensor(rows) for rows in _ACCURACY_BATCHES[batch])
        right = ((p == y) | (y == pad_id)).all(1).float().mean().item()
        pairs.append([right] + [value for value, _ in _accuracy_mistakes(y, p, pad_id)])
    values = [tuple(round(v, 6) for v in column) for column in zip(*pairs, strict=True)]
    assert len(set(values)) == len(values), values


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


def three_ways(model):  # the paper's three-way tie, on two vocabularies
    model.src_embed.weight = model.tgt_embed.weight
    model.generator.weight = model.tgt_embed.weight


@pytest.mark.parametrize(
    ("fn", "named"),
    [
        (copy_values, "copied, not shared"),
        (share_data, "still two Parameters"),
        (transpose, "transposed"),
        (source, "SOURCE embedding"),
        (three_ways, "all three are one matrix"),
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
