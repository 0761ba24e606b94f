"""The Monte-Carlo cell-probability entropy model against exact integrals, and the densities."""

import math

import pytest
import torch

from iclr25.compress.ltc import (
    FactorizedDensity,
    FlowDensity,
    LatticeEntropyModel,
    LatticeQuantizer,
    MixtureDensity,
    lattice,
)


def _perturb(module: torch.nn.Module, seed: int, scale: float = 0.3) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(scale * torch.randn(p.shape, generator=g))


@pytest.mark.parametrize("kind", ["mixture", "factorized"])
def test_cubic_cells_match_cdf_differences(kind):
    lat = lattice("Z2")
    torch.manual_seed(0)
    dens = MixtureDensity(2) if kind == "mixture" else FactorizedDensity(2, init_scale=3.0)
    _perturb(dens, 1)
    em = LatticeEntropyModel(lat, dens)
    y_hat = torch.tensor([[0.0, 0.0], [1.0, -1.0], [2.0, 0.0], [-1.0, 3.0]])
    with torch.no_grad():
        p_mc = em.log_likelihood(y_hat, n_samples=4096, generator=torch.Generator().manual_seed(2)).exp()
        exact = (dens.cdf(y_hat + 0.5) - dens.cdf(y_hat - 0.5)).prod(-1)
    keep = exact > 1e-3  # relative error is meaningful where the cell carries mass
    assert keep.sum() >= 2
    assert ((p_mc - exact).abs() / exact)[keep].max() < 0.02


def test_a2_cell_probabilities_sum_to_one():
    lat = lattice("A2")
    torch.manual_seed(0)
    dens = MixtureDensity(2)
    _perturb(dens, 3)
    em = LatticeEntropyModel(lat, dens)
    k = torch.arange(-12, 13, dtype=torch.float64)
    z = torch.cartesian_prod(k, k)
    with torch.no_grad():
        p = em.log_likelihood(lat.points(z), n_samples=512, generator=torch.Generator().manual_seed(4)).exp()
    assert abs(float(p.double().sum()) - 1.0) < 1e-3


def _hexagon_integral(lat, dens, point: torch.Tensor, m: int = 600) -> float:
    """Riemann sum of the density over the Voronoi cell of ``point`` on a fine grid (independent of MC)."""
    r = 0.7  # the unit-area hexagon has circumradius ~0.62
    t = (torch.arange(m, dtype=torch.float64) + 0.5) / m * 2 * r - r
    grid = torch.cartesian_prod(t, t) + point.double()
    inside = (lat.quantize(grid) - point.double()).abs().sum(-1) < 1e-5
    with torch.no_grad():
        dens_vals = dens.log_prob(grid.float()).double().exp()
    return float((dens_vals * inside).sum() * (2 * r / m) ** 2)


def test_joint_estimator_is_right_and_per_channel_is_not_on_a2():
    """On a hexagonal cell mean-of-products != product-of-means; only the joint estimate is the integral."""
    lat = lattice("A2")
    dens = MixtureDensity(2, components=1)
    with torch.no_grad():
        dens.log_scale.fill_(math.log(0.25))  # narrow: the density varies strongly across the cell
        dens.loc.zero_()
    em = LatticeEntropyModel(lat, dens)
    point = lat.points(torch.tensor([[0, 1]]))  # a neighbour of the mode: the density is steep across it
    g = torch.Generator().manual_seed(5)
    with torch.no_grad():
        joint = float(em.log_likelihood(point, n_samples=200_000, generator=g).exp())
        per = float(em.log_likelihood(point, n_samples=200_000, generator=g, estimator="per_channel_official").exp())
    exact = _hexagon_integral(lat, dens, point[0])
    assert abs(joint - exact) / exact < 0.02
    assert abs(per - exact) / exact > 0.1  # the per-channel estimate is off by much more than MC noise


