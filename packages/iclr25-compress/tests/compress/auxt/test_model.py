"""attach_auxt on CompressAI models: taps, shapes, zeroed shortcuts, real bitstreams, bad input."""

import copy
import warnings

import pytest
import torch
from torch import nn

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import compressai.models as cm

from iclr25.compress.auxt import AuxTModel, attach_auxt, find_taps, rd_loss_with_ortho
from iclr25.compress.metrics import rd_point

# (class, args, g_a taps, g_s taps, H/W multiple): the strided convs (residual blocks for Cheng2020)
# of g_a / g_s; the multiple is 2^4 times the hyper-analysis' extra factor 4 (16 without one).
MODELS = [
    (cm.FactorizedPrior, (16, 24), [0, 2, 4, 6], [0, 2, 4, 6], 16),
    (cm.ScaleHyperprior, (16, 24), [0, 2, 4, 6], [0, 2, 4, 6], 64),
    (cm.MeanScaleHyperprior, (16, 24), [0, 2, 4, 6], [0, 2, 4, 6], 64),
    (cm.JointAutoregressiveHierarchicalPriors, (16, 24), [0, 2, 4, 6], [0, 2, 4, 6], 64),
    (cm.Cheng2020Anchor, (16,), [0, 2, 4, 6], [1, 3, 5, 7], 64),
]


