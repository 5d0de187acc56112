import math

import pytest
import torch
from torch.testing import assert_close

from course_utils import PositionalEncoding, apply_rotary, sinusoidal_encoding


def reference(pos: int, dim: int, d_model: int) -> float:
    """The paper's formula, one entry at a time, in plain Python."""
    two_i = dim - dim % 2
    angle = pos / 10000 ** (two_i / d_model)
    return math.sin(angle) if dim % 2 == 0 else math.cos(angle)


@pytest.mark.parametrize("d_model", [4, 16, 7])  # odd: the last column is a sine
def test_sinusoidal_encoding_is_the_papers_formula(d_model):
    pe = sinusoidal_encoding(60, d_model)
    assert pe.shape == (60, d_model) and pe.dtype == torch.float32
    expected = torch.tensor([[reference(p, d, d_model) for d in range(d_model)] for p in range(60)])
    assert_close(pe, expected, atol=1e-6, rtol=0)


def test_first_pair_has_wavelength_2pi_and_last_pair_near_10000_2pi():
    pe = sinusoidal_encoding(2, 512)
    assert_close(pe[1, 0], torch.tensor(math.sin(1.0)))
    assert_close(pe[1, 510], torch.tensor(math.sin(1 / 10000 ** (510 / 512))))


def test_relative_positions_are_a_rotation():
    """PE(p + k) = M_k PE(p), with M_k block-diagonal 2x2 rotations independent of p."""
    d, k = 8, 5
    pe = sinusoidal_encoding(40, d).double()
    omega = 1 / 10000 ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    M = torch.zeros(d, d, dtype=torch.float64)
    for j, w in enumerate(omega):
        c, s = math.cos(k * w), math.sin(k * w)
        M[2 * j : 2 * j + 2, 2 * j : 2 * j + 2] = torch.tensor([[c, s], [-s, c]])
    assert_close(pe[k:], pe[:-k] @ M.T, atol=1e-6, rtol=0)


def test_positional_encoding_adds_the_table_and_is_not_saved():
    layer = PositionalEncoding(16, dropout=0.0, max_len=50)
    x = torch.randn(2, 10, 16)
    assert_close(layer(x), x + sinusoidal_encoding(10, 16))
    assert "pe" not in layer.state_dict()
    assert layer.to(torch.float64).pe.dtype == torch.float64  # a buffer follows .to()


def test_positional_encoding_errors_name_the_fix():
    layer = PositionalEncoding(16, max_len=8)
    with pytest.raises(ValueError, match=r"T=9 exceeds max_len=8.*max_len >= 9"):
        layer(torch.randn(1, 9, 16))
    with pytest.raises(ValueError, match="d_model=16"):
        layer(torch.randn(1, 4, 15))
    with pytest.raises(ValueError, match="positive ints"):
        sinusoidal_encoding(0, 16)


def test_rotate_refuses_angles_for_another_length_instead_of_broadcasting_them():
    from course_utils.model.positional import rotary_angles, rotate

    x = torch.randn(2, 4, 6, 8)  # (B, h, T, d_k)
    cos, sin = rotary_angles(torch.arange(1), 8)  # one position's angles, (1, 4): would broadcast over T = 6
    with pytest.raises(ValueError, match=r"\(T, d_k/2\) = \(6, 4\)"):
        rotate(x, cos, sin)
    assert torch.equal(rotate(x, *rotary_angles(torch.arange(6), 8)), apply_rotary(x, torch.arange(6)))
