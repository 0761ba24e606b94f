"""Plain-torch Markov sampler driven by pre-drawn uniforms: the spec the Triton kernel must match.

Given uniforms ``u`` of shape ``(B, L)`` the sequence is

- ``x[:, 0] = 1`` iff ``u[:, 0] < init_one`` (probability of starting in state 1);
- ``x[:, t] = (u[:, t] < p)`` when ``x[:, t-1] == 0``  (a 0 -> 1 switch with probability p);
- ``x[:, t] = (u[:, t] >= q)`` when ``x[:, t-1] == 1`` (a 1 -> 0 switch with probability q).

Every comparison happens in the dtype of ``u`` so both backends make identical decisions.
"""

from __future__ import annotations

import torch

__all__ = ["markov_sample_reference", "markov_sample_scan"]


def markov_sample_reference(uniforms: torch.Tensor, p: float, q: float, init_one: float) -> torch.Tensor:
    """Turn uniforms into binary Markov sequences with a loop over time.

    Parameters
    ----------
    uniforms:
        ``(B, L)`` floating tensor with values in [0, 1).
    p, q:
        Switching probabilities P(0 -> 1) and P(1 -> 0).
    init_one:
        Probability that the first symbol is 1.

    Returns
    -------
    ``(B, L)`` int64 tensor with values in {0, 1}, on the device of ``uniforms``.
    """
    u = uniforms
    out = torch.empty(u.shape, dtype=torch.long, device=u.device)
    prev = u[:, 0] < init_one
    out[:, 0] = prev
    for t in range(1, u.shape[1]):
        prev = torch.where(prev, u[:, t] >= q, u[:, t] < p)
        out[:, t] = prev
    return out


def markov_sample_scan(uniforms: torch.Tensor, p: float, q: float, init_one: float) -> torch.Tensor:
    """Loop-free twin of :func:`markov_sample_reference` (identical output, a few whole-tensor ops).

    Each step applies one of four maps to the previous bit, decided by ``u_t`` alone: constant 0,
    constant 1, identity or flip. So ``x_t`` is the value of the last constant map at or before t
    (the first symbol counts as one) XOR the parity of the flips since then.

    Parameters
    ----------
    uniforms:
        ``(B, L)`` floating tensor with values in [0, 1).
    p, q, init_one:
        As in :func:`markov_sample_reference`; also accepted per row, as ``(B, 1)`` tensors for p and
        q and a ``(B,)`` tensor for ``init_one`` in the dtype of ``uniforms`` (how
        :func:`~iclr25.theory.markov_transformer.train_sweep` samples all runs at once).

    Returns
    -------
    ``(B, L)`` int64 tensor with values in {0, 1}.
    """
    u = uniforms
    from_zero = u < p  # f_t(0)
    from_one = u >= q  # f_t(1)
    from_zero[:, 0] = u[:, 0] < init_one
    from_one[:, 0] = from_zero[:, 0]  # the first symbol is a constant map
    const = from_zero == from_one
    flip = from_zero & ~from_one
    steps = torch.arange(u.shape[1], device=u.device).expand_as(u)
    last_const = torch.where(const, steps, torch.zeros_like(steps)).cummax(dim=1).values
    flips = flip.long().cumsum(dim=1)
    parity = (flips - flips.gather(1, last_const)) & 1
    return from_zero.gather(1, last_const).long() ^ parity
