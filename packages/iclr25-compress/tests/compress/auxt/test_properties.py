"""Property tests derived from the mathematics of AuxT and the Bjøntegaard deltas.

Haar symmetries (flips and transposition relabel the subbands), the subband-weighted energy of a
WLS with an isometric projection, the subband that the scale init leaves unscaled, InverseWLS as
the adjoint of WLS, the singular-value form of the orthogonality penalty, BD units invariance and
additivity, and the shape preservation of the PCHIP fit. Tolerances are float64 round-off bounds.
"""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from iclr25.compress.auxt import WLS, InverseWLS, haar_dwt2d, haar_idwt2d, ortho_loss
from iclr25.compress.metrics import bd_psnr, bd_rate, fit_curve

EPS = float(np.finfo(np.float64).eps)
F64 = torch.float64
SEEDS = st.integers(0, 2**31 - 1)

# The four subband filters written from the method note: a 2×2 block (a b; c d) flattened as
# [a, b, c, d] gives LL, LH, HL, HH as these dot products.
_NOTE_FILTERS = torch.tensor([[1, 1, 1, 1], [1, -1, 1, -1], [1, 1, -1, -1], [1, -1, -1, 1]], dtype=F64) / 2


def _randn(seed, *shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64)


def _orthonormal_columns(seed, rows, cols):
    q, _ = torch.linalg.qr(_randn(seed, rows, cols))
    return q


def _subband_energies(x):
    """``(4, C)``: energy of subband k of channel c, from 2×2 blocks cut by ``F.unfold``."""
    b, c = x.shape[:2]
    blocks = F.unfold(x, 2, stride=2).view(b, c, 4, -1)  # [a, b, c, d] of every block
    return torch.einsum("kj,bcjl->bckl", _NOTE_FILTERS, blocks).pow(2).sum(dim=(0, 3)).T


def _set(module, weight, bias, log_scale):
    with torch.no_grad():
        module.olp.weight.copy_(weight)
        module.olp.bias.copy_(bias)
        module.log_scale.copy_(log_scale)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(b=st.integers(1, 2), c=st.integers(1, 3), h=st.integers(1, 4), w=st.integers(1, 4), seed=SEEDS)
def test_haar_flips_and_transposition_relabel_subbands(b, c, h, w, seed):
    """Mirroring a block (a b; c d) left-right gives (b a; d c): LL, HL keep their value and LH, HH
    change sign; up-down negates HL, HH; transposition swaps LH and HL. The inverse obeys the same
    relabelling."""
    x = _randn(seed, b, c, 2 * h, 2 * w)
    ll, lh, hl, hh = haar_dwt2d(x).chunk(4, dim=1)
    # Each subband value is ((±a ± b) ± c ± d)/2 evaluated in another order: |error| ≤ 3·eps·Σ|.|/2
    # on each side, Σ|.| ≤ 4·max|x|.
    tol = 12 * EPS * float(x.abs().max())
    cases = [
        (x.flip(-1), [ll.flip(-1), -lh.flip(-1), hl.flip(-1), -hh.flip(-1)]),
        (x.flip(-2), [ll.flip(-2), lh.flip(-2), -hl.flip(-2), -hh.flip(-2)]),
        (x.transpose(-1, -2), [t.transpose(-1, -2) for t in (ll, hl, lh, hh)]),
    ]
    for image, bands in cases:
        torch.testing.assert_close(haar_dwt2d(image), torch.cat(bands, dim=1), atol=tol, rtol=0)

    z = _randn(seed + 1, b, 4 * c, h, w)
    zl, zh1, zh2, zhh = z.chunk(4, dim=1)
    tol = 12 * EPS * float(z.abs().max())
    inverse_cases = [
        (torch.cat([zl, -zh1, zh2, -zhh], 1).flip(-1), lambda t: t.flip(-1)),
        (torch.cat([zl, zh1, -zh2, -zhh], 1).flip(-2), lambda t: t.flip(-2)),
        (torch.cat([zl, zh2, zh1, zhh], 1).transpose(-1, -2), lambda t: t.transpose(-1, -2)),
    ]
    for relabelled, move in inverse_cases:
        torch.testing.assert_close(haar_idwt2d(relabelled), move(haar_idwt2d(z)), atol=tol, rtol=0)


