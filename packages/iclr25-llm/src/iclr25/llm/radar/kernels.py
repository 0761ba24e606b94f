"""Triton kernels for Radar's two decode-step hot paths.

1. **Segment scoring** (:func:`segment_scores_triton`): one program per (batch, query head, query,
   block of segments) computes the random-feature logits ``±Ωᵀx̃`` of its query tile by tile, takes
   the max-shift in a first pass and, in a second pass, accumulates ``φ(q)ᵀr_s`` against the
   per-segment summaries of its KV head. φ(q) (2D floats per query) and the repeated GQA summaries
   are never written to memory. The ``‖x̃‖²/2`` term of both feature halves cancels against the
   max-shift (max over both halves is ``max|Ωᵀx̃| − ‖x̃‖²/2``), so the kernel works with
   ``exp(±u − max|u|)``, the same numbers as :func:`.reference.feature_map`. Top-k stays
   ``torch.topk`` on the output.

2. **Gather attention** (:func:`gather_attention_triton`): flash-decoding over the selected
   positions. A program owns one (batch, KV head, query, split) and all query heads of the GQA
   group; it derives each position from the selection itself (sinks ``[0, sink_end)``, then the
   selected segments ``s·c + o``, then the tail ``[tail_start, t)``), loads the keys/values at those
   positions, and keeps an online softmax (running max, normaliser, weighted sum). A second kernel
   merges the splits. Segment positions that fall in the sinks or the tail, and positions that
   ``key_mask`` removes, count as masked, exactly as :meth:`.Selection.gather_index` marks them.

Forward only; softmax and accumulation in fp32 (fp32 ``tl.dot`` in IEEE precision, not TF32, so
the kernel agrees with the reference to float32 rounding). Import guarded: without Triton this
module defines nothing callable. Set ``TRITON_INTERPRET=1`` before importing it to run the kernels
on CPU tensors (slow; used by the tests).
"""

from __future__ import annotations

import math

import torch

from iclr25.core.triton import triton_available

__all__ = ["gather_attention_triton", "segment_scores_triton"]

