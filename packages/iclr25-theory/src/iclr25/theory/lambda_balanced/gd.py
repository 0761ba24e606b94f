"""Plain full-batch gradient descent on a two-layer linear network, the numerical baseline."""

from __future__ import annotations

import torch

from ._checks import check_float_tensor, check_positive, is_int

__all__ = ["simulate_gd"]


def simulate_gd(
    W1: torch.Tensor,
    W2: torch.Tensor,
    X: torch.Tensor,
    Y: torch.Tensor,
    lr: float,
    steps: int,
    *,
    record_every: int = 1,
) -> dict[str, torch.Tensor]:
    """Full-batch gradient descent on ``L = ||Y − W2W1X||²_F / (2P)``.

    With whitened ``X`` this is the forward-Euler discretisation of the flow solved by
    :func:`exact_trajectory` (τ = 1, ``t = lr·step``), so it differs from it by O(lr).
    The gradients only need ``Σxx = XXᵀ/P`` and ``Σyx = YXᵀ/P``, which are formed once.

    Parameters
    ----------
    W1:
        (Nh, Ni) initial first layer (not modified).
    W2:
        (No, Nh) initial second layer (not modified).
    X:
        (Ni, P) inputs (need not be whitened here).
    Y:
        (No, P) targets.
    lr:
        Learning rate η > 0.
    steps:
        Number of updates, >= 0.
    record_every:
        Record readouts every this many steps (step 0 and the last step always).

    Returns
    -------
    dict of torch.Tensor
        ``time`` (R,) ``= lr·step``; ``W2W1`` (R, No, Ni); ``W1tW1`` (R, Ni, Ni); ``W2W2t`` (R, No, No);
        ``loss`` (R,) the training loss L; ``W1`` (Nh, Ni) and ``W2`` (No, Nh), the final weights.
    """
    W1 = check_float_tensor("W1", W1)
    W2 = check_float_tensor("W2", W2)
    X = check_float_tensor("X", X)
    Y = check_float_tensor("Y", Y)
    if W1.ndim != 2 or W2.ndim != 2 or X.ndim != 2 or Y.ndim != 2:
        raise ValueError(
            "simulate_gd takes unbatched 2-D W1 (Nh, Ni), W2 (No, Nh), X (Ni, P), Y (No, P); got "
            f"W1 {tuple(W1.shape)}, W2 {tuple(W2.shape)}, X {tuple(X.shape)}, Y {tuple(Y.shape)}"
        )
    n_hidden, n_in = W1.shape
    n_out = W2.shape[0]
    if W2.shape[1] != n_hidden or X.shape[0] != n_in or Y.shape != (n_out, X.shape[1]):
        raise ValueError(
            f"inconsistent shapes: W1 {tuple(W1.shape)} (Nh, Ni), W2 {tuple(W2.shape)} (No, Nh), "
            f"X {tuple(X.shape)} (Ni, P), Y {tuple(Y.shape)} (No, P)"
        )
    args = {"W1": W1, "W2": W2, "X": X, "Y": Y}
    if len({a.dtype for a in args.values()}) > 1 or len({a.device for a in args.values()}) > 1:
        got = ", ".join(f"{k} {a.dtype} on {a.device}" for k, a in args.items())
        raise TypeError(f"W1, W2, X and Y must share one dtype and device (GD runs in that precision), got {got}")
    lr = check_positive("lr", lr)
    if not is_int(steps) or steps < 0:
        raise ValueError(f"steps must be an int >= 0, got {type(steps).__name__} {steps!r}")
    if not is_int(record_every) or record_every < 1:
        raise ValueError(f"record_every must be a positive int, got {type(record_every).__name__} {record_every!r}")
    steps, record_every = int(steps), int(record_every)

    P = X.shape[1]
    sxx = X @ X.T / P
    syx = Y @ X.T / P
    W1 = W1.detach().clone()
    W2 = W2.detach().clone()
    rec: dict[str, list] = {"time": [], "W2W1": [], "W1tW1": [], "W2W2t": [], "loss": []}

    def record(step: int) -> None:
        prod = W2 @ W1
        rec["time"].append(lr * step)
        rec["W2W1"].append(prod)
        rec["W1tW1"].append(W1.T @ W1)
        rec["W2W2t"].append(W2 @ W2.T)
        # From the residual itself: the expanded ½tr(Σyy) − tr(ΣyxᵀW) + … cancels to ~1e-15 near zero loss.
        rec["loss"].append(0.5 * ((Y - prod @ X) ** 2).sum() / P)

    with torch.no_grad():
        record(0)
        for step in range(1, steps + 1):
            err = syx - W2 @ W1 @ sxx  # −∂L/∂(W2W1)
            g1 = W2.T @ err
            g2 = err @ W1.T
            W1 = W1 + lr * g1
            W2 = W2 + lr * g2
            if step % record_every == 0 or step == steps:
                record(step)
    out = {
        k: torch.stack(v) if k != "time" else torch.tensor(v, dtype=W1.dtype, device=W1.device) for k, v in rec.items()
    }
    out["W1"], out["W2"] = W1, W2
    return out
