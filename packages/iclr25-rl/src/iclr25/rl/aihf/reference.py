"""Plain-torch batched soft value iteration: the specification of the fused Triton kernel."""

from __future__ import annotations

import torch

from .data import _check_count

__all__ = ["batched_soft_vi_reference", "check_soft_vi_args"]


def check_soft_vi_args(P: torch.Tensor, r: torch.Tensor, gamma: float, temp: float, iters: int) -> None:
    """Shared validation; raises ValueError/TypeError naming the argument."""
    if not isinstance(P, torch.Tensor) or not isinstance(r, torch.Tensor):
        raise TypeError(f"batched_soft_vi: P and r must be tensors, got {type(P).__name__}, {type(r).__name__}")
    if not (P.is_floating_point() and r.is_floating_point()):
        raise TypeError(f"batched_soft_vi: P and r must be floating-point tensors, got {P.dtype}, {r.dtype}")
    if P.dtype != r.dtype or P.device != r.device:
        raise ValueError(
            f"batched_soft_vi: r must have P's dtype and device, got P {P.dtype} on {P.device}, "
            f"r {r.dtype} on {r.device}; convert one, e.g. P.to(r)"
        )
    if P.ndim != 3 or P.shape[0] != P.shape[2]:
        raise ValueError(f"batched_soft_vi: P must be (S, A, S), got {tuple(P.shape)}")
    if r.ndim != 3 or tuple(r.shape[1:]) != tuple(P.shape[:2]):
        raise ValueError(f"batched_soft_vi: r must be (B, {P.shape[0]}, {P.shape[1]}), got {tuple(r.shape)}")
    if not 0 <= gamma < 1:
        raise ValueError(f"batched_soft_vi: gamma must be in [0, 1), got {gamma}")
    if not temp > 0:
        raise ValueError(f"batched_soft_vi: temp must be > 0, got {temp}")
    _check_count("batched_soft_vi", "iters", iters, 1)


def batched_soft_vi_reference(P: torch.Tensor, r: torch.Tensor, gamma: float, temp: float, iters: int) -> torch.Tensor:
    """``iters`` soft Bellman backups from V = 0 for B reward tables at once.

    V ← T·logsumexp_a((r(s,a) + γ Σ_s' P(s'|s,a) V(s')) / T)

    Parameters
    ----------
    P : (S, A, S) tensor
    r : (B, S, A) tensor, same dtype and device as P
    gamma, temp, iters : discount, temperature, number of backups

    Returns
    -------
    V : (B, S) tensor
    """
    check_soft_vi_args(P, r, gamma, temp, iters)
    B, S, A = r.shape
    Pf = P.reshape(S * A, S)
    V = torch.zeros(B, S, dtype=r.dtype, device=r.device)
    for _ in range(iters):
        Q = r + gamma * (V @ Pf.T).reshape(B, S, A)
        V = temp * torch.logsumexp(Q / temp, dim=2)
    return V
