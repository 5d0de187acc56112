"""The checkers of ``course_utils.checks.layers``, layers (chapter 04), against students' answers: right answers
written in other styles pass, each classic mistake fails with a message that names it, and an unwritten stub is
reported as not attempted.
"""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers import rope_reference, todo, verdict, verdict_rows, verdict_table_test

from course_utils import padding_mask
from course_utils.checks import (
    check_alibi_bias,
    check_encoder_layer,
    check_layer_norm,
    check_pre_norm_layer,
    check_rms_norm,
    check_rotary_embedding,
    check_sinusoidal_encoding,
)
from course_utils.checks._core import MISTAKES
from course_utils.checks.predictions import QUESTIONS
from course_utils.model.positional import sinusoidal_encoding


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """The tensors here are tiny: one thread is fastest, and on a busy machine the thread pool's waiting made the
    file several times slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def case_ids(cases):
    """Readable ids: the answer's name, or for a lambda the mistake it makes."""
    return [fn.__name__ if fn.__name__ != "<lambda>" else named[:40] for fn, named in cases]


# --- LayerNorm ---------------------------------------------------------------------------------------------------


def solution_layer_norm(x, weight, bias, eps=1e-5):  # the notebook's solution, as written
    mean = x.mean(dim=-1, keepdim=True)  # (..., 1)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # (..., 1): biased, divides by d
    return (x - mean) / torch.sqrt(var + eps) * weight + bias  # (..., d)


def var_mean_rsqrt(x, weight, bias, eps):
    var, mean = torch.var_mean(x, dim=-1, correction=0, keepdim=True)
    return weight * (x - mean) * torch.rsqrt(var + eps) + bias


def sums_over_d(x, weight, bias, eps):
    d = x.shape[-1]
    mean = x.sum(-1, keepdim=True) / d
    var = torch.einsum("...i,...i->...", x - mean, x - mean)[..., None] / d
    return (x - mean) / (var + eps) ** 0.5 * weight + bias


def float64_inside(x, weight, bias, eps):
    x64 = x.double()
    mean = x64.mean(-1, keepdim=True)
    std = (x64.var(-1, unbiased=False, keepdim=True) + eps).sqrt()
    return ((x64 - mean) / std * weight.double() + bias.double()).to(x.dtype)


def token_by_token(x, weight, bias, eps):
    rows = x.reshape(-1, x.size(-1))
    out = []
    for row in rows:  # one token at a time
        centred = row - row.mean()
        out.append(centred / torch.sqrt((centred**2).mean() + eps) * weight + bias)
    return torch.stack(out).reshape(x.shape)


def functional_keywords(x, weight, bias, eps):
    return F.layer_norm(x, normalized_shape=[x.size(-1)], weight=weight, bias=bias, eps=eps)


def biased_std_squared(x, weight, bias, eps):
    std = x.std(-1, unbiased=False, keepdim=True)
    eps = torch.tensor(eps, device=x.device)  # a tensor where a number would do
    return (x - x.mean(-1, keepdim=True)) / torch.sqrt(std**2 + eps) * weight + bias


RIGHT_LAYER_NORMS = [
    solution_layer_norm,
    var_mean_rsqrt,
    sums_over_d,
    float64_inside,
    token_by_token,
    functional_keywords,
    biased_std_squared,
]


def unbiased_var(x, w, b, eps):
    return (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + eps) * w + b


def tutorial(x, w, b, eps):
    return w * (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + eps) + b


def eps_outside(x, w, b, eps):
    return (x - x.mean(-1, keepdim=True)) / (x.std(-1, unbiased=False, keepdim=True) + eps) * w + b


def over(dim):
    def norm(x, w, b, eps):
        mean, var = x.mean(dim, keepdim=True), x.var(dim, unbiased=False, keepdim=True)
        return (x - mean) / torch.sqrt(var + eps) * w + b

    norm.__name__ = f"over_dim_{dim}"
    return norm


def no_weight(x, w, b, eps):
    return F.layer_norm(x, x.shape[-1:], None, b, eps)


def no_bias(x, w, b, eps):
    return F.layer_norm(x, x.shape[-1:], w, None, eps)


def neither(x, w, b, eps):
    return F.layer_norm(x, x.shape[-1:], eps=eps)


