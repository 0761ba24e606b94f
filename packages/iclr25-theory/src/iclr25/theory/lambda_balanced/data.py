"""Input whitening and the input-output correlation Σyx that drive the closed-form dynamics."""

from __future__ import annotations

import torch

from ._checks import check_float_tensor, check_positive, check_whitened

__all__ = ["io_correlation", "whiten"]


def whiten(X: torch.Tensor, *, center: bool = False, eps: float = 1e-12) -> torch.Tensor:
    """Symmetric (ZCA) whitening so that ``X Xᵀ / P = I``.

    The closed-form solution assumes whitened inputs (Σxx = I); this gives them while staying
    as close as possible to ``X`` (the ZCA transform ``Σxx^{-1/2}`` is the whitening map with the
    smallest change in Frobenius norm).

    Parameters
    ----------
    X:
        (Ni, P) float tensor, one column per sample; needs ``P >= Ni`` and full row rank.
    center:
        Subtract the per-feature mean before whitening.
    eps:
        Eigenvalues of ``X Xᵀ/P`` below ``eps`` times the largest one count as rank deficiency.

    Returns
    -------
    torch.Tensor
        (Ni, P) tensor with the same dtype and device as ``X``.
    """
    X = check_float_tensor("X", X)
    if X.ndim != 2:
        raise ValueError(f"X must have shape (Ni, P), got {tuple(X.shape)}")
    n_in, P = X.shape
    if n_in > P:
        raise ValueError(f"whitening needs at least as many samples as features: X has shape (Ni={n_in}, P={P})")
    Xd = X.to(torch.float64)
    if center:
        Xd = Xd - Xd.mean(dim=1, keepdim=True)
    evals, evecs = torch.linalg.eigh(Xd @ Xd.T / P)
    if not float(evals.min()) > eps * float(evals.max()):
        raise ValueError(f"X Xᵀ/P is (numerically) singular, eigenvalues {evals.tolist()}; X has rank < Ni={n_in}")
    inv_sqrt = evecs @ torch.diag(evals.rsqrt()) @ evecs.T
    return (inv_sqrt @ Xd).to(X.dtype)


def io_correlation(X: torch.Tensor, Y: torch.Tensor, *, tol: float = 1e-6) -> torch.Tensor:
    """Input-output correlation ``Σyx = Y Xᵀ / P`` for whitened inputs.

    Parameters
    ----------
    X:
        (Ni, P) whitened inputs (``max|X Xᵀ/P − I| <= tol``; see :func:`whiten`).
    Y:
        (No, P) targets.
    tol:
        Tolerance on the whitening check.

    Returns
    -------
    torch.Tensor
        (No, Ni) matrix Σyx, in the wider dtype of ``X`` and ``Y``.
    """
    X = check_float_tensor("X", X)
    Y = check_float_tensor("Y", Y)
    if X.ndim != 2 or Y.ndim != 2 or X.shape[1] != Y.shape[1]:
        raise ValueError(f"X and Y must have shapes (Ni, P) and (No, P), got {tuple(X.shape)} and {tuple(Y.shape)}")
    tol = check_positive("tol", tol, allow_zero=True)
    check_whitened(X, tol)
    # mixed float32/float64 inputs are promoted (exactly) to the wider type, as elementwise ops do
    dtype = torch.promote_types(X.dtype, Y.dtype)
    X, Y = X.to(dtype), Y.to(dtype)
    return Y @ X.T / X.shape[1]
