"""Higher-order calibration: provable aleatoric/epistemic decompositions from k-snapshots.

Paper: G. Ahdritz, A. Gollakota, P. Gopalan, C. Peale, U. Wieder, "Provable Uncertainty Decomposition
via Higher-Order Calibration", ICLR 2025, https://arxiv.org/abs/2412.18808 (no official code found).

A *higher-order* predictor outputs, for every input, a mixture ``pi = sum_j w_j delta_{p_j}`` over
label distributions. It is higher-order calibrated when, on every level set ``[x]`` (inputs receiving
the same prediction), the true conditionals ``p*(x')`` are distributed exactly as ``pi``. Then, for a
concave entropy ``G``, the aleatoric part ``AU = sum_j w_j G(p_j)`` of the split ``TU = G(p_bar) =
AU + EU`` equals the true average ``E[G(p*(x')) | x' in [x]]``. Calibration is measured and achieved
from *k-snapshots* (k independent labels per input), whose count vectors follow the k-th order
projection ``Proj_k(pi) = sum_j w_j Multinomial(k, p_j)``::

    base predictor g(x) ──► level set b(x) ──┐
    calibration k-snapshots (count vectors) ─┴─► EM per level set ──► mixture pi_b
    test x ──► b(x) ──► pi_b ──► decompose(pi_b, G) ──► TU, AU, EU

Main API: :class:`Mixture`, :func:`decompose`, :class:`SnapshotDataset`, :func:`snapshot_nll`,
:func:`project_k`, :func:`hoce_k`, :class:`MixtureHead`, :class:`HigherOrderCalibrator`.
"""

from .calibrator import HigherOrderCalibrator, level_set_error
from .decomposition import decompose, gini_entropy, shannon_entropy
from .em import EMResult, fit_mixture_em
from .head import MixtureHead
from .mixture import Mixture
from .snapshots import (
    SnapshotDataset,
    count_vectors,
    counts_from_labels,
    hoce_k,
    project_k,
    sample_snapshots,
    snapshot_nll,
)

__all__ = [
    "EMResult",
    "HigherOrderCalibrator",
    "Mixture",
    "MixtureHead",
    "SnapshotDataset",
    "count_vectors",
    "counts_from_labels",
    "decompose",
    "fit_mixture_em",
    "gini_entropy",
    "hoce_k",
    "level_set_error",
    "project_k",
    "sample_snapshots",
    "shannon_entropy",
    "snapshot_nll",
]
