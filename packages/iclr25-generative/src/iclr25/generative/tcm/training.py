"""Two-stage drivers: stage-1 consistency training, stage-2 truncated training, and ``train_tcm``."""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from iclr25.generative.diffusion import training as core_training
from iclr25.generative.diffusion.losses import edm_loss

from .losses import ConsistencyTrainingLoss, TruncatedConsistencyLoss
from .model import TruncatedCM
from .schedule import ECTSchedule

__all__ = ["TCMConfig", "pretrain_edm", "train_consistency", "train_tcm", "train_truncated"]

log = logging.getLogger(__name__)


def _check_data(data: Any, model: Any = None) -> None:
    if isinstance(data, np.ndarray):  # the trainer would iterate it row by row, failing later on "x0"
        # the suggestion names the model's dtype: torch.from_numpy keeps numpy's float64, which a float32
        # network rejects at its first matmul
        params = model.parameters() if isinstance(model, nn.Module) else ()
        p = next((q for q in params if q.is_floating_point()), None)
        dtype = p.dtype if p is not None else torch.float32
        raise TypeError(
            f"data expects a torch.Tensor (N, ...) or a callable f(generator) -> batch, got a numpy array of "
            f"shape {data.shape}; pass torch.from_numpy(data).to({dtype})"
        )
    if isinstance(data, torch.Tensor):
        if not data.is_floating_point():
            raise TypeError(f"data expects a floating point tensor, got dtype {data.dtype}")
        if not bool(torch.isfinite(data).all()):
            raise ValueError("data must be finite, got NaN or inf values")


def _check_loss(loss: Any, cls: type, other: str) -> None:
    if not isinstance(loss, cls):
        hint = (
            f" (that one is for {other})"
            if isinstance(loss, (ConsistencyTrainingLoss, TruncatedConsistencyLoss))
            else ""
        )
        raise TypeError(f"loss must be a {cls.__name__}, got {type(loss).__name__}{hint}")


def _stepped(loss_of_step: Callable[[nn.Module, Any, torch.Generator, int], torch.Tensor], start: int):
    counter = {"step": start}

    def loss_fn(model: nn.Module, batch: Any, gen: torch.Generator) -> torch.Tensor:
        out = loss_of_step(model, batch, gen, counter["step"])
        counter["step"] += 1
        return out

    return loss_fn


def _train_on_copy(model: nn.Module, loss_fn, data: Any, steps: int, start: int, **kw: Any) -> nn.Module:
    """Train a deep copy so a failure (e.g. a non-finite loss) leaves the caller's model untouched."""
    work = copy.deepcopy(model)
    try:
        core_training.train(work, loss_fn, data, steps, **kw)
    except FloatingPointError as e:
        raise FloatingPointError(f"{e} (global step offset {start}); training stopped, input model untouched") from e
    model.load_state_dict(work.state_dict())
    return model


def pretrain_edm(denoiser: nn.Module, data: Any, steps: int, lr: float = 1e-3, batch_size: int = 512, seed: int = 0,
                 sigma_data: float = 0.5) -> nn.Module:  # fmt: skip
    """EDM denoiser pre-training (ECT initialises stage 1 from it); returns ``denoiser`` trained in place."""
    _check_data(data, denoiser)
    return _train_on_copy(
        denoiser, lambda m, x, g: edm_loss(m, x, sigma_data=sigma_data, generator=g), data, steps, 0,
        lr=lr, batch_size=batch_size, seed=seed, log_every=0,
    )  # fmt: skip


def train_consistency(
    model: nn.Module, data: Any, steps: int, loss: ConsistencyTrainingLoss, start_step: int = 0, lr: float = 1e-4,
    batch_size: int = 512, seed: int = 0, grad_clip: float | None = 1.0,
) -> nn.Module:  # fmt: skip
    """Stage-1 consistency training for ``steps`` iterations, the Delta_t counter starting at ``start_step``."""
    _check_data(data, model)
    _check_loss(loss, ConsistencyTrainingLoss, "train_truncated")
    fn = _stepped(lambda m, x, g, k: loss(m, x, k, generator=g), start_step)
    return _train_on_copy(
        model, fn, data, steps, start_step, lr=lr, batch_size=batch_size, seed=seed, grad_clip=grad_clip, log_every=0
    )


