"""Reference per-infoset QFR step (the spec for the Triton kernel), numpy or torch.

One mirror-descent step at every infoset row, in closed form (Liu et al., 2025, Alg. 1)::

    entropy:   p ∝ exp((log ref + eta * g) / d)    then KL projection onto {p >= gamma}
    euclidean: p = L2 projection of (ref + eta * g) / d onto {p >= gamma, sum p = 1}

``d = 1 + eta * tau * kappa(I)`` is the per-infoset divisor. The KL projection onto the
gamma-perturbed simplex has the form ``p_a = max(gamma, lam * p_a)`` (``lam <= 1`` chosen so the
row sums to 1): only actions below gamma move. LiteEFG projects onto ``{p >= gamma * mu}`` with
``mu`` proportional to subtree sizes; we use a uniform lower bound ``gamma`` on every legal action
(hence ``gamma < 1 / max|A(I)|``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["kl_floor_projection", "omd_step_reference"]


def _simplex_projection(xp: Any, y: Any, mask: Any, radius: Any) -> Any:
    """Euclidean projection of each row of ``y`` onto ``{z >= 0, sum z = radius}`` over legal columns."""
    big = -1e300
    z = xp.where(mask, y, big * xp.ones_like(y))
    s = -np.sort(-z, axis=1) if xp is np else xp.sort(z, dim=1, descending=True).values
    k = xp.arange(1, y.shape[1] + 1) if xp is np else xp.arange(1, y.shape[1] + 1, device=y.device)
    legal = s > big / 2
    css = (s * legal).cumsum(1)
    cond = legal & (s - (css - radius[:, None]) / k > 0)
    rho = cond.sum(1)
    idx = rho - 1
    rows = xp.arange(y.shape[0]) if xp is np else xp.arange(y.shape[0], device=y.device)
    theta = (css[rows, idx] - radius) / rho
    out = y - theta[:, None]
    return xp.where(mask & (out > 0), out, 0.0 * y)


def omd_step_reference(
    ref: Any,
    g: Any,
    divisor: Any,
    mask: Any,
    eta: float,
    gamma: float,
    regularizer: str = "entropy",
) -> Any:
    """One regularized mirror-descent step per infoset row.

    Parameters
    ----------
    ref : (nI, A) float array or tensor
        Reference strategy rows (probabilities, 0 on padded columns).
    g : (nI, A) float
        Feedback (Q, trajectory-Q or counterfactual values).
    divisor : (nI,) float
        ``1 + eta * tau * kappa(I)``.
    mask : (nI, A) bool
        Legal columns.
    eta, gamma : float
        Step size and perturbation (``0 <= gamma < 1 / max |A(I)|``).
    regularizer : {"entropy", "euclidean"}

    Returns
    -------
    (nI, A) array of the same kind and dtype as ``ref``; rows sum to 1, padded columns 0. ``g`` and
    ``divisor`` may have another float dtype: the step is computed in the promoted dtype and the
    result is cast to ``ref``'s.
    """
    xp = np if isinstance(ref, np.ndarray) else __import__("torch")
    # Count legal actions in ref's dtype: torch promotes int * float to float32, not float64.
    n = xp.where(mask, 1.0 + 0.0 * ref, 0.0 * ref).sum(1)
    if regularizer == "entropy":
        tiny = np.finfo(np.float64).tiny if ref.dtype in (np.float64, getattr(xp, "float64", None)) else 1e-38
        logits = (xp.log(xp.where(ref > tiny, ref, tiny + 0.0 * ref)) + eta * g) / divisor[:, None]
        neg = xp.where(mask, logits, -np.inf * xp.ones_like(logits))
        m = neg.max(1, keepdims=True) if xp is np else neg.amax(1, keepdims=True)
        p = xp.where(mask, xp.exp(neg - m), 0.0 * logits)
        p = p / p.sum(1, keepdims=True)
        if gamma > 0:
            p = kl_floor_projection(xp, p, mask, gamma)
    elif regularizer == "euclidean":
        y = (ref + eta * g) / divisor[:, None] - gamma
        p = xp.where(mask, _simplex_projection(xp, y, mask, 1.0 - gamma * n) + gamma, 0.0 * y)
    else:
        raise ValueError(f"regularizer must be 'entropy' or 'euclidean', got {regularizer!r}")
    # float64 g or divisor promote the arithmetic above; keep that precision, but return ref's dtype
    # as documented and as the kernel does, so the result's dtype does not depend on the backend.
    return p.astype(ref.dtype, copy=False) if xp is np else p.to(ref.dtype)


def kl_floor_projection(xp: Any, p: Any, mask: Any, gamma: float) -> Any:
    """KL projection of probability rows onto ``{p_a >= gamma on legal a}``.

    The solution is ``max(gamma, lam * p)`` with one ``lam`` per row. Growing the clamped set one
    round at a time only lowers ``lam``, so ``A`` rounds reach the fixed point.
    """
    clamped = mask & (p < gamma)
    lam = xp.ones_like(p[:, :1])
    for _ in range(p.shape[1]):
        free = mask & ~clamped
        n_clamped = xp.where(clamped, 1.0 + 0.0 * p, 0.0 * p).sum(1, keepdims=True)
        lam = (1.0 - gamma * n_clamped) / (p * free).sum(1, keepdims=True)
        clamped = mask & (clamped | (lam * p < gamma))
    return xp.where(mask, xp.where(clamped, gamma + 0.0 * p, lam * p), 0.0 * p)
