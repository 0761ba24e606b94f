"""One- and few-step sampling of (truncated) consistency models via the core sampler."""

from __future__ import annotations

import contextlib
import numbers
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch

from iclr25.core.modes import eval_mode
from iclr25.generative.diffusion import samplers

from .model import TruncatedCM

__all__ = ["consistency_sample"]


def consistency_sample(
    f: Callable[..., torch.Tensor],
    shape: Sequence[int],
    sigmas: Sequence[float] = (80.0,),
    generator: torch.Generator | None = None,
    cond: dict[str, Any] | None = None,
    sigma_min: float = 0.002,
    device: torch.device | str | None = None,
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """Multistep consistency sampling: x = f(T z, T), then x = f(x + sqrt(t_i^2 - eps^2) z, t_i).

    ``sigmas=(80.,)`` is 1-step sampling; ``(80., t_mid)`` is 2-step. For a :class:`TruncatedCM`,
    an intermediate level below t' is answered by the stage-1 teacher (a warning says so).

    Parameters
    ----------
    f: consistency function ``f(x, t, **cond)``.
    shape: output shape (B, ...).
    sigmas: strictly decreasing noise levels, all > ``sigma_min``; the first is T.
    device, dtype: of the noise and samples; default those of ``f``'s parameters (a module),
        else the default device and float32.

    Returns
    -------
    ``shape`` tensor of samples.
    """
    if isinstance(shape, (int, torch.Tensor)) or not all(isinstance(n, numbers.Integral) and n >= 0 for n in shape):
        raise TypeError(f"shape expects a sequence of ints (B, ...), e.g. (500, 2), got {shape!r}")
    if isinstance(sigmas, (int, float)) or (isinstance(sigmas, torch.Tensor) and sigmas.dim() != 1):
        raise TypeError(f"sigmas expects a sequence of noise levels, e.g. (80.0,) or (80.0, 1.0), got {sigmas!r}")
    if isinstance(f, TruncatedCM) and any(float(s) < f.t_prime for s in sigmas):
        warnings.warn(
            f"consistency_sample: levels {[float(s) for s in sigmas if float(s) < f.t_prime]} are below "
            f"t'={f.t_prime}; the stage-1 teacher is used there, not the truncated student",
            stacklevel=2,
        )
    p = next(f.parameters(), None) if isinstance(f, torch.nn.Module) else None
    if device is None and p is not None:
        device = p.device
    if dtype is None:
        dtype = p.dtype if p is not None and p.is_floating_point() else torch.float32
    # each submodule's own flag is restored: f.train(mode) would also switch on submodules the
    # caller keeps in eval mode (a frozen encoder, BatchNorm statistics) mid-training
    with eval_mode(f) if isinstance(f, torch.nn.Module) else contextlib.nullcontext(), torch.no_grad():
        return samplers.consistency_sample(
            f, shape, sigmas, sigma_min=sigma_min, cond=cond, generator=generator, device=device, dtype=dtype
        )
