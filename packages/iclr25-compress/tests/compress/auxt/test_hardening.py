"""Bad input found in review: half-attached models, explicit-tap multiples, empty batches, types,
probe sizes, broadcasting shortcuts, malformed bitstream lists."""

import warnings

import numpy as np
import pytest
import torch
from torch import nn

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import compressai.models as cm

from iclr25.compress.auxt import WLS, AuxTModel, AuxTransform, InverseWLS, attach_auxt, find_taps, rd_loss_with_ortho
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


def test_attaching_twice_names_the_existing_auxt():
    """The "already attached" check sat behind the nn.Sequential check, which an AuxTransform fails
    first: a second attach raised TypeError "base.g_a must be an nn.Sequential, got AuxTransform"."""
    base = cm.FactorizedPrior(16, 24)
    attach_auxt(base)
    with pytest.raises(ValueError, match="base already has AuxT attached"):
        attach_auxt(base)


class _NoSynthesis(nn.Module):
    def __init__(self, g_s):
        super().__init__()
        self.g_a = nn.Sequential(nn.Conv2d(3, 4, 3, 2, 1))
        if g_s is not None:
            self.g_s = g_s


@pytest.mark.parametrize("g_s,got", [(None, "nothing"), (nn.Conv2d(4, 3, 1), "Conv2d")])
def test_base_needs_sequential_transforms(g_s, got):
    with pytest.raises(TypeError, match=rf"base\.g_s must be an nn\.Sequential, got {got}"):
        attach_auxt(_NoSynthesis(g_s))


@pytest.mark.parametrize(
    "w_orth,exc",
    [("0.1", TypeError), (True, TypeError), (-0.1, ValueError), (float("nan"), ValueError), (float("inf"), ValueError)],
)
def test_w_orth_must_be_a_finite_non_negative_real(w_orth, exc):
    """An infinite weight was accepted and made every training loss inf; a string raised ValueError."""
    with pytest.raises(exc, match="w_orth must be a"):
        attach_auxt(cm.FactorizedPrior(16, 24), w_orth=w_orth)


def test_w_orth_accepts_numpy_reals():
    assert attach_auxt(cm.FactorizedPrior(16, 24), w_orth=np.float32(0.25)).w_orth == 0.25


@pytest.mark.parametrize(
    "cls,probe_size",
    [
        (cm.MeanScaleHyperprior, 16),  # 1-pixel latent: 4 and more halvings all end at 1
        (cm.MeanScaleHyperprior, 32),  # 2-pixel latent, 1-pixel hyper-latent: multiple read as 32
        (cm.MeanScaleHyperprior, 96),  # 6 -> 3 -> 2 in h_a: hyper factor read as 3, multiple 48
        (cm.FactorizedPrior, 100),  # 100 -> 50 -> 25 -> 13 -> 7: ratio 14 is not 2^4
    ],
)
def test_probe_size_that_cannot_measure_the_downsampling_raises(cls, probe_size):
    """MeanScaleHyperprior needs multiples of 2^4 · 2^2 = 64; a small or odd probe gave 32 or 48, so
    check_images passed sizes that CompressAI then failed on with a shape error."""
    with pytest.raises(ValueError, match=f"probe_size={probe_size} cannot measure"):
        AuxTModel(cls(16, 24), enc_taps=[0, 2, 4, 6], dec_taps=[0, 2, 4, 6], probe_size=probe_size)


@pytest.mark.parametrize("probe_size", [128, 192, 256])
def test_probe_sizes_divided_exactly_give_the_true_multiple(probe_size):
    # 4 stride-2 layers in g_a and 2 in h_a: 2^4 · 2^2, whatever the (exact) probe.
    assert attach_auxt(cm.MeanScaleHyperprior(16, 24), probe_size=probe_size).multiple == 64


@pytest.mark.parametrize("probe_size,exc", [(128.0, TypeError), (0, ValueError), (-64, ValueError)])
def test_probe_size_must_be_a_positive_int(probe_size, exc):
    with pytest.raises(exc, match="probe_size must be"):
        attach_auxt(cm.FactorizedPrior(16, 24), probe_size=probe_size)


def test_enc_taps_that_are_not_downsampling_layers_need_channels():
    # Layers 1, 3, 5 of FactorizedPrior's g_a are GDNs: the dry run cannot tell their channels.
    with pytest.raises(ValueError, match=r"channels must be given when the enc_taps \[1, 3, 5, 6\]"):
        attach_auxt(cm.FactorizedPrior(16, 24), enc_taps=[1, 3, 5, 6])
    with pytest.raises(ValueError, match=r"channels must have 5 entries \(input \+ one per tap\)"):
        attach_auxt(cm.FactorizedPrior(16, 24), channels=[3, 16, 16, 24])


