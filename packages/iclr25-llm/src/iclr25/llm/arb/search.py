"""The dispatched partition-search op: ``threshold_search(W, base, thresholds, backend=...)``."""

from __future__ import annotations

import torch

from iclr25.core.triton import Backend, BackendOp

from .reference import threshold_search_reference

__all__ = ["THRESHOLD_SEARCH", "threshold_search"]


def _triton(W, base, thresholds):
    from .kernels import threshold_search_triton

    return threshold_search_triton(W, base, thresholds)


def _limits(W, base, thresholds) -> list[str]:
    reasons = []
    if W.dtype != torch.float32:
        reasons.append(f"the search kernel takes float32, got {W.dtype}")
    if W.shape[-1] > 1024:
        reasons.append(f"the search kernel supports blocks of <= 1024 columns, got {W.shape[-1]}")
    # the kernel reads base as W's (n, m) and thresholds as a flat list (the reference broadcasts)
    if W.dim() != 2 or base.shape != W.shape or thresholds.dim() != 1:
        reasons.append(
            f"the search kernel takes a 2-D W, base of W's shape and 1-D thresholds, got W {tuple(W.shape)}, "
            f"base {tuple(base.shape)}, thresholds {tuple(thresholds.shape)}"
        )
    return reasons


THRESHOLD_SEARCH = BackendOp(
    "arb_threshold_search",
    [Backend("triton", _triton, supports=_limits, uses_triton=True), Backend("reference", threshold_search_reference)],
)


def threshold_search(
    W: torch.Tensor, base: torch.Tensor, thresholds: torch.Tensor, backend: str = "auto"
) -> torch.Tensor:
    """Errors of the order-1 magnitude split for every threshold.

    Parameters
    ----------
    W : (n, m) float tensor
    base : (n, m) bool tensor
        The entries being split (the non-salient part of a block).
    thresholds : (T,) tensor
    backend : {"auto", "reference", "triton"}

    Returns
    -------
    (T,) tensor: ``‖R‖²`` of binarizing ``base & (|W| > p)`` and ``base & (|W| <= p)`` (plain).
    """
    if W.dim() != 2 or base.shape != W.shape or base.dtype != torch.bool:
        raise ValueError(f"W must be 2-D and base a bool tensor of W's shape; got {tuple(W.shape)}, {base.dtype}")
    if thresholds.dim() != 1:
        raise ValueError(f"thresholds must be 1-D; got shape {tuple(thresholds.shape)}")
    return THRESHOLD_SEARCH(W, base, thresholds, backend=backend)
