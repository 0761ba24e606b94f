"""Reward models r(s, a; θ) and discounted segment returns R_θ(τ) = Σ_t γ^t r(s_t, a_t; θ)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch import nn

from .data import Segment, _check_count

__all__ = ["LinearReward", "MLPReward", "RewardModel"]


class RewardModel(nn.Module):
    """Base class: per-step rewards ``forward(obs, acts) -> (T,)`` and batched segment returns."""

    def forward(self, obs: np.ndarray, acts: np.ndarray) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def prepare(self, segments: Sequence[Segment], gamma: float, name: str = "segments") -> Callable[[], torch.Tensor]:
        """Precompute what does not depend on θ; the returned closure gives R_θ of every segment, shape (N,).

        The returns are on the parameters' device. :class:`LinearReward` raises ValueError naming ``name`` and
        the segment index when a feature is NaN or inf; this base version checks nothing itself (the datasets
        already reject non-finite observations and actions), a subclass may override ``_check``.
        """
        if not segments:
            return lambda: torch.zeros(0, dtype=self.dtype, device=self.device)
        obs = np.concatenate([o for o, _ in segments])
        acts = np.concatenate([a for _, a in segments])
        seg = np.concatenate([np.full(len(o), k) for k, (o, _) in enumerate(segments)])
        disc = np.concatenate([gamma ** np.arange(len(o)) for o, _ in segments])
        seg_t = torch.as_tensor(seg, device=self.device)
        w = torch.as_tensor(disc, dtype=self.dtype, device=self.device)
        n = len(segments)
        self._check(obs, acts, seg, name)

        def returns() -> torch.Tensor:
            return torch.zeros(n, dtype=self.dtype, device=self.device).index_add(0, seg_t, w * self(obs, acts))

        return returns

    def _check(self, obs: np.ndarray, acts: np.ndarray, seg: np.ndarray, name: str) -> None:
        pass

    @property
    def dtype(self) -> torch.dtype:
        return next(self.parameters()).dtype

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device


class LinearReward(RewardModel):
    """r(s, a; θ) = θᵀ φ(s, a).

    Parameters
    ----------
    feature_fn : callable
        ``feature_fn(obs (T, ...), acts (T, ...)) -> (T, dim)`` array or tensor.
    dim : int
        Feature dimension.
    dtype : torch.dtype
        Parameter dtype (float64 by default: the tabular identities are checked to 1e-5).
    """

    def __init__(self, feature_fn: Callable, dim: int, dtype: torch.dtype = torch.float64) -> None:
        super().__init__()
        if not callable(feature_fn):
            raise TypeError(f"LinearReward: feature_fn must be callable, got {type(feature_fn).__name__}")
        # int() used to truncate dim=2.5 to 2 (and accept the string "3")
        _check_count("LinearReward", "dim", dim, 1)
        self.feature_fn, self.dim = feature_fn, int(dim)
        self.theta = nn.Parameter(torch.zeros(self.dim, dtype=dtype))

    def features(self, obs: np.ndarray, acts: np.ndarray) -> torch.Tensor:
        """φ(s, a), shape (T, dim), on θ's device."""
        f = torch.as_tensor(self.feature_fn(obs, acts), dtype=self.theta.dtype, device=self.theta.device)
        if f.ndim != 2 or f.shape[1] != self.dim:
            raise ValueError(f"LinearReward: feature_fn must return (T, {self.dim}), got {tuple(f.shape)}")
        return f

    def forward(self, obs: np.ndarray, acts: np.ndarray) -> torch.Tensor:
        return self.features(obs, acts) @ self.theta

    def prepare(self, segments: Sequence[Segment], gamma: float, name: str = "segments") -> Callable[[], torch.Tensor]:
        # Linear: R_θ(τ) = θᵀ Φ(τ) with Φ the discounted feature sum, computed once.
        phi = self.discounted_features(segments, gamma, name)
        return lambda: phi @ self.theta

    def discounted_features(self, segments: Sequence[Segment], gamma: float, name: str = "segments") -> torch.Tensor:
        """Φ(τ) = Σ_t γ^t φ(s_t, a_t) per segment, shape (N, dim); ValueError on NaN/inf naming the index."""
        if not segments:
            return torch.zeros(0, self.dim, dtype=self.theta.dtype, device=self.theta.device)
        seg = np.concatenate([np.full(len(o), k) for k, (o, _) in enumerate(segments)])
        f = self.features(np.concatenate([o for o, _ in segments]), np.concatenate([a for _, a in segments]))
        bad = ~torch.isfinite(f).all(1)
        if bad.any():
            raise ValueError(f"{name}: features of segment {int(seg[int(bad.nonzero()[0])])} contain NaN or inf")
        disc = np.concatenate([gamma ** np.arange(len(o)) for o, _ in segments])
        disc = torch.as_tensor(disc, dtype=f.dtype, device=f.device)
        out = torch.zeros(len(segments), self.dim, dtype=f.dtype, device=f.device)
        return out.index_add(0, torch.as_tensor(seg, device=f.device), disc[:, None] * f)


class MLPReward(RewardModel):
    """r(s, a; θ) = MLP([obs, acts]).

    Parameters
    ----------
    obs_dim, act_dim : int
        Flattened observation and action sizes.
    hidden : tuple of int
        Hidden widths (tanh activations).
    dtype : torch.dtype
        Parameter dtype (float64 by default).
    """

    def __init__(
        self, obs_dim: int, act_dim: int, hidden: Sequence[int] = (64, 64), dtype: torch.dtype = torch.float64
    ) -> None:
        super().__init__()
        # int() used to truncate obs_dim=2.5 to a 2-wide input layer
        _check_count("MLPReward", "obs_dim", obs_dim, 1)
        _check_count("MLPReward", "act_dim", act_dim, 0)
        self.obs_dim, self.act_dim = int(obs_dim), int(act_dim)
        layers: list[nn.Module] = []
        width = self.obs_dim + self.act_dim
        for h in hidden:
            layers += [nn.Linear(width, h, dtype=dtype), nn.Tanh()]
            width = h
        layers.append(nn.Linear(width, 1, dtype=dtype))
        self.net = nn.Sequential(*layers)

    def forward(self, obs: np.ndarray | torch.Tensor, acts: np.ndarray | torch.Tensor) -> torch.Tensor:
        # as_tensor, not np.asarray: tensor inputs keep their graph (input gradients), and numpy inputs land on
        # the parameters' device, so the module works after .to(device)
        o = torch.as_tensor(obs, dtype=self.dtype, device=self.device).reshape(len(obs), -1)
        a = torch.as_tensor(acts, dtype=self.dtype, device=self.device).reshape(len(acts), -1)
        if o.shape[1] != self.obs_dim or a.shape[1] != self.act_dim:
            raise ValueError(
                f"MLPReward: expected obs (T, {self.obs_dim}) and acts (T, {self.act_dim}), "
                f"got {tuple(o.shape)} and {tuple(a.shape)}"
            )
        return self.net(torch.cat([o, a], dim=1)).squeeze(-1)
