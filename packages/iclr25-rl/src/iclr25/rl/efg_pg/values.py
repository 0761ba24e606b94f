"""Exact values of the bidilated regularized game: reaches, Q / cf values, best responses.

The regularized game (player 0 maximizes, player 1 minimizes)::

    f(x, y) = sum_z pi_c(z) x(z) y(z) u(z)
              - tau * sum_{h: P(h)=0} pi_c(h) x(h) y(h) psi(sigma_0(.|I(h)))
              + tau * sum_{h: P(h)=1} pi_c(h) x(h) y(h) psi(sigma_1(.|I(h)))

with ``psi(p) = sum_a p_a log p_a + log|A(I)|`` (shifted negative entropy) or ``1/2 ||p||^2``.
Every pass is a loop over depths of gathers and ``bincount`` scatter-adds, written once for numpy
arrays and torch tensors (the ``xp`` argument is the module).
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from .games import Game, check_game
from .policy import as_probs

__all__ = [
    "best_response_value",
    "exploitability",
    "policy_value",
    "q_values",
    "regularized_gap",
]

REGULARIZERS = ("entropy", "euclidean")


def _xp(arr: Any) -> Any:
    if isinstance(arr, np.ndarray):
        return np
    import torch

    return torch


def _backend(arr: Any) -> Any:
    return "numpy" if isinstance(arr, np.ndarray) else arr.device


def _check_tau(tau: float) -> float:
    if isinstance(tau, (bool, np.bool_)) or not isinstance(tau, numbers.Real):
        raise TypeError(f"tau must be a float, got {type(tau).__name__}")
    if not np.isfinite(tau) or tau < 0:
        raise ValueError(f"tau must be a finite number >= 0, got {tau}")
    return float(tau)


def _check_regularizer(regularizer: str) -> str:
    if regularizer not in REGULARIZERS:
        raise ValueError(f"regularizer must be one of {REGULARIZERS}, got {regularizer!r}")
    return regularizer


def psi(xp: Any, probs: Any, num_actions: Any, regularizer: str = "entropy") -> Any:
    """Per-infoset regularizer ``psi(sigma(.|I))``, shape ``(nI,)``.

    Entropy is shifted by ``log|A(I)|`` so it is 0 at uniform; the shift matters because the
    constant is weighted by strategy-dependent reaches.
    """
    if regularizer == "euclidean":
        return 0.5 * (probs * probs).sum(1)
    pos = probs > 0
    plogp = xp.where(pos, probs * xp.log(xp.where(pos, probs, 1.0)), 0.0 * probs)
    # Count in probs' dtype: torch promotes int64 * 1.0 to float32, which rounds log|A(I)|.
    n = num_actions * 1.0 if xp is np else num_actions.to(probs.dtype)
    return plogp.sum(1) + xp.log(n)


def reaches(ar: dict[str, Any], probs: Any) -> tuple[Any, Any, Any]:
    """Chance, player-0 and player-1 reach of every history, each ``(H,)``."""
    xp = _xp(probs)
    e = probs.reshape(-1)[ar["edge_col"]]
    pk = ar["parent_kind"]
    one = xp.ones_like(e)
    fc = xp.where(pk == 2, ar["chance_edge"], one)
    f0 = xp.where(pk == 0, e, one)
    f1 = xp.where(pk == 1, e, one)
    rc, r0, r1 = xp.ones_like(e), xp.ones_like(e), xp.ones_like(e)
    for lv, par in zip(ar["levels"][1:], ar["level_parent"][1:], strict=True):
        rc[lv] = rc[par] * fc[lv]
        r0[lv] = r0[par] * f0[lv]
        r1[lv] = r1[par] * f1[lv]
    return rc, r0, r1


def _softmax_rows(xp: Any, logits: Any, mask: Any) -> Any:
    neg = xp.where(mask, logits, -np.inf * xp.ones_like(logits))
    m = neg.max(1, keepdims=True) if xp is np else neg.amax(1, keepdims=True)
    p = xp.where(mask, xp.exp(neg - m), 0.0 * logits)
    return p / p.sum(1, keepdims=True)


def _argmax_rows(xp: Any, q: Any, mask: Any) -> Any:
    neg = xp.where(mask, q, -np.inf * xp.ones_like(q))
    idx = neg.argmax(1)
    out = 0.0 * q
    if xp is np:
        out[np.arange(q.shape[0]), idx] = 1.0
    else:
        out[xp.arange(q.shape[0], device=q.device), idx] = 1.0
    return out


def backward(
    ar: dict[str, Any],
    probs: Any,
    tau: float,
    regularizer: str = "entropy",
    reach: tuple[Any, Any, Any] | None = None,
    responder: int | None = None,
) -> Any:
    """Values ``v(h)`` of the regularized game from player 0's side, ``(H,)``.

    ``v(h)`` includes the regularizer of ``h`` itself and everything below. With ``responder``
    set, that player's strategy is replaced on the way up by its (soft, when ``tau > 0``) best
    response, decided infoset by infoset from the deepest level: ``sigma ∝ exp(Q/tau)`` or argmax.
    """
    xp = _xp(probs)
    a = probs.shape[1]
    n_inf = probs.shape[0]
    v = ar["utility"].clone() if xp is not np else ar["utility"].copy()
    num_actions = ar["num_actions"]
    ps = psi(xp, probs, num_actions, regularizer) * tau
    if responder is not None:
        rc, r0, r1 = reach if reach is not None else reaches(ar, probs)
        r_opp = rc * (r1 if responder == 0 else r0)
        sgn_resp = 1.0 if responder == 0 else -1.0
    cols = xp.arange(a) if xp is np else xp.arange(a, device=probs.device)
    for d in range(len(ar["levels"]) - 1, -1, -1):
        ch = ar["level_chance"][d]
        if ch.shape[0]:
            kids = ar["children"][ch]
            v[ch] = (ar["chance_matrix"][ch] * v[kids]).sum(1)
        pos = ar["level_dec_pos"][d]
        if not pos.shape[0]:
            continue
        hist = ar["dec"][pos]
        inf = ar["dec_inf"][pos]
        player = ar["dec_player"][pos]
        vals = v[ar["dec_children"][pos]]
        dmask = ar["dec_mask"][pos]
        sigma = probs[inf]
        reg = ps[inf]
        if responder is not None:
            own = player == responder
            if bool(own.any()):
                h_own, i_own = hist[own], inf[own]
                w = (r_opp[h_own] * sgn_resp)[:, None] * vals[own] * dmask[own]
                flat = (i_own[:, None] * a + cols[None, :]).reshape(-1)
                cf = xp.bincount(flat, weights=w.reshape(-1), minlength=n_inf * a).reshape(n_inf, a)
                r = xp.bincount(i_own, weights=r_opp[h_own], minlength=n_inf)
                q = cf / xp.where(r > 0, r, 1.0)[:, None]
                mask = ar["mask"]
                br = _softmax_rows(xp, q / tau, mask) if tau > 0 else _argmax_rows(xp, q, mask)
                br_reg = psi(xp, br, num_actions, regularizer) * tau
                sigma = xp.where(own[:, None], br[inf], sigma)
                reg = xp.where(own, br_reg[inf], reg)
        # Own regularizer is paid by the owner: minus for player 0, plus (player 0's view) for 1.
        sign = xp.where(player == 0, -1.0, 1.0)
        v[hist] = (sigma * vals * dmask).sum(1) + sign * reg
    return v


def _prepare(game: Game, policy: Any) -> tuple[dict[str, Any], Any]:
    check_game(game)
    probs = as_probs(game, policy, "policy")
    return game.arrays(_backend(probs)), probs


def cf_values(ar: dict[str, Any], probs: Any, tau: float, regularizer: str = "entropy") -> tuple[Any, Any, Any]:
    """Array-level :func:`q_values` on prepared arrays (no validation); see there."""
    xp = _xp(probs)
    n_inf, a = probs.shape
    rc, r0, r1 = reaches(ar, probs)
    v = backward(ar, probs, tau, regularizer, reach=(rc, r0, r1))
    dec = ar["dec"]
    player = ar["dec_player"]
    sgn = xp.where(player == 0, 1.0, -1.0)
    r_opp = rc[dec] * xp.where(player == 0, r1[dec], r0[dec])
    r_own = xp.where(player == 0, r0[dec], r1[dec])
    vals = v[ar["dec_children"]] * ar["dec_mask"]
    w = (r_opp * sgn)[:, None] * vals
    cf = xp.bincount(ar["dec_flat"].reshape(-1), weights=w.reshape(-1), minlength=n_inf * a).reshape(n_inf, a)
    r = xp.bincount(ar["dec_inf"], weights=r_opp, minlength=n_inf)
    own = xp.zeros_like(r)
    own[ar["dec_inf"]] = r_own  # perfect recall: one own reach per infoset
    return cf, r, own


def q_values(
    game: Game, policy: Any, tau: float = 0.0, regularizer: str = "entropy"
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact counterfactual values of the regularized game.

    Parameters
    ----------
    game : Game
    policy : TabularPolicy or (nI, A) array
        The profile ``sigma`` (float32 is promoted to float64).
    tau : float
        Regularization weight ``tau >= 0``.
    regularizer : {"entropy", "euclidean"}

    Returns
    -------
    cf : (nI, A) float64
        ``cf(I,a) = sum_{h in I} pi_c(h) pi_{-p}(h) v_p(ha)``, acting player's view, 0 at padding.
    reach_opp : (nI,) float64
        ``r(I) = sum_{h in I} pi_c(h) pi_{-p}(h)``; ``Q = cf / r``.
    reach_own : (nI,) float64
        ``pi_p(I)``; the trajectory Q-value is ``reach_own * cf``.
    """
    tau = _check_tau(tau)
    _check_regularizer(regularizer)
    ar, probs = _prepare(game, policy)
    out = cf_values(ar, probs, tau, regularizer)
    return tuple(x if isinstance(x, np.ndarray) else x.cpu().numpy() for x in out)  # type: ignore[return-value]


