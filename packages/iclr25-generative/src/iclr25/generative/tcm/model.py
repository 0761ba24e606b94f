"""The truncated consistency function f_trunc (TCM's parameterisation, the official ``TCMPrecond``)."""

from __future__ import annotations

import logging
import math
import warnings
from typing import Any

import torch
from torch import nn

from iclr25.generative.diffusion._checks import as_sigma, check_finite, check_float

__all__ = ["TruncatedCM"]

log = logging.getLogger(__name__)


class TruncatedCM(nn.Module):
    """f_trunc(x, t) = teacher(x, t) for t < t', student(x, t) for t >= t' (routed per sample).

    Parameters
    ----------
    student: consistency function ``f_theta(x, t, **cond)`` trained on [t', T] (initialise it from
        the teacher).
    teacher: frozen stage-1 consistency model ``f_phi``; if it has trainable parameters they are
        frozen (``requires_grad=False``) with a warning. It always runs in eval mode, without grad.
    t_prime: the dividing time t' (1.0 in the paper, in EDM sigma units).

    Notes
    -----
    Forward pass: x (B, ...), t scalar or (B,) > 0 -> (B, ...). Samples with exactly t = t' go to the
    student (the boundary samples of stage 2). In a mixed batch the student runs on the whole batch
    (so its dropout mask matches an all-student pass, as in the official ``TCMPrecond``) and the
    teacher only on the rows with t < t'.
    """

    def __init__(self, student: nn.Module, teacher: nn.Module, t_prime: float = 1.0) -> None:
        super().__init__()
        if not isinstance(student, nn.Module) or not isinstance(teacher, nn.Module):
            raise TypeError(
                f"student and teacher must be nn.Modules, got {type(student).__name__} and {type(teacher).__name__}"
            )
        if not (isinstance(t_prime, (int, float)) and 0 < t_prime < math.inf):
            raise ValueError(f"t_prime must be a finite float > 0, got {t_prime!r}")
        if student is teacher:
            raise ValueError("student and teacher must be different modules (deep-copy the stage-1 model)")
        # a shallow copy (copy.copy) shares the tensors: freezing the teacher below would freeze the
        # student too, and training the student would move the teacher
        shared = {id(p) for p in student.parameters()} & {id(p) for p in teacher.parameters()}
        if shared:
            raise ValueError(
                f"student and teacher share {len(shared)} parameter tensors; the teacher must be a separate "
                "frozen copy (copy.deepcopy the stage-1 model, not copy.copy)"
            )
        if any(p.requires_grad for p in teacher.parameters()):
            warnings.warn("TruncatedCM: the teacher had trainable parameters; freezing them", stacklevel=2)
            teacher.requires_grad_(False)
        self.student, self.teacher, self.t_prime = student, teacher.eval(), float(t_prime)

    def extra_repr(self) -> str:
        # t' is no tensor, so neither the state dict nor the submodules' lines show it
        return f"t_prime={self.t_prime}"

    def train(self, mode: bool = True) -> TruncatedCM:
        """Set the student's mode; the teacher stays in eval mode (no dropout in boundary targets)."""
        self.training = mode
        self.student.train(mode)
        self.teacher.eval()
        return self

    def forward(self, x: torch.Tensor, t: float | torch.Tensor, **cond: Any) -> torch.Tensor:
        check_float("x", x)
        check_finite("x", x)
        s = as_sigma(t, x, name="t")
        use_student = s >= self.t_prime
        if bool(use_student.all()):
            return self.student(x, s, **cond)
        if not bool(use_student.any()):
            with torch.no_grad():
                return self.teacher(x, s, **cond)

        def part(m: torch.Tensor) -> dict[str, Any]:
            return {k: v[m] if isinstance(v, torch.Tensor) and v.dim() and v.shape[0] == x.shape[0] else v
                    for k, v in cond.items()}  # fmt: skip

        # The student sees the whole batch (its rows with t < t' are discarded): a stochastic layer
        # (dropout) then draws the same per-row mask as in the all-student online pass, which the
        # stage-2 target pass relies on after rewinding the RNG. On a row subset, row i of the subset
        # would get the mask of batch row i, not of its own row.
        out_s = self.student(x, s, **cond)
        with torch.no_grad():
            out_t = self.teacher(x[~use_student], s[~use_student], **part(~use_student))
        return out_s.index_put(((~use_student).nonzero(as_tuple=True)[0],), out_t.to(out_s.dtype))
