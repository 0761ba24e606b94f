"""``train_lm``: AdamW with linear warmup and cosine decay on random windows of a token stream."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence

import torch
from torch import nn

from iclr25.core.device import compute_dtype
from iclr25.core.progress import progress

from .data import _check_stream, lm_batches

__all__ = ["lr_multiplier", "train_lm"]

log = logging.getLogger(__name__)

Hook = Callable[[int, int, torch.optim.Optimizer], None]
_SCHEDULES = ("cosine", "linear", "constant")


def lr_multiplier(step: int, total: int, warmup: int, schedule: str = "cosine", min_lr_ratio: float = 0.1) -> float:
    """Factor applied to the peak learning rate at ``step`` (0-based) of ``total``.

    Linear warmup from ``1/warmup`` to 1 over ``warmup`` steps, then ``"cosine"`` (to
    ``min_lr_ratio``), ``"linear"`` (to ``min_lr_ratio``) or ``"constant"``.
    """
    if schedule not in _SCHEDULES:  # an unknown name would otherwise decay linearly
        raise ValueError(f"schedule must be one of {_SCHEDULES}; got {schedule!r}")
    if step < warmup:
        return (step + 1) / warmup
    if schedule == "constant" or total <= warmup:
        return 1.0
    frac = min(1.0, (step - warmup) / max(1, total - warmup - 1))
    if schedule == "cosine":
        return min_lr_ratio + (1.0 - min_lr_ratio) * 0.5 * (1.0 + math.cos(math.pi * frac))
    return 1.0 - (1.0 - min_lr_ratio) * frac


def _logits(out) -> torch.Tensor:
    return out.logits if hasattr(out, "logits") else out


def train_lm(
    model: nn.Module,
    tokens: torch.Tensor,
    *,
    steps: int,
    batch_size: int = 16,
    seq_len: int = 128,
    lr: float = 3e-3,
    weight_decay: float = 0.1,
    betas: tuple[float, float] = (0.9, 0.95),
    warmup: float = 0.05,
    schedule: str = "cosine",
    min_lr_ratio: float = 0.1,
    grad_clip: float | None = 1.0,
    seed: int = 0,
    hooks: Sequence[Hook] = (),
    log_every: int = 50,
) -> dict:
    """Train a causal LM on random windows of ``tokens`` with next-token cross-entropy.

    Works for :class:`~iclr25.llm.lm.model.TinyLlama` and any module whose output is logits or has
    ``.logits`` (HF causal LMs). Weight decay applies to matrices only (not norms or biases), as in
    nanoGPT. Given ``seed`` and the thread count, two runs are bit-identical.

    Parameters
    ----------
    model : nn.Module
        Trained in place, on its own device.
    tokens : (n,) long tensor
        The training stream; needs ``n >= seq_len + 1``.
    steps : int
        Optimiser steps.
    batch_size, seq_len : int
        Windows per step and their length.
    lr : float
        Peak learning rate (stored as ``group["peak_lr"]``).
    weight_decay : float
        AdamW decoupled weight decay on matrices.
    betas : (float, float)
        AdamW β₁, β₂.
    warmup : float
        Warmup length: a fraction of ``steps`` when < 1, else a number of steps.
    schedule : {"cosine", "linear", "constant"}
        Decay after warmup, down to ``min_lr_ratio · lr``.
    min_lr_ratio : float
        Final learning rate as a fraction of the peak.
    grad_clip : float or None
        Global gradient-norm clip.
    seed : int
        Seeds the window sampler (the model's initialisation is the caller's).
    hooks : sequence of callables
        Each is called as ``hook(step, steps, optimizer)`` after the scheduled learning rate is
        set and before the update: it may override ``group["lr"]`` for this step, or change
        ``group["peak_lr"]`` / ``group["weight_decay"]`` for the rest of the run.
    log_every : int
        Log the loss every this many steps.

    Returns
    -------
    dict
        ``loss`` (per-step mean cross-entropy, nats/token), ``lr`` (per step), ``tokens``
        (tokens seen), ``seconds`` (wall time), ``threads`` (``torch.get_num_threads()``).
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module; got {type(model).__name__}")
    tokens = _check_stream(tokens, seq_len, getattr(getattr(model, "config", None), "vocab_size", None))
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive int; got {steps!r}")
    if schedule not in _SCHEDULES:
        raise ValueError(f"schedule must be one of {_SCHEDULES}; got {schedule!r}")
    if not lr > 0 or not 0.0 <= min_lr_ratio <= 1.0 or warmup < 0:
        raise ValueError(f"need lr > 0, 0 <= min_lr_ratio <= 1, warmup >= 0; got {lr}, {min_lr_ratio}, {warmup}")
    n_warm = round(warmup * steps) if warmup < 1 else int(warmup)
    device = next(model.parameters()).device
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    opt = torch.optim.AdamW([g for g in groups if g["params"]], lr=lr, betas=betas)
    for g in opt.param_groups:
        g["peak_lr"] = lr
    gen = torch.Generator().manual_seed(seed)
    batches = lm_batches(tokens, batch_size, seq_len, generator=gen)
    history: dict = {"loss": [], "lr": [], "tokens": 0, "seconds": 0.0, "threads": torch.get_num_threads()}
    model.train()
    t0 = time.perf_counter()
    for step in progress(range(steps), desc="train_lm", total=steps):
        mult = lr_multiplier(step, steps, n_warm, schedule, min_lr_ratio)
        for g in opt.param_groups:
            g["lr"] = g["peak_lr"] * mult
        for hook in hooks:
            hook(step, steps, opt)
        x, y = next(batches)
        x, y = x.to(device), y.to(device)
        logits = _logits(model(x))
        # fp32 at least (bf16/fp16 losses are too coarse); a float64 model keeps float64
        logits = logits.to(compute_dtype(logits))
        loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        if not torch.isfinite(loss):
            raise FloatingPointError(f"training loss became {loss.item()} at step {step}")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if grad_clip is not None:
            nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        opt.step()
        history["loss"].append(loss.item())
        history["lr"].append(opt.param_groups[0]["lr"])
        history["tokens"] += x.numel()
        if log_every and (step + 1) % log_every == 0:
            log.info("step %d/%d loss %.4f lr %.2e", step + 1, steps, history["loss"][-1], history["lr"][-1])
    history["seconds"] = time.perf_counter() - t0
    model.eval()
    return history
