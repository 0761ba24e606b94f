"""Topography metrics and downsample_weights against brute force and closed forms."""

import itertools

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from iclr25.neuro.topoloss import (
    cortical_sheet,
    downsample_weights,
    effective_dimensionality,
    lowres_shape,
    sheet_smoothness,
    similarity_vs_distance,
    topo_loss,
)


def _brute_smoothness(sheet: torch.Tensor) -> float:
    h, w, _ = sheet.shape
    cos = lambda a, b: F.cosine_similarity(a, b, dim=0).item()  # noqa: E731
    nb = [
        cos(sheet[r, c], sheet[r2, c2])
        for r, c in itertools.product(range(h), range(w))
        for r2, c2 in ((r + 1, c), (r, c + 1))
        if r2 < h and c2 < w
    ]
    units = sheet.reshape(h * w, -1)
    allp = [cos(units[i], units[j]) for i in range(h * w) for j in range(h * w) if i != j]
    return sum(nb) / len(nb) - sum(allp) / len(allp)


def test_smoothness_matches_brute_force():
    torch.manual_seed(0)
    sheet = torch.randn(4, 5, 3, dtype=torch.float64)
    assert sheet_smoothness(sheet).item() == pytest.approx(_brute_smoothness(sheet), abs=1e-10)


def test_smoothness_of_random_and_ramp_sheets():
    torch.manual_seed(0)
    assert abs(sheet_smoothness(torch.randn(256, 64)).item()) < 0.02
    # a slowly rotating unit vector: neighbours nearly parallel, far units orthogonal/opposite
    angle = torch.linspace(0, 3.14159, 16)
    r, c = torch.meshgrid(angle, angle, indexing="ij")
    sheet = torch.stack([torch.cos(r), torch.sin(r), torch.cos(c), torch.sin(c)], -1)
    assert sheet_smoothness(sheet).item() > 0.5
    # a module gives the same value as its weight
    lin = nn.Linear(3, 20)
    assert sheet_smoothness(lin).item() == pytest.approx(sheet_smoothness(cortical_sheet(lin)).item())


def test_similarity_vs_distance_brute_force():
    torch.manual_seed(0)
    sheet = torch.randn(3, 4, 5, dtype=torch.float64)
    edges = torch.tensor([0.5, 1.5, 2.5, 5.0])
    curve = similarity_vs_distance(sheet, bins=edges)
    sums, counts = [0.0] * 3, [0] * 3
    units = sheet.reshape(12, 5)
    for i in range(12):
        for j in range(i + 1, 12):
            d = ((i // 4 - j // 4) ** 2 + (i % 4 - j % 4) ** 2) ** 0.5
            k = 0 if d < 1.5 else 1 if d < 2.5 else 2
            sums[k] += F.cosine_similarity(units[i], units[j], dim=0).item()
            counts[k] += 1
    assert curve.count.tolist() == counts and sum(counts) == 66
    for k in range(3):
        assert curve.similarity[k].item() == pytest.approx(sums[k] / counts[k], abs=1e-10)
    torch.testing.assert_close(curve.distance, torch.tensor([1.0, 2.0, 3.75], dtype=torch.float64))
    default = similarity_vs_distance(sheet, bins=4)
    assert int(default.count.sum()) == 66 and default.distance.shape == (4,)


def test_effective_dimensionality_closed_forms():
    torch.manual_seed(0)
    x = torch.randn(500, 3, dtype=torch.float64) * torch.tensor([3.0, 2.0, 1.0])
    cov = torch.cov(x.t())
    lam = torch.linalg.eigvalsh(cov)
    assert effective_dimensionality(x).item() == pytest.approx((lam.sum() ** 2 / (lam**2).sum()).item(), rel=1e-10)
    # rank one: 1; more units than samples uses the small Gram matrix and agrees with eigvalsh
    line = torch.randn(50, 1, dtype=torch.float64) * torch.randn(1, 8, dtype=torch.float64)
    assert effective_dimensionality(line).item() == pytest.approx(1.0)
    wide = torch.randn(6, 40, dtype=torch.float64)
    lam = torch.linalg.eigvalsh(torch.cov(wide.t()))
    assert effective_dimensionality(wide).item() == pytest.approx((lam.sum() ** 2 / (lam**2).sum()).item(), rel=1e-8)
    with pytest.raises(ValueError, match="responses"):
        effective_dimensionality(torch.randn(5))


def test_downsample_weights_is_the_loss_blur():
    torch.manual_seed(0)
    lin = nn.Linear(8, 256)
    out = downsample_weights(lin, 4)
    assert out.low_res.shape == (4, 4, 8)
    assert out.kept_fraction == pytest.approx(1 / 16)
    assert out.weight.shape == lin.weight.shape
    # the rebuilt sheet is a fixed point of nothing in general, but its cosine to the original equals 1 - loss
    cos = F.cosine_similarity(lin.weight, out.weight, dim=1).mean()
    assert (1 - cos).item() == pytest.approx(topo_loss(cortical_sheet(lin), 4, 4).item(), abs=1e-6)
    # a constant sheet survives exactly
    with torch.no_grad():
        lin.weight.copy_(torch.randn(8).expand(256, 8))
    torch.testing.assert_close(downsample_weights(lin, 4).weight, lin.weight)


@pytest.mark.parametrize("kind", ["conv2d", "conv1d", "input"])
def test_downsample_weights_layouts(kind):
    torch.manual_seed(0)
    if kind == "conv2d":
        layer, target = nn.Conv2d(2, 64, 3), "weight"
    elif kind == "input":
        layer, target = nn.Linear(64, 5), "input"
    else:
        layer = nn.Module()
        layer.__class__ = type("Conv1D", (nn.Module,), {})
        layer.nf = 64
        layer.weight = nn.Parameter(torch.randn(5, 64))
        target = "weight"
    before = layer.weight.detach().clone()
    out = downsample_weights(layer, 2.0, target=target, inplace=True)
    assert out.low_res.shape[:2] == (4, 4)
    torch.testing.assert_close(layer.weight.detach(), out.weight)
    # rebuild through the sheet view: same as blurring the original sheet
    grid = cortical_sheet(before if kind != "conv1d" else before.t(), target=target).permute(2, 0, 1)[None]
    up = F.interpolate(F.interpolate(grid, scale_factor=0.5, mode="bilinear"), size=(8, 8), mode="bilinear")
    torch.testing.assert_close(cortical_sheet(layer, target=target), up[0].permute(1, 2, 0))


def test_lowres_shape_follows_interpolate():
    for h, w, f in [(16, 32, 2.24), (24, 32, 3.0), (7, 9, 2.5), (48, 64, 4.0)]:
        x = torch.zeros(1, 1, h, w)
        got = F.interpolate(x, scale_factor=(1 / f, 1 / f), mode="bilinear").shape[-2:]
        assert lowres_shape(h, w, f, f) == tuple(got)
    lin = nn.Linear(4, 512)  # 16×32 → 7×14: 98/512 ≈ 19 % of the units
    assert downsample_weights(lin, 2.24).kept_fraction == pytest.approx(98 / 512)
