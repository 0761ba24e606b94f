"""Plain-torch reference (the spec) for the fused ResBlock pre-activation.

groupnorm_film_silu(x) = SiLU(GroupNorm(x) * (1 + scale) + shift), where GroupNorm has its own
per-channel affine (weight, bias) and (scale, shift) are the per-sample FiLM terms computed from
the timestep embedding.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["groupnorm_film_silu_reference"]


def groupnorm_film_silu_reference(
    x: torch.Tensor,
    num_groups: int,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    scale: torch.Tensor | None,
    shift: torch.Tensor | None,
    eps: float = 1e-5,
) -> torch.Tensor:
    """x: (B, C, *spatial); weight, bias: (C,) or None; scale, shift: (B, C) or None. Returns x's shape."""
    h = F.group_norm(x, num_groups, weight, bias, eps)
    view = (x.shape[0], x.shape[1]) + (1,) * (x.dim() - 2)
    if scale is not None:
        h = h * (1 + scale.reshape(view))
    if shift is not None:
        h = h + shift.reshape(view)
    return F.silu(h)