def test_per_channel_estimator_needs_factorized_density():
    with pytest.raises(ValueError, match="factorized"):
        LatticeEntropyModel(lattice("A2"), FlowDensity(2), estimator="per_channel_official")


@pytest.mark.parametrize("kind", ["mixture", "factorized"])
def test_factorized_pdf_is_cdf_derivative_and_normalized(kind):
    torch.manual_seed(0)
    dens = MixtureDensity(3) if kind == "mixture" else FactorizedDensity(3)
    _perturb(dens, 6)
    t = torch.linspace(-40, 40, 40001, dtype=torch.float64).unsqueeze(-1).expand(-1, 3).contiguous()
    dens = dens.double()
    with torch.no_grad():
        pdf = dens.log_prob_channels(t).exp()
        mass = torch.trapezoid(pdf, t[:, 0], dim=0)
        h = 1e-4
        x = torch.tensor([[-0.7, 0.1, 1.3]], dtype=torch.float64)
        fd = (dens.cdf(x + h) - dens.cdf(x - h)) / (2 * h)
        an = dens.log_prob_channels(x).exp()
        cdf_mass = (dens.cdf(t[-1:]) - dens.cdf(t[:1]))[0]
        tails = (
            dens.cdf(torch.full((1, 3), 1e6, dtype=torch.float64))
            - dens.cdf(torch.full((1, 3), -1e6, dtype=torch.float64))
        )[0]
    assert torch.allclose(mass, cdf_mass, atol=1e-6)  # the pdf integrates to the CDF's increments
    assert torch.allclose(tails, torch.ones(3, dtype=torch.float64), atol=1e-9)  # and the CDF spans [0, 1]
    assert torch.allclose(fd, an, rtol=1e-6, atol=1e-9)


def test_flow_density_is_normalized():
    torch.manual_seed(0)
    dens = FlowDensity(2, layers=4, hidden=16).double()
    _perturb(dens, 7, scale=0.2)
    t = torch.linspace(-9, 9, 601, dtype=torch.float64)
    grid = torch.cartesian_prod(t, t)
    with torch.no_grad():
        p = dens.log_prob(grid).exp().reshape(601, 601)
    mass = torch.trapezoid(torch.trapezoid(p, t, dim=1), t)
    assert abs(float(mass) - 1.0) < 1e-3


def test_ste_gradient_is_identity():
    q = LatticeQuantizer(lattice("E8"))
    y = torch.randn(16, 8, generator=torch.Generator().manual_seed(8), requires_grad=True)
    out = q(y)
    assert torch.equal(out.detach(), lattice("E8").quantize(y.detach()))
    out.sum().backward()
    assert torch.equal(y.grad, torch.ones_like(y))


def test_dither_noise_is_uniform_on_the_cell():
    lat = lattice("D4")
    q = LatticeQuantizer(lat, mode="dither").train()
    y = torch.randn(20_000, 4, generator=torch.Generator().manual_seed(9), dtype=torch.float64)
    noise = q(y) - y
    assert torch.equal(lat.quantize(noise), torch.zeros_like(noise))
    m2 = noise.square().sum(-1) / 4
    assert abs(float(m2.mean()) - 0.076603) < 5 * float(m2.std()) / math.sqrt(m2.numel())
    q.eval()  # shared dither: deterministic, and the error is still in the cell
    a, b = q(y[:100]), q(y[:100])
    assert torch.equal(a, b)
    assert torch.equal(lat.quantize(a - y[:100]), torch.zeros(100, 4, dtype=torch.float64))


def test_entropy_model_bad_input_and_empty():
    em = LatticeEntropyModel(lattice("E8"), MixtureDensity(8))
    with pytest.raises(ValueError, match="last dimension 8"):
        em.bits(torch.zeros(2, 4))
    with pytest.raises(ValueError, match="density dim"):
        LatticeEntropyModel(lattice("E8"), MixtureDensity(4))
    assert em.bits(torch.zeros(0, 8)).shape == (0,)
