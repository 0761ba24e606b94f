"""Plain-torch spec of the partition search's hot path: many candidate splits binarized at once.

For each of T candidate partitions of a block into two groups (masks ``a[t]`` and ``b[t]``), both
groups are binarized with BiLLM's plain statistics and the combined residual is scored. The
search loops of the official code evaluate one threshold at a time; here all T are batched.
"""

from __future__ import annotations

import torch

__all__ = ["plain_residual_batched", "search_errors", "threshold_search_reference"]


def _sign(x: torch.Tensor) -> torch.Tensor:
    return torch.where(x >= 0, 1.0, -1.0).to(x.dtype)


def plain_residual_batched(W: torch.Tensor, M: torch.Tensor, order: int) -> torch.Tensor:
    """Residual ``(W − Ŵ)⊙M`` of plain order-``order`` binarization for a batch of masks.

    Parameters
    ----------
    W : (n, m) float tensor
    M : (T, n, m) float 0/1 tensor
    order : int

    Returns
    -------
    (T, n, m) tensor
    """
    R = W[None] * M
    cnt = M.sum(-1, keepdim=True)
    safe = cnt.clamp_min(1)
    for _ in range(order):
        mu = R.sum(-1, keepdim=True) / safe
        D = (R - mu) * M
        a = D.abs().sum(-1, keepdim=True) / safe
        R = (R - (a * _sign(R - mu) + mu)) * M
    return R


def search_errors(
    W: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    order_a: int,
    order_b: int,
    S: torch.Tensor | None = None,
    chunk: int = 16,
) -> torch.Tensor:
    """Error of binarizing groups ``A[t]`` and ``B[t]`` (plain), for every candidate ``t``.

    Parameters
    ----------
    W : (n, m) float tensor
    A, B : (T, n, m) bool tensors
        Disjoint masks of the two groups of each candidate.
    order_a, order_b : int
        Binary planes used for each group.
    S : (m, m) tensor, optional
        When given, the error is the output error ``tr(R S Rᵀ)``, else ``‖R‖²``.
    chunk : int
        Candidates evaluated per step (bounds memory to ``chunk · n · m`` floats).

    Returns
    -------
    (T,) tensor of errors.
    """
    out = []
    for t0 in range(0, A.shape[0], chunk):
        a = A[t0 : t0 + chunk].to(W.dtype)
        b = B[t0 : t0 + chunk].to(W.dtype)
        R = plain_residual_batched(W, a, order_a) + plain_residual_batched(W, b, order_b)
        out.append((R * R).sum((1, 2)) if S is None else ((R @ S) * R).sum((1, 2)))
    return torch.cat(out)


def threshold_search_reference(W: torch.Tensor, base: torch.Tensor, thresholds: torch.Tensor) -> torch.Tensor:
    """Order-1 magnitude-split search: for each threshold ``p``, the error ``‖R‖²`` of binarizing
    ``base & (|W| > p)`` and ``base & (|W| <= p)`` with plain statistics.

    Parameters
    ----------
    W : (n, m) float tensor
    base : (n, m) bool tensor
    thresholds : (T,) tensor

    Returns
    -------
    (T,) tensor
    """
    big = (W.abs()[None] > thresholds[:, None, None]) & base[None]
    return search_errors(W, big, base[None] & ~big, 1, 1)
