"""Training loop and the paper's analyses: whisker deprivation, ANOVA selectivity, firing statistics."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import numpy as np
import torch
from scipy import stats

from iclr25.core.modes import eval_mode
from iclr25.core.progress import progress
from iclr25.neuro.spiking import anova_selectivity, cv_binary, isi_cv

from .network import BarrelCortexRSNN
from .whiskers import N_WHISKERS, _is_int, deprive_whiskers, to_spikes

logger = logging.getLogger(__name__)

__all__ = ["evaluate", "firing_statistics", "selectivity_anova", "train_barrel", "whisker_deprivation_curve"]


def _as_tensor(x: np.ndarray | torch.Tensor, device: torch.device, dtype: torch.dtype | None = None) -> torch.Tensor:
    # torch.from_numpy refuses negative strides (np.flip, x[::-1]); a contiguous array is used as is
    t = (torch.from_numpy(np.ascontiguousarray(x)) if isinstance(x, np.ndarray) else x).to(device)
    # spikes follow the model's float dtype (to_spikes gives float32; a .double() model needs float64)
    return t.to(dtype) if dtype is not None and t.is_floating_point() else t


def _param(model: BarrelCortexRSNN) -> torch.Tensor:
    return next(model.parameters())


def _check_int(name: str, v: object, low: int) -> int:
    if not _is_int(v) or v < low:
        raise ValueError(f"{name} must be an int >= {low}, got {v!r}")
    return int(v)


def _check_lengths(spikes: np.ndarray | torch.Tensor, labels: np.ndarray | torch.Tensor) -> None:
    # a column of labels [N, 1] would broadcast against the [B] predictions in `evaluate` into a
    # [B, B] comparison and report accuracies above 1
    if np.ndim(labels) != 1:
        raise ValueError(f"labels must be 1-D [N] class indices, got shape {tuple(np.shape(labels))}")
    if len(spikes) != len(labels):
        raise ValueError(f"spikes and labels must have the same length, got {len(spikes)} and {len(labels)}")


def _check_not_empty(spikes: np.ndarray | torch.Tensor) -> None:
    # an empty set would otherwise fail deep inside torch (torch.cat of no batches, backward of a
    # constant loss) with a message that names neither the argument nor the cause
    if len(spikes) == 0:
        raise ValueError(f"spikes must hold at least one sweep [N >= 1, 2, T, 93], got shape {tuple(spikes.shape)}")


@torch.no_grad()
def evaluate(
    model: BarrelCortexRSNN, spikes: np.ndarray | torch.Tensor, labels: np.ndarray | torch.Tensor, batch_size: int = 64
) -> float:
    """Accuracy of ``model`` on ``spikes [N, 2, (sweeps,) T, 93]`` with ``labels [N]``."""
    batch_size = _check_int("batch_size", batch_size, 1)
    _check_lengths(spikes, labels)
    dev, dtype = _param(model).device, _param(model).dtype
    correct = 0
    # no autograd graph (evaluation only); the model's modes come back also when a batch fails
    with eval_mode(model), torch.no_grad():
        for i in range(0, len(labels), batch_size):
            scores = model(_as_tensor(spikes[i : i + batch_size], dev, dtype))
            got = scores.argmax(1).cpu() == _as_tensor(labels[i : i + batch_size], torch.device("cpu"))
            correct += int(got.sum())
    return correct / max(len(labels), 1)


def train_barrel(
    model: BarrelCortexRSNN,
    spikes: np.ndarray | torch.Tensor,
    labels: np.ndarray | torch.Tensor,
    epochs: int = 100,
    batch_size: int = 128,
    lr: float = 0.008,
    step_size: int = 20,
    gamma: float = 0.8,
    seed: int = 0,
) -> dict[str, list[float]]:
    """Train with RSNN_bfd's recipe: Adam on `BarrelCortexRSNN.param_groups`, StepLR(step_size, γ).

    Parameters
    ----------
    spikes, labels:
        ``[N, 2, (sweeps,) T, 93]`` 0/1 and ``[N]`` int labels.

    Returns
    -------
    dict
        ``loss``: mean training loss per epoch; ``train_acc``: training accuracy during each epoch.
    """
    epochs = _check_int("epochs", epochs, 0)
    batch_size = _check_int("batch_size", batch_size, 1)
    step_size = _check_int("step_size", step_size, 1)
    dev = _param(model).device
    x, y = _as_tensor(spikes, torch.device("cpu"), _param(model).dtype), _as_tensor(labels, torch.device("cpu")).long()
    _check_lengths(x, y)
    _check_not_empty(x)
    opt = torch.optim.Adam(model.param_groups(lr))
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=step_size, gamma=gamma)
    gen = torch.Generator().manual_seed(seed)
    history: dict[str, list[float]] = {"loss": [], "train_acc": []}
    model.train()
    for _ in progress(range(epochs), desc="barrel_cortex"):
        total, correct = 0.0, 0
        for idx in torch.randperm(len(y), generator=gen).split(batch_size):
            xb, yb = x[idx].to(dev), y[idx].to(dev)
            scores = model(xb)
            loss = model.loss(scores, yb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(idx)
            correct += int((scores.argmax(1) == yb).sum())
        sched.step()
        history["loss"].append(total / len(y))
        history["train_acc"].append(correct / len(y))
        logger.info("epoch loss %.4f acc %.3f", history["loss"][-1], history["train_acc"][-1])
    return history


def whisker_deprivation_curve(
    model: BarrelCortexRSNN,
    force: np.ndarray,
    torque: np.ndarray,
    labels: np.ndarray,
    ks: Iterable[int] = range(1, 9),
    draws: int = 50,
    seed: int = 0,
    pool: int = 30,
    dt: int = 1,
    c_f: float | None = None,
    c_t: float | None = None,
) -> dict[str, Any]:
    """Test accuracy with ``k`` whiskers removed (zeroed before spike conversion).

    k = 0: intact; k = 1: each of the 31 whiskers once (or ``draws`` distinct ones when
    ``draws < 31``); k > 1: ``draws`` random sets of k distinct whiskers from ``0..pool-1``
    (as RSNN_bfd's ``np.random.choice(30, k, replace=False)``).

    Parameters
    ----------
    force, torque:
        Test set ``[N, sweeps, frames, 31, 3, 3]``; ``labels``: ``[N]``.
    c_f, c_t:
        Spike-conversion centres; pass the training ones.

    Returns
    -------
    dict
        ``ks``, ``accuracy`` (mean per k), ``per_draw`` (lists), ``spearman`` (ρ of k vs accuracy;
        NaN when there is one k or all mean accuracies are equal).
    """
    _check_lengths(force, labels)
    ks = list(ks)
    pool = _check_int("pool", pool, 1)
    # int(1.5) would silently run k = 1; a repeated k would overwrite its own per_draw entry
    if not all(_is_int(k) for k in ks) or len(set(ks)) != len(ks):
        raise ValueError(f"ks must be distinct ints, got {ks}")
    ks = [int(k) for k in ks]
    if any(not 0 <= k <= pool for k in ks) or pool > N_WHISKERS:
        raise ValueError(f"ks must lie in 0..pool and pool in 1..{N_WHISKERS}, got ks={ks}, pool={pool}")
    draws = _check_int("draws", draws, 1)
    rng = np.random.default_rng(seed)
    per_draw: dict[int, list[float]] = {}
    for k in ks:
        if k == 0:
            sets: list[list[int]] = [[]]
        elif k == 1:
            order = np.arange(N_WHISKERS) if draws >= N_WHISKERS else rng.choice(N_WHISKERS, draws, replace=False)
            sets = [[int(w)] for w in order]
        else:
            sets = [rng.choice(pool, k, replace=False).tolist() for _ in range(draws)]
        accs = []
        for idx in sets:
            f, t = deprive_whiskers(force, torque, idx)
            spikes, _ = to_spikes(f, t, dt=dt, c_f=c_f, c_t=c_t, generator=rng)
            accs.append(evaluate(model, spikes[:, :, 0], labels))
        per_draw[k] = accs
    acc = [float(np.mean(per_draw[k])) for k in ks]
    rho = float(stats.spearmanr(ks, acc).statistic) if len(ks) > 1 and np.ptp(acc) > 0 else float("nan")
    return {"ks": ks, "accuracy": acc, "per_draw": per_draw, "spearman": rho}


@torch.no_grad()
def _record(model: BarrelCortexRSNN, spikes: np.ndarray | torch.Tensor, batch_size: int = 64) -> torch.Tensor:
    dev, dtype = _param(model).device, _param(model).dtype
    out = [
        model(_as_tensor(spikes[i : i + batch_size], dev, dtype), record=True)[1].cpu()
        for i in range(0, len(spikes), batch_size)
    ]
    return torch.cat(out)  # [N, T, n]


def selectivity_anova(
    model: BarrelCortexRSNN,
    spikes: np.ndarray | torch.Tensor,
    labels: np.ndarray | torch.Tensor,
    alpha: float = 1e-3,
    smoothing: float = 182.0,
) -> dict[str, Any]:
    """Class selectivity of every cortical neuron (RSNN_bfd ``ANOVA``).

    Per class, spike counts are summed over the class's trials, one observation per time step
    ``(T, n)``; a one-way ANOVA across classes per neuron (no multiple-comparison correction, as
    in RSNN_bfd); selective when p < ``alpha``. Every cortical neuron counts in the denominator of
    ``fraction``, silent ones included (they get p = 1), as in the official cell count. RSNN_bfd
    runs it on all sweeps of a class, training and test pooled; pass the trials you want tested.

    Returns
    -------
    dict
        ``p_values (n,)``, ``selective (n,)`` bool, ``fraction``, ``active (n,)`` bool (fired at
        least once), ``preferred (n,)`` label of the class with the largest smoothed count and
        ``ternary (n, C)``: per-class firing proportions with ``smoothing`` added to every count,
        one column per distinct label in ascending order.
    """
    _check_lengths(spikes, labels)
    _check_not_empty(spikes)
    rec = _record(model, spikes)
    y = _as_tensor(labels, torch.device("cpu")).long()
    classes = torch.unique(y)
    counts = [rec[y == c].sum(0) for c in classes]  # each (T, n)
    res = anova_selectivity(counts, alpha=alpha)
    totals = torch.stack([c.sum(0) for c in counts], 1).double() + smoothing
    p = torch.as_tensor(np.asarray(res.pvalues))
    return {
        "p_values": p,
        "selective": p < alpha,
        "fraction": float((p < alpha).double().mean()),
        "active": rec.sum((0, 1)) > 0,
        # the label itself, not the column: with labels {1, 2} column 0 is class 1
        "preferred": classes[totals.argmax(1)],
        "ternary": totals / totals.sum(1, keepdim=True),
    }


def firing_statistics(model: BarrelCortexRSNN, spikes: np.ndarray | torch.Tensor) -> dict[str, Any]:
    """Firing statistics of the cortex on ``spikes``: per-population rates, CVs and weighted degrees.

    Returns
    -------
    dict
        ``rates`` (per population, spikes/step), ``rate_E``, ``rate_I``, ``cv_binary`` and ``isi_cv``
        (means over spike trains, one per (sweep, neuron) pair; ``isi_cv`` over the trains with ≥ 3
        spikes), ``in_degree`` / ``out_degree`` ``(n,)``: summed absolute effective weights into /
        out of every neuron.
    """
    _check_not_empty(spikes)
    rec = _record(model, spikes)  # [N, T, n]
    spec = model.cortex.spec
    off = spec.offsets
    per_neuron = rec.mean((0, 1))
    rates = [float(per_neuron[off[i] : off[i + 1]].mean()) for i in range(len(spec.sizes))]
    e = torch.tensor([k == "E" for k in spec.kinds]).repeat_interleave(torch.tensor(spec.sizes))
    trains = rec.transpose(0, 1).reshape(rec.shape[1], -1)  # (T, trials·n): every trial-neuron a train
    isi = isi_cv(trains)
    with torch.no_grad():
        w, _ = model.cortex.effective_weights()
        w = w.abs().cpu()
    return {
        "rates": rates,
        "rate_E": float(per_neuron[e].mean()),
        "rate_I": float(per_neuron[~e].mean()),
        "cv_binary": float(cv_binary(trains)),
        "isi_cv": float("nan") if isi.mean is None else float(isi.mean),
        "in_degree": w.sum(0),
        "out_degree": w.sum(1),
    }
