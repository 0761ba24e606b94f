"""Triton kernels for LTC's hot paths, each checked against :mod:`.reference`.

* ``e8_quantize_triton``: one program per block of vectors decodes both E8 cosets (D8 and D8 + ½)
  in registers, including the D8 parity fix and the equivariant tie-break, and keeps the nearest.
* ``mixture_mc_log_likelihood_triton``: the joint MC cell log-probability for a per-channel
  Gaussian mixture, streaming over the ``N`` Voronoi samples with an online logsumexp so the
  ``(B, N, n)`` tensor is never materialized, with a fused backward (``_MixtureLL``, an
  ``autograd.Function``): it saves only the inputs and the ``(B,)`` output, recomputes every
  per-sample quantity in registers and returns gradients for ``y_hat`` and the mixture
  parameters ``logw, mu, log_scale``.

Backward math (``w_bick = g_b · a_bi · r_bick`` with ``g`` the upstream gradient,
``a_bi = exp(s_bi − lse_b)`` the posterior over MC samples, ``r_bick`` the posterior over
components and ``z = (ŷ + u − μ)/σ``)::

    ∂/∂ŷ_bc  = −Σ_{i,k} w z / σ        ∂/∂logw_ck = Σ_{b,i} w
    ∂/∂μ_ck  =  Σ_{b,i} w z / σ        ∂/∂logσ_ck = Σ_{b,i} w (z² − 1)

Parameter gradients are per-program partial sums (one ``(n, K)`` slab per block of rows) that a
final ``torch.sum`` reduces: a fixed summation order, so the backward is deterministic (no atomics).
The Voronoi samples ``u`` get no gradient (they are constants of the estimator; the dispatcher
refuses the fused path when ``u`` requires grad). The backward is not itself differentiable: it
raises under ``create_graph=True`` rather than return gradients without a graph.

Import guarded: without Triton this module defines nothing callable. Set ``TRITON_INTERPRET=1``
before importing it to run the kernels on CPU tensors (slow; used by the tests).
"""

from __future__ import annotations

import math

import torch

from iclr25.core.triton import triton_available

__all__ = ["e8_quantize_triton", "mixture_mc_log_likelihood_triton"]

