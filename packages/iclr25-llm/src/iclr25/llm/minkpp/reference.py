"""Plain-torch per-token statistics: the specification the Triton kernel is tested against.

For logits ``z`` over the vocabulary at one position and the observed next token ``x``:

* ``ell = log p(x)`` with ``p = softmax(z)``,
* ``mu = Σ_v p(v) log p(v)`` (the expected log-probability, i.e. minus the entropy),
* ``sigma² = Σ_v p(v) (log p(v) − mu)²``.

Everything is computed in float32 at least (``mu`` and ``sigma²`` are sums of products of tiny
numbers, which bf16/fp16 get badly wrong); float64 logits stay float64. Logits equal to ``-inf`` (masked
vocabulary entries) contribute nothing, rather than the ``0 · (−inf) = NaN`` of a naive product.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from iclr25.core.device import compute_dtype

__all__ = ["token_stats_reference"]


def token_stats_reference(
    logits: torch.Tensor, targets: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Token log-probability, mean and variance of the next-token log-probability distribution.

    Parameters
    ----------
    logits : (..., V) float tensor
        Next-token logits; ``logits[..., :]`` predicts ``targets[...]``.
    targets : (...) integer tensor
        Observed next tokens, in ``[0, V)``.

    Returns
    -------
    ell, mu, var : (...) float32 tensors (float64 for float64 logits)
        ``log p(target)``, ``Σ p log p`` and ``Σ p (log p − mu)²`` (the variance, not its root).
    """
    logp = F.log_softmax(logits.to(compute_dtype(logits)), dim=-1)
    p = logp.exp()
    finite = torch.isfinite(logp)
    plogp = torch.where(finite, p * logp, torch.zeros_like(p))
    mu = plogp.sum(-1)
    dev = torch.where(finite, logp - mu.unsqueeze(-1), torch.zeros_like(p))
    var = (p * dev * dev).sum(-1)
    ell = logp.gather(-1, targets.long().unsqueeze(-1)).squeeze(-1)
    return ell, mu, var