def best_response_value(game: Game, policy: Any, player: int, tau: float = 0.0, regularizer: str = "entropy") -> float:
    """Value of ``player``'s (soft) best response to the other player's part of ``policy``.

    Parameters
    ----------
    game : Game
    policy : TabularPolicy or (nI, A) array
    player : {0, 1}
        The responder; the value is from its side of the (regularized) game.
    tau : float
        ``0``: exact best response by backward induction. ``> 0``: the regularized best response,
        ``sigma(.|I) ∝ exp(Q(I,.)/tau)`` at each responder infoset, deepest first.
    regularizer : {"entropy", "euclidean"}
        Only ``"entropy"`` has the closed-form soft best response; ``"euclidean"`` needs ``tau=0``.
    """
    tau = _check_tau(tau)
    _check_regularizer(regularizer)
    if player not in (0, 1) or isinstance(player, bool):
        raise ValueError(f"player must be 0 or 1, got {player!r}")
    if regularizer == "euclidean" and tau > 0:
        raise ValueError("best_response_value with tau > 0 supports regularizer='entropy' only, got 'euclidean'")
    ar, probs = _prepare(game, policy)
    v = backward(ar, probs, tau, regularizer, responder=player)
    root = float(v[0])
    return root if player == 0 else -root


def policy_value(game: Game, policy: Any, tau: float = 0.0, regularizer: str = "entropy") -> float:
    """Player 0's expected payoff ``f(x, y)`` of the profile (regularized when ``tau > 0``)."""
    tau = _check_tau(tau)
    _check_regularizer(regularizer)
    ar, probs = _prepare(game, policy)
    return float(backward(ar, probs, tau, regularizer)[0])


