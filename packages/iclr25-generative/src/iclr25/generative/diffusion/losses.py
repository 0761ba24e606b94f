"""Training losses: EDM denoising score matching and DDPM epsilon matching."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from iclr25.core.device import compute_dtype

from ._checks import bcast, check_finite, check_float
from .schedules import VPSchedule

__all__ = ["ddpm_eps_loss", "edm_loss", "eps_from_x0", "x0_from_eps"]


def _per_sample_mean(v: torch.Tensor) -> torch.Tensor:
    # (B, ...) -> (B,); explicit row size so an empty batch gives (0,) (reshape(0, -1) is ambiguous)
    return v.reshape(v.shape[0], math.prod(v.shape[1:])).mean(1)


def edm_loss(
    denoiser: Callable[..., torch.Tensor],
    x0: torch.Tensor,
    P_mean: float = -1.2,
    P_std: float = 1.2,
    sigma_data: float = 0.5,
    cond: dict[str, Any] | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """EDM loss (Karras et al. 2022, Eq. 2 and Table 1).

    ln sigma ~ N(P_mean, P_std^2), n ~ N(0, sigma^2 I), loss = lambda(sigma) ||D(x0 + n; sigma) - x0||^2
    averaged over non-batch dims, lambda = (sigma^2 + sd^2) / (sigma sd)^2.

    Parameters
    ----------
    denoiser: ``D(x, sigma, **cond)``.
    x0: (B, ...) clean data.

    Returns
    -------
    (B,) per-sample loss.
    """
    check_float("x0", x0)
    check_finite("x0", x0)
    b = x0.shape[0]
    rnd = torch.randn(b, generator=generator, device=x0.device, dtype=x0.dtype)
    sigma = (rnd * P_std + P_mean).exp()
    n = torch.randn(x0.shape, generator=generator, device=x0.device, dtype=x0.dtype) * bcast(sigma, x0)
    d = denoiser(x0 + n, sigma, **(cond or {}))
    weight = (sigma**2 + sigma_data**2) / (sigma * sigma_data) ** 2
    return weight * _per_sample_mean((d - x0).pow(2))


def _sqrt_ab(ab: torch.Tensor | float, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(sqrt(ab), sqrt(1 - ab)) in ``x``'s dtype, broadcastable against ``x``."""
    # ab is within 1e-4 of 1 at small t: in float16/bfloat16, 1 - ab rounds to 0 and the noise term
    # vanishes, so the coefficients are formed in at least float32, then cast to the data dtype
    ab = torch.as_tensor(ab, device=x.device, dtype=compute_dtype(x))
    ab = bcast(ab, x) if ab.dim() == 1 else ab
    return ab.sqrt().to(x.dtype), (1 - ab).sqrt().to(x.dtype)


def x0_from_eps(x_t: torch.Tensor, eps: torch.Tensor, ab: torch.Tensor) -> torch.Tensor:
    """x0 = (x_t - sqrt(1 - ab) eps) / sqrt(ab); ab is (B,) or scalar."""
    a, s = _sqrt_ab(ab, x_t)
    return (x_t - s * eps) / a


def eps_from_x0(x_t: torch.Tensor, x0: torch.Tensor, ab: torch.Tensor) -> torch.Tensor:
    """eps = (x_t - sqrt(ab) x0) / sqrt(1 - ab); ab is (B,) or scalar."""
    a, s = _sqrt_ab(ab, x_t)
    return (x_t - a * x0) / s


def ddpm_eps_loss(
    eps_net: Callable[..., torch.Tensor],
    x0: torch.Tensor,
    schedule: VPSchedule,
    cond: dict[str, Any] | None = None,
    min_snr_gamma: float | None = None,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """DDPM simple loss (Ho et al. 2020, Eq. 14) with optional min-SNR-gamma weighting.

    t ~ U{0..T-1}, x_t = sqrt(ab) x0 + sqrt(1-ab) eps, loss = w(t) ||eps_net(x_t, t) - eps||^2 (mean
    over non-batch dims), w = min(snr, gamma) / snr with snr = ab / (1 - ab) (Hang et al. 2023).

    Returns
    -------
    loss: (B,) per-sample loss.
    x0_hat: (B, ...) the network's clean-sample prediction (for auxiliary losses).
    """
    check_float("x0", x0)
    check_finite("x0", x0)
    if min_snr_gamma is not None and not min_snr_gamma > 0:  # 0 would zero the loss, < 0 flip its sign
        raise ValueError(f"min_snr_gamma must be > 0 (or None), got {min_snr_gamma}")
    b = x0.shape[0]
    t = torch.randint(0, schedule.T, (b,), generator=generator, device=x0.device)
    ab = schedule.alphas_cumprod.to(x0.device)[t].to(compute_dtype(x0))
    eps = torch.randn(x0.shape, generator=generator, device=x0.device, dtype=x0.dtype)
    a, s = _sqrt_ab(ab, x0)
    x_t = a * x0 + s * eps
    eps_hat = eps_net(x_t, t, **(cond or {}))
    loss = _per_sample_mean((eps_hat - eps).pow(2))
    if min_snr_gamma is not None:
        snr = ab / (1 - ab)
        loss = (loss * snr.clamp(max=min_snr_gamma) / snr).to(loss.dtype)
    return loss, x0_from_eps(x_t, eps_hat, ab)
