"""What every checker gets from checks/_core: an answer that changes its input, cannot be trained through, raises an
error with no message, or puts its result on another device is told so in words, never with an exception."""

import pytest
import torch
import torch.nn.functional as F
from helpers import attention_steps

from course_utils import causal_mask
from course_utils.checks import (
    check_greedy_decode,
    check_kv_cache_step,
    check_label_smoothing,
    check_layer_norm,
    check_rms_norm,
    check_rotary_embedding,
    check_scaled_dot_product_attention,
)
from course_utils.checks._core import NotYet, call, verdict


def test_an_answer_that_overwrites_its_input_is_told_so():
    def layer_norm_in_place(x, weight, bias, eps):
        x -= x.mean(-1, keepdim=True)  # writes into the caller's tensor
        x /= torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)
        return x * weight + bias

    def rms_in_place(x, weight, eps):
        return x.div_(torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)).mul(weight)

    for check, fn in ((check_layer_norm, layer_norm_in_place), (check_rms_norm, rms_in_place)):
        result = check(fn)
        assert not result and "changed its input x in place" in result.message, result.message


def test_an_answer_that_cannot_be_trained_through_fails():
    def detached_loss(logits, target, smoothing):
        return F.cross_entropy(logits, target, label_smoothing=smoothing).item()  # a number: no gradient

    def no_grad_attention(q, k, v, mask=None):
        with torch.no_grad():
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    def numpy_norm(x, weight, bias, eps):
        import numpy as np

        a = x.detach().numpy()
        out = (a - a.mean(-1, keepdims=True)) / np.sqrt(a.var(-1, keepdims=True) + eps)
        return torch.from_numpy(out) * weight.detach() + bias.detach()

    for check, fn in (
        (check_label_smoothing, detached_loss),
        (check_scaled_dot_product_attention, no_grad_attention),
        (check_layer_norm, numpy_norm),
    ):
        result = check(fn)
        assert not result and "cannot be trained through" in result.message, (check.__name__, result.message)


def test_right_answers_still_pass_the_gradient_check():
    assert check_label_smoothing(lambda logits, target, s: F.cross_entropy(logits, target, label_smoothing=s))
    assert check_scaled_dot_product_attention(attention_steps)
    assert check_layer_norm(lambda x, w, b, eps: F.layer_norm(x, (x.size(-1),), w, b, eps))
    assert check_rms_norm(lambda x, w, eps: F.rms_norm(x, (x.size(-1),), w, eps))


def test_an_error_with_no_message_is_explained():
    def empty():
        raise StopIteration

    with pytest.raises(NotYet) as raised:
        call(empty)
    assert "StopIteration" in str(raised.value) and "next()" in str(raised.value)


def test_an_answer_that_exits_is_reported_not_obeyed():
    def leaves():
        raise SystemExit(0)  # sys.exit() or exit() in an answer would end the grader or the kernel's cell

    with pytest.raises(NotYet) as raised:
        call(leaves)
    assert "SystemExit" in str(raised.value) and "exit" in str(raised.value)


def test_a_greedy_decoder_that_reads_its_device_from_the_model_passes():
    def greedy(model, src, src_mask, *, max_len, bos_id, eos_id):
        device = next(model.parameters()).device  # how many decoders find their device
        memory = model.encode(src, src_mask)
        ys = torch.tensor([[bos_id]], device=device)
        for _ in range(max_len - 1):
            tgt_mask = causal_mask(ys.size(1)).to(device)
            next_id = model.decode(ys, memory, src_mask, tgt_mask)[:, -1].argmax(-1, keepdim=True)
            ys = torch.cat([ys, next_id], dim=1)
            if next_id.item() == eos_id:
                break
        return ys

    result = check_greedy_decode(greedy)
    assert result, result.message


def test_a_kv_cache_step_may_return_a_list():
    def step(cache_k, cache_v, q, k, v):
        keys, values = torch.cat([cache_k, k], dim=2), torch.cat([cache_v, v], dim=2)
        out = F.scaled_dot_product_attention(q, keys, values)
        return [out, keys, values]

    result = check_kv_cache_step(step)
    assert result, result.message


