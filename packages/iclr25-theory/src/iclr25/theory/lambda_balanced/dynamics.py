"""Exact gradient-flow solution for λ-balanced two-layer linear networks (matrix Riccati equation).

With ``Q = [W1ᵀ; W2]`` ((Ni+No) × Nh), whitened inputs and the balance ``W2ᵀW2 − W1W1ᵀ = λI``,
gradient flow ``τ Ẇ1 = W2ᵀ(Σyx − W2W1)``, ``τ Ẇ2 = (Σyx − W2W1)W1ᵀ`` becomes ``τ Q̇ = F Q − ½ Q QᵀQ``
and ``QQᵀ`` solves ``τ d(QQᵀ)/dt = F QQᵀ + QQᵀF − (QQᵀ)²`` with

    F = [[−λ/2 I_Ni, Σyxᵀ],
         [Σyx,      λ/2 I_No]].

Its solution is ``QQᵀ(t) = e^{Ft/τ} Q0 [I + Q0ᵀ G(t) Q0]^{-1} Q0ᵀ e^{Ft/τ}`` with
``G(t) = ∫_0^{t/τ} e^{2Fs} ds``. One-shot evaluation loses every digit once ``ω_max t/τ`` reaches
about 20 (``e^{2ωt}`` swamps the inverse), so it is applied in steps of ``ω_max Δt/τ <= max_step``,
re-factoring ``QQᵀ = Q' Q'ᵀ`` after each: ``Q' = e^{FΔ} Q C^{-T}`` with ``C Cᵀ = I + QᵀG(Δ)Q``.
By the semigroup property this is exact up to round-off.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import torch

from ._checks import check_feasible, check_float_tensor, check_lam, check_positive, check_whitened, is_int, is_real

__all__ = ["exact_qqt", "exact_trajectory", "riccati_matrix", "split_qqt"]

LamLike = float | torch.Tensor


def riccati_matrix(sigma_yx: torch.Tensor, lam: LamLike) -> torch.Tensor:
    """The symmetric matrix ``F = [[−λ/2 I, Σyxᵀ], [Σyx, λ/2 I]]`` of the Riccati equation.

    Parameters
    ----------
    sigma_yx:
        (..., No, Ni) input-output correlation.
    lam:
        λ, a float or a tensor of shape ``sigma_yx.shape[:-2]``.

    Returns
    -------
    torch.Tensor
        (..., Ni+No, Ni+No). Its eigenvalues are ``±sqrt(s_i² + λ²/4)`` for the singular values
        ``s_i`` of Σyx, plus ``∓λ/2`` on the remaining dimensions.
    """
    sigma_yx = check_float_tensor("sigma_yx", sigma_yx)
    n_out, n_in = sigma_yx.shape[-2:]
    batch = sigma_yx.shape[:-2]
    if not isinstance(lam, (torch.Tensor, np.ndarray)):
        lam = check_lam(lam)
    lam_t = torch.as_tensor(lam, dtype=sigma_yx.dtype, device=sigma_yx.device)
    if lam_t.shape not in (batch, torch.Size()):
        raise ValueError(f"lam must be a float or a tensor of shape {tuple(batch)}, got {tuple(lam_t.shape)}")
    # a float or 0-d λ is shared by every matrix of the batch
    lam_t = lam_t.expand(batch).reshape(*batch, 1)
    diag = torch.cat([(-lam_t / 2).expand(*batch, n_in), (lam_t / 2).expand(*batch, n_out)], dim=-1)
    F = torch.diag_embed(diag)
    F[..., n_in:, :n_in] = sigma_yx
    F[..., :n_in, n_in:] = sigma_yx.mT
    return F


def split_qqt(qqt: torch.Tensor, n_in: int) -> dict[str, torch.Tensor]:
    """Read the blocks of ``QQᵀ = [[W1ᵀW1, W1ᵀW2ᵀ], [W2W1, W2W2ᵀ]]``.

    Parameters
    ----------
    qqt:
        (..., Ni+No, Ni+No) tensor.
    n_in:
        Ni.

    Returns
    -------
    dict
        ``W1tW1`` (..., Ni, Ni), the input-side representation; ``W2W1`` (..., No, Ni), the
        network function; ``W2W2t`` (..., No, No), the output-side representation.
    """
    if not isinstance(qqt, torch.Tensor) or qqt.ndim < 2 or qqt.shape[-1] != qqt.shape[-2]:
        shape = tuple(qqt.shape) if isinstance(qqt, torch.Tensor) else type(qqt).__name__
        raise ValueError(f"qqt must be a (..., Ni+No, Ni+No) tensor, got {shape}")
    if not is_int(n_in) or not 1 <= n_in < qqt.shape[-1]:
        raise ValueError(f"n_in must be an int with 1 <= n_in < Ni+No = {qqt.shape[-1]}, got {n_in!r}")
    return {
        "W1tW1": qqt[..., :n_in, :n_in],
        "W2W1": qqt[..., n_in:, :n_in],
        "W2W2t": qqt[..., n_in:, n_in:],
    }


def _prepare(W1, W2, sigma_yx, lam, X):
    """Validate everything before computing; return float64 Q0, F, λ tensor and the input dtype."""
    W1 = check_float_tensor("W1", W1)
    W2 = check_float_tensor("W2", W2)
    sigma_yx = check_float_tensor("sigma_yx", sigma_yx)
    batch = W1.shape[:-2]
    n_hidden, n_in = W1.shape[-2:]
    n_out = W2.shape[-2]
    if W2.shape[:-2] != batch or W2.shape[-1] != n_hidden:
        raise ValueError(
            f"W2 must have shape (..., No, Nh) with the batch shape {tuple(batch)} and Nh={n_hidden} of "
            f"W1 {tuple(W1.shape)}; got W2 {tuple(W2.shape)}"
        )
    if sigma_yx.shape[-2:] != (n_out, n_in) or sigma_yx.shape[:-2] not in (batch, torch.Size()):
        raise ValueError(
            f"sigma_yx must have shape (No, Ni) = ({n_out}, {n_in}) (optionally with batch shape {tuple(batch)}) "
            f"to match W1 {tuple(W1.shape)} and W2 {tuple(W2.shape)}; got {tuple(sigma_yx.shape)}"
        )
    if isinstance(lam, torch.Tensor):
        if lam.shape not in (batch, torch.Size()):
            raise ValueError(f"lam must be a float or a tensor of shape {tuple(batch)}, got {tuple(lam.shape)}")
        if not bool(torch.isfinite(lam).all()):
            raise ValueError("lam contains NaN or inf")
        lam_t = lam.detach().to(device=W1.device, dtype=torch.float64)
    else:
        if not is_real(lam) or not math.isfinite(lam):
            raise TypeError(f"lam must be a finite float or a tensor, got {type(lam).__name__} {lam!r}")
        lam_t = torch.tensor(float(lam), dtype=torch.float64, device=W1.device)
    check_feasible(float(lam_t.max()), n_in, n_hidden, n_out)
    check_feasible(float(lam_t.min()), n_in, n_hidden, n_out)
    if X is not None:
        X = check_float_tensor("X", X)
        if X.shape[-2] != n_in:
            raise ValueError(f"X must have shape (Ni={n_in}, P), got {tuple(X.shape)}")
        check_whitened(X)

    dtype = torch.promote_types(W1.dtype, W2.dtype)
    W1d, W2d = W1.detach().to(torch.float64), W2.detach().to(torch.float64)
    lam_b = lam_t.expand(batch)
    eye = torch.eye(n_hidden, dtype=torch.float64, device=W1.device)
    B = W2d.mT @ W2d - W1d @ W1d.mT
    resid = float((B - lam_b[..., None, None] * eye).abs().max()) if B.numel() else 0.0
    size = 1.0 + float(lam_t.abs().max()) + float((W2d.mT @ W2d).abs().max()) + float((W1d @ W1d.mT).abs().max())
    tol = 10 * math.sqrt(torch.finfo(dtype).eps) * size
    if not resid <= tol:
        raise ValueError(
            f"W1, W2 are not λ-balanced: max|W2ᵀW2 − W1W1ᵀ − λI| = {resid:.3g} > {tol:.3g} "
            "(the closed form needs exact balance; build weights with lambda_balanced_init)"
        )
    Q0 = torch.cat([W1d.mT, W2d], dim=-2)
    F = riccati_matrix(sigma_yx.detach().to(device=W1.device, dtype=torch.float64).expand(*batch, n_out, n_in), lam_b)
    return Q0, F, lam_b, dtype, sigma_yx.detach().to(device=W1.device, dtype=torch.float64)


def _advance(Q, O, w, delta, w_max, max_step):
    """Move the factor Q by ``delta`` (in units of τ) using substeps with ``ω_max·δ <= max_step``."""
    if delta == 0.0:
        return Q
    n = 1 if not math.isfinite(max_step) else max(1, math.ceil(w_max * delta / max_step))
    d = delta / n
    Ot = O.mT
    E = (O * torch.exp(w * d)[..., None, :]) @ Ot
    x = 2 * w * d
    # (e^{2ωd} − 1)/(2ω) = d·expm1(x)/x, with the ω → 0 limit d (zero eigenvalues of F).
    ratio = torch.where(x == 0, torch.ones_like(x), torch.expm1(x) / torch.where(x == 0, torch.ones_like(x), x))
    G = (O * (d * ratio)[..., None, :]) @ Ot
    eye = torch.eye(Q.shape[-1], dtype=Q.dtype, device=Q.device)
    for _ in range(n):
        M = eye + Q.mT @ G @ Q
        C, info = torch.linalg.cholesky_ex(M)
        if bool((info != 0).any()):
            raise RuntimeError("Cholesky of I + QᵀG(Δ)Q failed (round-off in a too-long step); use a smaller max_step")
        Q = torch.linalg.solve_triangular(C, (E @ Q).mT, upper=False).mT
    return Q


def _run(Q0, F, times_scaled, max_step):
    w, O = torch.linalg.eigh(F)
    w_max = float(w.abs().max()) if w.numel() else 0.0
    out = []
    Q, prev = Q0, 0.0
    for t in times_scaled:
        Q = _advance(Q, O, w, t - prev, w_max, max_step)
        prev = t
        out.append(Q @ Q.mT)
    return torch.stack(out, dim=-3)


def _times(times, tau):
    tau = check_positive("tau", tau)
    if isinstance(times, torch.Tensor):
        if times.ndim != 1 or times.is_complex() or times.dtype == torch.bool:
            raise ValueError(f"times must be a 1-D real tensor, got shape {tuple(times.shape)} dtype {times.dtype}")
        ts = [float(v) for v in times.detach().cpu().tolist()]
    else:
        try:
            ts = [float(v) for v in times]
        except (TypeError, ValueError) as err:
            raise TypeError(
                f"times must be a 1-D tensor or sequence of real numbers, got {type(times).__name__} {times!r}"
            ) from err
    if not ts:
        raise ValueError("times must not be empty")
    if not all(math.isfinite(v) and v >= 0 for v in ts):
        raise ValueError(f"times must be finite and >= 0, got min {min(ts)}")
    if any(b < a for a, b in itertools.pairwise(ts)):
        raise ValueError("times must be non-decreasing")
    return ts, [v / tau for v in ts]


def exact_trajectory(
    W1: torch.Tensor,
    W2: torch.Tensor,
    sigma_yx: torch.Tensor,
    lam: LamLike,
    times: torch.Tensor,
    tau: float = 1.0,
    *,
    X: torch.Tensor | None = None,
    max_step: float = 4.0,
) -> dict[str, torch.Tensor]:
    """Exact gradient-flow trajectory of a λ-balanced two-layer linear network on a time grid.

    Parameters
    ----------
    W1:
        (..., Nh, Ni) initial first layer; leading dimensions are a batch of independent networks.
    W2:
        (..., No, Nh) initial second layer; must satisfy ``W2ᵀW2 − W1W1ᵀ = λI``.
    sigma_yx:
        (No, Ni) or (..., No, Ni) input-output correlation of whitened data (:func:`io_correlation`).
    lam:
        λ, a float or a tensor with the batch shape.
    times:
        (T,) non-negative, non-decreasing times.
    tau:
        Time constant τ (gradient descent with learning rate η follows the flow at ``t = η·steps·τ``).
    X:
        Optional (Ni, P) inputs; when given they must be whitened (checked, see :func:`whiten`).
    max_step:
        Bound on ``ω_max Δt/τ`` per re-factorised step; ``math.inf`` evaluates each interval in one
        shot (numerically wrong for long horizons; for comparison only).

    Returns
    -------
    dict of torch.Tensor
        ``time`` (T,); ``qqt`` (..., T, Ni+No, Ni+No); ``W2W1`` (..., T, No, Ni); ``W1tW1``
        (..., T, Ni, Ni); ``W2W2t`` (..., T, No, No); ``loss`` (..., T) ``= ½||Σyx − W2W1||²_F``,
        the training loss minus its irreducible part. Same dtype as the weights, computed in float64.
    """
    if not is_real(max_step) or not max_step > 0:
        raise ValueError(f"max_step must be a positive number (math.inf for one-shot), got {max_step!r}")
    ts, scaled = _times(times, tau)
    Q0, F, _, dtype, syx = _prepare(W1, W2, sigma_yx, lam, X)
    qqt = _run(Q0, F, scaled, max_step)
    n_in = W1.shape[-1]
    out = split_qqt(qqt, n_in)
    diff = syx.unsqueeze(-3) - out["W2W1"]
    loss = 0.5 * (diff**2).sum(dim=(-2, -1))
    res = {"time": torch.tensor(ts, dtype=dtype, device=Q0.device), "qqt": qqt, **out, "loss": loss}
    return {k: v.to(dtype) for k, v in res.items()}


def exact_qqt(
    W1: torch.Tensor,
    W2: torch.Tensor,
    sigma_yx: torch.Tensor,
    lam: LamLike,
    t: float,
    tau: float = 1.0,
    *,
    X: torch.Tensor | None = None,
    max_step: float = 4.0,
) -> torch.Tensor:
    """``QQᵀ(t)`` of the exact gradient flow from ``(W1, W2)``.

    Parameters
    ----------
    W1, W2, sigma_yx, lam, tau, X, max_step:
        As in :func:`exact_trajectory`.
    t:
        Time, ``t >= 0``.

    Returns
    -------
    torch.Tensor
        (..., Ni+No, Ni+No) ``[[W1ᵀW1, W1ᵀW2ᵀ], [W2W1, W2W2ᵀ]]`` at time ``t`` (see :func:`split_qqt`).
    """
    check_positive("t", t, allow_zero=True)
    return exact_trajectory(W1, W2, sigma_yx, lam, [float(t)], tau, X=X, max_step=max_step)["qqt"][..., 0, :, :]