def exploitability(game: Game, policy: Any) -> float:
    """Exploitability ``(BR_0(sigma_1) + BR_1(sigma_0)) / 2`` = NashConv / 2 (OpenSpiel's).

    Parameters
    ----------
    game : Game
    policy : TabularPolicy or (nI, A) array
        Rows validated as in :class:`TabularPolicy`; float32 is promoted to float64.

    Returns
    -------
    float
        ``>= 0``; 0 exactly at a Nash equilibrium.
    """
    ar, probs = _prepare(game, policy)
    b0 = float(backward(ar, probs, 0.0, responder=0)[0])
    b1 = -float(backward(ar, probs, 0.0, responder=1)[0])
    return 0.5 * (b0 + b1)


def regularized_gap(game: Game, policy: Any, tau: float, regularizer: str = "entropy") -> float:
    """Duality gap of the regularized game: ``max_x' f(x', y) - min_y' f(x, y')`` (``>= 0``).

    Zero exactly at the regularized Nash equilibrium that QFR's iterates converge to.
    """
    tau = _check_tau(tau)
    _check_regularizer(regularizer)
    if regularizer == "euclidean" and tau > 0:
        raise ValueError("regularized_gap with tau > 0 supports regularizer='entropy' only, got 'euclidean'")
    ar, probs = _prepare(game, policy)
    b0 = float(backward(ar, probs, tau, regularizer, responder=0)[0])
    b1 = -float(backward(ar, probs, tau, regularizer, responder=1)[0])
    return b0 + b1
