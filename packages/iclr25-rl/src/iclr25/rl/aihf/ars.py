"""Augmented Random Search (Mania et al., 2018, V2-t) on a linear policy, as AIHF's MuJoCo policy optimizer.

a = clip(M (s − μ) / σ), with μ, σ running observation statistics. Each iteration evaluates ``n_dirs``
antithetic perturbations M ± ν·δ_k, keeps the ``top`` directions by max(R⁺, R⁻) and steps
M ← M + α / (top·σ_R) Σ (R⁺ − R⁻) δ_k. Returns come from any :class:`RewardModel` evaluated on the
recorded rollouts, or from the environment's own reward when ``reward is None``.

Recorded observations are the environment observation followed by the ``info_keys`` values of that
step (HalfCheetah's ``x_velocity`` lives in ``info``, not in the observation).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .data import Segment, TrajectoryDataset, _check_count
from .rewards import RewardModel

__all__ = ["ARS", "LinearPolicy"]

logger = logging.getLogger(__name__)


@dataclass
class LinearPolicy:
    """a = clip(M (s − mean) / std, low, high); M: (act_dim, obs_dim)."""

    M: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    low: np.ndarray
    high: np.ndarray

    def act(self, obs: np.ndarray) -> np.ndarray:
        """Actions for observations of shape (obs_dim,) or (T, obs_dim)."""
        z = (np.asarray(obs)[..., : self.M.shape[1]] - self.mean) / self.std
        return np.clip(z @ self.M.T, self.low, self.high)


class ARS:
    """ARS optimizer for Gymnasium continuous-control tasks.

    Parameters
    ----------
    env_id : str
        Gymnasium id (``"HalfCheetah-v5"``, ``"Hopper-v5"``).
    horizon : int
        Steps per rollout (episodes may end earlier on termination).
    n_dirs, top : int
        Directions per iteration and how many are kept.
    step, noise : float
        Step size α and perturbation scale ν (finite, > 0).
    seed : int
        Seeds perturbations and environment resets.
    gamma : float in [0, 1]
        Discount of the returns (1 = total return).
    info_keys : tuple of str
        ``info`` entries appended to the recorded observations.
    env_kwargs : dict, optional
        Keyword arguments for ``gymnasium.make`` (e.g. ``{"terminate_when_unhealthy": False}`` for Hopper).

    Attributes
    ----------
    env_steps : int
        Environment steps taken so far (all rollouts: perturbations, policy samples, evaluations).
    start_policy : LinearPolicy
        The policy the last :meth:`reset` started from (zero, or a copy of ``ref``).
    last_true_returns : ndarray
        True returns of the last :meth:`rollouts` call.
    """

    temperature = None  # deterministic linear policy: no entropy temperature to check against β

    def __init__(
        self,
        env_id: str = "HalfCheetah-v5",
        horizon: int = 200,
        n_dirs: int = 8,
        top: int = 4,
        step: float = 0.02,
        noise: float = 0.03,
        seed: int = 0,
        gamma: float = 1.0,
        info_keys: tuple[str, ...] = ("x_velocity",),
        env_kwargs: dict[str, Any] | None = None,
    ) -> None:
        # int() would silently truncate a horizon of 10.5 steps to 10
        _check_count("ARS", "horizon", horizon, 1)
        _check_count("ARS", "n_dirs", n_dirs, 1)
        _check_count("ARS", "top", top, 1)
        if top > n_dirs:
            raise ValueError(f"ARS: top must be <= n_dirs, got top={top}, n_dirs={n_dirs}")
        for name, value in (("step", step), ("noise", noise)):
            # an infinite step or perturbation turns M into inf/NaN and every later action into garbage
            if not 0 < value < math.inf:
                raise ValueError(f"ARS: {name} must be a finite float > 0, got {value}")
        if not 0 <= gamma <= 1:
            # NaN made every score NaN, so no iteration ever stepped (σ_R > 0 is False), without a word
            raise ValueError(f"ARS: gamma must be in [0, 1], got {gamma}")
        import gymnasium as gym

        # The unwrapped env skips the checker/time-limit wrappers (we cap the horizon ourselves): ~2x faster.
        self.env = gym.make(env_id, **(env_kwargs or {})).unwrapped
        self.env_id, self.horizon, self.n_dirs, self.top = env_id, int(horizon), int(n_dirs), int(top)
        self.step, self.noise, self.seed, self.gamma, self.info_keys = step, noise, seed, float(gamma), info_keys
        self.obs_dim = int(np.prod(self.env.observation_space.shape))
        self.act_dim = int(np.prod(self.env.action_space.shape))
        self.low, self.high = self.env.action_space.low, self.env.action_space.high
        self.env_steps = 0
        self.env_seconds = 0.0
        self.reset(self.horizon, seed)

    @property
    def fixed_horizon(self) -> int:
        return self.horizon

    def reset(
        self,
        horizon: int,
        seed: int = 0,
        ref: LinearPolicy | None = None,
        temperature: float | None = None,
        from_ref: bool = True,
    ):
        """Zero policy (or a copy of ``ref``) with fresh statistics; ``temperature`` > 0 penalizes ‖a − ref(s)‖².

        ``from_ref=False`` starts from the zero policy even when ``ref`` is given, which then only anchors.
        """
        if horizon != self.horizon:
            raise ValueError(f"ARS: horizon {horizon} != the optimizer's rollout horizon {self.horizon}")
        self._rng = np.random.default_rng(seed)
        start = ref if from_ref else None
        self.M = np.zeros((self.act_dim, self.obs_dim)) if start is None else start.M.copy()
        self._n = 0
        self._sum = np.zeros(self.obs_dim)
        self._sumsq = np.zeros(self.obs_dim)
        self.mean = np.zeros(self.obs_dim) if start is None else start.mean.copy()
        self.std = np.ones(self.obs_dim) if start is None else start.std.copy()
        self._ref, self._kl = ref, float(temperature or 0.0)
        # Kept so callers can check which policy a run started from (a fair comparison starts both arms alike).
        self.start_policy = self.policy
        return self

    @property
    def policy(self) -> LinearPolicy:
        """The current linear policy (a copy)."""
        # low/high too: they are the environment's action_space arrays, which clip every later rollout
        return LinearPolicy(self.M.copy(), self.mean.copy(), self.std.copy(), self.low.copy(), self.high.copy())

    def check_actions(self, acts: np.ndarray, name: str) -> None:
        """ValueError if the actions are not (T, act_dim) or any lies outside the environment's Box."""
        a = np.asarray(acts, dtype=float)
        if a.ndim == 0 or int(np.prod(a.shape[1:])) != self.act_dim:
            raise ValueError(f"{name}: actions must have shape (T, {self.act_dim}), got {a.shape}")
        a = a.reshape(len(a), self.act_dim)
        bad = ((a < self.low - 1e-9) | (a > self.high + 1e-9)).any(1)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(f"{name}: action at index {i} lies outside [{self.low.min()}, {self.high.max()}]")

    def _rollout(self, M: np.ndarray, action_noise: float = 0.0) -> tuple[Segment, float, np.ndarray]:
        t0 = time.perf_counter()
        obs, _ = self.env.reset(seed=int(self._rng.integers(2**31)))
        rec, acts, true_ret, raw = [], [], 0.0, []
        for t in range(self.horizon):
            a = np.clip(M @ ((obs - self.mean) / self.std), self.low, self.high)
            if action_noise:
                a = np.clip(a + action_noise * self._rng.standard_normal(self.act_dim), self.low, self.high)
            nxt, r, term, trunc, info = self.env.step(a)
            raw.append(obs)
            rec.append(np.concatenate([obs, [float(info.get(k, 0.0)) for k in self.info_keys]]))
            acts.append(a)
            true_ret += self.gamma**t * float(r)
            obs = nxt
            if term or trunc:
                break
        self.env_steps += len(acts)
        self.env_seconds += time.perf_counter() - t0
        return (np.asarray(rec), np.asarray(acts)), true_ret, np.asarray(raw)

    def _score(self, seg: Segment, true_ret: float, reward: RewardModel | None) -> float:
        if reward is None:
            ret = true_ret
        else:
            with torch.no_grad():
                r = reward(*seg).double().cpu().numpy()
            ret = float((self.gamma ** np.arange(len(r))) @ r)
        if self._kl and self._ref is not None:
            ret -= self._kl * float(((seg[1] - self._ref.act(seg[0])) ** 2).sum())
        return ret

    def improve(self, reward: RewardModel | None, n_steps: int) -> None:
        """``n_steps`` ARS iterations on ``reward`` (None: the environment's true reward)."""
        for _ in range(n_steps):
            deltas = self._rng.standard_normal((self.n_dirs, *self.M.shape))
            plus, minus, states = np.zeros(self.n_dirs), np.zeros(self.n_dirs), []
            for k in range(self.n_dirs):
                for sign, store in ((1.0, plus), (-1.0, minus)):
                    seg, tr, raw = self._rollout(self.M + sign * self.noise * deltas[k])
                    store[k] = self._score(seg, tr, reward)
                    states.append(raw)
            keep = np.argsort(-np.maximum(plus, minus))[: self.top]
            sigma = np.concatenate([plus[keep], minus[keep]]).std()
            if sigma > 1e-12:  # all returns equal (e.g. θ = 0): no information, no step
                self.M += self.step / (self.top * sigma) * np.tensordot(plus[keep] - minus[keep], deltas[keep], 1)
            self._update_stats(np.concatenate(states))

    def _update_stats(self, states: np.ndarray) -> None:
        self._n += len(states)
        self._sum += states.sum(0)
        self._sumsq += (states**2).sum(0)
        self.mean = self._sum / self._n
        self.std = np.sqrt(np.maximum(self._sumsq / self._n - self.mean**2, 1e-8))

    def rollouts(self, n: int, seed: int | None = None, action_noise: float = 0.0) -> list[Segment]:
        """``n`` rollouts of the current policy; true returns are kept in ``last_true_returns``.

        With ``seed`` the draws come from a generator of their own, so a seeded evaluation (e.g. in an
        :meth:`AIHF.fit` callback) leaves the training stream where it was; without, they continue that stream.
        """
        train_rng = self._rng
        if seed is not None:
            # reseeding the training stream here made every later perturbation depend on the evaluation seed
            self._rng = np.random.default_rng(seed)
        try:
            out, rets = [], []
            for _ in range(n):
                seg, tr, _ = self._rollout(self.M, action_noise)
                out.append(seg)
                rets.append(tr)
        finally:
            if seed is not None:
                self._rng = train_rng
        self.last_true_returns = np.asarray(rets)
        return out

    def policy_return(self, reward: RewardModel, n_rollouts: int) -> torch.Tensor:
        """Monte-Carlo E_{τ∼π}[R_θ(τ)] over ``n_rollouts`` rollouts, differentiable in θ."""
        return reward.prepare(self.rollouts(n_rollouts), self.gamma, "policy rollouts")().mean()

    def behavior_clone(self, demos: TrajectoryDataset) -> LinearPolicy:
        """Least-squares linear policy on normalized demonstration observations (SFT)."""
        s = np.asarray(demos.obs, dtype=float)[:, : self.obs_dim]
        mean, std = s.mean(0), np.maximum(s.std(0), 1e-4)
        z = (s - mean) / std
        sol = np.linalg.lstsq(z, np.asarray(demos.acts, dtype=float), rcond=None)[0]
        return LinearPolicy(sol.T, mean, std, self.low, self.high)

    def close(self) -> Any:
        return self.env.close()
