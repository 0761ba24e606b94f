"""Exact tabular tools: a slippery gridworld, soft value iteration, occupancies, and the SoftVI optimizer.

Everything here is exact (no sampling) unless a method says it samples, so the AIHF gradient identity
and fixed points can be checked to round-off.
"""

from __future__ import annotations

import numpy as np
import torch

from .data import Segment, TrajectoryDataset, _check_count
from .rewards import RewardModel

__all__ = ["GridWorld", "SoftVI", "occupancy", "soft_value_iteration"]

_MOVES = np.array([[0, 0], [-1, 0], [1, 0], [0, -1], [0, 1]])  # stay, up, down, left, right


class GridWorld:
    """n×n gridworld with 5 actions, slip probability and RBF state features.

    With probability ``1 - slip`` the intended move happens, otherwise a uniformly random action
    (moves into a wall stay put). The initial state is uniform. Observations are integer state ids.

    Parameters
    ----------
    n : int
        Side length (n² states).
    slip : float in [0, 1]
        Probability of a random action.
    n_features : int
        Number of Gaussian RBF features φ_k(s) = exp(−‖s − c_k‖² / 2), centres drawn with ``seed``.
    seed : int
        Seed of the feature centres.

    Attributes
    ----------
    P : (S, A, S) float64 array
        Transition probabilities.
    phi : (S, n_features) float64 array
        State features.
    mu0 : (S,) float64 array
        Initial-state distribution.
    """

    n_actions = 5

    def __init__(self, n: int = 5, slip: float = 0.1, n_features: int = 6, seed: int = 0) -> None:
        # a float n or n_features used to fail deep inside NumPy without naming the argument
        _check_count("GridWorld", "n", n, 2)
        if not 0.0 <= slip <= 1.0:
            raise ValueError(f"GridWorld: slip must be in [0, 1], got {slip}")
        _check_count("GridWorld", "n_features", n_features, 1)
        self.n, self.slip, self.n_features = n, float(slip), n_features
        S, A = n * n, self.n_actions
        self.n_states = S
        coords = np.array([(i, j) for i in range(n) for j in range(n)])
        det = np.zeros((S, A, S))
        for s, (i, j) in enumerate(coords):
            for a, (di, dj) in enumerate(_MOVES):
                ii, jj = min(max(i + di, 0), n - 1), min(max(j + dj, 0), n - 1)
                det[s, a, ii * n + jj] = 1.0
        self.P = (1 - slip) * det + slip * det.mean(axis=1, keepdims=True)
        centres = np.random.default_rng(seed).uniform(0, n - 1, size=(n_features, 2))
        self.phi = np.exp(-0.5 * ((coords[:, None, :] - centres[None]) ** 2).sum(-1))
        self.mu0 = np.full(S, 1.0 / S)

    def features(self, obs: np.ndarray, acts: np.ndarray) -> np.ndarray:
        """φ(s, a) = φ(s), shape (T, n_features); ``feature_fn`` for :class:`LinearReward`."""
        return self.phi[self.check_states(obs, "GridWorld.features")]

    def check_states(self, obs: np.ndarray, name: str) -> np.ndarray:
        """``obs`` as int64 state ids; ValueError unless every one is an integer in [0, n_states)."""
        o = np.asarray(obs)
        bad = (o != np.round(o)) | (o < 0) | (o >= self.n_states)
        if bad.any():
            raise ValueError(f"{name}: obs must be integer state ids in [0, {self.n_states}), got {o[bad][0]}")
        return o.astype(np.int64)

    def all_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """Every (state, action) pair in row-major (S, A) order, as two (S·A,) arrays."""
        S, A = self.n_states, self.n_actions
        return np.repeat(np.arange(S), A), np.tile(np.arange(A), S)

    def rollouts(self, policy: np.ndarray, n: int, horizon: int, seed: int = 0) -> list[Segment]:
        """Sample ``n`` episodes of length ``horizon`` from a (S, A) stochastic policy."""
        rng = np.random.default_rng(seed)
        S, A = self.n_states, self.n_actions
        policy = np.asarray(policy, dtype=float)
        if policy.shape != (S, A):
            raise ValueError(f"GridWorld.rollouts: policy must be an (S, A) = ({S}, {A}) array, got {policy.shape}")
        if not (np.all(policy >= 0) and np.allclose(policy.sum(1), 1.0, rtol=0, atol=1e-6)):
            raise ValueError("GridWorld.rollouts: policy rows must be probability distributions (>= 0, sum 1)")
        cum_pi, cum_P = np.cumsum(policy, 1), np.cumsum(self.P, 2)
        s = rng.choice(S, size=n, p=self.mu0)
        obs, acts = np.zeros((n, horizon), np.int64), np.zeros((n, horizon), np.int64)
        for t in range(horizon):
            a = np.minimum((rng.random((n, 1)) > cum_pi[s]).sum(1), A - 1)
            obs[:, t], acts[:, t] = s, a
            s = np.minimum((rng.random((n, 1)) > cum_P[s, a]).sum(1), S - 1)
        return [(obs[k], acts[k]) for k in range(n)]

    def check_actions(self, acts: np.ndarray, name: str) -> None:
        """ValueError unless every action is an integer in [0, 5)."""
        a = np.asarray(acts)
        bad = (a != np.round(a)) | (a < 0) | (a >= self.n_actions)
        if bad.any():
            raise ValueError(f"{name}: actions must be integers in [0, {self.n_actions}), got {a[bad][0]}")


