"""Triton multi-step LIF, ALIF and GIF kernels (forward and reverse-time backward), checked against `.reference`.

When all T input currents are known (a feed-forward layer), one program per block of neurons runs
the whole time loop in registers: the LIF forward writes spikes and the pre-reset membrane ``h_k``
(the only state backward needs) and the backward runs the loop in reverse, recomputing ``v_{k-1}``
from ``h_{k-1}`` and ``s_{k-1}``; the ALIF kernels store ``v_k`` and ``b_k`` and carry the adjoints
of ``v``, ``b`` and the previous spike (which feeds both the reset and the adaptation) backwards.
The GIF encoder reads its input once (it is the same every step, or only enters at the first), stores
the multi-level spikes and the pre-reset membrane, and its backward carries the membrane adjoint
backwards while accumulating the input and threshold gradients. This replaces ~10 small torch
launches per time step.

Import guarded: without Triton this module defines nothing callable. Set ``TRITON_INTERPRET=1``
before importing it to run the kernels on CPU tensors (slow; used by the tests).
"""

from __future__ import annotations

from typing import Any

import torch

from iclr25.core.triton import triton_available

from .surrogates import Surrogate

__all__ = ["SURROGATE_CODES", "alif_multistep_triton", "gif_encode_triton", "lif_multistep_triton"]

SURROGATE_CODES = {"gaussian": 0, "atan": 1, "sigmoid": 2, "triangle": 3, "ste": 4}
_RESET_CODES = {"soft": 0, "hard": 1, "none": 2}