_BLOCK_B_FWD = 32
_BLOCK_B_BWD = 32

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
            # every component -inf (e.g. z * z overflowing): subtract 0, not -inf, so lpc = -inf, not NaN
            cm_safe = tl.where(cm == -float("inf"), 0.0, cm)
            cs = tl.zeros((BLOCK_B, BLOCK_C), tl.float32)
            for k in tl.static_range(K):
                lw = tl.load(logw_ptr + ch * K + k, mask=cmask, other=0.0)
                mu = tl.load(mu_ptr + ch * K + k, mask=cmask, other=0.0)
                ls = tl.load(logs_ptr + ch * K + k, mask=cmask, other=0.0)
                z = (t - mu[None, :]) * tl.exp(-ls)[None, :]
                comp = lw[None, :] - ls[None, :] - 0.5 * z * z - 0.9189385332046727
                cs += tl.exp(comp - cm_safe)
            lpc = tl.where(cmask[None, :], cm + tl.log(cs), 0.0)
            s = tl.sum(lpc, axis=1)
            m_new = tl.maximum(m, s)
            m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)  # as torch.logsumexp: all -inf gives -inf
            acc = acc * tl.exp(m - m_safe) + tl.exp(s - m_safe)
            m = m_new
        tl.store(out_ptr + rows, m + tl.log(acc) - log_n, mask=rmask)

    @triton.jit
    def _mixture_ll_bwd_kernel(
        y_ptr, u_ptr, logw_ptr, mu_ptr, logs_ptr, out_ptr, gout_ptr,
        dy_ptr, dlw_ptr, dmu_ptr, dls_ptr, B, N, n, log_n,
        K: tl.constexpr, BLOCK_B: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_K: tl.constexpr,
    ):  # fmt: skip
        # Tiles are (rows, channels, components); padded components get comp = -inf (zero posterior),
        # padded channels and rows get zero weight, so they add nothing to any gradient.
        pid = tl.program_id(0)
        rows = pid * BLOCK_B + tl.arange(0, BLOCK_B)
        ch = tl.arange(0, BLOCK_C)
        ks = tl.arange(0, BLOCK_K)
        rmask = rows < B
        cmask = ch < n
        kmask = ks < K
        pmask = cmask[:, None] & kmask[None, :]
        poff = ch[:, None] * K + ks[None, :]
        lw = tl.load(logw_ptr + poff, mask=pmask, other=0.0)
        mu = tl.load(mu_ptr + poff, mask=pmask, other=0.0)
        ls = tl.load(logs_ptr + poff, mask=pmask, other=0.0)
        inv_s = tl.exp(-ls)
        base = lw - ls - 0.9189385332046727
        y = tl.load(y_ptr + rows[:, None] * n + ch[None, :], mask=rmask[:, None] & cmask[None, :], other=0.0)
        lse = tl.load(out_ptr + rows, mask=rmask, other=0.0) + log_n
        g = tl.load(gout_ptr + rows, mask=rmask, other=0.0)
        kvalid = kmask[None, None, :]
        cvalid = cmask[None, :, None]
        acc_w = tl.zeros((BLOCK_B, BLOCK_C, BLOCK_K), tl.float32)
        acc_wz = tl.zeros((BLOCK_B, BLOCK_C, BLOCK_K), tl.float32)
        acc_wzz = tl.zeros((BLOCK_B, BLOCK_C, BLOCK_K), tl.float32)
        for i in range(0, N):
            u = tl.load(u_ptr + i * n + ch, mask=cmask, other=0.0)
            t = y + u[None, :]
            z = (t[:, :, None] - mu[None, :, :]) * inv_s[None, :, :]
            comp = tl.where(kvalid, base[None, :, :] - 0.5 * z * z, -float("inf"))
            cm = tl.max(comp, axis=2)
            e = tl.exp(comp - cm[:, :, None])
            cs = tl.sum(e, axis=2)
            lpc = tl.where(cmask[None, :], cm + tl.log(cs), 0.0)
            s = tl.sum(lpc, axis=1)
            # where, not a product: exp(s - lse) of a padded row may overflow, and 0 * inf is NaN
            a = tl.where(rmask, g * tl.exp(s - lse), 0.0)
            w = tl.where(cvalid, a[:, None, None] * (e / cs[:, :, None]), 0.0)
            wz = w * z
            acc_w += w
            acc_wz += wz
            acc_wzz += wz * z
        dy = -tl.sum(acc_wz * inv_s[None, :, :], axis=2)
        tl.store(dy_ptr + rows[:, None] * n + ch[None, :], dy, mask=rmask[:, None] & cmask[None, :])
        sw = tl.sum(acc_w, axis=0)
        slab = pid * n * K + poff
        tl.store(dlw_ptr + slab, sw, mask=pmask)
        tl.store(dmu_ptr + slab, tl.sum(acc_wz, axis=0) * inv_s, mask=pmask)
        tl.store(dls_ptr + slab, tl.sum(acc_wzz, axis=0) - sw, mask=pmask)


def _generic_w(device: torch.device) -> torch.Tensor:
    return torch.tensor([math.sqrt(2.0 + k) + k * math.pi for k in range(8)], device=device, dtype=torch.float32)


def e8_quantize_triton(y: torch.Tensor, block: int = 64) -> torch.Tensor:
    """Nearest E8 point with the Triton kernel, ``(B, 8) float32 -> (B, 8)``."""
    if y.dim() != 2 or y.shape[1] != 8 or y.dtype != torch.float32:
        raise ValueError(f"y must be a (B, 8) float32 tensor, got {tuple(y.shape)} {y.dtype}")
    if isinstance(block, bool) or not isinstance(block, int) or block < 1 or block & (block - 1):
        raise ValueError(f"block must be a positive power of 2 (rows per program), got {block!r}")
    y = y.contiguous()
    out = torch.empty_like(y)
    if y.shape[0]:
        grid = (triton.cdiv(y.shape[0], block),)
        _e8_kernel[grid](y, out, _generic_w(y.device), y.shape[0], torch.finfo(torch.float32).eps, BLOCK=block)
    return out


