"""The binarizers: plain (BiLLM), ARB, ARB-X and ARB-RC, of order 1 or 2, on one masked weight group.

Every pipeline (ARB, BiLLM, the partition searches) calls :func:`binarize`; all statistics are over
the entries selected by ``mask`` only, and entries outside the mask reconstruct to zero.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

__all__ = [
    "METHODS",
    "BinarizationResult",
    "binarize",
    "check_S",
    "check_weight",
    "nearest_pair",
    "output_error",
    "sign",
]

METHODS = ("plain", "arb", "arb_x", "arb_rc")
_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def sign(x: torch.Tensor) -> torch.Tensor:
    """``sign`` with ``sign(0) = +1``, so every entry of B is ±1 (a true 1-bit code)."""
    return torch.where(x >= 0, torch.ones_like(x), -torch.ones_like(x))


def _div(num: torch.Tensor, den: torch.Tensor) -> torch.Tensor:
    # an empty group (all-False mask row/column) has den == 0: its scale is 0, never NaN
    return torch.where(den > 0, num / torch.where(den > 0, den, torch.ones_like(den)), torch.zeros_like(num))


def check_weight(W, name: str = "W") -> torch.Tensor:
    """Validate a weight matrix: a finite 2-D float tensor."""
    if not isinstance(W, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor; got {type(W).__name__}")
    if W.dtype not in _FLOATS:
        raise TypeError(f"{name} must be float16/bfloat16/float32/float64; got {W.dtype}")
    if W.dim() != 2:
        raise ValueError(f"{name} must be 2-D (out_features, in_features); got shape {tuple(W.shape)}")
    if not torch.isfinite(W).all():
        raise ValueError(f"{name} contains NaN or Inf")
    return W


def check_S(S, m: int, name: str = "S") -> torch.Tensor:
    """Validate a second-moment matrix ``S = XᵀX / N``: ``(m, m)``, finite, symmetric, PSD."""
    if not isinstance(S, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor; got {type(S).__name__}")
    if S.shape != (m, m):
        raise ValueError(f"{name} must have shape ({m}, {m}) to match W's columns; got {tuple(S.shape)}")
    S64 = S.detach().double()
    if not torch.isfinite(S64).all():
        raise ValueError(f"{name} contains NaN or Inf")
    scale = float(S64.abs().max()) if S64.numel() else 0.0
    if not torch.allclose(S64, S64.t(), atol=1e-6 * max(scale, 1e-30), rtol=0):
        raise ValueError(f"{name} must be symmetric")
    if m and float(torch.linalg.eigvalsh(S64).min()) < -1e-6 * max(scale, 1e-30) * m:
        raise ValueError(f"{name} must be positive semi-definite")
    return S


def output_error(R: torch.Tensor, S: torch.Tensor) -> torch.Tensor:
    """``tr(R S Rᵀ) = ‖R Xᵀ‖² / N`` for a residual ``R: (n, m)`` and ``S: (m, m)``."""
    return ((R @ S) * R).sum()


@dataclass
class BinarizationResult:
    """One binarized group.

    Attributes
    ----------
    W_hat : (n, m) tensor
        The reconstruction, zero outside ``mask``.
    mask : (n, m) bool tensor
    method : str
        ``"plain"``, ``"arb"``, ``"arb_x"`` or ``"arb_rc"``.
    order : int
        Number of binary planes (1 or 2).
    params : dict
        ``B``: (order, n, m) ±1 (float); ``alpha``: (order, n); ``mu``: (order, n) for ``"plain"``
        (one mean per residual step, as BiLLM), (1, n) for ARB/ARB-X, absent for ARB-RC;
        ``beta``: (order, m) for ARB-RC only.
    error_trace : list of float
        The objective after initialisation and after each refinement: ``‖(W − Ŵ)⊙M‖²`` for
        plain/ARB/ARB-RC; for ARB-X the ARB phase's trace followed by ``tr(R S Rᵀ)`` per ARB-X step
        (see ``x_start``).
    x_start : int or None
        Index in ``error_trace`` where the ARB-X (output-error) phase starts.
    """

    W_hat: torch.Tensor
    mask: torch.Tensor
    method: str
    order: int
    params: dict = field(default_factory=dict)
    error_trace: list = field(default_factory=list)
    x_start: int | None = None

    def reconstruct(self) -> torch.Tensor:
        """Rebuild ``Ŵ`` from ``params`` alone (what the packed format stores)."""
        p = self.params
        B, a = p["B"], p["alpha"]
        if "beta" in p:
            W = sum(a[k][:, None] * B[k] * p["beta"][k][None, :] for k in range(self.order))
        else:
            W = sum(a[k][:, None] * B[k] for k in range(self.order)) + p["mu"].sum(0)[:, None]
        return W * self.mask


def _stats(W: torch.Tensor, M: torch.Tensor):
    n = M.sum(1)
    mu = _div((W * M).sum(1), n)
    D = (W - mu[:, None]) * M
    return n, mu, sign(W - mu[:, None]), _div(D.abs().sum(1), n)


def _plain(W: torch.Tensor, M: torch.Tensor, order: int):
    """BiLLM's residual binarization: per plane μ = mean, α = mean|W − μ|, B = sign(W − μ)."""
    mus, alphas, Bs = [], [], []
    R = W * M
    for _ in range(order):
        _n, mu, B, a = _stats(R, M)
        mus.append(mu)
        alphas.append(a)
        Bs.append(B)
        R = (R - (a[:, None] * B + mu[:, None])) * M
    return torch.stack(mus), torch.stack(alphas), torch.stack(Bs)