@pytest.mark.parametrize("cls,args,enc_taps,dec_taps,multiple", MODELS, ids=[m[0].__name__ for m in MODELS])
def test_taps_shapes_and_zeroed_shortcuts_reproduce_base(cls, args, enc_taps, dec_taps, multiple):
    torch.manual_seed(0)
    base = cls(*args).eval()
    ref = copy.deepcopy(base)
    net = attach_auxt(base).eval()
    assert net.base.g_a.taps == enc_taps and net.base.g_s.taps == dec_taps
    n, m = args[0], args[-1]  # Cheng2020Anchor has M = N
    assert net.enc_channels == [3, n, n, n, m] and net.dec_channels == [m, n, n, n, 3]
    assert net.multiple == multiple
    x = torch.rand(1, 3, 64, 64, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        for m in net.shortcuts:
            m.olp.weight.zero_()
            m.olp.bias.zero_()
        out, expect = net(x), ref(x)
    assert out["x_hat"].shape == expect["x_hat"].shape == x.shape
    assert torch.equal(out["x_hat"], expect["x_hat"])
    for k in expect["likelihoods"]:
        assert torch.equal(out["likelihoods"][k], expect["likelihoods"][k])


def test_shortcuts_change_output_when_not_zero():
    torch.manual_seed(0)
    base = cm.FactorizedPrior(16, 24).eval()
    ref = copy.deepcopy(base)
    net = attach_auxt(base).eval()
    x = torch.rand(1, 3, 32, 32)
    with torch.no_grad():
        assert not torch.equal(net(x)["x_hat"], ref(x)["x_hat"])


def test_taps_placed_after_downsampling_layers():
    net = attach_auxt(cm.FactorizedPrior(16, 24))
    g_a = net.base.g_a.transform
    assert all(g_a[i].stride == (2, 2) for i in net.base.g_a.taps)  # the strided convs, before GDN


def test_ortho_loss_and_rd_loss():
    torch.manual_seed(0)
    net = attach_auxt(cm.FactorizedPrior(16, 24), w_orth=0.1)
    expect = sum(float(m.ortho_loss().detach()) for m in net.shortcuts)
    assert float(net.ortho_loss().detach()) == pytest.approx(expect, rel=1e-6)
    x = torch.rand(2, 3, 32, 32)
    out = net(x)
    terms = rd_loss_with_ortho(out, x, 0.013, net)
    total = 0.013 * 255**2 * terms["mse"] + terms["bpp"] + 0.1 * terms["ortho"]
    assert float(terms["loss"].detach()) == pytest.approx(float(total.detach()), rel=1e-6)
    terms["loss"].backward()
    assert all(m.olp.weight.grad is not None for m in net.shortcuts)


def test_rd_loss_terms_follow_a_float64_plain_codec():
    """The ortho term of a plain codec was a float32 zero while AuxT models gave float64."""
    torch.manual_seed(0)
    x = torch.rand(1, 3, 32, 32, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    plain = cm.FactorizedPrior(16, 24).double()
    aux = attach_auxt(cm.FactorizedPrior(16, 24)).double()
    for terms in (rd_loss_with_ortho(plain(x), x, 0.013), rd_loss_with_ortho(aux(x), x, 0.013, aux)):
        assert {k: v.dtype for k, v in terms.items()} == dict.fromkeys(terms, torch.float64)


@pytest.fixture(scope="module")
def coded():
    torch.manual_seed(0)
    net = attach_auxt(cm.FactorizedPrior(64, 96)).eval()
    net.update(force=True)
    x = torch.rand(1, 3, 64, 64, generator=torch.Generator().manual_seed(3))
    return net, x, net.compress(x)


def test_real_bitstream_round_trip(coded):
    net, x, enc = coded
    dec = net.decompress(enc["strings"], enc["shape"])
    with torch.no_grad():
        y = net.base.g_a(x)
        y_hat = net.base.entropy_bottleneck.quantize(y, "dequantize", net.base.entropy_bottleneck._get_medians())
        y_dec = net.base.entropy_bottleneck.decompress(
            [s[20:] for s in enc["strings"][0]], enc["shape"]
        )  # the payload behind the 20-byte header
        assert torch.equal(y_dec, y_hat)
        x_ref = net.base.g_s(y_hat).clamp(0, 1)
    torch.testing.assert_close(dec["x_hat"], x_ref, atol=1e-6, rtol=0)


def test_real_bpp_close_to_likelihood_estimate(coded):
    net, x, _ = coded
    pt = rd_point(net, x)
    h, w = x.shape[-2:]
    slack = 0.03 * pt["bpp_estimate"] + 8 * 64 / (h * w)
    assert abs(pt["bpp"] - pt["bpp_estimate"]) <= slack, pt
    assert pt["psnr"] > 0


def test_truncated_or_corrupted_bitstream_raises(coded):
    net, _, enc = coded
    s = enc["strings"][0][0]
    with pytest.raises(ValueError, match="truncated"):
        net.decompress([[s[:-3]]], enc["shape"])
    with pytest.raises(ValueError, match="truncated"):
        net.decompress([[s[:10]]], enc["shape"])
    bad = bytearray(s)
    bad[-1] ^= 0xFF
    with pytest.raises(ValueError, match="CRC"):
        net.decompress([[bytes(bad)]], enc["shape"])
    with pytest.raises(ValueError, match="magic"):
        net.decompress([[b"XXXX" + s[4:]]], enc["shape"])
    with pytest.raises(ValueError, match="older AuxT bitstream format"):
        net.decompress([[b"AXT1" + s[4:]]], enc["shape"])
    # A flipped bit in the stored height or width (bytes 12-19) would crop the image silently.
    for pos in (15, 19):
        bad = bytearray(s)
        bad[pos] ^= 0x20  # 64 -> 96
        with pytest.raises(ValueError, match="CRC"):
            net.decompress([[bytes(bad)]], enc["shape"])


def test_pad_round_trip(coded):
    net, _, _ = coded
    x = torch.rand(1, 3, 40, 50)
    with pytest.raises(ValueError, match="multiples of 16"):
        net.compress(x)
    enc = net.compress(x, pad=True)
    assert net.decompress(enc["strings"], enc["shape"])["x_hat"].shape == x.shape
    assert net(x, pad=True)["x_hat"].shape == x.shape


def test_hyperprior_bitstream_unchanged_and_round_trip():
    torch.manual_seed(0)
    base = cm.MeanScaleHyperprior(16, 24).eval()
    ref = copy.deepcopy(base)
    net = attach_auxt(base).eval()
    ref.update(force=True)
    net.update(force=True)
    x = torch.rand(1, 3, 64, 64, generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        for m in net.shortcuts:
            m.olp.weight.zero_()
            m.olp.bias.zero_()
    enc, enc_ref = net.compress(x), ref.compress(x)
    # Zeroed shortcuts: both latents' payloads (behind the 20-byte header) are the base model's bytes.
    assert len(enc["strings"]) == 2
    assert [[s[20:] for s in g] for g in enc["strings"]] == enc_ref["strings"]
    dec = net.decompress(enc["strings"], enc["shape"])
    assert torch.equal(dec["x_hat"], ref.decompress(enc_ref["strings"], enc_ref["shape"])["x_hat"])
    # Live shortcuts: the decoder reproduces the eval forward pass (same ŷ, ẑ), clamped.
    with torch.no_grad():
        for k, m in enumerate(net.shortcuts):
            g = torch.Generator().manual_seed(10 + k)
            m.olp.weight.copy_(torch.randn(m.olp.weight.shape, generator=g) * 0.1)
        expect = net(x)["x_hat"].clamp(0, 1)
    enc = net.compress(x)
    torch.testing.assert_close(net.decompress(enc["strings"], enc["shape"])["x_hat"], expect, atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match="multiples of 64"):
        net.compress(torch.rand(1, 3, 32, 32))


@pytest.mark.parametrize("cls", [cm.FactorizedPrior, cm.MeanScaleHyperprior], ids=lambda c: c.__name__)
def test_checkpoint_saved_after_update_loads_into_a_fresh_model(cls, tmp_path):
    # A trained codec is saved after update(); its CDF tables are sized by the learned
    # distributions, so a fresh model (empty tables) must resize them to load it.
    torch.manual_seed(0)
    net = attach_auxt(cls(16, 24)).eval()
    with torch.no_grad():
        for k, m in enumerate(net.shortcuts):
            g = torch.Generator().manual_seed(20 + k)
            m.olp.weight.copy_(torch.randn(m.olp.weight.shape, generator=g) * 0.1)
    net.update(force=True)
    torch.save(net.state_dict(), tmp_path / "auxt.pt")
    torch.manual_seed(1)  # a different initialisation, so only the checkpoint can make them agree
    fresh = attach_auxt(cls(16, 24)).eval()
    assert fresh.base.entropy_bottleneck._quantized_cdf.numel() == 0
    fresh.load_state_dict(torch.load(tmp_path / "auxt.pt", weights_only=True))
    for key, value in net.state_dict().items():
        assert torch.equal(fresh.state_dict()[key], value), key
    x = torch.rand(1, 3, 64, 64, generator=torch.Generator().manual_seed(5))
    enc, enc_fresh = net.compress(x), fresh.compress(x)
    assert enc_fresh["strings"] == enc["strings"]
    dec = fresh.decompress(enc["strings"], enc["shape"])["x_hat"]
    assert torch.equal(dec, net.decompress(enc["strings"], enc["shape"])["x_hat"])


def test_checkpoint_of_another_size_still_fails_to_load():
    net = attach_auxt(cm.FactorizedPrior(16, 24))
    net.update(force=True)
    with pytest.raises(RuntimeError, match="size mismatch"):
        attach_auxt(cm.FactorizedPrior(16, 32)).load_state_dict(net.state_dict())


def test_aux_loss_trains_only_quantiles():
    # The ortho penalty belongs to the main loss; aux_loss is the base model's quantile loss only.
    net = attach_auxt(cm.ScaleHyperprior(16, 24))
    net.aux_loss().backward()
    with_grad = {n for n, p in net.named_parameters() if p.grad is not None and p.grad.abs().sum() > 0}
    assert with_grad and all(n.endswith(".quantiles") for n in with_grad)


def test_rd_point_without_bitstream_uses_likelihoods():
    torch.manual_seed(0)
    net = attach_auxt(cm.FactorizedPrior(16, 24)).eval()
    x = torch.rand(2, 3, 32, 32, generator=torch.Generator().manual_seed(5))
    pt = rd_point(net, x, real_bitstream=False)
    bpp, psnr = [], []
    with torch.no_grad():
        for i in range(2):
            out = net(x[i : i + 1])
            bpp.append(-sum(torch.log2(lk).sum() for lk in out["likelihoods"].values()) / (32 * 32))
            mse = (out["x_hat"].clamp(0, 1) - x[i : i + 1]).pow(2).mean()
            psnr.append(-10 * torch.log10(mse))
    assert pt["bpp"] == pt["bpp_estimate"] == pytest.approx(float(sum(bpp) / 2), rel=1e-5)
    assert pt["psnr"] == pytest.approx(float(sum(psnr) / 2), rel=1e-5)
    assert pt["enc_s"] == pt["dec_s"] == 0.0


def test_rd_point_reduces_bf16_outputs_in_float32():
    """bf16 sums over a whole image kept 3 significant digits: the bpp and PSNR were off by ~0.1%."""
    torch.manual_seed(0)
    net = cm.FactorizedPrior(16, 24).bfloat16().eval()
    x = torch.rand(1, 3, 128, 128, generator=torch.Generator().manual_seed(5)).bfloat16()
    pt = rd_point(net, x, real_bitstream=False)
    with torch.no_grad():
        out = net(x)
    bits = -sum(torch.log2(lk.double()).sum() for lk in out["likelihoods"].values())
    mse = (out["x_hat"].clamp(0, 1).double() - x.double()).pow(2).mean()
    assert pt["bpp_estimate"] == pytest.approx(float(bits) / (128 * 128), rel=1e-5)
    assert pt["psnr"] == pytest.approx(float(-10 * torch.log10(mse)), abs=1e-4)


def test_rd_point_restores_training_mode_and_builds_no_graph():
    torch.manual_seed(0)
    net = attach_auxt(cm.FactorizedPrior(16, 24)).train()
    x = torch.rand(1, 3, 32, 32, generator=torch.Generator().manual_seed(6))
    seen = []
    net.base.register_forward_hook(lambda m, args, out: seen.append((m.training, torch.is_grad_enabled())))
    rd_point(net, x)
    assert seen == [(False, False)]  # measured in eval mode, without autograd
    assert net.training and all(m.training for m in net.modules())  # and handed back in train mode
    net.eval()
    rd_point(net, x, real_bitstream=False)
    assert not net.training


def test_rd_point_pads_plain_compressai_models_and_counts_original_pixels():
    torch.manual_seed(0)
    base = cm.FactorizedPrior(16, 24).eval()
    x = torch.rand(1, 3, 40, 56, generator=torch.Generator().manual_seed(7))
    with pytest.raises(ValueError, match=r"do not fit this model.*pad=True"):
        rd_point(base, x)  # the model would reconstruct 48x64: never compared silently
    pt = rd_point(base, x, pad=True)
    xp = torch.nn.functional.pad(x, (0, 8, 0, 24))  # zeros bottom/right up to 64x64
    with torch.no_grad():
        enc = base.compress(xp)
        x_hat = base.decompress(enc["strings"], enc["shape"])["x_hat"][..., :40, :56]
    nbytes = sum(len(s) for group in enc["strings"] for s in group)
    assert pt["bpp"] == pytest.approx(8 * nbytes / (40 * 56), rel=1e-12)  # original pixels only
    mse = (x_hat - x).pow(2).mean()
    assert pt["psnr"] == pytest.approx(float(-10 * torch.log10(mse)), rel=1e-5)
    net = attach_auxt(cm.FactorizedPrior(16, 24))
    assert rd_point(net, x, pad=True)["bpp"] > 0  # AuxTModel pads by its own multiple (16)


@pytest.mark.parametrize(
    "x,match",
    [
        (torch.rand(1, 3, 32, 32) * 2, r"\[0, 1\]"),
        (torch.randint(0, 255, (1, 3, 32, 32)), "float"),
        (torch.rand(1, 1, 32, 32), "RGB"),
        (torch.full((1, 3, 32, 32), float("nan")), "NaN"),
    ],
)
def test_bad_images_raise_before_encoding(coded, x, match):
    net, _, _ = coded
    with pytest.raises(ValueError, match=match):
        net.compress(x)
    with pytest.raises(ValueError, match=match):
        net(x)


class _TwoDown(nn.Module):
    def __init__(self):
        super().__init__()
        self.g_a = nn.Sequential(nn.Conv2d(3, 4, 3, 2, 1), nn.ReLU(), nn.Conv2d(4, 4, 3, 2, 1))
        self.g_s = nn.Sequential(nn.ConvTranspose2d(4, 4, 2, 2), nn.ReLU(), nn.ConvTranspose2d(4, 3, 2, 2))


def test_model_without_four_downsamplings_raises_listing_found():
    with pytest.raises(ValueError, match=r"found 2 \(layer 0: 3->4 ch, layer 2: 4->4 ch\)"):
        attach_auxt(_TwoDown())


def test_explicit_taps_work_on_other_depths():
    net = AuxTModel(_TwoDown(), enc_taps=[0, 2], dec_taps=[0, 2])
    assert net.enc_channels == [3, 4, 4] and net.dec_channels == [4, 4, 3]
    assert net.multiple == 4
    y = net.base.g_a(torch.rand(1, 3, 16, 16))
    assert y.shape == (1, 4, 4, 4)
    assert net.base.g_s(y).shape == (1, 3, 16, 16)


def test_taps_after_gdn_with_explicit_channels_follow_the_shortcut_chain():
    # Taps on the GDNs (1, 3, 5) and the last conv (6): no dry-run channels, so they are given.
    torch.manual_seed(0)
    net = attach_auxt(cm.FactorizedPrior(16, 24), enc_taps=[1, 3, 5, 6], channels=[3, 16, 16, 16, 24]).eval()
    assert net.enc_channels == [3, 16, 16, 16, 24] and net.dec_channels == [24, 16, 16, 16, 3]
    w = list(net.base.g_a.shortcuts)
    assert [(m.in_channels, m.out_channels) for m in w] == [(3, 16), (16, 16), (16, 16), (16, 24)]
    g = list(net.base.g_a.transform)
    x = torch.rand(1, 3, 32, 32, generator=torch.Generator().manual_seed(8))
    with torch.no_grad():
        # The chain written out: a_k = WLS_k(a_{k-1}), added after layers 1, 3, 5 and 6.
        a1 = w[0](x)
        a2 = w[1](a1)
        a3 = w[2](a2)
        a4 = w[3](a3)
        h = g[1](g[0](x)) + a1
        h = g[3](g[2](h)) + a2
        h = g[5](g[4](h)) + a3
        expect = g[6](h) + a4
        torch.testing.assert_close(net.base.g_a(x), expect, atol=1e-6, rtol=0)


def test_update_with_a_scale_table_builds_one_cdf_per_scale():
    net = attach_auxt(cm.MeanScaleHyperprior(16, 24)).eval()
    table = torch.tensor([0.2, 0.5, 1.0, 3.0])
    assert net.update(scale_table=table, force=True)
    gc = net.base.gaussian_conditional
    assert torch.equal(gc.scale_table, table)
    assert gc._quantized_cdf.shape[0] == gc._offset.numel() == 4


def test_attach_keeps_each_submodules_own_mode():
    """The dry run restored only the top-level flag: base.train(True) switched a hyper-analysis the
    user had frozen in eval mode back to train mode (and an eval base's g_s left in train to eval)."""
    base = cm.MeanScaleHyperprior(16, 24).train()
    base.h_a.eval()
    attach_auxt(base)
    assert all(not m.training for m in base.h_a.modules())
    assert base.training and base.g_a.training and base.entropy_bottleneck.training
    base = cm.FactorizedPrior(16, 24).eval()
    base.g_s.train()
    net = attach_auxt(base)
    assert net.base.g_s.transform.training and not net.base.g_a.transform.training
    assert not net.base.entropy_bottleneck.training


def test_find_taps_is_a_dry_run_for_batchnorm_in_train_mode():
    """A train-mode probe updated the running statistics of the user's BatchNorm layers."""
    seq = nn.Sequential(nn.Conv2d(3, 4, 3, 2, 1), nn.BatchNorm2d(4), nn.Conv2d(4, 4, 3, 2, 1), nn.Dropout()).train()
    seq[3].eval()
    before = copy.deepcopy(seq.state_dict())
    x = torch.rand(1, 3, 16, 16, generator=torch.Generator().manual_seed(9))
    assert find_taps(seq, x) == [(0, 3, 4), (2, 4, 4)]
    for key, value in seq.state_dict().items():
        assert torch.equal(value, before[key]), key
    assert [m.training for m in seq.modules()] == [True, True, True, True, False]


@pytest.mark.parametrize("cls", [cm.FactorizedPrior, cm.MeanScaleHyperprior], ids=lambda c: c.__name__)
def test_update_passes_update_quantiles_to_the_base(cls):
    """CompressAI's update(force=True, update_quantiles=True) raised TypeError on the wrapper."""
    torch.manual_seed(0)
    base = cls(16, 24)
    ref = copy.deepcopy(base)
    net = attach_auxt(base)
    assert net.update(force=True, update_quantiles=True) == ref.update(force=True, update_quantiles=True)
    eb, eb_ref = net.base.entropy_bottleneck, ref.entropy_bottleneck
    assert not torch.equal(eb.quantiles, cls(16, 24).entropy_bottleneck.quantiles)  # re-estimated
    assert torch.equal(eb.quantiles, eb_ref.quantiles)
    assert torch.equal(eb._quantized_cdf, eb_ref._quantized_cdf)


def test_rd_point_gives_each_submodule_its_own_mode_back():
    # a codec trained with a frozen hyper-analysis: model.train(was) after measuring used to unfreeze it
    torch.manual_seed(0)
    net = attach_auxt(cm.MeanScaleHyperprior(16, 24)).train()
    net.base.h_a.eval()
    before = [m.training for m in net.modules()]
    rd_point(net, torch.rand(1, 3, 64, 64))
    assert [m.training for m in net.modules()] == before
