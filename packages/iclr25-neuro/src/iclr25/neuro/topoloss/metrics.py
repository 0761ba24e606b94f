"""Topography metrics and the parameter-efficient export of smooth sheets.

* :func:`sheet_smoothness` — neighbour similarity minus all-pairs similarity (0 for a random
  arrangement, → 1 for a smooth map).
* :func:`similarity_vs_distance` — the usual topography curve: mean pairwise cosine similarity
  against distance on the sheet.
* :func:`effective_dimensionality` — participation ratio ``(Σλ)² / Σλ²`` of a response covariance.
* :func:`downsample_weights` — keep only the low-resolution sheet (``≈ 1/(f_h f_w)`` of the
  layer's parameters) and rebuild the layer's weight from it by up-sampling.
"""

from __future__ import annotations

import logging
import math
import numbers
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from .loss import MODES, _blur, _factor_pair, lowres_shape
from .sheet import TARGETS, cortical_sheet, resolve_layout

__all__ = [
    "DistanceCurve",
    "DownsampledWeights",
    "downsample_weights",
    "effective_dimensionality",
    "sheet_smoothness",
    "similarity_vs_distance",
]

logger = logging.getLogger(__name__)
_EPS = 1e-8


def _as_sheet(x: nn.Module | torch.Tensor, target: str, weight_layout: str) -> torch.Tensor:
    """(h, w, e) sheet from a module, a weight tensor (2-D/4-D, out first) or a sheet (3-D)."""
    if isinstance(x, torch.Tensor) and x.ndim == 3:
        sheet = x
    else:
        sheet = cortical_sheet(x, target=target, weight_layout=weight_layout)
        if sheet.ndim == 2:  # bias: one scalar per unit
            sheet = sheet.unsqueeze(-1)
    if not sheet.is_floating_point():
        raise TypeError(f"the sheet must be a floating tensor, got dtype {sheet.dtype}")
    if sheet.shape[0] * sheet.shape[1] < 2:
        raise ValueError(f"the sheet needs at least 2 units, got shape {tuple(sheet.shape)}")
    return sheet


def sheet_smoothness(x: nn.Module | torch.Tensor, target: str = "weight", weight_layout: str = "auto") -> torch.Tensor:
    """Mean cosine similarity of 4-neighbours on the sheet minus the mean over all unit pairs.

    Parameters
    ----------
    x:
        A layer (its sheet is built with :func:`~iclr25.neuro.topoloss.cortical_sheet`, as the
        loss does), a weight tensor ``(units, ...)``, or a sheet ``(h, w, e)`` (e.g. responses
        ``(h, w, samples)``).
    target, weight_layout:
        As in :func:`~iclr25.neuro.topoloss.cortical_sheet`, when ``x`` is a module or weight.

    Returns
    -------
    smoothness:
        0-dim tensor in ``[-2, 2]``: about 0 when units are placed at random, close to 1 for a
        smooth map. All-zero units count as similarity 0 (``eps = 1e-8``).
    """
    sheet = _as_sheet(x, target, weight_layout)
    h, w = int(sheet.shape[0]), int(sheet.shape[1])
    n = h * w
    u = F.normalize(sheet.double(), dim=-1, eps=_EPS)
    pairs = [(u[:, 1:] * u[:, :-1]).sum(-1).reshape(-1), (u[1:] * u[:-1]).sum(-1).reshape(-1)]
    neighbour = torch.cat(pairs).mean()
    flat = u.reshape(n, -1)
    # Σ_{i≠j} cos_ij = |Σ_i u_i|² − Σ_i |u_i|², so the all-pairs mean needs no n×n matrix.
    total = flat.sum(0).pow(2).sum() - flat.pow(2).sum()
    all_pairs = total / (n * (n - 1))
    return (neighbour - all_pairs).to(sheet.dtype)


class DistanceCurve(NamedTuple):
    """Output of :func:`similarity_vs_distance`; every field is a ``(bins,)`` tensor."""

    distance: torch.Tensor  # bin centres, in units of sheet cells
    similarity: torch.Tensor  # mean pairwise cosine similarity in the bin (NaN when empty)
    count: torch.Tensor  # number of unit pairs in the bin


