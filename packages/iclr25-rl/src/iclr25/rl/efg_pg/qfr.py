"""QFR (Q-function based regret minimization): optimistic per-infoset policy-gradient steps.

Each iteration (Liu, Farina, Ozdaglar 2025; LiteEFG ``baselines/QFR.py``)::

    sigma_t --(exact values or B sampled trajectories)--> g_t(I, .)
    d(I)        = 1 + eta * tau * kappa(I)            kappa: 1 (Q), pi_p(I) r(I) (traj-Q), r(I) (cf)
    bar_sigma  <- prox(bar_sigma, eta g_t)            ∝ exp((log bar_sigma + eta g_t) / d)
    sigma_t+1  <- prox(bar_sigma, eta g_t)            (optimistic second step, same g_t)
    both       <- gamma-perturbed simplex

The output is the current iterate ``sigma_t``; it converges to the Nash equilibrium of the
bidilated-entropy regularized game.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from iclr25.core.progress import progress

from ._validate import check_bool, check_int, check_real
from .games import Game, check_game
from .policy import TabularPolicy, as_probs
from .update import omd_step
from .values import REGULARIZERS, _check_tau, _xp, cf_values, exploitability, psi

__all__ = ["FEEDBACKS", "QFR", "sample_trajectory_q", "traj_q_estimate"]

logger = logging.getLogger(__name__)

FEEDBACKS = ("q", "traj_q", "cf", "sampled")


def _resolve(device: Any, array_backend: str) -> Any:
    """``"numpy"`` or a torch device."""
    if array_backend not in ("auto", "numpy", "torch"):
        raise ValueError(f"array_backend must be 'auto', 'numpy' or 'torch', got {array_backend!r}")
    dev = str(device)
    if array_backend == "numpy" or (array_backend == "auto" and dev == "cpu"):
        if dev != "cpu":
            raise ValueError(f"array_backend='numpy' needs device='cpu', got {dev!r}")
        return "numpy"
    import torch

    return torch.device(device)


def sample_trajectory_q(
    ar: dict[str, Any], probs: Any, batch: int, tau: float, regularizer: str, rng: Any
) -> tuple[Any, Any, Any]:
    """Sample ``batch`` on-policy trajectories and form the traj-Q estimator.

    For each visited decision node ``(I, a_t)`` of player ``p`` the estimate of
    ``q(I, a_t) = pi_p(I) cf(I, a_t)`` is ``G_t / sigma(a_t|I)``, where ``G_t`` is ``p``'s return
    after ``a_t``: terminal payoff plus the later ``±tau psi`` terms. Other actions get 0.

    Returns
    -------
    mean : (nI, A)
        Batch mean of the estimator.
    sq_mean : (nI, A)
        Batch mean of its square (each infoset is visited at most once per trajectory).
    visits : (nI,)
        How many trajectories visited each infoset.
    """
    xp = _xp(probs)
    n_inf, a = probs.shape
    torch_mode = xp is not np
    dev = probs.device if torch_mode else None

    def zeros_int(n: int) -> Any:
        return xp.zeros(n, dtype=xp.int64, device=dev) if torch_mode else np.zeros(n, dtype=np.int64)

    def uniform(n: int) -> Any:
        if torch_mode:
            return xp.rand(n, generator=rng, device=dev, dtype=probs.dtype)
        return rng.random(n)

    kind, infoset, children = ar["kind"], ar["infoset"], ar["children"]
    n_children = (children >= 0).sum(1)
    cur = zeros_int(batch)
    hists, cols, decs = [], [], []
    for _ in range(len(ar["levels"]) - 1):
        k = kind[cur]
        active = k != 3
        is_dec = active & (k <= 1)
        inf = xp.where(is_dec, infoset[cur], 0 * infoset[cur])
        p = ar["chance_matrix"][cur]
        p[:, :a] = p[:, :a] + xp.where(is_dec[:, None], probs[inf], 0.0 * probs[inf])
        cdf = p.cumsum(1)
        u = uniform(batch)[:, None] * cdf[:, -1:]
        col = (cdf <= u).sum(1)
        last = xp.where(n_children[cur] > 0, n_children[cur] - 1, 0 * n_children[cur])
        col = xp.where(col > last, last, col)
        hists.append(cur)
        cols.append(col)
        decs.append(is_dec)
        nxt = children[cur, col]
        cur = xp.where(active, nxt, cur)
    stack = (lambda xs: xp.stack(xs)) if torch_mode else (lambda xs: np.stack(xs))
    hist, col, dec = stack(hists), stack(cols), stack(decs)  # (T, B)
    inf = xp.where(dec, infoset[hist], 0 * hist)
    player = kind[hist]
    payoff = ar["utility"][cur]  # player 0's view
    ps = psi(xp, probs, ar["num_actions"], regularizer) * tau
    sign = xp.where(player == 0, -1.0, 1.0)
    reg = xp.where(dec, sign * ps[inf], 0.0 * ps[inf])
    # Return after step t: payoff plus the regularizer terms strictly later on the path.
    total = reg.sum(0)
    later = total[None, :] - reg.cumsum(0)
    ret = payoff[None, :] + later
    g = xp.where(player == 0, ret, -ret)
    chosen = probs[inf, xp.where(dec, col, 0 * col)]
    x = xp.where(dec, g / xp.where(dec, chosen, 1.0 + 0.0 * chosen), 0.0 * g)
    flat = (inf * a + xp.where(dec, col, 0 * col)).reshape(-1)
    w = x.reshape(-1)
    # In probs' dtype: torch promotes bool * 1.0 to float32, and visits sets the sampled divisor's dtype.
    decf = dec.reshape(-1).to(probs.dtype) if torch_mode else dec.reshape(-1) * 1.0
    mean = xp.bincount(flat, weights=w, minlength=n_inf * a).reshape(n_inf, a) / batch
    sq = xp.bincount(flat, weights=w * w, minlength=n_inf * a).reshape(n_inf, a) / batch
    visits = xp.bincount(inf.reshape(-1), weights=decf, minlength=n_inf)
    return mean, sq, visits


def traj_q_estimate(
    game: Game,
    policy: Any,
    num_trajectories: int,
    tau: float = 0.0,
    regularizer: str = "entropy",
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Monte Carlo traj-Q values from on-policy trajectories, with standard errors.

    Parameters
    ----------
    game : Game
    policy : TabularPolicy or (nI, A) array
    num_trajectories : int
        Number of sampled trajectories (one batch).
    tau : float
        Regularization weight; the return includes the later ``±tau psi`` terms.
    regularizer : {"entropy", "euclidean"}
    seed : int

    Returns
    -------
    estimate : (nI, A) float64
        Unbiased estimate of ``reach_own * cf`` from :func:`q_values`.
    stderr : (nI, A) float64
        Standard error of each entry.
    """
    check_game(game)
    num_trajectories = check_int("num_trajectories", num_trajectories, 1)
    tau = _check_tau(tau)
    if regularizer not in REGULARIZERS:
        raise ValueError(f"regularizer must be one of {REGULARIZERS}, got {regularizer!r}")
    probs = as_probs(game, policy)
    if not isinstance(probs, np.ndarray):
        probs = probs.cpu().numpy()
    ar = game.arrays("numpy")
    mean, sq, _ = sample_trajectory_q(ar, probs, num_trajectories, tau, regularizer, np.random.default_rng(seed))
    var = np.maximum(sq - mean * mean, 0.0)
    return mean, np.sqrt(var / num_trajectories)


