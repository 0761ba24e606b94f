"""Argument checks shared by the public entry points.

Numpy scalars (``np.int64``, ``np.float32``) are accepted like Python numbers; bools are not.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

__all__ = ["check_bool", "check_int", "check_real"]


def check_int(name: str, value: Any, minimum: int) -> int:
    """``value`` as an int ``>= minimum`` (0 or 1), else ``ValueError`` naming ``name``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral) or value < minimum:
        what = "positive" if minimum == 1 else "non-negative"
        raise ValueError(f"{name} must be a {what} int, got {value!r}")
    return int(value)


def check_real(name: str, value: Any) -> float:
    """``value`` as a finite float, else ``ValueError`` naming ``name``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real) or not np.isfinite(value):
        raise ValueError(f"{name} must be a finite float, got {value!r}")
    return float(value)


def check_bool(name: str, value: Any) -> bool:
    """``value`` as a bool; a truthy string such as ``"false"`` is refused, not read as True."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {type(value).__name__} {value!r}")
    return bool(value)
