"""Bjøntegaard deltas: closed forms, brute-force integration, scipy's PCHIP, bad input."""

import math

import numpy as np
import pytest

from iclr25.compress.metrics import bd_psnr, bd_rate, fit_curve

R = [0.12, 0.25, 0.48, 0.9, 1.5]
D = [27.1, 29.6, 32.0, 34.3, 36.2]


@pytest.mark.parametrize("method", ["cubic", "pchip"])
def test_identical_curves_give_zero(method):
    assert bd_rate(R, D, R, D, method) == pytest.approx(0.0, abs=1e-12)
    assert bd_psnr(R, D, R, D, method) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("method", ["cubic", "pchip"])
@pytest.mark.parametrize("a", [0.1, -0.07])
def test_scaled_rates_give_exact_bd_rate_and_swap(method, a):
    rt = [r * (1 + a) for r in R]
    assert bd_rate(R, D, rt, D, method) == pytest.approx(100 * a, abs=1e-6)
    assert bd_rate(rt, D, R, D, method) == pytest.approx(100 * (1 / (1 + a) - 1), abs=1e-6)


@pytest.mark.parametrize("method", ["cubic", "pchip"])
def test_psnr_shift_gives_bd_psnr(method):
    assert bd_psnr(R, D, R, [d + 0.4 for d in D], method) == pytest.approx(0.4, abs=1e-9)


def _brute(fa, fb, lo, hi):
    t = np.linspace(lo, hi, 100_001)
    v = fb(t) - fa(t)
    return float(np.sum((v[1:] + v[:-1]) / 2 * np.diff(t))) / (hi - lo)  # trapezoid rule


@pytest.mark.parametrize("method", ["cubic", "pchip"])
def test_agrees_with_brute_force_integration(method):
    rt = [0.1, 0.22, 0.45, 0.95, 1.4]
    dt = [27.5, 29.9, 32.3, 34.8, 36.0]
    fa, _ = fit_curve(np.array(D), np.log(R), method)
    ft, _ = fit_curve(np.array(dt), np.log(rt), method)
    lo, hi = max(D[0], dt[0]), min(D[-1], dt[-1])
    expect = (math.exp(_brute(fa, ft, lo, hi)) - 1) * 100
    assert bd_rate(R, D, rt, dt, method) == pytest.approx(expect, abs=1e-4)
    ga, _ = fit_curve(np.log(R), np.array(D), method)
    gt, _ = fit_curve(np.log(rt), np.array(dt), method)
    lo, hi = max(np.log(R[0]), np.log(rt[0])), min(np.log(R[-1]), np.log(rt[-1]))
    assert bd_psnr(R, D, rt, dt, method) == pytest.approx(_brute(ga, gt, lo, hi), abs=1e-4)


@pytest.mark.parametrize(
    "x,y",
    [
        (D, np.log(R).tolist()),
        # steep last segment: the three-point end slope at x[0] turns negative and is set to 0
        ([0.0, 1.0, 2.0, 3.0, 4.5], [0.0, 0.1, 1.0, 1.1, 3.0]),
        # sign change next to the end: the end slope is clipped to 3·Δ₀
        ([0.0, 1.0, 2.0, 3.5], [0.0, 1.0, -3.0, -2.0]),
    ],
)
def test_pchip_matches_scipy(x, y):
    interpolate = pytest.importorskip("scipy.interpolate")
    x, y = np.array(x), np.array(y)
    f, integral = fit_curve(x, y, "pchip")
    ref = interpolate.PchipInterpolator(x, y)
    t = np.linspace(x[0], x[-1], 1001)
    np.testing.assert_allclose(f(t), ref(t), atol=1e-12)
    a, b = x[0] + 0.3 * (x[1] - x[0]), x[-1] - 0.2 * (x[-1] - x[-2])
    assert integral(a, b) == pytest.approx(float(ref.integrate(a, b)), abs=1e-12)


def test_cubic_matches_polyfit_integral():
    _, integral = fit_curve(np.array(D), np.log(R), "cubic")
    p = np.polyint(np.polyfit(D, np.log(R), 3))
    assert integral(28.0, 35.0) == pytest.approx(np.polyval(p, 35.0) - np.polyval(p, 28.0), abs=1e-12)


def test_pchip_two_points_is_linear():
    assert bd_rate([1, 2], [30, 34], [1.1, 2.2], [30, 34], "pchip") == pytest.approx(10.0, abs=1e-9)


def test_bad_input_raises():
    with pytest.raises(ValueError, match="at least 4"):
        bd_rate(R[:3], D[:3], R[:3], D[:3], method="cubic")
    with pytest.raises(ValueError, match="do not overlap"):
        bd_rate(R, D, R, [d + 20 for d in D])
    with pytest.raises(ValueError, match="not monotonic"):
        bd_rate([0.1, 0.3, 0.2, 0.5], [28, 30, 32, 34], R, D)
    with pytest.raises(ValueError, match="NaN"):
        bd_rate([0.1, float("nan")], [28, 30], R, D)
    with pytest.raises(ValueError, match="at least 2"):
        bd_psnr([0.1], [28], R, D)
    with pytest.raises(ValueError, match="NaN or inf"):  # a lossless point has PSNR = inf
        bd_psnr(R, D, R, [*D[:-1], float("inf")])
    with pytest.raises(ValueError, match="method"):
        bd_rate(R, D, R, D, method="linear")