class QFR:
    """QFR self-play solver for two-player zero-sum extensive-form games.

    Parameters
    ----------
    game : Game
    eta : float
        Step size ``eta > 0`` (LiteEFG default 0.1; scale with the payoff range).
    tau : float
        Regularization weight ``tau >= 0`` of the bidilated regularizer.
    gamma : float
        Perturbation, ``0 <= gamma < 1 / max|A(I)|``: each step mixes with uniform so every
        action keeps probability ``>= gamma``.
    regularizer : {"entropy", "euclidean"}
        Shifted negative entropy (closed-form step) or ``1/2 ||p||^2`` (projection step).
    feedback : {"q", "traj_q", "cf", "sampled"}
        Exact Q-values ``Q = cf / r``, exact trajectory Q-values ``pi_p cf``, exact counterfactual
        values, or traj-Q estimated from ``batch_trajectories`` sampled trajectories per iteration
        (only visited infosets are updated, divisor ``1 + eta tau``).
    optimistic : bool
        Two steps per iteration (optimistic mirror descent). ``False`` with ``tau = 0`` is plain
        softmax policy gradient (MWU on Q), the non-convergent baseline.
    batch_trajectories : int
        ``B`` for ``feedback="sampled"``.
    device : str or torch.device
        ``"cpu"`` runs the numpy engine (unless ``array_backend="torch"``); other devices run the
        torch engine there, with the fused Triton step on CUDA.
    seed : int
        Seed of the trajectory sampler.
    array_backend : {"auto", "numpy", "torch"}
    step_backend : {"auto", "reference", "triton"}
        Backend of :data:`~iclr25.rl.efg_pg.update.omd_step`.

    Attributes
    ----------
    iteration : int
        Iterations done.
    trajectories : int
        Trajectories sampled so far (sampled mode).
    """

    def __init__(
        self,
        game: Game,
        eta: float = 0.1,
        tau: float = 1e-3,
        gamma: float = 1e-3,
        regularizer: str = "entropy",
        feedback: str = "q",
        optimistic: bool = True,
        batch_trajectories: int = 64,
        device: Any = "cpu",
        seed: int = 0,
        array_backend: str = "auto",
        step_backend: str = "auto",
    ) -> None:
        check_game(game)
        eta, tau, gamma = check_real("eta", eta), check_real("tau", tau), check_real("gamma", gamma)
        if eta <= 0:
            raise ValueError(f"eta must be > 0, got {eta}")
        if tau < 0:
            raise ValueError(f"tau must be >= 0, got {tau}")
        if not 0 <= gamma < 1.0 / game.max_actions:
            raise ValueError(f"gamma must be in [0, 1/max|A(I)|) = [0, {1.0 / game.max_actions:.4g}), got {gamma}")
        if regularizer not in REGULARIZERS:
            raise ValueError(f"regularizer must be one of {REGULARIZERS}, got {regularizer!r}")
        if feedback not in FEEDBACKS:
            raise ValueError(f"feedback must be one of {FEEDBACKS}, got {feedback!r}")
        batch_trajectories = check_int("batch_trajectories", batch_trajectories, 1)
        optimistic = check_bool("optimistic", optimistic)
        if step_backend not in ("auto", "reference", "triton"):
            raise ValueError(f"step_backend must be 'auto', 'reference' or 'triton', got {step_backend!r}")
        self.game = game
        self.eta, self.tau, self.gamma = float(eta), float(tau), float(gamma)
        self.regularizer, self.feedback, self.optimistic = regularizer, feedback, bool(optimistic)
        self.batch_trajectories = batch_trajectories
        self.step_backend = step_backend
        self._backend = _resolve(device, array_backend)
        self._ar = game.arrays(self._backend)
        uniform = game.mask / game.num_actions[:, None]
        if self._backend == "numpy":
            self._bar = uniform.astype(np.float64)
            self._rng: Any = np.random.default_rng(seed)
        else:
            import torch

            self._bar = torch.as_tensor(uniform, dtype=torch.float64, device=self._backend)
            self._rng = torch.Generator(device=self._backend)
            self._rng.manual_seed(seed)
        self._cur = self._bar.copy() if self._backend == "numpy" else self._bar.clone()
        self._mask = self._ar["mask"]
        self.iteration = 0
        self.trajectories = 0

    @property
    def policy(self) -> TabularPolicy:
        """The current (played) iterate ``sigma_t``, the method's output."""
        return TabularPolicy(self.game, self._cur)

    def _step(self, ref: Any, g: Any, div: Any) -> Any:
        return omd_step(
            ref, g, div, self._mask, self.eta, self.gamma, regularizer=self.regularizer, backend=self.step_backend
        )

    def step(self) -> None:
        """One QFR iteration for both players simultaneously."""
        # The array module is looked up, not stored: a module attribute would make the solver
        # impossible to pickle or deepcopy (checkpointing).
        xp = _xp(self._cur)
        if self.feedback == "sampled":
            g, _, visits = sample_trajectory_q(
                self._ar, self._cur, self.batch_trajectories, self.tau, self.regularizer, self._rng
            )
            self.trajectories += self.batch_trajectories
            seen = (visits > 0)[:, None]
            div = xp.ones_like(visits) * (1.0 + self.eta * self.tau)
            bar = xp.where(seen, self._step(self._bar, g, div), self._bar)
            cur = xp.where(seen, self._step(bar, g, div), self._cur) if self.optimistic else bar
        else:
            cf, r, own = cf_values(self._ar, self._cur, self.tau, self.regularizer)
            if self.feedback == "q":
                g = cf / xp.where(r > 0, r, 1.0)[:, None]
                kappa = xp.ones_like(r)
            elif self.feedback == "traj_q":
                g = own[:, None] * cf
                kappa = own * r
            else:
                g = cf
                kappa = r
            div = 1.0 + self.eta * self.tau * kappa
            bar = self._step(self._bar, g, div)
            cur = self._step(bar, g, div) if self.optimistic else bar
        self._bar, self._cur = bar, cur
        self.iteration += 1

    def run(self, iters: int, eval_every: int = 100) -> list[dict[str, float]]:
        """Run ``iters`` iterations, evaluating the current iterate's exploitability.

        Parameters
        ----------
        iters : int
            Number of iterations.
        eval_every : int
            Evaluate at iteration 0 (before the first step, only on a fresh solver), every
            ``eval_every`` iterations and at the end.

        Returns
        -------
        list of dict
            ``{"iter", "exploitability", "trajectories"}`` per evaluation.
        """
        iters = check_int("iters", iters, 0)
        eval_every = check_int("eval_every", eval_every, 1)
        log: list[dict[str, float]] = []

        def record() -> None:
            e = exploitability(self.game, self._cur)
            log.append({"iter": self.iteration, "exploitability": e, "trajectories": self.trajectories})
            logger.debug("QFR iter %d exploitability %.3g", self.iteration, e)

        if self.iteration == 0:
            record()
        end = self.iteration + iters
        for _ in progress(range(iters), desc="QFR", total=iters):
            self.step()
            if self.iteration % eval_every == 0 or self.iteration == end:
                record()
        return log
