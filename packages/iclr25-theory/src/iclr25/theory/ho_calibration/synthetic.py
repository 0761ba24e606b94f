"""The synthetic task with known ``p*(x)`` and the logistic-regression base models of the reproduction."""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["LogisticModel", "bootstrap_ensemble", "fit_logistic", "sample_inputs", "true_probs"]


def true_probs(x: Tensor) -> Tensor:
    """``p*(x) = softmax(s(x) * [4 x_2, -4 x_2, 2 sin(3 x_1)])``, ``s = 3`` for ``x_1 < 0`` else ``0.4``.

    The left half of the square is nearly deterministic and the right half is noisy, so level sets
    of a (misspecified) linear model mix points with very different aleatoric uncertainty.

    Parameters
    ----------
    x:
        ``(n, 2)`` inputs in ``[-1, 1]^2``.

    Returns
    -------
    Tensor
        ``(n, 3)`` label distributions.
    """
    if x.dim() != 2 or x.shape[1] != 2:
        raise ValueError(f"x must have shape (n, 2), got {tuple(x.shape)}")
    s = torch.where(x[:, 0] < 0, 3.0, 0.4).to(x.dtype)
    logits = torch.stack([4 * x[:, 1], -4 * x[:, 1], 2 * torch.sin(3 * x[:, 0])], dim=1)
    return torch.softmax(s[:, None] * logits, dim=1)


def sample_inputs(n: int, generator: torch.Generator | None = None, dtype: torch.dtype = torch.float64) -> Tensor:
    """``n`` inputs uniform on ``[-1, 1]^2``, shape ``(n, 2)``."""
    return torch.rand(n, 2, generator=generator, dtype=dtype) * 2 - 1


class LogisticModel:
    """Multinomial logistic regression ``softmax(x W + b)`` (weights ``(d, C)``, bias ``(C,)``)."""

    def __init__(self, weight: Tensor, bias: Tensor) -> None:
        self.weight = weight
        self.bias = bias

    def predict_proba(self, x: Tensor) -> Tensor:
        """``(n, C)`` predicted distributions for ``(n, d)`` inputs."""
        return torch.softmax(x @ self.weight + self.bias, dim=1)


def fit_logistic(x: Tensor, y: Tensor, n_classes: int, l2: float = 1e-3, iters: int = 100) -> LogisticModel:
    """Fit multinomial logistic regression by full-batch L-BFGS on the mean cross-entropy + ``l2 ||W||^2``.

    Parameters
    ----------
    x:
        ``(n, d)`` inputs.
    y:
        ``(n,)`` int64 labels.
    n_classes:
        ``C``.
    """
    w = torch.zeros(x.shape[1], n_classes, dtype=x.dtype, requires_grad=True)
    b = torch.zeros(n_classes, dtype=x.dtype, requires_grad=True)
    opt = torch.optim.LBFGS([w, b], max_iter=iters, line_search_fn="strong_wolfe", tolerance_grad=1e-9)

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(x @ w + b, y) + l2 * (w * w).sum()
        loss.backward()
        return loss

    opt.step(closure)
    return LogisticModel(w.detach(), b.detach())


def bootstrap_ensemble(
    x: Tensor, y: Tensor, n_classes: int, members: int = 5, generator: torch.Generator | None = None
) -> list[LogisticModel]:
    """``members`` logistic regressions, each fitted to a bootstrap resample of ``(x, y)``."""
    out = []
    for _ in range(members):
        idx = torch.randint(x.shape[0], (x.shape[0],), generator=generator)
        out.append(fit_logistic(x[idx], y[idx], n_classes))
    return out
