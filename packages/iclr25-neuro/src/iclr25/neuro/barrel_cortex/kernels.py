"""Triton fused recurrent steps of the constrained network: spike-driven product + ALIF, with BPTT.

Forward, one launch per time step: one program per (``BLOCK_B`` batch rows, ``BLOCK_N``
postsynaptic neurons) walks the presynaptic axis in chunks of ``BLOCK_K``; a chunk whose previous
spikes are all zero in those rows is skipped before its weight tile is read (spike-driven),
otherwise a full-fp32 ``tl.dot`` adds it. The ALIF update (``b``, threshold, reset by the previous
spike, strict ``>`` firing) runs on the accumulated current in registers, replacing the dense
``s @ W`` plus ~8 elementwise launches of the torch step.

Training (`recurrent_alif_triton`, one autograd node for all T steps)::

    forward   t = 0..T-1:  I_t = drive_t + s_{t-1} @ W ;  (s_t, v_t, b_t) = ALIF(I_t)   [kernel]
              stores s_t, v_t, b_t, I_t  (T, B, n) each; nothing else
    backward  t = T-1..0:  elementwise kernel: surrogate σ'(v_t - B_t), adjoints of v, b and the
                           reset/adaptation paths of s_{t-1}; writes g_I[t], accumulates the
                           α, ρ terms per (row, neuron)
                           g_s_{t-1} += g_I[t] @ Wᵀ                                   [cuBLAS]
              then         grad W = Σ_t s_{t-1}ᵀ g_I[t]  as one (n, (T-1)·B) @ ((T-1)·B, n) product
                           plus the t = 0 term s_0ᵀ g_I[0]

The backward is the exact adjoint of `iclr25.neuro.spiking.reference.alif_update` (same surrogate,
same parameters), so the gradients equal the torch step's up to float rounding; one node for the
whole sequence replaces ~30 autograd nodes per step and T separate ``(n, n)`` weight-gradient
products and accumulations. ``product="dense"`` computes ``s @ W`` with cuBLAS instead and keeps the
fused ALIF update and the same backward (for GPUs or firing rates where the dense product wins).
On CUDA the forward tile shape is autotuned per (batch, n). Import guarded: without Triton this
module defines nothing callable. ``TRITON_INTERPRET=1`` runs it on CPU tensors (tests; also in
float64 there).
"""

from __future__ import annotations

from typing import Any

import torch

from iclr25.core.triton import triton_available
from iclr25.neuro.spiking import Surrogate

__all__ = ["recurrent_alif_step_triton", "recurrent_alif_triton"]

_BLOCK_B, _BLOCK_N, _BLOCK_K = 16, 64, 32
_BLOCK_EW = 1024  # elementwise backward: elements per program

