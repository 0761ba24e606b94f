"""Lattice decoders against brute force, NSM against the known table, Voronoi sampling."""

import itertools
import math

import numpy as np
import pytest
import torch

from iclr25.compress.ltc import lattice, nsm
from iclr25.compress.ltc.lattices import LATTICE_NAMES, golay_codewords, reed_muller_1_4


def _offsets(n: int, k: int) -> torch.Tensor:
    return torch.tensor(list(itertools.product(range(-k, k + 1), repeat=n)), dtype=torch.float64)


def _brute_force_violations(lat, y: torch.Tensor, k: int) -> int:
    """Candidates: coefficient box of radius k around the Babai point and around Q(y) (reduced basis)."""
    q = lat.quantize(y)
    o = _offsets(lat.dim, k) @ lat.G  # (C, n) offsets as vectors
    o2 = o.square().sum(-1)
    dq = (y - q).square().sum(-1)
    bad = 0
    for centre in (torch.round(y @ lat._Ginv), lat.coords_float(q).round()):
        r = y - centre @ lat.G  # |r - o|^2 = |r|^2 - 2 r.o + |o|^2: one matmul for all candidates
        dc = (r.square().sum(-1, keepdim=True) - 2 * r @ o.T + o2).min(-1).values
        bad += int((dq > dc + 1e-9).sum())
    return bad


@pytest.mark.parametrize(("name", "k"), [("Z2", 2), ("A2", 2), ("D4", 2), ("D4*", 2), ("E8", 1)])
def test_nearest_point_equals_brute_force(name, k):
    lat = lattice(name)
    g = torch.Generator().manual_seed(1)
    y = torch.randn(6000, lat.dim, generator=g, dtype=torch.float64) * 1.5
    assert _brute_force_violations(lat, y, k) == 0
    z = lat.coords_float(lat.quantize(y))
    assert (z - z.round()).abs().max() < 1e-5


def test_bw16_nearest_point_equals_coset_brute_force():
    """Λ16: an independent search over every RM(1,4) coset of 2D16, with a 1-ring around each rounding."""
    lat = lattice("BW16")
    a = lat.scale
    g = torch.Generator().manual_seed(2)
    y = torch.randn(200, 16, generator=g, dtype=torch.float64)
    q = lat.quantize(y)
    # 1-ring in D16 coefficient space: no change, ±1 in one coordinate, ±1 in two
    ring = [np.zeros(16)]
    for i in range(16):
        for s in (-1, 1):
            e = np.zeros(16)
            e[i] = s
            ring.append(e)
    for i, j in itertools.combinations(range(16), 2):
        for s, t in itertools.product((-1, 1), repeat=2):
            e = np.zeros(16)
            e[i], e[j] = s, t
            ring.append(e)
    ring = torch.tensor(np.array(ring))
    codes = torch.tensor(reed_muller_1_4(), dtype=torch.float64)
    y0 = y / a
    best = torch.full((200,), float("inf"), dtype=torch.float64)
    for c in codes:
        w = (y0 - c) / 2
        cand = torch.round(w).unsqueeze(1) + ring.unsqueeze(0)  # (B, R, 16)
        even = torch.remainder(cand.sum(-1), 2) == 0
        pts = 2 * cand + c
        d = (y0.unsqueeze(1) - pts).square().sum(-1)
        d = torch.where(even, d, torch.full_like(d, float("inf")))
        best = torch.minimum(best, d.min(-1).values)
    dq = ((y - q) / a).square().sum(-1)
    assert int((dq > best + 1e-9).sum()) == 0
    z = lat.coords_float(q)
    assert (z - z.round()).abs().max() < 1e-5


@pytest.mark.parametrize("name", ["Z8", "A2", "A3", "D4", "D5*", "E8", "BW16", "E8^2", "A2^4"])
def test_unit_volume_and_lattice_points(name):
    lat = lattice(name)
    assert abs(abs(float(torch.linalg.det(lat.G))) - 1.0) < 1e-9
    # the basis vectors are lattice points: the decoder returns them unchanged
    assert torch.allclose(lat.quantize(lat.G.clone()), lat.G, atol=1e-9)


