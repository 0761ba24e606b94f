"""Training driver: AdamW with the official schedule on freshly sampled Markov sequences.

Defaults follow the official ``config/markov.py`` (d = 8, batch 16, AdamW lr 2e-3, betas (0.9, 0.95),
weight decay 1e-3 on linear weights only, 2% warmup then cosine), except N = 128 instead of 1024 so
that a run fits a CPU.
"""

from __future__ import annotations

import logging
import math
import numbers
import time
from typing import Any

import torch
import torch.nn.functional as F

from iclr25.core.progress import progress

from .chain import BinaryMarkovChain, _check_length
from .model import MarkovTransformer
from .reference import markov_sample_scan

__all__ = ["lr_factor", "train_markov", "train_sweep"]

log = logging.getLogger(__name__)

_TEST_SEED_OFFSET = 1_000_003  # test sequences come from a different stream than training batches


def lr_factor(step: int, iters: int, warmup: float = 0.02) -> float:
    """Learning-rate multiplier at ``step`` (0-based) of ``iters``.

    Matches the official ``OneCycleLR(pct_start=warmup, anneal_strategy='cos', div_factor=100,
    final_div_factor=0.05)``: cosine warm-up from lr/100 to lr over ``warmup * iters`` steps, then
    cosine decay to lr/5.
    """
    # OneCycleLR ends its warm-up phase at step pct_start * total - 1 (a float), then anneals to the end.
    warm = max(warmup * iters - 1.0, 0.0)

    def anneal(start: float, end: float, frac: float) -> float:
        return end + (start - end) * (1.0 + math.cos(math.pi * min(max(frac, 0.0), 1.0))) / 2.0

    if step < warm:
        return anneal(0.01, 1.0, step / warm)
    return anneal(1.0, 0.2, (step - warm) / max(iters - 1.0 - warm, 1.0))


def _decays(name: str, tied: bool) -> bool:
    # As in the official code: only linear weights decay; a tied embedding/head does not, an
    # untied head (an nn.Linear there) does.
    return name.endswith(".weight") or (name == "head_vector" and not tied)


def _param_groups(named: Any, tied: bool, weight_decay: float) -> list[dict[str, Any]]:
    decay, no_decay = [], []
    for name, param in named:
        (decay if _decays(name, tied) else no_decay).append(param)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def _check_common(chain: object, length: int, max_len: int, **positive: Any) -> None:
    if not isinstance(chain, BinaryMarkovChain):
        raise TypeError(f"chain must be a BinaryMarkovChain, got {type(chain).__name__}")
    _check_length(length)
    if length > max_len:
        raise ValueError(f"length {length} exceeds the model's max_len {max_len}")
    for name, value in positive.items():
        if name in ("lr", "warmup"):
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    lr, warmup = positive["lr"], positive["warmup"]
    if not (isinstance(lr, (int, float)) and lr > 0):
        raise ValueError(f"lr must be a positive float, got {lr!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, numbers.Real) or not 0.0 <= warmup < 1.0:
        raise ValueError(f"warmup must be a float in [0, 1), got {warmup!r}")


def _check_seed(seed: object, name: str = "seed") -> None:
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(seed).__name__}")


def _batch_loss(model: MarkovTransformer, seqs: torch.Tensor) -> torch.Tensor:
    logits = model(seqs[:, :-1])
    return F.binary_cross_entropy_with_logits(logits, seqs[:, 1:].to(logits.dtype))