def _recon(mu: torch.Tensor, alpha: torch.Tensor, B: torch.Tensor, M: torch.Tensor) -> torch.Tensor:
    return ((alpha[:, :, None] * B).sum(0) + mu.sum(0)[:, None]) * M


def nearest_pair(D: torch.Tensor, c1: torch.Tensor, c2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Joint order-2 sign update: ``(B1, B2) = argmin |D − (c1·B1 + c2·B2)|`` entrywise over ``{±1}²``.

    ``c1``, ``c2`` broadcast against ``D``. Closed form: the larger-magnitude level takes the sign
    of ``D`` (times its own sign), the smaller one the sign of what is left; this is exact because
    the four levels ``±|c1| ± |c2|`` split into two pairs on either side of zero.
    """
    c1, c2 = torch.broadcast_to(c1, D.shape), torch.broadcast_to(c2, D.shape)
    big_first = c1.abs() >= c2.abs()
    cb, cs = torch.where(big_first, c1, c2), torch.where(big_first, c2, c1)
    Bb = sign(D) * sign(cb)
    Bs = sign(D - cb * Bb) * sign(cs)
    return torch.where(big_first, Bb, Bs), torch.where(big_first, Bs, Bb)


def _arb(W, M, order, iters, trace):
    n = M.sum(1)
    mu0, alpha, B = _plain(W, M, order)
    mu = mu0.sum(0, keepdim=True)
    Wm = W * M
    for _ in range(iters):
        # Step 1 (μ): the mean of the current residual, exact minimiser with α, B fixed.
        mu = mu + _div(((Wm - _recon(mu, alpha, B, M)) * M).sum(1), n)[None]
        # Step 2 (α): least squares per plane with the others fixed (B² = 1 on the mask).
        for k in range(order):
            others = sum(alpha[j][:, None] * B[j] for j in range(order) if j != k) if order > 1 else 0.0
            alpha[k] = _div((B[k] * (Wm - (mu[0][:, None] + others) * M)).sum(1), n)
        # Step 3 (B): nearest level(s); sign(α) keeps the step exact if an α turned negative.
        D = W - mu[0][:, None]
        if order == 1:
            B = (sign(D) * sign(alpha[0])[:, None])[None]
        else:
            B1, B2 = nearest_pair(D, alpha[0][:, None], alpha[1][:, None])
            B = torch.stack([B1, B2])
        trace.append(float(((Wm - _recon(mu, alpha, B, M)) ** 2).sum()))
    return mu, alpha, B


def _arb_x(W, M, mu, alpha, B, S, iters, trace):
    """ARB-X closed forms (B fixed): per row, μ and each α minimise ``(w − ŵ) S (w − ŵ)ᵀ``."""
    order = alpha.shape[0]
    m = M.to(W.dtype)
    Wm = W * M
    b = B * m

    def bil(U, V):  # row-wise bilinear forms u S vᵀ
        return ((U @ S) * V).sum(1)

    for _ in range(iters):
        ab = (alpha[:, :, None] * b).sum(0)
        mu = _div(bil(Wm - ab, m), bil(m, m))[None]
        for k in range(order):
            rest = mu[0][:, None] * m + sum(alpha[j][:, None] * b[j] for j in range(order) if j != k)
            alpha[k] = _div(bil(b[k], Wm - rest), bil(b[k], b[k]))
        R = Wm - _recon(mu, alpha, B, M)
        trace.append(float(output_error(R, S)))
    return mu, alpha


def _rc_init(W, M):
    Mf = M.to(W.dtype)
    B = sign(W)
    a = _div((W.abs() * Mf).sum(1), Mf.sum(1))
    beta = _div((_div(W.abs(), a[:, None]) * Mf).sum(0), Mf.sum(0))
    return a, beta, B


def _arb_rc(W, M, order, iters, trace):
    Mf = M.to(W.dtype)
    Wm = W * Mf
    a1, b1, B1 = _rc_init(Wm, M)
    alphas, betas, Bs = [a1], [b1], [B1]
    if order == 2:
        a2, b2, B2 = _rc_init((Wm - a1[:, None] * B1 * b1[None, :]) * Mf, M)
        alphas, betas, Bs = [a1, a2], [b1, b2], [B1, B2]

    def term(k):
        return alphas[k][:, None] * Bs[k] * betas[k][None, :] * Mf

    def err():
        return float(((Wm - sum(term(k) for k in range(order))) ** 2).sum())

    trace.append(err())
    for _ in range(iters):
        for k in range(order):
            T = Wm - sum(term(j) for j in range(order) if j != k) if order > 1 else Wm
            G = Bs[k] * betas[k][None, :] * Mf  # d Ŵ / d α_i
            alphas[k] = _div((G * T).sum(1), (G * G).sum(1))
            G = Bs[k] * alphas[k][:, None] * Mf
            betas[k] = _div((G * T).sum(0), (G * G).sum(0))
        if order == 2:
            c1 = alphas[0][:, None] * betas[0][None, :]
            c2 = alphas[1][:, None] * betas[1][None, :]
            Bs = list(nearest_pair(W, c1, c2))
        trace.append(err())
    return torch.stack(alphas), torch.stack(betas), torch.stack(Bs)


def binarize(
    W: torch.Tensor,
    mask: torch.Tensor | None = None,
    method: str = "arb",
    order: int = 1,
    iters: int = 15,
    S: torch.Tensor | None = None,
    x_iters: int | None = None,
) -> BinarizationResult:
    """Binarize the masked entries of ``W``.

    Parameters
    ----------
    W : (n, m) float tensor
        Rows are output channels. Computation is in float32 (float64 stays float64).
    mask : (n, m) bool tensor, optional
        The group; default all entries. Rows with no selected entry get zero scales.
    method : {"plain", "arb", "arb_x", "arb_rc"}
        ``"plain"``: BiLLM's one-shot statistics (residual binarization for ``order=2``).
        ``"arb"``: alternating μ/α/B refinement (Alg. 1 of the paper). ``"arb_x"``: ARB, then
        ``x_iters`` closed-form μ/α steps on the output error ``tr(R S Rᵀ)``. ``"arb_rc"``:
        ``Ŵ = diag(α) B diag(β)`` without mean, alternating α and β.
    order : {1, 2}
        Binary planes (2 is used for salient columns).
    iters : int
        Refinement iterations T (paper: 15); 0 returns the initialisation.
    S : (m, m) tensor, optional
        ``XᵀX / N`` of the layer inputs restricted to these columns; required for ``"arb_x"``.
    x_iters : int, optional
        ARB-X iterations after the ARB phase; default ``iters`` (the paper's 15 + 15).

    Returns
    -------
    BinarizationResult

    Raises
    ------
    TypeError
        Non-float ``W`` or a non-bool mask.
    ValueError
        NaN/Inf in ``W``, bad shapes, unknown method/order, ``iters < 0``, or ``"arb_x"`` without
        a valid ``S``.
    """
    check_weight(W)
    n, m = W.shape
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}; got {method!r}")
    if order not in (1, 2):
        raise ValueError(f"order must be 1 or 2; got {order!r}")
    if not isinstance(iters, int) or iters < 0:
        raise ValueError(f"iters must be an int >= 0; got {iters!r}")
    x_iters = iters if x_iters is None else x_iters
    if not isinstance(x_iters, int) or x_iters < 0:
        raise ValueError(f"x_iters must be an int >= 0; got {x_iters!r}")
    if mask is None:
        mask = torch.ones(n, m, dtype=torch.bool, device=W.device)
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        raise TypeError(f"mask must be a bool tensor; got {getattr(mask, 'dtype', type(mask).__name__)}")
    if mask.shape != W.shape:
        raise ValueError(f"mask must have W's shape {tuple(W.shape)}; got {tuple(mask.shape)}")
    if method == "arb_x":
        if S is None:
            raise ValueError("ARB-X needs calibration inputs: pass S = XᵀX/N of shape (m, m)")
        check_S(S, m)
    elif S is not None:
        check_S(S, m)
    dt = torch.float64 if W.dtype == torch.float64 else torch.float32
    Wf = W.detach().to(dt)
    M = mask.to(Wf.device)
    Mf = M.to(dt)
    trace: list[float] = []
    x_start = None
    if method == "plain":
        mu, alpha, B = _plain(Wf, Mf, order)
        params = {"B": B, "alpha": alpha, "mu": mu}
        trace.append(float(((Wf * Mf - _recon(mu, alpha, B, Mf)) ** 2).sum()))
    elif method in ("arb", "arb_x"):
        mu0, a0, B0 = _plain(Wf, Mf, order)
        trace.append(float(((Wf * Mf - _recon(mu0, a0, B0, Mf)) ** 2).sum()))
        mu, alpha, B = _arb(Wf, Mf, order, iters, trace)
        if method == "arb_x":
            x_start = len(trace)
            Sf = S.detach().to(device=Wf.device, dtype=dt)
            trace.append(float(output_error(Wf * Mf - _recon(mu, alpha, B, Mf), Sf)))
            mu, alpha = _arb_x(Wf, Mf, mu, alpha.clone(), B, Sf, x_iters, trace)
        params = {"B": B, "alpha": alpha, "mu": mu}
    else:
        alpha, beta, B = _arb_rc(Wf, Mf, order, iters, trace)
        params = {"B": B, "alpha": alpha, "beta": beta}
    res = BinarizationResult(
        W_hat=torch.zeros(0), mask=M, method=method, order=order, params=params, error_trace=trace, x_start=x_start
    )
    res.W_hat = res.reconstruct().to(W.dtype)
    if not all(math.isfinite(e) for e in trace):
        raise FloatingPointError("binarization produced a non-finite error; is W badly scaled?")
    return res