if triton_available():
    import triton
    import triton.language as tl

    @triton.jit
    def _surrogate_grad(z, SURR: tl.constexpr, p0, p1):
        if SURR == 0:  # gaussian: p0 = width, p1 = scale
            g = p1 * tl.exp(-(z * z) / (2.0 * p0 * p0)) / (2.5066282746310002 * p0)
        elif SURR == 1:  # atan: p0 = alpha
            t = 1.5707963267948966 * p0 * z
            g = (p0 * 0.5) / (1.0 + t * t)
        elif SURR == 2:  # sigmoid: p0 = k
            sg = 1.0 / (1.0 + tl.exp(-p0 * z))
            g = p0 * sg * (1.0 - sg)
        elif SURR == 3:  # triangle: p0 = width, p1 = scale
            g = p1 * tl.maximum(1.0 - tl.abs(z) / p0, 0.0) / p0
        else:  # ste: p0 = width
            g = tl.where(tl.abs(z) <= p0, 1.0, 0.0)
        return g

    @triton.jit
    def _alif_adjoint_step(g_s, cv, cb, v, b, vp, bp, sp, x, a, r, b0, beta, dt, SURR: tl.constexpr, p0, p1):
        # One reverse step of alif_update. In: g_s, cv, cb = adjoints of (s_t, v_t, b_t); the
        # step's (v, b), previous (vp, bp, sp) and input current x. Out: the input's adjoint, this
        # step's terms of the alpha and rho gradients, and the adjoints of (v, b, s) at t-1 (for s,
        # only through the reset and the adaptation).
        big_b = b0 + beta * b
        gz = g_s * _surrogate_grad(v - big_b, SURR, p0, p1)  # s_t = H(v_t - B_t)
        gv = cv + gz  # v_t: state path + spike path
        gb = cb + beta * (-gz - gv * sp * dt)  # B_t enters the threshold and the reset
        return gv * (1.0 - a), gv * (vp - x), gb * (bp - sp), a * gv, r * gb, gb * (1.0 - r) - gv * big_b * dt

    @triton.jit
    def _lif_fwd_kernel(
        x_ptr,
        v0_ptr,
        a_ptr,
        s_ptr,
        h_ptr,
        vt_ptr,
        T,
        N,
        threshold,
        v_reset,
        ONE_MINUS_ALPHA: tl.constexpr,
        RESET: tl.constexpr,
        INCLUSIVE: tl.constexpr,
        SAVE_H: tl.constexpr,
        BLOCK: tl.constexpr,
    ):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < N
        a = tl.load(a_ptr + offs, mask=mask, other=0.0)
        v = tl.load(v0_ptr + offs, mask=mask, other=0.0)
        for t in range(T):
            x = tl.load(x_ptr + t * N + offs, mask=mask, other=0.0)
            # same operation order as reference.lif_update so spikes match bit for bit
            if ONE_MINUS_ALPHA:  # noqa: SIM108 (constexpr branch: resolved at compile time)
                h = a * v + (1.0 - a) * x
            else:
                h = a * v + x
            if INCLUSIVE:  # noqa: SIM108 (constexpr branch: resolved at compile time)
                s = tl.where(h - threshold >= 0.0, 1.0, 0.0)
            else:
                s = tl.where(h - threshold > 0.0, 1.0, 0.0)
            if RESET == 0:
                v = h - threshold * s
            elif RESET == 1:
                v = h * (1.0 - s) + v_reset * s
            else:
                v = h
            tl.store(s_ptr + t * N + offs, s, mask=mask)
            if SAVE_H:
                tl.store(h_ptr + t * N + offs, h, mask=mask)
        tl.store(vt_ptr + offs, v, mask=mask)

    @triton.jit
    def _lif_bwd_kernel(
        gs_ptr,
        gvt_ptr,
        x_ptr,
        v0_ptr,
        a_ptr,
        s_ptr,
        h_ptr,
        gx_ptr,
        gv0_ptr,
        ga_ptr,
        T,
        N,
        threshold,
        v_reset,
        p0,
        p1,
        ONE_MINUS_ALPHA: tl.constexpr,
        RESET: tl.constexpr,
        DETACH: tl.constexpr,
        SURR: tl.constexpr,
        BLOCK: tl.constexpr,
    ):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < N
        a = tl.load(a_ptr + offs, mask=mask, other=0.0)
        v0 = tl.load(v0_ptr + offs, mask=mask, other=0.0)
        gv = tl.load(gvt_ptr + offs, mask=mask, other=0.0)  # dL/dv_k, from the future
        ga = tl.zeros([BLOCK], dtype=tl.float32)
        for i in range(T):
            t = T - 1 - i
            h = tl.load(h_ptr + t * N + offs, mask=mask, other=0.0)
            s = tl.load(s_ptr + t * N + offs, mask=mask, other=0.0)
            x = tl.load(x_ptr + t * N + offs, mask=mask, other=0.0)
            sg = _surrogate_grad(h - threshold, SURR, p0, p1)
            if RESET == 0:
                if DETACH:  # noqa: SIM108 (constexpr branch: resolved at compile time)
                    dvdh = sg * 0.0 + 1.0
                else:
                    dvdh = 1.0 - threshold * sg
            elif RESET == 1:
                if DETACH:  # noqa: SIM108 (constexpr branch: resolved at compile time)
                    dvdh = 1.0 - s
                else:
                    dvdh = (1.0 - s) + (v_reset - h) * sg
            else:
                dvdh = sg * 0.0 + 1.0
            gh = tl.load(gs_ptr + t * N + offs, mask=mask, other=0.0) * sg + gv * dvdh
            # v_{t-1}: recomputed from the saved pre-reset membrane (v0 at t = 0)
            prev = mask & (t > 0)
            hp = tl.load(h_ptr + (t - 1) * N + offs, mask=prev, other=0.0)
            sp = tl.load(s_ptr + (t - 1) * N + offs, mask=prev, other=0.0)
            if RESET == 0:
                vp = hp - threshold * sp
            elif RESET == 1:
                vp = hp * (1.0 - sp) + v_reset * sp
            else:
                vp = hp
            vp = tl.where(t > 0, vp, v0)
            if ONE_MINUS_ALPHA:
                tl.store(gx_ptr + t * N + offs, gh * (1.0 - a), mask=mask)
                ga += gh * (vp - x)
            else:
                tl.store(gx_ptr + t * N + offs, gh, mask=mask)
                ga += gh * vp
            gv = a * gh
        tl.store(gv0_ptr + offs, gv, mask=mask)
        tl.store(ga_ptr + offs, ga, mask=mask)

    @triton.jit
    def _alif_fwd_kernel(
        x_ptr,
        v0_ptr,
        s0_ptr,
        bi_ptr,
        a_ptr,
        r_ptr,
        s_ptr,
        v_ptr,
        b_ptr,
        T,
        N,
        b0,
        beta,
        dt,
        BLOCK: tl.constexpr,
    ):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < N
        a = tl.load(a_ptr + offs, mask=mask, other=0.0)
        r = tl.load(r_ptr + offs, mask=mask, other=0.0)
        v = tl.load(v0_ptr + offs, mask=mask, other=0.0)
        s = tl.load(s0_ptr + offs, mask=mask, other=0.0)
        b = tl.load(bi_ptr + offs, mask=mask, other=0.0)
        for t in range(T):
            x = tl.load(x_ptr + t * N + offs, mask=mask, other=0.0)
            # operation order of reference.alif_update (bitwise-equal spikes)
            b = r * b + (1.0 - r) * s
            big_b = b0 + beta * b
            v = v * a + (1.0 - a) * x - big_b * s * dt
            s = tl.where(v - big_b > 0.0, 1.0, 0.0)
            tl.store(s_ptr + t * N + offs, s, mask=mask)
            tl.store(v_ptr + t * N + offs, v, mask=mask)
            tl.store(b_ptr + t * N + offs, b, mask=mask)

    @triton.jit
    def _alif_bwd_kernel(
        gs_ptr,
        gvt_ptr,
        gbt_ptr,
        x_ptr,
        v0_ptr,
        s0_ptr,
        bi_ptr,
        a_ptr,
        r_ptr,
        s_ptr,
        v_ptr,
        b_ptr,
        gx_ptr,
        gv0_ptr,
        gs0_ptr,
        gbi_ptr,
        ga_ptr,
        gr_ptr,
        T,
        N,
        b0,
        beta,
        dt,
        p0,
        p1,
        SURR: tl.constexpr,
        BLOCK: tl.constexpr,
    ):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < N
        a = tl.load(a_ptr + offs, mask=mask, other=0.0)
        r = tl.load(r_ptr + offs, mask=mask, other=0.0)
        v0 = tl.load(v0_ptr + offs, mask=mask, other=0.0)
        s0 = tl.load(s0_ptr + offs, mask=mask, other=0.0)
        bi = tl.load(bi_ptr + offs, mask=mask, other=0.0)
        # adjoints arriving at step t from step t+1 (from the final-state gradients at t = T-1)
        cv = tl.load(gvt_ptr + offs, mask=mask, other=0.0)
        cb = tl.load(gbt_ptr + offs, mask=mask, other=0.0)
        cs = tl.zeros([BLOCK], dtype=tl.float32)
        ga = tl.zeros([BLOCK], dtype=tl.float32)
        gr = tl.zeros([BLOCK], dtype=tl.float32)
        for i in range(T):
            t = T - 1 - i
            v = tl.load(v_ptr + t * N + offs, mask=mask, other=0.0)
            b = tl.load(b_ptr + t * N + offs, mask=mask, other=0.0)
            x = tl.load(x_ptr + t * N + offs, mask=mask, other=0.0)
            prev = mask & (t > 0)
            vp = tl.where(t > 0, tl.load(v_ptr + (t - 1) * N + offs, mask=prev, other=0.0), v0)
            sp = tl.where(t > 0, tl.load(s_ptr + (t - 1) * N + offs, mask=prev, other=0.0), s0)
            bp = tl.where(t > 0, tl.load(b_ptr + (t - 1) * N + offs, mask=prev, other=0.0), bi)
            g_s = tl.load(gs_ptr + t * N + offs, mask=mask, other=0.0) + cs
            gx, dga, dgr, cv, cb, cs = _alif_adjoint_step(
                g_s, cv, cb, v, b, vp, bp, sp, x, a, r, b0, beta, dt, SURR, p0, p1
            )
            tl.store(gx_ptr + t * N + offs, gx, mask=mask)
            ga += dga
            gr += dgr
        tl.store(gv0_ptr + offs, cv, mask=mask)
        tl.store(gs0_ptr + offs, cs, mask=mask)
        tl.store(gbi_ptr + offs, cb, mask=mask)
        tl.store(ga_ptr + offs, ga, mask=mask)
        tl.store(gr_ptr + offs, gr, mask=mask)

    @triton.jit
    def _gif_fwd_kernel(
        x_ptr,
        th_ptr,
        s_ptr,
        u_ptr,
        S,
        N,
        lo,
        hi,
        offset,
        CONSTANT: tl.constexpr,
        HARD: tl.constexpr,
        SAVE_U: tl.constexpr,
        BLOCK: tl.constexpr,
    ):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < N
        x = tl.load(x_ptr + offs, mask=mask, other=0.0)
        th = tl.load(th_ptr + offs, mask=mask, other=1.0)  # 1, not 0: masked lanes must not divide by 0
        if CONSTANT:  # noqa: SIM108 (constexpr branch: resolved at compile time)
            u = tl.zeros([BLOCK], dtype=tl.float32)
        else:
            u = x
        for t in range(S):
            if CONSTANT:
                u = u + x
            # operation order of reference._GIFLevel / gif_update, and an IEEE division (Triton's
            # plain '/' is approximate on GPU), so the levels match the torch loop bit for bit
            # NaN-propagating clip, as torch.clamp (a NaN membrane, e.g. inf·0 in a hard reset, must
            # not become level lo)
            s = tl.minimum(
                tl.maximum(tl.floor(tl.math.div_rn(u, th) + offset), lo, propagate_nan=tl.PropagateNan.ALL),
                hi,
                propagate_nan=tl.PropagateNan.ALL,
            )
            tl.store(s_ptr + t * N + offs, s, mask=mask)
            if SAVE_U:
                tl.store(u_ptr + t * N + offs, u, mask=mask)
            if HARD:  # noqa: SIM108 (constexpr branch: resolved at compile time)
                u = u * tl.where(s == 0.0, 1.0, 0.0)
            else:
                u = u - th * s

    @triton.jit
    def _gif_bwd_kernel(
        gs_ptr,
        th_ptr,
        s_ptr,
        u_ptr,
        gx_ptr,
        gth_ptr,
        S,
        N,
        lo,
        hi,
        offset,
        lo_edge,
        hi_edge,
        p0,
        p1,
        CONSTANT: tl.constexpr,
        HARD: tl.constexpr,
        SURR: tl.constexpr,
        BLOCK: tl.constexpr,
    ):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < N
        th = tl.load(th_ptr + offs, mask=mask, other=1.0)
        c = tl.zeros([BLOCK], dtype=tl.float32)  # dL/du after step t's reset (nothing reads the last one)
        gx = tl.zeros([BLOCK], dtype=tl.float32)
        gth = tl.zeros([BLOCK], dtype=tl.float32)
        for i in range(S):
            t = S - 1 - i
            u = tl.load(u_ptr + t * N + offs, mask=mask, other=0.0)
            s = tl.load(s_ptr + t * N + offs, mask=mask, other=0.0)
            g = tl.load(gs_ptr + t * N + offs, mask=mask, other=0.0)
            if HARD:
                # the torch loop multiplies by (s == 0), a mask without gradient: no path to s or θ
                cu = c * tl.where(s == 0.0, 1.0, 0.0)
            else:
                # u ← u − θ s: the spike and θ also receive the reset's adjoint
                g = g - c * th
                gth = gth - c * s
                cu = c
            z = tl.math.div_rn(u, th)
            if SURR == 4:
                # the GIF straight-through rule is the clip range, whatever the STE width
                d = tl.where((z >= lo_edge) & (z < hi_edge), 1.0, 0.0)
            else:
                d = tl.zeros([BLOCK], dtype=tl.float32)
                for k in range(lo + 1, hi + 1):  # in the torch loop's order: the sum is not associative
                    d += _surrogate_grad((z - k) + offset, SURR, p0, p1)
            gd = g * d
            c = cu + tl.math.div_rn(gd, th)  # now dL/du before the reset = dL/du after step t-1
            gth = gth - tl.math.div_rn(gd * u, th * th)
            if CONSTANT:
                gx += c
        if not CONSTANT:
            gx = c
        tl.store(gx_ptr + offs, gx, mask=mask)
        tl.store(gth_ptr + offs, gth, mask=mask)


