"""Checkers for the encoder's building blocks (chapter 04).

Shape letters: B batch, T sequence length, d features. Masks are bool, True = may attend.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..model.masks import causal_mask, padding_mask
from ._core import (
    MISTAKES,
    NotWritten,
    NotYet,
    Verdict,
    backpropagates,
    call,
    call_layer,
    each_case,
    name_mistake,
    not_called,
    off_the_cpu,
    on_meta,
    same,
    same_gradients,
    verdict,
)

__all__ = [
    "check_encoder_layer",
    "check_layer_norm",
    "check_pre_norm_layer",
    "check_rms_norm",
]

# --- shared by the checkers --------------------------------------------------------------------------------------


def _norm_call(fn: Callable[..., Any], *args: Any) -> Any:
    """``call``, with a hint when a statistic reduced without ``keepdim=True`` does not broadcast against x."""
    try:
        return call(fn, *args)
    except NotWritten:
        raise
    except NotYet as e:
        if "must match the size of tensor" in str(e):
            raise NotYet(
                f"{e}. A statistic over the last axis needs keepdim=True: x.mean(dim=-1, keepdim=True) has shape "
                "(..., 1), which broadcasts against x (..., d); x.mean(dim=-1) has shape (...), which does not"
            ) from None
        raise


def _same_normalised(got: object, expected: Tensor) -> None:
    """``same``, and the dtype of x kept: a norm computed in float64 and returned so would break the next layer."""
    same(got, expected, "the normalised output")
    if isinstance(got, Tensor) and got.dtype != expected.dtype:
        raise NotYet(
            f"the normalised output has dtype {got.dtype}; x was {expected.dtype}: return the dtype of x (cast "
            "back with .to(x.dtype)), or the next layer's weights will not multiply it"
        )


def _test_input(shape: tuple[int, ...], seed: int, n_params: int, scale: float) -> tuple[Tensor, list[Tensor]]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g) * scale + 1  # a mean far from 0, so that subtracting it shows
    return x, [torch.randn(shape[-1], generator=g) for _ in range(n_params)]


def _axis_name(dim: int | tuple[int, ...], ndim: int) -> str:
    """How a student would call the axes ``dim`` of a tensor of ``ndim`` dimensions (B, T, d when 3)."""
    if isinstance(dim, tuple):
        return "the whole tensor" if len(dim) == ndim else f"dims {dim}, the whole sequence of each example"
    return {0: "dim=0, the batch axis", 1: "dim=1, the time axis"}.get(dim, f"dim={dim}") if ndim == 3 else f"dim={dim}"


def _wrong_axes(ndim: int) -> list[int | tuple[int, ...]]:
    """The axes a statistic is wrongly taken over: each axis but the last, the last two together, all of them."""
    axes: list[int | tuple[int, ...]] = list(range(ndim - 1))
    if ndim >= 3:
        axes.append((ndim - 2, ndim - 1))
    return [*axes, tuple(range(ndim))]


# --- LayerNorm and RMSNorm ---------------------------------------------------------------------------------------

_NORM_CASES: list[dict[str, Any]] = [  # eps large, so that where it goes shows; shapes and eps change, d included
    dict(shape=(2, 3, 6), eps=0.5, seed=0),
    dict(shape=(4, 5, 8), eps=0.1, seed=1),
    dict(shape=(7, 4), eps=0.2, seed=2),
]


def check_layer_norm(fn: Callable[..., Any]) -> Verdict:
    """``fn(x, weight, bias, eps)`` normalises over the last dimension, as ``F.layer_norm``."""

    def one(shape: tuple[int, ...], eps: float, seed: int) -> str:
        x, (weight, bias) = _test_input(shape, seed, 2, scale=3.0)
        d = shape[-1]
        got = _norm_call(fn, x, weight, bias, eps)
        expected = F.layer_norm(x, (d,), weight, bias, eps)

        def over(dim: int | tuple[int, ...], unbiased: bool = False, root: bool = True, eps_in: bool = True) -> Tensor:
            """(x - mean) / sqrt(var + eps) over ``dim``, without the scale and shift; the variants of its slips."""
            var = x.var(dim, unbiased=unbiased, keepdim=True)
            centred = x - x.mean(dim, keepdim=True)
            if not root:
                return centred / (var + eps)
            return centred / torch.sqrt(var + eps) if eps_in else centred / (var.sqrt() + eps)

        x_hat = over(-1)
        mistakes = [
            (
                over(-1, unbiased=True) * weight + bias,
                "unbiased variance (divides by d - 1); layer norm divides by d: var(unbiased=False)",
            ),
            (
                over(-1, unbiased=True, eps_in=False) * weight + bias,
                "this is (x - mean) / (std + eps) with unbiased std: use sqrt(biased var + eps)",
            ),
            (over(-1, eps_in=False) * weight + bias, "eps is outside the square root: use sqrt(var + eps)"),
            (
                F.layer_norm(x, (d,), weight, bias, 1e-5),
                f"the eps argument is not used: the output is what a tiny eps (1e-5, say) gives, not eps = {eps} "
                "as passed; use the argument, sqrt(var + eps)",
            ),
            (
                over(-1, root=False) * weight + bias,
                "the square root is missing: divide by sqrt(var + eps), the standard deviation, not by the variance",
            ),
            (
                x / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + eps) * weight + bias,
                "the mean is not subtracted: (x - mean) / sqrt(var + eps)",
            ),
            (x_hat, "weight and bias are not applied: weight * (x - mean) / sqrt(var + eps) + bias"),
            (x_hat + bias, "the scale is missing: multiply by weight (gamma) before adding bias"),
            (x_hat * weight, "the shift is missing: add bias (beta) after the scale"),
            (x_hat * bias + weight, "weight and bias are swapped: weight (gamma) scales, bias (beta) shifts"),
            (
                (x_hat + bias) * weight,
                "bias is added before the scale: scale first, then shift, weight * (x - mean) / sqrt(var + eps) + bias",
            ),
        ]
        mistakes += [
            (
                over(dim) * weight + bias,
                f"the mean and variance are taken over {_axis_name(dim, x.dim())}: LayerNorm normalises each token "
                "over its own features, the last axis (dim=-1, keepdim=True)",
            )
            for dim in _wrong_axes(x.dim())
        ]
        name_mistake(got, expected, mistakes)
        _same_normalised(got, expected)
        backpropagates(fn, x, weight, bias, eps, what="the normalised output")
        reference = lambda x, w, b, eps: F.layer_norm(x, (d,), w, b, eps)  # noqa: E731
        same_gradients(fn, (x, weight, bias, eps), reference, ("x", "weight", "bias", ""), "the normalised output")
        return "layer_norm matches F.layer_norm (biased variance, eps inside the root)."

    def run() -> str:
        message = each_case(one, _NORM_CASES)
        x, (weight, bias) = _test_input((2, 3, 6), 0, 2, scale=1.0)
        off_the_cpu("the normalised output", on_meta(fn, x, weight, bias, 0.1), getattr(fn, "__name__", "it"))
        return message

    return verdict(run)


def check_rms_norm(fn: Callable[..., Any]) -> Verdict:
    """``fn(x, weight, eps)`` returns x / sqrt(mean(x²) + eps) * weight over the last dimension, as ``F.rms_norm``."""

    def one(shape: tuple[int, ...], eps: float, seed: int) -> str:
        x, (weight,) = _test_input(shape, seed, 1, scale=2.0)
        d = shape[-1]
        got = _norm_call(fn, x, weight, eps)
        expected = F.rms_norm(x, (d,), weight, eps)
        mean_square = x.pow(2).mean(-1, keepdim=True)  # (..., 1)
        centred = x - x.mean(-1, keepdim=True)
        variance = x.var(-1, unbiased=False, keepdim=True)
        mean_abs = x.abs().mean(-1, keepdim=True)
        abs_message = (
            "the mean of |x| is used: RMSNorm takes the root of the mean of the *squares*, "
            "sqrt(x.pow(2).mean(-1, keepdim=True) + eps)"
        )
        mistakes = [
            (
                centred / torch.sqrt(variance + eps) * weight,
                "the mean is subtracted: that is LayerNorm without its shift. RMSNorm divides x itself by "
                "sqrt(mean(x²) + eps)",
            ),
            (
                x / torch.sqrt(variance + eps) * weight,
                "the variance is used (it subtracts the mean): RMSNorm uses the mean of the squares, "
                "x.pow(2).mean(-1, keepdim=True)",
            ),
            (x / (mean_square.sqrt() + eps) * weight, "eps is outside the square root: use sqrt(mean(x²) + eps)"),
            (
                F.rms_norm(x, (d,), weight, 1e-6),
                f"the eps argument is not used: the output is what a tiny eps (1e-6, say) gives, not eps = {eps} "
                "as passed; use the argument, sqrt(mean(x²) + eps)",
            ),
            (
                x / torch.sqrt(x.pow(2).sum(-1, keepdim=True) / (d - 1) + eps) * weight,
                "the sum of squares is divided by d - 1: the mean divides by d, x.pow(2).mean(-1)",
            ),
            (
                x / torch.sqrt(x.pow(2).sum(-1, keepdim=True) + eps) * weight,
                "the sum of squares is used (x.norm(dim=-1) is its root): divide it by d, the mean "
                "x.pow(2).mean(-1, keepdim=True)",
            ),
            (x / torch.sqrt(mean_abs + eps) * weight, abs_message),
            (x / (mean_abs + eps) * weight, abs_message),
            (x / (mean_square + eps) * weight, "the square root is missing: divide by sqrt(mean(x²) + eps)"),
            (
                x * torch.sqrt(mean_square + eps) * weight,
                "x is multiplied by the root mean square: divide by it, x / sqrt(mean(x²) + eps) "
                "(or multiply by torch.rsqrt(mean(x²) + eps))",
            ),
            (x / torch.sqrt(mean_square + eps), "the scale is missing: multiply by weight (gamma)"),
        ]
        mistakes += [
            (
                x / torch.sqrt(x.pow(2).mean(dim, keepdim=True) + eps) * weight,
                f"the mean of the squares is taken over {_axis_name(dim, x.dim())}: RMSNorm normalises each token "
                "over its own features, the last axis (dim=-1, keepdim=True)",
            )
            for dim in _wrong_axes(x.dim())
        ]
        name_mistake(got, expected, mistakes)
        _same_normalised(got, expected)
        backpropagates(fn, x, weight, eps, what="the normalised output")
        reference = lambda x, w, eps: F.rms_norm(x, (d,), w, eps)  # noqa: E731
        same_gradients(fn, (x, weight, eps), reference, ("x", "weight", ""), "the normalised output")
        return "rms_norm matches F.rms_norm: no mean subtracted, eps inside the root."

    def run() -> str:
        message = each_case(one, _NORM_CASES)
        x, (weight,) = _test_input((2, 3, 6), 0, 1, scale=1.0)
        off_the_cpu("the normalised output", on_meta(fn, x, weight, 0.1), getattr(fn, "__name__", "it"))
        return message

    return verdict(run)


# --- the encoder layer, post-norm and pre-norm -------------------------------------------------------------------

# Several batches: the batch size, the length, the padding pattern, the width and the weights all change.
_LAYER_CASES: list[dict[str, Any]] = [
    dict(lengths=(3, 5), T=5, d_model=16, seed=0),
    dict(lengths=(6, 2, 7), T=7, d_model=8, seed=1),
]


def _layer_case(
    lengths: tuple[int, ...], T: int, d_model: int, seed: int, norm_first: bool
) -> tuple[Any, nn.TransformerEncoderLayer, Tensor, Tensor]:
    """An ``EncoderLayer`` copied from ``nn.TransformerEncoderLayer`` (dropout off, norms with random scales and
    shifts, so that which norm goes where shows), an input (B, T, d_model) and its padding mask (B, 1, 1, T)."""
    from ..model.encoder import EncoderLayer

    torch.manual_seed(seed)
    theirs = nn.TransformerEncoderLayer(
        d_model, 4, 2 * d_model, dropout=0.0, batch_first=True, norm_first=norm_first
    ).eval()
    with torch.no_grad():
        for norm in (theirs.norm1, theirs.norm2):
            for parameter in norm.parameters():  # the scale and the shift
                parameter.normal_()
    layer = EncoderLayer.from_torch(theirs).eval()
    x = torch.randn(len(lengths), T, d_model)
    tokens = (torch.arange(T) < torch.tensor(lengths)[:, None]).long()  # (B, T): 1 = a token, 0 = padding
    return layer, theirs, x, padding_mask(tokens, 0)


def _run_layer(fn: Callable[..., Any], layer: nn.Module, x: Tensor, mask: Tensor) -> Any:
    """The answer's output, computed without gradients; an answer that calls ``layer(...)`` itself is told so."""
    with torch.no_grad(), not_called(layer):
        return call_layer(fn, layer, x, mask)


