"""Count-conditioned DDPM trained with L_simple + lambda L_top (TopoDiffusionNet), and its evaluation."""

from __future__ import annotations

import logging
import math
import numbers
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from iclr25.core.device import compute_dtype
from iclr25.core.modes import eval_mode
from iclr25.generative.diffusion import samplers, training
from iclr25.generative.diffusion.losses import x0_from_eps
from iclr25.generative.diffusion.schedules import VPSchedule

from .losses import TopoCountLoss
from .persistence import betti_numbers

__all__ = ["TopoDiffusionTrainer", "count_accuracy"]

log = logging.getLogger(__name__)


def _check_counts(counts: torch.Tensor, max_count: int, n_dims: int, batch: int | None = None) -> torch.Tensor:
    counts = torch.as_tensor(counts)
    if counts.is_floating_point() or counts.dtype == torch.bool:
        raise TypeError(f"counts must be an integer tensor, got {counts.dtype}")
    given = tuple(counts.shape)
    if counts.dim() == 1:
        counts = counts[:, None]
    if counts.dim() != 2 or counts.shape[1] != n_dims or (batch is not None and counts.shape[0] != batch):
        rows = "B" if batch is None else str(batch)
        raise ValueError(f"counts must be ({rows},) or ({rows}, {n_dims}), got shape {given}")
    if counts.numel() and (counts.min() < 0 or counts.max() > max_count):
        raise ValueError(f"counts must lie in [0, {max_count}], got [{int(counts.min())}, {int(counts.max())}]")
    return counts.long()