def swapped(x, w, b, eps):
    return F.layer_norm(x, x.shape[-1:], eps=eps) * b + w


def shift_then_scale(x, w, b, eps):
    return (F.layer_norm(x, x.shape[-1:], eps=eps) + b) * w


def no_root(x, w, b, eps):
    return (x - x.mean(-1, keepdim=True)) / (x.var(-1, unbiased=False, keepdim=True) + eps) * w + b


def mean_kept(x, w, b, eps):
    return x / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + eps) * w + b


def eps_written_in(x, w, b, eps=1e-5):
    return solution_layer_norm(x, w, b, 1e-5)


def eps_of_the_test(x, w, b, eps):
    return solution_layer_norm(x, w, b, 0.5)


def d_written_in(x, w, b, eps):
    mean = x.sum(-1, keepdim=True) / 6
    var = ((x - mean) ** 2).sum(-1, keepdim=True) / 6
    return (x - mean) / torch.sqrt(var + eps) * w + b


def shape_written_in(x, w, b, eps):
    return F.layer_norm(x, (6,), w, b, eps)


def positive_axis(x, w, b, eps):
    mean, var = x.mean(2, keepdim=True), x.var(2, unbiased=False, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * w + b


def without_keepdim(x, w, b, eps):
    return (x - x.mean(-1)) / torch.sqrt(x.var(-1, unbiased=False) + eps) * w + b


def in_place(x, w, b, eps):
    x -= x.mean(-1, keepdim=True)
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w + b


def detached(x, w, b, eps):
    return solution_layer_norm(x, w, b, eps).detach()


def under_no_grad(x, w, b, eps):
    with torch.no_grad():
        return solution_layer_norm(x, w, b, eps)


def numpy_inside(x, w, b, eps):
    a = x.detach().numpy()
    normed = (a - a.mean(-1, keepdims=True)) / np.sqrt(a.var(-1, keepdims=True) + eps)
    return torch.from_numpy(normed) * w + b


def detached_statistics(x, w, b, eps):
    mean = x.mean(-1, keepdim=True).detach()
    var = x.var(-1, unbiased=False, keepdim=True).detach()
    return (x - mean) / torch.sqrt(var + eps) * w + b


def float64_returned(x, w, b, eps):
    return solution_layer_norm(x.double(), w.double(), b.double(), eps)


def on_meta(x, w, b, eps):
    return solution_layer_norm(x, w, b, eps).to("meta")


def bias_made_on_the_cpu(x, w, b, eps):  # right on the CPU; in Colab the zeros meet x on the GPU
    return solution_layer_norm(x, w, b, eps) + torch.zeros(x.size(-1))


WRONG_LAYER_NORMS = [
    (unbiased_var, "unbiased variance"),
    (tutorial, "unbiased std"),
    (eps_outside, "eps is outside the square root"),
    (over(0), "over dim=0, the batch axis"),
    (over(1), "over dim=1, the time axis"),
    (over(-2), "over dim=1, the time axis"),
    (over((-2, -1)), "the whole sequence of each example"),
    (over(None), "over the whole tensor"),
    (no_weight, "the scale is missing"),
    (no_bias, "the shift is missing"),
    (neither, "weight and bias are not applied"),
    (swapped, "weight and bias are swapped"),
    (shift_then_scale, "bias is added before the scale"),
    (no_root, "the square root is missing"),
    (mean_kept, "the mean is not subtracted"),
    (eps_written_in, "the eps argument is not used"),
    (eps_of_the_test, "right for the first test case but not with shape = (4, 5, 8), eps = 0.1"),
    (d_written_in, "right for the first test case but not with shape = (4, 5, 8)"),
    (shape_written_in, "right for the first test case but not with shape = (4, 5, 8)"),
    (positive_axis, "not with shape = (7, 4), eps = 0.2, seed = 2"),
    (without_keepdim, "needs keepdim=True"),
    (in_place, "changed its input x in place"),
    (detached, "cannot be trained through"),
    (under_no_grad, "cannot be trained through"),
    (numpy_inside, "no gradient reaches x"),
    (detached_statistics, "not the right gradient with respect to x"),
    (float64_returned, "has dtype torch.float64; x was torch.float32"),
    (on_meta, "is on meta"),
    (bias_made_on_the_cpu, "create new tensors on the inputs' device"),
]


# --- RMSNorm -----------------------------------------------------------------------------------------------------


def solution_rms_norm(x, weight, eps):  # the notebook's solution, as written
    mean_square = x.pow(2).mean(dim=-1, keepdim=True)  # (..., 1)
    return x / torch.sqrt(mean_square + eps) * weight  # (..., d)


def rsqrt(x, weight, eps):
    return weight * x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps)


