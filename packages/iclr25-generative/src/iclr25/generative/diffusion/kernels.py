"""Triton kernel for the ResBlock pre-activation: GroupNorm + FiLM + SiLU in one pass over memory.

One program per (sample, group): the group's ``C/G * HW`` contiguous elements are read twice
(mean/variance, then normalise + FiLM + SiLU + store) instead of the three round trips of separate
GroupNorm, affine and SiLU kernels. The backward pass recomputes the torch reference under
autograd (memory-bound ops are cheap to recompute), so the kernel is forward-only.

Import guarded: without Triton this module defines nothing callable. Set ``TRITON_INTERPRET=1``
before importing it to run the kernel on CPU tensors (slow; used by the tests).
"""

from __future__ import annotations

import torch

from iclr25.core.triton import triton_available

from .reference import groupnorm_film_silu_reference

__all__ = ["groupnorm_film_silu_triton"]

if triton_available():
    import triton
    import triton.language as tl

    @triton.jit
    def _gn_film_silu_kernel(
        x_ptr, w_ptr, b_ptr, sc_ptr, sh_ptr, out_ptr, C, HW, G, cpg, eps,
        HAS_AFFINE: tl.constexpr, HAS_FILM: tl.constexpr, BLOCK: tl.constexpr,
    ):  # fmt: skip
        pid = tl.program_id(0)
        b = pid // G
        g = pid % G
        n = cpg * HW
        base = b * C * HW + g * n
        offs = tl.arange(0, BLOCK)
        acc = tl.zeros((BLOCK,), tl.float32)
        acc2 = tl.zeros((BLOCK,), tl.float32)
        for start in range(0, n, BLOCK):
            idx = start + offs
            m = idx < n
            v = tl.load(x_ptr + base + idx, mask=m, other=0.0).to(tl.float32)
            acc += v
            acc2 += v * v
        mean = tl.sum(acc, axis=0) / n
        var = tl.maximum(tl.sum(acc2, axis=0) / n - mean * mean, 0.0)
        rstd = 1.0 / tl.sqrt(var + eps)
        for start in range(0, n, BLOCK):
            idx = start + offs
            m = idx < n
            c = g * cpg + idx // HW
            v = tl.load(x_ptr + base + idx, mask=m, other=0.0).to(tl.float32)
            h = (v - mean) * rstd
            if HAS_AFFINE:
                h = h * tl.load(w_ptr + c, mask=m, other=1.0) + tl.load(b_ptr + c, mask=m, other=0.0)
            if HAS_FILM:
                h = h * (1.0 + tl.load(sc_ptr + b * C + c, mask=m, other=0.0)) + tl.load(
                    sh_ptr + b * C + c, mask=m, other=0.0
                )
            y = h / (1.0 + tl.exp(-h))
            tl.store(out_ptr + base + idx, y.to(out_ptr.dtype.element_ty), mask=m)

    def _forward(x, num_groups, weight, bias, scale, shift, eps):
        x = x.contiguous()
        B, C = x.shape[0], x.shape[1]
        hw = x[0, 0].numel()
        out = torch.empty_like(x)
        if x.numel() == 0:
            return out
        cpg = C // num_groups
        has_aff = weight is not None
        has_film = scale is not None
        w = weight.contiguous() if has_aff else x
        bb = bias.contiguous() if has_aff else x
        sc = scale.contiguous() if has_film else x
        sh = shift.contiguous() if has_film else x
        block = min(4096, triton.next_power_of_2(max(cpg * hw, 16)))
        _gn_film_silu_kernel[(B * num_groups,)](
            x, w, bb, sc, sh, out, C, hw, num_groups, cpg, eps,
            HAS_AFFINE=has_aff, HAS_FILM=has_film, BLOCK=block,
        )  # fmt: skip
        return out

    class _Fused(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, num_groups, weight, bias, scale, shift, eps):
            ctx.save_for_backward(x, weight, bias, scale, shift)
            ctx.num_groups, ctx.eps = num_groups, eps
            return _forward(x, num_groups, weight, bias, scale, shift, eps)

        @staticmethod
        def backward(ctx, grad):
            _x, _weight, _bias, _scale, _shift = ctx.saved_tensors
            inputs = [t.detach().requires_grad_(t.requires_grad) if t is not None else None for t in ctx.saved_tensors]
            with torch.enable_grad():
                y = groupnorm_film_silu_reference(inputs[0], ctx.num_groups, *inputs[1:], eps=ctx.eps)
                need = [t for t in inputs if t is not None and t.requires_grad]
                grads = iter(torch.autograd.grad(y, need, grad, allow_unused=True)) if need else iter(())
            out = [next(grads) if t is not None and t.requires_grad else None for t in inputs]
            return out[0], None, out[1], out[2], out[3], out[4], None

    def groupnorm_film_silu_triton(x, num_groups, weight, bias, scale, shift, eps=1e-5):
        """Fused SiLU(GroupNorm(x) * (1 + scale) + shift); same arguments as the reference."""
        return _Fused.apply(x, num_groups, weight, bias, scale, shift, eps)
