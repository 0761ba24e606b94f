"""Denoiser wrappers: every sampler calls ``D(x, sigma, **cond) -> x0_hat`` (VE/EDM convention).

``x = x0 + sigma * n``. Raw networks are adapted to it here, never inside samplers:

* :class:`EDMPrecond` -- Karras et al. 2022, Table 1 (c_skip, c_out, c_in, c_noise = ln(sigma)/4);
* :class:`ConsistencyPrecond` -- Song et al. 2023 boundary condition D(x, sigma_min) = x;
* :class:`EpsVPDenoiser` / :class:`VDenoiser` -- discrete-time epsilon / v networks of a VP schedule;
* :class:`EpsFromDenoiser` -- the reverse adapter (a denoiser seen as an epsilon network for DDIM);
* :class:`CFGDenoiser` -- classifier-free guidance, both passes batched in one call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ._checks import as_sigma, bcast, check_batch, check_finite, check_float
from .schedules import VPSchedule

__all__ = [
    "CFGDenoiser",
    "ConsistencyPrecond",
    "EDMPrecond",
    "EpsFromDenoiser",
    "EpsVPDenoiser",
    "VDenoiser",
    "edm_coefficients",
]


def _check_x(x: torch.Tensor) -> torch.Tensor:
    check_float("x", x)
    return check_finite("x", x)


def _check_cond(x: torch.Tensor, cond: dict[str, Any]) -> None:
    for k, v in cond.items():
        if isinstance(v, torch.Tensor) and k in ("context", "context_mask", "class_labels"):
            check_batch(k, v, x.shape[0])


def edm_coefficients(sigma: torch.Tensor, sigma_data: float) -> tuple[torch.Tensor, ...]:
    """EDM preconditioning (Karras et al. 2022, Table 1).

    Parameters
    ----------
    sigma: (B,) positive tensor.
    sigma_data: data standard deviation sd.

    Returns
    -------
    c_skip, c_out, c_in, c_noise: each (B,); c_skip = sd^2/(s^2+sd^2), c_out = s sd/sqrt(s^2+sd^2),
    c_in = 1/sqrt(s^2+sd^2), c_noise = ln(s)/4.
    """
    sd2 = sigma_data**2
    c_skip = sd2 / (sigma**2 + sd2)
    c_out = sigma * sigma_data / (sigma**2 + sd2).sqrt()
    c_in = 1 / (sigma**2 + sd2).sqrt()
    c_noise = sigma.log() / 4
    return c_skip, c_out, c_in, c_noise


class EDMPrecond(nn.Module):
    """D(x; s) = c_skip x + c_out F(c_in x, c_noise, **cond).

    Parameters
    ----------
    net:
        Raw network ``F(x_in, c_noise, **cond)``; ``x_in`` has ``x``'s shape, ``c_noise`` is (B,).
    sigma_data:
        Data standard deviation (0.5 for images in [-1, 1]).
    """

    def __init__(self, net: nn.Module, sigma_data: float = 0.5) -> None:
        super().__init__()
        if not sigma_data > 0:
            raise ValueError(f"sigma_data must be > 0, got {sigma_data}")
        self.net, self.sigma_data = net, float(sigma_data)

    def coefficients(self, sigma: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """(c_skip, c_out, c_in, c_noise), each (B,)."""
        return edm_coefficients(sigma, self.sigma_data)

    def forward(self, x: torch.Tensor, sigma: float | torch.Tensor, **cond: Any) -> torch.Tensor:
        """x: (B, ...) noisy sample; sigma: scalar or (B,) > 0. Returns x0_hat with x's shape."""
        _check_x(x)
        s = as_sigma(sigma, x)
        _check_cond(x, cond)
        if x.shape[0] == 0:
            return x.clone()
        c_skip, c_out, c_in, c_noise = self.coefficients(s)
        f = self.net(bcast(c_in, x) * x, c_noise, **cond)
        return bcast(c_skip, x) * x + bcast(c_out, x) * f.to(x.dtype)


class ConsistencyPrecond(EDMPrecond):
    """Consistency-model parameterisation f(x, s) = c_skip x + c_out F(c_in x, c_noise).

    c_skip = sd^2/((s - smin)^2 + sd^2), c_out = (s - smin) sd / sqrt(s^2 + sd^2) (Song et al. 2023,
    App. C), so f(x, smin) == x exactly. ``edm_style=True`` uses the EDM coefficients instead (as
    ECT/TCM code does, relying on smin being small).
    """

    def __init__(
        self, net: nn.Module, sigma_data: float = 0.5, sigma_min: float = 0.002, edm_style: bool = False
    ) -> None:
        super().__init__(net, sigma_data)
        if not sigma_min > 0:
            raise ValueError(f"sigma_min must be > 0, got {sigma_min}")
        self.sigma_min, self.edm_style = float(sigma_min), edm_style

    def coefficients(self, sigma: torch.Tensor) -> tuple[torch.Tensor, ...]:
        if self.edm_style:
            return edm_coefficients(sigma, self.sigma_data)
        sd, d = self.sigma_data, sigma - self.sigma_min
        c_skip = sd**2 / (d**2 + sd**2)
        c_out = d * sd / (sigma**2 + sd**2).sqrt()
        c_in = 1 / (sigma**2 + sd**2).sqrt()
        return c_skip, c_out, c_in, sigma.log() / 4