class TopoDiffusionTrainer:
    """DDPM (epsilon prediction) conditioned on the requested count, with the topology loss.

    Per step: t ~ U{0..T-1}, x_t = sqrt(ab) x0 + sqrt(1-ab) eps,
    x0_hat = clamp((x_t - sqrt(1-ab) eps_theta(x_t, t, c)) / sqrt(ab), -1, 1) and::

        L = mean_pixels (eps - eps_theta)^2 + lam * w(t) * 1[t < t_max_frac T] * L_top(x0_hat, c)

    with ``w(t) = 1`` or the min-SNR factor min(snr, gamma) / snr. ``lam = 0`` is the paper's ADM-T
    baseline (same network and conditioning, no topology loss).

    Parameters
    ----------
    unet: epsilon network ``unet(x, t, class_labels=c)`` (e.g. ``diffusion.nn.UNet2D`` with
        ``num_classes >= max_count + 1``); with two dims the label is ``c0 * (max_count + 1) + c1``.
    schedule: the VP schedule (the paper: cosine, T = 1000).
    max_count: largest requested count.
    lam: lambda, weight of the topology loss (0.05).
    t_max_frac: the topology term is used only for t < t_max_frac * T (x0_hat at high noise is a blur).
    dims: Betti dimensions conditioned on: (0,) components, (1,) holes or (0, 1).
    preserve: ``"bounded"`` (default) or ``"paper"``, see :class:`TopoCountLoss`.
    min_snr_gamma: when given, the topology term is weighted by min(snr, gamma) / snr.

    Attributes
    ----------
    history: dict of per-step lists ``loss``, ``simple``, ``topo`` (topology loss, times the min-SNR
        factor when ``min_snr_gamma`` is set and without lam, averaged over the images with
        t < t_max_frac T; NaN when the batch had none or when lam = 0) after :meth:`fit`.
    """

    def __init__(
        self,
        unet: nn.Module,
        schedule: VPSchedule,
        max_count: int,
        lam: float = 0.05,
        t_max_frac: float = 0.5,
        dims: Sequence[int] = (0,),
        preserve: str = "bounded",
        min_snr_gamma: float | None = None,
    ) -> None:
        # numpy integers too (e.g. np.max(counts)), but not bool
        if isinstance(max_count, bool) or not isinstance(max_count, numbers.Integral) or max_count < 1:
            raise ValueError(f"max_count must be an int >= 1, got {max_count!r} ({type(max_count).__name__})")
        max_count = int(max_count)
        if not (math.isfinite(lam) and lam >= 0):
            # NaN would fail every `lam > 0` test and silently train the lam = 0 (ADM-T) baseline
            raise ValueError(f"lam must be a finite number >= 0, got {lam}")
        if not 0 < t_max_frac <= 1:
            raise ValueError(f"t_max_frac must be in (0, 1], got {t_max_frac}")
        if min_snr_gamma is not None and not min_snr_gamma > 0:
            # gamma <= 0 would silently zero or flip the sign of the topology term
            raise ValueError(f"min_snr_gamma must be > 0 (or None), got {min_snr_gamma}")
        self.dims = tuple(dims)
        self.topo = TopoCountLoss(self.dims, preserve=preserve)
        n_labels = (max_count + 1) ** len(self.dims)
        nc = getattr(unet, "num_classes", None)
        if nc is not None and nc < n_labels:
            raise ValueError(f"unet.num_classes must be >= {n_labels} for max_count={max_count}, got {nc}")
        self.unet, self.schedule, self.max_count = unet, schedule, max_count
        self.lam, self.t_max_frac, self.min_snr_gamma = float(lam), float(t_max_frac), min_snr_gamma
        self.history: dict[str, list[float]] = {"loss": [], "simple": [], "topo": []}

    def _device_dtype(self) -> tuple[torch.device, torch.dtype]:
        """Device and floating dtype of the network's parameters (data and noise are made to match)."""
        p = next(self.unet.parameters())
        return p.device, p.dtype if p.is_floating_point() else torch.float32

    def labels(self, counts: torch.Tensor) -> torch.Tensor:
        """Class label fed to the network for (B, len(dims)) counts."""
        lab = counts[:, 0]
        for j in range(1, counts.shape[1]):
            lab = lab * (self.max_count + 1) + counts[:, j]
        return lab

    def loss(self, x0: torch.Tensor, counts: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """Per-sample training loss, (B,), for masks x0 (B, 1, H, W) in [-1, 1] and counts (B,) or (B, len(dims))."""
        b = x0.shape[0]
        # a count outside [0, max_count] would index past the label embedding (IndexError on CPU, a
        # device-side assert on CUDA); refuse it here with the range, as fit and sample do
        counts = _check_counts(counts, self.max_count, len(self.dims), b).to(x0.device)
        T = self.schedule.T
        t = torch.randint(0, T, (b,), generator=generator, device=x0.device)
        # at least float32: in float16/bfloat16 1 - ab rounds to 0 at small t (no noise added)
        ab = self.schedule.alphas_cumprod.to(x0.device)[t].to(compute_dtype(x0))
        eps = torch.randn(x0.shape, generator=generator, device=x0.device, dtype=x0.dtype)
        abv = ab.view(-1, 1, 1, 1)
        x_t = abv.sqrt().to(x0.dtype) * x0 + (1 - abv).sqrt().to(x0.dtype) * eps
        eps_hat = self.unet(x_t, t, class_labels=self.labels(counts))
        simple = (eps_hat - eps).pow(2).reshape(b, -1).mean(1)
        total = simple
        topo_mean = float("nan")
        if self.lam > 0:
            sel = (t < self.t_max_frac * T).nonzero().flatten()
            if sel.numel():
                x0_hat = x0_from_eps(x_t[sel], eps_hat[sel], ab[sel]).clamp(-1, 1)
                lt = self.topo(x0_hat, counts[sel])
                if self.min_snr_gamma is not None:
                    snr = ab[sel] / (1 - ab[sel])
                    lt = (lt * snr.clamp(max=self.min_snr_gamma) / snr).to(lt.dtype)
                topo_mean = float(lt.detach().mean())
                total = total.index_add(0, sel, self.lam * lt)
        self.history["simple"].append(float(simple.detach().mean()))
        self.history["topo"].append(topo_mean)
        return total

    def fit(
        self,
        masks: torch.Tensor,
        counts: torch.Tensor,
        steps: int,
        batch_size: int = 64,
        lr: float = 5e-4,
        seed: int = 0,
        show_progress: bool = False,
    ) -> dict[str, Any]:
        """Train with Adam on (masks, counts).

        Parameters
        ----------
        masks: (N, 1, H, W) float in [0, 1] (binary masks; mapped to [-1, 1]) .
        counts: (N,) or (N, len(dims)) ints in [0, max_count].
        steps, batch_size, lr, seed: optimisation budget (minibatches drawn with replacement).

        Returns
        -------
        dict with ``loss``, ``simple``, ``topo`` (per-step lists), ``steps`` and ``seconds``.
        """
        if not isinstance(masks, torch.Tensor) or masks.dim() != 4 or masks.shape[1] != 1:
            shape = tuple(masks.shape) if isinstance(masks, torch.Tensor) else type(masks).__name__
            raise ValueError(f"masks must be a (N, 1, H, W) tensor, got {shape}")
        if masks.shape[0] == 0:
            raise ValueError("masks must hold at least one example, got N = 0")
        if not (masks.min() >= 0 and masks.max() <= 1):  # also refuses NaN
            raise ValueError(f"masks must lie in [0, 1], got [{float(masks.min())}, {float(masks.max())}]")
        if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) or batch_size < 1:
            raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
        counts = _check_counts(counts, self.max_count, len(self.dims), masks.shape[0])
        dev, dtype = self._device_dtype()
        x = (masks.to(dev, dtype) * 2 - 1).contiguous()
        c = counts.to(dev)
        n = x.shape[0]
        self.history = {"loss": [], "simple": [], "topo": []}

        def draw(g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
            idx = torch.randint(0, n, (batch_size,), generator=g).to(dev)
            return x[idx], c[idx]

        res = training.train(
            self.unet,
            lambda model, batch, gen: self.loss(batch[0], batch[1], gen),
            draw,
            steps,
            lr=lr,
            batch_size=batch_size,
            seed=seed,
            log_every=0,
            show_progress=show_progress,
        )
        self.history["loss"] = res["loss"]
        return {**self.history, "steps": res["steps"], "seconds": res["seconds"]}

    @torch.no_grad()
    def sample(
        self, counts: torch.Tensor, steps: int = 30, generator: torch.Generator | None = None, size: int | None = None
    ) -> torch.Tensor:
        """DDIM (eta = 0) samples for the requested counts.

        Parameters
        ----------
        counts: (B,) or (B, len(dims)) ints in [0, max_count].
        steps: DDIM steps.
        generator: draws the initial noise; on the network's device.
        size: image side, an int >= 1 (default: ``unet.sample_size``).

        Returns
        -------
        (B, 1, H, W) masks in [-1, 1] (threshold at 0 to binarise), in the network's dtype. The
        network runs in eval mode; every submodule's train/eval flag is restored afterwards.
        """
        counts = _check_counts(counts, self.max_count, len(self.dims))
        if size is None:
            size = getattr(self.unet, "sample_size", None)
            if not size:
                raise ValueError("size must be given when unet.sample_size is not set")
        # `size or sample_size` used to replace an explicit size=0 by the network's size without a word
        if isinstance(size, bool) or not isinstance(size, numbers.Integral):
            raise TypeError(f"size must be an int, got {type(size).__name__}")
        if size < 1:
            raise ValueError(f"size must be >= 1, got {size}")
        dev, dtype = self._device_dtype()
        # a sample taken inside a user's training loop (a progress check) used to leave the network in
        # eval mode, silently switching dropout off for the following loss() steps; each submodule's
        # own flag is put back, since unet.train(mode) would also flip submodules the user had frozen
        with eval_mode(self.unet):
            # drawn in float32 and cast, so a seeded generator gives the same noise at every network dtype
            x_T = torch.randn((counts.shape[0], 1, size, size), generator=generator, device=dev).to(dtype)
            cond = {"class_labels": self.labels(counts.to(dev))}
            return samplers.ddim_sample(self.unet, self.schedule, x_T, steps, cond=cond, clip_x0=1.0)


def count_accuracy(
    samples: torch.Tensor, counts: torch.Tensor, dim: int = 0, threshold: float = 0.0, connectivity: int = 4
) -> dict[str, Any]:
    """Exact Betti-number accuracy of generated masks.

    Parameters
    ----------
    samples: (B, 1, H, W) masks; foreground is ``samples > threshold``.
    counts: (B,) requested Betti numbers of dimension ``dim``.

    Returns
    -------
    dict with ``accuracy`` (share of exact matches), ``per_count`` {c: accuracy}, ``hits`` and
    ``totals`` {c: int}, ``mae`` (mean absolute error of the Betti number) and ``betti`` ((B,)
    measured numbers, list).
    """
    if dim not in (0, 1):
        raise ValueError(f"dim must be 0 or 1, got {dim!r}")
    counts = torch.as_tensor(counts)
    # .long() truncates, so a request of 1.5 components used to be scored as a request of 1
    if counts.is_floating_point():
        bad = counts[~(torch.isfinite(counts) & (counts == counts.round()))]
        if bad.numel():
            raise ValueError(f"counts must be whole numbers, got {float(bad.flatten()[0])}")
    counts = counts.long().cpu().reshape(-1)
    if counts.shape[0] != samples.shape[0]:
        raise ValueError(f"counts must have {samples.shape[0]} entries, got {counts.shape[0]}")
    betti = betti_numbers(samples, threshold, connectivity)[:, dim]
    hit = betti == counts
    # exact integer hit counts, so equal accuracies compare equal (float32 means need not)
    hits = {int(c): int(hit[counts == c].sum()) for c in counts.unique()}
    totals = {int(c): int((counts == c).sum()) for c in counts.unique()}
    return {
        "accuracy": int(hit.sum()) / len(hit) if len(hit) else float("nan"),
        "per_count": {c: hits[c] / totals[c] for c in hits},
        "hits": hits,
        "totals": totals,
        "mae": float((betti - counts).abs().float().mean()) if len(hit) else float("nan"),
        "betti": betti.tolist(),
    }
