"""Latent densities ``p_y`` for the lattice entropy model.

* :class:`FactorizedDensity`: Ballé et al. (2018) non-parametric per-channel CDF network
  (``softplus``-positive matrices, ``tanh`` gates); its pdf is the exact derivative of the CDF,
  propagated in forward mode through the chain instead of by autograd.
* :class:`MixtureDensity`: per-channel Gaussian mixture (the small setting's density; also the one
  the fused Triton likelihood supports).
* :class:`FlowDensity`: a RealNVP flow (affine couplings) for a *joint* density over the n channels.

Each exposes ``log_prob(t: (..., n)) -> (...)``; factorized ones also
``log_prob_channels(t) -> (..., n)``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["Density", "FactorizedDensity", "FlowDensity", "MixtureDensity"]


class Density(nn.Module):
    """Base class: a density over ``R^n``."""

    dim: int
    factorized: bool = False

    def log_prob(self, t: torch.Tensor) -> torch.Tensor:  # pragma: no cover - interface
        """Log density, ``(..., n) -> (...)``."""
        raise NotImplementedError

    def log_prob_channels(self, t: torch.Tensor) -> torch.Tensor:
        """Per-channel log densities ``(..., n) -> (..., n)`` (factorized densities only)."""
        raise NotImplementedError(f"{type(self).__name__} is not factorized; it has no per-channel densities")

    def _check(self, t: torch.Tensor) -> None:
        if t.shape[-1] != self.dim:
            raise ValueError(f"t must have last dimension {self.dim}, got shape {tuple(t.shape)}")


class FactorizedDensity(Density):
    """Ballé et al. (2018, App. 6.1) univariate non-parametric density, one per channel.

    ``c(t) = sigmoid(f_K ∘ … ∘ f_1(t))`` with ``f_k(x) = x + tanh(a_k) ⊙ tanh(x)`` after the affine
    map ``softplus(H_k) x + b_k``; the pdf ``c'(t)`` is positive by construction.

    Parameters
    ----------
    dim:
        Number of channels ``n``.
    filters:
        Hidden widths of the per-channel network (Ballé: ``(3, 3, 3)``).
    init_scale:
        Initial spread of the density (Ballé: 10).
    """

    factorized = True

    def __init__(self, dim: int, filters: tuple[int, ...] = (3, 3, 3), init_scale: float = 10.0) -> None:
        super().__init__()
        if dim < 1:
            raise ValueError(f"dim must be >= 1, got {dim}")
        self.dim = dim
        widths = (1, *filters, 1)
        scale = init_scale ** (1.0 / (len(filters) + 1))
        self.H = nn.ParameterList()
        self.b = nn.ParameterList()
        self.a = nn.ParameterList()
        for i in range(len(filters) + 1):
            init = math.log(math.expm1(1.0 / scale / widths[i + 1]))
            self.H.append(nn.Parameter(torch.full((dim, widths[i + 1], widths[i]), init)))
            self.b.append(nn.Parameter(torch.empty(dim, widths[i + 1], 1).uniform_(-0.5, 0.5)))
            if i < len(filters):
                self.a.append(nn.Parameter(torch.zeros(dim, widths[i + 1], 1)))

    def _logits_and_slope(self, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # t: (..., n) -> per channel (n, 1, M); the slope is d logits / dt, carried in forward mode.
        shape = t.shape
        x = t.reshape(-1, self.dim).T.unsqueeze(1)
        # promote like the other densities do (e.g. float32 points with float64 parameters)
        x = x.to(torch.promote_types(x.dtype, self.H[0].dtype))
        d = torch.ones_like(x)
        for i, (H, b) in enumerate(zip(self.H, self.b, strict=True)):
            W = F.softplus(H)
            x = W @ x + b
            d = W @ d
            if i < len(self.a):
                g = torch.tanh(self.a[i])
                th = torch.tanh(x)
                d = d * (1 + g * (1 - th * th))
                x = x + g * th
        return x.squeeze(1).T.reshape(shape), d.squeeze(1).T.reshape(shape)

    def log_prob_channels(self, t: torch.Tensor) -> torch.Tensor:
        self._check(t)
        logits, slope = self._logits_and_slope(t)
        # log sigmoid'(l) = -softplus(l) - softplus(-l), stable in both tails
        return -F.softplus(logits) - F.softplus(-logits) + torch.log(slope.clamp_min(1e-30))

    def log_prob(self, t: torch.Tensor) -> torch.Tensor:
        return self.log_prob_channels(t).sum(-1)

    def cdf(self, t: torch.Tensor) -> torch.Tensor:
        """Per-channel CDFs ``(..., n) -> (..., n)``."""
        self._check(t)
        return torch.sigmoid(self._logits_and_slope(t)[0])


class MixtureDensity(Density):
    """Per-channel mixture of ``K`` Gaussians: ``p_c(t) = Σ_k w_ck N(t; μ_ck, σ_ck²)``.

    Parameters
    ----------
    dim:
        Number of channels ``n``.
    components:
        Mixture size ``K``.
    init_scale:
        Initial standard deviation of every component.
    """

    factorized = True

    def __init__(self, dim: int, components: int = 3, init_scale: float = 1.0) -> None:
        super().__init__()
        if dim < 1 or components < 1:
            raise ValueError(f"dim and components must be >= 1, got {dim}, {components}")
        self.dim = dim
        self.logits = nn.Parameter(torch.zeros(dim, components))
        self.loc = nn.Parameter(torch.linspace(-1.0, 1.0, components).repeat(dim, 1))
        self.log_scale = nn.Parameter(torch.full((dim, components), math.log(init_scale)))

    def params(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(log weights, means, log std)``, each ``(n, K)``."""
        return torch.log_softmax(self.logits, -1), self.loc, self.log_scale

    def log_prob_channels(self, t: torch.Tensor) -> torch.Tensor:
        self._check(t)
        logw, mu, logs = self.params()
        z = (t.unsqueeze(-1) - mu) * torch.exp(-logs)
        comp = logw - logs - 0.5 * z * z - 0.5 * math.log(2 * math.pi)
        return torch.logsumexp(comp, -1)

    def log_prob(self, t: torch.Tensor) -> torch.Tensor:
        return self.log_prob_channels(t).sum(-1)

    def cdf(self, t: torch.Tensor) -> torch.Tensor:
        """Per-channel CDFs ``(..., n) -> (..., n)``."""
        logw, mu, logs = self.params()
        z = (t.unsqueeze(-1) - mu) * torch.exp(-logs)
        return (logw.exp() * 0.5 * torch.erfc(-z / math.sqrt(2))).sum(-1)


