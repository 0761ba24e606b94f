"""Triton kernel for the fused per-infoset QFR step (entropy regularizer).

Only imported when :func:`iclr25.core.triton.triton_available` is true. One program handles a
block of infoset rows; each row is loaded once, and the log-space step, masked row max, exp,
normalization and the KL projection onto ``{p >= gamma}`` happen in registers, matching
:func:`~iclr25.rl.efg_pg.reference.omd_step_reference` with ``regularizer="entropy"``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

__all__ = ["omd_step_triton"]


@triton.jit
def _omd_step_kernel(
    ref_ptr,
    g_ptr,
    div_ptr,
    nact_ptr,
    out_ptr,
    c_ptr,
    n_rows,
    n_cols,
    BLOCK_R: tl.constexpr,
    BLOCK_A: tl.constexpr,
):
    # eta, gamma, tiny in ref's dtype: a Python float argument reaches a GPU kernel as fp32
    eta = tl.load(c_ptr)
    gamma = tl.load(c_ptr + 1)
    tiny = tl.load(c_ptr + 2)
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.arange(0, BLOCK_A)
    row_ok = rows < n_rows
    nact = tl.load(nact_ptr + rows, mask=row_ok, other=1)
    # Legal columns are a prefix of each row (columns 0..|A(I)|-1), so the mask is a comparison.
    legal = row_ok[:, None] & (cols[None, :] < nact[:, None]) & (cols[None, :] < n_cols)
    offs = rows[:, None] * n_cols + cols[None, :]
    ref = tl.load(ref_ptr + offs, mask=legal, other=1.0)
    g = tl.load(g_ptr + offs, mask=legal, other=0.0)
    div = tl.load(div_ptr + rows, mask=row_ok, other=1.0)
    logits = (tl.log(tl.maximum(ref, tiny)) + eta * g) / div[:, None]
    logits = tl.where(legal, logits, float("-inf"))
    # rows past n_rows have no legal action: give them a finite max so -inf - m is -inf, not NaN
    m = tl.where(row_ok, tl.max(logits, axis=1), 0.0)
    e = tl.where(legal, tl.exp(logits - m[:, None]), 0.0)
    tot = tl.sum(e, axis=1)
    p = e / tl.where(tot > 0, tot, 1.0)[:, None]
    # KL projection onto {p >= gamma}: max(gamma, lam * p); growing the clamped set lowers lam,
    # so BLOCK_A rounds reach the fixed point (same rounds as the reference).
    clamped = legal & (p < gamma)
    lam = tl.sum(tl.where(legal, p, 0.0), axis=1) * 0.0 + 1.0
    for _ in tl.static_range(BLOCK_A):
        n_cl = tl.sum(clamped.to(p.dtype), axis=1)
        free_sum = tl.sum(tl.where(legal & (clamped == 0), p, 0.0), axis=1)
        lam = (1.0 - gamma * n_cl) / tl.where(free_sum > 0, free_sum, 1.0)
        clamped = legal & ((clamped != 0) | (lam[:, None] * p < gamma))
    p = tl.where(legal, tl.where(clamped, gamma, lam[:, None] * p), 0.0)
    tl.store(out_ptr + offs, p, mask=row_ok[:, None] & (cols[None, :] < n_cols))


def omd_step_triton(
    ref: torch.Tensor,
    g: torch.Tensor,
    divisor: torch.Tensor,
    mask: torch.Tensor,
    eta: float,
    gamma: float,
    regularizer: str = "entropy",
) -> torch.Tensor:
    """Triton twin of :func:`omd_step_reference` (entropy only); same shapes, ``ref``'s dtype."""
    # The reference broadcasts ref, g, mask and divisor[:, None]; the kernel indexes full (nI, A) rows.
    div2 = divisor[:, None]
    n_rows, n_cols = torch.broadcast_shapes(ref.shape, g.shape, mask.shape, div2.shape)
    ref_c = ref.expand(n_rows, n_cols).contiguous()
    g_c = g.to(ref.dtype).expand(n_rows, n_cols).contiguous()
    div_c = div2.to(ref.dtype).expand(n_rows, 1)[:, 0].contiguous()
    nact = mask.expand(n_rows, n_cols).sum(1).to(torch.int32).contiguous()
    out = torch.empty_like(ref_c)
    block_a = max(triton.next_power_of_2(n_cols), 2)
    block_r = 64
    # the reference's log floor
    tiny = torch.finfo(torch.float64).tiny if ref.dtype == torch.float64 else 1e-38
    consts = torch.tensor([float(eta), float(gamma), tiny], dtype=ref.dtype, device=ref.device)
    grid = (triton.cdiv(n_rows, block_r),)
    _omd_step_kernel[grid](ref_c, g_c, div_c, nact, out, consts, n_rows, n_cols, BLOCK_R=block_r, BLOCK_A=block_a)
    return out