def _block(n: int, device: torch.device) -> int:
    # the interpreter pays per element-program, not per lane, but small blocks keep tests quick
    if device.type != "cuda":
        return 64
    return 256 if n <= 1 << 16 else 1024


class _LIFMultistepTriton(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any,
        x: torch.Tensor,
        v0: torch.Tensor,
        alpha: torch.Tensor,
        threshold: float,
        reset: str,
        v_reset: float,
        input_scale: str,
        surrogate: Surrogate,
        detach_reset: bool,
        inclusive: bool,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        shape = x.shape
        steps, n = shape[0], x[0].numel()
        xf = x.contiguous().view(steps, n)
        v0f = v0.contiguous().view(n)
        af = alpha.contiguous().view(n)
        spikes = torch.empty_like(xf)
        save_h = any(ctx.needs_input_grad[:3])
        h = torch.empty_like(xf) if save_h else spikes  # h_ptr unused when SAVE_H is False
        v_t = torch.empty_like(v0f)
        block = _block(n, x.device)
        _lif_fwd_kernel[(triton.cdiv(n, block),)](
            xf,
            v0f,
            af,
            spikes,
            h,
            v_t,
            steps,
            n,
            float(threshold),
            float(v_reset),
            ONE_MINUS_ALPHA=input_scale == "one_minus_alpha",
            RESET=_RESET_CODES[reset],
            INCLUSIVE=bool(inclusive),
            SAVE_H=save_h,
            BLOCK=block,
        )
        if save_h:
            ctx.save_for_backward(xf, v0f, af, spikes, h)
        ctx.cfg = (shape, float(threshold), float(v_reset), input_scale, reset, surrogate, bool(detach_reset))
        return spikes.view(shape), v_t.view(shape[1:])

    @staticmethod
    def backward(ctx: Any, g_spikes: torch.Tensor | None, g_vt: torch.Tensor | None) -> tuple[Any, ...]:
        xf, v0f, af, spikes, h = ctx.saved_tensors
        shape, threshold, v_reset, input_scale, reset, surrogate, detach = ctx.cfg
        steps, n = xf.shape
        gs = torch.zeros_like(xf) if g_spikes is None else g_spikes.contiguous().view(steps, n)
        gvt = torch.zeros_like(v0f) if g_vt is None else g_vt.contiguous().view(n)
        gx, gv0, ga = torch.empty_like(xf), torch.empty_like(v0f), torch.empty_like(af)
        p0, p1 = surrogate.values
        block = _block(n, xf.device)
        _lif_bwd_kernel[(triton.cdiv(n, block),)](
            gs,
            gvt,
            xf,
            v0f,
            af,
            spikes,
            h,
            gx,
            gv0,
            ga,
            steps,
            n,
            threshold,
            v_reset,
            float(p0),
            float(p1),
            ONE_MINUS_ALPHA=input_scale == "one_minus_alpha",
            RESET=_RESET_CODES[reset],
            DETACH=detach,
            SURR=SURROGATE_CODES[surrogate.name],
            BLOCK=block,
        )
        return gx.view(shape), gv0.view(shape[1:]), ga.view(shape[1:]), None, None, None, None, None, None, None


def lif_multistep_triton(
    x: torch.Tensor,
    v0: torch.Tensor,
    alpha: torch.Tensor,
    threshold: float,
    reset: str,
    v_reset: float,
    input_scale: str,
    surrogate: Surrogate,
    detach_reset: bool,
    inclusive: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Triton twin of `.reference.lif_multistep_reference` (same arguments and results).

    ``x: (T, ...)`` float32, ``v0`` and ``alpha`` broadcastable to ``x.shape[1:]``; returns
    ``(spikes (T, ...), v_T x.shape[1:])``, differentiable in ``x``, ``v0`` and ``alpha``.
    """
    if not triton_available():  # pragma: no cover - dispatch never selects it then
        raise RuntimeError("triton is not installed (pip install 'iclr25-core[triton]')")
    if x.shape[0] == 0:
        return x.new_zeros(x.shape), v0.expand(x.shape[1:])
    inner = x.shape[1:]
    return _LIFMultistepTriton.apply(
        x,
        v0.expand(inner),
        alpha.to(x.dtype).expand(inner),
        threshold,
        reset,
        v_reset,
        input_scale,
        surrogate,
        detach_reset,
        inclusive,
    )


class _ALIFMultistepTriton(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any,
        x: torch.Tensor,
        v0: torch.Tensor,
        s0: torch.Tensor,
        b_init: torch.Tensor,
        alpha: torch.Tensor,
        rho: torch.Tensor,
        b0: float,
        beta: float,
        dt: float,
        surrogate: Surrogate,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        shape = x.shape
        steps, n = shape[0], x[0].numel()
        flat = [t.contiguous().view(n) for t in (v0, s0, b_init, alpha, rho)]
        xf = x.contiguous().view(steps, n)
        spikes, v, b = torch.empty_like(xf), torch.empty_like(xf), torch.empty_like(xf)
        block = _block(n, x.device)
        _alif_fwd_kernel[(triton.cdiv(n, block),)](
            xf, *flat, spikes, v, b, steps, n, float(b0), float(beta), float(dt), BLOCK=block
        )
        ctx.save_for_backward(xf, *flat, spikes, v, b)
        ctx.cfg = (shape, float(b0), float(beta), float(dt), surrogate)
        return spikes.view(shape), v[-1].view(shape[1:]), b[-1].view(shape[1:])

    @staticmethod
    def backward(ctx: Any, g_spikes: Any, g_vt: Any, g_bt: Any) -> tuple[Any, ...]:
        xf, v0, s0, bi, a, r, spikes, v, b = ctx.saved_tensors
        shape, b0, beta, dt, surrogate = ctx.cfg
        steps, n = xf.shape
        gs = torch.zeros_like(xf) if g_spikes is None else g_spikes.contiguous().view(steps, n)
        gvt = torch.zeros_like(v0) if g_vt is None else g_vt.contiguous().view(n)
        gbt = torch.zeros_like(v0) if g_bt is None else g_bt.contiguous().view(n)
        gx = torch.empty_like(xf)
        gv0, gs0, gbi, ga, gr = (torch.empty_like(v0) for _ in range(5))
        p0, p1 = surrogate.values
        block = _block(n, xf.device)
        _alif_bwd_kernel[(triton.cdiv(n, block),)](
            gs,
            gvt,
            gbt,
            xf,
            v0,
            s0,
            bi,
            a,
            r,
            spikes,
            v,
            b,
            gx,
            gv0,
            gs0,
            gbi,
            ga,
            gr,
            steps,
            n,
            b0,
            beta,
            dt,
            float(p0),
            float(p1),
            SURR=SURROGATE_CODES[surrogate.name],
            BLOCK=block,
        )
        inner = shape[1:]
        return (
            gx.view(shape),
            gv0.view(inner),
            gs0.view(inner),
            gbi.view(inner),
            ga.view(inner),
            gr.view(inner),
            None,
            None,
            None,
            None,
        )


def alif_multistep_triton(
    x: torch.Tensor,
    v0: torch.Tensor,
    s0: torch.Tensor,
    b_init: torch.Tensor,
    alpha: torch.Tensor,
    rho: torch.Tensor,
    b0: float,
    beta: float,
    dt: float,
    surrogate: Surrogate,
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Triton twin of `.reference.alif_multistep_reference` (same arguments and results).

    For a feed-forward ALIF layer whose currents ``x: (T, ...)`` (float32) are known in advance;
    returns ``(spikes (T, ...), (v_T, s_T, b_T))``, differentiable in ``x``, the state, α and ρ.
    """
    if not triton_available():  # pragma: no cover - dispatch never selects it then
        raise RuntimeError("triton is not installed (pip install 'iclr25-core[triton]')")
    inner = x.shape[1:]
    if x.shape[0] == 0:
        return x.new_zeros(x.shape), (v0.expand(inner), s0.expand(inner), b_init.expand(inner))
    spikes, v, b = _ALIFMultistepTriton.apply(
        x,
        *(t.to(x.dtype).expand(inner) for t in (v0, s0, b_init, alpha, rho)),
        b0,
        beta,
        dt,
        surrogate,
    )
    return spikes, (v, spikes[-1], b)


class _GIFEncodeTriton(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any,
        x: torch.Tensor,
        theta: torch.Tensor,
        steps: int,
        lo: int,
        hi: int,
        offset: float,
        constant: bool,
        reset: str,
        surrogate: Surrogate,
    ) -> torch.Tensor:
        shape, n = x.shape, x.numel()
        xf, thf = x.contiguous().view(n), theta.contiguous().view(n)
        spikes = torch.empty((steps, n), dtype=x.dtype, device=x.device)
        save_u = any(ctx.needs_input_grad[:2])
        u = torch.empty_like(spikes) if save_u else spikes  # u_ptr unused when SAVE_U is False
        block = _block(n, x.device)
        _gif_fwd_kernel[(triton.cdiv(n, block),)](
            xf,
            thf,
            spikes,
            u,
            steps,
            n,
            float(lo),
            float(hi),
            float(offset),
            CONSTANT=bool(constant),
            HARD=reset == "hard",
            SAVE_U=save_u,
            BLOCK=block,
            # no fused multiply-add in u - θ s: the torch loop rounds θ s first (ignored by the interpreter)
            enable_fp_fusion=False,
        )
        if save_u:
            ctx.save_for_backward(thf, spikes, u)
        ctx.cfg = (shape, int(lo), int(hi), float(offset), bool(constant), reset, surrogate)
        return spikes.view(steps, *shape)

    @staticmethod
    def backward(ctx: Any, g_spikes: torch.Tensor) -> tuple[Any, ...]:
        thf, spikes, u = ctx.saved_tensors
        shape, lo, hi, offset, constant, reset, surrogate = ctx.cfg
        steps, n = spikes.shape
        gs = g_spikes.contiguous().view(steps, n)
        gx, gth = torch.empty_like(thf), torch.empty_like(thf)
        p0, p1 = surrogate.values
        block = _block(n, thf.device)
        _gif_bwd_kernel[(triton.cdiv(n, block),)](
            gs,
            thf,
            spikes,
            u,
            gx,
            gth,
            steps,
            n,
            lo,
            hi,
            offset,
            lo - offset,
            hi + 1 - offset,
            float(p0),
            float(p1),
            CONSTANT=constant,
            HARD=reset == "hard",
            SURR=SURROGATE_CODES[surrogate.name],
            BLOCK=block,
            enable_fp_fusion=False,
        )
        gx_out = gx.view(shape) if ctx.needs_input_grad[0] else None
        gth_out = gth.view(shape) if ctx.needs_input_grad[1] else None
        return gx_out, gth_out, None, None, None, None, None, None, None


def gif_encode_triton(
    x: torch.Tensor,
    theta: torch.Tensor,
    steps: int,
    lo: int,
    hi: int,
    offset: float,
    constant: bool,
    reset: str,
    surrogate: Surrogate,
) -> torch.Tensor:
    """Triton twin of `.reference.gif_encode_reference` (same arguments and result).

    ``x: (...)`` float32, ``theta`` a tensor broadcastable to ``x``; returns spikes
    ``(steps, *x.shape)``, differentiable in ``x`` and ``theta`` (one launch forward, one backward).
    """
    if not triton_available():  # pragma: no cover - dispatch never selects it then
        raise RuntimeError("triton is not installed (pip install 'iclr25-core[triton]')")
    # the expand is differentiable: autograd sums the per-element θ gradient back to theta's shape.
    # An empty x goes through the node too (a launch of 0 programs): its empty result stays
    # differentiable in x and theta, as the torch loop's is
    return _GIFEncodeTriton.apply(
        x, theta.to(x.dtype).expand(x.shape), steps, lo, hi, offset, constant, reset, surrogate
    )
