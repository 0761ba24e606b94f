"""Neural tangent kernel of a two-layer linear network and the kernel distance between two NTKs."""

from __future__ import annotations

import torch

from ._checks import check_float_tensor

__all__ = ["kernel_distance", "ntk"]


def ntk(W1tW1: torch.Tensor, W2W2t: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
    """Empirical NTK on the inputs: ``K = I_No ⊗ XᵀW1ᵀW1X + W2W2ᵀ ⊗ XᵀX``.

    Only the representations ``W1ᵀW1`` and ``W2W2ᵀ`` enter, so the exact solution's ``QQᵀ`` blocks
    give the NTK at any time without the weights themselves.

    Parameters
    ----------
    W1tW1:
        (..., Ni, Ni) input-side representation.
    W2W2t:
        (..., No, No) output-side representation (batch shape broadcast with ``W1tW1``).
    X:
        (Ni, P) inputs, one column per sample.

    Returns
    -------
    torch.Tensor
        (..., No·P, No·P), in the widest dtype of the inputs; row ``o·P + p`` is output ``o`` on
        sample ``p`` (the order of ``(W2W1X).flatten()``).
    """
    W1tW1 = check_float_tensor("W1tW1", W1tW1)
    W2W2t = check_float_tensor("W2W2t", W2W2t)
    X = check_float_tensor("X", X)
    n_in = W1tW1.shape[-1]
    if W1tW1.shape[-2] != n_in or W2W2t.shape[-2] != W2W2t.shape[-1]:
        raise ValueError(f"W1tW1 and W2W2t must be square, got {tuple(W1tW1.shape)} and {tuple(W2W2t.shape)}")
    if X.ndim != 2 or X.shape[0] != n_in:
        raise ValueError(f"X must have shape (Ni={n_in}, P), got {tuple(X.shape)}")
    n_out, P = W2W2t.shape[-1], X.shape[1]
    try:
        batch = torch.broadcast_shapes(W1tW1.shape[:-2], W2W2t.shape[:-2])
    except RuntimeError as err:
        raise ValueError(
            f"the batch shapes of W1tW1 {tuple(W1tW1.shape)} and W2W2t {tuple(W2W2t.shape)} must broadcast"
        ) from err
    # float32 readouts with float64 X (or the reverse): promote the matmul pair exactly to the wider
    # type; W2W2t already promotes in the elementwise product below
    dtype = torch.promote_types(W1tW1.dtype, X.dtype)
    W1tW1, X = W1tW1.to(dtype), X.to(dtype)
    hidden = X.mT @ W1tW1 @ X  # (..., P, P)
    gram = X.mT @ X
    eye = torch.eye(n_out, dtype=hidden.dtype, device=hidden.device)
    # Kronecker products through broadcasting, so batched representations need no Python loop.
    first = eye[:, None, :, None] * hidden[..., None, :, None, :]
    second = W2W2t[..., :, None, :, None] * gram[:, None, :]
    return (first + second).reshape(*batch, n_out * P, n_out * P)


def kernel_distance(Ka: torch.Tensor, Kb: torch.Tensor) -> torch.Tensor:
    """Kernel distance ``1 − ⟨Ka, Kb⟩_F / (||Ka||_F ||Kb||_F)``, in [0, 2] (0: same direction).

    It ignores the kernels' scale; report a relative norm change next to it to see lazy growth.

    Parameters
    ----------
    Ka, Kb:
        (..., n, n) kernels of the same shape.

    Returns
    -------
    torch.Tensor
        (...) distances.
    """
    Ka = check_float_tensor("Ka", Ka)
    Kb = check_float_tensor("Kb", Kb)
    if Ka.shape != Kb.shape:
        raise ValueError(f"Ka and Kb must have the same shape, got {tuple(Ka.shape)} and {tuple(Kb.shape)}")
    na = torch.linalg.matrix_norm(Ka)
    nb = torch.linalg.matrix_norm(Kb)
    if bool((na == 0).any()) or bool((nb == 0).any()):
        raise ValueError("kernel_distance is undefined for an all-zero kernel")
    return 1 - (Ka * Kb).sum(dim=(-2, -1)) / (na * nb)
