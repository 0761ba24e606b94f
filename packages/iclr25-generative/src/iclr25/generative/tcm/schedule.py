"""ECT's shrinking Delta_t schedule (Geng et al. 2024, "sigmoid" variant) used by both TCM stages."""

from __future__ import annotations

import math
import numbers

import torch

__all__ = ["ECTSchedule"]

R_MIN = 1e-6  # the official code clips r (never to 0) so the target network is always evaluated


class ECTSchedule:
    """Delta_t(t) = t (1 - ratio)(1 + k sigmoid(-t)), ratio = min(1 - 1/q^(stage+1), ratio_limit).

    ``stage = step // double_every``; r = t - Delta_t is clipped to ``>= 1e-6`` and Delta_t is then
    recomputed as ``t - r``, so ``0 < Delta_t < t`` for every t > 1e-6 (the losses use t >= t_min).

    Parameters
    ----------
    q: shrink factor per stage (2 on CIFAR-10, 4 on ImageNet 64).
    double_every: training iterations per stage (25 000 on CIFAR-10).
    ratio_limit: cap of the ratio (0.999 CIFAR-10, 0.9961 ImageNet 64).
    k: sigmoid amplitude (8 in ECT).
    """

    def __init__(self, q: float = 2.0, double_every: int = 25_000, ratio_limit: float = 0.999, k: float = 8.0) -> None:
        if not q > 1:
            raise ValueError(f"q must be > 1, got {q}")
        if not isinstance(double_every, int) or double_every < 1:
            raise ValueError(f"double_every must be an int >= 1, got {double_every!r}")
        if not 0 < ratio_limit < 1:
            raise ValueError(f"ratio_limit must be in (0, 1), got {ratio_limit}")
        if not 0 <= k < math.inf:  # k = inf clipped r to 1e-6 at every t: Delta_t = t, no error
            raise ValueError(f"k must be a finite float >= 0, got {k}")
        self.q, self.double_every, self.ratio_limit, self.k = float(q), double_every, float(ratio_limit), float(k)

    def stage(self, step: int) -> int:
        """Stage index ``step // double_every`` (the counter continues across TCM stages)."""
        if not isinstance(step, numbers.Integral) or step < 0:
            raise ValueError(f"step must be an int >= 0, got {step!r}")
        return int(step) // self.double_every

    def ratio(self, step: int) -> float:
        """1 - 1/q^(stage+1), capped at ``ratio_limit``: 0.5, 0.75, 0.875, ... for q = 2."""
        try:
            shrink = 1.0 / self.q ** (self.stage(step) + 1)
        except OverflowError:  # stage > ~1000 at q = 2 (e.g. double_every=1): the cap was reached long ago
            shrink = 0.0
        return min(1.0 - shrink, self.ratio_limit)

    def r(self, t: torch.Tensor, step: int) -> torch.Tensor:
        """Earlier noise level r = max(t - t (1 - ratio)(1 + k sigmoid(-t)), 1e-6); t: (B,) > 0."""
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"t expects a torch.Tensor, got {type(t).__name__}")
        raw = t * (1 - (1 - self.ratio(step)) * (1 + self.k * torch.sigmoid(-t)))
        return raw.clamp_min(R_MIN)

    def delta(self, t: torch.Tensor, step: int) -> torch.Tensor:
        """Delta_t = t - r(t), same shape as ``t``."""
        return t - self.r(t, step)

    def __repr__(self) -> str:
        return f"ECTSchedule(q={self.q}, double_every={self.double_every}, ratio_limit={self.ratio_limit}, k={self.k})"
