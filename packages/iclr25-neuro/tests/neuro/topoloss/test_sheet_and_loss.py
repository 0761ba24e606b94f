"""Sheet shapes and layouts, loss values, gradients, scope, reduction and JSON (acceptance items 1-5)."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from iclr25.neuro.topoloss import (
    TopoLayer,
    TopoLoss,
    cortical_sheet,
    cortical_sheet_shape,
    sheet_smoothness,
    topo_loss,
)


# ---------------------------------------------------------------- item 1: sheet shapes
@pytest.mark.parametrize(
    ("n", "hw"), [(256, (16, 16)), (768, (24, 32)), (3072, (48, 64)), (1000, (25, 40)), (97, (1, 97))]
)
def test_sheet_shape_examples(n, hw):
    assert cortical_sheet_shape(n) == hw


def test_sheet_shape_brute_force_up_to_5000():
    for n in range(1, 5001):
        h, w = cortical_sheet_shape(n)
        assert h * w == n and h * h <= n
        # brute force: no divisor of n lies strictly between h and sqrt(n)
        assert all(n % d for d in range(h + 1, math.isqrt(n) + 1))


def test_sheet_shape_rejects_bad_n():
    with pytest.raises(ValueError, match="n must be >= 1"):
        cortical_sheet_shape(0)
    with pytest.raises(TypeError, match="n must be an int"):
        cortical_sheet_shape(4.0)


# ---------------------------------------------------------------- item 2: layout
def _stamp(weight: torch.Tensor) -> None:
    """Write each output unit's index into all of its weights."""
    with torch.no_grad():
        idx = torch.arange(weight.shape[0], dtype=weight.dtype).view(-1, *([1] * (weight.ndim - 1)))
        weight.copy_(idx.expand_as(weight))


def test_layout_linear_is_row_major():
    lin = nn.Linear(5, 24)
    _stamp(lin.weight)
    sheet = cortical_sheet(lin)
    h, w = cortical_sheet_shape(24)
    assert sheet.shape == (h, w, 5)
    for r in range(h):
        for c in range(w):
            assert torch.all(sheet[r, c] == r * w + c)


def test_layout_conv2d_flattens_kernels():
    conv = nn.Conv2d(3, 12, (2, 3))
    _stamp(conv.weight)
    sheet = cortical_sheet(conv)
    assert sheet.shape == (3, 4, 3 * 2 * 3)
    for r in range(3):
        for c in range(4):
            assert torch.all(sheet[r, c] == r * 4 + c)
    # the vector is the kernel flattened in (cin, kh, kw) order
    torch.manual_seed(0)
    conv2 = nn.Conv2d(3, 12, (2, 3))
    assert torch.equal(cortical_sheet(conv2)[1, 2], conv2.weight[1 * 4 + 2].flatten())


class Conv1D(nn.Module):
    """Stand-in with Hugging Face GPT-2 ``Conv1D``'s layout: weight (in, out), y = x @ W + b."""

    def __init__(self, nf: int, nx: int) -> None:
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.randn(nx, nf) * 0.02)
        self.bias = nn.Parameter(torch.zeros(nf))

    def forward(self, x):
        return x @ self.weight + self.bias


def test_layout_conv1d_units_are_columns():
    layer = Conv1D(nf=12, nx=5)
    with torch.no_grad():
        layer.weight.copy_(torch.arange(12.0).expand(5, 12))
    sheet = cortical_sheet(layer)
    assert sheet.shape == (3, 4, 5)
    for r in range(3):
        for c in range(4):
            assert torch.all(sheet[r, c] == r * 4 + c)
    # the explicit layout agrees with auto, and forcing "out_in" treats rows as units instead
    assert torch.equal(cortical_sheet(layer, weight_layout="in_out"), sheet)
    assert cortical_sheet(layer, weight_layout="out_in").shape == (1, 5, 12)


def test_input_and_bias_targets():
    lin = nn.Linear(6, 4)
    inp = cortical_sheet(lin, target="input")
    assert inp.shape == (2, 3, 4)
    assert torch.equal(inp[1, 2], lin.weight[:, 1 * 3 + 2])
    assert torch.equal(cortical_sheet(lin, target="bias"), lin.bias.view(2, 2))
    conv = nn.Conv2d(4, 6, 3)
    assert torch.equal(cortical_sheet(conv, target="input")[1, 1], conv.weight[:, 3].flatten())


# ---------------------------------------------------------------- item 3: loss values
def _ramp(perm: bool) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    b, d = torch.randn(32, generator=g), torch.randn(32, generator=g)
    r = torch.arange(16.0).view(16, 1, 1) - 7.5
    c = torch.arange(16.0).view(1, 16, 1) - 7.5
    sheet = r * b + c * d
    if perm:
        sheet = sheet.reshape(256, 32)[torch.randperm(256, generator=g)].reshape(16, 16, 32)
    return sheet


def test_constant_sheet_has_zero_loss():
    sheet = torch.randn(32).expand(16, 16, 32).clone()
    assert topo_loss(sheet, 4, 4).abs().item() <= 1e-6


def test_ramp_is_smooth_and_its_permutation_is_not():
    smooth = topo_loss(_ramp(False), 4, 4).item()
    shuffled = topo_loss(_ramp(True), 4, 4).item()
    assert smooth < 0.01
    assert shuffled > 0.5


