"""The public batched soft value-iteration op with reference / Triton backends."""

from __future__ import annotations

from typing import Any

from iclr25.core.triton import Backend, BackendOp

from .reference import batched_soft_vi_reference, check_soft_vi_args

__all__ = ["batched_soft_vi"]

_MAX_S = 64  # the (S, A, S) tile lives in registers of one program


def _limits(P: Any, r: Any, gamma: float, temp: float, iters: int) -> list[str]:
    import torch

    reasons: list[str] = []
    if not isinstance(r, torch.Tensor) or not isinstance(P, torch.Tensor):
        return ["the kernel needs torch tensors"]
    if r.dtype not in (torch.float32, torch.float64):
        reasons.append(f"the kernel supports float32/float64, got {r.dtype}")
    if r.ndim == 3 and (r.shape[1] > _MAX_S or r.shape[2] > 8):
        reasons.append(f"the kernel supports S <= {_MAX_S} and A <= 8, got S={r.shape[1]}, A={r.shape[2]}")
    if torch.is_grad_enabled() and (r.requires_grad or P.requires_grad):
        reasons.append("the kernel is forward-only (no autograd); r or P requires grad")
    return reasons


def _triton(P: Any, r: Any, gamma: float, temp: float, iters: int) -> Any:
    from .kernels import batched_soft_vi_triton

    check_soft_vi_args(P, r, gamma, temp, iters)
    return batched_soft_vi_triton(P, r, gamma, temp, iters)


batched_soft_vi = BackendOp(
    "aihf.batched_soft_vi",
    [Backend("triton", _triton, supports=_limits, uses_triton=True), Backend("reference", batched_soft_vi_reference)],
)
batched_soft_vi.__doc__ = """Batched soft value iteration.

See :func:`~iclr25.rl.aihf.reference.batched_soft_vi_reference`.

Call as ``batched_soft_vi(P (S, A, S), r (B, S, A), gamma, temp, iters, backend="auto")`` -> V (B, S).
``auto`` picks the fused Triton kernel for CUDA tensors and the reference otherwise. It also falls back to
the reference when r or P requires grad (the kernel is forward-only), when r is not float32/float64, or
when S > 64 or A > 8.
"""