def _mask_mistakes(attend_with: Callable[[Tensor | None], Tensor], mask: Tensor) -> list[tuple[Tensor, str]]:
    """What the layer computes with the classic wrong masks; ``attend_with(m)`` is the layer with mask ``m``."""
    T = mask.size(-1)
    return [
        (attend_with(None), MISTAKES["mask ignored"]),
        (
            attend_with(~mask),
            "the mask is flipped (~mask): in this course True means *may attend*, and padding_mask is already "
            "True at the real tokens; pass mask to self_attn as it is",
        ),
        (
            attend_with(mask & causal_mask(T)),
            "a causal mask is added: the encoder reads the whole sentence, in both directions; pass only the "
            "padding mask to self_attn",
        ),
        (attend_with(mask & mask.transpose(-1, -2)), MISTAKES["padded query"]),
    ]


def _post_norm_mistakes(layer: Any, x: Tensor, mask: Tensor) -> list[tuple[Tensor, str]]:
    """Each classic mistake of a post-norm encoder layer, as the output it gives: (output, its message)."""
    n1, n2, ffn = layer.norm1, layer.norm2, layer.feed_forward

    def attend(h: Tensor) -> Tensor:
        return layer.self_attn(h, h, h, mask)[0]

    a = attend(x)
    h = n1(x + a)
    y = x + attend(n1(x))
    h_swapped = n2(x + a)
    h_no_residual = n1(a)
    return [
        (
            y + ffn(n2(y)),
            "this is pre-norm (the norm before each sublayer): the paper's post-norm normalises after the "
            "residual addition, norm1(x + SelfAttn(x))",
        ),
        (
            n2(ffn(h_no_residual)),
            "the residual connections are missing: add each sublayer's input to its output before the norm",
        ),
        (n2(h_no_residual + ffn(h_no_residual)), "the first residual connection is missing: norm1(x + SelfAttn(x))"),
        (n2(ffn(h)), "the second residual connection is missing: norm2(h + FFN(h))"),
        (
            n2(x + ffn(h)),
            "the second residual adds x, the layer's input: add h, the feed-forward sublayer's own input, "
            "norm2(h + FFN(h))",
        ),
        *_mask_mistakes(lambda m: _post_norm(layer, x, m), mask),
        (
            n1(h_swapped + ffn(h_swapped)),
            "norm1 and norm2 are swapped: norm1 follows the attention, norm2 the feed-forward network",
        ),
        (n1(h + ffn(h)), "norm1 is used twice: the second add & norm has its own LayerNorm, norm2(h + FFN(h))"),
        (
            n2(h + ffn(x)),
            "the feed-forward network reads x: it must read h, the attention sublayer's normalised output",
        ),
        (
            n2(h + ffn(x + a)),
            "the feed-forward network reads x + SelfAttn(x), before norm1: it must read h = norm1(x + SelfAttn(x))",
        ),
        (
            n2(x + a + ffn(x + a)),
            "norm1's output is not used (calling layer.norm1(...) returns a new tensor, it does not change "
            "its input): h = norm1(x + SelfAttn(x)) must feed the feed-forward sublayer",
        ),
        ((x + a) + ffn(x + a), "the norms are missing: norm1(x + SelfAttn(x)), then norm2(h + FFN(h))"),
        (h, "the feed-forward sublayer is missing: after h = norm1(x + SelfAttn(x)), return norm2(h + FFN(h))"),
        (h + ffn(h), "norm2 is missing at the output: the second add & norm is norm2(h + FFN(h))"),
        (
            (x + n1(a)) + n2(ffn(x + n1(a))),
            "the norm is inside the residual, x + norm(SelfAttn(x)): post-norm normalises the sum, "
            "norm1(x + SelfAttn(x)), then norm2(h + FFN(h))",
        ),
    ]


