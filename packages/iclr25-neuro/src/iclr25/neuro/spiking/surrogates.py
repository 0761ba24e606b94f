"""Heaviside firing with selectable surrogate derivatives.

Forward is the exact step function; backward replaces ``H'(x)`` by a smooth surrogate ``σ'(x)``
chosen per call/cell (not globally):

========== ========================================== ===================================
name       σ'(x)                                      defaults
========== ========================================== ===================================
gaussian   γ exp(-x²/(2w²)) / (√(2π) w)               width w = 0.5, scale γ = 0.5 (RSNN_bfd)
atan       (α/2) / (1 + (π α x / 2)²)                 alpha α = 2 (SpikingJelly/snnTorch)
sigmoid    k sig(kx) (1 - sig(kx))                    k = 4
triangle   γ max(0, 1 - |x|/w) / w                    width w = 1, scale γ = 1
ste        1 on |x| <= w, else 0                      width w = inf (straight-through)
========== ========================================== ===================================
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from ._checks import check_float_tensor

__all__ = ["SURROGATES", "Surrogate", "spike"]

#: Parameter names and defaults of each surrogate, in the order the Triton kernels take them.
SURROGATES: dict[str, dict[str, float]] = {
    "gaussian": {"width": 0.5, "scale": 0.5},
    "atan": {"alpha": 2.0},
    "sigmoid": {"k": 4.0},
    "triangle": {"width": 1.0, "scale": 1.0},
    "ste": {"width": math.inf},
}


@dataclass(frozen=True)
class Surrogate:
    """A named surrogate derivative with its parameters (see the module table).

    Attributes
    ----------
    name:
        One of ``gaussian``, ``atan``, ``sigmoid``, ``triangle``, ``ste``.
    params:
        ``(key, value)`` pairs, all keys of the surrogate in `SURROGATES` order.
    """

    name: str
    params: tuple[tuple[str, float], ...]

    @classmethod
    def make(cls, surrogate: str | Surrogate = "gaussian", **kw: float) -> Surrogate:
        """Resolve a name (plus keyword parameters) or pass a `Surrogate` through.

        Raises
        ------
        ValueError
            Unknown name, unknown parameter, or a width/scale/alpha/k that is not > 0.
        """
        if isinstance(surrogate, Surrogate):
            if kw:
                surrogate = cls.make(surrogate.name, **{**dict(surrogate.params), **kw})
            return surrogate
        if surrogate not in SURROGATES:
            raise ValueError(f"surrogate must be one of {list(SURROGATES)}, got {surrogate!r}")
        defaults = SURROGATES[surrogate]
        unknown = set(kw) - set(defaults)
        if unknown:
            raise ValueError(f"surrogate {surrogate!r} takes parameters {list(defaults)}, got {sorted(unknown)}")
        params = {**defaults, **{k: float(v) for k, v in kw.items()}}
        for key, value in params.items():
            if not value > 0:
                raise ValueError(f"surrogate parameter {key} must be > 0, got {value!r}")
        return cls(surrogate, tuple(params.items()))

    @property
    def values(self) -> tuple[float, float]:
        """The first two parameter values (padded with 0), as the Triton kernels take them."""
        vals = [v for _, v in self.params] + [0.0, 0.0]
        return vals[0], vals[1]

    def derivative(self, x: torch.Tensor) -> torch.Tensor:
        """σ'(x), elementwise, same shape and dtype as ``x``."""
        p = dict(self.params)
        if self.name == "gaussian":
            w, g = p["width"], p["scale"]
            return g * torch.exp(-(x * x) / (2.0 * w * w)) / (math.sqrt(2.0 * math.pi) * w)
        if self.name == "atan":
            a = p["alpha"]
            return (a / 2.0) / (1.0 + (math.pi * a / 2.0 * x) ** 2)
        if self.name == "sigmoid":
            k = p["k"]
            sg = torch.sigmoid(k * x)
            return k * sg * (1.0 - sg)
        if self.name == "triangle":
            w, g = p["width"], p["scale"]
            return g * torch.clamp(1.0 - x.abs() / w, min=0.0) / w
        return (x.abs() <= p["width"]).to(x.dtype)  # ste


class _SpikeFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, surrogate: Surrogate, inclusive: bool) -> torch.Tensor:
        ctx.save_for_backward(x)
        ctx.surrogate = surrogate
        return (x >= 0 if inclusive else x > 0).to(x.dtype)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        (x,) = ctx.saved_tensors
        return grad * ctx.surrogate.derivative(x), None, None


def spike(
    x: torch.Tensor, surrogate: str | Surrogate = "gaussian", *, inclusive: bool = False, **kw: float
) -> torch.Tensor:
    """Heaviside firing ``s = H(x)`` with a surrogate gradient.

    Parameters
    ----------
    x:
        ``(...)`` float tensor, membrane minus threshold.
    surrogate:
        Name (or `Surrogate`) of the backward derivative; keyword parameters (``width``,
        ``scale``, ``alpha``, ``k``) override its defaults.
    inclusive:
        ``False``: ``H(x) = 1[x > 0]`` (strict, as RSNN_bfd's ``input.gt(0)``); ``True``:
        ``1[x >= 0]`` (IF/GIF quantizer convention, fires at exactly the threshold).

    Returns
    -------
    torch.Tensor
        ``(...)`` tensor of exact 0/1 values in ``x.dtype``.
    """
    check_float_tensor("x", x)
    return _SpikeFunction.apply(x, Surrogate.make(surrogate, **kw), bool(inclusive))
