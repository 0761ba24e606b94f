"""Triton fused recurrent step of the constrained network (inference): spike-driven product + ALIF update.

One program per (``BLOCK_B`` batch rows, ``BLOCK_N`` postsynaptic neurons) walks the presynaptic
axis in chunks of ``BLOCK_K``; a chunk whose previous spikes are all zero in those rows is skipped
before its weight tile is read (spike-driven), otherwise a full-fp32 ``tl.dot`` adds it. The ALIF update
(``b``, threshold, reset by the previous spike, strict ``>`` firing) runs on the accumulated current
in registers, replacing the dense ``s @ W`` plus ~8 elementwise launches of the torch step.

Forward only: there is no backward kernel, so the network uses it when no gradient is needed
(evaluation, selectivity, deprivation); training keeps the torch step. Import guarded: without
Triton this module defines nothing callable. ``TRITON_INTERPRET=1`` runs it on CPU tensors (tests).
"""

from __future__ import annotations

import torch

from iclr25.core.triton import triton_available

__all__ = ["recurrent_alif_step_triton"]

if triton_available():
    import triton
    import triton.language as tl

    @triton.jit
    def _recurrent_alif_step_kernel(
        s_ptr, w_ptr, drive_ptr, v_ptr, b_ptr, alpha_ptr, rho_ptr,
        s_out_ptr, v_out_ptr, b_out_ptr,
        batch, n, b0, beta, dt,
        BLOCK_B: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    ):  # fmt: skip
        rows = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
        cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
        rmask = rows < batch
        cmask = cols < n
        row_base = rows.to(tl.int64)[:, None] * n
        acc = tl.zeros([BLOCK_B, BLOCK_N], dtype=tl.float32)
        for k0 in range(0, n, BLOCK_K):
            ks = k0 + tl.arange(0, BLOCK_K)
            kmask = ks < n
            s_pre = tl.load(s_ptr + row_base + ks[None, :], mask=rmask[:, None] & kmask[None, :], other=0.0)
            # no presynaptic spike in this (rows x chunk) tile: skip reading its weights
            if tl.max(tl.max(tl.abs(s_pre), axis=1), axis=0) > 0:
                w = tl.load(
                    w_ptr + ks.to(tl.int64)[:, None] * n + cols[None, :],
                    mask=kmask[:, None] & cmask[None, :],
                    other=0.0,
                )
                # full fp32 (no TF32): spikes must match the float32 torch step exactly
                acc += tl.dot(s_pre, w, input_precision="ieee")
        io = row_base + cols[None, :]
        m2 = rmask[:, None] & cmask[None, :]
        cur = acc + tl.load(drive_ptr + io, mask=m2, other=0.0)
        s = tl.load(s_ptr + io, mask=m2, other=0.0)
        v = tl.load(v_ptr + io, mask=m2, other=0.0)
        b = tl.load(b_ptr + io, mask=m2, other=0.0)
        alpha = tl.load(alpha_ptr + cols, mask=cmask, other=0.0)[None, :]
        rho = tl.load(rho_ptr + cols, mask=cmask, other=0.0)[None, :]
        b = rho * b + (1.0 - rho) * s
        big_b = b0 + beta * b
        v = v * alpha + (1.0 - alpha) * cur - big_b * s * dt
        s_new = tl.where(v - big_b > 0, 1.0, 0.0)
        tl.store(s_out_ptr + io, s_new, mask=m2)
        tl.store(v_out_ptr + io, v, mask=m2)
        tl.store(b_out_ptr + io, b, mask=m2)


def recurrent_alif_step_triton(
    s: torch.Tensor,
    w: torch.Tensor,
    drive: torch.Tensor,
    v: torch.Tensor,
    b: torch.Tensor,
    alpha: torch.Tensor,
    rho: torch.Tensor,
    b0: float,
    beta: float,
    dt: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One synchronous step ``I = drive + s @ w``, then ALIF; returns ``(s_new, v_new, b_new)`` ``(B, n)``.

    Parameters
    ----------
    s, drive, v, b:
        ``(B, n)`` float32 previous spikes, input current, membrane and adaptation.
    w:
        ``(n, n)`` float32 effective weights (row = pre).
    alpha, rho:
        ``(n,)`` decay factors ``exp(-dt/τ_m)``, ``exp(-dt/τ_adp)``.
    b0, beta, dt:
        ALIF base threshold, adaptation strength and time step (as `iclr25.neuro.spiking.reference.alif_update`).
    """
    batch, n = s.shape
    s, w, drive, v, b = (t.contiguous() for t in (s, w, drive, v, b))
    alpha, rho = alpha.contiguous(), rho.contiguous()
    s_out, v_out, b_out = torch.empty_like(s), torch.empty_like(v), torch.empty_like(b)
    if batch == 0 or n == 0:
        return s_out, v_out, b_out
    block_b, block_n, block_k = 16, 64, 32
    grid = (triton.cdiv(batch, block_b), triton.cdiv(n, block_n))
    _recurrent_alif_step_kernel[grid](
        s, w, drive, v, b, alpha, rho, s_out, v_out, b_out,
        batch, n, float(b0), float(beta), float(dt),
        BLOCK_B=block_b, BLOCK_N=block_n, BLOCK_K=block_k,
    )  # fmt: skip
    return s_out, v_out, b_out
