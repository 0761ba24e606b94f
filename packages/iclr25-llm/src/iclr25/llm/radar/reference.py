"""Plain-torch reference of Radar's hot path: the random-feature map, segment scoring and the
exact attention over a selected subset of cached tokens (the spec the fast paths are tested on).
"""

from __future__ import annotations

import math

import torch

from iclr25.core.device import compute_dtype

__all__ = [
    "feature_logits",
    "feature_map",
    "gqa_segment_scores",
    "masked_attention",
    "segment_mass",
    "segment_scores",
]


def feature_logits(x: torch.Tensor, omega: torch.Tensor, *, head_dim: int | None = None) -> torch.Tensor:
    """Exponents of the random features: ``[Ωᵀx̃ − ‖x̃‖²/2, −Ωᵀx̃ − ‖x̃‖²/2]``, x̃ = x·d^{-1/4}.

    Parameters
    ----------
    x : (..., m) tensor
    omega : (m, D) tensor
    head_dim : int, optional
        d of the 1/√d attention scaling; defaults to ``m``.

    Returns
    -------
    (..., 2D) fp32 tensor (fp64 for fp64 input)
    """
    dtype = compute_dtype(x)
    d = x.shape[-1] if head_dim is None else head_dim
    xt = x.to(dtype) * d**-0.25
    u = xt @ omega.to(dtype)
    half = 0.5 * (xt * xt).sum(-1, keepdim=True)
    if torch.is_grad_enabled() and (u.requires_grad or half.requires_grad):
        return torch.cat([u - half, -u - half], dim=-1)  # differentiable form
    # written into one preallocated buffer: this runs over every cached key (t × 2D entries), so
    # the temporaries of ``cat([u - half, -u - half])`` cost more than the matmul itself
    n_feat = u.shape[-1]
    out = torch.empty(*u.shape[:-1], 2 * n_feat, dtype=dtype, device=u.device)
    torch.sub(u, half, out=out[..., :n_feat])
    torch.sub(u.neg_(), half, out=out[..., n_feat:])
    return out


def feature_map(
    x: torch.Tensor, omega: torch.Tensor, *, head_dim: int | None = None, shift: torch.Tensor | float | None = None
) -> torch.Tensor:
    """Positive antithetic random features of the softmax kernel (paper §3, "hyperbolic" features).

    φ(x) = (2D)^{-1/2} [exp(Ωᵀx̃ − ‖x̃‖²/2 − s), exp(−Ωᵀx̃ − ‖x̃‖²/2 − s)] with x̃ = x·d^{-1/4}, so that
    E_Ω[φ(q)ᵀφ(k)] = exp(qᵀk/√d) when s = 0.

    Parameters
    ----------
    x : (..., m) tensor
        Queries or keys (after RoPE); computed in fp32 (fp64 is kept).
    omega : (m, D) tensor
        Gaussian projections Ω, N(0, 1) entries.
    head_dim : int, optional
        d of the 1/√d attention scaling; defaults to ``m``.
    shift : tensor broadcastable to ``(..., 1)`` or float or None
        Stabilising constant s subtracted inside the exponentials. None means the max over the
        last axis of each row (a per-row constant, so rankings of φ(q)ᵀr over segments are kept).

    Returns
    -------
    (..., 2D) tensor
        fp32 (or fp64 for fp64 input) features.
    """
    a = feature_logits(x, omega, head_dim=head_dim)
    if shift is None:
        a = a - a.amax(-1, keepdim=True)
    elif isinstance(shift, torch.Tensor):
        a = a - shift.to(a.dtype)
    elif shift:
        a = a - shift
    return torch.exp(a) / math.sqrt(a.shape[-1])


def segment_scores(phi_q: torch.Tensor, summaries: torch.Tensor) -> torch.Tensor:
    """Estimated per-segment attention mass φ(q)ᵀr_s.

    Parameters
    ----------
    phi_q : (B, H, Q, 2D) tensor
    summaries : (B, H, S, 2D) tensor
        Mean feature of each segment's keys.

    Returns
    -------
    (B, H, Q, S) tensor
    """
    return phi_q @ summaries.transpose(-1, -2)


def gqa_segment_scores(
    queries: torch.Tensor, omega: torch.Tensor, summaries: torch.Tensor, head_dim: int
) -> torch.Tensor:
    """Segment scores φ(q)ᵀr_s of every query head against its KV head's summaries (the spec of
    the fused Triton kernel).

    Parameters
    ----------
    queries : (B, Hq, Q, m) tensor
    omega : (m, D) tensor
    summaries : (B, Hkv, S, 2D) tensor; Hq a multiple of Hkv (a GQA group shares its summaries)
    head_dim : int
        d of the 1/√d attention scaling.

    Returns
    -------
    (B, Hq, Q, S) tensor (fp32, or fp64 for fp64 input); φ(q) carries the per-row max-shift.
    """
    phi_q = feature_map(queries, omega, head_dim=head_dim)
    rep = queries.shape[1] // summaries.shape[1]
    summ = summaries.repeat_interleave(rep, 1) if rep > 1 else summaries
    return segment_scores(phi_q, summ.to(phi_q.dtype))


def segment_mass(q: torch.Tensor, keys: torch.Tensor, c: int, n_seg: int) -> torch.Tensor:
    """Exact mean of exp(qᵀk/√d − max) per segment (the oracle's score; same scale for all segments).

    Parameters
    ----------
    q : (B, H, Q, d) tensor
    keys : (B, H, t, d) tensor with t >= n_seg·c
    c, n_seg : int
        Segment length and number of segments.

    Returns
    -------
    (B, H, Q, n_seg) tensor in :func:`iclr25.core.device.compute_dtype` (fp32, or fp64 for fp64 input)
    """
    dt = compute_dtype(q, keys)
    s = (q.to(dt) @ keys[:, :, : n_seg * c].to(dt).transpose(-1, -2)) / math.sqrt(q.shape[-1])
    w = torch.exp(s - s.amax(-1, keepdim=True))
    return w.unflatten(-1, (n_seg, c)).mean(-1)


def masked_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Exact softmax attention of each query over the cached tokens where ``mask`` is True.

    Parameters
    ----------
    q : (B, Hq, Q, d) tensor
    k, v : (B, Hkv, t, d) tensors; Hq is a multiple of Hkv (GQA)
    mask : (B, Hkv or Hq, Q, t) bool tensor

    Returns
    -------
    (B, Hq, Q, d) tensor in ``q``'s dtype (softmax in :func:`iclr25.core.device.compute_dtype`: fp32, fp64 for
    fp64 input)
    """
    rep = q.shape[1] // k.shape[1]
    kk = k.repeat_interleave(rep, 1) if rep > 1 else k
    vv = v.repeat_interleave(rep, 1) if rep > 1 else v
    if mask.shape[1] != q.shape[1]:
        mask = mask.repeat_interleave(rep, 1)
    dt = compute_dtype(q, k, v)
    s = (q.to(dt) @ kk.to(dt).transpose(-1, -2)) / math.sqrt(q.shape[-1])
    s = s.masked_fill(~mask, float("-inf"))
    p = torch.softmax(s, dim=-1)
    return (p @ vv.to(dt)).to(q.dtype)
