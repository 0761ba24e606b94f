"""The AIHF estimator (joint reward and policy learning) and the SFT → RM → KL-RL pipeline baseline."""

from __future__ import annotations

import contextlib
import inspect
import logging
import math
import numbers
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from iclr25.core.progress import progress

from .data import PreferenceDataset, TrajectoryDataset, _check_count
from .rewards import LinearReward, RewardModel

__all__ = ["AIHF", "RLHFPipeline", "bt_log_likelihood", "fit_bradley_terry"]

logger = logging.getLogger(__name__)


def bt_log_likelihood(ra: torch.Tensor, rb: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
    """Mean Bradley-Terry log-likelihood, y log σ(R_a − R_b) + (1 − y) log σ(R_b − R_a); shapes (M,)."""
    d = ra - rb
    return (label * torch.nn.functional.logsigmoid(d) + (1 - label) * torch.nn.functional.logsigmoid(-d)).mean()


def _l2(reward: RewardModel) -> torch.Tensor:
    return sum((p * p).sum() for p in reward.parameters())


def _grad_enabled() -> contextlib.ExitStack:
    """Autograd on whatever the caller's mode: the reward steps differentiate the objective themselves."""
    # A fit inside torch.no_grad() or torch.inference_mode() used to fail with "element 0 of tensors does not
    # require grad" on the autograd path only (the closed-form linear path ran).
    stack = contextlib.ExitStack()
    stack.enter_context(torch.inference_mode(False))
    stack.enter_context(torch.enable_grad())
    return stack


def _check_actions(opt: Any, D: TrajectoryDataset, P: PreferenceDataset) -> None:
    if len(D):
        opt.check_actions(D.acts, "TrajectoryDataset")
    for k, ((_, aa), (_, ab)) in enumerate(zip(P.seg_a, P.seg_b, strict=True)):
        opt.check_actions(aa, f"PreferenceDataset pair {k}")
        opt.check_actions(ab, f"PreferenceDataset pair {k}")


def fit_bradley_terry(
    reward: RewardModel, prefs: PreferenceDataset, gamma: float, l2: float = 1e-3, max_iter: int = 500, lr: float = 0.1
) -> RewardModel:
    """Reward-model MLE on preferences alone (the RLHF reward stage); updates ``reward`` in place.

    Maximizes E_P[log σ(R_θ(τ_w) − R_θ(τ_l))] − (l2/2)‖θ‖²: damped Newton for :class:`LinearReward` (the
    problem is concave, so this is the exact MLE to round-off), ``max_iter`` gradient-ascent steps of size ``lr``
    otherwise. Needs ``gamma`` in [0, 1], ``l2 >= 0``, ``lr > 0`` and an int ``max_iter >= 0``.
    """
    if not isinstance(reward, RewardModel):
        raise TypeError(f"fit_bradley_terry: reward must be a RewardModel, got {type(reward).__name__}")
    if not isinstance(prefs, PreferenceDataset):
        raise TypeError(f"fit_bradley_terry: prefs must be a PreferenceDataset, got {type(prefs).__name__}")
    if len(prefs) == 0:
        raise ValueError("fit_bradley_terry: prefs is empty")
    # Each of these used to be taken as given: a NaN gamma gave a NaN reward, a negative l2 an unbounded (or
    # non-concave) objective, and a negative lr descended the likelihood, all without an error.
    if not 0 <= gamma <= 1:
        raise ValueError(f"fit_bradley_terry: gamma must be in [0, 1], got {gamma}")
    if not l2 >= 0:
        raise ValueError(f"fit_bradley_terry: l2 must be >= 0, got {l2}")
    if not lr > 0:
        raise ValueError(f"fit_bradley_terry: lr must be > 0, got {lr}")
    _check_count("fit_bradley_terry", "max_iter", max_iter, 0)
    y_np = np.asarray(prefs.label, dtype=float)
    if isinstance(reward, LinearReward):
        fa = reward.discounted_features(prefs.seg_a, gamma, "PreferenceDataset.seg_a")
        dphi = (fa - reward.discounted_features(prefs.seg_b, gamma, "PreferenceDataset.seg_b")).cpu().numpy()
        theta = reward.theta.detach().cpu().numpy().astype(float).copy()

        def obj(th: np.ndarray) -> float:
            s = dphi @ th
            return float(np.mean(-y_np * np.logaddexp(0, -s) - (1 - y_np) * np.logaddexp(0, s))) - 0.5 * l2 * th @ th

        for _ in range(max_iter):
            p = 1 / (1 + np.exp(-(dphi @ theta)))
            g = dphi.T @ (y_np - p) / len(y_np) - l2 * theta
            hess = (dphi.T * (p * (1 - p))) @ dphi / len(y_np) + (l2 + 1e-12) * np.eye(len(theta))
            step = np.linalg.solve(hess, g)
            t, f0 = 1.0, obj(theta)
            while obj(theta + t * step) < f0 + 1e-4 * t * (g @ step) and t > 1e-10:
                t *= 0.5
            theta = theta + t * step
            if np.abs(g).max() < 1e-12:
                break
        with torch.no_grad():
            reward.theta.copy_(torch.as_tensor(theta))
        return reward
    with _grad_enabled():
        ra = reward.prepare(prefs.seg_a, gamma, "PreferenceDataset.seg_a")
        rb = reward.prepare(prefs.seg_b, gamma, "PreferenceDataset.seg_b")
        y = torch.as_tensor(y_np, dtype=reward.dtype, device=reward.device)
        params = [p for p in reward.parameters() if p.requires_grad]
        for _ in range(max_iter):
            J = bt_log_likelihood(ra(), rb(), y) - 0.5 * l2 * _l2(reward)
            grads = torch.autograd.grad(J, params)
            with torch.no_grad():
                for p, g in zip(params, grads, strict=True):
                    p.add_(lr * g)
    return reward


class AIHF:
    """Alignment with Integrated Human Feedback: one reward fitted to demonstrations and preferences.

    Maximizes ``w_D·E_D[log π_θ(τ)] + w_P·E_P[log σ(R_θ(τ_w) − R_θ(τ_l))] − (l2/2)‖θ‖²`` with π_θ the soft-optimal
    policy for r_θ at temperature β, by the single-loop algorithm: each iteration takes one reward step with

        ĝ = (w_D/β)(Φ_demo − Φ_policy) + w_P·∇BT − l2·θ,   Φ = E[∇_θ R_θ(τ)],

    where the policy term uses the current policy (exact occupancy or ``n_policy_rollouts`` samples), then
    ``policy_steps_per_iter`` warm-started policy-optimizer steps on the new reward. The first reward step
    comes before the first policy step (at θ = 0 the policy step is degenerate). With w_D = 0 the reward step
    never reads the policy, so the same number of policy steps runs once, on the final reward.

    Parameters
    ----------
    reward : RewardModel
        :class:`LinearReward` or :class:`MLPReward`; updated in place.
    policy_optimizer : SoftVI or ARS
        Provides ``gamma``, ``reset``, ``improve``, ``policy_return``, ``policy``, ``check_actions``.
    w_demo, w_pref : "count" or float >= 0
        Weights w_D, w_P; "count" (default) gives the joint MLE, |D|/(|D|+|P|) and |P|/(|D|+|P|).
    beta : float
        Entropy temperature β of the policy model (must equal the tabular optimizer's temperature).
    reward_lr : float
        Reward step size α.
    policy_steps_per_iter : int
        Policy-optimizer steps per iteration.
    n_policy_rollouts : int
        Rollouts per reward step for the sampled policy term.
    l2 : float
        L2 penalty on the reward parameters.
    seed : int
        Seed of the policy optimizer's rollouts, and of torch's CPU generator inside :meth:`fit` (for stochastic
        reward models); the caller's global torch random stream is left where it was.

    Attributes
    ----------
    reward_ : RewardModel
    policy_ : the optimizer's policy ((S, A) array for SoftVI, a LinearPolicy for ARS)
    history_ : list of dict
        Per iteration: ``iter``, ``objective`` (the surrogate whose gradient is ĝ), ``grad_norm2`` (‖ĝ‖²),
        ``bt`` (BT log-likelihood), ``feature_gap`` (demo − policy return term).
    """

    def __init__(
        self,
        reward: RewardModel,
        policy_optimizer: Any,
        w_demo: str | float = "count",
        w_pref: str | float = "count",
        beta: float = 1.0,
        reward_lr: float = 0.5,
        policy_steps_per_iter: int = 2,
        n_policy_rollouts: int = 4,
        l2: float = 1e-3,
        seed: int = 0,
    ) -> None:
        if not isinstance(reward, RewardModel):
            raise TypeError(f"AIHF: reward must be a RewardModel, got {type(reward).__name__}")
        for name, w in (("w_demo", w_demo), ("w_pref", w_pref)):
            if not isinstance(w, (str, numbers.Real)):
                raise TypeError(f"AIHF: {name} must be 'count' or a float >= 0, got {type(w).__name__} {w!r}")
            if not (w == "count" if isinstance(w, str) else w >= 0):
                raise ValueError(f"AIHF: {name} must be 'count' or a float >= 0, got {w!r}")
        if not beta > 0:
            raise ValueError(f"AIHF: beta must be > 0, got {beta}")
        if not reward_lr > 0:
            raise ValueError(f"AIHF: reward_lr must be > 0, got {reward_lr}")
        _check_count("AIHF", "policy_steps_per_iter", policy_steps_per_iter, 1)
        _check_count("AIHF", "n_policy_rollouts", n_policy_rollouts, 1)
        if not l2 >= 0:
            raise ValueError(f"AIHF: l2 must be >= 0, got {l2}")
        self.reward, self.policy_optimizer = reward, policy_optimizer
        self.w_demo, self.w_pref, self.beta, self.reward_lr = w_demo, w_pref, float(beta), float(reward_lr)
        self.policy_steps_per_iter, self.n_policy_rollouts = int(policy_steps_per_iter), int(n_policy_rollouts)
        self.l2, self.seed = float(l2), int(seed)

    @classmethod
    def rlhf(cls, reward: RewardModel, policy_optimizer: Any, **kwargs: Any) -> AIHF:
        """Preset w_D = 0: RLHF done in one loop (the reward is the BT MLE)."""
        return cls(reward, policy_optimizer, w_demo=0.0, w_pref=1.0, **kwargs)

    @classmethod
    def ml_irl(cls, reward: RewardModel, policy_optimizer: Any, **kwargs: Any) -> AIHF:
        """Preset w_P = 0: maximum-likelihood IRL (Zeng et al., 2022)."""
        return cls(reward, policy_optimizer, w_demo=1.0, w_pref=0.0, **kwargs)

    def _weights(self, n_d: int, n_p: int) -> tuple[float, float]:
        total = n_d + n_p
        w_d = n_d / total if self.w_demo == "count" else float(self.w_demo)
        w_p = n_p / total if self.w_pref == "count" else float(self.w_pref)
        # An empty source contributes nothing whatever its weight: that is the special case it selects.
        return (w_d if n_d else 0.0), (w_p if n_p else 0.0)

    def _horizon(self, demos: TrajectoryDataset, prefs: PreferenceDataset) -> int:
        opt = self.policy_optimizer
        if demos.gamma is not None and abs(demos.gamma - opt.gamma) > 1e-12:
            raise ValueError(
                f"AIHF: demonstrations were given with gamma={demos.gamma} but the policy optimizer uses "
                f"gamma={opt.gamma}; the demonstration gradient needs one discount"
            )
        fixed = getattr(opt, "fixed_horizon", None)
        if len(demos):
            hs = demos.horizons
            if len(hs) != 1:
                raise ValueError(f"AIHF: demonstrations must share one horizon, got lengths {sorted(hs)}")
            (h,) = hs
            if fixed is not None and h != fixed:
                raise ValueError(
                    f"AIHF: demonstration horizon {h} != policy rollout horizon {fixed}; "
                    "demo and policy features need the same horizon"
                )
            return h
        if fixed is not None:
            return fixed
        return max(len(o) for o, _ in list(prefs.seg_a) + list(prefs.seg_b))

    def fit(
        self,
        D: TrajectoryDataset | None,
        P: PreferenceDataset | None,
        iters: int = 300,
        callback: Callable[[int, AIHF], None] | None = None,
    ) -> AIHF:
        """Run ``iters`` single-loop iterations; either dataset may be empty (or None), not both.

        ``callback(k, self)``, if given, is called after the reward step of iteration k (before its policy steps).
        """
        # Seeded for reproducible stochastic reward models, forked so that fitting does not reseed the caller's
        # stream (a fit between torch.manual_seed(s) and a model init made the init independent of s).
        with torch.random.fork_rng(devices=[]), _grad_enabled():
            torch.default_generator.manual_seed(self.seed)
            return self._fit(D, P, iters, callback)

    def _fit(
        self,
        D: TrajectoryDataset | None,
        P: PreferenceDataset | None,
        iters: int,
        callback: Callable[[int, AIHF], None] | None,
    ) -> AIHF:
        D = TrajectoryDataset.from_rollouts([]) if D is None else D
        P = PreferenceDataset.empty() if P is None else P
        if not isinstance(D, TrajectoryDataset):
            raise TypeError(f"AIHF.fit: D must be a TrajectoryDataset, got {type(D).__name__}")
        if not isinstance(P, PreferenceDataset):
            raise TypeError(f"AIHF.fit: P must be a PreferenceDataset, got {type(P).__name__}")
        if len(D) == 0 and len(P) == 0:
            raise ValueError("AIHF.fit: both D and P are empty; give demonstrations, preferences, or both")
        _check_count("AIHF.fit", "iters", iters, 1)
        opt, reward = self.policy_optimizer, self.reward
        opt_temp = getattr(opt, "temperature", None)
        if opt_temp is not None and abs(opt_temp - self.beta) > 1e-12:
            raise ValueError(f"AIHF: beta={self.beta} differs from the policy optimizer's temperature={opt_temp}")
        horizon = self._horizon(D, P)
        _check_actions(opt, D, P)
        w_d, w_p = self._weights(len(D), len(P))
        gamma = opt.gamma
        demo_R = reward.prepare(D.episodes(), gamma, "TrajectoryDataset") if w_d > 0 else None
        if w_p > 0:
            ra = reward.prepare(P.seg_a, gamma, "PreferenceDataset.seg_a")
            rb = reward.prepare(P.seg_b, gamma, "PreferenceDataset.seg_b")
            y = torch.as_tensor(P.label, dtype=reward.dtype, device=reward.device)
        opt.reset(horizon, seed=self.seed)
        self.history_: list[dict[str, float]] = []
        self.weights_ = (w_d, w_p)
        if isinstance(reward, LinearReward) and getattr(opt, "exact", False) and hasattr(opt, "policy_features"):
            self._fit_linear_exact(D, P, iters, w_d, w_p, callback)
            self.reward_, self.policy_ = reward, opt.policy
            return self
        params = [p for p in reward.parameters() if p.requires_grad]
        good = [p.detach().clone() for p in params]
        for k in progress(range(iters), desc="aihf", total=iters):
            gap = torch.zeros((), dtype=reward.dtype)
            bt = torch.zeros((), dtype=reward.dtype)
            if demo_R is not None:
                gap = demo_R().mean() - opt.policy_return(reward, self.n_policy_rollouts)
            if w_p > 0:
                bt = bt_log_likelihood(ra(), rb(), y)
            J = (w_d / self.beta) * gap + w_p * bt - 0.5 * self.l2 * _l2(reward)
            grads = torch.autograd.grad(J, params, allow_unused=True)
            grads = [torch.zeros_like(p) if g is None else g for p, g in zip(params, grads, strict=True)]
            if not (torch.isfinite(J) and all(torch.isfinite(g).all() for g in grads)):
                with torch.no_grad():
                    for p, g0 in zip(params, good, strict=True):
                        p.copy_(g0)
                raise RuntimeError(
                    f"AIHF.fit: non-finite reward or gradient at iteration {k}; kept the last finite parameters"
                )
            good = [p.detach().clone() for p in params]
            with torch.no_grad():
                for p, g in zip(params, grads, strict=True):
                    p.add_(self.reward_lr * g)
                # A finite gradient can still overflow the step; on the last iteration nothing would catch it.
                if not all(torch.isfinite(p).all() for p in params):
                    for p, g0 in zip(params, good, strict=True):
                        p.copy_(g0)
                    raise RuntimeError(
                        f"AIHF.fit: the reward step made the parameters non-finite at iteration {k}; "
                        "kept the last finite parameters"
                    )
            g2 = float(sum((g * g).sum() for g in grads))
            self.history_.append(
                {
                    "iter": k,
                    "objective": float(J.detach()),
                    "grad_norm2": g2,
                    "bt": float(bt.detach()),
                    "feature_gap": float(gap.detach()),
                }
            )
            if callback is not None:
                callback(k, self)
            if w_d > 0:
                opt.improve(reward, self.policy_steps_per_iter)
        self._final_policy_steps(w_d, iters)
        self.reward_, self.policy_ = reward, opt.policy
        return self

    def _final_policy_steps(self, w_d: float, iters: int) -> None:
        # Without demonstrations the reward step never reads the policy, so the policy steps are deferred and
        # run once on the final reward (same number of steps as interleaving them).
        if w_d == 0:
            self.policy_optimizer.improve(self.reward, self.policy_steps_per_iter * iters)

    def _fit_linear_exact(
        self,
        D: TrajectoryDataset,
        P: PreferenceDataset,
        iters: int,
        w_d: float,
        w_p: float,
        callback: Callable[[int, AIHF], None] | None,
    ) -> None:
        # Linear reward + exact tabular policy features: the same update as the autograd path, in closed form
        # (ĝ = (w_D/β)(Φ_D − Φ_π) + w_P ΔΦᵀ(y − σ(ΔΦθ))/M − l2·θ), about 50× faster on tiny MDPs.
        reward, opt, gamma = self.reward, self.policy_optimizer, self.policy_optimizer.gamma
        assert isinstance(reward, LinearReward)
        phi_d = 0.0
        if w_d:
            phi_d = reward.discounted_features(D.episodes(), gamma, "TrajectoryDataset").mean(0).cpu().numpy()
        if w_p:
            fa = reward.discounted_features(P.seg_a, gamma, "PreferenceDataset.seg_a")
            dphi = (fa - reward.discounted_features(P.seg_b, gamma, "PreferenceDataset.seg_b")).cpu().numpy()
            y = np.asarray(P.label, dtype=float)
        obs, acts = opt.env.all_pairs()
        feats = reward.features(obs, acts).detach().cpu().numpy()
        theta = reward.theta.detach().cpu().numpy().astype(float).copy()
        good = theta
        for k in progress(range(iters), desc="aihf", total=iters):
            gap_vec = phi_d - opt.policy_features(feats) if w_d else np.zeros_like(theta)
            g = (w_d / self.beta) * gap_vec - self.l2 * theta
            bt = 0.0
            if w_p:
                s = dphi @ theta
                bt = float(np.mean(y * -np.logaddexp(0, -s) + (1 - y) * -np.logaddexp(0, s)))
                g = g + w_p * dphi.T @ (y - 1 / (1 + np.exp(-s))) / len(y)
            gap = float(gap_vec @ theta)
            J = (w_d / self.beta) * gap + w_p * bt - 0.5 * self.l2 * float(theta @ theta)
            if not (np.isfinite(J) and np.isfinite(g).all()):
                # Same parameters as the autograd path keeps: those of the last iteration whose objective was finite.
                with torch.no_grad():
                    reward.theta.copy_(torch.as_tensor(good))
                raise RuntimeError(
                    f"AIHF.fit: non-finite reward or gradient at iteration {k}; kept the last finite parameters"
                )
            good, theta = theta, theta + self.reward_lr * g
            if not np.isfinite(theta).all():
                raise RuntimeError(
                    f"AIHF.fit: the reward step made the parameters non-finite at iteration {k}; "
                    "kept the last finite parameters"
                )
            with torch.no_grad():
                reward.theta.copy_(torch.as_tensor(theta))
            self.history_.append({"iter": k, "objective": J, "grad_norm2": float(g @ g), "bt": bt, "feature_gap": gap})
            if callback is not None:
                callback(k, self)
            if w_d > 0:
                opt.improve(reward, self.policy_steps_per_iter)
        self._final_policy_steps(w_d, iters)


class RLHFPipeline:
    """The classic three-stage baseline: SFT (behaviour cloning) → BT reward model → KL-regularized RL.

    Parameters
    ----------
    reward : RewardModel
        Fitted in place to the preferences alone (:func:`fit_bradley_terry`; exact Newton for a linear reward),
        with L2 ``l2``.
    policy_optimizer : SoftVI or ARS
        Runs the RL stage toward the SFT policy.
    kl_to_sft : float
        KL weight to the SFT policy (SoftVI: the KL temperature; ARS: weight of ‖a − a_SFT(s)‖²). 0 (ARS
        only; ValueError for SoftVI) drops the anchor.
    l2 : float >= 0
        L2 penalty of the reward MLE.
    rl_steps : int >= 0
        Policy-optimizer steps in the RL stage.
    init_from_sft : bool
        Start the RL stage at the SFT policy (ARS; False: at the zero policy, also when the SFT policy is the KL
        anchor); the tabular KL-RL is exact and needs no start.
    seed : int

    Attributes
    ----------
    sft_ : the behaviour-cloned policy, reward_, policy_
    """

    def __init__(
        self,
        reward: RewardModel,
        policy_optimizer: Any,
        kl_to_sft: float = 1.0,
        l2: float = 1e-3,
        rl_steps: int = 300,
        init_from_sft: bool = True,
        seed: int = 0,
    ) -> None:
        if not isinstance(reward, RewardModel):
            raise TypeError(f"RLHFPipeline: reward must be a RewardModel, got {type(reward).__name__}")
        if not kl_to_sft >= 0:
            raise ValueError(f"RLHFPipeline: kl_to_sft must be >= 0, got {kl_to_sft}")
        if kl_to_sft == 0 and getattr(policy_optimizer, "temperature", None) is not None:
            # SoftVI would anchor to the SFT policy at its own temperature instead: not "no anchor".
            raise ValueError(
                "RLHFPipeline: kl_to_sft=0 (no anchor) is for ARS only; the tabular KL-RL needs kl_to_sft > 0"
            )
        if not l2 >= 0:
            raise ValueError(f"RLHFPipeline: l2 must be >= 0, got {l2}")
        _check_count("RLHFPipeline", "rl_steps", rl_steps, 0)
        self.reward, self.policy_optimizer, self.kl_to_sft, self.l2 = reward, policy_optimizer, kl_to_sft, l2
        self.rl_steps, self.init_from_sft, self.seed = int(rl_steps), init_from_sft, int(seed)

    def _rl_horizon(self, D: TrajectoryDataset, P: PreferenceDataset) -> int:
        """The RL stage's horizon: the optimizer's own rollout horizon when it has one, else the longest episode.

        SFT clones actions step by step, so it needs no shared horizon (AIHF's demonstration gradient does).
        Taking the longest length (demonstrations, else either side of the preference pairs) makes the choice
        deterministic for mixed lengths and agrees with AIHF for preferences only.
        """
        fixed = getattr(self.policy_optimizer, "fixed_horizon", None)
        if fixed is not None:
            return fixed
        if len(D):
            return max(D.horizons)
        return max(len(o) for o, _ in list(P.seg_a) + list(P.seg_b))

    def fit(self, D: TrajectoryDataset | None, P: PreferenceDataset) -> RLHFPipeline:
        """SFT on ``D`` (if any), reward MLE on ``P``, then RL; returns self."""
        opt = self.policy_optimizer
        D = TrajectoryDataset.from_rollouts([]) if D is None else D
        if not isinstance(D, TrajectoryDataset):
            raise TypeError(f"RLHFPipeline.fit: D must be a TrajectoryDataset or None, got {type(D).__name__}")
        if not isinstance(P, PreferenceDataset):
            raise TypeError(f"RLHFPipeline.fit: P must be a PreferenceDataset, got {type(P).__name__}")
        if len(P) == 0:
            raise ValueError("RLHFPipeline.fit: P is empty; the pipeline's reward model needs preferences")
        _check_actions(opt, D, P)
        self.sft_ = opt.behavior_clone(D) if len(D) else None
        fit_bradley_terry(self.reward, P, opt.gamma, self.l2)
        horizon = self._rl_horizon(D, P)
        use_ref = self.sft_ is not None and (self.kl_to_sft > 0 or self.init_from_sft)
        # ARS starts from the policy it anchors to; without this, init_from_sft=False was ignored whenever
        # kl_to_sft > 0. Optimizers without a start to choose (the exact tabular one) take no from_ref.
        start = {}
        if use_ref and not self.init_from_sft and "from_ref" in inspect.signature(opt.reset).parameters:
            start = {"from_ref": False}
        opt.reset(
            horizon,
            seed=self.seed,
            ref=self.sft_ if use_ref else None,
            temperature=self.kl_to_sft if self.kl_to_sft > 0 else None,
            **start,
        )
        opt.improve(self.reward, self.rl_steps)
        self.reward_, self.policy_ = self.reward, opt.policy
        if not math.isfinite(float(sum(p.detach().abs().sum() for p in self.reward.parameters()))):
            raise RuntimeError("RLHFPipeline.fit: the reward model diverged")
        logger.info("RLHFPipeline: sft=%s kl=%s", self.sft_ is not None, self.kl_to_sft)
        return self