@settings(max_examples=30, deadline=None, derandomize=True)
@given(cin=st.integers(1, 3), extra=st.integers(0, 3), h=st.integers(1, 3), w=st.integers(1, 3), seed=SEEDS)
def test_wls_energy_is_the_exp_2s_weighted_subband_energy(cin, extra, h, w, seed):
    """With orthonormal OLP columns (C_out ≥ 4·C_in) and no bias the OLP is an isometry and the Haar
    DWT is orthonormal, so ‖WLS(x)‖² = Σ_{k,c} exp(2·s[k·C_in + c])·‖subband k of channel c‖²
    (s subband-major); the map is then bi-Lipschitz with constants exp(min s), exp(max s)."""
    cout = 4 * cin + extra
    s = torch.rand(4 * cin, generator=torch.Generator().manual_seed(seed), dtype=F64) * 2 - 1
    x = _randn(seed + 1, 2, cin, 2 * h, 2 * w)
    expect = float((_subband_energies(x).flatten() * (2 * s).exp()).sum())
    # γ_n round-off of the DWT, the projection (n = 4·C_in terms) and the squared sums, and the
    # orthonormality defect of the QR factor (≈ n·eps).
    rtol = 16 * (4 * cin + cout + x.numel()) * EPS
    for folded in (False, True):
        wls = WLS(cin, cout, folded=folded).double()
        _set(wls, _orthonormal_columns(seed + 2, cout, 4 * cin), torch.zeros(cout, dtype=F64), s)
        with torch.no_grad():
            energy = float(wls(x).pow(2).sum())
        assert energy == pytest.approx(expect, rel=rtol, abs=0)
        norm2 = float(x.pow(2).sum())
        assert math.exp(2 * float(s.min())) * norm2 * (1 - rtol) <= energy
        assert energy <= math.exp(2 * float(s.max())) * norm2 * (1 + rtol)


def _pure_subband_image(k, c, h, w):
    """All energy in subband k: constant (LL), alternating columns (LH), rows (HL), checkerboard (HH)."""
    i = torch.arange(2 * h, dtype=F64)[:, None]
    j = torch.arange(2 * w, dtype=F64)[None, :]
    sign = [torch.ones_like(i * j), (-1) ** j + 0 * i, (-1) ** i + 0 * j, (-1) ** (i + j)][k]
    return (sign * torch.linspace(0.5, 1.5, c, dtype=F64)[:, None, None])[None]


@pytest.mark.parametrize("cin", [1, 3])
@pytest.mark.parametrize("band", range(4), ids=["LL", "LH", "HL", "HH"])
def test_scale_init_scales_ll_lh_hl_by_exp_half_and_leaves_hh(cin, band):
    """The official init s = (0.5, 0.5, 0.5, 0) on [LL, LH, HL, HH]: an image whose energy lies in
    one subband (by the note's formulas) has its energy multiplied by e, e, e, 1 by a freshly
    initialised WLS whose OLP is made an isometry."""
    x = _pure_subband_image(band, cin, 3, 2)
    cout = 4 * cin + 1
    rtol = 16 * (4 * cin + cout + x.numel()) * EPS  # as in the energy test above
    energies = _subband_energies(x)
    assert float(energies[band].sum()) == pytest.approx(float(x.pow(2).sum()), rel=rtol, abs=0)
    wls = WLS(cin, cout).double()
    with torch.no_grad():
        wls.olp.weight.copy_(_orthonormal_columns(band, cout, 4 * cin))
        wls.olp.bias.zero_()
        ratio = float(wls(x).pow(2).sum() / x.pow(2).sum())
    assert ratio == pytest.approx([math.e, math.e, math.e, 1.0][band], rel=rtol, abs=0)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    cin=st.integers(1, 3),
    cout=st.integers(1, 7),
    h=st.integers(1, 3),
    w=st.integers(1, 3),
    folded=st.booleans(),
    seed=SEEDS,
)
def test_inverse_wls_is_the_adjoint_of_wls(cin, cout, h, w, folded, seed):
    """WLS = W·diag(e^s)·H and InverseWLS = Hᵀ·diag(e^{-s'})·W', so InverseWLS with W' = Wᵀ and
    s' = −s is the adjoint of WLS (for any shapes, not only square orthogonal W):
    ⟨WLS x, y⟩ = ⟨x, InverseWLS y⟩."""
    weight = _randn(seed, cout, 4 * cin)
    s = torch.rand(4 * cin, generator=torch.Generator().manual_seed(seed + 1), dtype=F64) * 2 - 1
    wls = WLS(cin, cout, folded=folded).double()
    inv = InverseWLS(cout, cin, folded=folded).double()
    _set(wls, weight, torch.zeros(cout, dtype=F64), s)
    _set(inv, weight.T, torch.zeros(4 * cin, dtype=F64), -s)
    x = _randn(seed + 2, 2, cin, 2 * h, 2 * w)
    y = _randn(seed + 3, 2, cout, h, w)
    with torch.no_grad():
        lhs = float((wls(x) * y).sum())
        rhs = float((x * inv(y)).sum())
    # γ_n bound for the products (n = 4·C_in + C_out + elements summed): each side is within
    # n·eps·‖x‖·‖W‖_F·e^{max|s|}·‖y‖ of the exact value.
    n = 4 * cin + cout + x.numel() + y.numel()
    scale = float(x.norm() * weight.norm() * y.norm()) * math.exp(float(s.abs().max()))
    assert abs(lhs - rhs) <= 4 * n * EPS * scale


