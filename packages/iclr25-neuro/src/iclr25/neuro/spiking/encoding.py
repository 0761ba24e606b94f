"""Bernoulli (rate) spike encoding, time-first."""

from __future__ import annotations

import torch

from ._checks import check_finite, check_float_tensor, check_int

__all__ = ["bernoulli_encode", "rate_encode"]


def bernoulli_encode(
    p: torch.Tensor, repeat: int = 1, *, time_dim: int = 0, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Repeat each firing probability ``repeat`` times along time and sample ``s ~ Bernoulli(p)``.

    This is RSNN_bfd's whisker-spike conversion (``dt`` repeats per sample).

    Parameters
    ----------
    p:
        ``(T, ...)`` float probabilities in ``[0, 1]`` (time along ``time_dim``).
    repeat:
        Copies of each time sample (≥ 1); the output has ``T·repeat`` steps.
    time_dim:
        The time dimension of ``p`` (and of the output).
    generator:
        Random generator for reproducible draws.

    Returns
    -------
    torch.Tensor
        0/1 spikes of ``p.dtype``, shape of ``p`` with ``T·repeat`` along ``time_dim``.
    """
    check_float_tensor("p", p)
    check_int("repeat", repeat, 1)
    if p.dim() < 1:
        raise ValueError("p must have a time dimension, got a 0-d tensor")
    if not -p.dim() <= time_dim < p.dim():
        raise ValueError(
            f"time_dim must be in [{-p.dim()}, {p.dim() - 1}] for p of shape {tuple(p.shape)}, got {time_dim}"
        )
    check_finite("p", p)
    if p.numel() and (bool((p < 0).any()) or bool((p > 1).any())):
        raise ValueError(f"p must lie in [0, 1], got values in [{p.min().item():g}, {p.max().item():g}]")
    probs = p.repeat_interleave(repeat, dim=time_dim) if repeat > 1 else p
    return torch.bernoulli(probs, generator=generator)


#: Alias: Poisson-like rate coding is Bernoulli sampling per time bin.
rate_encode = bernoulli_encode