def similarity_vs_distance(
    x: nn.Module | torch.Tensor,
    bins: int | torch.Tensor = 10,
    target: str = "weight",
    weight_layout: str = "auto",
) -> DistanceCurve:
    """Mean cosine similarity of unit pairs as a function of their Euclidean distance on the sheet.

    Parameters
    ----------
    x:
        As in :func:`sheet_smoothness`: a layer, a weight ``(units, ...)`` or a sheet ``(h, w, e)``
        (pass responses arranged on the sheet as ``(h, w, samples)`` for response topography).
    bins:
        Number of equal-width bins over ``[1, max distance]``, or a 1-D increasing tensor of edges
        (a pair at exactly the last edge falls in the last bin).
    target, weight_layout:
        As in :func:`~iclr25.neuro.topoloss.cortical_sheet`.

    Returns
    -------
    DistanceCurve
        ``distance`` (bin centres), ``similarity`` (NaN for empty bins) and ``count``, each ``(B,)``.
        Pairs ``i < j`` only (self-pairs excluded). Memory is ``O(n²)`` in the number of units.
    """
    sheet = _as_sheet(x, target, weight_layout)
    h, w = int(sheet.shape[0]), int(sheet.shape[1])
    n = h * w
    u = F.normalize(sheet.reshape(n, -1).double(), dim=-1, eps=_EPS)
    rows = torch.arange(n, device=sheet.device) // w
    cols = torch.arange(n, device=sheet.device) % w
    i, j = torch.triu_indices(n, n, offset=1, device=sheet.device)
    dist = torch.sqrt(((rows[i] - rows[j]) ** 2 + (cols[i] - cols[j]) ** 2).double())
    sim = (u[i] * u[j]).sum(-1)
    if isinstance(bins, torch.Tensor):
        edges = bins.to(device=sheet.device, dtype=torch.float64)
        if edges.ndim != 1 or edges.numel() < 2 or not bool((edges[1:] > edges[:-1]).all()):
            raise ValueError(f"bins as a tensor must be 1-D, increasing, with >= 2 edges; got {bins!r}")
    else:
        if isinstance(bins, bool) or not isinstance(bins, numbers.Integral) or bins < 1:
            raise ValueError(f"bins must be an int >= 1 or a tensor of edges, got {bins!r}")
        bins = int(bins)
        edges = torch.linspace(1.0, float(dist.max()), bins + 1, dtype=torch.float64, device=sheet.device)
        if edges[-1] <= edges[0]:  # a 1x2 sheet: a single distance
            edges = torch.linspace(0.5, 1.5, bins + 1, dtype=torch.float64, device=sheet.device)
    nb = edges.numel() - 1
    idx = torch.bucketize(dist, edges, right=True) - 1
    idx = torch.where(dist == edges[-1], torch.full_like(idx, nb - 1), idx)
    keep = (idx >= 0) & (idx < nb)
    count = torch.zeros(nb, dtype=torch.float64, device=sheet.device).index_add_(
        0, idx[keep], torch.ones_like(sim[keep])
    )
    total = torch.zeros(nb, dtype=torch.float64, device=sheet.device).index_add_(0, idx[keep], sim[keep])
    mean = torch.where(count > 0, total / count.clamp_min(1), torch.full_like(total, math.nan))
    centres = (edges[1:] + edges[:-1]) / 2
    return DistanceCurve(centres.to(sheet.dtype), mean.to(sheet.dtype), count.long())


def effective_dimensionality(responses: torch.Tensor) -> torch.Tensor:
    """Participation ratio ``(Σλ)² / Σλ²`` of the covariance of ``responses``.

    Parameters
    ----------
    responses:
        ``(samples, units)`` float tensor (e.g. a layer's activations on a test set).

    Returns
    -------
    dim:
        0-dim tensor in ``[1, min(samples − 1, units)]``: 1 when one direction carries all the
        variance, ``units`` for isotropic responses. Computed from traces (``Σλ = tr C``,
        ``Σλ² = ‖C‖_F²``), without an eigendecomposition.
    """
    if not isinstance(responses, torch.Tensor) or responses.ndim != 2 or not responses.is_floating_point():
        got = tuple(responses.shape) if isinstance(responses, torch.Tensor) else type(responses).__name__
        raise ValueError(f"responses must be a floating (samples, units) tensor, got {got}")
    if responses.shape[0] < 2:
        raise ValueError(f"responses needs at least 2 samples, got shape {tuple(responses.shape)}")
    x = responses.double()
    x = x - x.mean(0, keepdim=True)
    # C = XᵀX/(N−1) and XXᵀ/(N−1) share their non-zero eigenvalues: use the smaller Gram matrix.
    gram = x.t() @ x if x.shape[1] <= x.shape[0] else x @ x.t()
    trace = torch.diagonal(gram).sum()
    frob2 = gram.pow(2).sum()
    if float(frob2) == 0.0:
        raise ValueError("responses have zero variance: effective dimensionality is undefined")
    return (trace.pow(2) / frob2).to(responses.dtype)


