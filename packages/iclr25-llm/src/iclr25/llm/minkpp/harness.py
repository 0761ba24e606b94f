"""Controlled membership for tiny models: continued training with known member passages.

::

    held-out documents ─► sample_passages ─► 2N passages ─► split ─► N members ─► inject_members
                                                                 └─► N non-members (never trained on)

Members and non-members are passages of the *same* held-out documents, so the only difference
between them is membership (no distribution shift, the known confound of WikiMIA).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence

import torch
from torch import nn

from iclr25.core.device import compute_dtype
from iclr25.core.progress import progress
from iclr25.llm.lm.data import _check_stream

from .scores import _is_int

__all__ = ["inject_members", "sample_passages"]

log = logging.getLogger(__name__)


def sample_passages(
    docs: Mapping[str, torch.Tensor] | Sequence[torch.Tensor], n: int, length: int, seed: int = 0
) -> torch.Tensor:
    """``n`` distinct non-overlapping passages of ``length`` tokens drawn uniformly from ``docs``.

    Parameters
    ----------
    docs : mapping or sequence of (m_i,) long tensors
        Token streams of held-out documents.
    n, length : int
        Number of passages and tokens per passage (>= 2).
    seed : int

    Returns
    -------
    (n, length) long tensor
    """
    streams = list(docs.values()) if isinstance(docs, Mapping) else list(docs)
    if not _is_int(length) or length < 2:
        raise ValueError(f"length must be an int >= 2; got {length!r}")
    if not _is_int(n) or n < 1:
        raise ValueError(f"n must be a positive int; got {n!r}")
    # numpy ints (np.int64 is not an int subclass) are refused by torch.Generator.manual_seed
    if not _is_int(seed):
        raise ValueError(f"seed must be an int; got {seed!r}")
    n, length, seed = int(n), int(length), int(seed)
    windows = []
    for s in streams:
        if not isinstance(s, torch.Tensor):
            raise TypeError(f"docs must hold 1-D token tensors; got a {type(s).__name__}")
        if s.dim() != 1:
            raise ValueError(f"docs must hold 1-D token tensors; got shape {tuple(s.shape)}")
        # the final .long() would otherwise truncate float ids silently (as member_ids refuses below)
        if s.is_floating_point() or s.is_complex() or s.dtype == torch.bool:
            raise TypeError(f"docs must hold integer (long) token tensors; got {s.dtype}")
        windows.extend(s[i : i + length] for i in range(0, s.numel() - length + 1, length))
    if len(windows) < n:
        raise ValueError(f"docs hold only {len(windows)} non-overlapping passages of {length} tokens; asked for {n}")
    g = torch.Generator().manual_seed(seed)
    pick = torch.randperm(len(windows), generator=g)[:n]
    return torch.stack([windows[int(i)] for i in pick]).long()


def inject_members(
    model: nn.Module,
    member_ids: torch.Tensor,
    train_tokens: torch.Tensor,
    exposures: int,
    *,
    members_per_step: int = 8,
    general_per_step: int = 8,
    lr: float = 1e-3,
    weight_decay: float = 0.0,
    seed: int = 0,
) -> dict:
    """Continue training ``model`` so that every member passage is seen exactly ``exposures`` times.

    Each step mixes ``general_per_step`` random windows of ``train_tokens`` (same length as the
    passages) with ``members_per_step`` member passages, taken in ``exposures`` shuffled epochs,
    under AdamW at a constant learning rate (a fresh optimiser, as in continued pre-training).

    Parameters
    ----------
    model : nn.Module
        Causal LM, trained in place on its own device and left in eval mode.
    member_ids : (N, L) long tensor
        Member passages.
    train_tokens : (n,) long tensor
        The general training stream the model was pre-trained on.
    exposures : int >= 1
        E, times each member is seen.
    members_per_step, general_per_step : int
    lr, weight_decay : float
    seed : int
        Seeds the epoch shuffles and the general windows.

    Returns
    -------
    dict with ``steps`` and ``loss`` (per step, nats/token).
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module; got {type(model).__name__}")
    if not isinstance(member_ids, torch.Tensor):
        raise TypeError(f"member_ids must be an (N >= 1, L >= 2) long tensor; got {type(member_ids).__name__}")
    # N = 0 would run zero steps and return as if the members had been injected
    if member_ids.dim() != 2 or member_ids.shape[0] < 1 or member_ids.shape[1] < 2:
        raise ValueError(f"member_ids must be an (N >= 1, L >= 2) long tensor; got shape {tuple(member_ids.shape)}")
    if member_ids.is_floating_point() or member_ids.is_complex() or member_ids.dtype == torch.bool:
        raise TypeError(f"member_ids must be an integer (long) tensor of token ids; got {member_ids.dtype}")
    if not _is_int(exposures) or exposures < 1:
        raise ValueError(f"exposures must be a positive int; got {exposures!r}")
    for name, v in (("members_per_step", members_per_step), ("general_per_step", general_per_step)):
        if not _is_int(v) or v < 0:
            raise ValueError(f"{name} must be a non-negative int; got {v!r}")
    if not _is_int(seed):
        raise ValueError(f"seed must be an int; got {seed!r}")
    exposures, members_per_step, general_per_step = int(exposures), int(members_per_step), int(general_per_step)
    seed = int(seed)
    if members_per_step < 1:
        raise ValueError(f"members_per_step must be >= 1; got {members_per_step}")
    L = member_ids.shape[1]
    try:
        train_tokens = _check_stream(train_tokens, L)
    except (TypeError, ValueError) as exc:
        # the shared check calls the stream "tokens"; say which argument of this function it was
        raise type(exc)(f"train_tokens: {exc}") from None
    param = next(model.parameters(), None)
    if param is None:  # next() alone raised a bare StopIteration
        raise ValueError(f"model must have parameters to train; {type(model).__name__} has none")
    device = param.device
    g = torch.Generator().manual_seed(seed)
    order = torch.cat([torch.randperm(len(member_ids), generator=g) for _ in range(exposures)])
    steps = math.ceil(len(order) / members_per_step)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=weight_decay)
    offsets = torch.arange(L)
    losses = []
    model.train()
    for step in progress(range(steps), desc="inject", total=steps):
        mem = member_ids[order[step * members_per_step : (step + 1) * members_per_step]]
        starts = torch.randint(0, train_tokens.numel() - L + 1, (general_per_step,), generator=g)
        gen = train_tokens[starts[:, None] + offsets]
        batch = torch.cat([gen, mem.long()]).to(device)
        out = model(batch[:, :-1])
        logits = out.logits if hasattr(out, "logits") else out
        # fp32 at least (bf16/fp16 losses are too coarse); a float64 model keeps float64
        logits = logits.to(compute_dtype(logits))
        loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))
        if not torch.isfinite(loss):
            raise FloatingPointError(f"loss became {loss.item()} at injection step {step}")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    log.info("injected %d members x %d exposures in %d steps", len(member_ids), exposures, steps)
    return {"steps": steps, "loss": losses}
