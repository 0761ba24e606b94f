"""Nested-lattice (Voronoi) codes."""

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
