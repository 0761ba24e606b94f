"""Post-hoc higher-order calibration of any classifier or ensemble from k-snapshots."""

from __future__ import annotations

import logging
import numbers
import warnings

import torch
from torch import Tensor

from .em import fit_mixture_em, pad_buckets
from .mixture import Mixture, _check_simplex, _int_arg
from .snapshots import check_counts

__all__ = ["HigherOrderCalibrator", "level_set_error"]

log = logging.getLogger(__name__)

_BUCKETERS = ("argmax_conf", "kmeans")


def _first_order(base_probs: Tensor, name: str = "base_probs") -> Tensor:
    """Validate ``(n, C)`` or ``(n, M, C)`` predictions and return the ``(n, C)`` first-order mean."""
    if not isinstance(base_probs, Tensor):
        raise TypeError(f"{name} must be a floating torch.Tensor, got {type(base_probs).__name__}")
    if not base_probs.is_floating_point():
        raise TypeError(f"{name} must be a floating tensor, got {base_probs.dtype}")
    if base_probs.dim() not in (2, 3):
        raise ValueError(f"{name} must have shape (n, C) or (n, M, C), got {tuple(base_probs.shape)}")
    _check_simplex(base_probs, name)
    return base_probs if base_probs.dim() == 2 else base_probs.mean(1)