def vector_norm(x, weight, eps):
    rms = torch.linalg.vector_norm(x, dim=-1, keepdim=True) / math.sqrt(x.shape[-1])
    return x / torch.sqrt(rms**2 + eps) * weight


def einsum_float64(x, weight, eps):
    x64 = x.double()
    mean_square = torch.einsum("...d,...d->...", x64, x64).unsqueeze(-1) / x.size(-1)
    return (x64 / (mean_square + eps).sqrt()).float() * weight


def functional_rms(x, weight, eps):
    return F.rms_norm(x, normalized_shape=list(x.shape[-1:]), weight=weight, eps=eps)


RIGHT_RMS_NORMS = [solution_rms_norm, rsqrt, vector_norm, einsum_float64, functional_rms]


def rms_centred(x, w, eps):
    x = x - x.mean(-1, keepdim=True)
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rms_eps_outside(x, w, eps):
    return x / (x.pow(2).mean(-1, keepdim=True).sqrt() + eps) * w


def rms_of_abs(x, w, eps):
    return x / torch.sqrt(x.abs().mean(-1, keepdim=True) + eps) * w


def mean_abs(x, w, eps):
    return x / (x.abs().mean(-1, keepdim=True) + eps) * w


def rms_with_norm(x, w, eps):
    return x / torch.sqrt(x.norm(dim=-1, keepdim=True) ** 2 + eps) * w


def rms_no_root(x, w, eps):
    return x / (x.pow(2).mean(-1, keepdim=True) + eps) * w


def rms_multiplied(x, w, eps):
    return x * torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rms_over_time(x, w, eps):
    return x / torch.sqrt(x.pow(2).mean(1, keepdim=True) + eps) * w


def rms_eps_written_in(x, w, eps=1e-6):
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w


def rms_d_written_in(x, w, eps):
    return x / torch.sqrt(x.pow(2).sum(-1, keepdim=True) / 6 + eps) * w


def rms_in_place(x, w, eps):
    return x.div_(torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)).mul(w)


def rms_item(x, w, eps):
    return torch.tensor(solution_rms_norm(x, w, eps).tolist())


def rms_no_grad(x, w, eps):
    with torch.no_grad():
        return solution_rms_norm(x, w, eps)


def rms_float64(x, w, eps):
    x = x.double()
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w.double()


def rms_on_meta(x, w, eps):
    return solution_rms_norm(x, w, eps).to("meta")


def rms_eps_as_a_tensor(x, w, eps):  # a 1-element CPU tensor (not a 0-d one) does not mix with a GPU tensor
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + torch.tensor([eps])) * w


WRONG_RMS_NORMS = [
    (rms_centred, "the mean is subtracted: that is LayerNorm"),
    (lambda x, w, eps: F.layer_norm(x, x.shape[-1:], w, None, eps), "the mean is subtracted"),
    (rms_eps_outside, "eps is outside the square root"),
    (rms_of_abs, "the mean of |x| is used"),
    (mean_abs, "the mean of |x| is used"),
    (rms_with_norm, "the sum of squares is used"),
    (rms_no_root, "the square root is missing"),
    (rms_multiplied, "x is multiplied by the root mean square"),
    (rms_over_time, "over dim=1, the time axis"),
    (lambda x, w, eps: solution_rms_norm(x, torch.ones_like(w), eps), "the scale is missing"),
    (rms_eps_written_in, "the eps argument is not used"),
    (rms_d_written_in, "right for the first test case but not with shape = (4, 5, 8)"),
    (rms_in_place, "changed its input x in place"),
    (rms_item, "cannot be trained through"),
    (rms_no_grad, "cannot be trained through"),
    (rms_float64, "cast back with .to(x.dtype)"),
    (rms_on_meta, "is on meta"),
    (rms_eps_as_a_tensor, "create new tensors on the inputs' device"),
]


