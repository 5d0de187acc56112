import pytest
import torch

from course_utils import causal_mask, padding_mask, target_mask


def test_causal_mask_is_true_on_and_below_the_diagonal():
    m = causal_mask(4)
    assert m.dtype == torch.bool and m.shape == (4, 4)
    assert torch.equal(m, torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]], dtype=torch.bool))


def test_causal_mask_follows_the_device_argument():
    # The meta device holds shapes without data: a mask built anywhere else would land on the CPU.
    assert causal_mask(3, device="meta").device.type == "meta"
    assert causal_mask(3, device=torch.device("meta")).shape == (3, 3)


def test_target_mask_stays_on_the_device_of_its_tokens():
    assert target_mask(torch.ones(2, 4, dtype=torch.long, device="meta"), pad_id=0).device.type == "meta"


def test_padding_mask_is_true_at_real_tokens_with_broadcast_axes():
    tokens = torch.tensor([[5, 6, 0], [7, 0, 0]])
    m = padding_mask(tokens, pad_id=0)
    assert m.shape == (2, 1, 1, 3) and m.dtype == torch.bool
    assert torch.equal(m[:, 0, 0], torch.tensor([[True, True, False], [True, False, False]]))


def test_target_mask_is_causal_and_hides_padding():
    tgt = torch.tensor([[1, 5, 6, 0]])
    m = target_mask(tgt, pad_id=0)
    assert m.shape == (1, 1, 4, 4)
    assert torch.equal(m[0, 0], causal_mask(4) & torch.tensor([True, True, True, False]))


@pytest.mark.parametrize("size", [0, -2, 2.5, True])
def test_causal_mask_rejects_a_bad_size(size):
    with pytest.raises(ValueError, match="positive int"):
        causal_mask(size)


def test_padding_mask_rejects_bad_tokens():
    with pytest.raises(ValueError, match=r"\(B, T\).*unsqueeze"):
        padding_mask(torch.tensor([1, 2, 0]), 0)
    with pytest.raises(TypeError, match="integer token ids"):
        padding_mask(torch.randn(2, 3), 0)
