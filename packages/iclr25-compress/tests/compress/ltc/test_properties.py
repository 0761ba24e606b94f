"""Hypothesis property tests of the quantizers and the Voronoi code."""

import itertools

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from iclr25.compress.ltc import VoronoiCode, lattice

_D4 = lattice("D4")
_E8 = lattice("E8")
# the 24 roots ±e_i ± e_j of D4 are its Voronoi-relevant vectors: beating them all means nearest
_ROOTS = (
    torch.tensor(
        [
            [s * (k == i) + t * (k == j) for k in range(4)]
            for i, j in itertools.combinations(range(4), 2)
            for s, t in itertools.product((-1.0, 1.0), repeat=2)
        ],
        dtype=torch.float64,
    )
    * _D4.scale
)

vec4 = st.lists(st.floats(-50, 50, allow_nan=False, width=64), min_size=4, max_size=4)
vec8 = st.lists(st.floats(-8, 8, allow_nan=False, width=64), min_size=8, max_size=8)


@settings(max_examples=200, deadline=None)
@given(vec4)
def test_d4_output_is_the_nearest_point(v):
    y = torch.tensor([v], dtype=torch.float64)
    q = _D4.quantize(y)
    z = _D4.coords_float(q)
    assert (z - z.round()).abs().max() < 1e-6
    d = (y - q).square().sum()
    assert bool(((y - q - _ROOTS).square().sum(-1) >= d - 1e-9).all())


@settings(max_examples=100, deadline=None)
@given(vec8, st.integers(2, 8))
def test_voronoi_code_is_consistent(v, q):
    code = VoronoiCode(_E8, q=q)
    y = torch.tensor([v], dtype=torch.float64)
    m = code.encode(y)
    assert int(m.min()) >= 0 and int(m.max()) < q
    dec = code.decode(m, dtype=torch.float64)
    # the reconstruction is in the same coset of qE8 as Q(y), and a lattice point
    diff = (_E8.quantize(y) - dec) / q
    assert torch.allclose(_E8.quantize(diff), diff, atol=1e-9)
    assert torch.allclose(_E8.quantize(dec), dec, atol=1e-9)
