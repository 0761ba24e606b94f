"""Masks with an exact number of components (discs) or holes (a disc with round holes), for small-scale reproductions.

The shared core's :func:`~iclr25.generative.diffusion.data.blob_masks` at first never restarted a
mask and could loop forever when five discs had to fit a 16x16 canvas (it now restarts too). This
generator, with the reproduction's radii and gap, restarts a mask whose discs do not fit, checks
every mask's 4- and 8-connected component count and raises after 1 000 failed attempts.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import numpy as np
import torch

__all__ = ["disk_masks", "holed_masks"]


def _check_n_counts(n: object, counts: Sequence[int]) -> None:
    # numpy integers too (e.g. n = np.sum(keep)), but not bool
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        raise TypeError(f"n must be an int, got {type(n).__name__}")
    if n < 0:
        raise ValueError(f"n must be an int >= 0, got {n!r}")
    # a tensor or array of counts is accepted as well as a sequence (``not counts`` would be ambiguous)
    arr = np.asarray(counts) if not isinstance(counts, torch.Tensor) else counts.detach().cpu().numpy()
    if (
        arr.ndim != 1
        or arr.size == 0
        or arr.dtype.kind not in "iuf"
        or not np.isfinite(arr).all()
        or (arr < 0).any()
        or not np.array_equal(arr, np.floor(arr))
    ):
        raise ValueError(f"counts must be non-empty non-negative ints, got {counts!r}")


def _start_masks(
    n: int, size: int, counts: Sequence[int], seed: int
) -> tuple[np.random.Generator, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The seeded generator, pixel grids, empty masks and the per-mask counts drawn from ``counts``."""
    rng = np.random.default_rng(seed)
    yy, xx = np.meshgrid(np.arange(size), np.arange(size), indexing="ij")
    masks = np.zeros((n, 1, size, size), np.float32)
    ks = rng.choice(np.asarray(counts, dtype=np.int64), size=n)
    return rng, yy, xx, masks, ks


