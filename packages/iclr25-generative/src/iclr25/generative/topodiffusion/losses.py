"""Topology losses on a predicted clean image: the count loss of TopoDiffusionNet and the matching variant.

Both compute a persistence diagram of the *detached* image, then gather the birth and death values
from the *attached* tensor at the critical pixels, so gradients reach exactly those pixels (the
pairing is held fixed for the step, the usual treatment of persistence losses).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from .persistence import _BACKENDS, Diagram, superlevel_persistence, superlevel_persistence_batch

__all__ = ["TopoCountLoss", "TopoMatchLoss", "critical_values"]


def _check_x0(name: str, x: torch.Tensor) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() == 4:
        if x.shape[1] != 1:
            raise ValueError(f"{name} must have one channel (B, 1, H, W), got shape {tuple(x.shape)}")
        x = x[:, 0]
    if x.dim() != 3:
        raise ValueError(f"{name} must be (B, 1, H, W) or (B, H, W), got shape {tuple(x.shape)}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got {x.dtype}")
    if torch.isnan(x).any():
        raise ValueError(f"{name} contains NaN; refusing to return a silent zero topology loss")
    if torch.isinf(x).any():
        raise ValueError(f"{name} must be finite, got inf values")
    return x


def critical_values(img: torch.Tensor, dgm: Diagram) -> tuple[torch.Tensor, torch.Tensor]:
    """Birth and death values of ``dgm`` read from the attached image (gradients flow to them).

    Parameters
    ----------
    img: (H, W) tensor the diagram was computed from.
    dgm: its diagram.

    Returns
    -------
    births, deaths: (K,) tensors; the essential dot's death is the constant -1 (the lower end of
    the [-1, 1] mask range), so no gradient reaches the image minimum through it.
    """
    w = img.shape[-1]
    flat = img.reshape(-1)
    bi = torch.as_tensor(dgm.birth_idx[:, 0] * w + dgm.birth_idx[:, 1], device=img.device)
    di = torch.as_tensor(dgm.death_idx[:, 0] * w + dgm.death_idx[:, 1], device=img.device)
    births = flat[bi]
    ess = torch.as_tensor(dgm.essential, device=img.device)
    deaths = torch.where(ess, torch.full_like(births, -1.0), flat[di])
    return births, deaths


class TopoCountLoss(nn.Module):
    """Count-conditioned persistent-homology loss (TopoDiffusionNet, Sec. 3.2).

    For each image, the dots of the requested dimension are sorted by persistence; the ``c`` most
    persistent ones (P) are kept and the rest (Q) pushed to the diagonal::

        L_top = L_preserve(P) + sum_{q in Q} (b_q - d_q)^2
        L_preserve = -sum_P (b - d)^2              (preserve="paper", the paper's form)
        L_preserve = sum_P (1 - b)^2 + (d + 1)^2   (preserve="bounded", default; same minimisers
                                                    on [-1, 1], bounded below)

    Parameters
    ----------
    dims: homology dimensions to control, a subset of (0, 1); with both, the losses are summed
        and ``counts`` holds one column per entry.
    preserve: ``"bounded"`` or ``"paper"``.
    backend: persistence backend passed to :func:`superlevel_persistence`.
    connectivity: foreground adjacency (4 or 8).

    Notes
    -----
    Forward pass: ``loss(x0_hat, counts)`` with x0_hat (B, 1, H, W) or (B, H, W) in [-1, 1] and counts
    (B,) or (B, len(dims)) non-negative ints; returns (B,) per-image losses (summed over dots).
    """

    def __init__(
        self,
        dims: Sequence[int] = (0,),
        preserve: str = "bounded",
        backend: str = "unionfind",
        connectivity: int = 4,
    ) -> None:
        super().__init__()
        dims = tuple(dims)
        if not dims or any(d not in (0, 1) for d in dims) or len(set(dims)) != len(dims):
            raise ValueError(f"dims must be a non-empty subset of (0, 1) without repeats, got {dims!r}")
        if preserve not in ("bounded", "paper"):
            raise ValueError(f"preserve must be 'bounded' or 'paper', got {preserve!r}")
        if connectivity not in (4, 8):
            raise ValueError(f"connectivity must be 4 or 8, got {connectivity!r}")
        # here rather than at the first forward, which a trainer reaches only at a step with t < T/2
        if backend not in _BACKENDS:
            raise ValueError(f"backend must be one of {_BACKENDS}, got {backend!r}")
        if backend == "cripser" and connectivity != 4:
            raise ValueError(
                f"backend='cripser' computes 4-connected (V-construction) persistence, got connectivity={connectivity}"
            )
        self.dims, self.preserve, self.backend, self.connectivity = dims, preserve, backend, connectivity

    def forward(self, x0_hat: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        x = _check_x0("x0_hat", x0_hat)
        counts = torch.as_tensor(counts)
        given = tuple(counts.shape)
        if counts.dim() == 1:
            counts = counts[:, None]
        if counts.dim() != 2 or counts.shape != (x.shape[0], len(self.dims)):
            raise ValueError(
                f"counts must be ({x.shape[0]},) or ({x.shape[0]}, {len(self.dims)}) for dims={self.dims}, "
                f"got shape {given}"
            )
        if counts.is_floating_point() or counts.dtype == torch.bool:
            raise TypeError(f"counts must be an integer tensor, got {counts.dtype}")
        if (counts < 0).any():
            raise ValueError(f"counts must be >= 0, got min {int(counts.min())}")
        bsz, h, w = x.shape
        if bsz == 0:
            # attached to x, so a per-sample loss of an empty batch still supports backward()
            return x.flatten(1).sum(1)
        cs = counts.cpu().numpy()
        # all diagrams first (on the detached batch), then one gather for every dot of the batch:
        # per-image torch indexing would cost more than the persistence itself
        img, bidx, didx, ess, in_p = [], [], [], [], []
        xd = x.detach()
        for j, dim in enumerate(self.dims):
            for i, dgm in enumerate(superlevel_persistence_batch(xd, dim, self.connectivity, self.backend)):
                k = len(dgm)
                img.append(np.full(k, i))
                bidx.append(i * h * w + dgm.birth_idx[:, 0] * w + dgm.birth_idx[:, 1])
                didx.append(i * h * w + dgm.death_idx[:, 0] * w + dgm.death_idx[:, 1])
                ess.append(dgm.essential)
                # dots arrive sorted by decreasing persistence: P = the c most persistent, Q = the rest
                in_p.append(np.arange(k) < cs[i, j])
        dev = x.device
        flat = x.reshape(-1)
        births = flat[torch.as_tensor(np.concatenate(bidx), device=dev)]
        # the essential dot's death is the constant -1 (lower end of the mask range), no gradient
        deaths = torch.where(
            torch.as_tensor(np.concatenate(ess), device=dev),
            torch.full_like(births, -1.0),
            flat[torch.as_tensor(np.concatenate(didx), device=dev)],
        )
        bounded = self.preserve == "bounded"
        keep = (1 - births) ** 2 + (deaths + 1) ** 2 if bounded else -((births - deaths) ** 2)
        term = torch.where(torch.as_tensor(np.concatenate(in_p), device=dev), keep, (births - deaths) ** 2)
        return x.new_zeros((bsz,)).index_add(0, torch.as_tensor(np.concatenate(img), device=dev), term)


def _match(pb: np.ndarray, pd: np.ndarray, gb: np.ndarray, gd: np.ndarray) -> np.ndarray:
    """Optimal W2 partial matching of two diagrams; returns for each predicted dot its target index or -1."""
    from scipy.optimize import linear_sum_assignment

    n, m = len(pb), len(gb)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    # the usual augmented assignment: predicted dots to targets or to their diagonal projection
    big = 1e18
    cost = np.zeros((n + m, m + n))
    cost[:n, :m] = (pb[:, None] - gb[None]) ** 2 + (pd[:, None] - gd[None]) ** 2
    cost[:n, m:] = big
    cost[np.arange(n), m + np.arange(n)] = (pb - pd) ** 2 / 2
    cost[n:, :m] = big
    cost[n + np.arange(m), np.arange(m)] = (gb - gd) ** 2 / 2
    rows, cols = linear_sum_assignment(cost)
    tgt = np.full(n, -1, dtype=np.int64)
    for r, c in zip(rows, cols, strict=True):
        if r < n and c < m:
            tgt[r] = c
    return tgt


class TopoMatchLoss(nn.Module):
    """Diagram-matching topology loss (the official repository's variant; Hu et al. 2019 on x0_hat).

    The diagram of the prediction is matched to the diagram of the training mask by an optimal
    (squared-distance, Wasserstein-2) partial matching; matched dots are pulled to their targets'
    (birth, death), unmatched dots pushed to the diagonal. The matching is solved exactly with
    ``scipy.optimize.linear_sum_assignment``. The repository matches with gudhi + POT at gudhi's
    defaults (order 1, L-infinity ground distance), so its matching can differ from this one.

    Parameters
    ----------
    dims: homology dimensions, a subset of (0, 1).
    connectivity: foreground adjacency (4 or 8).

    Notes
    -----
    Forward pass: ``loss(x0_hat, x0)`` with both (B, 1, H, W) or (B, H, W); returns (B,) losses.
    """

    def __init__(self, dims: Sequence[int] = (0,), connectivity: int = 4) -> None:
        super().__init__()
        dims = tuple(dims)
        if not dims or any(d not in (0, 1) for d in dims) or len(set(dims)) != len(dims):
            raise ValueError(f"dims must be a non-empty subset of (0, 1) without repeats, got {dims!r}")
        if connectivity not in (4, 8):
            raise ValueError(f"connectivity must be 4 or 8, got {connectivity!r}")
        self.dims, self.connectivity = dims, connectivity

    def forward(self, x0_hat: torch.Tensor, x0: torch.Tensor) -> torch.Tensor:
        x = _check_x0("x0_hat", x0_hat)
        y = _check_x0("x0", x0)
        if x.shape != y.shape:
            raise ValueError(f"x0_hat and x0 must have the same shape, got {tuple(x.shape)} and {tuple(y.shape)}")
        out = []
        for i in range(x.shape[0]):
            total = x.new_zeros(())
            for dim in self.dims:
                dp = superlevel_persistence(x[i], dim=dim, connectivity=self.connectivity)
                dg = superlevel_persistence(y[i], dim=dim, connectivity=self.connectivity)
                b, d = critical_values(x[i], dp)
                gb = dg.birth
                gd = np.where(dg.essential, -1.0, dg.death)
                pd_ = np.where(dp.essential, -1.0, dp.death)
                tgt = _match(dp.birth, pd_, gb, gd)
                m = torch.as_tensor(tgt >= 0, device=x.device)
                tb = torch.as_tensor(gb[np.maximum(tgt, 0)] if len(gb) else np.zeros(len(tgt)), device=x.device)
                td = torch.as_tensor(gd[np.maximum(tgt, 0)] if len(gd) else np.zeros(len(tgt)), device=x.device)
                tb, td = tb.to(x.dtype), td.to(x.dtype)
                matched = ((b - tb) ** 2 + (d - td) ** 2) * m
                unmatched = (b - d) ** 2 * ~m
                total = total + matched.sum() + unmatched.sum()
            out.append(total)
        return torch.stack(out) if out else x.flatten(1).sum(1)
