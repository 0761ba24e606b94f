"""Truncated Consistency Models (Lee, Xu, Geffner, Fanti, Kreis, Vahdat, Nie; ICLR 2025).

arXiv: https://arxiv.org/abs/2410.14895 -- official code: https://github.com/NVlabs/TCM

A consistency model f(x_t, t) maps every point of a probability-flow ODE trajectory to its origin.
TCM trains it in two stages::

    stage 1 (ECT/iCT):  t in [eps, T], r = t - Delta_t(step)  ──►  f_phi (frozen teacher)
    stage 2 (TCM):      t in [t', T]  ──►  f_trunc(x, t) = f_theta(x, t) if t >= t' else f_phi(x, t)
                        L = mean_C w d(f_theta(y_t, t), sg f_trunc(y_r, r))
                            + w_b mean_B w d(f_theta(y_t', t'), f_phi(y_r, r))

Only the generation part [t', T] is learned in stage 2, so the network's capacity goes to 1- and
2-step generation; the boundary samples at t' (targets from the frozen stage-1 model) rule out the
trivial constant solution of truncated self-consistency.
"""

from .digits import DigitsVariantResult, run_digits_variant
from .losses import (
    ConsistencyTrainingLoss,
    TruncatedConsistencyLoss,
    pseudo_huber,
    sample_truncated_log_student_t,
    sample_truncated_lognormal,
)
from .model import TruncatedCM
from .sampling import consistency_sample
from .schedule import ECTSchedule
from .training import TCMConfig, pretrain_edm, train_consistency, train_tcm, train_truncated

__all__ = [
    "ConsistencyTrainingLoss",
    "DigitsVariantResult",
    "ECTSchedule",
    "TCMConfig",
    "TruncatedCM",
    "TruncatedConsistencyLoss",
    "consistency_sample",
    "pretrain_edm",
    "pseudo_huber",
    "run_digits_variant",
    "sample_truncated_log_student_t",
    "sample_truncated_lognormal",
    "train_consistency",
    "train_tcm",
    "train_truncated",
]