def disk_masks(
    n: int,
    size: int = 16,
    counts: Sequence[int] = (1, 2, 3, 4, 5),
    radius: tuple[float, float] = (1.3, 2.6),
    gap: float = 1.5,
    seed: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Binary masks of ``c`` disjoint discs, c drawn uniformly from ``counts``.

    Parameters
    ----------
    n: number of masks; size: image side.
    counts: allowed numbers of discs (each >= 0).
    radius: (min, max) disc radius in pixels (>= 1 so a rasterised disc is one 4-connected blob).
    gap: minimum distance between disc boundaries (> sqrt(2) keeps discs apart under 8-adjacency).
    seed: numpy seed.

    Returns
    -------
    masks: (n, 1, size, size) float32 in {0, 1}; counts: (n,) int64 (= beta_0 of each mask, 4- or
    8-connected).

    Raises
    ------
    RuntimeError: when a mask's discs still do not fit after 1 000 attempts (e.g. five discs on an
    8x8 canvas).
    """
    from scipy import ndimage

    _check_n_counts(n, counts)
    if not 1.0 <= radius[0] <= radius[1] or 2 * radius[1] + 2 > size:
        raise ValueError(f"radius must satisfy 1 <= min <= max <= (size - 2) / 2, got {radius!r} for size {size}")
    if not gap > math.sqrt(2):  # not `gap <= ...`: NaN fails every comparison and got through
        raise ValueError(f"gap must be > sqrt(2) so discs never touch, got {gap}")
    rng, yy, xx, masks, ks = _start_masks(n, size, counts, seed)
    s8 = ndimage.generate_binary_structure(2, 2)
    for i in range(n):
        k = int(ks[i])
        for _attempt in range(1_000):  # restart the whole mask when the discs do not fit
            discs: list[tuple[float, float, float]] = []
            for _ in range(200 * max(k, 1)):
                if len(discs) == k:
                    break
                r = rng.uniform(*radius)
                cy, cx = rng.uniform(r, size - 1 - r, 2)
                if all(math.hypot(cy - y, cx - x) > r + q + gap for y, x, q in discs):
                    discs.append((cy, cx, r))
            if len(discs) < k:
                continue
            m = np.zeros((size, size), bool)
            for cy, cx, r in discs:
                m |= (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r
            if ndimage.label(m, structure=s8)[1] == k == ndimage.label(m)[1]:
                masks[i, 0] = m
                break
        else:  # k discs cannot fit (restarting forever would hang)
            raise RuntimeError(f"could not place {k} discs on a {size}x{size} canvas; lower counts or radius")
    return torch.from_numpy(masks), torch.from_numpy(ks)


def holed_masks(
    n: int,
    size: int = 16,
    counts: Sequence[int] = (1, 2, 3, 4),
    hole_radius: tuple[float, float] = (1.0, 1.6),
    wall: float = 1.5,
    seed: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Binary masks of one disc with ``c`` round holes (beta_0 = 1, beta_1 = c), c uniform over ``counts``.

    The shared core's ``annulus_masks`` draws rings with exactly one hole; the beta_1 reproduction
    needs a controlled number of holes, so the disc is punched ``c`` times and every mask is checked.

    Parameters
    ----------
    n: number of masks; size: image side (>= 12; with the default radius and wall up to 3 holes fit at
        12 and 4 holes need >= 13 — otherwise a RuntimeError names the count that does not fit).
    counts: allowed numbers of holes (each >= 0).
    hole_radius: (min, max) hole radius in pixels (>= 1 so each hole holds a pixel).
    wall: minimum foreground width between two holes and between a hole and the disc's rim.
    seed: numpy seed.

    Returns
    -------
    masks: (n, 1, size, size) float32 in {0, 1}; counts: (n,) int64 (= beta_1 of each mask with
    4-connected foreground and 8-connected background, and with 8 / 4; beta_0 = 1).
    """
    from .persistence import betti_numbers

    _check_n_counts(n, counts)
    # numpy integers too (disk_masks takes them): np.int64(16) was refused as "not an int >= 12"
    if isinstance(size, bool) or not isinstance(size, numbers.Integral) or size < 12:
        raise ValueError(f"size must be an int >= 12, got {size!r}")
    size = int(size)
    if not 1.0 <= hole_radius[0] <= hole_radius[1]:
        raise ValueError(f"hole_radius must satisfy 1 <= min <= max, got {hole_radius!r}")
    if not wall > math.sqrt(2):  # not `wall <= ...`: NaN fails every comparison and got through
        raise ValueError(f"wall must be > sqrt(2) so holes never touch under 8-adjacency, got {wall}")
    rng, yy, xx, masks, ks = _start_masks(n, size, counts, seed)
    for i in range(n):
        k = int(ks[i])
        for _attempt in range(10_000):  # restart the whole mask when the holes do not fit
            big = rng.uniform(0.36 * size, 0.46 * size)
            cy, cx = rng.uniform(size / 2 - 1, size / 2 - 0.5, 2)
            holes: list[tuple[float, float, float]] = []
            # candidates drawn in bulk (one generator call per quantity), accepted greedily
            rs = rng.uniform(*hole_radius, 32 * max(k, 1))
            angles = rng.uniform(0, 2 * math.pi, rs.size)
            fracs = np.sqrt(rng.uniform(size=rs.size))
            for r, a, f in zip(rs.tolist(), angles.tolist(), fracs.tolist(), strict=True):
                if len(holes) == k:
                    break
                lim = big - r - wall
                if lim <= 0:
                    continue
                hy, hx = cy + lim * f * math.sin(a), cx + lim * f * math.cos(a)
                if all(math.hypot(hy - y, hx - x) > r + q + wall for y, x, q in holes):
                    holes.append((hy, hx, r))
            if len(holes) < k:
                continue
            m = (yy - cy) ** 2 + (xx - cx) ** 2 <= big * big
            for hy, hx, r in holes:
                m &= (yy - hy) ** 2 + (xx - hx) ** 2 > r * r
            b4, b8 = betti_numbers(m[None], connectivity=4)[0], betti_numbers(m[None], connectivity=8)[0]
            if b4.tolist() == [1, k] == b8.tolist():
                masks[i, 0] = m
                break
        else:
            raise RuntimeError(f"could not place {k} holes on a {size}x{size} canvas; lower counts or hole_radius")
    return torch.from_numpy(masks), torch.from_numpy(ks)
