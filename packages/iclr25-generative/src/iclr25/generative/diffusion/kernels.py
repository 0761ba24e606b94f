"""Triton kernels for the ResBlock pre-activation y = SiLU(GroupNorm(x) * (1 + scale) + shift).

Forward and backward are both fused, one program per (sample, group). The group's ``C/G * HW``
contiguous elements are viewed as a ``[channels-in-group, HW]`` tile so per-channel terms (GroupNorm
affine, FiLM scale/shift) are loaded once per program and folded into one multiply-add per element:
``h = x * a[c] + k0[c]`` with ``a = rstd w (1 + scale)`` and ``k0 = (bias - mean rstd w)(1 + scale) + shift``.

- forward: pass 1 reads x for the statistics, pass 2 reads x again (mostly from L2) and writes y.
  Only x and the per-(sample, group) mean / rstd are saved for backward, not the three
  intermediate activations that the unfused autograd graph keeps.
- backward: pass 1 reads x and dy and reduces, per (sample, channel), ``A = sum dh`` and
  ``Bq = sum dh * xhat`` (dh = dL/dh through the SiLU); these give every parameter gradient
  (``dshift = A``, ``dscale = w Bq + bias A``, ``dweight = sum_b (1 + scale) Bq``,
  ``dbias = sum_b (1 + scale) A``), which the kernel writes itself (dweight/dbias as per-sample
  terms that one torch sum reduces over the batch). Pass 2 rereads x and dy and writes
  ``dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat))``, the GroupNorm input gradient.
  The backward is not itself differentiable: it raises under ``create_graph=True`` (double
  backward, gradient penalties) rather than return gradients without a graph.

Statistics use sums shifted by the group's first element: var = E[(x-p)^2] - E[x-p]^2 keeps full
precision when the mean is large compared with the spread (where plain E[x^2] - E[x]^2 cancels).

Import guarded: without Triton this module defines nothing callable. Set ``TRITON_INTERPRET=1``
before importing it to run the kernels on CPU tensors (slow; used by the tests).
"""

from __future__ import annotations

import torch

from iclr25.core.triton import triton_available

__all__ = ["MAX_CHANNELS_PER_GROUP", "groupnorm_film_silu_triton"]

#: Largest ``C / num_groups`` the kernels take: the per-channel vectors of a group live in registers.
MAX_CHANNELS_PER_GROUP = 1024
# elements of one [channels, HW] tile; 4096 fp32 = 16 KB of registers per program (8 warps)
_TILE = 4096
_WARPS: int | None = None  # None: 8 warps for full tiles, 4 for small ones

