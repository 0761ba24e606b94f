"""Bad input found in review: half-attached models, explicit-tap multiples, empty batches, types."""

import warnings

import numpy as np
import pytest
import torch
from torch import nn

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import compressai.models as cm

from iclr25.compress.auxt import WLS, AuxTModel, InverseWLS, attach_auxt
from iclr25.compress.metrics import fit_curve, rd_point


def test_failed_attach_leaves_the_base_model_untouched():
    """A bad dec_taps raised only after g_a had been wrapped: the model was half-modified and
    every later attach_auxt refused it ("already has AuxT" / "g_a must be an nn.Sequential")."""
    base = cm.FactorizedPrior(16, 24)
    g_a, g_s = base.g_a, base.g_s
    with pytest.raises(ValueError, match="taps must be increasing"):
        attach_auxt(base, dec_taps=[0, 2, 4, 99])
    assert base.g_a is g_a and base.g_s is g_s
    net = attach_auxt(base)  # the corrected call works on the same model
    assert net.base.g_a.taps == [0, 2, 4, 6] and net.base.g_s.taps == [0, 2, 4, 6]


class _BadSynthesis(nn.Module):
    def __init__(self):
        super().__init__()
        self.g_a = nn.Sequential(*[nn.Conv2d(3 if i == 0 else 4, 4, 3, 2, 1) for i in range(4)])
        self.g_s = nn.Sequential(nn.ConvTranspose2d(5, 3, 2, 2))  # expects 5 channels, g_a gives 4


def test_failed_dry_run_restores_training_mode():
    base = _BadSynthesis().train()
    with pytest.raises(RuntimeError):
        attach_auxt(base)
    assert base.training and all(m.training for m in base.modules())


def test_dec_taps_count_must_match_the_channel_chain():
    # dec taps that are not upsampling layers take the reversed encoder chain (4 shortcuts here).
    with pytest.raises(ValueError, match="needs 4 taps, got 5"):
        attach_auxt(cm.FactorizedPrior(16, 24), dec_taps=[1, 2, 3, 4, 5])


@pytest.mark.parametrize("cls,multiple", [(cm.FactorizedPrior, 16), (cm.MeanScaleHyperprior, 64)])
def test_multiple_counts_untapped_downsampling_layers(cls, multiple):
    """With 2 explicit taps the multiple was 2^2 (times 4): 32×32 images passed the check and failed
    inside CompressAI with a shape error, and pad=True padded to the wrong size."""
    net = AuxTModel(cls(16, 24), enc_taps=[0, 2], dec_taps=[0, 2])
    assert net.multiple == multiple
    x = torch.rand(1, 3, 40, 40, generator=torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match=f"multiples of {multiple}"):
        net(x)
    assert net(x, pad=True)["x_hat"].shape == x.shape
    net.update(force=True)
    enc = net.compress(x, pad=True)
    assert net.decompress(enc["strings"], enc["shape"])["x_hat"].shape == x.shape


@pytest.mark.parametrize("shape", [(0, 3, 32, 32), (1, 3, 0, 32)])
def test_empty_images_raise_value_error(shape):
    net = attach_auxt(cm.FactorizedPrior(16, 24))
    x = torch.rand(shape)
    with pytest.raises(ValueError, match="at least one non-empty image"):
        net(x, pad=True)
    with pytest.raises(ValueError, match="images must hold at least one"):
        rd_point(net, x, pad=True)


def test_shortcuts_reject_non_tensors_and_integer_maps_with_type_error():
    with pytest.raises(TypeError, match=r"x must be a torch\.Tensor"):
        WLS(3, 4)(np.zeros((1, 3, 4, 4), dtype=np.float32))
    for folded in (False, True):
        with pytest.raises(TypeError, match="floating-point"):
            InverseWLS(4, 3, folded=folded)(torch.zeros(1, 4, 2, 2, dtype=torch.int64))
        with pytest.raises(TypeError, match="floating-point"):
            WLS(3, 4, folded=folded)(torch.zeros(1, 3, 4, 4, dtype=torch.int64))


def test_shortcuts_accept_non_contiguous_and_grad_inputs():
    g = torch.Generator().manual_seed(1)
    x = torch.rand(2, 3, 8, 16, generator=g, dtype=torch.float64)[..., ::2].requires_grad_()
    assert not x.is_contiguous()
    for folded in (False, True):
        wls = WLS(3, 5, folded=folded).double()
        torch.testing.assert_close(wls(x), wls(x.contiguous()), atol=1e-12, rtol=0)
        (grad,) = torch.autograd.grad(wls(x).sum(), x)
        assert grad.shape == x.shape


def test_fit_curve_rejects_unsorted_or_short_samples():
    # Unsorted x used to give a wrong Hermite fit silently (searchsorted assumes sorted x).
    with pytest.raises(ValueError, match="strictly increasing"):
        fit_curve([3.0, 1.0, 2.0], [1.0, 2.0, 3.0], "pchip")
    with pytest.raises(ValueError, match="at least 2"):
        fit_curve([1.0], [1.0], "pchip")
    with pytest.raises(ValueError, match="same length"):
        fit_curve([1.0, 2.0], [1.0, 2.0, 3.0], "pchip")
    with pytest.raises(ValueError, match="finite"):
        fit_curve([1.0, 2.0, 3.0, 4.0], [1.0, float("nan"), 3.0, 4.0], "cubic")
