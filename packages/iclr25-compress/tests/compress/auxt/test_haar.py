"""Haar DWT: perfect reconstruction, energy preservation, subband layout, bad input."""

import pytest
import torch

from iclr25.compress.auxt import haar_dwt2d, haar_idwt2d


def test_perfect_reconstruction_and_energy():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 5, 8, 12, generator=g, dtype=torch.float64)
    z = haar_dwt2d(x)
    assert z.shape == (2, 20, 4, 6)
    torch.testing.assert_close(haar_idwt2d(z), x, atol=1e-6, rtol=0)
    torch.testing.assert_close(z.pow(2).sum(), x.pow(2).sum(), atol=1e-9, rtol=1e-12)


def test_float32_reconstruction_atol_1e6():
    x = torch.rand(1, 3, 16, 16, generator=torch.Generator().manual_seed(1))
    assert (haar_idwt2d(haar_dwt2d(x)) - x).abs().max() <= 1e-6


def test_constant_image_all_energy_in_ll():
    x = torch.full((1, 2, 6, 6), 0.7, dtype=torch.float64)
    ll, lh, hl, hh = haar_dwt2d(x).chunk(4, dim=1)
    torch.testing.assert_close(ll, torch.full_like(ll, 1.4))  # (4 · 0.7) / 2
    for band in (lh, hl, hh):
        assert band.abs().max() == 0


def test_block_formulas_match_definition():
    x = torch.tensor([[[[1.0, 2.0], [3.0, 5.0]]]], dtype=torch.float64)  # a b / c d
    a, b, c, d = 1.0, 2.0, 3.0, 5.0
    expect = [(a + b + c + d) / 2, (a - b + c - d) / 2, (a + b - c - d) / 2, (a - b - c + d) / 2]
    assert haar_dwt2d(x).flatten().tolist() == expect


def test_subband_major_channel_order():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(1, 3, 4, 4, generator=g)
    z = haar_dwt2d(x)
    # Channel k·C + c holds subband k of input channel c.
    torch.testing.assert_close(z[:, 3 * 1 + 2], haar_dwt2d(x[:, 2:3])[:, 1])


@pytest.mark.parametrize("shape", [(1, 1, 3, 4), (1, 1, 4, 5)])
def test_odd_size_raises(shape):
    with pytest.raises(ValueError, match="even"):
        haar_dwt2d(torch.zeros(shape))


def test_bad_types_raise():
    with pytest.raises(TypeError):
        haar_dwt2d(torch.zeros(1, 1, 4, 4, dtype=torch.int64))
    with pytest.raises(ValueError, match="4-D"):
        haar_dwt2d(torch.zeros(4, 4))
    with pytest.raises(ValueError, match="multiple of 4"):
        haar_idwt2d(torch.zeros(1, 3, 2, 2))
