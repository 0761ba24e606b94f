"""Readable per-bucket EM: the specification that :func:`.em.fit_mixture_em` batches.

One bucket and one restart at a time, plain loops; used by the tests and the benchmark as the
CPU baseline, never on a hot path.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["em_single", "fit_mixture_em_loop"]


def em_single(counts: Tensor, weights: Tensor, components: Tensor, iters: int, alpha: float = 1e-6) -> tuple:
    """EM for one bucket from one starting point.

    Parameters
    ----------
    counts:
        ``(n, C)`` count vectors.
    weights, components:
        ``(m,)`` and ``(m, C)`` starting point.

    Returns
    -------
    tuple
        ``(weights (m,), components (m, C), loglik)`` after ``iters`` iterations.
    """
    n = counts.shape[0]
    for _ in range(iters):
        # E-step: r_ij ∝ w_j prod_y p_jy^{c_iy}, normalised in log space
        joint = torch.log(weights)[None, :] + counts @ torch.log(components).T  # (n, m)
        resp = torch.softmax(joint, dim=1)
        # M-step: closed form for a mixture of multinomials with a tiny pseudo-count
        weights = resp.sum(0) / n
        stats = resp.T @ counts + alpha
        components = stats / stats.sum(1, keepdim=True)
    joint = torch.log(weights)[None, :] + counts @ torch.log(components).T
    return weights, components, float(torch.logsumexp(joint, dim=1).sum())


def fit_mixture_em_loop(
    counts_per_bucket: list[Tensor], init_weights: Tensor, init_components: Tensor, iters: int, alpha: float = 1e-6
) -> tuple[Tensor, Tensor, Tensor]:
    """Per-bucket, per-restart EM; keeps the restart with the highest likelihood in each bucket.

    Parameters
    ----------
    counts_per_bucket:
        ``B`` tensors of shape ``(n_b, C)``.
    init_weights, init_components:
        ``(B, R, m)`` and ``(B, R, m, C)`` starting points (as from :func:`.em.em_init`).

    Returns
    -------
    tuple
        ``weights (B, m)``, ``components (B, m, C)``, ``loglik (B,)``.
    """
    ws, ps, lls = [], [], []
    for b, counts in enumerate(counts_per_bucket):
        best = None
        for r in range(init_weights.shape[1]):
            w, p, ll = em_single(counts, init_weights[b, r], init_components[b, r], iters, alpha)
            if best is None or ll > best[2]:
                best = (w, p, ll)
        ws.append(best[0])
        ps.append(best[1])
        lls.append(best[2])
    return torch.stack(ws), torch.stack(ps), torch.tensor(lls, dtype=init_weights.dtype)
