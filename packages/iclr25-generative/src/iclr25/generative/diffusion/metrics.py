"""Metrics: sample-set distances (sliced Wasserstein, MMD, energy), digits-FD, image fidelity."""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ._checks import check_float

__all__ = [
    "DigitsFeatureNet",
    "class_accuracy",
    "digits_fd",
    "digits_feature_net",
    "energy_distance",
    "frechet_distance",
    "mmd_rbf",
    "psnr",
    "relative_l2",
    "sliced_wasserstein",
    "ssim",
]

log = logging.getLogger(__name__)


def _pair(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    check_float("a", a, 2)
    check_float("b", b, 2)
    a, b = a.flatten(1), b.flatten(1)
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"a and b must have the same feature size, got {a.shape[1]} and {b.shape[1]}")
    return a, b


def sliced_wasserstein(
    a: torch.Tensor, b: torch.Tensor, n_proj: int = 256, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Sliced 2-Wasserstein distance sqrt(E_theta W2^2(theta.a, theta.b)); a: (N, d), b: (M, d)."""
    a, b = _pair(a, b)
    theta = F.normalize(torch.randn(a.shape[1], n_proj, generator=generator, dtype=torch.float64), dim=0)
    pa, pb = (a.double().cpu() @ theta).sort(0).values, (b.double().cpu() @ theta).sort(0).values
    if pa.shape[0] != pb.shape[0]:  # compare quantile functions on a common grid
        q = torch.linspace(0, 1, max(pa.shape[0], pb.shape[0]), dtype=torch.float64)
        pa = torch.quantile(pa, q, dim=0)
        pb = torch.quantile(pb, q, dim=0)
    return (pa - pb).pow(2).mean().sqrt().float()


def _sqdist(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.cdist(a.double(), b.double()).pow(2)


def mmd_rbf(
    a: torch.Tensor, b: torch.Tensor, bandwidths: tuple[float, ...] = (0.1, 0.2, 0.5, 1.0, 2.0)
) -> torch.Tensor:
    """Biased (V-statistic, >= 0) squared MMD with a sum of RBF kernels exp(-|x-y|^2 / (2 h^2))."""
    a, b = _pair(a, b)

    def k(x, y):
        d = _sqdist(x, y)
        return sum(torch.exp(-d / (2 * h * h)) for h in bandwidths)

    return (k(a, a).mean() + k(b, b).mean() - 2 * k(a, b).mean()).clamp_min(0).float()


def energy_distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Energy distance 2 E|X-Y| - E|X-X'| - E|Y-Y'| (V-statistic)."""
    a, b = _pair(a, b)
    d = lambda x, y: torch.cdist(x.double(), y.double()).mean()  # noqa: E731
    return (2 * d(a, b) - d(a, a) - d(b, b)).float()


class DigitsFeatureNet(nn.Module):
    """Small CNN classifier of 8x8 digits; its 128-d penultimate features act as "Inception" features.

    Forward: x (B, 1, S, S) in [-1, 1] (resized to 8x8 if S != 8) -> logits (B, 10);
    :meth:`features` -> (B, 128).
    """

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(),
            nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64 * 16, 128), nn.ReLU(),
        )  # fmt: skip
        self.head = nn.Linear(128, 10)

    def _prep(self, x: torch.Tensor) -> torch.Tensor:
        check_float("x", x, 4)
        if x.shape[-1] != 8:
            x = F.interpolate(x, size=(8, 8), mode="area")
        return x

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(self._prep(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


_NETS: dict[str, DigitsFeatureNet] = {}


def digits_feature_net(seed: int = 0, cache_dir: str | Path | None = None, steps: int = 1500) -> DigitsFeatureNet:
    """The trained digits feature network (fixed seed, a few seconds on CPU), cached in memory and on disk.

    Trained on the ``digits(split="train")`` split with light shift augmentation; the test split
    accuracy is stored as ``net.test_accuracy``.
    """
    from . import training
    from .data import digits

    key = f"seed{seed}-steps{steps}"
    if key in _NETS:
        return _NETS[key]
    cache = Path(cache_dir or os.environ.get("ICLR25_CACHE", Path(tempfile.gettempdir()) / "iclr25-generative"))
    path = cache / f"digits_feature_net-{key}"
    torch.manual_seed(seed)
    net = DigitsFeatureNet()
    try:
        cfg = training.load(path, net)
    except (FileNotFoundError, OSError, RuntimeError):
        tr = digits(8, "train", seed=0)

        def loss_fn(m, idx, g):
            x = tr.images[idx]
            shift = torch.randint(-1, 2, (2,), generator=g).tolist()
            x = torch.roll(x, shifts=shift, dims=(2, 3))  # small translations make features robust
            return F.cross_entropy(m(x), tr.labels[idx])

        idx = torch.arange(len(tr))
        with torch.random.fork_rng():
            training.train(net, loss_fn, idx, steps=steps, lr=2e-3, batch_size=128, seed=seed, grad_clip=None)
        te = digits(8, "test", seed=0)
        with torch.no_grad():
            acc = float((net(te.images).argmax(1) == te.labels).float().mean())
        cfg = {"test_accuracy": acc, "seed": seed, "steps": steps}
        training.save(path, net, cfg)
        log.info("trained digits feature net: test accuracy %.4f", acc)
    net.eval().requires_grad_(False)
    net.test_accuracy = cfg["test_accuracy"]
    _NETS[key] = net
    return net


def frechet_distance(feats_a: torch.Tensor, feats_b: torch.Tensor) -> float:
    """Frechet distance between Gaussians fitted to two (N, d) feature sets (FID formula).

    ``|mu1 - mu2|^2 + tr(C1) + tr(C2) - 2 tr((C1 C2)^{1/2})``. The trace term is computed as the
    sum of square roots of the eigenvalues of the symmetric PSD matrix ``C1^{1/2} C2 C1^{1/2}``
    (same eigenvalues as ``C1 C2``), so singular covariances (fewer samples than dimensions) need
    no ``eps`` ridge and give no complex round-off, unlike ``scipy.linalg.sqrtm(C1 @ C2)``.
    """
    a, b = _pair(feats_a, feats_b)
    a, b = a.double().cpu().numpy(), b.double().cpu().numpy()
    mu1, mu2 = a.mean(0), b.mean(0)
    c1, c2 = np.atleast_2d(np.cov(a, rowvar=False)), np.atleast_2d(np.cov(b, rowvar=False))
    w, v = np.linalg.eigh(c1)
    s1 = (v * np.sqrt(np.clip(w, 0.0, None))) @ v.T
    m = s1 @ c2 @ s1
    lam = np.linalg.eigvalsh((m + m.T) / 2)
    # eigenvalues of a null direction come out as +-(round-off of ||m||); their square roots would
    # add O(sqrt(eps)) each, so treat everything under that round-off level as exactly zero
    lam[lam <= lam.max(initial=0.0) * len(lam) * np.finfo(lam.dtype).eps] = 0.0
    tr_covmean = np.sqrt(lam).sum()
    return float(((mu1 - mu2) ** 2).sum() + np.trace(c1) + np.trace(c2) - 2 * tr_covmean)


@torch.no_grad()
def digits_fd(samples: torch.Tensor, reference: torch.Tensor, net: DigitsFeatureNet | None = None) -> float:
    """Digits-FD: Frechet distance of :class:`DigitsFeatureNet` features; images (N, 1, S, S) in [-1, 1]."""
    net = net or digits_feature_net()
    return frechet_distance(net.features(samples.float().cpu()), net.features(reference.float().cpu()))


@torch.no_grad()
def class_accuracy(samples: torch.Tensor, labels: torch.Tensor, net: DigitsFeatureNet | None = None) -> float:
    """Fraction of digit images (N, 1, S, S) that the feature net classifies as ``labels`` (N,)."""
    net = net or digits_feature_net()
    return float((net(samples.float().cpu()).argmax(1) == labels.cpu()).float().mean())


def psnr(x: torch.Tensor, y: torch.Tensor, data_range: float = 2.0) -> torch.Tensor:
    """Per-image PSNR in dB, (B,); x, y: (B, ...)."""
    x, y = _pair(x, y)
    mse = (x - y).pow(2).mean(1)
    return 10 * torch.log10(data_range**2 / mse.clamp_min(1e-20))


def ssim(x: torch.Tensor, y: torch.Tensor, data_range: float = 2.0) -> torch.Tensor:
    """Per-image SSIM (skimage ``structural_similarity``, 7x7 uniform window), (B,); x, y: (B, C, H, W)."""
    from skimage.metrics import structural_similarity

    check_float("x", x, 4)
    check_float("y", y, 4)
    if x.shape != y.shape:  # compared pairwise: extra images in y would be silently ignored
        raise ValueError(f"x and y must have the same shape, got {tuple(x.shape)} and {tuple(y.shape)}")
    a, b = x.detach().cpu().double().numpy(), y.detach().cpu().double().numpy()
    win = min(7, a.shape[-1], a.shape[-2])
    win -= 1 - win % 2
    vals = [
        structural_similarity(a[i], b[i], data_range=data_range, channel_axis=0, win_size=win)
        for i in range(a.shape[0])
    ]
    return torch.tensor(vals, dtype=torch.float32)


def relative_l2(x: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """Per-sample ||x - ref|| / ||ref||, (B,)."""
    x, ref = _pair(x, ref)
    return (x - ref).norm(dim=1) / ref.norm(dim=1).clamp_min(1e-20)
