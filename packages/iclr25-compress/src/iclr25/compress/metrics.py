"""Rate-distortion evaluation for learned codecs: Bjøntegaard deltas and real-bitstream RD points.

``bd_rate`` / ``bd_psnr`` follow VCEG-M33: fit log-rate as a function of PSNR (or PSNR as a
function of log-rate) for the anchor and the test curve, integrate both over the overlapping
interval and average the difference. Two interpolants: ``"cubic"`` (least-squares cubic
polynomial, the original; needs ≥ 4 points) and ``"pchip"`` (piecewise cubic Hermite with
Fritsch–Carlson slopes, monotone; ≥ 2 points). Both are integrated in closed form.
Sign convention: negative BD-rate means the *test* curve needs fewer bits than the *anchor*.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from iclr25.core.device import compute_dtype
from iclr25.core.modes import eval_mode

__all__ = ["bd_psnr", "bd_rate", "fit_curve", "rd_point"]

_METHODS = ("cubic", "pchip")


def _as_curve(rate: Any, dist: Any, name: str) -> tuple[np.ndarray, np.ndarray]:
    r = np.asarray(rate, dtype=np.float64).ravel()
    d = np.asarray(dist, dtype=np.float64).ravel()
    if r.shape != d.shape:
        raise ValueError(f"rate_{name} and dist_{name} must have the same length, got {r.size} and {d.size}")
    if r.size < 2:
        raise ValueError(f"the {name} curve needs at least 2 points, got {r.size}")
    if not (np.isfinite(r).all() and np.isfinite(d).all()):
        raise ValueError(f"the {name} curve contains NaN or inf")
    if (r <= 0).any():
        raise ValueError(f"rate_{name} must be positive, got min {r.min()}")
    order = np.argsort(d)
    r, d = r[order], d[order]
    if (np.diff(d) <= 0).any():
        raise ValueError(f"dist_{name} must have distinct values, got {d.tolist()}")
    if (np.diff(r) <= 0).any():
        raise ValueError(f"the {name} curve is not monotonic: rate must increase with quality, got {r.tolist()}")
    return np.log(r), d


def _pchip_slopes(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    h = np.diff(x)
    delta = np.diff(y) / h
    n = x.size
    if n == 2:
        return np.array([delta[0], delta[0]])
    m = np.zeros(n)
    for k in range(1, n - 1):
        if delta[k - 1] * delta[k] > 0:
            w1, w2 = 2 * h[k] + h[k - 1], h[k] + 2 * h[k - 1]
            m[k] = (w1 + w2) / (w1 / delta[k - 1] + w2 / delta[k])  # weighted harmonic mean
    for k, (h0, h1, d0, d1) in ((0, (h[0], h[1], delta[0], delta[1])), (n - 1, (h[-1], h[-2], delta[-1], delta[-2]))):
        # Three-point end condition, clipped so the end stays shape-preserving.
        s = ((2 * h0 + h1) * d0 - h0 * d1) / (h0 + h1)
        if np.sign(s) != np.sign(d0):
            s = 0.0
        elif np.sign(d0) != np.sign(d1) and abs(s) > abs(3 * d0):
            s = 3 * d0
        m[k] = s
    return m


def fit_curve(x: Any, y: Any, method: str = "pchip") -> tuple[Callable[[np.ndarray], np.ndarray], Callable]:
    """Fit ``y(x)`` as :func:`bd_rate` does.

    Parameters
    ----------
    x, y:
        ``(n,)`` samples with strictly increasing ``x``.
    method:
        ``"cubic"`` (n ≥ 4) or ``"pchip"`` (n ≥ 2).

    Returns
    -------
    (f, integral)
        ``f(t)`` evaluates the fit; ``integral(a, b)`` is its exact integral over ``[a, b]``.

    Raises
    ------
    ValueError
        Unknown ``method``, too few or non-finite samples, or ``x`` not strictly increasing.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    if x.ndim != 1 or x.shape != y.shape:
        raise ValueError(f"x and y must be 1-D of the same length, got shapes {x.shape} and {y.shape}")
    if x.size < 2 or not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError(f"x and y must hold at least 2 finite samples, got {x.size}")
    # The Hermite segments are found by searchsorted: unsorted x would give a wrong fit silently.
    if (np.diff(x) <= 0).any():
        raise ValueError(f"x must be strictly increasing, got {x.tolist()}")
    if method == "cubic":
        if x.size < 4:
            raise ValueError(f"method='cubic' needs at least 4 points per curve, got {x.size} (use method='pchip')")
        p = np.polyfit(x, y, 3)
        pi = np.polyint(p)
        return (lambda t: np.polyval(p, t)), (lambda a, b: float(np.polyval(pi, b) - np.polyval(pi, a)))
    m = _pchip_slopes(x, y)

    def f(t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, dtype=np.float64)
        k = np.clip(np.searchsorted(x, t, side="right") - 1, 0, x.size - 2)
        h = x[k + 1] - x[k]
        s = (t - x[k]) / h
        h00, h10 = 2 * s**3 - 3 * s**2 + 1, s**3 - 2 * s**2 + s
        h01, h11 = -2 * s**3 + 3 * s**2, s**3 - s**2
        return h00 * y[k] + h10 * h * m[k] + h01 * y[k + 1] + h11 * h * m[k + 1]

    def seg_integral(k: int, a: float, b: float) -> float:
        # Integral of the k-th Hermite cubic over [a, b] (inside the segment), via its antiderivative.
        h = x[k + 1] - x[k]

        def anti(t: float) -> float:
            s = (t - x[k]) / h
            return h * (
                (s**4 / 2 - s**3 + s) * y[k]
                + (s**4 / 4 - 2 * s**3 / 3 + s**2 / 2) * h * m[k]
                + (-(s**4) / 2 + s**3) * y[k + 1]
                + (s**4 / 4 - s**3 / 3) * h * m[k + 1]
            )

        return anti(b) - anti(a)

    def integral(a: float, b: float) -> float:
        total = 0.0
        for k in range(x.size - 1):
            lo, hi = max(a, x[k]), min(b, x[k + 1])
            if hi > lo:
                total += seg_integral(k, lo, hi)
        return total

    return f, integral