def test_a_result_on_another_device_is_reported_not_raised():
    meta = lambda x: torch.zeros_like(x, device="meta")  # noqa: E731  (a device the inputs are not on)
    result = check_rotary_embedding(meta)
    assert not result and "meta" in result.message


def test_a_checker_never_raises():
    def broken():
        raise RuntimeError("a bug in the checker itself")

    result = verdict(broken, name="check_example")
    assert not result and "could not be tested" in result.message


def test_each_case_names_the_values_a_hard_coded_answer_gets_wrong():
    from course_utils.checks._core import each_case

    def one(T, pad_id):
        answer = torch.arange(5) != 0  # T = 5 and pad_id = 0 written into the code
        expected = torch.arange(T) != pad_id
        if answer.shape != expected.shape or not torch.equal(answer, expected):
            raise NotYet("the mask differs")
        return "right"

    def run():
        return each_case(one, [dict(T=5, pad_id=0), dict(T=5, pad_id=3)])

    result = verdict(run, "hard_coded")
    assert not result and "not with pad_id = 3" in result.message and "T = " not in result.message, result.message
    assert verdict(lambda: each_case(lambda T: "right", [dict(T=1), dict(T=2)]), "fine")


def test_an_answer_that_calls_the_layer_itself_is_named_whether_or_not_its_output_is_right():
    from course_utils.checks._core import MISTAKES, not_called

    layer = torch.nn.Linear(3, 3)

    def run_with(answer):
        def run():
            with not_called(layer):
                call(answer, layer, torch.randn(2, 3))
            return "own forward"

        return verdict(run, "layer")

    assert run_with(lambda layer, x: x @ layer.weight.T + layer.bias)
    called = run_with(lambda layer, x: layer(x))
    assert not called and MISTAKES["called the layer"] in called.message
    broken = run_with(lambda layer, x: layer(x)[None].undefined)  # calls it, then fails: the call is still named
    assert not broken and MISTAKES["called the layer"] in broken.message


def test_an_integer_result_where_floats_are_expected_is_told_its_dtype():
    from course_utils.checks._core import same

    try:
        same(torch.tensor([1, 2]), torch.tensor([1.0, 2.0]), "the output")
    except NotYet as e:
        assert "dtype torch.int64; expected torch.float32" in str(e)
    else:
        raise AssertionError("an int64 result passed for a float one")


def test_a_table_built_from_sizes_may_be_on_the_notebooks_device():
    """A function given no tensor (a mask, an encoding table) takes no device from its inputs: built on the default
    device or on the notebook's `device` (a GPU on Colab), both are right, and `any_device` compares it where the
    reference is. Only a meta tensor, which holds no values, is refused."""
    from course_utils.checks._core import any_device

    reference = torch.zeros(2)
    moved = any_device(torch.ones(2, device="cpu"), reference, "the table")
    assert moved.device == reference.device
    try:
        any_device(torch.ones(2, device="meta"), reference, "the table")
    except NotYet as e:
        assert "meta device, which holds no values" in str(e)
    else:
        raise AssertionError("a meta tensor passed")


def test_a_nan_where_a_number_is_expected_is_a_difference():
    from course_utils.checks._core import same

    try:
        same(torch.tensor([1.0, float("nan")]), torch.tensor([1.0, 2.0]), "the loss")
    except NotYet as e:
        assert "differs at index (1,)" in str(e) and "nan" in str(e)
    else:
        raise AssertionError("a NaN passed for 2.0")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_an_answer_in_lower_precision_is_told_its_dtype(dtype, capsys):
    def layer_norm_half(x, weight, bias, eps=1e-5):
        return F.layer_norm(x, x.shape[-1:], weight, bias, eps).to(dtype)

    ok = check_layer_norm(layer_norm_half)
    out = capsys.readouterr().out
    assert not ok and f"has dtype {dtype}; expected torch.float32" in out and "lower precision" in out, out
