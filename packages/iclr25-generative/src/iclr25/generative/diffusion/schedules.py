"""Noise schedules: discrete VP (DDPM) schedules and continuous EDM sigma grids.

The VP schedule exposes its VE-equivalent noise level ``sigma(t) = sqrt((1 - ab_t) / ab_t)`` so
that a VP/epsilon network can be driven by the VE/EDM samplers (see
:class:`~iclr25.generative.diffusion.precond.EpsVPDenoiser`).
"""

from __future__ import annotations

import math

import torch

__all__ = ["VPSchedule", "karras_sigmas", "loglinear_sigmas"]


class VPSchedule:
    """Discrete variance-preserving schedule with ``T`` steps.

    Parameters
    ----------
    kind:
        ``"linear"``: betas from ``beta_start`` to ``beta_end`` (Ho et al. 2020);
        ``"cosine"``: ab(t) = cos^2(((t/T)+s)/(1+s) * pi/2) / ab(0), betas clipped at 0.999
        (Nichol & Dhariwal 2021, Eq. 17).
    T:
        Number of diffusion steps.
    beta_start, beta_end:
        Linear schedule endpoints.
    s:
        Cosine schedule offset.

    Attributes
    ----------
    betas, alphas_cumprod, sigmas:
        ``(T,)`` float64 CPU tensors; ``sigmas = sqrt((1 - ab) / ab)`` (increasing in t).
    """

    def __init__(
        self, kind: str = "linear", T: int = 1000, beta_start: float = 1e-4, beta_end: float = 0.02, s: float = 0.008
    ) -> None:
        if kind not in ("linear", "cosine"):
            raise ValueError(f"kind must be 'linear' or 'cosine', got {kind!r}")
        if not isinstance(T, int) or T < 2:
            raise ValueError(f"T must be an int >= 2, got {T!r}")
        if kind == "linear" and not (0 < beta_start < 1 and 0 < beta_end < 1):  # else NaN/inf sigmas
            raise ValueError(f"beta_start and beta_end must be in (0, 1), got {beta_start}, {beta_end}")
        self.kind, self.T = kind, T
        if kind == "linear":
            betas = torch.linspace(beta_start, beta_end, T, dtype=torch.float64)
        else:
            steps = torch.arange(T + 1, dtype=torch.float64) / T
            f = torch.cos((steps + s) / (1 + s) * math.pi / 2) ** 2
            ab = f / f[0]
            betas = (1 - ab[1:] / ab[:-1]).clamp(max=0.999)
        self.betas = betas
        self.alphas_cumprod = torch.cumprod(1 - betas, 0)
        self.sigmas = ((1 - self.alphas_cumprod) / self.alphas_cumprod).sqrt()
        self._log_sigmas = self.sigmas.log()

    def sigma(self, t: torch.Tensor | int | float) -> torch.Tensor:
        """VE noise level at (possibly fractional) timestep ``t``; interpolated linearly in log sigma."""
        t = torch.as_tensor(t, dtype=torch.float64)
        lo = t.floor().clamp(0, self.T - 1).long()
        hi = (lo + 1).clamp(max=self.T - 1)
        w = (t - lo.double()).clamp(0, 1)
        return (self._log_sigmas[lo] * (1 - w) + self._log_sigmas[hi] * w).exp()

    def alpha_bar(self, t: torch.Tensor | int | float) -> torch.Tensor:
        """``ab`` at (possibly fractional) ``t``, consistent with :meth:`sigma`: ab = 1 / (1 + sigma^2)."""
        return 1.0 / (1.0 + self.sigma(t) ** 2)

    def t_from_sigma(self, sigma: torch.Tensor | float, nearest: bool = False) -> torch.Tensor:
        """Fractional timestep whose VE noise level is ``sigma`` (inverse of :meth:`sigma`).

        Interpolates linearly in log sigma between the two bracketing steps and clamps to
        ``[0, T-1]``; ``nearest=True`` rounds to the closest integer step (for networks that only
        accept integer ``t``). Returned on ``sigma``'s device, dtype float32 (or int64 if nearest).
        """
        s = torch.as_tensor(sigma)
        dev = s.device
        ls = s.detach().double().cpu().clamp_min(1e-30).log()
        idx = torch.searchsorted(self._log_sigmas, ls).clamp(1, self.T - 1)
        lo, hi = self._log_sigmas[idx - 1], self._log_sigmas[idx]
        w = ((ls - lo) / (hi - lo)).clamp(0, 1)
        t = (idx - 1).double() + w
        t = torch.where(ls <= self._log_sigmas[0], torch.zeros_like(t), t)
        if nearest:
            return t.round().long().to(dev)
        return t.to(dev, torch.float32)

    def timesteps(self, steps: int) -> list[int]:
        """``steps`` evenly spaced integer timesteps from ``T-1`` down to 0 (the DDIM sub-sequence)."""
        if not isinstance(steps, int) or not 1 <= steps <= self.T:
            raise ValueError(f"steps must be an int in [1, {self.T}], got {steps!r}")
        ts = torch.linspace(self.T - 1, 0, steps, dtype=torch.float64).round().long().tolist()
        return list(dict.fromkeys(ts))

    def __repr__(self) -> str:
        return f"VPSchedule(kind={self.kind!r}, T={self.T})"


def _check_range(n: int, sigma_min: float, sigma_max: float) -> None:
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an int >= 1, got {n!r}")
    if not (math.isfinite(sigma_min) and math.isfinite(sigma_max)) or not 0 < sigma_min <= sigma_max:
        raise ValueError(f"need finite 0 < sigma_min <= sigma_max, got sigma_min={sigma_min}, sigma_max={sigma_max}")


def karras_sigmas(
    n: int,
    sigma_min: float = 0.002,
    sigma_max: float = 80.0,
    rho: float = 7.0,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """EDM noise levels (Karras et al. 2022, Eq. 5) with a trailing zero.

    sigma_i = (smax^(1/rho) + i/(n-1) (smin^(1/rho) - smax^(1/rho)))^rho, i = 0..n-1, then 0.

    Returns
    -------
    (n + 1,) tensor, decreasing from ``sigma_max`` to ``sigma_min`` then 0.
    """
    _check_range(n, sigma_min, sigma_max)
    if not rho > 0:
        raise ValueError(f"rho must be > 0, got {rho}")
    if n == 1:
        s = torch.tensor([sigma_max], dtype=torch.float64)
    else:
        ramp = torch.arange(n, dtype=torch.float64) / (n - 1)
        a, b = sigma_max ** (1 / rho), sigma_min ** (1 / rho)
        s = (a + ramp * (b - a)) ** rho
        s[0], s[-1] = sigma_max, sigma_min  # exact endpoints despite pow round-off
    return torch.cat([s, s.new_zeros(1)]).to(device=device, dtype=dtype)


def loglinear_sigmas(
    n: int,
    sigma_min: float = 0.002,
    sigma_max: float = 80.0,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """Geometric noise levels from ``sigma_max`` to ``sigma_min`` plus a trailing zero, ``(n + 1,)``."""
    _check_range(n, sigma_min, sigma_max)
    s = torch.logspace(math.log10(sigma_max), math.log10(sigma_min), n, dtype=torch.float64)
    if n > 1:
        s[0], s[-1] = sigma_max, sigma_min
    return torch.cat([s, s.new_zeros(1)]).to(device=device, dtype=dtype)