class EpsVPDenoiser(nn.Module):
    """Adapt a discrete-time epsilon network of a VP schedule to the denoiser convention.

    t = schedule.t_from_sigma(sigma), x_vp = x / sqrt(1 + sigma^2), D = x - sigma * eps_net(x_vp, t).

    Parameters
    ----------
    eps_net:
        ``eps_net(x_vp, t, **cond)`` with t (B,) timesteps.
    schedule:
        The VP schedule the network was trained with.
    nearest_t:
        Round t to an integer step (for networks that index an embedding table).
    """

    def __init__(self, eps_net: Callable[..., torch.Tensor], schedule: VPSchedule, nearest_t: bool = False) -> None:
        super().__init__()
        self.eps_net, self.schedule, self.nearest_t = eps_net, schedule, nearest_t

    def _inputs(self, x: torch.Tensor, sigma: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        _check_x(x)
        s = as_sigma(sigma, x)
        t = self.schedule.t_from_sigma(s, nearest=self.nearest_t)
        x_vp = x / bcast((1 + s**2).sqrt(), x)
        return s, t, x_vp

    def forward(self, x: torch.Tensor, sigma: float | torch.Tensor, **cond: Any) -> torch.Tensor:
        """x: (B, ...) VE sample; returns x0_hat with x's shape."""
        s, t, x_vp = self._inputs(x, sigma)
        if x.shape[0] == 0:
            return x.clone()
        eps = self.eps_net(x_vp, t, **cond)
        return x - bcast(s, x) * eps


class VDenoiser(EpsVPDenoiser):
    """Adapt a v-prediction network (v = sqrt(ab) eps - sqrt(1-ab) x0) to the denoiser convention."""

    def forward(self, x: torch.Tensor, sigma: float | torch.Tensor, **cond: Any) -> torch.Tensor:
        s, t, x_vp = self._inputs(x, sigma)
        if x.shape[0] == 0:
            return x.clone()
        v = self.eps_net(x_vp, t, **cond)
        a = bcast(1 / (1 + s**2).sqrt(), x)  # sqrt(ab)
        b = bcast(s / (1 + s**2).sqrt(), x)  # sqrt(1 - ab)
        return a * x_vp - b * v


class EpsFromDenoiser(nn.Module):
    """View a denoiser as a discrete-time epsilon network ``eps(x_vp, t)`` of ``schedule``.

    sigma = schedule.sigma(t), x = x_vp sqrt(1 + sigma^2), eps = (x - D(x, sigma)) / sigma. The
    inverse of :class:`EpsVPDenoiser`; lets DDIM/DDPM samplers run on an EDM-style model.
    """

    def __init__(self, denoiser: Callable[..., torch.Tensor], schedule: VPSchedule) -> None:
        super().__init__()
        self.denoiser, self.schedule = denoiser, schedule

    def forward(self, x_vp: torch.Tensor, t: torch.Tensor | int | float, **cond: Any) -> torch.Tensor:
        """x_vp: (B, ...) VP sample; t: scalar or (B,) timestep. Returns eps_hat with x_vp's shape."""
        _check_x(x_vp)
        t = torch.as_tensor(t).detach().cpu()
        if t.dim() == 1 and t.numel() > 1 and bool((t == t[0]).all()):  # samplers pass one t per batch
            s = self.schedule.sigma(t[0]).expand(t.shape[0])
        else:
            s = self.schedule.sigma(t)
        s = as_sigma(s.to(x_vp.device, x_vp.dtype), x_vp)
        x = x_vp * bcast((1 + s**2).sqrt(), x_vp)
        return (x - self.denoiser(x, s, **cond)) / bcast(s, x)


class CFGDenoiser(nn.Module):
    """Classifier-free guidance: D = D_u + w (D_c - D_u), both passes in one batched call.

    Parameters
    ----------
    denoiser:
        Conditional denoiser ``D(x, sigma, **cond)``.
    scale:
        Guidance weight w (1 = plain conditional).
    uncond_key:
        Name of the conditioning argument replaced for the unconditional pass.
    uncond_value:
        Its unconditional value (e.g. the empty-prompt embedding (1, L, D), or the null class);
        broadcast over the batch. ``None`` uses zeros (context) -- pass the null class for labels.
    """

    def __init__(
        self,
        denoiser: Callable[..., torch.Tensor],
        scale: float,
        uncond_key: str = "context",
        uncond_value: torch.Tensor | None = None,
    ) -> None:
        super().__init__()
        self.denoiser, self.scale, self.uncond_key, self.uncond_value = denoiser, float(scale), uncond_key, uncond_value

    def forward(self, x: torch.Tensor, sigma: float | torch.Tensor, **cond: Any) -> torch.Tensor:
        _check_x(x)
        s = as_sigma(sigma, x)
        b = x.shape[0]
        if self.uncond_key not in cond:
            raise ValueError(f"CFGDenoiser needs the conditioning argument {self.uncond_key!r}; got {sorted(cond)}")
        c = cond[self.uncond_key]
        if not isinstance(c, torch.Tensor):
            raise TypeError(f"{self.uncond_key} must be a tensor for CFGDenoiser, got {type(c).__name__}")
        check_batch(self.uncond_key, c, b)
        u = torch.zeros_like(c) if self.uncond_value is None else self.uncond_value.to(c.device, c.dtype)
        try:
            u = u.expand(c.shape)
        except RuntimeError as e:
            raise ValueError(
                f"uncond_value of shape {tuple(u.shape)} does not broadcast to {self.uncond_key}'s shape "
                f"{tuple(c.shape)} (pad the unconditional embedding to the same length)"
            ) from e
        both: dict[str, Any] = {}
        for k, v in cond.items():
            if k == self.uncond_key:
                both[k] = torch.cat([u, c])
            elif isinstance(v, torch.Tensor) and v.dim() > 0 and v.shape[0] == b:
                both[k] = torch.cat([v, v])
            else:
                both[k] = v
        d = self.denoiser(torch.cat([x, x]), torch.cat([s, s]), **both)
        d_u, d_c = d[:b], d[b:]
        return d_u + self.scale * (d_c - d_u)
