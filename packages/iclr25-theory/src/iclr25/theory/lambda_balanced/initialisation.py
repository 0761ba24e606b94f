"""λ-balanced initialisation of two-layer linear networks (``W2ᵀW2 − W1W1ᵀ = λ I``)."""

from __future__ import annotations

import torch
from torch import nn

from ._checks import check_dims, check_feasible, check_float_tensor, check_lam, check_positive

__all__ = ["LinearNet2", "balanced_singular_values", "init_linear_pair_", "lambda_balanced_init"]


def balanced_singular_values(s: torch.Tensor, lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Split product singular values ``s`` into per-layer values with ``s1 s2 = s``, ``s2² − s1² = λ``.

    ``s2 = sqrt((sqrt(λ² + 4s²) + λ)/2)`` and ``s1 = sqrt((sqrt(λ² + 4s²) − λ)/2)``. The smaller of
    the two is computed as ``s / larger`` because the difference form cancels catastrophically when
    ``|λ| >> s`` (λ = 20, s = 1e-3 would lose about half the digits).

    Parameters
    ----------
    s:
        (k,) non-negative float tensor.
    lam:
        λ, the balance of the second layer over the first.

    Returns
    -------
    tuple of torch.Tensor
        ``(s1, s2)``, both (k,): first-layer and second-layer singular values.
    """
    lam = check_lam(lam)
    s = check_float_tensor("s", s, min_ndim=1)
    if bool((s < 0).any()):
        raise ValueError(f"singular values must be >= 0, got {s.tolist()}")
    root = torch.hypot(torch.full_like(s, lam), 2 * s)
    big = torch.sqrt((root + abs(lam)) / 2)
    small = torch.where(big > 0, s / torch.where(big > 0, big, torch.ones_like(big)), torch.zeros_like(s))
    return (small, big) if lam >= 0 else (big, small)


def _haar_orthogonal(n: int, generator: torch.Generator | None, dtype: torch.dtype, device) -> torch.Tensor:
    # QR of a Gaussian matrix with the sign of R's diagonal folded in is Haar-distributed on O(n).
    A = torch.randn(n, n, generator=generator, dtype=torch.float64, device="cpu")
    Q, R = torch.linalg.qr(A)
    Q = Q * torch.sign(torch.diagonal(R)).where(torch.diagonal(R) != 0, torch.ones(n, dtype=torch.float64))
    return Q.to(dtype=dtype, device=device)


def lambda_balanced_init(
    lam: float,
    n_in: int,
    n_hidden: int,
    n_out: int,
    scale: float = 1.0,
    target: torch.Tensor | None = None,
    aligned: bool = False,
    generator: torch.Generator | None = None,
    *,
    singular_values: torch.Tensor | None = None,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Weights ``W1, W2`` with ``W2ᵀW2 − W1W1ᵀ = λ I`` and a prescribed product ``W2W1``.

    The product is ``U diag(s) Vᵀ`` with ``k = min(n_in, n_hidden, n_out)`` singular values ``s``
    (all equal to ``scale`` unless ``singular_values`` is given) and singular vectors that are
    Haar-random, or the target's when ``aligned=True``. Each mode is split with
    :func:`balanced_singular_values`; a Haar-random orthogonal ``R`` mixes the hidden units:
    ``W1 = R D1 Vᵀ``, ``W2 = U D2 Rᵀ``. Hidden units beyond ``k`` get ``sqrt(λ)`` on the second
    layer (λ > 0) or ``sqrt(−λ)`` on the first (λ < 0), which keeps the product unchanged.

    Sign convention: λ is the eigenvalue of ``W2ᵀW2 − W1W1ᵀ`` (second layer minus first), so
    λ > 0 makes the second layer larger.

    Parameters
    ----------
    lam:
        λ. Feasibility: λ > 0 needs ``n_hidden <= n_out``, λ < 0 needs ``n_hidden <= n_in``.
    n_in, n_hidden, n_out:
        Layer widths Ni, Nh, No.
    scale:
        Every product singular value (σ in the paper's small-initialisation experiments).
    target:
        (n_out, n_in) matrix, usually Σyx; used only (and required) when ``aligned=True``.
    aligned:
        Take the product's singular vectors from ``target`` (decoupled, mode-aligned start).
    generator:
        Random source for ``U``, ``V`` and ``R``.
    singular_values:
        (k,) non-negative product singular values, overriding ``scale``.
    dtype, device:
        Of the returned weights (computed in float64).

    Returns
    -------
    tuple of torch.Tensor
        ``W1`` (n_hidden, n_in) and ``W2`` (n_out, n_hidden); ``nn.Linear`` layout.
    """
    lam = check_lam(lam)
    n_in, n_hidden, n_out = check_dims(n_in=n_in, n_hidden=n_hidden, n_out=n_out)
    check_feasible(lam, n_in, n_hidden, n_out)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
    scale = check_positive("scale", scale, allow_zero=True)
    if dtype not in (torch.float32, torch.float64):
        raise TypeError(f"dtype must be torch.float32 or torch.float64, got {dtype}")
    k = min(n_in, n_hidden, n_out)
    if singular_values is None:
        s = torch.full((k,), scale, dtype=torch.float64)
    else:
        s = check_float_tensor("singular_values", singular_values, min_ndim=1)
        if s.shape != (k,):
            raise ValueError(f"singular_values must have shape (k,) = ({k},), got {tuple(s.shape)}")
        if bool((s < 0).any()):
            raise ValueError(f"singular_values must be >= 0, got {s.tolist()}")
        s = s.detach().to("cpu", torch.float64)
    if aligned:
        if target is None:
            raise ValueError("aligned=True needs target, the (n_out, n_in) matrix (usually Σyx) to align with")
        target = check_float_tensor("target", target)
        if target.shape != (n_out, n_in):
            raise ValueError(f"target must have shape (n_out, n_in) = ({n_out}, {n_in}), got {tuple(target.shape)}")
        U, _, Vh = torch.linalg.svd(target.detach().to("cpu", torch.float64), full_matrices=True)
        V = Vh.T
    else:
        if target is not None:
            raise ValueError("target is only used with aligned=True; pass aligned=True or drop target")
        U = _haar_orthogonal(n_out, generator, torch.float64, "cpu")
        V = _haar_orthogonal(n_in, generator, torch.float64, "cpu")
    R = _haar_orthogonal(n_hidden, generator, torch.float64, "cpu")

    s1, s2 = balanced_singular_values(s, lam)
    D1 = torch.zeros(n_hidden, n_in, dtype=torch.float64)
    D2 = torch.zeros(n_out, n_hidden, dtype=torch.float64)
    idx = torch.arange(k)
    D1[idx, idx] = s1
    D2[idx, idx] = s2
    extra = torch.arange(k, n_hidden)
    if lam > 0:
        D2[extra, extra] = lam**0.5
    elif lam < 0:
        D1[extra, extra] = (-lam) ** 0.5
    W1 = R @ D1 @ V.T
    W2 = U @ D2 @ R.T
    return W1.to(dtype=dtype, device=device), W2.to(dtype=dtype, device=device)


@torch.no_grad()
def init_linear_pair_(
    fc1: nn.Linear,
    fc2: nn.Linear,
    lam: float,
    scale: float = 1.0,
    *,
    target: torch.Tensor | None = None,
    aligned: bool = False,
    generator: torch.Generator | None = None,
) -> tuple[nn.Linear, nn.Linear]:
    """Overwrite the weights of ``fc2 ∘ fc1`` in place with a λ-balanced initialisation.

    Parameters
    ----------
    fc1, fc2:
        ``nn.Linear(n_in, n_hidden)`` and ``nn.Linear(n_hidden, n_out)``; biases, if any, are zeroed
        because the closed form is for bias-free networks.
    lam, scale, target, aligned, generator:
        As in :func:`lambda_balanced_init`.

    Returns
    -------
    tuple of nn.Linear
        ``(fc1, fc2)``, modified in place.
    """
    if not isinstance(fc1, nn.Linear) or not isinstance(fc2, nn.Linear):
        raise TypeError(f"fc1 and fc2 must be nn.Linear, got {type(fc1).__name__} and {type(fc2).__name__}")
    if fc2.in_features != fc1.out_features:
        raise ValueError(f"fc2.in_features ({fc2.in_features}) must equal fc1.out_features ({fc1.out_features})")
    W1, W2 = lambda_balanced_init(
        lam, fc1.in_features, fc1.out_features, fc2.out_features, scale, target, aligned, generator
    )
    fc1.weight.copy_(W1.to(fc1.weight))
    fc2.weight.copy_(W2.to(fc2.weight))
    for fc in (fc1, fc2):
        if fc.bias is not None:
            fc.bias.zero_()
    return fc1, fc2


class LinearNet2(nn.Module):
    """Bias-free two-layer linear network ``ŷ = W2 W1 x`` started λ-balanced.

    Parameters
    ----------
    n_in, n_hidden, n_out:
        Widths Ni, Nh, No.
    lam:
        λ of the initialisation (see :func:`lambda_balanced_init`).
    scale:
        Singular values of the initial product ``W2W1``.
    target, aligned, generator:
        As in :func:`lambda_balanced_init`.
    dtype:
        Parameter dtype (float64 by default, as the exact solution is compared to it).

    Attributes
    ----------
    fc1, fc2:
        The layers; ``fc1.weight`` is W1 (Nh, Ni), ``fc2.weight`` is W2 (No, Nh).
    lam:
        The λ it was initialised with.
    """

    def __init__(
        self,
        n_in: int,
        n_hidden: int,
        n_out: int,
        lam: float = 0.0,
        scale: float = 0.1,
        *,
        target: torch.Tensor | None = None,
        aligned: bool = False,
        generator: torch.Generator | None = None,
        dtype: torch.dtype = torch.float64,
    ) -> None:
        super().__init__()
        self.lam = check_lam(lam)
        W1, W2 = lambda_balanced_init(lam, n_in, n_hidden, n_out, scale, target, aligned, generator, dtype=dtype)
        self.fc1 = nn.Linear(n_in, n_hidden, bias=False, dtype=dtype)
        self.fc2 = nn.Linear(n_hidden, n_out, bias=False, dtype=dtype)
        with torch.no_grad():
            self.fc1.weight.copy_(W1)
            self.fc2.weight.copy_(W2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Map (batch, n_in) inputs to (batch, n_out) outputs."""
        return self.fc2(self.fc1(x))

    def balance(self) -> torch.Tensor:
        """The conserved matrix ``W2ᵀW2 − W1W1ᵀ``, (n_hidden, n_hidden); λI while gradient flow runs."""
        W1, W2 = self.fc1.weight, self.fc2.weight
        return W2.T @ W2 - W1 @ W1.T