def _overlap(a: np.ndarray, b: np.ndarray, what: str) -> tuple[float, float]:
    lo, hi = max(a.min(), b.min()), min(a.max(), b.max())
    if not hi > lo:
        raise ValueError(
            f"the anchor and test curves do not overlap in {what}: "
            f"[{a.min():.4g}, {a.max():.4g}] vs [{b.min():.4g}, {b.max():.4g}]"
        )
    return float(lo), float(hi)


def bd_rate(
    rate_anchor: Sequence[float],
    dist_anchor: Sequence[float],
    rate_test: Sequence[float],
    dist_test: Sequence[float],
    method: str = "pchip",
) -> float:
    """Bjøntegaard-delta rate of the test curve versus the anchor, in percent.

    Parameters
    ----------
    rate_anchor, dist_anchor, rate_test, dist_test:
        ``(n,)`` rates (bpp or bits, > 0) and qualities (PSNR in dB, higher is better) of each curve;
        rate must increase with quality.
    method:
        ``"cubic"`` (VCEG-M33, ≥ 4 points) or ``"pchip"`` (≥ 2 points).

    Returns
    -------
    float
        ``(exp(mean Δ log R) − 1)·100``; negative = the test curve saves bits.
    """
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    la, da = _as_curve(rate_anchor, dist_anchor, "anchor")
    lt, dt = _as_curve(rate_test, dist_test, "test")
    lo, hi = _overlap(da, dt, "quality")
    _, ia = fit_curve(da, la, method)
    _, it = fit_curve(dt, lt, method)
    delta = (it(lo, hi) - ia(lo, hi)) / (hi - lo)
    return float((math.exp(delta) - 1) * 100)


def bd_psnr(
    rate_anchor: Sequence[float],
    dist_anchor: Sequence[float],
    rate_test: Sequence[float],
    dist_test: Sequence[float],
    method: str = "pchip",
) -> float:
    """Bjøntegaard-delta quality (dB) of the test curve versus the anchor at equal rate.

    Parameters are those of :func:`bd_rate`. Returns the mean of ``D_test − D_anchor`` over the
    overlapping log-rate interval; positive = the test curve is better.
    """
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    la, da = _as_curve(rate_anchor, dist_anchor, "anchor")
    lt, dt = _as_curve(rate_test, dist_test, "test")
    lo, hi = _overlap(la, lt, "log-rate")
    _, ia = fit_curve(la, da, method)
    _, it = fit_curve(lt, dt, method)
    return float((it(lo, hi) - ia(lo, hi)) / (hi - lo))