# --- the post-norm encoder layer ---------------------------------------------------------------------------------


def solution_encoder_layer(layer, x, mask):  # the notebook's solution, as written
    attended, _ = layer.self_attn(x, x, x, mask)  # (B, T, d_model); the weights are not needed
    h = layer.norm1(x + layer.dropout1(attended))
    return layer.norm2(h + layer.dropout2(layer.feed_forward(h)))  # (B, T, d_model)


def keywords_and_blocks(layer, x, mask):
    h = layer.norm1(x + layer.self_attention_block(x, mask=mask))
    return layer.norm2(h + layer.feed_forward_block(h))


def from_the_parts(layer, x, mask):
    out = layer.self_attn(query=x, key=x, value=x, mask=mask)[0]
    n1, n2 = layer.norm1, layer.norm2
    h = F.layer_norm(x + out, [x.size(-1)], n1.weight, n1.bias, n1.eps)
    ffn = layer.feed_forward.w_2(torch.relu(layer.feed_forward.w_1(h)))
    return F.layer_norm(h + ffn, [x.size(-1)], n2.weight, n2.bias, n2.eps)


def example_by_example(layer, x, mask):
    device = next(layer.parameters()).device
    outputs = []
    for b in range(x.size(0)):
        xb, mb = x[b : b + 1], mask[b : b + 1].to(device)
        h = layer.norm1(xb + layer.self_attn(xb, xb, xb, mb)[0])
        outputs.append(layer.norm2(h + layer.feed_forward(h)))
    return torch.cat(outputs, dim=0)


RIGHT_ENCODER_LAYERS = [solution_encoder_layer, keywords_and_blocks, from_the_parts, example_by_example]


def post(layer, x, mask, *, m=..., n1=None, n2=None, ffn_reads=None, second=None):
    """The post-norm layer, with one of its parts changed."""
    m = mask if m is ... else m
    n1, n2 = n1 or layer.norm1, n2 or layer.norm2
    a = layer.self_attn(x, x, x, m)[0]
    h = n1(x + a)
    return n2(
        (h if second is None else second(x, a, h)) + layer.feed_forward(h if ffn_reads is None else ffn_reads(x, a, h))
    )


def calls_the_layer(layer, x, mask):
    return layer(x, mask)


def pre_norm_given(layer, x, mask):
    x = x + layer.self_attn(*(layer.norm1(x),) * 3, mask)[0]
    return x + layer.feed_forward(layer.norm2(x))


def no_residuals(layer, x, mask):
    h = layer.norm1(layer.self_attn(x, x, x, mask)[0])
    return layer.norm2(layer.feed_forward(h))


def first_residual_missing(layer, x, mask):
    h = layer.norm1(layer.self_attn(x, x, x, mask)[0])
    return layer.norm2(h + layer.feed_forward(h))


def norm1_not_kept(layer, x, mask):
    x = x + layer.self_attn(x, x, x, mask)[0]
    layer.norm1(x)  # the result is thrown away
    return layer.norm2(x + layer.feed_forward(x))


def no_norms(layer, x, mask):
    h = x + layer.self_attn(x, x, x, mask)[0]
    return h + layer.feed_forward(h)


def attention_only(layer, x, mask):
    return layer.norm1(x + layer.self_attn(x, x, x, mask)[0])


def mask_written_in(layer, x, mask):
    mask = padding_mask(torch.tensor([[1, 2, 3, 0, 0], [1, 2, 3, 4, 5]]), 0)
    return solution_encoder_layer(layer, x, mask)


def shape_written_in_layer(layer, x, mask):
    out = solution_encoder_layer(layer, x, mask)
    return out.reshape(2, 5, 16)


def tuple_added(layer, x, mask):
    return layer.norm1(x + layer.self_attn(x, x, x, mask))


def adds_in_place(layer, x, mask):
    x += layer.self_attn(x, x, x, mask)[0]
    h = layer.norm1(x)
    return layer.norm2(h + layer.feed_forward(h))


def encoder_detached(layer, x, mask):
    return solution_encoder_layer(layer, x, mask).detach()


def encoder_no_grad(layer, x, mask):
    with torch.no_grad():
        return solution_encoder_layer(layer, x, mask)


