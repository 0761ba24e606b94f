"""Samplers behind one denoiser convention ``D(x, sigma, **cond) -> x0_hat``.

VE/EDM samplers (:func:`euler_sample`, :func:`heun_sample`, :func:`consistency_sample`) take noise
levels; VP samplers (:func:`ddim_sample`, :func:`ddim_invert`, :func:`ddpm_sample`) take a
discrete-time epsilon network ``eps_net(x, t, **cond)`` and a :class:`VPSchedule` (wrap a denoiser
with :class:`~iclr25.generative.diffusion.precond.EpsFromDenoiser`).

Every sampler accepts ``callback(i, x, sigma, x0_hat)``, called after step ``i`` with the new
sample ``x`` at noise level ``sigma`` (VE sigma for VP samplers) and the step's ``x0_hat``; when
it returns a tensor, that tensor replaces ``x`` (how guidance-based inverse solvers inject their
corrections without forking samplers).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ._checks import check_finite, check_float
from .schedules import VPSchedule

__all__ = [
    "consistency_sample",
    "ddim_invert",
    "ddim_sample",
    "ddpm_sample",
    "euler_sample",
    "heun_sample",
]

Callback = Callable[[int, torch.Tensor, float, torch.Tensor], "torch.Tensor | None"]


def _check_sigmas(sigmas: torch.Tensor | Sequence[float]) -> list[float]:
    s = torch.as_tensor(sigmas, dtype=torch.float64).flatten()
    if s.numel() < 2:
        raise ValueError(f"sigmas must hold at least 2 levels (e.g. karras_sigmas(n)), got {s.numel()}")
    if not bool(torch.isfinite(s).all()) or bool((s < 0).any()) or bool((s[:-1] <= 0).any()):
        raise ValueError(f"sigmas must be finite, > 0 except a final 0, got {s.tolist()}")
    if bool((s[1:] >= s[:-1]).any()):
        raise ValueError("sigmas must be strictly decreasing")
    return s.tolist()


def _apply(callback: Callback | None, i: int, x: torch.Tensor, sigma: float, x0: torch.Tensor) -> torch.Tensor:
    if callback is None:
        return x
    out = callback(i, x, sigma, x0)
    return x if out is None else out


def _full(x: torch.Tensor, v: float) -> torch.Tensor:
    return torch.full((x.shape[0],), v, device=x.device, dtype=x.dtype)


def _check_init(name: str, x: torch.Tensor) -> None:
    check_float(name, x)
    check_finite(name, x)


@torch.no_grad()
def euler_sample(
    denoiser: Callable[..., torch.Tensor],
    x_T: torch.Tensor,
    sigmas: torch.Tensor | Sequence[float],
    cond: dict[str, Any] | None = None,
    callback: Callback | None = None,
    return_trajectory: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, list[torch.Tensor]]:
    """Euler steps of the probability-flow ODE dx/dsigma = (x - D(x, sigma)) / sigma.

    Parameters
    ----------
    x_T: (B, ...) initial sample at noise level ``sigmas[0]`` (e.g. ``sigmas[0] * randn``).
    sigmas: decreasing noise levels, usually ending in 0 (:func:`karras_sigmas`).

    Returns
    -------
    (B, ...) final sample, plus the list of intermediate samples when ``return_trajectory``.
    """
    _check_init("x_T", x_T)
    s = _check_sigmas(sigmas)
    cond = cond or {}
    x, traj = x_T, [x_T]
    for i in range(len(s) - 1):
        x0 = denoiser(x, _full(x, s[i]), **cond)
        x = x + (s[i + 1] - s[i]) * (x - x0) / s[i]
        x = _apply(callback, i, x, s[i + 1], x0)
        if return_trajectory:
            traj.append(x)
    return (x, traj) if return_trajectory else x


@torch.no_grad()
def heun_sample(
    denoiser: Callable[..., torch.Tensor],
    x_T: torch.Tensor,
    sigmas: torch.Tensor | Sequence[float],
    cond: dict[str, Any] | None = None,
    S_churn: float = 0.0,
    S_tmin: float = 0.0,
    S_tmax: float = float("inf"),
    S_noise: float = 1.007,
    generator: torch.Generator | None = None,
    callback: Callback | None = None,
    return_trajectory: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, list[torch.Tensor]]:
    """EDM stochastic sampler (Karras et al. 2022, Algorithm 2).

    Heun's 2nd-order correction on every step except the last one to sigma = 0; with
    ``S_churn > 0`` noise is added to raise sigma_i to sigma_i (1 + gamma_i),
    gamma_i = min(S_churn / N, sqrt(2) - 1) for S_tmin <= sigma_i <= S_tmax. ``S_churn = 0`` is the
    deterministic Algorithm 1 and draws no noise.

    Parameters
    ----------
    x_T: (B, ...) initial sample at ``sigmas[0]``.
    sigmas: decreasing noise levels, (N + 1,) with a trailing 0.

    Returns
    -------
    (B, ...) sample (and the trajectory when ``return_trajectory``).
    """
    _check_init("x_T", x_T)
    s = _check_sigmas(sigmas)
    if S_churn < 0:
        raise ValueError(f"S_churn must be >= 0, got {S_churn}")
    cond = cond or {}
    n = len(s) - 1
    x, traj = x_T, [x_T]
    for i in range(n):
        cur, nxt = s[i], s[i + 1]
        gamma = min(S_churn / n, math.sqrt(2) - 1) if S_tmin <= cur <= S_tmax else 0.0
        hat = cur * (1 + gamma)
        if gamma > 0:
            z = torch.randn(x.shape, generator=generator, device=x.device, dtype=x.dtype)
            x = x + math.sqrt(hat**2 - cur**2) * S_noise * z
        x0 = denoiser(x, _full(x, hat), **cond)
        d = (x - x0) / hat
        x_next = x + (nxt - hat) * d
        if nxt > 0:
            x0_2 = denoiser(x_next, _full(x, nxt), **cond)
            d2 = (x_next - x0_2) / nxt
            x_next = x + (nxt - hat) * 0.5 * (d + d2)
        x = _apply(callback, i, x_next, nxt, x0)
        if return_trajectory:
            traj.append(x)
    return (x, traj) if return_trajectory else x


def _ab(schedule: VPSchedule, t: int, x: torch.Tensor) -> float:
    return 1.0 if t < 0 else float(schedule.alphas_cumprod[t])


def _ve_sigma(ab: float) -> float:
    return math.sqrt((1 - ab) / ab)


@torch.no_grad()
def ddim_sample(
    eps_net: Callable[..., torch.Tensor],
    schedule: VPSchedule,
    x_T: torch.Tensor,
    steps: int,
    eta: float = 0.0,
    cond: dict[str, Any] | None = None,
    generator: torch.Generator | None = None,
    callback: Callback | None = None,
    clip_x0: float | None = None,
    return_trajectory: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, list[torch.Tensor]]:
    """DDIM (Song et al. 2021, Eq. 12) on ``steps`` evenly spaced timesteps, ending at ab = 1.

    x_{t'} = sqrt(ab') x0_hat + sqrt(1 - ab' - s^2) eps_hat + s z,
    s = eta sqrt((1 - ab') / (1 - ab)) sqrt(1 - ab / ab'). With ``eta = 0`` no noise is drawn.

    Parameters
    ----------
    eps_net: ``eps_net(x, t, **cond)`` with t a (B,) int64 tensor.
    x_T: (B, ...) VP sample at t = T-1 (standard normal noise).
    clip_x0: clamp x0_hat to [-clip_x0, clip_x0] (image-space DDPM practice), ``None`` = never.

    Returns
    -------
    (B, ...) sample (and the trajectory when ``return_trajectory``).
    """
    _check_init("x_T", x_T)
    if eta < 0:
        raise ValueError(f"eta must be >= 0, got {eta}")
    cond = cond or {}
    ts = schedule.timesteps(steps)
    x, traj = x_T, [x_T]
    for i, t in enumerate(ts):
        t_prev = ts[i + 1] if i + 1 < len(ts) else -1
        ab, ab_p = _ab(schedule, t, x), _ab(schedule, t_prev, x)
        eps = eps_net(x, torch.full((x.shape[0],), t, device=x.device, dtype=torch.long), **cond)
        x0 = (x - math.sqrt(1 - ab) * eps) / math.sqrt(ab)
        if clip_x0 is not None:
            x0 = x0.clamp(-clip_x0, clip_x0)
            eps = (x - math.sqrt(ab) * x0) / math.sqrt(1 - ab)
        sd = eta * math.sqrt((1 - ab_p) / (1 - ab)) * math.sqrt(max(1 - ab / ab_p, 0.0))
        x = math.sqrt(ab_p) * x0 + math.sqrt(max(1 - ab_p - sd**2, 0.0)) * eps
        if sd > 0:
            x = x + sd * torch.randn(x.shape, generator=generator, device=x.device, dtype=x.dtype)
        x = _apply(callback, i, x, _ve_sigma(ab_p), x0)
        if return_trajectory:
            traj.append(x)
    return (x, traj) if return_trajectory else x


@torch.no_grad()
def ddim_invert(
    eps_net: Callable[..., torch.Tensor],
    schedule: VPSchedule,
    x0: torch.Tensor,
    steps: int,
    cond: dict[str, Any] | None = None,
    fixed_point_iters: int = 0,
    return_trajectory: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, list[torch.Tensor]]:
    """Deterministic DDIM inversion: the eta = 0 update run from ab = 1 up to t = T-1.

    Each step maps x_t to x_{t_next} = sqrt(ab_next) x0_hat + sqrt(1 - ab_next) eps, with eps
    evaluated at the target step (t_next) on the current sample, the usual approximation
    (Dhariwal & Nichol 2021; null-text inversion); it is not the exact inverse of the eta = 0
    step, whose eps is taken at x_{t_next} itself. ``fixed_point_iters = k`` solves that implicit
    equation by k fixed-point iterations, x_{t_next} <- step(x_t, eps(x_{t_next}, t_next)), so one
    :func:`ddim_sample` step maps the result back exactly in the limit (the iteration contracts
    when the step is small compared with eps's Lipschitz scale). Cost: 1 + k network calls a step.

    Parameters
    ----------
    x0: (B, ...) clean sample (VP space).
    steps: number of timesteps, as passed to :func:`ddim_sample`.
    fixed_point_iters: refinements of each step (0 = the usual one-call inversion).

    Returns
    -------
    (B, ...) latent at t = T-1 (and the trajectory when ``return_trajectory``).
    """
    _check_init("x0", x0)
    if fixed_point_iters < 0:
        raise ValueError(f"fixed_point_iters must be >= 0, got {fixed_point_iters}")
    cond = cond or {}
    ts = schedule.timesteps(steps)[::-1]  # ascending
    x, traj = x0, [x0]
    prev = -1
    for t in ts:
        ab_p, ab = _ab(schedule, prev, x), _ab(schedule, t, x)
        tt = torch.full((x.shape[0],), t, device=x.device, dtype=torch.long)
        eps = eps_net(x, tt, **cond)
        for k in range(fixed_point_iters + 1):
            x0_hat = (x - math.sqrt(1 - ab_p) * eps) / math.sqrt(ab_p)
            x_new = math.sqrt(ab) * x0_hat + math.sqrt(1 - ab) * eps
            if k < fixed_point_iters:  # no call after the last update: its eps would go unused
                eps = eps_net(x_new, tt, **cond)
        x, prev = x_new, t
        if return_trajectory:
            traj.append(x)
    return (x, traj) if return_trajectory else x


@torch.no_grad()
def ddpm_sample(
    eps_net: Callable[..., torch.Tensor],
    schedule: VPSchedule,
    x_T: torch.Tensor,
    steps: int | None = None,
    cond: dict[str, Any] | None = None,
    generator: torch.Generator | None = None,
    callback: Callback | None = None,
    clip_x0: float | None = None,
) -> torch.Tensor:
    """Ancestral DDPM sampling (Ho et al. 2020, Algorithm 2) with posterior variance beta_tilde.

    x_{t'} = mean(x0_hat, x_t) + sqrt(beta_tilde) z, with beta = 1 - ab / ab' for the (possibly
    strided, ``steps < T``) pair t -> t' and beta_tilde = (1 - ab') / (1 - ab) beta; no noise is added
    on the last step to ab' = 1.

    Parameters
    ----------
    x_T: (B, ...) standard normal noise.
    steps: number of timesteps (default all T).

    Returns
    -------
    (B, ...) sample.
    """
    _check_init("x_T", x_T)
    cond = cond or {}
    ts = schedule.timesteps(schedule.T if steps is None else steps)  # steps=0 is an error, not 'all'
    x = x_T
    for i, t in enumerate(ts):
        t_prev = ts[i + 1] if i + 1 < len(ts) else -1
        ab, ab_p = _ab(schedule, t, x), _ab(schedule, t_prev, x)
        beta = 1 - ab / ab_p
        eps = eps_net(x, torch.full((x.shape[0],), t, device=x.device, dtype=torch.long), **cond)
        x0 = (x - math.sqrt(1 - ab) * eps) / math.sqrt(ab)
        if clip_x0 is not None:
            x0 = x0.clamp(-clip_x0, clip_x0)
        # posterior q(x_t' | x_t, x0) mean (Ho et al. 2020, Eq. 7)
        mean = (math.sqrt(ab_p) * beta / (1 - ab)) * x0 + (math.sqrt(1 - beta) * (1 - ab_p) / (1 - ab)) * x
        var = (1 - ab_p) / (1 - ab) * beta
        x = mean
        if t_prev >= 0 and var > 0:
            x = x + math.sqrt(var) * torch.randn(x.shape, generator=generator, device=x.device, dtype=x.dtype)
        x = _apply(callback, i, x, _ve_sigma(ab_p), x0)
    return x


@torch.no_grad()
def consistency_sample(
    f: Callable[..., torch.Tensor],
    shape: Sequence[int],
    sigmas: Sequence[float] = (80.0,),
    sigma_min: float = 0.002,
    cond: dict[str, Any] | None = None,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
    callback: Callback | None = None,
) -> torch.Tensor:
    """Multistep consistency sampling (Song et al. 2023, Algorithm 1).

    x = f(sigmas[0] z, sigmas[0]); then for each later sigma_i: x <- f(x + sqrt(sigma_i^2 - smin^2) z,
    sigma_i) with fresh noise z.

    Parameters
    ----------
    f: consistency function in the denoiser convention.
    shape: output shape (B, ...).
    sigmas: decreasing noise levels, all > ``sigma_min``.

    Returns
    -------
    ``shape`` tensor.
    """
    s = [float(v) for v in sigmas]
    if not s or any(not math.isfinite(v) or v <= sigma_min for v in s) or any(b >= a for a, b in itertools.pairwise(s)):
        raise ValueError(f"sigmas must be finite, strictly decreasing and > sigma_min={sigma_min}, got {s}")
    cond = cond or {}
    z = torch.randn(tuple(shape), generator=generator, device=device, dtype=dtype)
    x = s[0] * z
    for i, sig in enumerate(s):
        if i > 0:
            z = torch.randn(x.shape, generator=generator, device=x.device, dtype=x.dtype)
            x = x + math.sqrt(sig**2 - sigma_min**2) * z
        x = f(x, _full(x, sig), **cond)
        x = _apply(callback, i, x, sig, x)
    return x