def soft_value_iteration(
    P: np.ndarray | torch.Tensor,
    r: np.ndarray | torch.Tensor,
    gamma: float,
    temp: float,
    iters: int = 300,
    V0: np.ndarray | torch.Tensor | None = None,
    ref: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Soft (entropy- or KL-regularized) value iteration, differentiable in ``r``.

    Q(s,a) = r(s,a) + γ Σ_s' P(s'|s,a) V(s'),  V(s) = T log Σ_a ref(a|s) exp(Q(s,a)/T)
    (ref = None: plain log-sum-exp, the entropy-regularized case), π(a|s) = ref(a|s) exp((Q − V)/T).

    Parameters
    ----------
    P : (S, A, S) transitions.
    r : (S, A) rewards (a tensor with grad gives gradients through all iterations).
    gamma : discount in [0, 1).
    temp : temperature T > 0 (β in the paper, or the KL weight).
    iters : number of backups, >= 1.
    V0 : (S,) warm start (array or tensor), default zeros.
    ref : (S, A) reference policy for the KL-regularized case.

    Returns
    -------
    Q : (S, A), V : (S,), pi : (S, A)
        float64 (the tabular tools are exact), on ``r``'s device (CPU for a numpy ``r``).
    """
    if not 0 <= gamma < 1:
        raise ValueError(f"soft_value_iteration: gamma must be in [0, 1), got {gamma}")
    if not temp > 0:
        raise ValueError(f"soft_value_iteration: temp must be > 0, got {temp}")
    _check_count("soft_value_iteration", "iters", iters, 1)  # 0 used to run one backup anyway
    r = torch.as_tensor(r, dtype=torch.float64)
    # numpy P (every GridWorld's) must follow a CUDA r rather than stay on the CPU
    P = torch.as_tensor(P, dtype=r.dtype, device=r.device)
    if P.ndim != 3 or r.shape != P.shape[:2] or P.shape[0] != P.shape[2]:
        raise ValueError(f"soft_value_iteration: need P (S, A, S) and r (S, A), got {tuple(P.shape)}, {tuple(r.shape)}")
    log_ref = None
    if ref is not None:
        log_ref = torch.log(torch.as_tensor(ref, dtype=r.dtype, device=r.device).clamp_min(1e-300))
    # as_tensor: a numpy V0 (SoftVI keeps its values as numpy) is taken like a numpy P, r or ref
    V = torch.zeros(P.shape[0], dtype=r.dtype, device=r.device) if V0 is None else torch.as_tensor(V0).to(r)
    Q = r
    for _ in range(iters):
        Q = r + gamma * (P @ V)
        z = Q / temp if log_ref is None else Q / temp + log_ref
        V = temp * torch.logsumexp(z, dim=1)
    z = Q / temp if log_ref is None else Q / temp + log_ref
    pi = torch.softmax(z, dim=1)
    return Q, V, pi


def _occupancy_np(P: np.ndarray, pi: np.ndarray, mu0: np.ndarray, gamma: float, horizon: int | None) -> np.ndarray:
    P_pi = np.einsum("sa,sat->st", pi, P)  # state-to-state kernel under π
    if horizon is None:
        ds = np.linalg.solve(np.eye(len(mu0)) - gamma * P_pi.T, mu0)
        return ds[:, None] * pi
    d, total = np.asarray(mu0, dtype=float), np.zeros(len(mu0))
    for t in range(horizon):
        total += gamma**t * d
        d = d @ P_pi
    return total[:, None] * pi


def occupancy(
    P: np.ndarray | torch.Tensor,
    pi: np.ndarray | torch.Tensor,
    mu0: np.ndarray | torch.Tensor,
    gamma: float,
    horizon: int | None = None,
) -> torch.Tensor:
    """Discounted state-action occupancy ρ(s,a) = Σ_{t<H} γ^t Pr(s_t = s, a_t = a), shape (S, A), float64.

    ``horizon=None`` gives the infinite-horizon occupancy (a linear solve). Not differentiable.
    """

    def np_(x: np.ndarray | torch.Tensor) -> np.ndarray:
        return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x, dtype=float)

    return torch.as_tensor(_occupancy_np(np_(P), np_(pi), np_(mu0), gamma, horizon))


class SoftVI:
    """Warm-started soft value iteration as AIHF's policy optimizer on a :class:`GridWorld`.

    Parameters
    ----------
    gamma : float
        Discount γ.
    temperature : float
        Entropy temperature β of the soft-optimal policy (must equal AIHF's ``beta``).
    env : GridWorld
        The MDP (required before fitting).
    exact : bool
        True: policy feature expectations from the exact finite-horizon occupancy; False: Monte-Carlo
        over sampled rollouts.
    """

    def __init__(self, gamma: float = 0.9, temperature: float = 1.0, env: GridWorld | None = None, exact: bool = True):
        if not 0 <= gamma < 1:
            raise ValueError(f"SoftVI: gamma must be in [0, 1), got {gamma}")
        if not temperature > 0:
            raise ValueError(f"SoftVI: temperature must be > 0, got {temperature}")
        self.gamma, self.temperature, self.env, self.exact = float(gamma), float(temperature), env, exact
        self.horizon: int | None = None
        self._V: np.ndarray | None = None
        self._pi: np.ndarray | None = None
        self._temp = self.temperature
        self._ref: torch.Tensor | None = None
        self._rng = np.random.default_rng(0)

    def _need_env(self) -> GridWorld:
        if self.env is None:
            raise ValueError("SoftVI: env is None; pass env=GridWorld(...)")
        return self.env

    def check_actions(self, acts: np.ndarray, name: str) -> None:
        self._need_env().check_actions(acts, name)

    def reward_table(self, reward: RewardModel) -> torch.Tensor:
        """r(s, a; θ) for every pair, shape (S, A), differentiable in θ."""
        env = self._need_env()
        obs, acts = env.all_pairs()
        return reward(obs, acts).reshape(env.n_states, env.n_actions)

    def reset(self, horizon: int, seed: int = 0, ref: np.ndarray | None = None, temperature: float | None = None):
        """Start from V = 0 (the uniform / reference policy); ``ref`` and ``temperature`` select KL-RL."""
        self._need_env()
        self.horizon, self._V, self._pi = int(horizon), None, None
        self._rng = np.random.default_rng(seed)
        self._ref = None if ref is None else torch.as_tensor(ref, dtype=torch.float64)
        self._temp = self.temperature if temperature is None else float(temperature)
        return self

    def improve(self, reward: RewardModel, n_steps: int) -> None:
        """``n_steps`` soft Bellman backups on the current reward, warm-started (0: keep the current policy)."""
        if n_steps < 1:
            return
        with torch.no_grad():
            r = self.reward_table(reward).double().cpu().numpy()
        # numpy backups: the tables are tiny, so torch's per-op overhead would dominate.
        V = np.zeros(self.env.n_states) if self._V is None else self._V
        log_ref = 0.0 if self._ref is None else np.log(np.maximum(self._ref.numpy(), 1e-300))
        for _ in range(n_steps):
            z = (r + self.gamma * (self.env.P @ V)) / self._temp + log_ref
            m = z.max(1, keepdims=True)
            V = self._temp * (m[:, 0] + np.log(np.exp(z - m).sum(1)))
        self._V = V
        e = np.exp(z - m)
        self._pi = e / e.sum(1, keepdims=True)

    @property
    def policy(self) -> np.ndarray:
        """Current (S, A) policy (uniform, or the reference, before the first step); a copy, as ARS's."""
        env = self._need_env()
        # a copy: the fitted estimator keeps it as policy_, and editing that must not move the optimizer
        if self._pi is not None:
            return self._pi.copy()
        if self._ref is not None:
            return self._ref.numpy().copy()
        return np.full((env.n_states, env.n_actions), 1.0 / env.n_actions)

    def policy_return(self, reward: RewardModel, n_rollouts: int) -> torch.Tensor:
        """E_{τ∼π}[R_θ(τ)] over the fit horizon, differentiable in θ (π held fixed)."""
        env = self._need_env()
        if self.exact:
            rho = torch.as_tensor(_occupancy_np(env.P, self.policy, env.mu0, self.gamma, self.horizon))
            table = self.reward_table(reward)
            return (rho.to(table) * table).sum()
        segs = self.rollouts(n_rollouts, int(self._rng.integers(2**31)))
        return reward.prepare(segs, self.gamma, "policy rollouts")().mean()

    def policy_features(self, feats: np.ndarray) -> np.ndarray:
        """Exact E_π[Σ_{t<H} γ^t φ(s_t, a_t)] for a (S·A, k) feature table, shape (k,)."""
        env = self._need_env()
        return _occupancy_np(env.P, self.policy, env.mu0, self.gamma, self.horizon).reshape(-1) @ feats

    def rollouts(self, n: int, seed: int = 0) -> list[Segment]:
        """Sample ``n`` episodes of the fit horizon from the current policy."""
        return self._need_env().rollouts(self.policy, n, self.horizon or 1, seed)

    def behavior_clone(self, demos: TrajectoryDataset, smoothing: float = 1.0) -> np.ndarray:
        """Tabular BC / SFT: add-``smoothing`` action counts per state, shape (S, A)."""
        env = self._need_env()
        counts = np.full((env.n_states, env.n_actions), float(smoothing))
        env.check_actions(demos.acts, "TrajectoryDataset")
        obs = env.check_states(demos.obs, "TrajectoryDataset")
        np.add.at(counts, (obs, np.asarray(demos.acts, np.int64)), 1.0)
        return counts / counts.sum(1, keepdims=True)


def plan(env: GridWorld, r: np.ndarray | torch.Tensor, gamma: float, temp: float, iters: int = 500) -> np.ndarray:
    """Soft-optimal (S, A) policy for a reward table; the common scoring planner."""
    return soft_value_iteration(env.P, r, gamma, temp, iters)[2].detach().cpu().numpy()


def policy_value(env: GridWorld, pi: np.ndarray, r: np.ndarray, gamma: float, horizon: int | None = None) -> float:
    """Expected discounted return of ``pi`` under reward table ``r`` (S, A) from μ0."""
    return float((occupancy(env.P, pi, env.mu0, gamma, horizon) * torch.as_tensor(r)).sum())