@pytest.mark.parametrize(
    ("name", "table", "tol"),
    [("Z", 0.083333, 0.01), ("A2", 0.080188, 0.01), ("D4", 0.076603, 0.01), ("E8", 0.071682, 0.01),
     pytest.param("BW16", 0.068299, 0.015, marks=pytest.mark.slow)],
)  # fmt: skip
def test_monte_carlo_nsm_matches_table(name, table, tol):
    lat = lattice(name, dim=1 if name == "Z" else None)
    est, se = nsm(lat, 200_000, generator=torch.Generator().manual_seed(3))
    assert abs(est - table) / table < tol, (est, se)
    assert se < tol * table / 4  # the tolerance is at least 4 standard errors wide


def test_bw16_nsm_fast():
    """The default-run version of the Λ16 check: 4·10⁴ samples (the 2·10⁵ one is slow-marked)."""
    est, se = nsm(lattice("BW16"), 40_000, generator=torch.Generator().manual_seed(3))
    assert abs(est - 0.068299) / 0.068299 < 0.015
    assert se < 0.015 * 0.068299 / 4


@pytest.mark.slow
def test_leech_nsm():
    lat = lattice("Leech", slow_ok=True)
    assert abs(abs(float(torch.linalg.det(lat.G))) - 1.0) < 1e-9
    # ‖u‖²/n has a relative standard deviation of about 0.09 per sample in Λ24 (0.094 measured on
    # 200 samples; 0.077 for a 24-ball), so 640 samples give a relative standard error near 0.004
    # and the 2 % band is about 5 standard errors wide; the second assertion checks that width on
    # the run itself instead of trusting the estimate. (2·10⁴ samples took over 25 min on 2 cores.)
    est, se = nsm(lat, 640, generator=torch.Generator().manual_seed(4), chunk=320)
    assert abs(est - 0.065771) / 0.065771 < 0.02, (est, se)
    assert se < 0.02 * 0.065771 / 4


@pytest.mark.parametrize("method", ["uniform", "sobol", "antithetic"])
@pytest.mark.parametrize("name", ["A2", "D4", "E8"])
def test_voronoi_samples_lie_in_the_cell(name, method):
    lat = lattice(name)
    u = lat.sample_voronoi(20_000, generator=torch.Generator().manual_seed(5), method=method, dtype=torch.float64)
    assert torch.equal(lat.quantize(u), torch.zeros_like(u))
    # mean ~ 0 and E||u||^2 / n = NSM (table), within 5 standard errors of the second moment
    m2 = u.square().sum(-1) / lat.dim
    table = {"A2": 0.080188, "D4": 0.076603, "E8": 0.071682}[name]
    assert abs(float(m2.mean()) - table) < 5 * float(m2.std()) / math.sqrt(m2.numel())
    assert float(u.mean(0).abs().max()) < 5 * float(u.std()) / math.sqrt(u.shape[0])


@pytest.mark.parametrize("name", ["A2", "D4", "D4*", "E8", "A3", "BW16"])
def test_translation_equivariance(name):
    lat = lattice(name)
    g = torch.Generator().manual_seed(6)
    y = torch.randn(500, lat.dim, generator=g, dtype=torch.float64)
    z = torch.randint(-3, 4, (500, lat.dim), generator=g)
    lam = lat.points(z, dtype=torch.float64)
    assert torch.allclose(lat.quantize(y + lam), lat.quantize(y) + lam, atol=1e-9)


def test_ties_are_deterministic_and_equivariant():
    lat = lattice("E8")
    # exactly representable ties: midpoints between E8 points
    y = torch.tensor([[0.5, 0, 0, 0, 0, 0, 0, 0.5], [0.25] * 8, [0.5] + [0.0] * 7], dtype=torch.float32)
    first = lat.quantize(y)
    assert torch.equal(first, lat.quantize(y.clone()))
    shift = lat.points(torch.tensor([[1, -2, 0, 3, 0, 0, 1, 0]]), dtype=torch.float32)
    assert torch.equal(lat.quantize(y + shift), first + shift)