class _Coupling(nn.Module):
    def __init__(self, dim: int, mask: torch.Tensor, hidden: int) -> None:
        super().__init__()
        self.register_buffer("mask", mask)
        self.net = nn.Sequential(nn.Linear(dim, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh())
        self.scale = nn.Linear(hidden, dim)
        self.shift = nn.Linear(hidden, dim)
        for lin in (self.scale, self.shift):  # start at the identity map
            nn.init.zeros_(lin.weight)
            nn.init.zeros_(lin.bias)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.net(x * self.mask)
        s = torch.tanh(self.scale(h)) * (1 - self.mask)
        z = x * self.mask + (1 - self.mask) * (x * torch.exp(s) + self.shift(h))
        return z, s.sum(-1)


class FlowDensity(Density):
    """RealNVP density over ``R^n``: affine couplings with alternating masks onto ``N(0, I)``.

    A joint (non-factorized) density: the lattice cells of non-cubic lattices straddle channels,
    so only a joint density lets the entropy model see their correlation.

    Parameters
    ----------
    dim:
        Dimension ``n`` (``>= 2``).
    layers:
        Number of coupling layers.
    hidden:
        Width of each coupling network.
    """

    def __init__(self, dim: int, layers: int = 4, hidden: int = 32) -> None:
        super().__init__()
        if dim < 2:
            raise ValueError(f"FlowDensity needs dim >= 2, got {dim}")
        self.dim = dim
        masks = [(torch.arange(dim) % 2 == (i % 2)).float() for i in range(layers)]
        self.couplings = nn.ModuleList(_Coupling(dim, m, hidden) for m in masks)
        self.log_scale = nn.Parameter(torch.zeros(dim))
        self.loc = nn.Parameter(torch.zeros(dim))

    def log_prob(self, t: torch.Tensor) -> torch.Tensor:
        self._check(t)
        x = (t - self.loc) * torch.exp(-self.log_scale)
        logdet = -self.log_scale.sum().expand(t.shape[:-1])
        for c in self.couplings:
            x, ld = c(x)
            logdet = logdet + ld
        return -0.5 * x.square().sum(-1) - 0.5 * self.dim * math.log(2 * math.pi) + logdet