def _post_norm(layer: Any, x: Tensor, mask: Tensor | None) -> Tensor:
    """The paper's encoder layer: h = norm1(x + SelfAttn(x)), then norm2(h + FFN(h))."""
    h = layer.norm1(x + layer.self_attn(x, x, x, mask)[0])
    return layer.norm2(h + layer.feed_forward(h))


class _MarkedDropout(nn.Module):
    """A stand-in for a dropout module that scales a fixed, input-independent pattern of entries (every third one by
    2, the rest by 1) instead of random ones: where an answer applies dropout shows in its output, on this process and
    on the other side of the grader's link alike, with no random generator to share."""

    def forward(self, x: Tensor) -> Tensor:
        pattern = 1.0 + (torch.arange(x.numel(), device=x.device) % 3 == 0).to(x.dtype)  # (numel,)
        return x * pattern.view(x.shape)


def _dropout_placed(
    fn: Callable[..., Any], layer: Any, x: Tensor, mask: Tensor, reference: Callable[..., Tensor]
) -> None:
    """The chapter lets an answer leave the dropouts out (they are off in the checker); where it applies them,
    ``dropout1`` must act on the attention's output and ``dropout2`` on the feed-forward network's, before each
    residual addition, as ``reference(layer, x, mask)`` (the course's layer) does. Each is replaced by a marker for one
    run; the reference then runs with the markers the answer called, the others left out."""
    names = ("dropout1", "dropout2")
    saved = {name: getattr(layer, name) for name in names}
    called: set[str] = set()
    try:

        def seen(name: str) -> Callable[[nn.Module, tuple[Any, ...]], None]:
            return lambda _module, _args: called.add(name)

        hooks = []
        for name in names:
            marker = _MarkedDropout()
            setattr(layer, name, marker)
            hooks.append(marker.register_forward_pre_hook(seen(name)))
        try:
            got = _run_layer(fn, layer, x, mask)
        finally:
            for hook in hooks:
                hook.remove()
        if not called:
            return
        for name in names:
            if name not in called:
                setattr(layer, name, nn.Identity())
        with torch.no_grad():
            expected = reference(layer, x, mask)
        if isinstance(got, Tensor) and got.shape == expected.shape and not torch.allclose(got, expected, atol=1e-5):
            which = " and ".join(sorted(called)) + (" are" if len(called) > 1 else " is")
            raise NotYet(
                f"{which} applied in another place than the layer's: dropout acts on each sublayer's output, "
                "before the residual addition, as in x + dropout1(SelfAttn(...)) and h + dropout2(FFN(...)) (the "
                "checker puts a fixed pattern in place of dropout's random one to see where it lands)"
            )
    finally:
        for name, module in saved.items():
            setattr(layer, name, module)