def train_truncated(
    tcm: TruncatedCM, data: Any, steps: int, loss: TruncatedConsistencyLoss, start_step: int = 0, lr: float = 5e-5,
    batch_size: int = 512, seed: int = 0, grad_clip: float | None = 1.0,
) -> TruncatedCM:  # fmt: skip
    """Stage-2 truncated training of ``tcm.student``; ``start_step`` continues stage 1's counter."""
    _check_data(data, tcm)
    if not isinstance(tcm, TruncatedCM):
        raise TypeError(f"tcm must be a TruncatedCM, got {type(tcm).__name__}")
    _check_loss(loss, TruncatedConsistencyLoss, "train_consistency")
    fn = _stepped(lambda m, x, g, k: loss(m, x, k, generator=g)["loss"], start_step)
    return _train_on_copy(
        tcm, fn, data, steps, start_step, lr=lr, batch_size=batch_size, seed=seed, grad_clip=grad_clip, log_every=0
    )


@dataclass
class TCMConfig:
    """Hyper-parameters of :func:`train_tcm` (toy defaults; a comment gives the CIFAR-10 stage-2 optimiser)."""

    pretrain_steps: int = 0  # EDM pre-training before stage 1 (ECT initialises from EDM)
    pretrain_lr: float = 1e-3
    stage1_lr: float = 1e-4
    stage2_lr: float = 5e-5  # RAdam 5e-5 on CIFAR-10
    batch_size: int = 512
    schedule: dict[str, Any] = field(default_factory=lambda: {"q": 2.0, "double_every": 1000, "ratio_limit": 0.999})
    stage1_loss: dict[str, Any] = field(default_factory=dict)
    stage2_loss: dict[str, Any] = field(default_factory=dict)


def train_tcm(
    net_factory: Callable[[], nn.Module],
    data: Any,
    stage1_steps: int,
    stage2_steps: int,
    t_prime: float = 1.0,
    seed: int = 0,
    config: TCMConfig | None = None,
) -> tuple[nn.Module, TruncatedCM]:
    """Train stage 1 (consistency training) then stage 2 (TCM) from it.

    Parameters
    ----------
    net_factory: builds the consistency network in the denoiser convention (e.g.
        ``EDMPrecond(MLPDenoiserNet(2))`` or ``EDMPrecond(UNet2D(...))``).
    data: (N, ...) tensor, or a callable ``f(generator) -> batch``.
    stage1_steps, stage2_steps: iterations per stage (the Delta_t counter runs across both).
    t_prime: the dividing time t'.
    seed: seeds initialisation and training.

    Returns
    -------
    (stage1, tcm): the frozen stage-1 model and the :class:`TruncatedCM` whose student was trained.
    """
    cfg = config or TCMConfig()
    for name, v in (("stage1_steps", stage1_steps), ("stage2_steps", stage2_steps)):
        if not isinstance(v, int) or v < 0:
            raise ValueError(f"{name} must be an int >= 0, got {v!r}")
    if isinstance(net_factory, nn.Module) or not callable(net_factory):
        raise TypeError(
            f"net_factory expects a callable that builds the network (e.g. lambda: EDMPrecond(...)), "
            f"got {type(net_factory).__name__}"
        )
    _check_data(data)
    torch.manual_seed(seed)
    net = net_factory()
    if not isinstance(net, nn.Module):
        raise TypeError(f"net_factory() must return an nn.Module, got {type(net).__name__}")
    sched = ECTSchedule(**cfg.schedule)
    stage2_loss = TruncatedConsistencyLoss(sched, t_prime=t_prime, **cfg.stage2_loss)  # validates t' early
    if cfg.pretrain_steps:
        pretrain_edm(net, data, cfg.pretrain_steps, lr=cfg.pretrain_lr, batch_size=cfg.batch_size, seed=seed)
    train_consistency(net, data, stage1_steps, ConsistencyTrainingLoss(sched, **cfg.stage1_loss),
                      lr=cfg.stage1_lr, batch_size=cfg.batch_size, seed=seed + 1)  # fmt: skip
    teacher = copy.deepcopy(net).eval().requires_grad_(False)
    tcm = TruncatedCM(copy.deepcopy(net).requires_grad_(True), teacher, t_prime)
    train_truncated(tcm, data, stage2_steps, stage2_loss, start_step=stage1_steps, lr=cfg.stage2_lr,
                    batch_size=cfg.batch_size, seed=seed + 2)  # fmt: skip
    return teacher, tcm.eval()