def test_codes():
    rm = reed_muller_1_4()
    assert sorted(set(rm.sum(1).tolist())) == [0, 8, 16] and len({tuple(r) for r in rm}) == 32
    w = golay_codewords().sum(1)
    counts = dict(zip(*np.unique(w, return_counts=True), strict=True))
    assert counts == {0: 1, 8: 759, 12: 2576, 16: 759, 24: 1}


def test_bad_input():
    lat = lattice("E8")
    with pytest.raises(ValueError, match=r"last dimension 8.*E8"):
        lat.quantize(torch.zeros(3, 4))
    with pytest.raises(TypeError, match="floating"):
        lat.quantize(torch.zeros(3, 8, dtype=torch.int64))
    with pytest.raises(ValueError, match="NaN"):
        lat.quantize(torch.full((2, 8), float("nan")))
    with pytest.raises(ValueError, match="NaN or Inf"):
        lat.quantize(torch.full((2, 8), float("inf")))
    assert lat.quantize(torch.zeros(0, 8)).shape == (0, 8)
    with pytest.raises(KeyError, match="known"):
        lattice("K12")
    with pytest.raises(ValueError, match="slow_ok"):
        lattice("Leech")
    assert LATTICE_NAMES


def test_half_precision_is_upcast_and_cast_back():
    lat = lattice("D4")
    y = torch.randn(64, 4, generator=torch.Generator().manual_seed(7))
    out = lat.quantize(y.half())
    assert out.dtype == torch.float16
    assert torch.equal(out, lat.quantize(y.half().float()).half())


@pytest.mark.parametrize(
    "name", ["Z3", "D4", "D5*", "A1", "A2", "A3", "A6", "E8", "BW16", "Leech", "A2^3", "D4^2", "E8^2"]
)
def test_integer_model_is_the_lattice_and_decodes_to_a_nearest_point(name):
    lat = lattice(name, slow_ok=True)
    model = lat.integer_model
    b = torch.as_tensor(np.kron(np.eye(model.blocks), model.basis))
    gram, gram_g = b @ b.T, lat.G @ lat.G.T
    c2 = float(gram.trace() / gram_g.trace())
    assert torch.allclose(gram.double(), c2 * gram_g, atol=1e-9)  # same coefficients, same geometry
    count = 16 if name == "Leech" else 400
    den = 1009  # targets u/den·G: generic points, with ties between equidistant points possible
    u = torch.randint(-5 * den, 5 * den, (count, lat.dim), generator=torch.Generator().manual_seed(9))
    w = model.coords(model.nearest(model.points(u), den))
    t = (u.double() / den) @ lat.G
    d_model = (t - lat.points(w, dtype=torch.float64)).square().sum(-1)
    d_float = (t - lat.quantize(t)).square().sum(-1)
    assert torch.allclose(d_model, d_float, atol=1e-9)
    # translation-equivariant exactly: shifting the target by a lattice point shifts the result
    s = torch.randint(-3, 4, (count, lat.dim), generator=torch.Generator().manual_seed(10))
    assert torch.equal(model.coords(model.nearest(model.points(u + den * s), den)), w + s)


def test_integer_coset_decoder_falls_back_to_lexicographic_ties(monkeypatch):
    # A zero functional ties every equidistant candidate, so only the lexicographic rule decides:
    # the result must still be a nearest point and exactly translation-equivariant.
    from iclr25.compress.ltc import lattices

    def zero(n, device, dtype):
        return torch.zeros(n, device=device, dtype=dtype)

    monkeypatch.setattr(lattices, "_generic_direction", zero)
    lat = lattice("E8")
    model = lat.integer_model
    den = 2  # half-lattice targets: many ties between the D8 and D8 + ½ cosets
    u = torch.randint(-6, 7, (2000, 8), generator=torch.Generator().manual_seed(12))
    w = model.coords(model.nearest(model.points(u), den))
    t = (u.double() / den) @ lat.G
    d_model = (t - lat.points(w, dtype=torch.float64)).square().sum(-1)
    assert torch.allclose(d_model, (t - lat.quantize(t)).square().sum(-1), atol=1e-9)
    s = torch.randint(-3, 4, (2000, 8), generator=torch.Generator().manual_seed(13))
    assert torch.equal(model.coords(model.nearest(model.points(u + den * s), den)), w + s)
