"""Plain-torch update equations and time loops: the specification the Triton kernels are tested against.

Per element, step k (``α = exp(-Δt/τ_m)``, ``c = 1 - α`` or ``1``)::

    LIF   h_k = α v_{k-1} + c I_k ;  s_k = H(h_k - θ) ;  v_k = reset(h_k, s_k)
          soft: h - θ s    hard: h (1 - s) + v_reset s    none: h
    ALIF  b_k = ρ b_{k-1} + (1 - ρ) s_{k-1} ;  B_k = b0 + β b_k
          v_k = α v_{k-1} + (1 - α) I_k - B_k s_{k-1} Δt ;  s_k = H(v_k - B_k)   (strict >)
    GIF   u_t = u_{t-1} + I_t ;  s_t = clip(⌊u_t/θ + r⌋, lo, hi)   (r = 0 floor, 1/2 round half up)
          u_t ← u_t − θ s_t (soft) | u_t · 1[s_t = 0] (hard)

The ALIF reset subtracts ``B_k s_{k-1}`` at the start of step k, as RSNN_bfd's ``mem_update_adp``.
"""

from __future__ import annotations

from typing import Any

import torch

from .surrogates import Surrogate, _SpikeFunction

__all__ = [
    "alif_multistep_reference",
    "alif_update",
    "gif_encode_reference",
    "gif_update",
    "lif_multistep_reference",
    "lif_update",
]


def lif_update(
    x: torch.Tensor,
    v: torch.Tensor,
    alpha: torch.Tensor | float,
    threshold: float | torch.Tensor,
    reset: str,
    v_reset: float,
    input_scale: str,
    surrogate: Surrogate,
    detach_reset: bool,
    inclusive: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One LIF step without validation: returns ``(s_k, v_k)``."""
    c = (1.0 - alpha) if input_scale == "one_minus_alpha" else 1.0
    h = alpha * v + c * x
    s = _SpikeFunction.apply(h - threshold, surrogate, inclusive)
    sr = s.detach() if detach_reset else s
    if reset == "soft":
        v_new = h - threshold * sr
    elif reset == "hard":
        v_new = h * (1.0 - sr) + v_reset * sr
    else:
        v_new = h
    return s, v_new


def lif_multistep_reference(
    x: torch.Tensor,
    v0: torch.Tensor,
    alpha: torch.Tensor,
    threshold: float,
    reset: str,
    v_reset: float,
    input_scale: str,
    surrogate: Surrogate,
    detach_reset: bool,
    inclusive: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """LIF over ``x: (T, ...)`` from ``v0: x.shape[1:]``; returns ``(spikes (T, ...), v_T)``."""
    v = v0
    out = []
    for k in range(x.shape[0]):
        s, v = lif_update(x[k], v, alpha, threshold, reset, v_reset, input_scale, surrogate, detach_reset, inclusive)
        out.append(s)
    spikes = torch.stack(out) if out else x.new_zeros(x.shape)
    return spikes, v


def alif_update(
    x: torch.Tensor,
    v: torch.Tensor,
    s: torch.Tensor,
    b: torch.Tensor,
    alpha: torch.Tensor,
    rho: torch.Tensor,
    b0: float,
    beta: float,
    dt: float,
    surrogate: Surrogate,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One ALIF step without validation: returns ``(s_k, v_k, b_k)``."""
    b = rho * b + (1.0 - rho) * s
    big_b = b0 + beta * b
    v = v * alpha + (1.0 - alpha) * x - big_b * s * dt
    s = _SpikeFunction.apply(v - big_b, surrogate, False)
    return s, v, b


def alif_multistep_reference(
    x: torch.Tensor,
    v0: torch.Tensor,
    s0: torch.Tensor,
    b_init: torch.Tensor,
    alpha: torch.Tensor,
    rho: torch.Tensor,
    b0: float,
    beta: float,
    dt: float,
    surrogate: Surrogate,
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """ALIF over ``x: (T, ...)``; returns ``(spikes (T, ...), (v_T, s_T, b_T))``."""
    v, s, b = v0, s0, b_init
    out = []
    for k in range(x.shape[0]):
        s, v, b = alif_update(x[k], v, s, b, alpha, rho, b0, beta, dt, surrogate)
        out.append(s)
    spikes = torch.stack(out) if out else x.new_zeros(x.shape)
    return spikes, (v, s, b)


class _GIFLevel(torch.autograd.Function):
    """``clip(⌊u/θ + offset⌋, lo, hi)`` with the straight-through or edge-summed surrogate backward."""

    @staticmethod
    def forward(
        ctx: Any, u: torch.Tensor, theta: torch.Tensor, lo: int, hi: int, offset: float, surrogate: Surrogate
    ) -> torch.Tensor:
        ctx.save_for_backward(u, theta)
        ctx.cfg = (lo, hi, offset, surrogate)
        return torch.clamp(torch.floor(u / theta + offset), lo, hi)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[Any, ...]:
        u, theta = ctx.saved_tensors
        lo, hi, offset, surrogate = ctx.cfg
        z = u / theta
        if surrogate.name == "ste":
            d = ((z >= lo - offset) & (z < hi + 1 - offset)).to(u.dtype)
        else:
            d = sum(surrogate.derivative(z - k + offset) for k in range(lo + 1, hi + 1))
        gu = g * d / theta
        gtheta = None
        if ctx.needs_input_grad[1]:
            gtheta = (-(g * d) * u / (theta * theta)).sum_to_size(theta.shape)
        return gu, gtheta, None, None, None, None


def gif_update(
    x: torch.Tensor,
    u: torch.Tensor | None,
    theta: torch.Tensor,
    lo: int,
    hi: int,
    offset: float,
    reset: str,
    surrogate: Surrogate,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One GIF step without validation (``u = None``: empty membrane); returns ``(s_t, u_t)``."""
    u = x if u is None else u + x
    s = _GIFLevel.apply(u, theta, lo, hi, offset, surrogate)
    u = u - theta * s if reset == "soft" else u * (s == 0).to(u.dtype)
    return s, u


def gif_encode_reference(
    x: torch.Tensor,
    theta: torch.Tensor,
    steps: int,
    lo: int,
    hi: int,
    offset: float,
    constant: bool,
    reset: str,
    surrogate: Surrogate,
) -> torch.Tensor:
    """GIF encoding of ``x: (...)`` over ``steps`` steps; returns spikes ``(steps, ...)``.

    ``constant``: ``x`` is injected every step; otherwise only at the first (then zero input).
    ``theta`` broadcasts to ``x``; ``offset`` is 0 (floor) or 1/2 (round half up).
    """
    u = None
    zeros = x if constant else x.new_zeros(x.shape)
    out = []
    for t in range(steps):
        s, u = gif_update(x if t == 0 else zeros, u, theta, lo, hi, offset, reset, surrogate)
        out.append(s)
    return torch.stack(out)
