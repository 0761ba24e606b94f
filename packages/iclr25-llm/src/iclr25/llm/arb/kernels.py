"""Triton kernel for the partition search, checked against :mod:`.reference`.

``threshold_search_triton``: one program per (threshold, row) binarizes both magnitude groups of
the row (plain order-1 statistics: masked mean, mean |w − μ|, signs) in registers and writes the
row's squared error; all 81 thresholds of a block run in one launch instead of a Python loop.

``packed_gemv_triton``: the 1-bit GEMV of :mod:`.packed`. One program per (row tile, column
slice, batch row) walks its column tiles (each inside one scale block), expands the sign and
group bits of the tile in registers, picks each entry's scales by its slot and accumulates
``ŵ_ij x_j``; slices are added atomically. The dense weight never exists in memory, so the bytes
read are the packed ones.

Import guarded: without Triton this module defines nothing callable. Set ``TRITON_INTERPRET=1``
before importing it to run the kernel on CPU tensors (slow; used by the tests).
"""

from __future__ import annotations

import torch

from iclr25.core.triton import triton_available

__all__ = ["packed_gemv_triton", "threshold_search_triton"]

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
        thr = thresholds.to(device=W.device)
        if thr.dtype == torch.float64:
            # the reference compares |w| > p in float64; for float32 |w| that equals |w| > p rounded
            # down to float32 (to nearest, a p just below a float32 value would flip |w| = that value)
            t32 = thr.float()
            thr = torch.where(t32.double() > thr, torch.nextafter(t32, torch.full_like(t32, -float("inf"))), t32)
        thr = thr.to(torch.float32).contiguous()
        out = torch.empty(thr.numel(), n, device=W.device, dtype=torch.float32)
        _search_kernel[(thr.numel(), n)](W, b, thr, out, n, m, BLOCK_M=max(1, triton.next_power_of_2(m)))
        return out.sum(1)

    @triton.jit
    def _pick(sal, big, ns_small, ns_big, s_small, s_big):
        return tl.where(sal, tl.where(big, s_big, s_small), tl.where(big, ns_big, ns_small))

    @triton.jit
    def _signs(words, shift):
        # bit b of a word, moved to the sign position, becomes ±1.0 by setting the exponent of 1.0:
        # two integer ops per entry instead of extract / compare / select
        return (((words ^ -1) << shift) & -2147483648 | 1065353216).to(tl.float32, bitcast=True)

    @triton.jit
    def _row_scales(ptr, rm, i: tl.constexpr):
        return tl.load(ptr + i, mask=rm, other=0.0).to(tl.float32)[:, None]

    @triton.jit
    def _gemv_kernel(
        x_ptr, y_ptr, s1_ptr, g_ptr, s2i_ptr, s2_ptr, a_ptr, mu_ptr, b_ptr, bias_ptr,
        N, K, BS, NB, KW, NW2, TILES,
        BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr, MU_MODE: tl.constexpr,
        HAS_BETA: tl.constexpr, HAS_BIAS: tl.constexpr,
    ):  # fmt: skip
        # grid: (row tiles, SPLIT_K column slices, batch); a slice takes every SPLIT_K-th column
        # tile, so a batch-1 GEMV still launches enough programs to hide the load latency
        pid_n = tl.program_id(0)
        pid_k = tl.program_id(1)
        bt = tl.program_id(2)
        rows = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        rm = rows < N
        row_word = (pid_n * BLOCK_N) // 32  # BLOCK_N divides 32: one plane-2 word per column
        rsh = (31 - rows % 32)[:, None]
        acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
        for t in range(pid_k, TILES, SPLIT_K):
            k0 = t * BLOCK_K
            cols = k0 + tl.arange(0, BLOCK_K)
            cm = cols < K
            sh = (31 - cols % 32)[None, :]
            x = tl.load(x_ptr + bt * K + cols, mask=cm, other=0.0).to(tl.float32)[None, :]
            # plane 2 exists only on salient columns, stored column by column (index -1: none)
            s2i = tl.load(s2i_ptr + cols, mask=cm, other=-1)
            sal1 = s2i >= 0
            w2 = tl.load(s2_ptr + s2i * NW2 + row_word, mask=sal1, other=0)
            sal = sal1[None, :]
            m2 = rm[:, None] & cm[None, :]
            wp = rows[:, None] * KW + (cols // 32)[None, :]
            w1 = tl.load(s1_ptr + wp, mask=m2, other=0)
            wg = tl.load(g_ptr + wp, mask=m2, other=0)
            sg1 = _signs(w1, sh)
            big = (wg << sh) < 0
            sg2 = _signs(w2[None, :], rsh)
            blk = k0 // BS  # the tile lies inside one scale block (its width divides BS)
            ab = a_ptr + (rows * NB + blk) * 6
            p1 = _pick(
                sal, big, _row_scales(ab, rm, 0), _row_scales(ab, rm, 1), _row_scales(ab, rm, 2), _row_scales(ab, rm, 4)
            )
            p2 = tl.where(sal, tl.where(big, _row_scales(ab, rm, 5), _row_scales(ab, rm, 3)), 0.0)
            if HAS_BETA:
                bb = b_ptr + cols * 6
                b0 = tl.load(bb + 0, mask=cm, other=0.0).to(tl.float32)[None, :]
                b1 = tl.load(bb + 1, mask=cm, other=0.0).to(tl.float32)[None, :]
                b2 = tl.load(bb + 2, mask=cm, other=0.0).to(tl.float32)[None, :]
                b3 = tl.load(bb + 3, mask=cm, other=0.0).to(tl.float32)[None, :]
                b4 = tl.load(bb + 4, mask=cm, other=0.0).to(tl.float32)[None, :]
                b5 = tl.load(bb + 5, mask=cm, other=0.0).to(tl.float32)[None, :]
                p1 = p1 * _pick(sal, big, b0, b1, b2, b4)
                p2 = p2 * tl.where(big, b5, b3)
            w = p1 * sg1 + p2 * sg2
            if MU_MODE == 1:  # one mean per slot
                mb = mu_ptr + (rows * NB + blk) * 4
                w += _pick(
                    sal,
                    big,
                    _row_scales(mb, rm, 0),
                    _row_scales(mb, rm, 1),
                    _row_scales(mb, rm, 2),
                    _row_scales(mb, rm, 3),
                )
            if MU_MODE == 2:  # one mean per plane (BiLLM): the planes' means add up
                mb = mu_ptr + (rows * NB + blk) * 6
                w += _pick(
                    sal, big, _row_scales(mb, rm, 0), _row_scales(mb, rm, 1),
                    _row_scales(mb, rm, 2) + _row_scales(mb, rm, 3),
                    _row_scales(mb, rm, 4) + _row_scales(mb, rm, 5),
                )  # fmt: skip
            acc += w * x  # reduced once after the loop, not per tile
        y = tl.sum(acc, axis=1)
        if HAS_BIAS:
            y += tl.where(pid_k == 0, tl.load(bias_ptr + rows, mask=rm, other=0.0).to(tl.float32), 0.0)
        if SPLIT_K == 1:
            tl.store(y_ptr + bt * N + rows, y, mask=rm)
        else:
            tl.atomic_add(y_ptr + bt * N + rows, y, mask=rm)

    def packed_gemv_triton(
        x: torch.Tensor, P, block_n: int = 8, num_warps: int = 4, split_k: int | None = None
    ) -> torch.Tensor:
        """Same contract as :func:`.packed.packed_gemv_reference` (``x: (batch, K)`` → float32).

        ``block_n`` (rows per program) must divide 32; column tiles are the largest power of two
        (at most 128) dividing the blocksize; ``split_k`` column slices per row tile (default:
        enough for about 2048 programs; partial sums are added atomically).
        """
        if block_n < 1 or 32 % block_n:
            raise ValueError(f"block_n must divide 32; got {block_n}")
        n, K = P.shape
        bs = P.blocksize
        block_k = 32
        while block_k < 128 and bs % (2 * block_k) == 0:
            block_k *= 2
        tiles = triton.cdiv(K, block_k)
        row_tiles = triton.cdiv(n, block_n)
        if split_k is None:
            split_k = max(1, min(tiles, 2048 // row_tiles))
        x = x.contiguous()
        y = (torch.zeros if split_k > 1 else torch.empty)(x.shape[0], n, device=x.device, dtype=torch.float32)
        # the kernel indexes the packed tensors as dense row-major arrays (a no-op for pack_groups' own)
        signs, gmap, s2_index, alpha = (t.contiguous() for t in (P.signs, P.gmap, P.s2_index, P.alpha))
        mu, beta, bias = (None if t is None else t.contiguous() for t in (P.mu, P.beta, P.bias))
        nb = alpha.shape[1]
        dummy = alpha
        mu_mode = 0 if mu is None else (2 if mu.shape[-1] == 6 else 1)
        s2 = P.signs2.contiguous() if P.signs2.numel() else signs  # never read when no column is salient
        _gemv_kernel[(row_tiles, split_k, x.shape[0])](
            x, y, signs, gmap, s2_index, s2, alpha,
            dummy if mu is None else mu, dummy if beta is None else beta,
            dummy if bias is None else bias,
            n, K, bs, nb, P.signs.shape[1], max(P.signs2.shape[1], 1), tiles,
            BLOCK_N=block_n, BLOCK_K=block_k, SPLIT_K=split_k, MU_MODE=mu_mode,
            HAS_BETA=P.beta is not None, HAS_BIAS=P.bias is not None, num_warps=num_warps,
        )  # fmt: skip
        return y
