"""Rate-distortion helpers for the Gaussian source."""

from __future__ import annotations

import math

__all__ = ["gaussian_rd", "rd_gap_db", "space_filling_gain_db"]


def gaussian_rd(rate: float, variance: float = 1.0) -> float:
    """Distortion-rate function of an i.i.d. Gaussian: ``D(R) = σ²·2^{−2R}`` (MSE per dimension).

    Parameters
    ----------
    rate:
        Bits per dimension (``>= 0``).
    variance:
        Source variance ``σ²``.
    """
    if rate < 0 or not math.isfinite(rate):
        raise ValueError(f"rate must be a finite value >= 0, got {rate}")
    if variance <= 0:
        raise ValueError(f"variance must be > 0, got {variance}")
    return variance * 2.0 ** (-2.0 * rate)


def rd_gap_db(distortion: float, rate: float, variance: float = 1.0) -> float:
    """Gap to the Gaussian ``D(R)`` at the achieved rate: ``10·log10(D / (σ²·2^{−2R}))`` dB.

    At high rate entropy-coded lattice quantization sits
    ``10·log10(2πe·G(Λ))`` dB above it (1.53 dB for scalar rounding, 0.88 dB for E8).
    """
    if distortion <= 0:
        raise ValueError(f"distortion must be > 0, got {distortion}")
    return 10.0 * math.log10(distortion / gaussian_rd(rate, variance))


def space_filling_gain_db(g: float) -> float:
    """Space-filling gain over ``Zⁿ`` of a lattice with normalized second moment ``g``: ``10·log10((1/12)/g)``."""
    if g <= 0:
        raise ValueError(f"g must be > 0, got {g}")
    return 10.0 * math.log10((1.0 / 12.0) / g)