class DownsampledWeights(NamedTuple):
    """Output of :func:`downsample_weights`."""

    low_res: torch.Tensor  # (h_low, w_low, e): all that needs storing
    weight: torch.Tensor  # the layer's weight rebuilt by up-sampling low_res, same shape as layer.weight
    kept_fraction: float  # low_res.numel() / layer.weight.numel()


def downsample_weights(
    layer: nn.Module,
    factor: float | tuple[float, float] = 4.0,
    target: str = "weight",
    weight_layout: str = "auto",
    mode: str = "bilinear",
    inplace: bool = False,
) -> DownsampledWeights:
    """Keep only the down-sampled cortical sheet of ``layer`` and rebuild its weight from it.

    The same resampling as the loss: ``low = interpolate(W, 1/f)``; the rebuilt sheet is
    ``interpolate(low, (h, w))``, i.e. the loss's ``Ŵ``. A topographic layer (small TopoLoss) loses
    little; a layer trained without TopoLoss loses most of its function.

    Parameters
    ----------
    layer:
        ``nn.Linear``, ``nn.Conv2d`` or ``Conv1D`` (any module with a 2-D/4-D weight).
    factor:
        ``f`` for both sides or ``(f_h, f_w)``; the stored sheet is ``⌊h/f_h⌋ × ⌊w/f_w⌋`` units.
    target:
        ``"weight"`` (output units) or ``"input"`` (input units).
    weight_layout, mode:
        As in :class:`~iclr25.neuro.topoloss.TopoLayer`.
    inplace:
        Also copy the rebuilt weight into ``layer.weight`` (a registered parameter or buffer;
        ``ValueError`` for a computed weight such as a ``weight_norm`` parametrization).

    Returns
    -------
    DownsampledWeights
        ``low_res (h_low, w_low, e)``, ``weight`` (``layer.weight``'s shape) and ``kept_fraction``.
    """
    if not isinstance(layer, nn.Module) or not isinstance(getattr(layer, "weight", None), torch.Tensor):
        raise TypeError(f"layer must be a module with a weight tensor, got {type(layer).__name__}")
    if target not in TARGETS or target == "bias":
        raise ValueError(f"target must be 'weight' or 'input', got {target!r}")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    fh, fw = _factor_pair(factor, f"downsample_weights({type(layer).__name__})")
    weight = layer.weight
    if inplace and not any(t is weight for t in (*layer.parameters(recurse=False), *layer.buffers(recurse=False))):
        raise ValueError(
            f"inplace=True needs {type(layer).__name__}.weight to be a registered parameter or buffer, but it is "
            "computed (e.g. by a weight_norm/spectral_norm parametrization), so writing it would have no effect; "
            "use inplace=False and assign the returned weight yourself"
        )
    layout = resolve_layout(layer, weight_layout)
    with torch.no_grad():
        sheet = cortical_sheet(layer, target=target, weight_layout=weight_layout)
        h, w, e = (int(s) for s in sheet.shape)
        lowres_shape(h, w, fh, fw, where=f"{type(layer).__name__} (cortical sheet {h}x{w}x{e})")
        grid = sheet.permute(2, 0, 1).unsqueeze(0)
        low = F.interpolate(grid, scale_factor=(1.0 / fh, 1.0 / fw), mode=mode)
        up = _blur(grid, fh, fw, mode)[0].permute(1, 2, 0).reshape(h * w, e)
        # Undo cortical_sheet: units back to the weight's own layout.
        base = weight.t() if layout == "in_out" else weight
        if target == "weight":
            rebuilt = up.reshape(base.shape)
        else:
            swapped = base.transpose(0, 1).shape
            rebuilt = up.reshape(swapped).transpose(0, 1)
        if layout == "in_out":
            rebuilt = rebuilt.t()
        rebuilt = rebuilt.contiguous()
        if inplace:
            weight.copy_(rebuilt)
    low_res = low[0].permute(1, 2, 0).contiguous()
    kept = low_res.numel() / weight.numel()
    logger.debug("downsample_weights: sheet %dx%d -> %s, kept %.4f", h, w, tuple(low_res.shape[:2]), kept)
    return DownsampledWeights(low_res, rebuilt, kept)