def _mixture_ll_forward(y, u, logw, mu, logs) -> torch.Tensor:
    B, n = y.shape
    out = torch.empty(B, device=y.device, dtype=torch.float32)
    if B:
        grid = (triton.cdiv(B, _BLOCK_B_FWD),)
        _mixture_ll_kernel[grid](
            y, u, logw, mu, logs, out, B, u.shape[0], n, math.log(u.shape[0]),
            K=logw.shape[1], BLOCK_B=_BLOCK_B_FWD, BLOCK_C=triton.next_power_of_2(n),
        )  # fmt: skip
    return out


def _mixture_ll_backward(y, u, logw, mu, logs, out, grad_out):
    B, n = y.shape
    K = logw.shape[1]
    programs = triton.cdiv(B, _BLOCK_B_BWD)
    dy = torch.zeros_like(y)
    parts = torch.zeros(3, max(programs, 1), n, K, device=y.device, dtype=torch.float32)
    if B:
        _mixture_ll_bwd_kernel[(programs,)](
            y, u, logw, mu, logs, out, grad_out, dy, parts[0], parts[1], parts[2],
            B, u.shape[0], n, math.log(u.shape[0]),
            K=K, BLOCK_B=_BLOCK_B_BWD, BLOCK_C=triton.next_power_of_2(n), BLOCK_K=triton.next_power_of_2(K),
        )  # fmt: skip
    dlw, dmu, dls = parts.sum(1)  # the final, fixed-order reduction of the per-program partials
    return dy, dlw, dmu, dls


class _MixtureLL(torch.autograd.Function):
    """Fused forward and backward; saves the inputs and the ``(B,)`` output, nothing of size ``B·N``."""

    @staticmethod
    def forward(ctx, y, u, logw, mu, logs):
        args = [t.detach().float().contiguous() for t in (y, u, logw, mu, logs)]
        out = _mixture_ll_forward(*args)
        ctx.save_for_backward(*args, out)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        if torch.is_grad_enabled():  # create_graph=True: the kernel's gradients would silently carry no graph
            raise RuntimeError(
                "the fused Triton backward of the mixture MC log-likelihood is not differentiable "
                "(create_graph=True / double backward); use backend='reference'"
            )
        y, u, logw, mu, logs, out = ctx.saved_tensors
        need = ctx.needs_input_grad
        if not (need[0] or need[2] or need[3] or need[4]):
            return None, None, None, None, None
        dy, dlw, dmu, dls = _mixture_ll_backward(y, u, logw, mu, logs, out, grad_out.float().contiguous())
        return (
            dy if need[0] else None,
            None,
            dlw if need[2] else None,
            dmu if need[3] else None,
            dls if need[4] else None,
        )


def mixture_mc_log_likelihood_triton(
    y_hat: torch.Tensor, u: torch.Tensor, logw: torch.Tensor, mu: torch.Tensor, log_scale: torch.Tensor
) -> torch.Tensor:
    """Fused joint MC log-likelihood, ``(B,)``; same contract as the reference.

    Differentiable in ``y_hat``, ``logw``, ``mu`` and ``log_scale`` through a fused Triton backward
    (``u`` is treated as a constant). Memory is ``O(B·n + n·K·B/32)`` instead of the reference's
    ``O(B·N·n·K)`` saved activations.
    """
    bad = sorted({str(t.dtype) for t in (y_hat, u, logw, mu, log_scale)} - {"torch.float32"})
    if bad:  # the kernel computes in float32: float64 inputs would come back rounded, as float32
        raise ValueError(f"the fused kernel takes float32 inputs (the reference takes any), got {bad}")
    if u.requires_grad and torch.is_grad_enabled():
        raise ValueError("u (the Voronoi samples) must not require grad: the fused backward treats it as a constant")
    return _MixtureLL.apply(y_hat, u, logw, mu, log_scale)