def attention_detached(layer, x, mask):
    attended = layer.self_attn(x, x, x, mask)[0].detach()
    h = layer.norm1(x + attended)
    return layer.norm2(h + layer.feed_forward(h))


def encoder_on_meta(layer, x, mask):
    return solution_encoder_layer(layer, x, mask).to("meta")


def causal_encoder(layer, x, mask):
    T = x.size(1)
    return post(layer, x, mask, m=mask & torch.ones(T, T, dtype=torch.bool).tril())


def post_right_with_dropout(layer, x, mask):  # right, dropouts where the layer has them
    h = layer.norm1(x + layer.dropout1(layer.self_attn(x, x, x, mask)[0]))
    return layer.norm2(h + layer.dropout2(layer.feed_forward(h)))


def post_dropout_on_the_sum(layer, x, mask):
    h = layer.norm1(layer.dropout1(x + layer.self_attn(x, x, x, mask)[0]))
    return layer.norm2(h + layer.feed_forward(h))


def post_dropout_after_the_norm(layer, x, mask):
    h = layer.dropout1(layer.norm1(x + layer.self_attn(x, x, x, mask)[0]))
    return layer.dropout2(layer.norm2(h + layer.feed_forward(h)))


def post_norm_inside_the_residual(layer, x, mask):
    h = x + layer.norm1(layer.self_attn(x, x, x, mask)[0])
    return h + layer.norm2(layer.feed_forward(h))


def post_no_norm2(layer, x, mask):
    h = layer.norm1(x + layer.self_attn(x, x, x, mask)[0])
    return h + layer.feed_forward(h)


def post_weights_taken(layer, x, mask):
    _, a = layer.self_attn(x, x, x, mask)
    h = layer.norm1(x + a)
    return layer.norm2(h + layer.feed_forward(h))


def pre_right_with_dropout(layer, x, mask):
    h = layer.norm1(x)
    x = x + layer.dropout1(layer.self_attn(h, h, h, mask)[0])
    return x + layer.dropout2(layer.feed_forward(layer.norm2(x)))


def pre_dropout_on_the_stream(layer, x, mask):
    h = layer.norm1(x)
    x = layer.dropout1(x + layer.self_attn(h, h, h, mask)[0])
    return x + layer.feed_forward(layer.norm2(x))


def pre_no_second_residual(layer, x, mask):
    h = layer.norm1(x)
    x = x + layer.self_attn(h, h, h, mask)[0]
    return layer.feed_forward(layer.norm2(x))


WRONG_ENCODER_LAYERS = [
    (calls_the_layer, MISTAKES["called the layer"]),
    (pre_norm_given, "this is pre-norm"),
    (no_residuals, "the residual connections are missing"),
    (first_residual_missing, "the first residual connection is missing"),
    (lambda layer, x, mask: post(layer, x, mask, second=lambda x, a, h: 0), "second residual connection is missing"),
    (lambda layer, x, mask: post(layer, x, mask, second=lambda x, a, h: x), "the second residual adds x"),
    (lambda layer, x, mask: post(layer, x, mask, m=None), MISTAKES["mask ignored"]),
    (post_dropout_on_the_sum, "dropout1 is applied in another place"),
    (post_dropout_after_the_norm, "dropout1 and dropout2 are applied in another place"),
    (post_norm_inside_the_residual, "the norm is inside the residual"),
    (post_no_norm2, "norm2 is missing at the output"),
    (post_weights_taken, "the weights are None unless asked"),
    (lambda layer, x, mask: post(layer, x, mask, m=~mask), "the mask is flipped (~mask)"),
    (lambda layer, x, mask: post(layer, x, mask, m=mask & mask.transpose(-1, -2)), MISTAKES["padded query"]),
    (causal_encoder, "a causal mask is added"),
    (lambda layer, x, mask: post(layer, x, mask, n1=layer.norm2, n2=layer.norm1), "norm1 and norm2 are swapped"),
    (lambda layer, x, mask: post(layer, x, mask, n2=layer.norm1), "norm1 is used twice"),
    (lambda layer, x, mask: post(layer, x, mask, ffn_reads=lambda x, a, h: x), "the feed-forward network reads x:"),
    (lambda layer, x, mask: post(layer, x, mask, ffn_reads=lambda x, a, h: x + a), "before norm1"),
    (norm1_not_kept, "norm1's output is not used"),
    (no_norms, "the norms are missing"),
    (attention_only, "the feed-forward sublayer is missing"),
    (mask_written_in, "right for the first test case but not with lengths = (6, 2, 7), T = 7"),
    (shape_written_in_layer, "right for the first test case but not with lengths = (6, 2, 7), T = 7"),
    (tuple_added, "take its [0]"),
    (adds_in_place, "changed its input x in place"),
    (encoder_detached, "cannot be trained through"),
    (encoder_no_grad, "cannot be trained through"),
    (attention_detached, "not the right gradient with respect to x"),
    (encoder_on_meta, "is on meta"),
]


