"""AIHF: joint reward and policy learning from demonstrations and preferences.

Li, Zeng, Liao, Li, Kang, Garcia, Hong, "Joint Reward and Policy Learning with Demonstrations and Human Feedback
Improves Alignment", ICLR 2025, https://arxiv.org/abs/2406.06874.

One reward r_θ is fitted to demonstrations D and pairwise preferences P at once; the policy is the entropy- (or
KL-) regularized optimum for r_θ::

    max_θ  w_D·E_D[log π_θ(τ)] + w_P·E_P[log σ(R_θ(τ_w) − R_θ(τ_l))],   π_θ soft-optimal for r_θ at temperature β

    loop:  ĝ = (w_D/β)(Φ_demo − Φ_policy) + w_P·∇BT      (reward step, policy features from π_k)
           π_{k+1} ← a few warm-started policy steps on r_θ   (soft VI, or ARS on MuJoCo)

w_D = 0 is RLHF done in one loop, w_P = 0 is maximum-likelihood IRL; :class:`RLHFPipeline` is the
SFT → reward model → KL-RL baseline under the same API.
"""

from . import tabular
from .ars import ARS, LinearPolicy
from .data import PreferenceDataset, TrajectoryDataset, synthetic_preferences
from .estimator import AIHF, RLHFPipeline, bt_log_likelihood, fit_bradley_terry
from .rewards import LinearReward, MLPReward, RewardModel
from .soft_vi import batched_soft_vi

__all__ = [
    "AIHF",
    "ARS",
    "LinearPolicy",
    "LinearReward",
    "MLPReward",
    "PreferenceDataset",
    "RLHFPipeline",
    "RewardModel",
    "TrajectoryDataset",
    "batched_soft_vi",
    "bt_log_likelihood",
    "fit_bradley_terry",
    "synthetic_preferences",
    "tabular",
]
