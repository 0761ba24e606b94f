"""Offline datasets: 2-D toys, sklearn digits, ellipse/Shepp-Logan phantoms, topology-controlled masks.

Everything is generated or bundled with an installed package; nothing is downloaded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

__all__ = [
    "DIGIT_NAMES",
    "DigitsData",
    "annulus_masks",
    "blob_masks",
    "checkerboard",
    "digit_prompt",
    "digits",
    "gaussian_mixture_2d",
    "grid25",
    "random_ellipses",
    "shepp_logan",
    "swiss_roll",
    "two_moons",
]

DIGIT_NAMES = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


def _n(n: int) -> int:
    if not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be an int >= 0, got {n!r}")
    return n


def _standardise(x: torch.Tensor, std: float) -> torch.Tensor:
    # toys are scaled so the overall std matches sigma_data (EDM's preconditioning assumption)
    return x * (std / x.std().clamp_min(1e-12)) if x.shape[0] > 1 else x


def gaussian_mixture_2d(
    n: int, modes: int = 8, radius: float = 1.0, spread: float = 0.05, seed: int = 0, std: float = 0.5
) -> torch.Tensor:
    """(n, 2) samples of ``modes`` Gaussians on a circle, scaled to overall std ``std``."""
    g = torch.Generator().manual_seed(seed)
    k = torch.randint(0, modes, (_n(n),), generator=g)
    ang = 2 * math.pi * k.double() / modes
    c = torch.stack([ang.cos(), ang.sin()], 1) * radius
    x = (c + spread * torch.randn(n, 2, generator=g, dtype=torch.float64)).float()
    return _standardise(x, std)


def grid25(n: int, spread: float = 0.05, seed: int = 0, std: float = 0.5) -> torch.Tensor:
    """(n, 2) samples of the 5x5 grid of Gaussians, scaled to overall std ``std``."""
    g = torch.Generator().manual_seed(seed)
    k = torch.randint(0, 25, (_n(n),), generator=g)
    c = torch.stack([(k // 5).float() - 2, (k % 5).float() - 2], 1)
    return _standardise(c + spread * torch.randn(n, 2, generator=g), std)


def checkerboard(n: int, seed: int = 0, std: float = 0.5) -> torch.Tensor:
    """(n, 2) uniform samples on the black squares of a 4x4 checkerboard."""
    g = torch.Generator().manual_seed(seed)
    x1 = torch.rand(_n(n), generator=g) * 4 - 2
    x2 = torch.rand(n, generator=g) - torch.randint(0, 2, (n,), generator=g).float() * 2
    x2 = x2 + (torch.floor(x1) % 2)
    return _standardise(torch.stack([x1, x2], 1), std)


def two_moons(n: int, noise: float = 0.05, seed: int = 0, std: float = 0.5) -> torch.Tensor:
    """(n, 2) two interleaved half circles."""
    g = torch.Generator().manual_seed(seed)
    t = torch.rand(_n(n), generator=g) * math.pi
    upper = torch.rand(n, generator=g) < 0.5
    x = torch.where(upper, t.cos(), 1 - t.cos())
    y = torch.where(upper, t.sin(), 0.5 - t.sin())
    return _standardise(torch.stack([x, y], 1) + noise * torch.randn(n, 2, generator=g), std)


def swiss_roll(n: int, noise: float = 0.05, seed: int = 0, std: float = 0.5) -> torch.Tensor:
    """(n, 2) 2-D swiss roll."""
    g = torch.Generator().manual_seed(seed)
    t = 1.5 * math.pi * (1 + 2 * torch.rand(_n(n), generator=g))
    x = torch.stack([t * t.cos(), t * t.sin()], 1) / 10
    return _standardise(x + noise * torch.randn(n, 2, generator=g), std)


def digit_prompt(label: int) -> str:
    """``"a handwritten digit three"`` for label 3."""
    if not 0 <= int(label) <= 9:  # a negative label would silently index from the end ("nine")
        raise ValueError(f"label must be a digit in [0, 9], got {label!r}")
    return f"a handwritten digit {DIGIT_NAMES[int(label)]}"


@dataclass
class DigitsData:
    """sklearn digits as tensors.

    Attributes
    ----------
    images: (N, 1, size, size) float32 in [-1, 1].
    labels: (N,) int64.
    prompts: N strings (``"a handwritten digit three"``).
    """

    images: torch.Tensor
    labels: torch.Tensor
    prompts: list[str]

    def __len__(self) -> int:
        return self.images.shape[0]


def digits(size: int = 8, split: str = "train", seed: int = 0, test_fraction: float = 0.2) -> DigitsData:
    """sklearn's bundled 8x8 digits (1 797 images) scaled to [-1, 1] (values / 8 - 1).

    Parameters
    ----------
    size: 8, or 16 (bilinear upsampling) or any multiple of 8.
    split: ``"train"``, ``"test"`` (a fixed ``test_fraction`` permutation by ``seed``) or ``"all"``.
    """
    from sklearn.datasets import load_digits

    if split not in ("train", "test", "all"):
        raise ValueError(f"split must be 'train', 'test' or 'all', got {split!r}")
    if not isinstance(size, int) or size < 8 or size % 8:
        raise ValueError(f"size must be a multiple of 8, got {size!r}")
    d = load_digits()
    x = torch.tensor(d.images, dtype=torch.float32)[:, None] / 8 - 1
    y = torch.tensor(d.target, dtype=torch.long)
    if size != 8:
        x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False).clamp(-1, 1)
    if split != "all":
        perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))
        k = round(len(y) * test_fraction)
        idx = perm[:k] if split == "test" else perm[k:]
        x, y = x[idx], y[idx]
    return DigitsData(x, y, [digit_prompt(int(v)) for v in y])


def _ellipse(yy: np.ndarray, xx: np.ndarray, cx, cy, a, b, th) -> np.ndarray:
    c, s = math.cos(th), math.sin(th)
    u = (xx - cx) * c + (yy - cy) * s
    v = -(xx - cx) * s + (yy - cy) * c
    return (u / a) ** 2 + (v / b) ** 2 <= 1


def random_ellipses(n: int, size: int = 32, seed: int = 0, max_ellipses: int = 6) -> torch.Tensor:
    """(n, 1, size, size) phantoms: a sum of 1..max_ellipses random ellipses, intensities in [0.2, 1].

    Built like the classical Shepp-Logan construction (ellipses with additive intensities), clipped
    to [0, 1].
    """
    rng = np.random.default_rng(seed)
    lin = np.linspace(-1, 1, size)
    yy, xx = np.meshgrid(lin, lin, indexing="ij")
    out = np.zeros((_n(n), 1, size, size), np.float32)
    for i in range(n):
        img = np.zeros((size, size))
        for _ in range(rng.integers(1, max_ellipses + 1)):
            cx, cy = rng.uniform(-0.5, 0.5, 2)
            a, b = rng.uniform(0.1, 0.5, 2)
            img += rng.uniform(0.2, 1.0) * _ellipse(yy, xx, cx, cy, a, b, rng.uniform(0, math.pi))
        out[i, 0] = np.clip(img, 0, 1)
    return torch.from_numpy(out)


def shepp_logan(size: int = 64) -> torch.Tensor:
    """skimage's Shepp-Logan phantom resized to (1, 1, size, size), values in [0, 1]."""
    from skimage.data import shepp_logan_phantom
    from skimage.transform import resize

    img = resize(shepp_logan_phantom(), (size, size), anti_aliasing=True)
    return torch.tensor(np.clip(img, 0, 1), dtype=torch.float32)[None, None]