# --- the pre-norm encoder layer ----------------------------------------------------------------------------------


def solution_pre_norm(layer, x, mask):  # the notebook's solution, as written
    h = layer.norm1(x)
    x = x + layer.self_attn(h, h, h, mask)[0]  # the output; the weights are not needed
    return x + layer.feed_forward(layer.norm2(x))


def pre_norm_blocks(layer, x, mask):
    y = x + layer.self_attention_block(layer.norm1(x), mask)
    return y + layer.feed_forward_block(layer.norm2(y))


def pre_norm_keywords(layer, x, mask):
    h = layer.norm1(x)
    attended, _weights = layer.self_attn(query=h, key=h, value=h, mask=mask)
    stream = x + attended
    n2 = layer.norm2
    return stream + layer.feed_forward(F.layer_norm(stream, (stream.size(-1),), n2.weight, n2.bias, n2.eps))


def pre_norm_by_example(layer, x, mask):
    out = torch.empty_like(x)
    for b in range(len(x)):
        xb = x[b][None]
        h = layer.norm1(xb)
        xb = xb + layer.self_attn(h, h, h, mask[b][None])[0]
        out = torch.cat([out[:b], xb + layer.feed_forward(layer.norm2(xb)), out[b + 1 :]])
    return out


RIGHT_PRE_NORM_LAYERS = [solution_pre_norm, pre_norm_blocks, pre_norm_keywords, pre_norm_by_example]


def pre(layer, x, mask, *, m=..., n1=None, n2=None, kv=False, ffn_reads=None, second=None):
    """The pre-norm layer, with one of its parts changed."""
    m = mask if m is ... else m
    n1, n2 = n1 or layer.norm1, n2 or layer.norm2
    h = n1(x)
    y = x + layer.self_attn(h, x if kv else h, x if kv else h, m)[0]
    return (y if second is None else second(x, y)) + layer.feed_forward(n2(y) if ffn_reads is None else ffn_reads(x, y))


def post_norm_given(layer, x, mask):
    x = layer.norm1(x + layer.self_attn(x, x, x, mask)[0])
    return layer.norm2(x + layer.feed_forward(x))


def pre_no_residuals(layer, x, mask):
    h = layer.self_attn(*(layer.norm1(x),) * 3, mask)[0]
    return layer.feed_forward(layer.norm2(h))


def stream_normalised(layer, x, mask):
    x = layer.norm1(x)
    x = x + layer.self_attn(x, x, x, mask)[0]
    return x + layer.feed_forward(layer.norm2(x))


def both_streams_normalised(layer, x, mask):
    x = layer.norm1(x)
    x = x + layer.self_attn(x, x, x, mask)[0]
    x = layer.norm2(x)
    return x + layer.feed_forward(x)


def output_normalised(layer, x, mask):
    return layer.norm2(solution_pre_norm(layer, x, mask))


def attention_unnormalised(layer, x, mask):
    x = x + layer.self_attn(x, x, x, mask)[0]
    return x + layer.feed_forward(layer.norm2(x))


def pre_calls_the_layer(layer, x, mask):
    return layer(x, mask=mask)


def pre_in_place(layer, x, mask):
    h = layer.norm1(x)
    x += layer.self_attn(h, h, h, mask)[0]
    return x + layer.feed_forward(layer.norm2(x))


def pre_detached(layer, x, mask):
    return solution_pre_norm(layer, x, mask).detach()


def pre_numpy(layer, x, mask):
    return torch.from_numpy(solution_pre_norm(layer, x, mask).detach().numpy())