def test_loss_range_and_negated_blur():
    torch.manual_seed(0)
    for _ in range(5):
        val = topo_loss(torch.randn(8, 12, 7), 2, 3).item()
        assert 0.0 <= val <= 2.0
    # a checkerboard of ±v blurs to (almost) 0 → cos undefined/0; alternating signs with a tiny offset
    # make every unit point against its blurred copy, so the loss approaches its maximum 2
    v = torch.ones(4)
    sign = ((torch.arange(8).view(8, 1) + torch.arange(8).view(1, 8)) % 2 * 2 - 1).float()
    sheet = sign[..., None] * v + 0.0
    assert topo_loss(sheet, 8, 8).item() == pytest.approx(1.0, abs=1e-6)  # blur is 0: cos = 0


def test_dead_units_count_as_dissimilar():
    sheet = torch.zeros(4, 4, 3)
    assert topo_loss(sheet, 2, 2).item() == pytest.approx(1.0)


# ---------------------------------------------------------------- item 4: gradient
def test_adam_on_topoloss_makes_the_sheet_smooth():
    torch.manual_seed(0)
    weight = torch.randn(256, 64, requires_grad=True)
    before = sheet_smoothness(weight).item()
    opt = torch.optim.Adam([weight], lr=0.05)
    for _ in range(200):
        loss = topo_loss(cortical_sheet(weight), 4, 4)
        opt.zero_grad()
        loss.backward()
        opt.step()
    after = sheet_smoothness(weight).item()
    assert abs(before) < 0.05
    assert after > 0.5


def test_gradient_matches_finite_differences():
    torch.manual_seed(0)
    sheet = torch.randn(4, 6, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda s: topo_loss(s, 2.0, 3.0), (sheet,))
    bias = torch.randn(4, 6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda s: topo_loss(s, 2.0, 2.0), (bias,))


# ---------------------------------------------------------------- item 5: scope, reduce, JSON
def _model() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 24), nn.ReLU(), nn.Linear(24, 12))


def test_only_listed_layers_get_gradient():
    model = _model()
    topo = TopoLoss([TopoLayer("0", 2, 2, tau=1.0), TopoLayer("4", 3, 2, tau=None)])
    topo(model).backward()
    assert model[0].weight.grad is not None and model[0].weight.grad.abs().sum() > 0
    for name in ("2", "4"):
        grad = model.get_submodule(name).weight.grad
        assert grad is None or grad.abs().sum() == 0
    assert model[0].bias.grad is None
    # the tau=None layer is still logged
    assert set(topo.per_layer(model)) == {"0", "4"}
    assert set(topo.per_layer(model, scaled=True)) == {"0"}


def test_reduce_mean_and_sum():
    model = _model()
    layers = [TopoLayer("0", 2, 2, tau=0.5), TopoLayer("2", 2, 2, tau=3.0), TopoLayer("4", 3, 2, tau=None)]
    scaled = TopoLoss(layers).per_layer(model, scaled=True)
    raw = TopoLoss(layers).per_layer(model)
    assert scaled["0"].item() == pytest.approx(0.5 * raw["0"].item())
    mean = TopoLoss(layers, reduce="mean")(model).item()
    assert mean == pytest.approx((scaled["0"].item() + scaled["2"].item()) / 2, rel=1e-6)
    total = TopoLoss(layers, reduce="sum")(model).item()
    assert total == pytest.approx(scaled["0"].item() + scaled["2"].item(), rel=1e-6)
    assert TopoLoss([TopoLayer("0", tau=None, factor_h=2, factor_w=2)])(model).item() == 0.0


def test_json_round_trip_preserves_config_and_loss():
    model = _model()
    topo = TopoLoss(
        [TopoLayer("0", 2, 4, tau=0.5), TopoLayer("2", 3, 2, tau=2.0, target="bias"), TopoLayer("4", 1.5, 2.5)],
        reduce="sum",
        check_finite=True,
    )
    again = TopoLoss.from_json(topo.state_dict_json())
    assert again.layers == topo.layers and again.reduce == "sum" and again.check_finite
    assert again(model).item() == topo(model).item()
    with pytest.raises(ValueError, match="not a TopoLoss config"):
        TopoLoss.from_json('{"layers": []}')


def test_from_pattern_selects_matching_supported_modules():
    model = nn.ModuleDict(
        {
            "h0": nn.ModuleDict({"c_fc": Conv1D(12, 4), "c_proj": nn.Linear(12, 4)}),
            "h1": nn.ModuleDict({"c_fc": Conv1D(12, 4)}),
        }
    )
    topo = TopoLoss.from_pattern(model, r"c_fc$", factor=(1.5, 2.0), tau=5.0)
    assert [layer.name for layer in topo.layers] == ["h0.c_fc", "h1.c_fc"]
    assert all(layer.factor_h == 1.5 and layer.factor_w == 2.0 and layer.tau == 5.0 for layer in topo.layers)
    with pytest.raises(ValueError, match="matched no"):
        TopoLoss.from_pattern(model, r"fc1")


def test_forward_follows_model_device_and_dtype():
    model = _model().double()
    val = TopoLoss([TopoLayer("2", 2, 2)])(model)
    assert val.dtype == torch.float64 and val.ndim == 0
    # the independent formula on a double sheet
    sheet = model[2].weight.reshape(4, 6, 16).permute(2, 0, 1)[None]
    up = F.interpolate(F.interpolate(sheet, scale_factor=(0.5, 0.5), mode="bilinear"), size=(4, 6), mode="bilinear")
    ref = 1 - F.cosine_similarity(sheet.flatten(2), up.flatten(2), dim=1).mean()
    assert val.item() == pytest.approx(ref.item(), abs=1e-12)
