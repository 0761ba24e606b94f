"""k-snapshots (k labels per input), the snapshot likelihood, Proj_k and HOCE_k."""

from __future__ import annotations

import math
from itertools import combinations

import torch
from torch import Tensor

from iclr25.core.device import compute_dtype

from .mixture import Mixture, _check_simplex, _int_arg

__all__ = [
    "MAX_COUNT_VECTORS",
    "SnapshotDataset",
    "check_counts",
    "count_vectors",
    "counts_from_labels",
    "hoce_k",
    "project_k",
    "sample_snapshots",
    "snapshot_nll",
]

#: Largest number of count vectors ``C(k+C-1, C-1)`` that :func:`project_k` enumerates.
MAX_COUNT_VECTORS = 1_000_000


def check_counts(counts: Tensor, n_classes: int | None = None, name: str = "counts") -> int:
    """Validate a ``(n, C)`` matrix of snapshot count vectors and return their common total ``k``.

    Raises
    ------
    TypeError
        When ``counts`` is not a tensor.
    ValueError
        When it is not 2-D, has the wrong number of classes, holds negative, fractional or non-finite
        entries, or its rows have different totals (pass snapshots of different k separately).
    """
    if not isinstance(counts, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of shape (n, C), got {type(counts).__name__}")
    if counts.dim() != 2:
        raise ValueError(f"{name} must have shape (n, C), got {tuple(counts.shape)}")
    if n_classes is not None and counts.shape[1] != n_classes:
        raise ValueError(f"{name} must have C = {n_classes} columns, got {counts.shape[1]}")
    if counts.shape[0] == 0:
        raise ValueError(f"{name} must have at least one row, got shape {tuple(counts.shape)}")
    c = counts.detach()
    if c.is_floating_point():
        if not torch.isfinite(c).all():
            raise ValueError(f"{name} must be finite, got NaN or inf entries")
        if (c != c.round()).any():
            raise ValueError(f"{name} must hold integer counts, got fractional entries")
    if (c < 0).any():
        raise ValueError(f"{name} must be non-negative, got min {c.min().item()}")
    totals = c.sum(1)
    lo, hi = totals.min().item(), totals.max().item()
    if lo != hi:
        raise ValueError(
            f"all rows of {name} must have the same total k, got totals from {int(lo)} to {int(hi)} "
            "(pass snapshots of different k as separate calls)"
        )
    if lo < 1:
        raise ValueError(f"{name} rows must hold at least one label (k >= 1), got k = {int(lo)}")
    return int(lo)


def counts_from_labels(labels: Tensor, n_classes: int) -> Tensor:
    """Count vectors of k-snapshots.

    Parameters
    ----------
    labels:
        ``(n, k)`` integer labels in ``[0, n_classes)``.
    n_classes:
        Number of classes ``C``.

    Returns
    -------
    Tensor
        ``(n, C)`` int64 counts; each row sums to ``k``.
    """
    if not isinstance(labels, Tensor):
        raise TypeError(f"labels must be an integer torch.Tensor of shape (n, k), got {type(labels).__name__}")
    if labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool:
        raise TypeError(f"labels must be an integer tensor of shape (n, k), got {labels.dtype}")
    if labels.dim() != 2 or labels.shape[1] < 1:
        raise ValueError(f"labels must have shape (n, k) with k >= 1, got {tuple(labels.shape)}")
    n_classes = _int_arg(n_classes, "n_classes")
    if labels.numel() and (labels.min() < 0 or labels.max() >= n_classes):
        raise ValueError(
            f"labels must lie in [0, {n_classes}), got values in [{labels.min().item()}, {labels.max().item()}]"
        )
    out = torch.zeros(labels.shape[0], n_classes, dtype=torch.int64, device=labels.device)
    return out.scatter_add_(1, labels.long(), torch.ones_like(labels, dtype=torch.int64))


def sample_snapshots(p: Tensor, k: int, generator: torch.Generator | None = None) -> Tensor:
    """Draw ``k`` i.i.d. labels from each row of ``p`` (a k-snapshot per input).

    Parameters
    ----------
    p:
        ``(n, C)`` true conditional label distributions ``p*(x_i)``.
    k:
        Labels per input.
    generator:
        Optional torch generator for reproducibility.

    Returns
    -------
    Tensor
        ``(n, k)`` int64 labels.
    """
    k = _int_arg(k, "k")
    if not isinstance(p, Tensor):
        raise TypeError(f"p must be a floating torch.Tensor of shape (n, C), got {type(p).__name__}")
    if not p.is_floating_point():
        raise TypeError(f"p must be a floating tensor of shape (n, C), got {p.dtype}")
    if p.dim() != 2:
        raise ValueError(f"p must have shape (n, C), got {tuple(p.shape)}")
    _check_simplex(p, "p")
    return torch.multinomial(p, k, replacement=True, generator=generator)


class SnapshotDataset(torch.utils.data.Dataset):
    """Inputs with ``k`` independent labels each.

    Indexing returns ``(x[i], counts[i])``, so the dataset plugs into a ``DataLoader`` and
    :func:`snapshot_nll`.

    Parameters
    ----------
    x:
        ``(n, ...)`` inputs.
    labels:
        ``(n, k)`` integer labels.
    n_classes:
        Number of classes ``C``; inferred as ``labels.max() + 1`` when omitted.

    Attributes
    ----------
    counts:
        ``(n, C)`` float count vectors (dtype of ``x`` when floating, else the default dtype).
    k:
        Labels per input.
    """

    def __init__(self, x: Tensor, labels: Tensor, n_classes: int | None = None) -> None:
        if not isinstance(x, Tensor):
            raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
        if not isinstance(labels, Tensor):
            raise TypeError(f"labels must be a torch.Tensor of shape (n, k), got {type(labels).__name__}")
        if labels.dim() != 2:
            raise ValueError(f"labels must have shape (n, k), got {tuple(labels.shape)}")
        if x.shape[0] != labels.shape[0]:
            raise ValueError(f"x and labels must have the same n, got {x.shape[0]} and {labels.shape[0]}")
        if n_classes is not None:
            n_classes = _int_arg(n_classes, "n_classes")
        else:
            if labels.numel() and labels.min() < 0:
                raise ValueError(f"labels must be non-negative, got min {labels.min().item()}")
            n_classes = int(labels.max().item()) + 1 if labels.numel() else 1
        dtype = x.dtype if x.is_floating_point() else torch.get_default_dtype()
        self.x = x
        self.labels = labels
        self.n_classes = n_classes
        self.counts = counts_from_labels(labels, n_classes).to(dtype)

    @property
    def k(self) -> int:
        """Labels per input."""
        return self.labels.shape[1]

    def __len__(self) -> int:
        return self.x.shape[0]

    def __getitem__(self, i):
        return self.x[i], self.counts[i]


def _check_mix(mix: Mixture) -> None:
    if not isinstance(mix, Mixture):
        raise TypeError(f"mix must be a Mixture, got {type(mix).__name__}")


def snapshot_nll(mix: Mixture, counts: Tensor, reduction: str = "mean") -> Tensor:
    """Negative k-snapshot log-likelihood of count vectors under per-input mixtures.

    ``NLL_i = -log sum_j w_j prod_y p_{jy}^{c_iy} = -logsumexp_j(log w_j + sum_y c_iy log p_jy)``: the
    likelihood of the ordered label sequence; the multinomial coefficient (a constant) is dropped.

    Parameters
    ----------
    mix:
        Mixtures with batch shape ``(n,)``.
    counts:
        ``(n, C)`` count vectors, all with the same total ``k``.
    reduction:
        ``"mean"``, ``"sum"`` or ``"none"``.

    Returns
    -------
    Tensor
        Scalar, or ``(n,)`` for ``reduction="none"``.
    """
    _check_mix(mix)
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    check_counts(counts, mix.n_classes)
    if tuple(mix.batch_shape) != (counts.shape[0],):
        raise ValueError(
            f"mix must have batch shape ({counts.shape[0]},) to match counts, got {tuple(mix.batch_shape)}"
        )
    c = counts.to(mix.components.dtype).unsqueeze(1)
    if mix._log_components is None:
        # xlogy keeps 0 * log 0 = 0, so components with exact zeros on unobserved classes are fine.
        per_comp = torch.special.xlogy(c, mix.components)
    else:
        # The same 0 * log 0 = 0 for logits masked with -inf (0 * -inf would be NaN).
        per_comp = torch.where(c > 0, c * mix.log_components, 0.0)
    ll = torch.logsumexp(mix.log_weights + per_comp.sum(-1), dim=-1)
    nll = -ll
    if reduction == "mean":
        return nll.mean()
    if reduction == "sum":
        return nll.sum()
    return nll


def count_vectors(k: int, n_classes: int, device: torch.device | str | None = None) -> Tensor:
    """All count vectors of ``k`` labels over ``n_classes`` classes, lexicographically ordered.

    Returns
    -------
    Tensor
        ``(S, C)`` int64, ``S = C(k+C-1, C-1)``.
    """
    k = _int_arg(k, "k", minimum=0)
    n_classes = _int_arg(n_classes, "n_classes")
    size = math.comb(k + n_classes - 1, n_classes - 1)
    if size > MAX_COUNT_VECTORS:
        raise ValueError(
            f"k = {k} labels over C = {n_classes} classes give {size} count vectors (more than "
            f"{MAX_COUNT_VECTORS}); project to a statistic instead, e.g. the collision probability "
            "P(y_1 = y_2) = sum_j w_j ||p_j||^2 (k = 2)"
        )
    # Stars and bars: bar positions among k + C - 1 slots give the gaps = counts.
    bars = torch.tensor(list(combinations(range(k + n_classes - 1), n_classes - 1)), dtype=torch.int64)
    bars = bars.reshape(size, n_classes - 1)
    edges = torch.cat(
        [torch.full((size, 1), -1, dtype=torch.int64), bars, torch.full((size, 1), k + n_classes - 1)], dim=1
    )
    out = edges.diff(dim=1) - 1
    # combinations() order is lexicographic in bars, i.e. descending in the first count; flip it.
    return out.flip(0).to(device)


def project_k(mix: Mixture, k: int) -> tuple[Tensor, Tensor]:
    """The k-th order projection ``Proj_k(pi) = sum_j w_j Multinomial(k, p_j)``, a law on count vectors.

    Parameters
    ----------
    mix:
        Mixtures with batch shape ``(...)`` and ``C`` classes.
    k:
        Labels per snapshot.

    Returns
    -------
    vectors:
        ``(S, C)`` int64 count vectors, ``S = C(k+C-1, C-1)``.
    probs:
        ``(..., S)`` probabilities of each count vector (rows sum to one).

    Raises
    ------
    ValueError
        When ``S`` exceeds :data:`MAX_COUNT_VECTORS`; the message suggests the collision statistic.
    """
    _check_mix(mix)
    k = _int_arg(k, "k")
    vectors = count_vectors(k, mix.n_classes, device=mix.components.device)
    c = vectors.to(mix.components.dtype)  # (S, C)
    log_coef = math.lgamma(k + 1) - torch.lgamma(c + 1).sum(-1)  # (S,)
    # (..., m, S): sum_y c_sy log p_jy, with 0 log 0 = 0
    log_seq = torch.special.xlogy(c, mix.components.unsqueeze(-2)).sum(-1)
    probs = torch.logsumexp(mix.log_weights.unsqueeze(-1) + log_seq, dim=-2).add(log_coef).exp()
    return vectors, probs


def _vector_index(vectors: Tensor, counts: Tensor) -> Tensor:
    """Position of each row of ``counts`` in the enumeration ``vectors`` (every row must occur)."""
    s = vectors.shape[0]
    both = torch.cat([vectors, counts.to(vectors.dtype)], dim=0)
    _, inverse = torch.unique(both, dim=0, return_inverse=True)
    slot_to_vector = torch.empty(s, dtype=torch.int64, device=vectors.device)
    slot_to_vector[inverse[:s]] = torch.arange(s, device=vectors.device)
    return slot_to_vector[inverse[s:]]


def hoce_k(mix_per_bucket: Mixture, bucket_ids: Tensor, counts: Tensor) -> float:
    """k-th order calibration error: mass-weighted total variation per level set.

    ``HOCE_k = sum_b mass(b) * TV(Proj_k(pi_b), C_b)`` where ``C_b`` is the empirical law of the count
    vectors of the snapshots in bucket ``b`` and ``mass(b)`` its share of the snapshots. Zero iff every
    level set's projection equals its empirical count law. The empirical law carries sampling noise, so
    even a perfectly calibrated predictor has ``HOCE_k`` of order ``sqrt(S / n_b)``.

    Parameters
    ----------
    mix_per_bucket:
        Mixtures with batch shape ``(B,)``, one per level set.
    bucket_ids:
        ``(n,)`` integer bucket of each snapshot, in ``[0, B)``.
    counts:
        ``(n, C)`` count vectors with a common total ``k``.

    Returns
    -------
    float
        ``HOCE_k`` in ``[0, 1]``.
    """
    _check_mix(mix_per_bucket)
    if len(mix_per_bucket.batch_shape) != 1:
        raise ValueError(f"mix_per_bucket must have batch shape (B,), got {tuple(mix_per_bucket.batch_shape)}")
    k = check_counts(counts, mix_per_bucket.n_classes)
    if not isinstance(bucket_ids, Tensor) or bucket_ids.is_floating_point() or bucket_ids.shape != counts.shape[:1]:
        raise ValueError(
            f"bucket_ids must be an integer torch.Tensor of shape ({counts.shape[0]},), got "
            + (
                f"{bucket_ids.dtype} {tuple(bucket_ids.shape)}"
                if isinstance(bucket_ids, Tensor)
                else type(bucket_ids).__name__
            )
        )
    n_buckets = mix_per_bucket.batch_shape[0]
    if bucket_ids.min() < 0 or bucket_ids.max() >= n_buckets:
        raise ValueError(
            f"bucket_ids must lie in [0, {n_buckets}), got [{bucket_ids.min().item()}, {bucket_ids.max().item()}]"
        )
    vectors, probs = project_k(mix_per_bucket, k)  # (S, C), (B, S)
    idx = _vector_index(vectors, counts.to(vectors.device))
    ids = bucket_ids.to(vectors.device).long()
    flat = ids * vectors.shape[0] + idx
    # Counting in bf16 stalls at 256 (fp16 at 2048), so half-precision mixtures are scored in float32.
    probs = probs.to(compute_dtype(probs))
    emp = torch.zeros(n_buckets * vectors.shape[0], dtype=probs.dtype, device=probs.device)
    emp.index_add_(0, flat, torch.ones_like(flat, dtype=probs.dtype))
    emp = emp.view(n_buckets, -1)
    n_b = emp.sum(1)
    present = n_b > 0
    tv = 0.5 * (probs[present] - emp[present] / n_b[present, None]).abs().sum(1)
    return float((n_b[present] * tv).sum() / n_b.sum())
