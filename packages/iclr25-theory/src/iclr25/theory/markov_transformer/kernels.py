"""Triton Markov sampler: one program per block of rows, a loop over time.

Only imported when :func:`iclr25.core.triton.triton_available` is true. The kernel reproduces
:func:`~iclr25.theory.markov_transformer.reference.markov_sample_reference` bit for bit: it makes
the same float32 comparisons against the same uniforms.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

__all__ = ["markov_sample_triton"]


@triton.jit
def _block_rows(block_id, BLOCK: tl.constexpr):
    # int64 from the program id on: rows * stride reaches 2**31 once B * L elements do, where int32
    # arithmetic would wrap to a negative offset
    return block_id.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)


@triton.jit
def _markov_sample_kernel(
    u_ptr,
    out_ptr,
    n_rows,
    n_steps,
    stride_ub,
    stride_ul,
    stride_ob,
    stride_ol,
    p,
    q,
    init_one,
    BLOCK: tl.constexpr,
):
    rows = _block_rows(tl.program_id(0), BLOCK)
    mask = rows < n_rows
    u_ptrs = u_ptr + rows * stride_ub
    out_ptrs = out_ptr + rows * stride_ob
    u = tl.load(u_ptrs, mask=mask, other=1.0)
    prev = u < init_one
    tl.store(out_ptrs, prev.to(tl.int64), mask=mask)
    for _ in range(1, n_steps):
        # advancing the 64-bit pointers, not adding t * stride, keeps the time offset out of int32
        u_ptrs += stride_ul
        out_ptrs += stride_ol
        u = tl.load(u_ptrs, mask=mask, other=1.0)
        prev = tl.where(prev, u >= q, u < p)
        tl.store(out_ptrs, prev.to(tl.int64), mask=mask)


def markov_sample_triton(uniforms: torch.Tensor, p: float, q: float, init_one: float) -> torch.Tensor:
    """Triton twin of :func:`markov_sample_reference`; float32 uniforms ``(B, L)`` -> int64 ``(B, L)``."""
    n_rows, n_steps = uniforms.shape
    out = torch.empty((n_rows, n_steps), dtype=torch.long, device=uniforms.device)
    block = 128
    grid = (triton.cdiv(n_rows, block),)
    # Scalars are rounded to float32 here exactly as torch rounds a Python float compared with a
    # float32 tensor, so the two backends agree on every comparison.
    _markov_sample_kernel[grid](
        uniforms,
        out,
        n_rows,
        n_steps,
        uniforms.stride(0),
        uniforms.stride(1),
        out.stride(0),
        out.stride(1),
        float(torch.tensor(p, dtype=torch.float32)),
        float(torch.tensor(q, dtype=torch.float32)),
        float(torch.tensor(init_one, dtype=torch.float32)),
        BLOCK=block,
    )
    return out
