"""Total / aleatoric / epistemic uncertainty of a higher-order prediction for a concave entropy G."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from .mixture import Mixture

__all__ = ["decompose", "gini_entropy", "shannon_entropy"]


def shannon_entropy(p: Tensor) -> Tensor:
    """Shannon entropy in nats, ``-sum_y p_y log p_y`` with ``0 log 0 = 0``.

    Parameters
    ----------
    p:
        ``(..., C)`` label distributions.

    Returns
    -------
    Tensor
        ``(...)`` entropies.
    """
    return -torch.special.xlogy(p, p).sum(-1)


def gini_entropy(p: Tensor) -> Tensor:
    """Gini entropy ``1 - sum_y p_y^2`` (the entropy of the Brier score), shape ``(...)`` for ``p`` of ``(..., C)``."""
    return 1.0 - (p * p).sum(-1)


_ENTROPIES: dict[str, Callable[[Tensor], Tensor]] = {"shannon": shannon_entropy, "gini": gini_entropy}


def decompose(mix: Mixture, entropy: str | Callable[[Tensor], Tensor] = "shannon") -> dict[str, Tensor]:
    """Split the predictive uncertainty of a mixture into total, aleatoric and epistemic parts.

    For a concave generalised entropy ``G`` and a mixture ``pi = sum_j w_j delta_{p_j}`` with mean
    ``p_bar``::

        TU = G(p_bar)      AU = sum_j w_j G(p_j)      EU = TU - AU  (>= 0 by Jensen)

    For Shannon ``EU`` is the mutual information between the label and the component; for Gini it is
    ``sum_y Var_{p~pi}(p_y)``. If the mixture is higher-order calibrated, ``AU`` equals the true
    ``E[G(p*(x'))]`` over the level set that receives the prediction.

    Parameters
    ----------
    mix:
        Batch of mixtures, batch shape ``(...)``.
    entropy:
        ``"shannon"`` (nats), ``"gini"``, or a callable mapping ``(..., C)`` distributions to ``(...)``.

    Returns
    -------
    dict[str, Tensor]
        ``total``, ``aleatoric``, ``epistemic``, each of shape ``mix.batch_shape``. ``epistemic`` is not
        clipped, so rounding can leave values of order ``-eps``.
    """
    if not isinstance(mix, Mixture):
        raise TypeError(f"mix must be a Mixture, got {type(mix).__name__}")
    if isinstance(entropy, str):
        if entropy not in _ENTROPIES:
            raise ValueError(f"entropy must be one of {sorted(_ENTROPIES)} or a callable, got {entropy!r}")
        g = _ENTROPIES[entropy]
    elif callable(entropy):
        g = entropy
    else:
        raise TypeError(f"entropy must be a string or a callable, got {type(entropy).__name__}")
    total = g(mix.mean())
    aleatoric = (mix.weights * g(mix.components)).sum(-1)
    return {"total": total, "aleatoric": aleatoric, "epistemic": total - aleatoric}