def blob_masks(
    n: int, size: int = 32, counts: tuple[int, ...] = (1, 2, 3, 4), seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Binary masks with an exact number of disjoint discs (Betti-0 = count).

    Returns
    -------
    masks: (n, 1, size, size) float32 in {0, 1}; counts: (n,) int64 number of components.
    """
    rng = np.random.default_rng(seed)
    lin = np.arange(size)
    yy, xx = np.meshgrid(lin, lin, indexing="ij")
    masks = np.zeros((_n(n), 1, size, size), np.float32)
    ks = np.zeros(n, np.int64)
    for i in range(n):
        k = int(rng.choice(counts))
        centres: list[tuple[float, float, float]] = []
        tries = restarts = 0
        while len(centres) < k:
            tries += 1
            if tries % 400 == 0:  # the discs placed so far may leave no room for the rest: start over
                centres.clear()
                restarts += 1
                if restarts > 50:
                    raise ValueError(f"cannot place {k} disjoint discs in a {size}x{size} mask; use a larger size")
            r = rng.uniform(size / 14, size / 7) if tries < 1000 else size / 16
            cy, cx = rng.uniform(r + 1, size - r - 1, 2)
            # keep a 2-pixel gap so discs never touch (components stay separate after rasterising)
            if all(math.hypot(cy - y, cx - x) > r + q + 2 for y, x, q in centres):
                centres.append((cy, cx, r))
        for cy, cx, r in centres:
            masks[i, 0][(yy - cy) ** 2 + (xx - cx) ** 2 <= r * r] = 1
        ks[i] = k
    return torch.from_numpy(masks), torch.from_numpy(ks)


def annulus_masks(n: int, size: int = 32, seed: int = 0) -> torch.Tensor:
    """(n, 1, size, size) rings (one component, one hole: Betti-0 = Betti-1 = 1)."""
    rng = np.random.default_rng(seed)
    lin = np.arange(size)
    yy, xx = np.meshgrid(lin, lin, indexing="ij")
    out = np.zeros((_n(n), 1, size, size), np.float32)
    for i in range(n):
        r_out = rng.uniform(size / 5, size / 2.6)
        r_in = r_out - rng.uniform(2.0, max(2.5, r_out / 2))
        cy, cx = rng.uniform(r_out + 1, size - r_out - 1, 2)
        d2 = (yy - cy) ** 2 + (xx - cx) ** 2
        out[i, 0] = (d2 <= r_out**2) & (d2 > r_in**2)
    return torch.from_numpy(out)