def pre_on_meta(layer, x, mask):
    return solution_pre_norm(layer, x, mask).to("meta")


def pre_batch_written_in(layer, x, mask):
    return solution_pre_norm(layer, x, mask.reshape(2, 1, 1, -1))


WRONG_PRE_NORM_LAYERS = [
    (pre_calls_the_layer, MISTAKES["called the layer"]),
    (post_norm_given, "this is post-norm"),
    (pre_no_residuals, "the residual connections are missing"),
    (stream_normalised, MISTAKES["normalised stream"]),
    (both_streams_normalised, MISTAKES["normalised stream"]),
    (output_normalised, "a norm is applied to the layer's output"),
    (lambda layer, x, mask: pre(layer, x, mask, m=None), MISTAKES["mask ignored"]),
    (pre_dropout_on_the_stream, "is applied in another place"),
    (pre_no_second_residual, "the second residual connection is missing"),
    (lambda layer, x, mask: pre(layer, x, mask, m=~mask), "the mask is flipped (~mask)"),
    (lambda layer, x, mask: pre(layer, x, mask, m=mask & mask.transpose(-1, -2)), MISTAKES["padded query"]),
    (lambda layer, x, mask: pre(layer, x, mask, n1=layer.norm2, n2=layer.norm1), "norm1 and norm2 are swapped"),
    (lambda layer, x, mask: pre(layer, x, mask, n2=layer.norm1), "norm1 is used twice"),
    (lambda layer, x, mask: pre(layer, x, mask, ffn_reads=lambda x, y: layer.norm2(x)), "reads the layer's input x"),
    (lambda layer, x, mask: pre(layer, x, mask, second=lambda x, y: x), "the second residual adds the layer's input"),
    (lambda layer, x, mask: pre(layer, x, mask, ffn_reads=lambda x, y: y), "feed-forward network reads the stream"),
    (attention_unnormalised, "self-attention reads the stream unnormalised"),
    (lambda layer, x, mask: pre(layer, x, mask, kv=True), "keys and values read x unnormalised"),
    (pre_in_place, "changed its input x in place"),
    (pre_detached, "cannot be trained through"),
    (pre_numpy, "cannot be trained through"),
    (pre_on_meta, "is on meta"),
    (pre_batch_written_in, "right for the first test case but not with lengths = (6, 2, 7)"),
]


@pytest.mark.parametrize("check", [check_layer_norm, check_rms_norm, check_encoder_layer, check_pre_norm_layer])
def test_an_unwritten_stub_is_not_attempted(check, capsys):
    ok, out = verdict(check, todo, capsys)
    assert not ok and "not written yet" in out


def alibi_reference(T, slope, sign=-1.0, absolute=True):
    distance = torch.arange(T)[:, None] - torch.arange(T)[None, :]  # (T, T): i - j
    return sign * slope * (distance.abs() if absolute else distance).float()


def post_norm(layer, x, mask, *, pre=False, residual=True, use_mask=True, swap=False):
    n1, n2 = (layer.norm2, layer.norm1) if swap else (layer.norm1, layer.norm2)
    attend = lambda h: layer.self_attn(h, h, h, mask if use_mask else None)[0]  # noqa: E731
    if pre:
        x = x + attend(n1(x))
        return x + layer.feed_forward(n2(x))
    h = n1((x if residual else 0) + attend(x))
    return n2((h if residual else 0) + layer.feed_forward(h))


def rms_norm(x, weight, eps):
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


# --- every checker: the reference passes, a stub is not attempted ----------------------------------------------

REFERENCES = [
    (check_sinusoidal_encoding, sinusoidal_encoding),
    (check_rotary_embedding, rope_reference),
    (check_alibi_bias, alibi_reference),
    (check_encoder_layer, post_norm),
    (check_pre_norm_layer, lambda layer, x, mask: post_norm(layer, x, mask, pre=True)),
    (check_rms_norm, rms_norm),
]


@pytest.mark.parametrize("check, reference", REFERENCES, ids=lambda v: getattr(v, "__name__", ""))
def test_the_reference_passes(check, reference, capsys):
    ok, out = verdict(check, reference, capsys)
    assert ok and out.startswith("✅"), out


