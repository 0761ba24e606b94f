"""A network head that outputs a mixture (a higher-order prediction), trained on k-snapshots."""

from __future__ import annotations

from torch import Tensor, nn

from .mixture import Mixture, _int_arg

__all__ = ["MixtureHead"]


class MixtureHead(nn.Module):
    """Linear head mapping features to a mixture of ``m`` label distributions.

    ``w(x) = softmax(h_w(x))`` and ``p_j(x) = softmax(h_j(x))``, computed by one ``nn.Linear`` with
    ``m * (C + 1)`` outputs (one matmul, so it costs about as much as a softmax head with ``m * C``
    outputs). Train it with :func:`snapshot_nll` on k-snapshots (k >= 2 to identify more than the mean).

    Parameters
    ----------
    in_features:
        Feature size ``d``.
    n_classes:
        Number of classes ``C``.
    n_components:
        ``m``, components of the mixture.

    Examples
    --------
    >>> head = MixtureHead(16, 3)
    >>> head(torch.randn(4, 16)).batch_shape                        # doctest: +SKIP
    torch.Size([4])
    """

    def __init__(self, in_features: int, n_classes: int, n_components: int = 6) -> None:
        super().__init__()
        self.in_features = _int_arg(in_features, "in_features")
        self.n_classes = _int_arg(n_classes, "n_classes")
        self.n_components = _int_arg(n_components, "n_components")
        self.proj = nn.Linear(self.in_features, self.n_components * (self.n_classes + 1))

    def forward(self, x: Tensor) -> Mixture:
        """Map ``(..., d)`` features to a :class:`Mixture` with batch shape ``(...)``."""
        if x.shape[-1] != self.in_features:
            raise ValueError(f"x must have last dimension in_features = {self.in_features}, got {tuple(x.shape)}")
        out = self.proj(x)
        m, c = self.n_components, self.n_classes
        return Mixture.from_logits(out[..., :m], out[..., m:].unflatten(-1, (m, c)))

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, n_classes={self.n_classes}, n_components={self.n_components}"
