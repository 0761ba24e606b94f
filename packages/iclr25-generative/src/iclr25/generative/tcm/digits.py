"""Digits variant of the reproduction: TCM vs continued consistency training on 8x8 sklearn digits.

Same protocol as the grid25 toy, on images: the core ``UNet2D`` (ch 32) with EDM preconditioning,
EDM pre-training, ECT stage 1, then from the *same* stage-1 checkpoint and with the same extra
budget (a) continued stage 1 (Delta_t counter continues) vs (b) TCM stage 2 (t' = 1)::

    EDM pretrain ──► stage 1 (ECT) ──► checkpoint ─┬─► (a) more stage-1 steps      ──► 1-step digits-FD
                                                   └─► (b) TCM, teacher = checkpoint ──► 1-step digits-FD

Metric: digits-FD (:func:`iclr25.generative.diffusion.metrics.digits_fd`, Frechet distance of a small
digits classifier's features) between 1-step samples (t = T = 80) and the held-out test split;
2-step (t_mid = t') reported. ``floor`` is the FD of the training split itself against the test
split, the value a perfect sampler would get with this reference size.
"""

from __future__ import annotations

import copy
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from iclr25.generative.diffusion.data import digits
from iclr25.generative.diffusion.metrics import DigitsFeatureNet, digits_fd, digits_feature_net
from iclr25.generative.diffusion.nn import UNet2D
from iclr25.generative.diffusion.precond import EDMPrecond

from .losses import ConsistencyTrainingLoss, TruncatedConsistencyLoss
from .model import TruncatedCM
from .sampling import consistency_sample
from .schedule import ECTSchedule
from .training import pretrain_edm, train_consistency, train_truncated

__all__ = ["DEFAULT_STEPS", "DigitsVariantResult", "run_digits_variant"]

log = logging.getLogger(__name__)

T_MAX = 80.0
# (pretrain, stage 1, extra): about 450 s on a shared 2-core CPU (measured), so it stays opt-in
DEFAULT_STEPS = (400, 300, 150)