def test_shortcut_that_would_broadcast_into_the_transform_raises():
    """One-channel shortcuts were added to 16-channel stage outputs by broadcasting: a wrong
    channels list ran silently and gave a different codec."""
    net = attach_auxt(cm.FactorizedPrior(16, 24), channels=[3, 1, 1, 1, 1])
    with pytest.raises(ValueError, match=r"shortcut 0 gives \(1, 1, 16, 16\) but layer 0 gives \(1, 16, 16, 16\)"):
        net(torch.rand(1, 3, 32, 32, generator=torch.Generator().manual_seed(0)))


def test_aux_transform_rejects_bad_arguments():
    seq = nn.Sequential(nn.Conv2d(3, 4, 3, 2, 1), nn.Conv2d(4, 4, 3, 2, 1))
    with pytest.raises(TypeError, match=r"transform must be an nn\.Sequential, got Conv2d"):
        AuxTransform(seq[0], [0], [WLS(3, 4)])
    with pytest.raises(ValueError, match="got 2 taps and 1 shortcuts"):
        AuxTransform(seq, [0, 1], [WLS(3, 4)])
    with pytest.raises(ValueError, match=r"taps must be increasing layer indices in \[0, 2\), got \[1, 0\]"):
        AuxTransform(seq, [1, 0], [WLS(3, 4), WLS(4, 4)])


def test_find_taps_rejects_bad_arguments():
    seq = nn.Sequential(nn.Conv2d(3, 5, 3, 2, 1), nn.Conv2d(5, 7, 3, 2, 1))
    with pytest.raises(ValueError, match="kind must be 'down' or 'up', got 'sideways'"):
        find_taps(seq, torch.zeros(1, 3, 16, 16), "sideways")
    with pytest.raises(TypeError, match=r"transform must be an nn\.Sequential, got Conv2d"):
        find_taps(seq[0], torch.zeros(1, 3, 16, 16))
    with pytest.raises(TypeError, match="x must be a floating-point"):
        find_taps(seq, torch.zeros(1, 3, 16, 16, dtype=torch.int64))
    # Conv2d takes an unbatched (C, H, W) probe: its shape[1] (H) was reported as the channels.
    with pytest.raises(ValueError, match=r"x must be 4-D"):
        find_taps(seq, torch.zeros(3, 16, 16))
    assert find_taps(seq, torch.zeros(1, 3, 16, 16)) == [(0, 3, 5), (1, 5, 7)]


@pytest.fixture(scope="module")
def small_coded():
    torch.manual_seed(0)
    net = attach_auxt(cm.FactorizedPrior(16, 24)).eval()
    net.update(force=True)
    g = torch.Generator().manual_seed(1)
    # Both pad to 64x64, so their latents agree; only the stored original sizes differ.
    a = net.compress(torch.rand(1, 3, 64, 64, generator=g))
    b = net.compress(torch.rand(1, 3, 60, 50, generator=g), pad=True)
    return net, a, b


def test_decompress_rejects_malformed_strings(small_coded):
    net, a, b = small_coded
    with pytest.raises(TypeError, match="strings must be a list"):
        net.decompress(a["strings"][0][0], a["shape"])
    with pytest.raises(TypeError, match="strings must be a list"):
        net.decompress([a["strings"][0][0]], a["shape"])
    with pytest.raises(TypeError, match=r"strings\[0\]\[1\] must be bytes, got str"):
        net.decompress([[a["strings"][0][0], "abc"]], a["shape"])
    with pytest.raises(ValueError, match="strings must hold at least one byte string"):
        net.decompress([[]], a["shape"])
    with pytest.raises(ValueError, match=r"strings disagree on the image size: \[\(60, 50\), \(64, 64\)\]"):
        net.decompress([[a["strings"][0][0], b["strings"][0][0]]], a["shape"])
    # The same pair, each with its own size, decodes to its own crop.
    assert net.decompress(b["strings"], b["shape"])["x_hat"].shape == (1, 3, 60, 50)


def test_rd_loss_rejects_non_batched_images():
    torch.manual_seed(0)
    net = attach_auxt(cm.FactorizedPrior(16, 24))
    x = torch.rand(1, 3, 32, 32, generator=torch.Generator().manual_seed(2))
    out = net(x)
    with pytest.raises(ValueError, match=r"x must be \(B, C, H, W\), got shape \(3, 32, 32\)"):
        rd_loss_with_ortho(out, x[0], 0.013, net)


def test_non_tensor_images_raise_type_error_naming_x(small_coded):
    net, _, _ = small_coded
    x = np.zeros((1, 3, 64, 64), dtype=np.float32)
    with pytest.raises(TypeError, match=r"x must be a torch\.Tensor of images, got ndarray"):
        net(x)
    with pytest.raises(TypeError, match=r"x must be a torch\.Tensor of images, got ndarray"):
        net.compress(x)
