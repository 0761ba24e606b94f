"""Higher-order predictions: batched finite mixtures over label distributions."""

from __future__ import annotations

import numbers
from collections.abc import Sequence

import torch
from torch import Tensor

__all__ = ["Mixture", "simplex_tolerance"]


def simplex_tolerance(dtype: torch.dtype) -> float:
    """Tolerance for "sums to one": 1e-6, widened for dtypes whose rounding alone exceeds it.

    Parameters
    ----------
    dtype:
        A floating dtype.

    Returns
    -------
    float
        ``max(1e-6, 64 * eps(dtype))`` (float32: 7.6e-6, float16: 0.06).
    """
    return max(1e-6, 64.0 * torch.finfo(dtype).eps)


def _int_arg(value: object, name: str, minimum: int = 1) -> int:
    """``value`` as an ``int`` (a Python or NumPy integer, not a bool) when ``>= minimum``, else ValueError."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        kind = "positive" if minimum == 1 else "non-negative" if minimum == 0 else f">= {minimum}"
        raise ValueError(f"{name} must be a {kind} int, got {value!r} ({type(value).__name__})")
    return int(value)


def _check_simplex(t: Tensor, name: str) -> None:
    """Raise ValueError unless every row (last dim) of ``t`` is a finite probability vector."""
    with torch.no_grad():
        d = t.detach()
        if not torch.isfinite(d).all():
            raise ValueError(f"{name} must be finite, got NaN or inf entries")
        if (d < 0).any():
            raise ValueError(f"{name} must be non-negative (on the simplex), got min {d.min().item():.3g}")
        dev = (d.sum(-1) - 1).abs().max().item() if d.numel() else 0.0
        tol = simplex_tolerance(d.dtype)
        if dev > tol:
            raise ValueError(f"{name} must sum to 1 over the last dim (tolerance {tol:.1g}), got deviation {dev:.3g}")


class Mixture:
    """A batch of finite mixtures over label distributions (higher-order predictions).

    At each batch position the prediction is the law ``sum_j w_j * delta_{p_j}`` on the simplex.

    Parameters
    ----------
    weights:
        ``(..., m)`` float tensor of mixture weights ``w_j`` (each row on the simplex).
    components:
        ``(..., m, C)`` float tensor of component label distributions ``p_j`` (rows on the simplex).
    validate:
        Check shapes, finiteness and the simplex constraints (tolerance :func:`simplex_tolerance`).
        Internal callers whose outputs are softmaxes switch it off.

    Raises
    ------
    TypeError
        When ``weights``/``components`` are not floating tensors.
    ValueError
        On mismatched shapes, NaN/inf, negative entries or rows not summing to one.

    Examples
    --------
    >>> mix = Mixture.from_ensemble(torch.tensor([[[0.9, 0.1], [0.5, 0.5]]]))
    >>> mix.mean()
    tensor([[0.7000, 0.3000]])
    """

    def __init__(self, weights: Tensor, components: Tensor, *, validate: bool = True) -> None:
        for name, t in (("weights", weights), ("components", components)):
            if not isinstance(t, Tensor):
                raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
            if not t.is_floating_point():
                raise TypeError(f"{name} must be a floating tensor, got dtype {t.dtype}")
        if components.dim() < 2:
            raise ValueError(f"components must have shape (..., m, C), got {tuple(components.shape)}")
        if weights.shape != components.shape[:-1]:
            raise ValueError(
                f"weights must have shape components.shape[:-1] = {tuple(components.shape[:-1])}, "
                f"got {tuple(weights.shape)}"
            )
        if weights.dtype != components.dtype or weights.device != components.device:
            raise TypeError(
                f"weights and components must share dtype and device, got {weights.dtype}/{weights.device} "
                f"and {components.dtype}/{components.device}"
            )
        if validate:
            _check_simplex(weights, "weights")
            _check_simplex(components, "components")
        self.weights = weights
        self.components = components
        self._log_weights: Tensor | None = None
        self._log_components: Tensor | None = None

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_ensemble(cls, probs: Tensor) -> Mixture:
        """The uniform mixture over ensemble members (or MC-dropout / posterior samples).

        Parameters
        ----------
        probs:
            ``(..., M, C)`` member predictive distributions.

        Returns
        -------
        Mixture
            Batch shape ``probs.shape[:-2]``, ``m = M`` components with weights ``1/M``.
        """
        if not isinstance(probs, Tensor) or not probs.is_floating_point():
            raise TypeError(f"probs must be a floating torch.Tensor, got {type(probs).__name__}")
        if probs.dim() < 2:
            raise ValueError(f"probs must have shape (..., M, C), got {tuple(probs.shape)}")
        weights = torch.full(probs.shape[:-1], 1.0 / probs.shape[-2], dtype=probs.dtype, device=probs.device)
        return cls(weights, probs)

    @classmethod
    def point_mass(cls, probs: Tensor) -> Mixture:
        """A first-order prediction viewed as a higher-order one (a single component, weight 1).

        Parameters
        ----------
        probs:
            ``(..., C)`` label distributions.
        """
        if not isinstance(probs, Tensor) or not probs.is_floating_point():
            raise TypeError(f"probs must be a floating torch.Tensor, got {type(probs).__name__}")
        return cls(torch.ones_like(probs[..., :1]), probs.unsqueeze(-2))

    @classmethod
    def from_logits(cls, weight_logits: Tensor, component_logits: Tensor) -> Mixture:
        """Build from unnormalised logits, keeping exact log-probabilities for :func:`snapshot_nll`.

        Parameters
        ----------
        weight_logits:
            ``(..., m)`` logits of the mixture weights.
        component_logits:
            ``(..., m, C)`` logits of the components.
        """
        for name, t in (("weight_logits", weight_logits), ("component_logits", component_logits)):
            if not isinstance(t, Tensor) or not t.is_floating_point():
                got = t.dtype if isinstance(t, Tensor) else type(t).__name__
                raise TypeError(f"{name} must be a floating torch.Tensor, got {got}")
        if component_logits.dim() < 2:
            raise ValueError(f"component_logits must have shape (..., m, C), got {tuple(component_logits.shape)}")
        if weight_logits.shape != component_logits.shape[:-1]:
            raise ValueError(
                f"weight_logits must have shape {tuple(component_logits.shape[:-1])}, got {tuple(weight_logits.shape)}"
            )
        log_w = torch.log_softmax(weight_logits, dim=-1)
        log_p = torch.log_softmax(component_logits, dim=-1)
        mix = cls(log_w.exp(), log_p.exp(), validate=False)
        # Kept so that k-snapshot likelihoods with many labels never take log of an underflowed 0.
        mix._log_weights, mix._log_components = log_w, log_p
        return mix

    # ------------------------------------------------------------------ properties
    @property
    def batch_shape(self) -> torch.Size:
        """Shape of the batch of mixtures, ``weights.shape[:-1]``."""
        return self.weights.shape[:-1]

    @property
    def n_components(self) -> int:
        """Number of components ``m``."""
        return self.weights.shape[-1]

    @property
    def n_classes(self) -> int:
        """Number of classes ``C``."""
        return self.components.shape[-1]

    @property
    def log_weights(self) -> Tensor:
        """``(..., m)`` log-weights (exact when built by :meth:`from_logits`)."""
        return self._log_weights if self._log_weights is not None else torch.log(self.weights)

    @property
    def log_components(self) -> Tensor:
        """``(..., m, C)`` log-probabilities of the components (exact when built by :meth:`from_logits`)."""
        return self._log_components if self._log_components is not None else torch.log(self.components)

    # ------------------------------------------------------------------ operations
    def mean(self) -> Tensor:
        """The first-order prediction ``p_bar = sum_j w_j p_j``, shape ``(..., C)``."""
        return (self.weights.unsqueeze(-1) * self.components).sum(-2)

    def __len__(self) -> int:
        if not self.batch_shape:
            raise TypeError("len() of an unbatched Mixture")
        return self.batch_shape[0]

    def __getitem__(self, index: int | slice | Tensor | Sequence[int]) -> Mixture:
        """Select batch positions, like indexing a tensor of shape :attr:`batch_shape`.

        The index never reaches the component or class dims: ``mix[:, 0]`` of a ``(B,)`` batch raises
        instead of picking component 0 of every row.
        """
        if not self.batch_shape:
            raise IndexError("cannot index an unbatched Mixture")
        m, c = self.n_components, self.n_classes
        pos = torch.arange(self.batch_shape.numel(), device=self.weights.device).view(self.batch_shape)
        try:
            pos = pos[index]
        except IndexError as e:
            raise IndexError(
                f"a Mixture indexes its batch dims only (batch shape {tuple(self.batch_shape)}): {e}"
            ) from None

        def pick(t: Tensor, tail: tuple[int, ...]) -> Tensor:
            return t.reshape(-1, *tail)[pos]

        mix = Mixture(pick(self.weights, (m,)), pick(self.components, (m, c)), validate=False)
        if self._log_weights is not None and self._log_components is not None:
            mix._log_weights = pick(self._log_weights, (m,))
            mix._log_components = pick(self._log_components, (m, c))
        return mix

    def to(self, *args, **kwargs) -> Mixture:
        """Move/cast like :meth:`torch.Tensor.to`; the exact log-probabilities of :meth:`from_logits` move too."""
        mix = Mixture(self.weights.to(*args, **kwargs), self.components.to(*args, **kwargs), validate=False)
        if self._log_weights is not None and self._log_components is not None:
            mix._log_weights = self._log_weights.to(*args, **kwargs)
            mix._log_components = self._log_components.to(*args, **kwargs)
        return mix

    def sample(self, n: int, generator: torch.Generator | None = None) -> Tensor:
        """Draw ``n`` label distributions ``p ~ pi`` from each mixture.

        Returns
        -------
        Tensor
            ``(n, ..., C)`` sampled components.
        """
        n = _int_arg(n, "n")
        flat_w = self.weights.reshape(-1, self.n_components)
        idx = torch.multinomial(flat_w, n, replacement=True, generator=generator)  # (B, n)
        flat_p = self.components.reshape(-1, self.n_components, self.n_classes)
        picked = torch.gather(flat_p, 1, idx.unsqueeze(-1).expand(-1, -1, self.n_classes))  # (B, n, C)
        return picked.transpose(0, 1).reshape(n, *self.batch_shape, self.n_classes)

    def __repr__(self) -> str:
        return f"Mixture(batch_shape={tuple(self.batch_shape)}, m={self.n_components}, C={self.n_classes})"
