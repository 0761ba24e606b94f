"""The public per-infoset step op: ``omd_step(..., backend="auto" | "reference" | "triton")``."""

from __future__ import annotations

from typing import Any

from iclr25.core.triton import Backend, BackendOp

from .reference import omd_step_reference

__all__ = ["omd_step"]


def _triton_limits(ref: Any, g: Any, divisor: Any, mask: Any, *args: Any, **kwargs: Any) -> list[str]:
    import torch

    reasons = []
    regularizer = kwargs.get("regularizer", args[2] if len(args) > 2 else "entropy")
    if regularizer != "entropy":
        reasons.append(f"the kernel implements regularizer='entropy' only, got {regularizer!r}")
    if not isinstance(ref, torch.Tensor):
        reasons.append(f"the kernel needs torch tensors, got {type(ref).__name__}")
        return reasons
    if ref.dtype not in (torch.float32, torch.float64):
        reasons.append(f"the kernel supports float32/float64, got {ref.dtype}")
    if torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad for t in (ref, g, divisor)):
        reasons.append("the kernel is forward-only (no autograd); ref, g or divisor requires grad")
    cols = torch.arange(mask.shape[1], device=mask.device)
    if not bool(torch.equal(mask, cols[None, :] < mask.sum(1, keepdim=True))):
        reasons.append("the kernel needs legal actions to be a prefix of each row")
    return reasons


def _triton(*args: Any, **kwargs: Any) -> Any:
    from .kernels import omd_step_triton

    return omd_step_triton(*args, **kwargs)


omd_step = BackendOp(
    "efg_pg.omd_step",
    [
        Backend("triton", _triton, supports=_triton_limits, uses_triton=True),
        Backend("reference", omd_step_reference),
    ],
)
omd_step.__doc__ = """Fused QFR infoset step; see :func:`~iclr25.rl.efg_pg.reference.omd_step_reference`.

Call as ``omd_step(ref, g, divisor, mask, eta, gamma, regularizer="entropy", backend="auto")``.
``auto`` picks the Triton kernel for CUDA tensors (entropy) and the reference otherwise (also when an
input requires grad: the kernel is forward-only). Every backend returns ``ref``'s dtype, also when
``g`` or ``divisor`` has another float dtype.
"""