@pytest.mark.parametrize("check", [check for check, _ in REFERENCES], ids=lambda c: c.__name__)
def test_an_unwritten_stub_of_a_transfer_exercise_is_not_attempted(check, capsys):
    ok, out = verdict(check, todo, capsys)
    assert not ok and "not written yet" in out


def test_the_encoder_layer_checker_compares_with_torch(capsys):
    ok, out = verdict(check_encoder_layer, post_norm, capsys)
    assert ok and "nn.TransformerEncoderLayer" in out


# --- 04: the encoder layer ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "variant, named",
    [
        (dict(pre=True), "this is pre-norm"),
        (dict(residual=False), "residual connections are missing"),
        (dict(use_mask=False), "mask is ignored"),
        (dict(swap=True), "norm1 and norm2 are swapped"),
    ],
)
def test_encoder_layer_mistakes_are_named(variant, named, capsys):
    ok, out = verdict(check_encoder_layer, lambda layer, x, mask: post_norm(layer, x, mask, **variant), capsys)
    assert not ok and named in out, out


def test_encoder_layer_with_one_residual_missing_is_named(capsys):
    def second_missing(layer, x, mask):
        h = layer.norm1(x + layer.self_attn(x, x, x, mask)[0])
        return layer.norm2(layer.feed_forward(h))

    ok, out = verdict(check_encoder_layer, second_missing, capsys)
    assert not ok and "second residual connection is missing" in out


def test_encoder_layer_whose_ffn_reads_x_is_named(capsys):
    def reads_x(layer, x, mask):
        h = layer.norm1(x + layer.self_attn(x, x, x, mask)[0])
        return layer.norm2(h + layer.feed_forward(x))

    ok, out = verdict(check_encoder_layer, reads_x, capsys)
    assert not ok and "feed-forward network reads x" in out


def test_encoder_layer_adding_the_attention_tuple_gets_a_hint(capsys):
    def tuple_added(layer, x, mask):
        return layer.norm1(x + layer.self_attn(x, x, x, mask))

    ok, out = verdict(check_encoder_layer, tuple_added, capsys)
    assert not ok and "take its [0]" in out


def test_pre_norm_layer_ignoring_the_mask_is_named(capsys):
    ok, out = verdict(
        check_pre_norm_layer, lambda layer, x, mask: post_norm(layer, x, mask, pre=True, use_mask=False), capsys
    )
    assert not ok and "mask is ignored" in out


# --- 04: RMSNorm -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fn, named",
    [
        (lambda x, w, eps: F.layer_norm(x, x.shape[-1:], w, None, eps), "mean is subtracted"),
        (lambda x, w, eps: x / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + eps) * w, "variance is used"),
        (lambda x, w, eps: x / (x.pow(2).mean(-1, keepdim=True).sqrt() + eps) * w, "eps is outside"),
        (lambda x, w, eps: x / torch.sqrt(x.pow(2).sum(-1, keepdim=True) / (x.size(-1) - 1) + eps) * w, "d - 1"),
        (lambda x, w, eps: rms_norm(x, torch.ones_like(w), eps), "scale is missing"),
    ],
)
def test_rms_norm_mistakes_are_named(fn, named, capsys):
    ok, out = verdict(check_rms_norm, fn, capsys)
    assert not ok and named in out, out


# --- predictions -------------------------------------------------------------------------------------------------

OURS = ["shuffled-tokens", "post-norm-warmup"]


def test_our_questions_belong_to_our_chapters():
    assert QUESTIONS["shuffled-tokens"].chapter == "03" and QUESTIONS["post-norm-warmup"].chapter == "04"


# --- the verdict table: every answer above, the verdict it must get and the words its message must hold ---------

VERDICTS = [
    *verdict_rows(check_layer_norm, RIGHT_LAYER_NORMS, WRONG_LAYER_NORMS),
    *verdict_rows(check_rms_norm, RIGHT_RMS_NORMS, WRONG_RMS_NORMS),
    *verdict_rows(check_encoder_layer, [*RIGHT_ENCODER_LAYERS, post_right_with_dropout], WRONG_ENCODER_LAYERS),
    *verdict_rows(check_pre_norm_layer, [*RIGHT_PRE_NORM_LAYERS, pre_right_with_dropout], WRONG_PRE_NORM_LAYERS),
]


test_each_answer_gets_its_verdict = verdict_table_test(VERDICTS)