def check_encoder_layer(fn: Callable[..., Any]) -> Verdict:
    """``fn(layer, x, mask)`` computes the paper's post-norm encoder layer from ``layer``'s submodules:
    h = norm1(x + SelfAttn(x)), then norm2(h + FFN(h))."""

    def one(lengths: tuple[int, ...], T: int, d_model: int, seed: int) -> str:
        layer, theirs, x, mask = _layer_case(lengths, T, d_model, seed, norm_first=False)
        real = mask[:, 0, 0]  # (B, T): True = real token
        got = _run_layer(fn, layer, x, mask)
        with torch.no_grad():
            expected = _post_norm(layer, x, mask)
            name_mistake(got, expected, _post_norm_mistakes(layer, x, mask))
            same(got, expected, "the layer's output")
            torch_out = theirs(x, src_key_padding_mask=~real)  # torch: True = padding
        same(got[real], torch_out[real], "the output at the real positions, compared with nn.TransformerEncoderLayer")
        _trains_through(fn, layer, x, mask, lambda x: _post_norm(layer, x, mask))
        _dropout_placed(fn, layer, x, mask, lambda layer, x, mask: layer(x, mask))
        return (
            "post-norm layer is right: equal to course_utils.EncoderLayer and, at the real positions, to "
            "nn.TransformerEncoderLayer."
        )

    def run() -> str:
        return each_case(one, _LAYER_CASES)

    return verdict(run)


