"""Plain-torch references (the spec) for the hot paths that have Triton kernels in :mod:`.kernels`.

* :func:`e8_quantize_reference`: nearest point of E8 = D8 ∪ (D8 + ½) (E8 in this basis already
  has unit volume, so no rescaling).
* :func:`mixture_mc_log_likelihood_reference`: the joint Monte-Carlo cell log-probability
  ``log P(ŷ_b) = logsumexp_i Σ_c log p_c(ŷ_bc + u_ic) − log N`` (+ ``log Vol(V) = 0``) for a
  per-channel Gaussian-mixture density; it materializes the ``(B, N, n)`` tensor the kernel avoids.
"""

from __future__ import annotations

import math

import torch

from .lattices import coset_decode, decode_d

__all__ = ["e8_quantize_reference", "mixture_mc_log_likelihood_reference"]


def e8_quantize_reference(y: torch.Tensor) -> torch.Tensor:
    """Nearest E8 point, ``(B, 8) -> (B, 8)`` (no validation)."""
    half = torch.full((1, 8), 0.5, device=y.device, dtype=y.dtype)
    shifts = torch.cat([torch.zeros_like(half), half])
    return coset_decode(y, shifts, decode_d)


def mixture_mc_log_likelihood_reference(
    y_hat: torch.Tensor, u: torch.Tensor, logw: torch.Tensor, mu: torch.Tensor, log_scale: torch.Tensor
) -> torch.Tensor:
    """Joint MC cell log-probability under a per-channel Gaussian mixture.

    Parameters
    ----------
    y_hat:
        ``(B, n)`` lattice points.
    u:
        ``(N, n)`` samples uniform on the unit-volume Voronoi cell.
    logw, mu, log_scale:
        ``(n, K)`` log mixture weights (normalized), means and log standard deviations.

    Returns
    -------
    torch.Tensor
        ``(B,)`` natural-log cell probabilities.
    """
    t = y_hat.unsqueeze(1) + u.unsqueeze(0)  # (B, N, n)
    z = (t.unsqueeze(-1) - mu) * torch.exp(-log_scale)
    comp = logw - log_scale - 0.5 * z * z - 0.5 * math.log(2 * math.pi)
    log_p = torch.logsumexp(comp, -1).sum(-1)  # (B, N): product over channels inside the mean
    return torch.logsumexp(log_p, -1) - math.log(u.shape[0])