if triton_available():
    import triton
    import triton.language as tl

    @triton.jit
    def _segment_scores_kernel(
        q_ptr,
        om_ptr,
        sm_ptr,
        out_ptr,
        HQ,
        NQ,
        REP,
        S,
        D,
        HD,
        x_scale,
        out_scale,
        sq_b,
        sq_h,
        sq_q,
        sq_d,
        so_d,
        so_f,
        ss_b,
        ss_h,
        ss_s,
        ss_f,
        sy_b,
        sy_h,
        sy_q,
        sy_s,
        BLOCK_D: tl.constexpr,
        BLOCK_F: tl.constexpr,
        BLOCK_S: tl.constexpr,
    ):
        pid = tl.program_id(0)
        sblk = tl.program_id(1)
        qi = pid % NQ
        h = (pid // NQ) % HQ
        b = (pid // (NQ * HQ)).to(tl.int64)  # int64 offsets: long caches overflow int32
        hk = h // REP
        dd = tl.arange(0, BLOCK_D)
        dmask = dd < HD
        x = tl.load(q_ptr + b * sq_b + h * sq_h + qi * sq_q + dd * sq_d, mask=dmask, other=0.0).to(tl.float32)
        x = x * x_scale
        ff = tl.arange(0, BLOCK_F)
        # pass 1: max |Ωᵀx̃| over all D projections (the per-row max-shift of the features)
        m = 0.0
        for f0 in range(0, D, BLOCK_F):
            f = f0 + ff
            fmask = f < D
            om = tl.load(
                om_ptr + dd[:, None] * so_d + f[None, :] * so_f, mask=dmask[:, None] & fmask[None, :], other=0.0
            )
            u = tl.sum(x[:, None] * om, axis=0)
            m = tl.maximum(m, tl.max(tl.where(fmask, tl.abs(u), 0.0), axis=0))
        # pass 2: φ(q) tile by tile, dotted with the summaries' two halves [f] and [D + f]
        s = sblk * BLOCK_S + tl.arange(0, BLOCK_S)
        smask = s < S
        sbase = sm_ptr + b * ss_b + hk * ss_h + s[:, None] * ss_s
        acc = tl.zeros([BLOCK_S], dtype=tl.float32)
        for f0 in range(0, D, BLOCK_F):
            f = f0 + ff
            fmask = f < D
            om = tl.load(
                om_ptr + dd[:, None] * so_d + f[None, :] * so_f, mask=dmask[:, None] & fmask[None, :], other=0.0
            )
            u = tl.sum(x[:, None] * om, axis=0)
            ep = tl.where(fmask, tl.exp(u - m), 0.0)
            en = tl.where(fmask, tl.exp(-u - m), 0.0)
            tmask = smask[:, None] & fmask[None, :]
            rp = tl.load(sbase + f[None, :] * ss_f, mask=tmask, other=0.0).to(tl.float32)
            rn = tl.load(sbase + (f[None, :] + D) * ss_f, mask=tmask, other=0.0).to(tl.float32)
            acc += tl.sum(rp * ep[None, :] + rn * en[None, :], axis=1)
        tl.store(out_ptr + b * sy_b + h * sy_h + qi * sy_q + s * sy_s, acc * out_scale, mask=smask)

    @triton.jit
    def _gather_attention_kernel(
        q_ptr,
        k_ptr,
        v_ptr,
        seg_ptr,
        km_ptr,
        acc_ptr,
        ml_ptr,
        HKV,
        NQ,
        REP,
        HD,
        NSEG,
        c,
        sink_end,
        tail_start,
        t,
        chunk,
        sm_scale,
        sq_b,
        sq_h,
        sq_q,
        sq_d,
        sk_b,
        sk_h,
        sk_t,
        sk_d,
        sv_b,
        sv_h,
        sv_t,
        sv_d,
        sg_b,
        sg_h,
        sg_q,
        sg_k,
        sm_b,
        sm_h,
        sm_q,
        sm_t,
        HAS_MASK: tl.constexpr,
        BLOCK_R: tl.constexpr,
        BLOCK_N: tl.constexpr,
        BLOCK_D: tl.constexpr,
    ):
        pid = tl.program_id(0)
        split = tl.program_id(1)
        n_split = tl.num_programs(1)
        qi = pid % NQ
        hk = (pid // NQ) % HKV
        b = (pid // (NQ * HKV)).to(tl.int64)  # int64 offsets: long caches overflow int32
        rr = tl.arange(0, BLOCK_R)
        rmask = rr < REP
        dd = tl.arange(0, BLOCK_D)
        dmask = dd < HD
        h = hk * REP + rr  # the query heads of this GQA group
        qt = tl.load(
            q_ptr + b * sq_b + h[:, None] * sq_h + qi * sq_q + dd[None, :] * sq_d,
            mask=rmask[:, None] & dmask[None, :],
            other=0.0,
        ).to(tl.float32)
        n_sel = NSEG * c
        seg_end = sink_end + n_sel
        total = seg_end + (t - tail_start)
        j0 = split * chunk
        j1 = tl.minimum(j0 + chunk, total)
        m_i = tl.full([BLOCK_R], -float("inf"), dtype=tl.float32)
        l_i = tl.zeros([BLOCK_R], dtype=tl.float32)
        acc = tl.zeros([BLOCK_R, BLOCK_D], dtype=tl.float32)
        nn = tl.arange(0, BLOCK_N)
        for jb in range(j0, j1, BLOCK_N):
            j = jb + nn
            inb = j < j1
            is_seg = (j >= sink_end) & (j < seg_end)
            jj = tl.where(is_seg, j - sink_end, 0)
            si = jj // c
            seg = tl.load(seg_ptr + b * sg_b + hk * sg_h + qi * sg_q + si * sg_k, mask=inb & is_seg, other=0)
            pos_seg = seg * c + (jj - si * c)
            pos = tl.where(j < sink_end, j, tl.where(is_seg, pos_seg, tail_start + (j - seg_end)))
            # a segment position already covered by the sinks or the tail is masked (counted once)
            valid = inb & (~is_seg | ((pos_seg >= sink_end) & (pos_seg < tail_start)))
            if HAS_MASK:
                keep = tl.load(km_ptr + b * sm_b + hk * sm_h + qi * sm_q + pos * sm_t, mask=valid, other=0)
                valid = valid & (keep != 0)
            pos = tl.where(valid, pos, 0)
            kv_mask = valid[:, None] & dmask[None, :]
            kt = tl.load(
                k_ptr + b * sk_b + hk * sk_h + pos[:, None] * sk_t + dd[None, :] * sk_d, mask=kv_mask, other=0.0
            ).to(tl.float32)
            vt = tl.load(
                v_ptr + b * sv_b + hk * sv_h + pos[:, None] * sv_t + dd[None, :] * sv_d, mask=kv_mask, other=0.0
            ).to(tl.float32)
            s = tl.dot(qt, tl.trans(kt), input_precision="ieee") * sm_scale
            s = tl.where(valid[None, :], s, -float("inf"))
            m_new = tl.maximum(m_i, tl.max(s, axis=1))
            # all positions so far masked: keep the shift finite so no inf − inf appears
            m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)
            alpha = tl.exp(m_i - m_safe)
            p = tl.exp(s - m_safe[:, None])
            l_i = l_i * alpha + tl.sum(p, axis=1)
            acc = acc * alpha[:, None] + tl.dot(p, vt, input_precision="ieee")
            m_i = m_new
        row = (b * HKV + hk) * REP + rr  # flat (batch, query head) index
        base = (row * NQ + qi) * n_split + split
        tl.store(acc_ptr + base[:, None] * BLOCK_D + dd[None, :], acc, mask=rmask[:, None])
        tl.store(ml_ptr + base * 2, m_i, mask=rmask)
        tl.store(ml_ptr + base * 2 + 1, l_i, mask=rmask)

    @triton.jit
    def _combine_kernel(acc_ptr, ml_ptr, out_ptr, HD, NSPLIT, BLOCK_SPLIT: tl.constexpr, BLOCK_D: tl.constexpr):
        row = tl.program_id(0)  # flat (batch, query head, query)
        sp = tl.arange(0, BLOCK_SPLIT)
        spm = sp < NSPLIT
        dd = tl.arange(0, BLOCK_D)
        m = tl.load(ml_ptr + (row * NSPLIT + sp) * 2, mask=spm, other=-float("inf"))
        l_s = tl.load(ml_ptr + (row * NSPLIT + sp) * 2 + 1, mask=spm, other=0.0)
        a = tl.load(acc_ptr + (row * NSPLIT + sp)[:, None] * BLOCK_D + dd[None, :], mask=spm[:, None], other=0.0)
        mx = tl.max(m, axis=0)
        w = tl.where(m == -float("inf"), 0.0, tl.exp(m - tl.where(mx == -float("inf"), 0.0, mx)))
        den = tl.sum(w * l_s, axis=0)
        num = tl.sum(w[:, None] * a, axis=0)
        # a query with no unmasked position (padding only) gets a zero output, as the reference
        o = tl.where(den > 0, num / tl.where(den > 0, den, 1.0), 0.0)
        tl.store(out_ptr + row * HD + dd, o, mask=dd < HD)


def _require_triton() -> None:
    if not triton_available():
        raise RuntimeError("triton is not installed (pip install 'iclr25-core[triton]')")


def segment_scores_triton(
    queries: torch.Tensor, omega: torch.Tensor, summaries: torch.Tensor, head_dim: int
) -> torch.Tensor:
    """Fused ``φ(q)ᵀr_s``; same contract as :func:`.reference.gqa_segment_scores`.

    Parameters
    ----------
    queries : (B, Hq, Q, m) float tensor (fp32/fp16/bf16; features in fp32)
    omega : (m, D) float32 tensor
    summaries : (B, Hkv, S, 2D) float32 tensor; Hq a multiple of Hkv
    head_dim : int
        d of the 1/√d attention scaling.

    Returns
    -------
    (B, Hq, Q, S) float32 tensor
    """
    _require_triton()
    b, hq, nq, md = queries.shape
    hkv, n_seg = summaries.shape[1], summaries.shape[2]
    n_feat = omega.shape[1]
    out = torch.empty(b, hq, nq, n_seg, device=queries.device, dtype=torch.float32)
    if out.numel() == 0:
        return out
    block_d = max(16, triton.next_power_of_2(md))
    block_f = max(16, min(64, 4096 // block_d, triton.next_power_of_2(n_feat)))
    block_s = max(16, min(64, triton.next_power_of_2(n_seg)))
    grid = (b * hq * nq, triton.cdiv(n_seg, block_s))
    _segment_scores_kernel[grid](
        queries,
        omega,
        summaries,
        out,
        hq,
        nq,
        hq // hkv,
        n_seg,
        n_feat,
        md,
        head_dim**-0.25,
        1.0 / math.sqrt(2 * n_feat),
        *queries.stride(),
        *omega.stride(),
        *summaries.stride(),
        *out.stride(),
        BLOCK_D=block_d,
        BLOCK_F=block_f,
        BLOCK_S=block_s,
    )
    return out


def gather_attention_triton(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    segments: torch.Tensor,
    c: int,
    sink_end: int,
    tail_start: int,
    key_mask: torch.Tensor | None = None,
    num_splits: int | None = None,
) -> torch.Tensor:
    """Exact softmax attention over sinks ∪ selected segments ∪ tail, by flash-decoding.

    Same result as the torch gather path of :func:`iclr25.llm.radar.radar_attention`.

    Parameters
    ----------
    q : (B, Hq, Q, d) tensor; Hq a multiple of Hkv
    k, v : (B, Hkv, t, d) tensors
    segments : (B, Hkv, Q, k) integer tensor
        Selected segment ids; segment s covers positions ``[s·c, (s+1)·c)``.
    c, sink_end, tail_start : int
        Segment length, end of the sinks, start of the always-attended tail.
    key_mask : (B, Hkv, Q, t) bool tensor (strides may be 0), optional
        False: the position may not be attended (padding).
    num_splits : int, optional
        Chunks of the position list processed by separate programs (flash-decoding); chosen from
        the problem size when None.

    Returns
    -------
    (B, Hq, Q, d) tensor in ``q``'s dtype; zero for a query with no unmasked position.
    """
    _require_triton()
    b, hq, nq, hd = q.shape
    hkv, t = k.shape[1], k.shape[2]
    rep = hq // hkv
    n_seg = segments.shape[-1]
    total = sink_end + n_seg * c + (t - tail_start)
    block_n = 32
    if num_splits is None:
        # enough programs to fill a GPU for batch-1 decoding, but chunks of at least 4 blocks
        num_splits = max(1, min(triton.cdiv(total, 4 * block_n), triton.cdiv(256, max(1, b * hkv * nq))))
    num_splits = max(1, min(num_splits, triton.cdiv(max(total, 1), block_n)))
    chunk = triton.cdiv(triton.cdiv(max(total, 1), num_splits), block_n) * block_n
    num_splits = triton.cdiv(max(total, 1), chunk)
    block_r = max(16, triton.next_power_of_2(rep))
    block_d = max(16, triton.next_power_of_2(hd))
    dev = q.device
    acc = torch.empty(b * hq * nq * num_splits, block_d, device=dev, dtype=torch.float32)
    ml = torch.empty(b * hq * nq * num_splits, 2, device=dev, dtype=torch.float32)
    if key_mask is not None:
        km, km_strides, has_mask = key_mask.view(torch.uint8), key_mask.stride(), True
    else:
        km, km_strides, has_mask = acc, (0, 0, 0, 0), False  # never read
    seg = segments if n_seg else segments.new_zeros(b, hkv, nq, 1)
    _gather_attention_kernel[(b * hkv * nq, num_splits)](
        q,
        k,
        v,
        seg,
        km,
        acc,
        ml,
        hkv,
        nq,
        rep,
        hd,
        n_seg,
        c,
        sink_end,
        tail_start,
        t,
        chunk,
        1.0 / math.sqrt(hd),
        *q.stride(),
        *k.stride(),
        *v.stride(),
        *seg.stride(),
        *km_strides,
        HAS_MASK=has_mask,
        BLOCK_R=block_r,
        BLOCK_N=block_n,
        BLOCK_D=block_d,
    )
    out = torch.empty(b, hq, nq, hd, device=dev, dtype=torch.float32)
    _combine_kernel[(b * hq * nq,)](
        acc, ml, out, hd, num_splits, BLOCK_SPLIT=max(2, triton.next_power_of_2(num_splits)), BLOCK_D=block_d
    )
    return out.to(q.dtype)