if triton_available():
    import triton
    import triton.language as tl

    # one surrogate implementation for every spiking kernel of the package
    from iclr25.neuro.spiking.kernels import SURROGATE_CODES, _alif_adjoint_step

    @triton.jit
    def _recurrent_alif_step_kernel(
        s_ptr, w_ptr, drive_ptr, v_ptr, b_ptr, alpha_ptr, rho_ptr,
        s_out_ptr, v_out_ptr, b_out_ptr, i_out_ptr,
        batch, n, b0, beta, dt,
        PRODUCT: tl.constexpr, STORE_I: tl.constexpr,
        BLOCK_B: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    ):  # fmt: skip
        rows = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
        cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
        rmask = rows < batch
        cmask = cols < n
        row_base = rows.to(tl.int64)[:, None] * n
        # accumulate in the inputs' precision (float32 on GPU; float64 only in interpreter tests)
        acc = tl.zeros([BLOCK_B, BLOCK_N], dtype=s_ptr.dtype.element_ty)
        if PRODUCT:  # else drive_ptr already holds the whole current (product done by cuBLAS)
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
        # operation order of reference.alif_update (bitwise-equal elementwise arithmetic)
        b = rho * b + (1.0 - rho) * s
        big_b = b0 + beta * b
        v = v * alpha + (1.0 - alpha) * cur - big_b * s * dt
        s_new = tl.where(v - big_b > 0, 1.0, 0.0)
        tl.store(s_out_ptr + io, s_new, mask=m2)
        tl.store(v_out_ptr + io, v, mask=m2)
        tl.store(b_out_ptr + io, b, mask=m2)
        if STORE_I:
            tl.store(i_out_ptr + io, cur, mask=m2)

    # On a GPU the tile shape is tuned once per (batch, n) (the first call benchmarks these; every
    # config writes the same outputs from the same inputs, so the repeated launches are harmless).
    # The interpreter keeps the fixed _BLOCK_* shape: tuning there would only multiply test time.
    _recurrent_alif_step_tuned = triton.autotune(
        configs=[
            triton.Config({"BLOCK_B": bb, "BLOCK_N": bn, "BLOCK_K": bk}, num_warps=nw)
            for bb, bn, bk, nw in (
                (16, 64, 32, 4),
                (32, 64, 32, 4),
                (16, 128, 32, 4),
                (32, 128, 32, 8),
                (64, 64, 32, 4),
                (64, 128, 32, 8),
            )
        ],
        key=["batch", "n"],
    )(_recurrent_alif_step_kernel)

    @triton.jit
    def _recurrent_alif_bwd_kernel(
        g_out_ptr, gs_ptr, gv_ptr, gb_ptr,
        v_ptr, b_ptr, vp_ptr, bp_ptr, sp_ptr, i_ptr, alpha_ptr, rho_ptr,
        gi_ptr, ga_ptr, gr_ptr,
        total, n, b0, beta, dt, p0, p1,
        SURR: tl.constexpr, BLOCK: tl.constexpr,
    ):  # fmt: skip
        # one reverse step of alif_update for (B, n) flattened; gs, gv, gb hold the adjoints of
        # (s_t, v_t, b_t) on entry and those of (s_{t-1} without the W path, v_{t-1}, b_{t-1}) on exit
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < total
        cols = offs % n
        a = tl.load(alpha_ptr + cols, mask=mask, other=0.0)
        r = tl.load(rho_ptr + cols, mask=mask, other=0.0)
        v = tl.load(v_ptr + offs, mask=mask, other=0.0)
        b = tl.load(b_ptr + offs, mask=mask, other=0.0)
        vp = tl.load(vp_ptr + offs, mask=mask, other=0.0)
        bp = tl.load(bp_ptr + offs, mask=mask, other=0.0)
        sp = tl.load(sp_ptr + offs, mask=mask, other=0.0)
        cur = tl.load(i_ptr + offs, mask=mask, other=0.0)
        g_s = tl.load(g_out_ptr + offs, mask=mask, other=0.0) + tl.load(gs_ptr + offs, mask=mask, other=0.0)
        cv = tl.load(gv_ptr + offs, mask=mask, other=0.0)
        cb = tl.load(gb_ptr + offs, mask=mask, other=0.0)
        gi, dga, dgr, cv, cb, cs = _alif_adjoint_step(
            g_s, cv, cb, v, b, vp, bp, sp, cur, a, r, b0, beta, dt, SURR, p0, p1
        )
        tl.store(gi_ptr + offs, gi, mask=mask)
        tl.store(ga_ptr + offs, tl.load(ga_ptr + offs, mask=mask, other=0.0) + dga, mask=mask)
        tl.store(gr_ptr + offs, tl.load(gr_ptr + offs, mask=mask, other=0.0) + dgr, mask=mask)
        tl.store(gv_ptr + offs, cv, mask=mask)
        tl.store(gb_ptr + offs, cb, mask=mask)
        # s_{t-1} feeds the adaptation and the reset (its W path is added by the caller's GEMM)
        tl.store(gs_ptr + offs, cs, mask=mask)


def _describe(t: Any) -> str:
    return f"shape {tuple(t.shape)}" if isinstance(t, torch.Tensor) else type(t).__name__