def _psnr(a: torch.Tensor, b: torch.Tensor) -> float:
    # whole-image reductions: fp16/bf16 keep ~3 significant digits and fp16 overflows past 65504
    dt = compute_dtype(a, b)
    mse = float(torch.mean((a.to(dt) - b.to(dt)) ** 2))
    return float("inf") if mse == 0 else 10 * math.log10(1.0 / mse)


@torch.no_grad()
def rd_point(
    model: torch.nn.Module, images: torch.Tensor, real_bitstream: bool = True, pad: bool = False
) -> dict[str, float]:
    """Average rate and quality of a codec on a batch of images.

    Parameters
    ----------
    model:
        A CompressAI ``CompressionModel`` or :class:`~iclr25.compress.auxt.AuxTModel`. It is
        evaluated in eval mode without gradients, and its previous train/eval mode is restored
        afterwards; for ``real_bitstream`` its CDF tables are rebuilt with ``update(force=True)``.
    images:
        ``(B, 3, H, W)`` float in [0, 1].
    real_bitstream:
        Measure bpp from the bytes of ``compress`` and PSNR from ``decompress``; otherwise from the
        likelihoods and the forward output clamped to [0, 1].
    pad:
        Zero-pad H and W on the bottom/right to the model's multiple (``AuxTModel.multiple``; 64
        for other models, as CompressAI's evaluation does) and crop the reconstruction. Rates
        count the original ``H·W`` pixels. Without it, H and W must already fit the model.

    Returns
    -------
    dict
        ``{"bpp", "psnr", "bpp_estimate", "enc_s", "dec_s"}`` (per-image means; times 0 when not real).
    """
    from iclr25.compress.auxt.model import AuxTModel, _pad, check_images

    check_images(images, pad=True, name="images")
    # every submodule gets its own train/eval flag back (model.train(was) would reset frozen parts)
    with eval_mode(model), torch.no_grad():
        if real_bitstream:
            model.update(force=True)
        return _rd_point(model, images, real_bitstream, pad, isinstance(model, AuxTModel), _pad)


def _rd_point(model, images, real_bitstream: bool, pad: bool, auxt: bool, pad_fn) -> dict[str, float]:
    n, _, h, w = images.shape
    # AuxTModel pads and crops itself (and records the size in its bitstream header).
    kw = {"pad": pad} if auxt else {}
    prep = (lambda x: pad_fn(x, 64)) if pad and not auxt else (lambda x: x)
    rows = []
    for i in range(n):
        x = images[i : i + 1]
        out = model(prep(x), **kw)
        if not pad and out["x_hat"].shape[-2:] != x.shape[-2:]:
            got = "x".join(map(str, out["x_hat"].shape[-2:]))
            raise ValueError(f"images of {h}x{w} do not fit this model (it reconstructs {got}); pass pad=True")
        est = sum(float(torch.log2(lk.to(compute_dtype(lk))).sum()) for lk in out["likelihoods"].values()) / (-h * w)
        x_hat = out["x_hat"][..., :h, :w].clamp(0, 1)
        row = {"bpp_estimate": est, "bpp": est, "psnr": _psnr(x_hat, x), "enc_s": 0.0, "dec_s": 0.0}
        if real_bitstream:
            t0 = time.perf_counter()
            enc = model.compress(prep(x), **kw)
            t1 = time.perf_counter()
            dec = model.decompress(enc["strings"], enc["shape"])
            t2 = time.perf_counter()
            nbytes = sum(len(s) for group in enc["strings"] for s in group)
            x_dec = dec["x_hat"][..., :h, :w]
            row.update(bpp=8 * nbytes / (h * w), psnr=_psnr(x_dec, x), enc_s=t1 - t0, dec_s=t2 - t1)
        rows.append(row)
    return {k: float(np.mean([r[k] for r in rows])) for k in rows[0]}