def level_set_error(pred: Tensor, truth: Tensor, bucket_ids: Tensor) -> float:
    """Mass-weighted ``|mean_b pred - mean_b truth|`` over level sets (what calibration guarantees).

    Parameters
    ----------
    pred:
        ``(n,)`` predicted quantity per point (e.g. aleatoric uncertainty).
    truth:
        ``(n,)`` true quantity per point (e.g. ``G(p*(x))``).
    bucket_ids:
        ``(n,)`` level set of each point.

    Returns
    -------
    float
        ``sum_b (n_b / n) |mean_{i in b} pred_i - mean_{i in b} truth_i|``.
    """
    for name, t in (("pred", pred), ("truth", truth), ("bucket_ids", bucket_ids)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor of shape (n,), got {type(t).__name__}")
    if pred.shape != truth.shape or pred.shape != bucket_ids.shape or pred.dim() != 1:
        raise ValueError(
            f"pred, truth and bucket_ids must share one (n,) shape, got {tuple(pred.shape)}, "
            f"{tuple(truth.shape)}, {tuple(bucket_ids.shape)}"
        )
    if pred.numel() == 0:
        raise ValueError("pred, truth and bucket_ids must hold at least one point, got n = 0")
    if bucket_ids.is_floating_point() or bucket_ids.is_complex():
        raise ValueError(f"bucket_ids must be an integer tensor, got {bucket_ids.dtype}")
    if bucket_ids.min() < 0:
        raise ValueError(f"bucket_ids must be non-negative, got min {bucket_ids.min().item()}")
    ids = bucket_ids.long()
    nb = int(ids.max().item()) + 1
    diff = torch.zeros(nb, dtype=torch.float64, device=pred.device)
    diff.index_add_(0, ids, (pred - truth).double())
    # sum_b (n_b/n)|sum_b diff / n_b| = sum_b |sum_b diff| / n
    return float(diff.abs().sum() / pred.numel())


class HigherOrderCalibrator:
    """Turn any first-order predictor or ensemble into a k-th order calibrated mixture predictor.

    Level sets are formed from the base predictor's outputs on a calibration split that carries
    k-snapshots; inside each level set a mixture of ``m`` categoricals is fitted to the snapshot count
    vectors by EM (maximum likelihood of ``Proj_k``); every input of that level set then receives that
    mixture. Level sets with fewer than ``min_bucket`` snapshots receive the pooled mixture.

    Parameters
    ----------
    n_components:
        ``m``, components per level-set mixture.
    bucketer:
        ``"argmax_conf"``: level set = (argmax class, confidence bin), with ``n_bins`` per-class quantile
        bins of the top probability (``C * n_bins`` level sets). ``"kmeans"``: k-means with
        ``C * n_bins`` centres on the predicted distributions.
    n_bins:
        Confidence bins per class (see ``bucketer``).
    em_iters:
        EM iterations per restart.
    restarts:
        EM random restarts per level set.
    seed:
        Seed of the EM (and k-means) starting points.
    min_bucket:
        Level sets with fewer calibration snapshots use the pooled mixture.

    Attributes
    ----------
    n_buckets_:
        Number of level sets ``B``.
    mixtures_:
        :class:`Mixture` with batch shape ``(B,)``: the prediction of each level set.
    pooled_:
        Mixture fitted to all calibration snapshots (the fallback).
    bucket_sizes_:
        ``(B,)`` calibration snapshots per level set.
    fallback_buckets_:
        Level sets that use the pooled mixture (fewer than ``min_bucket`` snapshots).
    k_:
        Labels per calibration snapshot.

    Examples
    --------
    >>> cal = HigherOrderCalibrator().fit(base_probs_cal, counts_cal)   # doctest: +SKIP
    >>> decompose(cal.predict(base_probs_test), "gini")["aleatoric"]      # doctest: +SKIP
    """

    def __init__(
        self,
        n_components: int = 6,
        bucketer: str = "argmax_conf",
        n_bins: int = 5,
        em_iters: int = 200,
        restarts: int = 3,
        seed: int = 0,
        min_bucket: int = 30,
    ) -> None:
        if bucketer not in _BUCKETERS:
            raise ValueError(f"bucketer must be one of {_BUCKETERS}, got {bucketer!r}")
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
            raise TypeError(f"seed must be an int, got {seed!r} ({type(seed).__name__})")
        self.n_components = _int_arg(n_components, "n_components")
        self.bucketer = bucketer
        self.n_bins = _int_arg(n_bins, "n_bins")
        self.em_iters = _int_arg(em_iters, "em_iters")
        self.restarts = _int_arg(restarts, "restarts")
        self.seed = int(seed)
        self.min_bucket = _int_arg(min_bucket, "min_bucket")

    # ------------------------------------------------------------------ level sets
    def _fit_buckets(self, probs: Tensor, gen: torch.Generator) -> None:
        c = probs.shape[1]
        self.n_classes_ = c
        if self.bucketer == "argmax_conf":
            conf, cls = probs.max(1)
            qs = torch.linspace(0, 1, self.n_bins + 1, dtype=probs.dtype, device=probs.device)[1:-1]
            edges = []
            for y in range(c):
                sel = conf[cls == y]
                # Quantile edges give equally filled bins; a class never predicted keeps even edges.
                edges.append(torch.quantile(sel, qs) if sel.numel() else 1.0 / c + (1.0 - 1.0 / c) * qs)
            self.edges_ = torch.stack(edges)  # (C, n_bins - 1)
            self.n_buckets_ = c * self.n_bins
        else:
            k = c * self.n_bins
            n = probs.shape[0]
            # k-means++ seeding, then Lloyd iterations
            centres = [probs[torch.randint(n, (1,), generator=gen).item()]]
            for _ in range(1, k):
                d2 = torch.cdist(probs, torch.stack(centres)).min(1).values.square()
                pick = torch.multinomial(d2.cpu() + 1e-12, 1, generator=gen).item()
                centres.append(probs[pick])
            centres = torch.stack(centres)
            for _ in range(50):
                assign = torch.cdist(probs, centres).argmin(1)
                new = torch.zeros_like(centres).index_add_(0, assign, probs)
                cnt = torch.bincount(assign, minlength=k).to(probs.dtype)
                centres = torch.where(cnt[:, None] > 0, new / cnt.clamp_min(1)[:, None], centres)
            self.centres_ = centres
            self.n_buckets_ = k

    def bucket_ids(self, base_probs: Tensor) -> Tensor:
        """Level set of each input, as fixed on the calibration split.

        Parameters
        ----------
        base_probs:
            ``(n, C)`` predictions or ``(n, M, C)`` ensemble members of the base predictor.

        Returns
        -------
        Tensor
            ``(n,)`` int64 in ``[0, n_buckets_)``.
        """
        self._check_fitted()
        probs = _first_order(base_probs).to(torch.float64)
        if probs.shape[1] != self.n_classes_:
            raise ValueError(f"base_probs must have C = {self.n_classes_} classes, got {probs.shape[1]}")
        return self._assign(probs)

    def _assign(self, probs: Tensor) -> Tensor:
        """Level sets of ``(n, C)`` float64 first-order predictions that were validated in their own dtype.

        Not re-validated here: the float64 tolerance would reject float32/bf16 inputs that passed the
        tolerance of their own dtype.
        """
        if self.bucketer == "argmax_conf":
            conf, cls = probs.max(1)
            edges = self.edges_.to(probs.device)[cls]  # (n, n_bins - 1)
            bins = (conf[:, None] > edges).sum(1)
            return cls * self.n_bins + bins
        return torch.cdist(probs, self.centres_.to(probs.device)).argmin(1)

    def _check_fitted(self) -> None:
        if not hasattr(self, "n_buckets_"):
            raise RuntimeError("HigherOrderCalibrator is not fitted; call fit(base_probs, counts) first")

    # ------------------------------------------------------------------ fit / predict
    def fit(self, base_probs: Tensor, counts: Tensor) -> HigherOrderCalibrator:
        """Form level sets and fit one mixture per level set to the calibration snapshots.

        Parameters
        ----------
        base_probs:
            ``(n, C)`` predictions or ``(n, M, C)`` ensemble members on the calibration split.
        counts:
            ``(n, C)`` snapshot count vectors of the same inputs, all with the same total ``k``.

        Returns
        -------
        HigherOrderCalibrator
            ``self``.

        Warns
        -----
        UserWarning
            When ``k = 1``: single labels identify only the mean, so only first-order calibration is
            possible and the aleatoric/epistemic split is not determined by the data.
        """
        probs = _first_order(base_probs).to(torch.float64)
        k = check_counts(counts, probs.shape[1])
        if counts.shape[0] != probs.shape[0]:
            raise ValueError(f"counts must have n = {probs.shape[0]} rows like base_probs, got {counts.shape[0]}")
        if k == 1:
            warnings.warn(
                "counts hold one label per input (k = 1): only first-order calibration is possible; the "
                "aleatoric/epistemic split is then set by the EM start, not by the data. Use k >= 2.",
                UserWarning,
                stacklevel=2,
            )
        self.k_ = k
        gen = torch.Generator().manual_seed(self.seed)
        self._fit_buckets(probs, gen)
        c64 = counts.to(device=probs.device, dtype=torch.float64)
        ids = self._assign(probs)
        sizes = torch.bincount(ids, minlength=self.n_buckets_)
        self.bucket_sizes_ = sizes.cpu()
        em_kw = dict(n_components=self.n_components, iters=self.em_iters, restarts=self.restarts, generator=gen)
        self.pooled_ = fit_mixture_em(c64, **em_kw).mixture
        big = (sizes >= self.min_bucket).nonzero().flatten()
        self.fallback_buckets_ = [int(b) for b in (sizes < self.min_bucket).nonzero().flatten()]
        if self.fallback_buckets_:
            log.info(
                "level sets %s have < %d snapshots: using the pooled mixture", self.fallback_buckets_, self.min_bucket
            )
        weights = self.pooled_.weights.expand(self.n_buckets_, -1).clone()
        components = self.pooled_.components.expand(self.n_buckets_, -1, -1).clone()
        if big.numel():
            remap = torch.full((self.n_buckets_,), -1, dtype=torch.int64, device=ids.device)
            remap[big] = torch.arange(big.numel(), device=ids.device)
            keep = remap[ids] >= 0
            padded, mask = pad_buckets(c64[keep], remap[ids][keep], big.numel())
            fitted = fit_mixture_em(padded, mask, **em_kw).mixture
            weights[big] = fitted.weights
            components[big] = fitted.components
        self.mixtures_ = Mixture(weights, components, validate=False)
        return self

    def predict(self, base_probs: Tensor) -> Mixture:
        """The calibrated higher-order prediction of each input.

        Parameters
        ----------
        base_probs:
            ``(n, C)`` or ``(n, M, C)`` base predictions.

        Returns
        -------
        Mixture
            Batch shape ``(n,)``, ``m = n_components``, dtype of ``base_probs``.
        """
        ids = self.bucket_ids(base_probs)
        mix = self.mixtures_
        return Mixture(
            mix.weights.to(ids.device)[ids].to(base_probs.dtype),
            mix.components.to(ids.device)[ids].to(base_probs.dtype),
            validate=False,
        )