def _trains_through(
    fn: Callable[..., Any], layer: nn.Module, x: Tensor, mask: Tensor, reference: Callable[[Tensor], Tensor]
) -> None:
    """The layer is trained through (and stacked): gradients must reach its input x, as the reference's do."""

    def answer(x: Tensor) -> Any:  # the answer as a function of x alone, named as the student named it
        return fn(layer, x, mask)

    answer.__name__ = getattr(fn, "__name__", answer.__name__)
    with not_called(layer):
        backpropagates(answer, x, what="the layer's output")
        same_gradients(answer, (x,), reference, ("x",), "the layer's output")


def _pre_norm_mistakes(layer: Any, x: Tensor, mask: Tensor) -> list[tuple[Tensor, str]]:
    """Each classic mistake of a pre-norm encoder layer, as the output it gives: (output, its message)."""
    n1, n2, ffn = layer.norm1, layer.norm2, layer.feed_forward

    def attend(h: Tensor) -> Tensor:
        return layer.self_attn(h, h, h, mask)[0]

    a = attend(n1(x))
    y = x + a
    expected = y + ffn(n2(y))
    post = n1(x + attend(x))
    h = n1(x)  # the stream itself normalised, then the residual taken from it
    z = h + attend(h)
    no_residual = "the residual connections are missing: add each sublayer's output to its input"
    output_normed = (
        "a norm is applied to the layer's output: in pre-norm each LayerNorm feeds a sublayer, the "
        "stream is added to as it is (a pre-norm *stack* ends with one final norm, not each layer)"
    )
    y_swapped = x + attend(n2(x))
    y_raw = x + attend(x)
    y_kv = x + layer.self_attn(n1(x), x, x, mask)[0]  # only the queries normalised
    return [
        (
            n2(post + ffn(post)),
            "this is post-norm (norm after the residual add); pre-norm normalises the sublayer's input",
        ),
        (a + ffn(n2(x)), no_residual),
        (ffn(n2(a)), no_residual),
        (ffn(n2(y)), "the second residual connection is missing: return x + FFN(norm2(x)), the stream plus the update"),
        (
            a + ffn(n2(a)),
            "the first residual connection is missing: x = x + SelfAttn(norm1(x)), the stream plus the update",
        ),
        (z + ffn(n2(z)), MISTAKES["normalised stream"]),
        (n2(z) + ffn(n2(z)), MISTAKES["normalised stream"]),
        (n2(expected), output_normed),
        (n1(expected), output_normed),
        *_mask_mistakes(lambda m: _pre_norm(layer, x, m), mask),
        (
            y_swapped + ffn(n1(y_swapped)),
            "norm1 and norm2 are swapped: norm1 feeds the attention, norm2 the feed-forward network",
        ),
        (y + ffn(n1(y)), "norm1 is used twice: the feed-forward network reads its own norm, FFN(norm2(x))"),
        (
            y + ffn(n2(x)),
            "the feed-forward network reads the layer's input x, not the stream after the attention's "
            "residual: x = x + SelfAttn(norm1(x)) first, then x + FFN(norm2(x)) with that new x",
        ),
        (
            x + ffn(n2(y)),
            "the second residual adds the layer's input x: add to the stream after the attention, "
            "x = x + SelfAttn(norm1(x)), then x + FFN(norm2(x)) with that new x",
        ),
        (
            y + ffn(y),
            "the feed-forward network reads the stream unnormalised: each sublayer reads a normalised copy, "
            "x + FFN(norm2(x))",
        ),
        (
            y_raw + ffn(n2(y_raw)),
            "self-attention reads the stream unnormalised: each sublayer reads a normalised copy, "
            "h = norm1(x), then x + SelfAttn(h)",
        ),
        (
            y_kv + ffn(n2(y_kv)),
            "self-attention's keys and values read x unnormalised: pass the normalised copy h = norm1(x) as "
            "query, key and value",
        ),
    ]