def train_markov(
    model: MarkovTransformer,
    chain: BinaryMarkovChain,
    iters: int = 600,
    batch: int = 16,
    length: int = 128,
    lr: float = 2e-3,
    seed: int = 0,
    *,
    weight_decay: float = 1e-3,
    betas: tuple[float, float] = (0.9, 0.95),
    warmup: float = 0.02,
    eval_batch: int = 256,
    eval_every: int = 0,
) -> dict[str, Any]:
    """Train ``model`` in place on fresh sequences from ``chain``.

    Parameters
    ----------
    model:
        The transformer (its device and dtype are used); ``cfg.max_len >= length``.
    chain:
        The source.
    iters:
        Optimiser steps.
    batch:
        Sequences per step.
    length:
        N, input symbols per sequence (the chain supplies N + 1).
    lr:
        Peak learning rate.
    seed:
        Seeds the training and test data streams (initialise the model yourself, e.g. after
        ``torch.manual_seed``).
    weight_decay, betas, warmup:
        AdamW decay on linear weights, its betas, and the warm-up fraction of ``iters``.
    eval_batch:
        Fresh test sequences for the final (and periodic) test loss.
    eval_every:
        Also record the test loss every this many steps (0: only at the end).

    Returns
    -------
    dict with ``train_loss`` (list of per-step losses), ``test_loss`` (final, nats), ``eval_curve``
    (list of ``(step, test_loss)``), ``unigram_entropy``, ``entropy_rate``, ``iters`` and ``seconds``.
    """
    if not isinstance(model, MarkovTransformer):
        raise TypeError(f"model must be a MarkovTransformer, got {type(model).__name__}")
    _check_common(
        chain, length, model.cfg.max_len, iters=iters, batch=batch, eval_batch=eval_batch, lr=lr, warmup=warmup
    )
    _check_seed(seed)
    if isinstance(eval_every, bool) or not isinstance(eval_every, numbers.Integral) or eval_every < 0:
        raise ValueError(f"eval_every must be a non-negative int (0: only at the end), got {eval_every!r}")

    device = model.embedding_vector.device
    train_gen = torch.Generator(device=device).manual_seed(seed)
    test_gen = torch.Generator(device=device).manual_seed(seed + _TEST_SEED_OFFSET)
    test_seqs = chain.sample(eval_batch, length + 1, generator=test_gen)

    def test_loss() -> float:
        model.eval()
        with torch.no_grad():
            value = float(_batch_loss(model, test_seqs))
        model.train()
        return value

    opt = torch.optim.AdamW(_param_groups(model.named_parameters(), model.tied, weight_decay), lr=lr, betas=betas)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(s, iters, warmup))
    start = time.perf_counter()
    # Per-step losses stay on the device until the end: a float() per step would stall the GPU queue.
    losses = torch.empty(iters, dtype=model.embedding_vector.dtype, device=device)
    curve: list[tuple[int, float]] = []
    model.train()
    for step in progress(range(iters), desc="train_markov", total=iters):
        seqs = chain.sample(batch, length + 1, generator=train_gen)
        loss = _batch_loss(model, seqs)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        losses[step] = loss.detach()
        if eval_every and (step + 1) % eval_every == 0 and step + 1 < iters:
            curve.append((step + 1, test_loss()))
    final = test_loss()
    curve.append((iters, final))
    seconds = time.perf_counter() - start
    log.info("train_markov %s: test loss %.4f after %d steps (%.1fs)", chain, final, iters, seconds)
    return {
        "train_loss": losses.tolist(),
        "test_loss": final,
        "eval_curve": curve,
        "unigram_entropy": chain.unigram_entropy(),
        "entropy_rate": chain.entropy_rate(),
        "iters": iters,
        "seconds": seconds,
    }


def _chain_loss(chain: BinaryMarkovChain, seqs: torch.Tensor, unigram: bool = False) -> float:
    """Mean cross-entropy (nats) on ``seqs[:, 1:]`` of the chain's true next-token probabilities, or of
    the stationary probability ``pi(1)`` at every position when ``unigram``."""
    target = seqs[:, 1:].to(torch.float64)
    prob = torch.full_like(target, float(chain.stationary()[1])) if unigram else chain.next_one_prob(seqs[:, :-1])
    return float(F.binary_cross_entropy(prob, target))