def _check_args(drive: torch.Tensor, args: dict[str, Any], expected: dict[str, tuple[int, ...]]) -> None:
    """Exact shapes (the kernels index them, they do not broadcast) and ``drive``'s float32/float64 dtype and device."""
    if drive.dtype not in (torch.float32, torch.float64):
        raise ValueError(f"drive must be float32 (or float64), got {drive.dtype}")
    for name, t in args.items():
        if not isinstance(t, torch.Tensor) or tuple(t.shape) != expected[name]:
            raise ValueError(
                f"{name} must have shape {expected[name]} for drive {tuple(drive.shape)}, got {_describe(t)}"
            )
        if t.dtype != drive.dtype or t.device != drive.device:
            raise ValueError(
                f"{name} must match drive's dtype/device ({drive.dtype}, {drive.device}), got ({t.dtype}, {t.device})"
            )


def _launch_step(
    s: torch.Tensor,
    w: torch.Tensor,
    drive: torch.Tensor,
    v: torch.Tensor,
    b: torch.Tensor,
    alpha: torch.Tensor,
    rho: torch.Tensor,
    b0: float,
    beta: float,
    dt: float,
    s_out: torch.Tensor,
    v_out: torch.Tensor,
    b_out: torch.Tensor,
    i_out: torch.Tensor | None,
    product: bool = True,
) -> None:
    # product=False: ``drive`` is the full current I (the caller ran the product), the kernel only
    # does the ALIF update
    batch, n = s.shape
    if batch == 0 or n == 0:
        return
    args = (s, w, drive, v, b, alpha, rho, s_out, v_out, b_out, s_out if i_out is None else i_out)
    consts = (batch, n, float(b0), float(beta), float(dt))
    if s.device.type == "cuda":

        def grid(meta: dict[str, Any]) -> tuple[int, int]:
            return (triton.cdiv(batch, meta["BLOCK_B"]), triton.cdiv(n, meta["BLOCK_N"]))

        _recurrent_alif_step_tuned[grid](*args, *consts, PRODUCT=product, STORE_I=i_out is not None)
        return
    grid_fixed = (triton.cdiv(batch, _BLOCK_B), triton.cdiv(n, _BLOCK_N))
    _recurrent_alif_step_kernel[grid_fixed](
        *args,
        *consts,
        PRODUCT=product,
        STORE_I=i_out is not None,
        BLOCK_B=_BLOCK_B,
        BLOCK_N=_BLOCK_N,
        BLOCK_K=_BLOCK_K,
    )


