"""QFR: policy-gradient self-play with best-iterate convergence in extensive-form games.

Paper: Mingyang Liu, Gabriele Farina, Asuman Ozdaglar, "A Policy-Gradient Approach to Solving
Imperfect-Information Games with Best-Iterate Convergence", ICLR 2025,
https://arxiv.org/abs/2408.00751 (official code: QFR in https://github.com/liumy2010/LiteEFG).

Two-player zero-sum imperfect-information games are regularized by a *bidilated* entropy: each
player pays ``tau * psi(sigma(.|I))`` at each of its visited decision nodes, weighted by the
reach of chance and both players. QFR runs optimistic mirror descent at every infoset, driven by
Q-values (what rollouts estimate), and its current iterate converges to the regularized Nash
equilibrium::

    game (level arrays) --sigma_t--> q_values / sampled trajectories --g_t--> omd_step x2 --> sigma_t+1
                                                         exploitability(sigma_t) <--+

Public API: :mod:`games` (Kuhn, Leduc, OpenSpiel import), :class:`TabularPolicy`, :class:`QFR`,
:class:`CFRPlus`, :func:`exploitability`, :func:`regularized_gap`, :func:`best_response_value`,
:func:`q_values`, :func:`traj_q_estimate`, :data:`omd_step`.
"""

from . import games
from .cfr import CFRPlus
from .games import Game
from .policy import TabularPolicy
from .qfr import QFR, traj_q_estimate
from .update import omd_step
from .values import best_response_value, exploitability, policy_value, q_values, regularized_gap

__all__ = [
    "QFR",
    "CFRPlus",
    "Game",
    "TabularPolicy",
    "best_response_value",
    "exploitability",
    "games",
    "omd_step",
    "policy_value",
    "q_values",
    "regularized_gap",
    "traj_q_estimate",
]