@settings(max_examples=40, deadline=None, derandomize=True)
@given(out_f=st.integers(1, 7), in_f=st.integers(1, 7), gain=st.floats(0.2, 2.0), seed=SEEDS)
def test_ortho_loss_is_the_singular_value_penalty_and_orthogonally_invariant(out_f, in_f, gain, seed):
    """The smaller Gram matrix (size m = min(out, in)) has eigenvalues σ_i², so
    L_orth(W) = Σ_i (σ_i² − 1)² / m²; hence L_orth(U W V) = L_orth(W) = L_orth(Wᵀ) for orthogonal
    U, V."""
    w = gain * _randn(seed, out_f, in_f)
    m = min(out_f, in_f)
    sigma = torch.linalg.svdvals(w)
    expect = float(((sigma**2 - 1) ** 2).sum()) / m**2
    u = _orthonormal_columns(seed + 1, out_f, out_f)
    v = _orthonormal_columns(seed + 2, in_f, in_f)
    # Entries of the Gram matrix carry γ_n·‖W‖_F² round-off (n = out + in, also covering the SVD
    # and the orthogonal factors); the penalty is quadratic in them.
    err = 16 * (out_f + in_f) * EPS * float(w.norm()) ** 2
    tol = 2 * err * (math.sqrt(expect) + err) + err**2
    for mat in (w, w.T, u @ w @ v):
        assert abs(float(ortho_loss(mat)) - expect) <= tol


def _increasing(draw, n, start, first, step):
    """``n`` increasing values: ``start`` + a first offset in ``first`` + gaps in ``step``."""
    d = [draw(st.floats(*first)), *draw(st.lists(st.floats(*step), min_size=n - 1, max_size=n - 1))]
    return start + np.cumsum(d)


@st.composite
def _curves(draw, count, shared=None):
    """``count`` RD curves with n points; their ranges overlap by at least 0.5 dB and 0.6 in log R.

    ``shared="dist"`` gives every curve the first curve's qualities, ``"rate"`` its rates.
    """
    n = draw(st.integers(4, 6))
    curves = [
        (np.exp(_increasing(draw, n, -2.5, (0.0, 0.3), (0.3, 1.0))), _increasing(draw, n, 26.0, (0.0, 1.0), (0.5, 3.0)))
        for _ in range(count)
    ]
    if shared == "dist":
        curves = [(r, curves[0][1]) for r, _ in curves]
    elif shared == "rate":
        curves = [(curves[0][0], d) for _, d in curves]
    return curves


def _error_scale(x, y, method, length):
    """Forward-error scale of ``(1/L)·∫ fit`` for samples ``y(x)`` over an interval of length L.

    sup |y|, plus for the least-squares cubic the coefficient condition number (column-scaled
    Vandermonde, as np.polyfit solves it) times Σ|c_i|·|t|^i, and the rounding of the
    antiderivative Σ|c_i|·|t|^{i+1} relative to L; for PCHIP the relative error of (t − x_k)
    carried by the slopes (≤ 3·max|Δy/Δx|), and the segment sum relative to L.
    """
    t = np.abs(x).max()
    if method == "cubic":
        v = np.vander(x, 4)
        cond = np.linalg.cond(v / np.linalg.norm(v, axis=0))
        size = float(np.polyval(np.abs(np.polyfit(x, y, 3)), t))
        return np.abs(y).max() + cond * size + size * t / length
    span = x[-1] - x[0]
    return np.abs(y).max() * (1 + span / length) + 3 * t * np.abs(np.diff(y) / np.diff(x)).max()


def _overlap(a, b):
    return min(a[-1], b[-1]) - max(a[0], b[0])


@pytest.mark.parametrize("method", ["cubic", "pchip"])
@settings(max_examples=25, deadline=None, derandomize=True)
@given(curves=_curves(2), log2_k=st.integers(-12, 12), shift=st.floats(-20.0, 20.0))
def test_bd_is_invariant_to_rate_units_and_a_quality_offset(method, curves, log2_k, shift):
    """log R is fitted, so scaling every rate by k (bpp ↔ bits) shifts both fits by log k and cancels
    in Δ; both interpolants are translation equivariant in D, so a common PSNR offset changes
    nothing either. BD-PSNR: the same with the axes swapped."""
    (ra, da), (rt, dt) = curves
    k = 2.0**log2_k
    base_r = bd_rate(ra, da, rt, dt, method)
    moved_r = bd_rate(ra * k, da + shift, rt * k, dt + shift, method)
    base_p = bd_psnr(ra, da, rt, dt, method)
    moved_p = bd_psnr(ra * k, da + shift, rt * k, dt + shift, method)
    # Δ = log(1 + BD/100) is what the fits determine; each of the 4 fits contributes its error.
    length = _overlap(da, dt)
    scale = sum(
        _error_scale(d + s, np.log(r * m), method, length)
        for r, d in ((ra, da), (rt, dt))
        for s, m in ((0.0, 1.0), (shift, k))
    )
    assert abs(math.log1p(moved_r / 100) - math.log1p(base_r / 100)) <= 16 * EPS * scale
    length = _overlap(np.log(ra), np.log(rt))
    scale = sum(
        _error_scale(np.log(r * m), d + s, method, length)
        for r, d in ((ra, da), (rt, dt))
        for s, m in ((0.0, 1.0), (shift, k))
    )
    assert abs(moved_p - base_p) <= 16 * EPS * scale


