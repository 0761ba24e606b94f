"""Input validation shared by the spiking core (errors name the argument, the expectation and the value)."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

import torch


def check_float_tensor(name: str, x: Any) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")


def check_finite(name: str, x: torch.Tensor) -> None:
    if x.numel() and not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name} must be finite, got NaN or Inf in a tensor of shape {tuple(x.shape)}")


def check_positive(name: str, value: float | torch.Tensor, allow_inf: bool = False) -> None:
    if isinstance(value, torch.Tensor):
        v = value.detach()
        bad = bool((v <= 0).any()) or bool(torch.isnan(v).any()) or (not allow_inf and bool(torch.isinf(v).any()))
        if bad:
            raise ValueError(f"{name} must be > 0{'' if allow_inf else ' and finite'}, got min {v.min().item():g}")
        return
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise TypeError(f"{name} must be a number or a tensor, got {type(value).__name__}")
    if not value > 0 or (not allow_inf and math.isinf(value)):
        raise ValueError(f"{name} must be > 0{'' if allow_inf else ' and finite'}, got {value!r}")


def check_finite_number(name: str, value: Any) -> None:
    """A finite real number (a Python or NumPy real, or a tensor of finite values)."""
    if isinstance(value, torch.Tensor):
        check_finite(name, value.detach())
        return
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")


def check_state_type(name: str, state: Any, cls: type) -> None:
    """``state`` is ``None`` or a `cls` NamedTuple (any object with its fields), not a bare tensor."""
    fields = cls._fields  # type: ignore[attr-defined]
    if state is None or (not isinstance(state, torch.Tensor) and all(hasattr(state, f) for f in fields)):
        return
    spec = f"{cls.__name__}({', '.join(fields)})"
    hint = f"; wrap the state tensors as {spec}" if isinstance(state, torch.Tensor) else ""
    raise TypeError(f"{name} must be None or a NamedTuple {spec}, got {type(state).__name__}{hint}")


def check_choice(name: str, value: Any, choices: Sequence[str]) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}")


def check_int(name: str, value: Any, minimum: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")


def check_state(name: str, state: torch.Tensor, expected: torch.Size | tuple[int, ...]) -> None:
    if not isinstance(state, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(state).__name__}")
    if tuple(state.shape) != tuple(expected):
        raise ValueError(f"{name} has shape {tuple(state.shape)} but the input step has shape {tuple(expected)}")


def check_multistep(name: str, x: Any, validate: bool) -> None:
    """A time-first input ``[T, ...]``: float, at least 1-D, finite when ``validate``."""
    check_float_tensor(name, x)
    if x.dim() < 1:
        raise ValueError(f"{name} must be time-first [T, ...] with at least 1 dimension, got a 0-d tensor")
    if validate:
        check_finite(name, x)
