"""Nested-lattice (Voronoi) codes."""

import itertools
import math

import pytest
import torch

from iclr25.compress.ltc import VoronoiCode, lattice


def test_e8_voronoi_code_round_trip():
    code = VoronoiCode(lattice("E8"), q=4)
    y = torch.randn(10_000, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    m = code.encode(y)
    assert m.dtype == torch.int64 and int(m.min()) >= 0 and int(m.max()) < 4
    ok = ~code.overloaded(y)
    assert 0.2 < float(ok.double().mean()) < 1.0  # both cases are exercised
    dec = code.decode(m, dtype=torch.float64)
    assert torch.equal(dec[ok], lattice("E8").quantize(y)[ok])
    # overloaded points still decode to the same coset of the coarse lattice
    diff = (lattice("E8").quantize(y) - dec)[~ok] / 4
    assert torch.allclose(lattice("E8").quantize(diff), diff, atol=1e-9)
    assert code.bits_per_vector == 16.0


@pytest.mark.parametrize(("name", "q"), [("A2", 3), ("D4", 3), ("D4", 4), ("BW16", 2)])
def test_other_lattices_round_trip(name, q):
    lat = lattice(name)
    code = VoronoiCode(lat, q=q)
    y = torch.randn(2000, lat.dim, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    ok = ~code.overloaded(y)
    assert torch.allclose(code.decode(code.encode(y), dtype=torch.float64)[ok], lat.quantize(y)[ok], atol=1e-9)
    assert code.bits_per_vector == pytest.approx(lat.dim * math.log2(q))


@pytest.mark.parametrize("q", [1, 0, 2.5, -4, True])
def test_bad_q(q):
    with pytest.raises(ValueError, match="q must be an integer >= 2"):
        VoronoiCode(lattice("E8"), q=q)


def test_bad_messages():
    code = VoronoiCode(lattice("E8"), q=4)
    with pytest.raises(ValueError, match=r"\[0, 4\)"):
        code.decode(torch.full((1, 8), 4))
    with pytest.raises(TypeError, match="integer"):
        code.decode(torch.zeros(1, 8))


# ------------------------------------------------------------------ boundary points of the coarse cell
def test_a3_boundary_point_round_trips_or_is_overloaded():
    # λ = −b₁ = −(e₁ − e₂) is on the boundary of 2V (λ/2 is equidistant from 0 and −b₁). Either λ is
    # the representative of its coset and decodes to itself, or it is reported overloaded; the
    # float tie-break used to report it in the cell and decode its coset to +b₁.
    lat = lattice("A3")
    code = VoronoiCode(lat, q=2)
    lam = lat.points(torch.tensor([[-1, 0, 0]]), dtype=torch.float64)
    back = code.decode(code.encode(lam), dtype=torch.float64)
    assert bool(code.overloaded(lam)) or torch.equal(back, lat.quantize(lam))
    # exactly one of ±b₁ is the representative of the coset
    both = torch.cat([lam, -lam])
    assert int((~code.overloaded(both)).sum()) == 1


def _short_vectors(lat, k: int = 1) -> torch.Tensor:
    """Integer coefficient vectors: all of {−k..k}ⁿ \\ {0} for small n, else ±eᵢ ± eⱼ."""
    n = lat.dim
    if n <= 4:
        v = torch.tensor(list(itertools.product(range(-k, k + 1), repeat=n)), dtype=torch.int64)
        return v[v.abs().sum(-1) > 0]
    eye = torch.eye(n, dtype=torch.int64)
    pairs = [s * eye[i] + t * eye[j] for i, j in itertools.combinations(range(n), 2) for s in (-1, 1) for t in (-1, 1)]
    return torch.cat([eye, -eye, torch.stack(pairs)])


_BOUNDARY_CASES = [
    (name, q)
    for name in ("Z3", "D3", "D4", "D4*", "A1", "A2", "A3", "A4", "A5", "E8", "D4^2", "A2^2", "A3^2", "D3*^2")
    for q in (2, 3, 4, 5, 6)
]


@pytest.mark.parametrize(("name", "q"), _BOUNDARY_CASES)
def test_every_coset_has_one_representative_that_round_trips_bitwise(name, q):
    lat = lattice(name)
    code = VoronoiCode(lat, q=q)
    n = lat.dim
    if q**n <= 4096:
        m = torch.tensor(list(itertools.product(range(q), repeat=n)), dtype=torch.int64)
    else:
        m = torch.randint(0, q, (1024, n), generator=torch.Generator().manual_seed(3))
    rep = code.decode(m, dtype=torch.float64)
    assert torch.equal(code.encode(rep), m)
    assert not bool(code.overloaded(rep).any())
    assert torch.equal(lat.quantize(rep), rep)  # bitwise a quantizer output
    # the other points of each coset, rep + q·v, on and off the cell boundary, are all overloaded,
    # decode to the representative, and none is shorter than it (it lies in the coarse cell qV)
    v = _short_vectors(lat)
    z = (lat.coords(rep).unsqueeze(1) + q * v).reshape(-1, n)
    other = lat.quantize(lat.points(z, dtype=torch.float64))
    assert bool(code.overloaded(other).all())
    msg = code.encode(other)
    assert torch.equal(msg, m.repeat_interleave(len(v), 0))  # exact: every point carries its coset's message
    back = code.decode(msg, dtype=torch.float64)
    want = rep.repeat_interleave(len(v), 0)
    # The same lattice point, exactly in integer coordinates. The float64 bits may differ in the last
    # place: BLAS need not round a batch of len(v)·len(m) rows as it rounds len(m) (seen with MKL on
    # an AMD host), so the floats are held to the rounding bound of an n-term dot product.
    assert torch.equal(lat.coords(back), lat.coords(want))
    eps = torch.finfo(torch.float64).eps
    torch.testing.assert_close(back, want, rtol=0, atol=4 * (n + 1) * eps * (1 + float(want.abs().max())))
    assert bool((back.square().sum(-1) <= other.square().sum(-1) + 1e-9).all())


@pytest.mark.parametrize("name", ["A2", "A3", "A5", "D4", "E8", "D4^2"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_random_latents_round_trip_bitwise_unless_overloaded(name, dtype):
    lat = lattice(name)
    code = VoronoiCode(lat, q=4)
    y = (1.2 * torch.randn(4000, lat.dim, generator=torch.Generator().manual_seed(11), dtype=torch.float64)).to(dtype)
    ok = ~code.overloaded(y)
    assert bool(ok.any()) and not bool(ok.all())
    dec = code.decode(code.encode(y), dtype=dtype)
    y_hat = lat.quantize(y)
    assert torch.equal(dec[ok], y_hat[ok])
    assert not bool((dec == y_hat).all(-1)[~ok].any())