def _pre_norm(layer: Any, x: Tensor, mask: Tensor | None) -> Tensor:
    """A pre-norm encoder layer: x = x + SelfAttn(norm1(x)), then x + FFN(norm2(x))."""
    h = layer.norm1(x)
    x = x + layer.self_attn(h, h, h, mask)[0]
    return x + layer.feed_forward(layer.norm2(x))


def check_pre_norm_layer(fn: Callable[..., Any]) -> Verdict:
    """``fn(layer, x, mask)`` computes a pre-norm encoder layer's forward from ``layer``'s submodules."""

    def one(lengths: tuple[int, ...], T: int, d_model: int, seed: int) -> str:
        layer, _, x, mask = _layer_case(lengths, T, d_model, seed, norm_first=True)
        got = _run_layer(fn, layer, x, mask)
        with torch.no_grad():
            expected = _pre_norm(layer, x, mask)
            name_mistake(got, expected, _pre_norm_mistakes(layer, x, mask))
            same(got, expected, "the layer's output")
        _trains_through(fn, layer, x, mask, lambda x: _pre_norm(layer, x, mask))
        _dropout_placed(fn, layer, x, mask, lambda layer, x, mask: layer(x, mask))
        return "pre-norm layer is right: x + SelfAttn(LN(x)), then x + FFN(LN(x))."

    def run() -> str:
        return each_case(one, _LAYER_CASES)

    return verdict(run)
