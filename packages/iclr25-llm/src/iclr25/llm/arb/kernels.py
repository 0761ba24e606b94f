"""Triton kernel for the partition search, checked against :mod:`.reference`.

``threshold_search_triton``: one program per (threshold, row) binarizes both magnitude groups of
the row (plain order-1 statistics: masked mean, mean |w − μ|, signs) in registers and writes the
row's squared error; all 81 thresholds of a block run in one launch instead of a Python loop.

Import guarded: without Triton this module defines nothing callable. Set ``TRITON_INTERPRET=1``
before importing it to run the kernel on CPU tensors (slow; used by the tests).
"""

from __future__ import annotations

import torch

from iclr25.core.triton import triton_available

__all__ = ["threshold_search_triton"]

if triton_available():
    import triton
    import triton.language as tl

    @triton.jit
    def _group_err(w, g):
        cnt = tl.sum(g, axis=0)
        safe = tl.maximum(cnt, 1.0)
        mu = tl.sum(w * g, axis=0) / safe
        d = w - mu
        a = tl.sum(tl.abs(d) * g, axis=0) / safe
        s = tl.where(d >= 0, 1.0, -1.0)
        r = (w - (a * s + mu)) * g
        return tl.sum(r * r, axis=0)

    @triton.jit
    def _search_kernel(w_ptr, base_ptr, thr_ptr, out_ptr, n, m, BLOCK_M: tl.constexpr):
        t = tl.program_id(0)
        i = tl.program_id(1)
        cols = tl.arange(0, BLOCK_M)
        cm = cols < m
        w = tl.load(w_ptr + i * m + cols, mask=cm, other=0.0)
        b = tl.load(base_ptr + i * m + cols, mask=cm, other=0.0)
        p = tl.load(thr_ptr + t)
        big = tl.where(tl.abs(w) > p, 1.0, 0.0) * b
        small = b - big
        tl.store(out_ptr + t * n + i, _group_err(w, big) + _group_err(w, small))

    def threshold_search_triton(W: torch.Tensor, base: torch.Tensor, thresholds: torch.Tensor) -> torch.Tensor:
        """Same contract as :func:`.reference.threshold_search_reference` (float32, m <= 1024)."""
        n, m = W.shape
        W = W.contiguous().float()
        b = base.to(torch.float32).contiguous()
        thr = thresholds.to(device=W.device, dtype=torch.float32).contiguous()
        out = torch.empty(thr.numel(), n, device=W.device, dtype=torch.float32)
        _search_kernel[(thr.numel(), n)](W, b, thr, out, n, m, BLOCK_M=triton.next_power_of_2(m))
        return out.sum(1)