class _SweepSampler:
    """Draws the R runs' batches as one ``(R, n, length)`` tensor, run r's rows equal to ``chains[r].sample``.

    Exactness costs one ``uniform_`` per run (torch has no batch of generators): those R calls write
    into one preallocated buffer, and the Markov recursion for all R * n rows is a single loop-free
    :func:`markov_sample_scan` with per-row (p, q, init) in float32, i.e. the same comparisons the
    per-chain sampler makes, so the sequences are identical.
    """

    def __init__(self, chains: list[BinaryMarkovChain], gens: list[torch.Generator], n: int, length: int) -> None:
        device = gens[0].device
        self.gens, self.n, self.length = gens, n, length
        self.buf = torch.empty(len(chains), n, length, dtype=torch.float32, device=device)

        def rows(values: list[float]) -> torch.Tensor:
            return torch.tensor(values, dtype=torch.float32, device=device).repeat_interleave(n)

        self.p = rows([c.p for c in chains])[:, None]
        self.q = rows([c.q for c in chains])[:, None]
        self.init_one = rows([float(c.initial()[1]) for c in chains])

    def __call__(self) -> torch.Tensor:
        for r, gen in enumerate(self.gens):
            self.buf[r].uniform_(0.0, 1.0, generator=gen)  # what torch.rand(n, length, generator=gen) draws
        flat = self.buf.view(-1, self.length)
        return markov_sample_scan(flat, self.p, self.q, self.init_one).view(len(self.gens), self.n, self.length)