def _step(
    s: torch.Tensor,
    w: torch.Tensor,
    drive: torch.Tensor,
    v: torch.Tensor,
    b: torch.Tensor,
    alpha: torch.Tensor,
    rho: torch.Tensor,
    b0: float,
    beta: float,
    dt: float,
    outs: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    i_out: torch.Tensor | None,
    product: str,
) -> None:
    """One step into ``outs = (s, v, b)`` (and ``i_out``: the current), with the product in the kernel or by cuBLAS."""
    if product == "spike_driven":
        _launch_step(s, w, drive, v, b, alpha, rho, b0, beta, dt, *outs, i_out)
        return
    cur = torch.addmm(drive, s, w) if i_out is None else torch.addmm(drive, s, w, out=i_out)
    _launch_step(s, w, cur, v, b, alpha, rho, b0, beta, dt, *outs, None, product=False)


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

    Not differentiable (no autograd node): the single-step kernel for inference; training goes
    through `recurrent_alif_triton`.

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

    Raises
    ------
    ValueError
        Shapes, dtypes or devices that do not agree (nothing is broadcast: the kernel indexes them).
    """
    if not isinstance(drive, torch.Tensor) or drive.ndim != 2:
        raise ValueError(f"drive must be a (B, n) tensor, got {_describe(drive)}")
    batch, n = drive.shape
    _check_args(
        drive,
        {"s": s, "w": w, "v": v, "b": b, "alpha": alpha, "rho": rho},
        {"s": (batch, n), "w": (n, n), "v": (batch, n), "b": (batch, n), "alpha": (n,), "rho": (n,)},
    )
    s, w, drive, v, b = (t.detach().contiguous() for t in (s, w, drive, v, b))
    alpha, rho = alpha.detach().contiguous(), rho.detach().contiguous()
    s_out, v_out, b_out = torch.empty_like(s), torch.empty_like(v), torch.empty_like(b)
    _launch_step(s, w, drive, v, b, alpha, rho, b0, beta, dt, s_out, v_out, b_out, None)
    return s_out, v_out, b_out


class _RecurrentALIFTriton(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any,
        drive: torch.Tensor,
        w: torch.Tensor,
        v0: torch.Tensor,
        s0: torch.Tensor,
        b_init: torch.Tensor,
        alpha: torch.Tensor,
        rho: torch.Tensor,
        b0: float,
        beta: float,
        dt: float,
        surrogate: Surrogate,
        product: str,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        steps = drive.shape[0]
        spikes, v, b, cur = (torch.empty_like(drive) for _ in range(4))
        s_prev, v_prev, b_prev = s0, v0, b_init
        for t in range(steps):
            _step(
                s_prev, w, drive[t], v_prev, b_prev, alpha, rho, b0, beta, dt, (spikes[t], v[t], b[t]), cur[t], product
            )
            s_prev, v_prev, b_prev = spikes[t], v[t], b[t]
        # the (T, B, n) spikes are the output anyway: saving them costs no memory; v, b and I are
        # the only extra storage (the torch step keeps ~6 tensors of this size per step)
        ctx.save_for_backward(w, v0, s0, b_init, alpha, rho, spikes, v, b, cur)
        ctx.cfg = (float(b0), float(beta), float(dt), surrogate)
        return spikes, v[-1], b[-1]

    @staticmethod
    def backward(ctx: Any, g_spikes: Any, g_vt: Any, g_bt: Any) -> tuple[Any, ...]:
        w, v0, s0, b_init, alpha, rho, spikes, v, b, cur = ctx.saved_tensors
        b0, beta, dt, surrogate = ctx.cfg
        steps, batch, n = spikes.shape
        g_out = torch.zeros_like(spikes) if g_spikes is None else g_spikes.contiguous()
        gv = torch.zeros_like(v0) if g_vt is None else g_vt.contiguous().clone()
        gb = torch.zeros_like(v0) if g_bt is None else g_bt.contiguous().clone()
        gs = torch.zeros_like(v0)
        g_cur = torch.empty_like(spikes)  # = grad of the drive, and the right factor of grad W
        ga, gr = torch.zeros_like(v0), torch.zeros_like(v0)
        p0, p1 = surrogate.values
        total = batch * n
        grid = (triton.cdiv(total, _BLOCK_EW),)
        wt = w.t()
        for t in range(steps - 1, -1, -1):
            vp, bp, sp = (v[t - 1], b[t - 1], spikes[t - 1]) if t > 0 else (v0, b_init, s0)
            _recurrent_alif_bwd_kernel[grid](
                g_out[t], gs, gv, gb, v[t], b[t], vp, bp, sp, cur[t], alpha, rho, g_cur[t], ga, gr,
                total, n, b0, beta, dt, float(p0), float(p1),
                SURR=SURROGATE_CODES[surrogate.name], BLOCK=_BLOCK_EW,
            )  # fmt: skip
            if ctx.needs_input_grad[3] or t > 0:
                gs.addmm_(g_cur[t], wt)  # I_t = drive_t + s_{t-1} @ W
        grad_w = None
        if ctx.needs_input_grad[1]:
            # Σ_t s_{t-1}ᵀ g_I[t] as one product over the (T-1)·B stacked rows, plus the s0 term
            grad_w = s0.t() @ g_cur[0]
            if steps > 1:
                rows = (steps - 1) * batch  # explicit: reshape(-1, n) is ambiguous for n = 0
                grad_w.addmm_(spikes[:-1].reshape(rows, n).t(), g_cur[1:].reshape(rows, n))
        return g_cur, grad_w, gv, gs, gb, ga.sum(0), gr.sum(0), None, None, None, None, None


def recurrent_alif_triton(
    drive: torch.Tensor,
    w: torch.Tensor,
    v0: torch.Tensor,
    s0: torch.Tensor,
    b_init: torch.Tensor,
    alpha: torch.Tensor,
    rho: torch.Tensor,
    b0: float,
    beta: float,
    dt: float,
    surrogate: Surrogate,
    product: str = "spike_driven",
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """T synchronous steps ``I_t = drive_t + s_{t-1} @ w``, ``(s_t, v_t, b_t) = ALIF(I_t)``, differentiable.

    Equals looping ``alif_update(drive[t] + s @ w, v, s, b, alpha, rho, b0, beta, dt, surrogate)``
    of `iclr25.neuro.spiking.reference` (spikes identical up to the summation order of ``s @ w``;
    gradients equal up to float rounding) in every input: drive, ``w``, the initial state, α and ρ.
    Without gradient (``torch.no_grad`` or no input requiring one) it keeps only the current state.

    Parameters
    ----------
    drive:
        ``(T, B, n)`` external input current.
    w:
        ``(n, n)`` effective recurrent weights (row = pre), e.g. masked, signed and scaled.
    v0, s0, b_init:
        ``(B, n)`` initial membrane, spikes and adaptation.
    alpha, rho:
        ``(n,)`` decay factors ``exp(-dt/τ_m)``, ``exp(-dt/τ_adp)``.
    b0, beta, dt, surrogate:
        As `iclr25.neuro.spiking.reference.alif_update`.
    product:
        ``"spike_driven"``: ``s @ w`` inside the fused kernel, skipping weight tiles whose spikes
        are all zero; ``"dense"``: ``torch.addmm`` (cuBLAS) then the fused ALIF kernel (two
        launches per step; which is faster depends on the GPU and the firing rate, see
        ``benchmarks/barrel_epoch.py``). The backward is the same.

    Returns
    -------
    tuple
        ``spikes (T, B, n)`` and the final state ``(v_T, s_T, b_T)`` each ``(B, n)``.

    Raises
    ------
    ValueError
        Shapes, dtypes or devices that do not agree, or an unknown ``product``.
    """
    if product not in ("spike_driven", "dense"):
        raise ValueError(f"product must be 'spike_driven' or 'dense', got {product!r}")
    if not isinstance(drive, torch.Tensor) or drive.ndim != 3:
        raise ValueError(f"drive must be (T, B, n), got {_describe(drive)}")
    steps, batch, n = drive.shape
    expected = {"w": (n, n), "v0": (batch, n), "s0": (batch, n), "b_init": (batch, n), "alpha": (n,), "rho": (n,)}
    _check_args(drive, {"w": w, "v0": v0, "s0": s0, "b_init": b_init, "alpha": alpha, "rho": rho}, expected)
    if not triton_available():  # pragma: no cover - dispatch never selects it then
        raise RuntimeError("triton is not installed (pip install 'iclr25-core[triton]')")
    drive, w, v0, s0, b_init, alpha, rho = (t.contiguous() for t in (drive, w, v0, s0, b_init, alpha, rho))
    if steps == 0:
        return drive.new_zeros(drive.shape), (v0, s0, b_init)
    needs_grad = torch.is_grad_enabled() and any(t.requires_grad for t in (drive, w, v0, s0, b_init, alpha, rho))
    if needs_grad:
        spikes, v_t, b_t = _RecurrentALIFTriton.apply(
            drive, w, v0, s0, b_init, alpha, rho, b0, beta, dt, surrogate, product
        )
        return spikes, (v_t, spikes[-1], b_t)
    with torch.no_grad():
        spikes = torch.empty_like(drive)
        s, v, b = s0, v0, b_init
        bufs = [(torch.empty_like(v0), torch.empty_like(v0)) for _ in range(2)]  # ping-pong v, b
        cur = torch.empty_like(v0) if product == "dense" else None
        for t in range(steps):
            v_out, b_out = bufs[t % 2]
            _step(s, w, drive[t], v, b, alpha, rho, b0, beta, dt, (spikes[t], v_out, b_out), cur, product)
            s, v, b = spikes[t], v_out, b_out
        return spikes, (v, s, b)