@pytest.mark.parametrize("method", ["cubic", "pchip"])
@settings(max_examples=25, deadline=None, derandomize=True)
@given(same_d=_curves(3, shared="dist"), same_r=_curves(3, shared="rate"))
def test_bd_is_additive_over_three_codecs(method, same_d, same_r):
    """On one common interval Δ(a, c) = Δ(a, b) + Δ(b, c) (integrals are additive), i.e.
    1 + BD(a, c) = (1 + BD(a, b))·(1 + BD(b, c)); with c = a it is antisymmetry. BD-PSNR adds."""
    a, b, c = same_d
    d_ac, d_ab, d_bc, d_ca = (math.log1p(bd_rate(*p, *q, method) / 100) for p, q in ((a, c), (a, b), (b, c), (c, a)))
    # Δ = (I_t − I_a)/L with the same deterministic integrals I in every call: only the
    # subtraction, the division, exp and log1p round (a few eps·(1 + |Δ|)).
    tol = 16 * EPS * (1 + abs(d_ac) + abs(d_ab) + abs(d_bc))
    assert abs(d_ac - (d_ab + d_bc)) <= tol
    assert abs(d_ac + d_ca) <= tol
    a, b, c = same_r
    p_ac, p_ab, p_bc, p_ca = (bd_psnr(*p, *q, method) for p, q in ((a, c), (a, b), (b, c), (c, a)))
    tol = 16 * EPS * max(np.abs(d).max() for _, d in same_r)
    assert abs(p_ac - (p_ab + p_bc)) <= tol
    assert abs(p_ac + p_ca) <= tol
    # Antisymmetry needs no common interval: the overlap of two curves is symmetric, so also for
    # curves over different quality (rate) ranges swapping anchor and test negates Δ.
    for p, q in (same_r[:2], same_r[1:]):
        fwd, back = (math.log1p(bd_rate(*u, *v, method) / 100) for u, v in ((p, q), (q, p)))
        assert abs(fwd + back) <= 16 * EPS * (1 + abs(fwd))
    for p, q in (same_d[:2], same_d[1:]):
        fwd, back = bd_psnr(*p, *q, method), bd_psnr(*q, *p, method)
        assert abs(fwd + back) <= 16 * EPS * max(np.abs(p[1]).max(), np.abs(q[1]).max())


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    gaps=st.lists(st.floats(0.05, 3.0), min_size=2, max_size=7),
    rises=st.lists(st.one_of(st.just(0.0), st.floats(0.0, 3.0)), min_size=7, max_size=7),
)
def test_pchip_fit_interpolates_and_is_monotone(gaps, rises):
    """Fritsch–Carlson: with slopes in [0, 3·Δ_k] (the weighted harmonic mean and the clipped
    three-point ends) the Hermite interpolant of non-decreasing data is non-decreasing, passes
    through the data, and its integral over [a, b] lies between (b − a)·f(a) and (b − a)·f(b)."""
    x = 30.0 + np.concatenate([[0.0], np.cumsum(gaps)])
    y = np.concatenate([[-1.0], -1.0 + np.cumsum(rises[: len(gaps)])])
    f, integral = fit_curve(x, y, "pchip")
    # Hermite basis evaluation: a few eps·(|y| + h·|m|) per value, with h·|m| ≤ 3·|Δy|.
    tol = 64 * EPS * (np.abs(y).max() + 3 * np.abs(np.diff(y)).max() + 1.0)
    np.testing.assert_allclose(f(x), y, rtol=0, atol=tol)
    t = np.linspace(x[0], x[-1], 2001)
    v = f(t)
    assert np.diff(v).min() >= -tol
    assert v.min() >= y[0] - tol and v.max() <= y[-1] + tol
    for a, b in ((x[0], x[-1]), (t[137], t[1500]), (t[3], t[40])):
        i = integral(a, b)
        span = b - a
        assert span * (f(np.array(a)) - tol) <= i + tol * span
        assert i <= span * (f(np.array(b)) + tol) + tol * span
