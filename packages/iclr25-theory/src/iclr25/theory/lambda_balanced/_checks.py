"""Boundary checks shared by the public functions (all run before any computation)."""

from __future__ import annotations

import math
import numbers
from typing import Any

import torch

_FLOATS = (torch.float32, torch.float64)


def check_float_tensor(name: str, x: Any, *, min_ndim: int = 2) -> torch.Tensor:
    """A finite float32/float64 tensor with at least ``min_ndim`` dimensions, else TypeError/ValueError."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in _FLOATS:
        raise TypeError(
            f"{name} must be float32 or float64 (the closed form needs float64 for long horizons), got {x.dtype}"
        )
    if x.ndim < min_ndim:
        raise ValueError(f"{name} must have at least {min_ndim} dimensions, got shape {tuple(x.shape)}")
    if not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name} contains NaN or inf")
    return x


def is_real(x: Any) -> bool:
    """A real Python or NumPy scalar (``numbers.Real``), not a bool."""
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def is_int(x: Any) -> bool:
    """An integral Python or NumPy scalar (``numbers.Integral``), not a bool."""
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def check_lam(lam: Any) -> float:
    """λ as a finite Python float (Python and NumPy real scalars are accepted)."""
    if not is_real(lam):
        raise TypeError(f"lam must be a real number, got {type(lam).__name__}")
    lam = float(lam)
    if not math.isfinite(lam):
        raise ValueError(f"lam must be finite, got {lam}")
    return lam


def check_positive(name: str, value: Any, *, allow_zero: bool = False) -> float:
    if not is_real(value):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    value = float(value)
    ok = value >= 0 if allow_zero else value > 0
    if not (math.isfinite(value) and ok):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be finite and {bound}, got {value}")
    return value


def check_dims(**dims: Any) -> tuple[int, ...]:
    """Positive integer widths (Python or NumPy ints) as Python ints, in the order given."""
    out = []
    for name, value in dims.items():
        if not is_int(value) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {type(value).__name__} {value!r}")
        out.append(int(value))
    return tuple(out)


def check_feasible(lam: float, n_in: int, n_hidden: int, n_out: int) -> None:
    """W2ᵀW2 = W1W1ᵀ + λI forces rank(W2) = Nh when λ > 0 and rank(W1) = Nh when λ < 0."""
    if lam > 0 and n_hidden > n_out:
        raise ValueError(
            f"lam={lam} > 0 needs n_hidden <= n_out (W2ᵀW2 = W1W1ᵀ + λI must have full rank n_hidden), "
            f"got n_hidden={n_hidden}, n_out={n_out}"
        )
    if lam < 0 and n_hidden > n_in:
        raise ValueError(
            f"lam={lam} < 0 needs n_hidden <= n_in (W1W1ᵀ = W2ᵀW2 - λI must have full rank n_hidden), "
            f"got n_hidden={n_hidden}, n_in={n_in}"
        )


def whitening_error(X: torch.Tensor) -> float:
    """``max |X Xᵀ/P − I|`` for X of shape (Ni, P)."""
    P = X.shape[-1]
    eye = torch.eye(X.shape[-2], dtype=X.dtype, device=X.device)
    return float((X @ X.mT / P - eye).abs().max())


def check_whitened(X: torch.Tensor, tol: float = 1e-6) -> None:
    err = whitening_error(X)
    if not err <= tol:
        raise ValueError(
            f"X must be whitened (X Xᵀ/P = I) for the closed form; got max|X Xᵀ/P − I| = {err:.3g} > {tol:g}. "
            "Use iclr25.theory.lambda_balanced.whiten(X) first."
        )