def train_sweep(
    models: list[MarkovTransformer],
    chains: list[BinaryMarkovChain],
    seeds: list[int],
    iters: int = 600,
    batch: int = 16,
    length: int = 128,
    lr: float = 2e-3,
    *,
    weight_decay: float = 1e-3,
    betas: tuple[float, float] = (0.9, 0.95),
    warmup: float = 0.02,
    eval_batch: int = 256,
) -> list[dict[str, Any]]:
    """Train R same-architecture models at once (``torch.func.vmap`` over stacked parameters).

    Run r sees exactly the data :func:`train_markov` would give it (``chains[r]``, ``seeds[r]``) and
    starts from ``models[r]``'s weights; AdamW is elementwise, so the R runs stay independent and
    match R sequential :func:`train_markov` calls up to floating-point summation order. The input
    models are not modified.

    One step is a fixed number of whole-sweep tensor ops whatever R is: the R batches are drawn as
    one ``(R, batch, length + 1)`` tensor (one ``uniform_`` per run for the per-run seeds, then a
    single Markov recursion), one vmapped forward/backward, one AdamW over the stacked ``(R, ...)``
    parameters, and the per-step losses stay on the device until the end (no host sync in the loop).

    Parameters
    ----------
    models:
        R models sharing one :class:`MarkovTransformerConfig`, device and dtype.
    chains:
        R sources (they may differ per run).
    seeds:
        R data seeds.
    iters, batch, length, lr, weight_decay, betas, warmup, eval_batch:
        As in :func:`train_markov`.

    Returns
    -------
    list of R dicts with ``test_loss``, ``train_loss`` (per step), ``unigram_entropy``,
    ``entropy_rate``, ``iters`` and ``seconds`` (wall time of the whole sweep), plus ``state``
    (the run's trained parameters, detached; ``MarkovTransformer(cfg).load_state_dict(state)`` accepts
    it), ``test_chain_loss`` (the data-generating chain's own loss on the same test tokens) and
    ``test_unigram_loss`` (the stationary unigram predictor's loss on them).
    ``test_loss - test_chain_loss`` estimates the model's excess over the entropy rate without the test
    set's sampling noise, which ``test_loss - entropy_rate`` carries (likewise for the unigram).
    """
    if not isinstance(models, (list, tuple)) or not models:
        raise ValueError(f"models must be a non-empty list of MarkovTransformer, got {models!r}")
    if not all(isinstance(m, MarkovTransformer) for m in models):
        raise TypeError("models must all be MarkovTransformer instances")
    for name, value in (("chains", chains), ("seeds", seeds)):
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"{name} must be a list with one entry per model, got {type(value).__name__}")
    if not len(models) == len(chains) == len(seeds):
        raise ValueError(
            f"models, chains and seeds must have one entry per run, got {len(models)}, {len(chains)}, {len(seeds)}"
        )
    base = models[0]
    if any(m.cfg != base.cfg for m in models):
        raise ValueError("models must share one MarkovTransformerConfig")

    def kinds(m: MarkovTransformer) -> list[tuple[torch.dtype, torch.device]]:
        return [(p.dtype, p.device) for p in m.parameters()]

    if any(kinds(m) != kinds(base) for m in models):  # torch.stack would promote all runs to the widest dtype
        found = sorted({f"{dtype} on {device}" for m in models for dtype, device in kinds(m)})
        raise ValueError(f"models must share one dtype and device, got {found}")
    for r, seed in enumerate(seeds):
        _check_seed(seed, f"seeds[{r}]")
    for chain in chains:
        _check_common(
            chain, length, base.cfg.max_len, iters=iters, batch=batch, eval_batch=eval_batch, lr=lr, warmup=warmup
        )
    params, _ = torch.func.stack_module_state(list(models))
    device = base.embedding_vector.device
    n_runs = len(models)
    train_gens = [torch.Generator(device=device).manual_seed(s) for s in seeds]
    test_gens = [torch.Generator(device=device).manual_seed(s + _TEST_SEED_OFFSET) for s in seeds]
    test = _SweepSampler(list(chains), test_gens, eval_batch, length + 1)()
    draw = _SweepSampler(list(chains), train_gens, batch, length + 1)

    def run_losses(p: dict[str, torch.Tensor], seqs: torch.Tensor) -> torch.Tensor:
        logits = torch.func.functional_call(base, p, (seqs[:, :-1],), {"check": False})
        return F.binary_cross_entropy_with_logits(logits, seqs[:, 1:].to(logits.dtype))

    losses_of = torch.func.vmap(run_losses)
    groups = _param_groups(params.items(), base.tied, weight_decay)
    opt = torch.optim.AdamW(groups, lr=lr, betas=betas)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(s, iters, warmup))
    log_losses = torch.empty(iters, n_runs, dtype=base.embedding_vector.dtype, device=device)
    start = time.perf_counter()
    for step in progress(range(iters), desc="train_sweep", total=iters):
        losses = losses_of(params, draw())
        opt.zero_grad(set_to_none=True)
        losses.sum().backward()  # runs share no parameters, so each gets its own gradient
        opt.step()
        sched.step()
        log_losses[step] = losses.detach()
    with torch.no_grad():
        final = losses_of(params, test).tolist()
        chain_loss = [_chain_loss(chains[r], test[r]) for r in range(n_runs)]
        unigram_loss = [_chain_loss(chains[r], test[r], unigram=True) for r in range(n_runs)]
    curves = log_losses.T.tolist()
    seconds = time.perf_counter() - start
    log.info("train_sweep: %d runs x %d steps in %.1fs", n_runs, iters, seconds)
    return [
        {
            "train_loss": curves[r],
            "test_loss": final[r],
            "test_chain_loss": chain_loss[r],
            "test_unigram_loss": unigram_loss[r],
            "unigram_entropy": chains[r].unigram_entropy(),
            "entropy_rate": chains[r].entropy_rate(),
            "iters": iters,
            "seconds": seconds,
            "state": _run_state(params, r, base.tied),
        }
        for r in range(n_runs)
    ]


def _run_state(params: dict[str, torch.Tensor], r: int, tied: bool) -> dict[str, torch.Tensor]:
    """Run r's slice of the stacked parameters as a state dict that ``load_state_dict`` accepts."""
    state = {k: v[r].detach().clone() for k, v in params.items()}
    if tied:  # named_parameters lists the shared Parameter once; state_dict has both keys, one tensor
        state["head_vector"] = state["embedding_vector"]
    return state