if triton_available():
    import triton
    import triton.language as tl

    @triton.jit
    def _channel_terms(w_ptr, b_ptr, sc_ptr, sh_ptr, b, sc_stride, c, cm, mean, rstd,
                       HAS_AFFINE: tl.constexpr, HAS_FILM: tl.constexpr):  # fmt: skip
        # per-channel (a, k0) of h = x * a + k0, and k = dh -> dxhat factor w (1 + scale)
        zero = tl.zeros_like(c).to(tl.float32)
        w = zero + 1.0
        bb = zero
        f = zero + 1.0
        k0 = zero - mean * rstd
        if HAS_AFFINE:
            w = tl.load(w_ptr + c, mask=cm, other=1.0).to(tl.float32)
            bb = tl.load(b_ptr + c, mask=cm, other=0.0).to(tl.float32)
            k0 = bb - mean * rstd * w
        k = w
        if HAS_FILM:
            f = 1.0 + tl.load(sc_ptr + b * sc_stride + c, mask=cm, other=0.0).to(tl.float32)
            sh = tl.load(sh_ptr + b * sc_stride + c, mask=cm, other=0.0).to(tl.float32)
            k = w * f
            k0 = k0 * f + sh
        return k * rstd, k0, k, w, bb, f

    @triton.jit
    def _gn_film_silu_fwd(
        x_ptr, w_ptr, b_ptr, sc_ptr, sh_ptr, y_ptr, mean_ptr, rstd_ptr, sc_stride, C, HW, G, cpg, eps,
        HAS_AFFINE: tl.constexpr, HAS_FILM: tl.constexpr, CPG: tl.constexpr, BLOCK_HW: tl.constexpr,
    ):  # fmt: skip
        pid = tl.program_id(0)
        b = pid // G
        g = pid % G
        base = b.to(tl.int64) * C * HW + g * cpg * HW
        ci = tl.arange(0, CPG)
        cm = ci < cpg
        hw = tl.arange(0, BLOCK_HW)
        rows = ci[:, None] * HW
        pivot = tl.load(x_ptr + base).to(tl.float32)
        acc = tl.zeros((CPG, BLOCK_HW), tl.float32)
        acc2 = tl.zeros((CPG, BLOCK_HW), tl.float32)
        for start in range(0, HW, BLOCK_HW):
            o = start + hw
            m = cm[:, None] & (o < HW)[None, :]
            v = tl.load(x_ptr + base + rows + o[None, :], mask=m, other=0.0).to(tl.float32)
            d = tl.where(m, v - pivot, 0.0)
            acc += d
            acc2 += d * d
        n = cpg * HW
        d1 = tl.sum(tl.sum(acc, axis=1), axis=0) / n
        var = tl.maximum(tl.sum(tl.sum(acc2, axis=1), axis=0) / n - d1 * d1, 0.0)
        mean = pivot + d1
        rstd = 1.0 / tl.sqrt(var + eps)
        tl.store(mean_ptr + pid, mean)
        tl.store(rstd_ptr + pid, rstd)
        a, k0, _k, _w, _bb, _f = _channel_terms(
            w_ptr, b_ptr, sc_ptr, sh_ptr, b, sc_stride, g * cpg + ci, cm, mean, rstd, HAS_AFFINE, HAS_FILM
        )
        for start in range(0, HW, BLOCK_HW):
            o = start + hw
            m = cm[:, None] & (o < HW)[None, :]
            v = tl.load(x_ptr + base + rows + o[None, :], mask=m, other=0.0).to(tl.float32)
            h = v * a[:, None] + k0[:, None]
            y = h / (1.0 + tl.exp(-h))
            tl.store(y_ptr + base + rows + o[None, :], y.to(y_ptr.dtype.element_ty), mask=m)

    @triton.jit
    def _gn_film_silu_bwd(
        x_ptr, dy_ptr, w_ptr, b_ptr, sc_ptr, sh_ptr, mean_ptr, rstd_ptr, dx_ptr, dsc_ptr, dsh_ptr, pwb_ptr,
        sc_stride, B, C, HW, G, cpg,
        HAS_AFFINE: tl.constexpr, HAS_FILM: tl.constexpr, CPG: tl.constexpr, BLOCK_HW: tl.constexpr,
    ):  # fmt: skip
        pid = tl.program_id(0)
        b = pid // G
        g = pid % G
        base = b.to(tl.int64) * C * HW + g * cpg * HW
        ci = tl.arange(0, CPG)
        cm = ci < cpg
        c = g * cpg + ci
        hw = tl.arange(0, BLOCK_HW)
        rows = ci[:, None] * HW
        mean = tl.load(mean_ptr + pid)
        rstd = tl.load(rstd_ptr + pid)
        a, k0, k, w, bb, f = _channel_terms(
            w_ptr, b_ptr, sc_ptr, sh_ptr, b, sc_stride, c, cm, mean, rstd, HAS_AFFINE, HAS_FILM
        )
        acc_a = tl.zeros((CPG, BLOCK_HW), tl.float32)
        acc_b = tl.zeros((CPG, BLOCK_HW), tl.float32)
        for start in range(0, HW, BLOCK_HW):
            o = start + hw
            m = cm[:, None] & (o < HW)[None, :]
            off = base + rows + o[None, :]
            v = tl.load(x_ptr + off, mask=m, other=0.0).to(tl.float32)
            dy = tl.load(dy_ptr + off, mask=m, other=0.0).to(tl.float32)
            h = v * a[:, None] + k0[:, None]
            s = 1.0 / (1.0 + tl.exp(-h))
            dh = dy * s * (1.0 + h * (1.0 - s))  # masked lanes: dy = 0 so dh = 0
            acc_a += dh
            acc_b += dh * ((v - mean) * rstd)
        sum_a = tl.sum(acc_a, axis=1)
        sum_b = tl.sum(acc_b, axis=1)
        # parameter gradients straight from the per-channel sums: no extra torch launches afterwards
        if HAS_FILM:
            tl.store(dsh_ptr + b * C + c, sum_a.to(dsh_ptr.dtype.element_ty), mask=cm)
            tl.store(dsc_ptr + b * C + c, (w * sum_b + bb * sum_a).to(dsc_ptr.dtype.element_ty), mask=cm)
        if HAS_AFFINE:  # per-sample terms of dweight, dbias; summed over the batch by one torch op
            tl.store(pwb_ptr + b * C + c, f * sum_b, mask=cm)
            tl.store(pwb_ptr + B * C + b * C + c, f * sum_a, mask=cm)
        n = cpg * HW
        c1 = tl.sum(k * sum_a, axis=0) / n  # mean over the group of dxhat
        c2 = tl.sum(k * sum_b, axis=0) / n  # mean over the group of dxhat * xhat
        for start in range(0, HW, BLOCK_HW):
            o = start + hw
            m = cm[:, None] & (o < HW)[None, :]
            off = base + rows + o[None, :]
            v = tl.load(x_ptr + off, mask=m, other=0.0).to(tl.float32)
            dy = tl.load(dy_ptr + off, mask=m, other=0.0).to(tl.float32)
            h = v * a[:, None] + k0[:, None]
            s = 1.0 / (1.0 + tl.exp(-h))
            dh = dy * s * (1.0 + h * (1.0 - s))
            xhat = (v - mean) * rstd
            dx = rstd * (dh * k[:, None] - c1 - xhat * c2)
            tl.store(dx_ptr + off, dx.to(dx_ptr.dtype.element_ty), mask=m)

    def _rowwise(t: torch.Tensor | None) -> torch.Tensor | None:
        # FiLM terms usually arrive as chunk() views of a (B, 2C) tensor: unit channel stride, any
        # row stride; only copy when that does not hold
        if t is None or t.stride(-1) == 1:
            return t
        return t.contiguous()

    def _launch_shape(cpg: int, hw: int) -> tuple[int, int, int]:
        cpg_p = triton.next_power_of_2(cpg)
        block_hw = max(1, min(triton.next_power_of_2(hw), _TILE // cpg_p))
        warps = _WARPS or (8 if cpg_p * block_hw >= 2048 else 4)
        return cpg_p, block_hw, warps

    class _Fused(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, num_groups, weight, bias, scale, shift, eps):
            x = x.contiguous()
            if weight is not None:
                weight, bias = weight.contiguous(), bias.contiguous()
            scale, shift = _rowwise(scale), _rowwise(shift)
            if scale is not None and scale.stride(0) != shift.stride(0):
                scale, shift = scale.contiguous(), shift.contiguous()
            B, C = x.shape[0], x.shape[1]
            hw = x[0, 0].numel() if x.numel() else 0
            y = torch.empty_like(x)
            mean, rstd = torch.empty(2, B * num_groups, device=x.device, dtype=torch.float32)
            has_aff, has_film = weight is not None, scale is not None
            if x.numel():
                cpg = C // num_groups
                cpg_p, block_hw, warps = _launch_shape(cpg, hw)
                _gn_film_silu_fwd[(B * num_groups,)](
                    x, weight if has_aff else x, bias if has_aff else x, scale if has_film else x,
                    shift if has_film else x, y, mean, rstd, scale.stride(0) if has_film else 0,
                    C, hw, num_groups, cpg, eps,
                    HAS_AFFINE=has_aff, HAS_FILM=has_film, CPG=cpg_p, BLOCK_HW=block_hw, num_warps=warps,
                )  # fmt: skip
            ctx.save_for_backward(x, weight, bias, scale, shift, mean, rstd)
            ctx.num_groups = num_groups
            return y

        @staticmethod
        def backward(ctx, dy):
            if torch.is_grad_enabled():  # create_graph=True: the kernel's gradients would silently carry no graph
                raise RuntimeError(
                    "the fused Triton backward of groupnorm_film_silu is not differentiable "
                    "(create_graph=True / double backward); use backend='reference'"
                )
            x, weight, bias, scale, shift, mean, rstd = ctx.saved_tensors
            G = ctx.num_groups
            dy = dy.contiguous()
            B, C = x.shape[0], x.shape[1]
            hw = x[0, 0].numel() if x.numel() else 0
            has_aff, has_film = weight is not None, scale is not None
            dx = torch.empty_like(x)
            # the kernel writes every entry of these (masked lanes are padding only): no zero fill
            dsc = torch.empty(B, C, device=x.device, dtype=scale.dtype) if has_film else None
            dsh = torch.empty(B, C, device=x.device, dtype=shift.dtype) if has_film else None
            pwb = torch.empty(2, B, C, device=x.device, dtype=torch.float32) if has_aff else None
            if x.numel():
                cpg = C // G
                cpg_p, block_hw, warps = _launch_shape(cpg, hw)
                _gn_film_silu_bwd[(B * G,)](
                    x, dy, weight if has_aff else x, bias if has_aff else x, scale if has_film else x,
                    shift if has_film else x, mean, rstd, dx, dsc if has_film else x, dsh if has_film else x,
                    pwb if has_aff else x, scale.stride(0) if has_film else 0, B, C, hw, G, cpg,
                    HAS_AFFINE=has_aff, HAS_FILM=has_film, CPG=cpg_p, BLOCK_HW=block_hw, num_warps=warps,
                )  # fmt: skip
            elif has_film:
                dsc.zero_()
                dsh.zero_()
            dw = db = None
            if has_aff:
                dwb = pwb.sum(1) if x.numel() else torch.zeros(2, C, device=x.device)
                dw, db = dwb[0].to(weight.dtype), dwb[1].to(bias.dtype)
            return dx, None, dw, db, dsc, dsh, None

    def groupnorm_film_silu_triton(
        x: torch.Tensor,
        num_groups: int,
        weight: torch.Tensor | None,
        bias: torch.Tensor | None,
        scale: torch.Tensor | None,
        shift: torch.Tensor | None,
        eps: float = 1e-5,
    ) -> torch.Tensor:
        """Fused SiLU(GroupNorm(x) * (1 + scale) + shift) with a fused backward.

        Same arguments and result as
        :func:`~iclr25.generative.diffusion.reference.groupnorm_film_silu_reference`.
        """
        # Python scalars for the launch (numpy ints/floats are not valid kernel arguments)
        return _Fused.apply(x, int(num_groups), weight, bias, scale, shift, float(eps))
