"""EM for mixtures of categoricals on k-snapshot count vectors, batched over level sets.

Each snapshot's count vector ``c`` has likelihood ``sum_j w_j prod_y p_jy^{c_y}`` (up to the multinomial
coefficient). EM alternates responsibilities ``r_ij ∝ w_j prod_y p_jy^{c_iy}`` (computed in log space)
and the closed-form M-step ``w_j = mean_i r_ij``, ``p_jy ∝ sum_i r_ij c_iy + alpha``. All buckets and
restarts run as one batched tensor program (padded with a mask), so it maps onto a GPU; the per-bucket
loop in :mod:`.reference` is the readable spec it is tested against.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from .mixture import Mixture, _int_arg

__all__ = ["EMResult", "em_init", "fit_mixture_em", "pad_buckets"]


@dataclass
class EMResult:
    """The outcome of :func:`fit_mixture_em`.

    Attributes
    ----------
    mixture:
        Best restart per bucket, batch shape ``(B,)`` (``()`` for a single bucket given as ``(n, C)``).
    loglik:
        ``(B,)`` total snapshot log-likelihood of the chosen restart (multinomial coefficients dropped).
    all_loglik:
        ``(B, R)`` log-likelihood of every restart.
    """

    mixture: Mixture
    loglik: Tensor
    all_loglik: Tensor


def pad_buckets(counts: Tensor, bucket_ids: Tensor, n_buckets: int) -> tuple[Tensor, Tensor]:
    """Group ``(n, C)`` counts by bucket into a padded ``(B, n_max, C)`` tensor and a ``(B, n_max)`` mask."""
    ids = bucket_ids.long()
    sizes = torch.bincount(ids, minlength=n_buckets)
    n_max = max(int(sizes.max().item()), 1)
    order = torch.argsort(ids, stable=True)
    sorted_ids = ids[order]
    starts = torch.cumsum(sizes, 0) - sizes
    slot = torch.arange(ids.numel(), device=ids.device) - starts[sorted_ids]
    padded = counts.new_zeros(n_buckets, n_max, counts.shape[1])
    mask = torch.zeros(n_buckets, n_max, dtype=torch.bool, device=counts.device)
    padded[sorted_ids, slot] = counts[order]
    mask[sorted_ids, slot] = True
    return padded, mask


def em_init(
    counts: Tensor,
    mask: Tensor,
    n_components: int,
    restarts: int,
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """Random starting points: uniform weights, components halfway between the bucket's label frequencies
    and a Dirichlet(1) draw (interior points, so no class starts at probability zero).

    Parameters
    ----------
    counts:
        ``(B, n, C)`` padded count vectors.
    mask:
        ``(B, n)`` bool, True for real snapshots.

    Returns
    -------
    weights:
        ``(B, R, m)``.
    components:
        ``(B, R, m, C)``.
    """
    b, _, c = counts.shape
    freq = (counts * mask.unsqueeze(-1)).sum(1)
    # finfo.tiny, not a literal: 1e-300 rounds to 0 below float64 and an all-zero bucket became NaN.
    freq = freq / freq.sum(-1, keepdim=True).clamp_min(torch.finfo(freq.dtype).tiny)
    u = torch.rand(b, restarts, n_components, c, generator=generator, dtype=counts.dtype, device="cpu")
    expo = -torch.log1p(-u)  # Exp(1) draws; normalised they are Dirichlet(1)
    dirichlet = (expo / expo.sum(-1, keepdim=True)).to(counts.device)
    components = 0.5 * freq[:, None, None, :] + 0.5 * dirichlet
    weights = torch.full((b, restarts, n_components), 1.0 / n_components, dtype=counts.dtype, device=counts.device)
    return weights, components


def _loglik_points(counts: Tensor, log_w: Tensor, log_p: Tensor) -> Tensor:
    """``(B, R, n, m)`` joint log-densities ``log w_j + sum_y c_y log p_jy``."""
    return log_w.unsqueeze(2) + torch.einsum("bnc,brmc->brnm", counts, log_p)


def _check_init(init: object, n_buckets: int, n_classes: int, single: bool) -> tuple[Tensor, Tensor]:
    """Validate a user-given ``(weights, components)`` starting point against ``B`` and ``C``."""
    if not isinstance(init, (tuple, list)) or len(init) != 2 or not all(isinstance(t, Tensor) for t in init):
        raise TypeError("init must be a pair of tensors (weights (B, R, m), components (B, R, m, C))")
    w, p = init
    if single and w.dim() == 2 and p.dim() == 3:
        w, p = w.unsqueeze(0), p.unsqueeze(0)
    if w.dim() != 3 or p.dim() != 4 or p.shape[:3] != w.shape or w.shape[0] != n_buckets or p.shape[3] != n_classes:
        raise ValueError(
            f"init must be (weights (B, R, m), components (B, R, m, C)) with B = {n_buckets} and C = {n_classes}, "
            f"got {tuple(init[0].shape)} and {tuple(init[1].shape)}"
        )
    return w, p


def fit_mixture_em(
    counts: Tensor,
    mask: Tensor | None = None,
    n_components: int = 6,
    iters: int = 200,
    restarts: int = 3,
    generator: torch.Generator | None = None,
    init: tuple[Tensor, Tensor] | None = None,
    alpha: float = 1e-6,
) -> EMResult:
    """Fit a mixture of ``m`` categoricals to k-snapshot counts by EM, in every bucket at once.

    Parameters
    ----------
    counts:
        ``(B, n, C)`` padded count vectors (or ``(n, C)`` for one bucket). Totals may differ between
        buckets but not within one.
    mask:
        ``(B, n)`` bool, True for real snapshots (default: all). Every bucket needs one.
    n_components:
        ``m``, components per mixture.
    iters:
        EM iterations (fixed, no early stop, so runs are reproducible across devices).
    restarts:
        ``R`` random starts per bucket; the one with the highest likelihood is kept.
    generator:
        Generator for the random starts (ignored when ``init`` is given).
    init:
        Optional ``(weights (B, R, m), components (B, R, m, C))`` starting point (``(R, m)`` and
        ``(R, m, C)`` for one bucket given as ``(n, C)``).
    alpha:
        Pseudo-count added to each class in the M-step, so an empty component stays defined and no
        log-probability becomes ``-inf``.

    Returns
    -------
    EMResult
    """
    if not isinstance(counts, Tensor) or not counts.is_floating_point():
        raise TypeError(f"counts must be a floating tensor, got {getattr(counts, 'dtype', type(counts).__name__)}")
    single = counts.dim() == 2
    if single:
        counts = counts.unsqueeze(0)
        mask = None if mask is None else mask.unsqueeze(0)
    if counts.dim() != 3:
        raise ValueError(f"counts must have shape (B, n, C) or (n, C), got {tuple(counts.shape)}")
    if mask is None:
        mask = torch.ones(counts.shape[:2], dtype=torch.bool, device=counts.device)
    if mask.shape != counts.shape[:2]:
        raise ValueError(f"mask must have shape {tuple(counts.shape[:2])}, got {tuple(mask.shape)}")
    if not (mask.any(1)).all():
        raise ValueError("every bucket needs at least one snapshot (mask has an all-False row)")
    n_components = _int_arg(n_components, "n_components")
    iters = _int_arg(iters, "iters")
    restarts = _int_arg(restarts, "restarts")
    if init is None:
        init = em_init(counts, mask, n_components, restarts, generator)
    else:
        init = _check_init(init, counts.shape[0], counts.shape[2], single)
    weights, components = (t.to(counts.device, counts.dtype) for t in init)
    maskf = mask.to(counts.dtype)
    counts = counts * maskf.unsqueeze(-1)
    n_b = maskf.sum(1)  # (B,)
    for _ in range(iters):
        joint = _loglik_points(counts, torch.log(weights), torch.log(components))
        resp = torch.softmax(joint, dim=-1) * maskf[:, None, :, None]  # (B, R, n, m)
        nj = resp.sum(2)  # (B, R, m)
        weights = nj / n_b[:, None, None]
        stats = torch.einsum("brnm,bnc->brmc", resp, counts) + alpha
        components = stats / stats.sum(-1, keepdim=True)
    joint = _loglik_points(counts, torch.log(weights), torch.log(components))
    all_ll = (torch.logsumexp(joint, dim=-1) * maskf[:, None, :]).sum(-1)  # (B, R)
    best = all_ll.argmax(1)
    ar = torch.arange(counts.shape[0], device=counts.device)
    mix = Mixture(weights[ar, best], components[ar, best], validate=False)
    if single:
        mix = mix[0]
    return EMResult(mixture=mix, loglik=all_ll[ar, best], all_loglik=all_ll)
