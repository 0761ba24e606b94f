"""Triton kernels for LTC's hot paths, each checked against :mod:`.reference`.

* ``e8_quantize_triton``: one program per block of vectors decodes both E8 cosets (D8 and D8 + ½)
  in registers, including the D8 parity fix and the equivariant tie-break, and keeps the nearest.
* ``mixture_mc_log_likelihood_triton``: the joint MC cell log-probability for a per-channel
  Gaussian mixture, streaming over the ``N`` Voronoi samples with an online logsumexp so the
  ``(B, N, n)`` tensor is never materialized. Forward only (evaluation / bitstream building).

Import guarded: without Triton this module defines nothing callable. Set ``TRITON_INTERPRET=1``
before importing it to run the kernels on CPU tensors (slow; used by the tests).
"""

from __future__ import annotations

import math

import torch

from iclr25.core.triton import triton_available

__all__ = ["e8_quantize_triton", "mixture_mc_log_likelihood_triton"]

if triton_available():
    import triton
    import triton.language as tl

    @triton.jit
    def _d8_coset(y, c, cols):
        # Nearest point of c + D8 for each row of y (BLOCK, 8): floor(x + 1/2) then the parity fix.
        t = y - c
        f = tl.floor(t + 0.5)
        err = t - f
        parity = tl.sum(f, axis=1) - 2.0 * tl.floor(tl.sum(f, axis=1) * 0.5)
        mag = tl.abs(err)
        tol = 64.0 * 1.1920928955078125e-07 * (1.0 + tl.max(tl.abs(y - c), axis=1))
        near = tl.where(mag >= (tl.max(mag, axis=1) - tol)[:, None], 1.0, 0.0)
        k = tl.argmax(near, axis=1, tie_break_left=True)
        onehot = cols[None, :] == k[:, None]
        ek = tl.sum(tl.where(onehot, err, 0.0), axis=1)
        step = tl.where(ek >= 0, 1.0, -1.0)
        fix = tl.where(onehot & (parity[:, None] != 0), step[:, None], 0.0)
        return f + fix + c

    @triton.jit
    def _e8_kernel(y_ptr, out_ptr, w_ptr, B, eps, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        rows = pid * BLOCK + tl.arange(0, BLOCK)
        cols = tl.arange(0, 8)
        mask = rows[:, None] < B
        y = tl.load(y_ptr + rows[:, None] * 8 + cols[None, :], mask=mask, other=0.0)
        w = tl.load(w_ptr + cols)
        p0 = _d8_coset(y, 0.0, cols)
        p1 = _d8_coset(y, 0.5, cols)
        r0 = y - p0
        r1 = y - p1
        d0 = tl.sum(r0 * r0, axis=1)
        d1 = tl.sum(r1 * r1, axis=1)
        dmin = tl.minimum(d0, d1)
        tol = 16.0 * eps * (1.0 + dmin)
        k0 = tl.sum(r0 * w[None, :], axis=1)
        k1 = tl.sum(r1 * w[None, :], axis=1)
        tie0 = d0 <= dmin + tol
        tie1 = d1 <= dmin + tol
        take1 = tie1 & ((~tie0) | (k1 < k0))
        p = tl.where(take1[:, None], p1, p0)
        tl.store(out_ptr + rows[:, None] * 8 + cols[None, :], p, mask=mask)

    @triton.jit
    def _mixture_ll_kernel(
        y_ptr, u_ptr, logw_ptr, mu_ptr, logs_ptr, out_ptr, B, N, n, log_n,
        K: tl.constexpr, BLOCK_B: tl.constexpr, BLOCK_C: tl.constexpr,
    ):  # fmt: skip
        pid = tl.program_id(0)
        rows = pid * BLOCK_B + tl.arange(0, BLOCK_B)
        ch = tl.arange(0, BLOCK_C)
        rmask = rows < B
        cmask = ch < n
        y = tl.load(y_ptr + rows[:, None] * n + ch[None, :], mask=rmask[:, None] & cmask[None, :], other=0.0)
        m = tl.full((BLOCK_B,), -float("inf"), tl.float32)
        acc = tl.zeros((BLOCK_B,), tl.float32)
        for i in range(0, N):
            u = tl.load(u_ptr + i * n + ch, mask=cmask, other=0.0)
            t = y + u[None, :]
            # per-channel logsumexp over K components, two passes over the constexpr K
            cm = tl.full((BLOCK_B, BLOCK_C), -float("inf"), tl.float32)
            for k in tl.static_range(K):
                lw = tl.load(logw_ptr + ch * K + k, mask=cmask, other=0.0)
                mu = tl.load(mu_ptr + ch * K + k, mask=cmask, other=0.0)
                ls = tl.load(logs_ptr + ch * K + k, mask=cmask, other=0.0)
                z = (t - mu[None, :]) * tl.exp(-ls)[None, :]
                comp = lw[None, :] - ls[None, :] - 0.5 * z * z - 0.9189385332046727
                cm = tl.maximum(cm, comp)
            cs = tl.zeros((BLOCK_B, BLOCK_C), tl.float32)
            for k in tl.static_range(K):
                lw = tl.load(logw_ptr + ch * K + k, mask=cmask, other=0.0)
                mu = tl.load(mu_ptr + ch * K + k, mask=cmask, other=0.0)
                ls = tl.load(logs_ptr + ch * K + k, mask=cmask, other=0.0)
                z = (t - mu[None, :]) * tl.exp(-ls)[None, :]
                comp = lw[None, :] - ls[None, :] - 0.5 * z * z - 0.9189385332046727
                cs += tl.exp(comp - cm)
            lpc = tl.where(cmask[None, :], cm + tl.log(cs), 0.0)
            s = tl.sum(lpc, axis=1)
            m_new = tl.maximum(m, s)
            acc = acc * tl.exp(m - m_new) + tl.exp(s - m_new)
            m = m_new
        tl.store(out_ptr + rows, m + tl.log(acc) - log_n, mask=rmask)


def _generic_w(device: torch.device) -> torch.Tensor:
    return torch.tensor([math.sqrt(2.0 + k) + k * math.pi for k in range(8)], device=device, dtype=torch.float32)


def e8_quantize_triton(y: torch.Tensor, block: int = 64) -> torch.Tensor:
    """Nearest E8 point with the Triton kernel, ``(B, 8) float32 -> (B, 8)``."""
    if y.dim() != 2 or y.shape[1] != 8 or y.dtype != torch.float32:
        raise ValueError(f"y must be a (B, 8) float32 tensor, got {tuple(y.shape)} {y.dtype}")
    y = y.contiguous()
    out = torch.empty_like(y)
    if y.shape[0]:
        grid = (triton.cdiv(y.shape[0], block),)
        _e8_kernel[grid](y, out, _generic_w(y.device), y.shape[0], torch.finfo(torch.float32).eps, BLOCK=block)
    return out


def mixture_mc_log_likelihood_triton(
    y_hat: torch.Tensor, u: torch.Tensor, logw: torch.Tensor, mu: torch.Tensor, log_scale: torch.Tensor
) -> torch.Tensor:
    """Fused joint MC log-likelihood; same contract as the reference (forward only), ``(B,)``."""
    B, n = y_hat.shape
    K = logw.shape[1]
    out = torch.empty(B, device=y_hat.device, dtype=torch.float32)
    if B:
        block_b = 32
        args = [t.detach().float().contiguous() for t in (y_hat, u, logw, mu, log_scale)]
        grid = (triton.cdiv(B, block_b),)
        _mixture_ll_kernel[grid](
            *args, out, B, u.shape[0], n, math.log(u.shape[0]),
            K=K, BLOCK_B=block_b, BLOCK_C=triton.next_power_of_2(n),
        )  # fmt: skip
    return out
