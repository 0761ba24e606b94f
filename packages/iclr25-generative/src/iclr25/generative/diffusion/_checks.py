"""Input validation shared by the diffusion core (errors name the argument, expected and given)."""

from __future__ import annotations

import torch

__all__ = ["as_sigma", "check_batch", "check_finite", "check_float"]


def check_float(name: str, x: object, min_dim: int = 1) -> torch.Tensor:
    """Raise TypeError unless ``x`` is a floating-point tensor with at least ``min_dim`` dims."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} expects a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{name} expects floating point values, got dtype {x.dtype}")
    if x.dim() < min_dim:
        raise ValueError(f"{name} must have at least {min_dim} dims, got shape {tuple(x.shape)}")
    return x


def check_finite(name: str, x: torch.Tensor) -> torch.Tensor:
    """Raise ValueError when ``x`` holds NaN or infinity."""
    if x.numel() and not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name} must be finite, got non-finite values (NaN or inf)")
    return x


def as_sigma(sigma: float | torch.Tensor, x: torch.Tensor, name: str = "sigma", positive: bool = True) -> torch.Tensor:
    """Noise level(s) as a ``(B,)`` tensor on ``x``'s device and dtype, validated.

    Accepts a Python number, a 0-d tensor or a ``(B,)`` tensor, where ``B = x.shape[0]``.
    """
    if isinstance(sigma, torch.Tensor):
        if sigma.is_complex():
            raise TypeError(f"{name} expects real values, got dtype {sigma.dtype}")
        s = sigma.to(device=x.device, dtype=x.dtype)
    elif isinstance(sigma, (int, float)):
        s = torch.tensor(float(sigma), device=x.device, dtype=x.dtype)
    else:
        raise TypeError(f"{name} expects a float or a tensor, got {type(sigma).__name__}")
    if s.dim() == 0:
        s = s.expand(x.shape[0])
    elif s.dim() != 1 or s.shape[0] != x.shape[0]:
        raise ValueError(f"{name} must be a scalar or have shape ({x.shape[0]},), got {tuple(s.shape)}")
    check_finite(name, s)
    if positive and s.numel() and bool((s <= 0).any()):
        raise ValueError(f"{name} must be > 0, got min {float(s.min())}")
    return s


def check_batch(name: str, t: torch.Tensor | None, batch: int) -> None:
    """Raise ValueError when a conditioning tensor's batch differs from ``batch``."""
    if t is not None and (t.dim() == 0 or t.shape[0] != batch):
        raise ValueError(f"{name} batch must match x batch {batch}, got shape {tuple(t.shape)}")


def bcast(v: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """A ``(B,)`` tensor reshaped to broadcast against ``x`` (B, ...)."""
    return v.reshape(-1, *([1] * (x.dim() - 1)))
