"""Cortical sheets: where each unit of a layer sits on a 2-D grid.

A layer with ``n`` units gets an ``h × w = n`` grid with ``h`` the largest divisor of ``n`` that is
at most ``√n`` (the most square grid that uses every unit exactly once). Unit ``k`` sits at row
``k // w``, column ``k % w`` (row-major), so the sheet is a plain reshape of the weight.
"""

from __future__ import annotations

import math
import numbers

import torch
from torch import nn

__all__ = [
    "LAYOUTS",
    "TARGETS",
    "cortical_sheet",
    "cortical_sheet_shape",
    "is_conv1d",
    "resolve_layout",
]

#: Which side of a module's weight holds the units: ``"out_in"`` (``nn.Linear``, ``nn.Conv2d``:
#: ``weight[out, in, ...]``), ``"in_out"`` (Hugging Face GPT-2 ``Conv1D``: ``weight[in, out]``),
#: or ``"auto"`` (decided from the module type).
LAYOUTS = ("auto", "out_in", "in_out")
#: What is laid on the sheet: the output units' incoming weights, their biases, or the input units'
#: outgoing weights (columns of the weight matrix).
TARGETS = ("weight", "bias", "input")


def cortical_sheet_shape(n: int) -> tuple[int, int]:
    """Grid ``(h, w)`` for ``n`` units: ``h`` is the largest divisor of ``n`` with ``h ≤ √n``.

    Parameters
    ----------
    n:
        Number of units (positive int).

    Returns
    -------
    (h, w):
        ``h · w = n`` and ``h ≤ w``; e.g. 256 → (16, 16), 768 → (24, 32), 1000 → (25, 40), and a
        prime ``n`` gives ``(1, n)``.
    """
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        raise TypeError(f"n must be an int, got {type(n).__name__}")
    n = int(n)
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    for h in range(math.isqrt(n), 0, -1):
        if n % h == 0:
            return h, n // h
    raise AssertionError("unreachable: 1 divides every n")


def is_conv1d(module: nn.Module) -> bool:
    """True for a Hugging Face ``Conv1D`` (GPT-2 style: ``weight[in, out]``, ``y = x @ W + b``).

    Detected by class name and attributes so that ``transformers`` need not be installed.
    """
    weight = getattr(module, "weight", None)
    return (
        type(module).__name__ == "Conv1D"
        and isinstance(weight, torch.Tensor)
        and weight.ndim == 2
        and getattr(module, "nf", weight.shape[-1]) == weight.shape[1]
    )


def resolve_layout(module: nn.Module, weight_layout: str = "auto") -> str:
    """The concrete layout (``"out_in"`` or ``"in_out"``) of ``module``'s weight."""
    if weight_layout not in LAYOUTS:
        raise ValueError(f"weight_layout must be one of {LAYOUTS}, got {weight_layout!r}")
    if weight_layout != "auto":
        return weight_layout
    return "in_out" if is_conv1d(module) else "out_in"


def cortical_sheet(
    module: nn.Module | torch.Tensor, target: str = "weight", weight_layout: str = "auto"
) -> torch.Tensor:
    """View of a layer's parameters laid out on its cortical sheet (differentiable, no copy when possible).

    Parameters
    ----------
    module:
        An ``nn.Linear``, ``nn.Conv2d``, Hugging Face ``Conv1D`` (or any module with a 2-D or 4-D
        ``weight``), or a bare weight tensor ``(out, in, ...)`` (``"out_in"`` layout).
    target:
        ``"weight"``: output units, vector = the unit's incoming weights (Linear row, flattened
        Conv2d kernel ``cin·kh·kw``). ``"bias"``: output units, one scalar each. ``"input"``: input
        units (Conv2d: input channels), vector = the unit's outgoing weights.
    weight_layout:
        ``"auto"``, ``"out_in"`` or ``"in_out"`` (see :data:`LAYOUTS`).

    Returns
    -------
    sheet:
        ``(h, w, e)`` float tensor for ``"weight"`` / ``"input"``; ``(h, w)`` for ``"bias"``.
        ``sheet[r, c]`` is unit ``r · w + c``.
    """
    if target not in TARGETS:
        raise ValueError(f"target must be one of {TARGETS}, got {target!r}")
    if isinstance(module, torch.Tensor):
        weight, layout, bias = module, "out_in" if weight_layout == "auto" else weight_layout, None
        if layout not in LAYOUTS:
            raise ValueError(f"weight_layout must be one of {LAYOUTS}, got {weight_layout!r}")
        if target == "bias":
            raise ValueError("target='bias' needs a module with a bias, got a bare weight tensor")
    elif isinstance(module, nn.Module):
        weight = getattr(module, "weight", None)
        if not isinstance(weight, torch.Tensor):
            raise TypeError(f"module {type(module).__name__} has no weight tensor")
        layout = resolve_layout(module, weight_layout)
        bias = getattr(module, "bias", None)
    else:
        raise TypeError(f"module must be an nn.Module or a tensor, got {type(module).__name__}")
    if weight.ndim < 2:
        raise ValueError(f"weight must have >= 2 dims (out, in, ...), got shape {tuple(weight.shape)}")
    if layout == "in_out":
        if weight.ndim != 2:
            raise ValueError(f"weight_layout='in_out' needs a 2-D weight, got shape {tuple(weight.shape)}")
        weight = weight.t()  # now (out, in) like nn.Linear
    if target == "weight":
        units = weight.reshape(weight.shape[0], -1)
    elif target == "input":
        units = weight.transpose(0, 1).reshape(weight.shape[1], -1)
    else:
        if not isinstance(bias, torch.Tensor):
            raise ValueError(f"target='bias' but {type(module).__name__} has no bias (bias=None)")
        h, w = cortical_sheet_shape(int(bias.numel()))
        return bias.reshape(h, w)
    h, w = cortical_sheet_shape(int(units.shape[0]))
    return units.reshape(h, w, units.shape[1])
