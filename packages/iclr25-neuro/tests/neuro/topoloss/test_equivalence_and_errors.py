"""Equality with an independent computation, the batched path, and bad input (item 6, bad-input list)."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from iclr25.neuro.topoloss import TopoLayer, TopoLoss, topo_loss, topo_loss_batched


def independent_loss(units: torch.Tensor, h: int, w: int, fh: float, fw: float) -> torch.Tensor:
    """Written from the paper's description only: units (n, e) in row-major order on an h×w grid."""
    n, e = units.shape
    img = torch.stack([units[:, k].reshape(h, w) for k in range(e)])[None]  # (1, e, h, w)
    low = F.interpolate(img, scale_factor=(1 / fh, 1 / fw), mode="bilinear", align_corners=False)
    up = F.interpolate(low, size=(h, w), mode="bilinear", align_corners=False)[0]
    blurred = torch.stack([up[:, i // w, i % w] for i in range(n)])
    return 1 - F.cosine_similarity(units, blurred, dim=1).mean()


class Conv1D(nn.Module):
    def __init__(self, nf: int, nx: int) -> None:
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.randn(nx, nf))
        self.bias = nn.Parameter(torch.zeros(nf))


def _hf_conv1d():
    try:
        from transformers.pytorch_utils import Conv1D as HFConv1D
    except Exception:  # transformers is optional
        return None
    return HFConv1D


@pytest.mark.parametrize("factor", [(2.0, 2.0), (3.0, 2.5), (1.7, 4.0)])
def test_equals_independent_linear_conv2d_conv1d(factor):
    torch.manual_seed(0)
    fh, fw = factor
    model = nn.ModuleDict({"lin": nn.Linear(7, 48), "conv": nn.Conv2d(2, 48, 3), "c1d": Conv1D(48, 5)})
    hf = _hf_conv1d()
    if hf is not None:
        model["hf"] = hf(48, 5)
    topo = TopoLoss([TopoLayer(n, fh, fw) for n in model], batched=False)
    got = topo.per_layer(model)
    exp = {
        "lin": independent_loss(model["lin"].weight, 6, 8, fh, fw),
        "conv": independent_loss(model["conv"].weight.reshape(48, -1), 6, 8, fh, fw),
        "c1d": independent_loss(model["c1d"].weight.t(), 6, 8, fh, fw),
    }
    if hf is not None:
        exp["hf"] = independent_loss(model["hf"].weight.t(), 6, 8, fh, fw)
    for key, value in exp.items():
        assert got[key].item() == pytest.approx(value.item(), abs=1e-6), key


def test_hf_gpt2_conv1d_detected_as_in_out():
    hf = _hf_conv1d()
    if hf is None:
        pytest.skip("transformers is not installed")
    layer = hf(12, 5)
    from iclr25.neuro.topoloss.sheet import resolve_layout

    assert resolve_layout(layer) == "in_out"
    assert TopoLoss([TopoLayer("0", 2, 2)])(nn.Sequential(layer)).ndim == 0


def test_batched_equals_per_layer():
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(16, 96) for _ in range(4)], nn.Conv2d(3, 96, 2), nn.Linear(16, 40))
    layers = [TopoLayer(str(i), 4, 4, tau=float(i + 1)) for i in range(5)] + [TopoLayer("5", 2, 2)]
    batched = TopoLoss(layers, batched=True)
    single = TopoLoss(layers, batched=False)
    pb, ps = batched.per_layer(model), single.per_layer(model)
    assert list(pb) == list(ps)
    for key in pb:
        assert pb[key].item() == pytest.approx(ps[key].item(), abs=1e-6)
    # gradients agree too
    batched(model).backward()
    g1 = [p.grad.clone() for p in model.parameters() if p.grad is not None]
    model.zero_grad()
    single(model).backward()
    g2 = [p.grad.clone() for p in model.parameters() if p.grad is not None]
    for a, b in zip(g1, g2, strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)
    stacked = torch.stack([m.weight.reshape(8, 12, 16) for m in list(model)[:4]])
    for i, value in enumerate(topo_loss_batched(stacked, 4, 4)):
        assert value.item() == pytest.approx(topo_loss(stacked[i], 4, 4).item(), abs=1e-6)


# ---------------------------------------------------------------- bad input
def test_factor_too_large_or_nonpositive():
    model = nn.Sequential(nn.Linear(4, 16))
    with pytest.raises(ValueError, match=r"layer '0'.*4x4"):
        TopoLoss([TopoLayer("0", 5, 2)])(model)
    with pytest.raises(ValueError, match=r"layer '0'.*factor_h must be a finite number > 0"):
        TopoLayer("0", 0.0, 2)
    with pytest.raises(ValueError, match="factor_w"):
        TopoLayer("0", 2, -1)
    with pytest.raises(ValueError, match="must not exceed the cortical sheet 2x3"):
        topo_loss(torch.randn(2, 3, 4), 2, 4)


def test_unknown_layer_lists_close_matches():
    model = nn.Sequential()
    model.add_module("encoder", nn.Linear(4, 16))
    with pytest.raises(KeyError, match=r"encodr.*close matches.*encoder"):
        TopoLoss([TopoLayer("encodr", 2, 2)])(model)


def test_strict_types():
    model = nn.Sequential(nn.Conv1d(3, 16, 2))
    with pytest.raises(TypeError, match="strict_types"):
        TopoLoss([TopoLayer("0", 2, 2)])(model)
    # non-strict: (16, 3, 2) weight → 16 units of length 6
    assert TopoLoss([TopoLayer("0", 2, 2)], strict_types=False)(model).ndim == 0


def test_bias_target_without_bias():
    model = nn.Sequential(nn.Linear(4, 16, bias=False))
    with pytest.raises(ValueError, match=r"layer '0'.*no bias"):
        TopoLoss([TopoLayer("0", 2, 2, target="bias")])(model)


def test_non_finite_weights():
    model = nn.Sequential(nn.Linear(4, 16), nn.Linear(16, 16))
    with torch.no_grad():
        model[1].weight[3, 2] = float("nan")
    layers = [TopoLayer("0", 2, 2), TopoLayer("1", 2, 2)]
    assert torch.isnan(TopoLoss(layers)(model))
    with pytest.raises(FloatingPointError, match=r"\['1'\]"):
        TopoLoss(layers, check_finite=True)(model)


def test_prime_sheet_rejects_vertical_factor():
    model = nn.Sequential(nn.Linear(4, 13))
    with pytest.raises(ValueError, match=r"1x13.*factor_h must be <= 1"):
        TopoLoss([TopoLayer("0", 2, 2)])(model)
    assert TopoLoss([TopoLayer("0", 1, 2)])(model).ndim == 0


def test_other_bad_arguments():
    with pytest.raises(ValueError, match="target"):
        TopoLayer("0", target="output")
    with pytest.raises(ValueError, match="tau"):
        TopoLayer("0", tau=-1.0)
    with pytest.raises(ValueError, match="reduce"):
        TopoLoss([], reduce="max")
    with pytest.raises(ValueError, match="duplicates"):
        TopoLoss([TopoLayer("0"), TopoLayer("0")])
    with pytest.raises(TypeError, match="TopoLayer"):
        TopoLoss(["0"])
    with pytest.raises(ValueError, match="mode"):
        topo_loss(torch.randn(4, 4, 2), 2, 2, mode="linear")
    with pytest.raises(ValueError, match=r"\(h, w, e\)"):
        topo_loss(torch.randn(4), 2, 2)
