"""Spike-train statistics: firing rate, binary-train CV, ISI-CV and per-neuron ANOVA selectivity.

scipy is imported inside `anova_selectivity` only, so importing the core stays light.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch

__all__ = ["AnovaResult", "ISICVResult", "anova_selectivity", "cv_binary", "firing_rate", "isi_cv"]


def _check_spikes(name: str, spikes: torch.Tensor) -> None:
    if not isinstance(spikes, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(spikes).__name__}")
    if spikes.dim() < 1:
        raise ValueError(f"{name} must have a time dimension, got a 0-d tensor")


def firing_rate(spikes: torch.Tensor, dim: int = 0) -> torch.Tensor:
    """Mean spikes per step along ``dim`` (time): ``(T, ...)`` → ``(...)`` float tensor."""
    _check_spikes("spikes", spikes)
    x = spikes if spikes.is_floating_point() else spikes.to(torch.get_default_dtype())
    return x.mean(dim)


def _neurons_last(spikes: torch.Tensor, time_dim: int) -> np.ndarray:
    x = spikes.detach().to("cpu", torch.float64).movedim(time_dim, 0)
    return x.reshape(x.shape[0], math.prod(x.shape[1:])).numpy()  # (T, neurons); -1 fails for T = 0


def cv_binary(spikes: torch.Tensor, time_dim: int = 0, reduce: bool = True) -> torch.Tensor:
    """Coefficient of variation of the binary train: per-neuron ``std/mean`` over time, averaged.

    The official RSNN_bfd "CV" measure: population std (ddof = 0) of the 0/1 train divided by its
    mean, a zero mean replaced by 1e-20 (silent neurons count as CV 0).

    Parameters
    ----------
    spikes:
        ``(T, ...)`` 0/1 tensor; every non-time element is a neuron.
    time_dim:
        Time dimension.
    reduce:
        Average over neurons (scalar) or return the per-neuron values ``(...)``.

    Returns
    -------
    torch.Tensor
        float64 scalar, or per-neuron CVs of the non-time shape.
    """
    _check_spikes("spikes", spikes)
    x = _neurons_last(spikes, time_dim)
    if x.shape[0] == 0:
        raise ValueError(
            f"spikes must have at least 1 time step along time_dim={time_dim}, got shape {tuple(spikes.shape)}"
        )
    mean = x.mean(0)
    cv = x.std(0) / np.where(mean == 0, 1e-20, mean)
    if reduce:
        return torch.tensor(cv.mean() if cv.size else 0.0, dtype=torch.float64)
    shape = spikes.movedim(time_dim, 0).shape[1:]
    return torch.from_numpy(cv).reshape(shape)


class ISICVResult(NamedTuple):
    """ISI coefficient of variation.

    Attributes
    ----------
    mean:
        Mean CV over included neurons (``None`` when no neuron has enough spikes).
    values:
        ``(n_included,)`` float64 CVs of the included neurons.
    included:
        ``(...)`` bool mask (non-time shape) of neurons with ``>= min_spikes`` spikes.
    n_excluded:
        Neurons left out for firing fewer than ``min_spikes`` spikes.
    """

    mean: float | None
    values: torch.Tensor
    included: torch.Tensor
    n_excluded: int


def isi_cv(spikes: torch.Tensor, time_dim: int = 0, min_spikes: int = 3) -> ISICVResult:
    """Classical inter-spike-interval CV (``std(ISI)/mean(ISI)``, ddof = 0), NaN-free.

    Parameters
    ----------
    spikes:
        ``(T, ...)`` 0/1 tensor; every non-time element is a neuron.
    time_dim:
        Time dimension.
    min_spikes:
        Neurons with fewer spikes (fewer than ``min_spikes − 1`` intervals) are excluded and counted.

    Returns
    -------
    ISICVResult
    """
    _check_spikes("spikes", spikes)
    if not isinstance(min_spikes, int) or min_spikes < 2:
        raise ValueError(f"min_spikes must be an int >= 2, got {min_spikes!r}")
    x = _neurons_last(spikes, time_dim)
    shape = spikes.movedim(time_dim, 0).shape[1:]
    included = np.zeros(x.shape[1], dtype=bool)
    values = []
    for j in range(x.shape[1]):
        times = np.flatnonzero(x[:, j] > 0)
        if times.size < min_spikes:
            continue
        isi = np.diff(times).astype(np.float64)
        included[j] = True
        values.append(isi.std() / isi.mean())
    vals = torch.tensor(values, dtype=torch.float64)
    return ISICVResult(
        float(vals.mean()) if values else None,
        vals,
        torch.from_numpy(included).reshape(shape),
        int((~included).sum()),
    )


class AnovaResult(NamedTuple):
    """Per-neuron one-way ANOVA across classes.

    Attributes
    ----------
    pvalues:
        ``(neurons,)`` float64 p-values (1 where all classes have identical counts).
    fstat:
        ``(neurons,)`` F statistics (0 where undefined; inf when only the classes differ).
    selective:
        ``(neurons,)`` bool, ``pvalues < alpha``.
    """

    pvalues: torch.Tensor
    fstat: torch.Tensor
    selective: torch.Tensor


def anova_selectivity(counts_by_class: Sequence[torch.Tensor] | torch.Tensor, alpha: float = 1e-3) -> AnovaResult:
    """One-way ANOVA per neuron across classes (RSNN_bfd ``ANOVA()``).

    Parameters
    ----------
    counts_by_class:
        One ``(n_c, neurons)`` tensor per class (n_c observations, e.g. per-time-step spike counts
        summed over the class's trials), or a ``(classes, n, neurons)`` tensor. At least 2 classes.
    alpha:
        Significance level for ``selective``.

    Returns
    -------
    AnovaResult
        p-values equal to ``scipy.stats.f_oneway`` per neuron; neurons whose F is undefined (all
        counts identical: 0/0) get p = 1, as in the official code.
    """
    from scipy import special  # lazy: the core must not import scipy at module import

    groups = [
        g.detach().to("cpu", torch.float64).numpy() if isinstance(g, torch.Tensor) else None for g in counts_by_class
    ]
    if len(groups) < 2 or any(g is None for g in groups):
        raise TypeError("counts_by_class must be at least 2 tensors of shape (n_c, neurons)")
    if any(g.ndim != 2 for g in groups) or len({g.shape[1] for g in groups}) != 1:
        raise ValueError(f"each class must be (n_c, neurons) with one neuron count, got {[g.shape for g in groups]}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    sizes = np.array([g.shape[0] for g in groups], dtype=np.float64)
    n_total, k = sizes.sum(), len(groups)
    if (sizes < 1).any() or n_total - k < 1:
        raise ValueError(f"need >= 1 observation per class and more observations than classes, got {sizes.tolist()}")
    grand = sum(g.sum(0) for g in groups) / n_total
    means = [g.mean(0) for g in groups]
    ss_between = sum(n * (m - grand) ** 2 for n, m in zip(sizes, means, strict=True))
    ss_within = sum(((g - m) ** 2).sum(0) for g, m in zip(groups, means, strict=True))
    dfb, dfw = k - 1, n_total - k
    with np.errstate(divide="ignore", invalid="ignore"):
        f = (ss_between / dfb) / (ss_within / dfw)
    p = special.fdtrc(dfb, dfw, f)
    # 0/0 (every class constant and equal): official code keeps p = 1; c/0 (constant but different
    # classes) stays F = inf, p = 0 as in f_oneway
    undefined = np.isnan(f) | np.isnan(p)
    p = np.where(undefined, 1.0, p)
    f = np.where(undefined, 0.0, f)
    pv = torch.from_numpy(p)
    return AnovaResult(pv, torch.from_numpy(f), pv < alpha)
