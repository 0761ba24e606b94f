"""Training loop with EMA, and JSON+safetensors checkpoints for cached toy priors."""

from __future__ import annotations

import copy
import json
import logging
import numbers
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn

from iclr25.core.io import atomic_write_text
from iclr25.core.progress import progress

__all__ = ["EMA", "load", "save", "train"]

log = logging.getLogger(__name__)


class EMA:
    """Exponential moving average of a model's parameters (buffers are copied).

    Parameters
    ----------
    model: the model being trained.
    decay: constant decay beta (``0.999``); ignored when ``gamma`` is given.
    gamma: power-function EMA of EDM2 (Karras et al. 2024): beta_t = (1 - 1/t)^(gamma + 1).

    Attributes
    ----------
    model: an eval-mode deep copy holding the averaged weights (use it for sampling).
    steps: updates so far (the power-function schedule depends on it, so it is part of the state).

    ``state_dict()`` / ``load_state_dict()`` save and restore the averaged weights together with
    ``steps``, ``decay`` and ``gamma``, so a resumed run continues the same average.

    float16/bfloat16 parameters are averaged in a float32 shadow and ``model`` holds its rounding
    (like timm's ModelEmaV3 / diffusers' EMAModel with fp32 shadows); the state then also carries
    ``"shadow"`` (name -> float32 tensor). float32/float64 parameters are averaged in place.
    """

    def __init__(self, model: nn.Module, decay: float = 0.999, gamma: float | None = None) -> None:
        if not 0 <= decay < 1:
            raise ValueError(f"decay must be in [0, 1), got {decay}")
        if gamma is not None and not gamma > -1:  # beta_t = (1 - 1/t)^(gamma + 1) must stay < 1
            raise ValueError(f"gamma must be > -1 (or None), got {gamma}")
        self.decay, self.gamma, self.steps = decay, gamma, 0
        self.model = copy.deepcopy(model).eval().requires_grad_(False)
        self._names = [n for n, _ in model.named_parameters()]
        self._shadow: dict[str, torch.Tensor] = {}
        for n, pe in self.model.named_parameters():
            self._shadow_of(n, pe)

    def beta(self) -> float:
        if self.gamma is not None:
            return (1 - 1 / max(self.steps, 1)) ** (self.gamma + 1)
        return self.decay

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        """Fold ``model``'s current parameters into the average (and copy its buffers)."""
        params = list(model.named_parameters())
        if [n for n, _ in params] != self._names:
            # e.g. adapters injected after the EMA was made: pairing by position would mix up weights
            raise ValueError(
                "model's parameters differ from the ones the EMA was created with "
                f"({len(params)} vs {len(self._names)}); create the EMA after changing the model"
            )
        self.steps += 1
        b = self.beta()
        for (n, pe), (_, p) in zip(self.model.named_parameters(), params, strict=True):
            shadow = self._shadow_of(n, pe)
            if shadow is None:
                pe.lerp_(p.detach(), 1 - b)
            else:
                shadow.lerp_(p.detach().to(shadow.dtype), 1 - b)
                pe.copy_(shadow)
        for be, bm in zip(self.model.buffers(), model.buffers(), strict=True):
            be.copy_(bm)

    def _shadow_of(self, name: str, pe: torch.Tensor) -> torch.Tensor | None:
        """The float32 average behind a half-precision ``pe`` (None: ``pe`` is averaged in place)."""
        if pe.dtype not in (torch.float16, torch.bfloat16):
            self._shadow.pop(name, None)
            return None
        shadow = self._shadow.get(name)
        # with decay 0.999 a step (1 - decay) * (p - avg) is below bf16 resolution, so a bf16 average
        # would never move. The shadow is rebuilt from ``model`` when that was changed behind the EMA's
        # back (loaded, moved, cast), so ``model`` stays the source of truth users see.
        if (
            shadow is None
            or shadow.device != pe.device
            or shadow.shape != pe.shape
            or not torch.equal(shadow.to(pe.dtype), pe)
        ):
            shadow = self._shadow[name] = pe.detach().to(torch.float32, copy=True)
        return shadow

    def state_dict(self) -> dict[str, Any]:
        """``{"steps", "decay", "gamma", "model"}`` (+ ``"shadow"`` for half-precision parameters):
        everything a resumed run needs (``torch.save``-able)."""
        state = {"steps": self.steps, "decay": self.decay, "gamma": self.gamma, "model": self.model.state_dict()}
        shadow = {n: s for n, pe in self.model.named_parameters() if (s := self._shadow_of(n, pe)) is not None}
        if shadow:  # absent for float32/float64 models, whose state stays as before
            state["shadow"] = {n: s.clone() for n, s in shadow.items()}
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a :meth:`state_dict`; the averaged model must have the same architecture."""
        keys = {"steps", "decay", "gamma", "model"}
        if not isinstance(state, dict) or not keys <= set(state):
            got = sorted(state) if isinstance(state, dict) else type(state).__name__
            raise ValueError(f"state must be a dict from EMA.state_dict() with keys {sorted(keys)}, got {got}")
        steps = state["steps"]
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
            raise ValueError(f"state['steps'] must be an int >= 0, got {steps!r}")
        shadow = state.get("shadow", {})
        if not isinstance(shadow, dict) or not all(isinstance(t, torch.Tensor) for t in shadow.values()):
            raise ValueError("state['shadow'] must be a dict of parameter name -> tensor")
        self.model.load_state_dict(state["model"])
        # a state saved before shadows existed (or one whose shadow does not round to the loaded
        # weights) restarts the shadow from the loaded weights, the best average it still has
        self._shadow = {}
        for n, pe in self.model.named_parameters():
            if n in shadow:
                self._shadow[n] = shadow[n].detach().to(pe.device, torch.float32, copy=True)
            self._shadow_of(n, pe)
        self.steps, self.decay, self.gamma = steps, float(state["decay"]), state["gamma"]


def _batches(data: Any, batch_size: int, generator: torch.Generator) -> Iterator[Any]:
    if isinstance(data, torch.Tensor):
        if not isinstance(batch_size, numbers.Integral) or batch_size < 1:  # an empty batch gave a NaN loss
            raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
        if data.shape[0] == 0:
            raise ValueError("data must hold at least one example, got an empty tensor")
        while True:
            yield data[torch.randint(0, data.shape[0], (batch_size,), generator=generator).to(data.device)]
    elif callable(data):
        while True:
            yield data(generator)
    elif isinstance(data, Iterable):
        while True:
            empty = True
            for b in data:
                empty = False
                yield b
            if empty:
                raise ValueError("data iterable yielded no batches")
    else:
        raise TypeError(f"data_iter must be a tensor, a callable or an iterable, got {type(data).__name__}")


def train(
    model: nn.Module,
    loss_fn: Callable[[nn.Module, Any, torch.Generator], torch.Tensor],
    data_iter: Any,
    steps: int,
    lr: float = 1e-3,
    batch_size: int = 64,
    ema: EMA | None = None,
    grad_clip: float | None = 1.0,
    seed: int = 0,
    log_every: int = 100,
    callback: Callable[[int, float], None] | None = None,
    params: Iterable[nn.Parameter] | None = None,
    weight_decay: float = 0.0,
    warmup: int = 0,
    show_progress: bool = False,
) -> dict[str, Any]:
    """Adam(W) training loop.

    Parameters
    ----------
    model: module to optimise (its trainable parameters, or ``params``).
    loss_fn: ``loss_fn(model, batch, generator)`` -> scalar or per-sample loss (averaged).
    data_iter: a tensor dataset (minibatches of ``batch_size`` drawn with replacement), a callable
        ``f(generator) -> batch``, or an iterable of batches (cycled).
    steps: optimiser steps; lr: learning rate (linear warm-up over ``warmup`` steps).
    ema: updated after every step. grad_clip: max global grad norm (``None`` = off).
    seed: seeds the generator passed to ``loss_fn`` and the batch sampler.

    Returns
    -------
    dict with ``loss`` (list of per-step losses), ``steps`` and ``seconds``.
    """
    if not isinstance(steps, int) or steps < 0:
        raise ValueError(f"steps must be an int >= 0, got {steps!r}")
    if not lr > 0:
        raise ValueError(f"lr must be > 0, got {lr}")
    dev = next(model.parameters()).device
    gen = torch.Generator(device=dev).manual_seed(seed)
    cpu_gen = gen if dev.type == "cpu" else torch.Generator().manual_seed(seed)
    params = [p for p in (params if params is not None else model.parameters()) if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    batches = _batches(data_iter, batch_size, cpu_gen)
    history: list[float] = []
    t0 = time.perf_counter()
    model.train()
    it = progress(range(steps), desc="train") if show_progress else range(steps)
    for step in it:
        if warmup:
            for g in opt.param_groups:
                g["lr"] = lr * min(1.0, (step + 1) / warmup)
        loss = loss_fn(model, next(batches), gen).mean()
        if not torch.isfinite(loss):
            raise FloatingPointError(f"loss became non-finite at step {step}: {float(loss.detach())}")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(params, grad_clip)
        opt.step()
        if ema is not None:
            ema.update(model)
        history.append(float(loss.detach()))
        if log_every and (step + 1) % log_every == 0:
            log.info("step %d loss %.5f", step + 1, sum(history[-log_every:]) / log_every)
        if callback is not None:
            callback(step, history[-1])
    model.eval()
    return {"loss": history, "steps": steps, "seconds": time.perf_counter() - t0}


def save(path: str | Path, model: nn.Module, config: dict[str, Any] | None = None) -> None:
    """Write ``<path>.safetensors`` (state dict) and ``<path>.json`` (config)."""
    from safetensors.torch import save_file

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    tmp = path.with_suffix(".safetensors.tmp")
    save_file(state, str(tmp))
    tmp.replace(path.with_suffix(".safetensors"))
    atomic_write_text(path.with_suffix(".json"), json.dumps(config or {}, indent=2, sort_keys=True))


def load(path: str | Path, model: nn.Module) -> dict[str, Any]:
    """Load weights saved by :func:`save` into ``model``; returns the stored config."""
    from safetensors.torch import load_file

    path = Path(path)
    dev = next(model.parameters()).device
    model.load_state_dict(load_file(str(path.with_suffix(".safetensors")), device=str(dev)))
    return json.loads(path.with_suffix(".json").read_text())
