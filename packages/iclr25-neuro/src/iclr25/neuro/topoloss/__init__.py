"""TopoLoss: brain-like topography for any Linear/Conv2d/Conv1D layer.

Paper: Mayukh Deb, Mainak Deb, N. Apurva Ratan Murty, *TopoNets: High performing vision and language
models with brain-like topography*, ICLR 2025, https://arxiv.org/abs/2501.16396 (official code:
https://github.com/murtylab/topoloss).

Each chosen layer's units are laid row-major on a 2-D "cortical sheet" ``h × w = n`` (``h`` the
largest divisor of ``n`` with ``h ≤ √n``); a unit's vector is its incoming weights. The sheet is
blurred by bilinear down-sampling by ``(1/f_h, 1/f_w)`` and up-sampling back, and the loss rewards
each unit for pointing the same way as its blurred copy::

    weight (n, e) ─reshape─▶ sheet (h, w, e) ─down 1/f─▶ (h/f, w/f, e) ─up─▶ Ŵ (h, w, e)
    L_topo = 1 − mean_u cos(W_u, Ŵ_u)          L = L_task + τ · mean_ℓ L_topo(W_ℓ)

Usage: ``topo = TopoLoss.from_pattern(model, r"c_fc$", factor=4.0, tau=5.0)`` then
``loss = task_loss + topo(model)``. Metrics (:func:`sheet_smoothness`,
:func:`similarity_vs_distance`, :func:`effective_dimensionality`) measure the maps, and
:func:`downsample_weights` stores a smooth layer as its low-resolution sheet (``≈ 1/f²`` of the
parameters).
"""

from .loss import MODES, TopoLayer, TopoLoss, lowres_shape, topo_loss, topo_loss_batched
from .metrics import (
    DistanceCurve,
    DownsampledWeights,
    downsample_weights,
    effective_dimensionality,
    sheet_smoothness,
    similarity_vs_distance,
)
from .sheet import LAYOUTS, TARGETS, cortical_sheet, cortical_sheet_shape

__all__ = [
    "LAYOUTS",
    "MODES",
    "TARGETS",
    "DistanceCurve",
    "DownsampledWeights",
    "TopoLayer",
    "TopoLoss",
    "cortical_sheet",
    "cortical_sheet_shape",
    "downsample_weights",
    "effective_dimensionality",
    "lowres_shape",
    "sheet_smoothness",
    "similarity_vs_distance",
    "topo_loss",
    "topo_loss_batched",
]