@dataclass
class DigitsVariantResult:
    """What :func:`run_digits_variant` measured.

    Attributes
    ----------
    scores: arm (``"stage1"``, ``"continued_ct"``, ``"tcm"``) -> ``{"fd_1step", "fd_2step"}``.
    floor: digits-FD of the training images against the same test reference.
    steps: ``{"pretrain", "stage1", "extra"}`` iterations used.
    seconds: wall-clock time of the whole variant.
    models: arm -> model (``stage1`` is the shared checkpoint; ``tcm`` is the :class:`TruncatedCM`
        whose teacher is that checkpoint); empty unless ``return_models=True``.
    """

    scores: dict[str, dict[str, float]]
    floor: float
    steps: dict[str, int]
    seconds: float
    models: dict[str, nn.Module] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The figures as plain JSON (no models)."""
        return {"scores": self.scores, "floor": self.floor, "steps": self.steps, "seconds": self.seconds}


def _check_steps(steps: Any) -> tuple[int, int, int]:
    if not (isinstance(steps, (tuple, list)) and len(steps) == 3 and all(isinstance(s, int) and s >= 0 for s in steps)):
        raise ValueError(f"steps must be (pretrain, stage1, extra) ints >= 0, got {steps!r}")
    if steps[1] < 1:
        raise ValueError(f"steps[1] (stage-1 iterations) must be >= 1, got {steps[1]}")
    return int(steps[0]), int(steps[1]), int(steps[2])


def run_digits_variant(
    steps: tuple[int, int, int] = DEFAULT_STEPS,
    seed: int = 0,
    device: torch.device | str = "cpu",
    batch_size: int = 64,
    ch: int = 32,
    ch_mult: tuple[int, ...] = (1, 2),
    t_prime: float = 1.0,
    n_samples: int = 1000,
    lrs: tuple[float, float, float] = (1e-3, 1e-4, 5e-5),
    feature_net: DigitsFeatureNet | None = None,
    return_models: bool = False,
) -> DigitsVariantResult:
    """TCM stage 2 vs continued stage 1 from one stage-1 checkpoint on 8x8 digits; digits-FD of each.

    Parameters
    ----------
    steps: (EDM pre-training, stage-1 ECT, extra) iterations; both arms get ``extra`` iterations.
        The Delta_t stage doubles every ``stage1 // 6`` iterations (six stages in stage 1, as in the
        toy) and continues counting in both arms.
    seed: seeds data order, initialisation, training and sampling noise.
    device: where the UNet trains and samples (``"cuda"`` on a GPU machine).
    batch_size: images per iteration.
    ch, ch_mult: UNet2D base width and per-level multipliers (8x8 -> 4x4 with the default).
    t_prime: the dividing time t' of TCM (also t_mid of 2-step sampling).
    n_samples: generated images per arm for the FD.
    lrs: learning rates of (pre-training, stage 1, extra budget of both arms).
    feature_net: FD feature network; default the cached trained
        :func:`~iclr25.generative.diffusion.metrics.digits_feature_net`.
    return_models: also return the trained models (tests, inspection).

    Returns
    -------
    :class:`DigitsVariantResult`; lower FD is better.
    """
    pre, s1, extra = _check_steps(steps)
    for name, v in (("batch_size", batch_size), ("n_samples", n_samples)):
        if not isinstance(v, int) or v < 2:
            raise ValueError(f"{name} must be an int >= 2, got {v!r}")
    if not (0.002 < t_prime < T_MAX):
        raise ValueError(f"t_prime must lie in (0.002, {T_MAX}), got {t_prime!r}")
    dev = torch.device(device)
    t0 = time.perf_counter()
    fnet = feature_net if feature_net is not None else digits_feature_net()
    train = digits(8, "train", seed=0).images.to(dev)
    ref = digits(8, "test", seed=0).images
    torch.manual_seed(seed)
    net = EDMPrecond(UNet2D(1, 1, ch=ch, ch_mult=tuple(ch_mult), sample_size=8)).to(dev)
    pretrain_edm(net, train, pre, lr=lrs[0], batch_size=batch_size, seed=seed)
    sched = ECTSchedule(q=2, double_every=max(1, s1 // 6))
    train_consistency(net, train, s1, ConsistencyTrainingLoss(sched), lr=lrs[1], batch_size=batch_size, seed=seed + 1)
    net.eval()
    # (a) baseline: continue stage 1 from the checkpoint with the same extra budget
    cont = train_consistency(copy.deepcopy(net), train, extra, ConsistencyTrainingLoss(sched), start_step=s1,
                             lr=lrs[2], batch_size=batch_size, seed=seed + 2)  # fmt: skip
    # (b) TCM: student initialised from the checkpoint, the checkpoint itself frozen as the teacher
    tcm = TruncatedCM(copy.deepcopy(net), copy.deepcopy(net).requires_grad_(False), t_prime)
    train_truncated(tcm, train, extra, TruncatedConsistencyLoss(sched, t_prime), start_step=s1, lr=lrs[2],
                    batch_size=batch_size, seed=seed + 2)  # fmt: skip
    models = {"stage1": net, "continued_ct": cont, "tcm": tcm}
    scores: dict[str, dict[str, float]] = {}
    for arm, f in models.items():
        scores[arm] = {}
        for name, sig in (("fd_1step", (T_MAX,)), ("fd_2step", (T_MAX, t_prime))):
            # identical noise for every arm: the arms differ only in their weights
            g = torch.Generator(device=dev).manual_seed(8000 + seed)
            x = consistency_sample(f, (n_samples, 1, 8, 8), sig, generator=g, device=dev).clamp(-1, 1)
            scores[arm][name] = float(digits_fd(x.cpu(), ref, fnet))
    floor = float(digits_fd(digits(8, "train", seed=0).images, ref, fnet))
    res = DigitsVariantResult(
        scores, floor, {"pretrain": pre, "stage1": s1, "extra": extra}, round(time.perf_counter() - t0, 1),
        models if return_models else {},
    )  # fmt: skip
    log.info("digits variant (seed %d): %s", seed, res.to_json())
    return res
