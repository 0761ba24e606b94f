"""Monte-Carlo lattice-cell entropy model (paper Sec. 4, Eq. for ``P(ŷ)``).

The probability of the lattice cell around ``ŷ`` is the integral of the latent density over
``ŷ + V``; with ``u_i ~ U(V)``::

    P(ŷ) = ∫_{ŷ+V} p_y(t) dt ≈ Vol(V) · (1/N) Σ_i p_y(ŷ + u_i)

    log P(ŷ) ≈ logsumexp_i [ Σ_c log p_c(ŷ_c + u_ic) ] − log N + log Vol(V)      ("joint")

The product over channels sits *inside* the mean. The official factorized class instead averages
each channel's pdf separately and multiplies the averages, which is a different (biased) estimator
for non-cubic cells; it is available only as ``estimator="per_channel_official"``.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from iclr25.core.triton import Backend, BackendOp

from .densities import Density, MixtureDensity
from .lattices import Lattice, lattice
from .reference import mixture_mc_log_likelihood_reference

__all__ = ["MC_LOG_LIKELIHOOD", "LatticeEntropyModel"]

_ESTIMATORS = ("joint", "per_channel_official")
_SAMPLE_METHODS = ("uniform", "sobol", "antithetic")


def _check_n_samples(n_samples, sample_method: str) -> int:
    try:
        n = int(n_samples)
    except (TypeError, ValueError, OverflowError):
        n = None
    if n is None or isinstance(n_samples, bool) or n != n_samples or n < 1:
        raise ValueError(f"n_samples must be a positive int, got {n_samples!r}")
    if sample_method == "antithetic" and n % 2:
        raise ValueError(f"n_samples must be even for sample_method='antithetic', got {n_samples!r}")
    return n


def _triton_mixture(y_hat, u, logw, mu, log_scale):
    from .kernels import mixture_mc_log_likelihood_triton

    return mixture_mc_log_likelihood_triton(y_hat, u, logw, mu, log_scale)


def _triton_limits(y_hat, u, logw, mu, log_scale) -> list[str]:
    reasons = []
    if u.requires_grad and torch.is_grad_enabled():
        reasons.append("the fused backward treats the Voronoi samples u as constants; u requires grad")
    dtypes = {t.dtype for t in (y_hat, u, logw, mu, log_scale)}
    if dtypes != {torch.float32}:
        reasons.append(f"the fused kernel takes float32 inputs, got {sorted(str(d) for d in dtypes)}")
    # the kernel indexes u as (N, n) and the parameters as (n, K): it cannot broadcast as the reference does
    if y_hat.dim() != 2 or u.dim() != 2 or u.shape[1] != y_hat.shape[1]:
        reasons.append(
            f"the fused kernel takes y_hat (B, n) and u (N, n), got {tuple(y_hat.shape)} and {tuple(u.shape)}"
        )
        return reasons
    n, K = y_hat.shape[1], logw.shape[-1] if logw.dim() else 0
    shapes = [tuple(t.shape) for t in (logw, mu, log_scale)]
    if any(s != (n, K) for s in shapes):
        reasons.append(f"the fused kernel takes logw, mu, log_scale of shape (n, K) = ({n}, K), got {shapes}")
    elif n > 64 or K > 16:
        reasons.append("the fused kernel supports n <= 64 channels and K <= 16 components")
    return reasons


MC_LOG_LIKELIHOOD = BackendOp(
    "ltc_mixture_mc_log_likelihood",
    [
        Backend("triton", _triton_mixture, supports=_triton_limits, uses_triton=True),
        Backend("reference", mixture_mc_log_likelihood_reference),
    ],
)


class LatticeEntropyModel(nn.Module):
    """Entropy model of lattice-quantized latents by Monte-Carlo integration over the cell.

    Parameters
    ----------
    lat:
        The (unit-volume) lattice, or its name.
    density:
        The latent density ``p_y`` (:class:`FactorizedDensity`, :class:`MixtureDensity`,
        :class:`FlowDensity`, or any :class:`Density`).
    n_samples:
        ``N``, Voronoi samples per evaluation (official training default 256).
    estimator:
        ``"joint"`` (correct) or ``"per_channel_official"`` (the official factorized code's
        per-channel averages; needs a factorized density).
    sample_method:
        How the ``u_i`` are drawn, see :meth:`Lattice.sample_voronoi`.
    likelihood_bound:
        Lower bound applied by :meth:`forward` (CompressAI convention) so rates stay finite;
        ``<= 0`` disables it, as in CompressAI.
    """

    def __init__(
        self,
        lat: Lattice | str,
        density: Density,
        n_samples: int = 256,
        estimator: str = "joint",
        sample_method: str = "uniform",
        likelihood_bound: float = 1e-9,
    ) -> None:
        super().__init__()
        self.lattice = lattice(lat) if isinstance(lat, str) else lat
        if not isinstance(self.lattice, Lattice):
            raise TypeError(f"lat must be a Lattice or a name, got {type(lat).__name__}")
        if not isinstance(density, Density):
            raise TypeError(f"density must be a Density module, got {type(density).__name__}")
        if density.dim != self.lattice.dim:
            raise ValueError(f"density dim {density.dim} != lattice {self.lattice.name} dim {self.lattice.dim}")
        if estimator not in _ESTIMATORS:
            raise ValueError(f"estimator must be one of {_ESTIMATORS}, got {estimator!r}")
        if estimator == "per_channel_official" and not density.factorized:
            raise ValueError("estimator='per_channel_official' needs a factorized density")
        if not isinstance(n_samples, int) or n_samples < 1:
            raise ValueError(f"n_samples must be a positive int, got {n_samples!r}")
        if sample_method not in _SAMPLE_METHODS:
            raise ValueError(f"sample_method must be one of {_SAMPLE_METHODS}, got {sample_method!r}")
        _check_n_samples(n_samples, sample_method)
        self.density = density
        self.n_samples = n_samples
        self.estimator = estimator
        self.sample_method = sample_method
        self.likelihood_bound = likelihood_bound

    def log_likelihood(
        self,
        y_hat: torch.Tensor,
        n_samples: int | None = None,
        generator: torch.Generator | None = None,
        estimator: str | None = None,
        backend: str = "auto",
    ) -> torch.Tensor:
        """Natural-log cell probability ``log P(ŷ)``.

        Parameters
        ----------
        y_hat:
            ``(..., n)`` lattice points (or dithered latents).
        n_samples:
            Overrides ``N`` for this call (use ``>= 1024`` for evaluation).
        generator:
            Generator for the Voronoi samples (reproducible evaluation).
        estimator:
            Overrides the estimator for this call.
        backend:
            ``"auto" | "reference" | "triton"`` for the fused mixture-density path.

        Returns
        -------
        torch.Tensor
            ``(...)`` log-probabilities.
        """
        lat = self.lattice
        lat.check_input(y_hat, "y_hat")
        estimator = self.estimator if estimator is None else estimator
        if estimator not in _ESTIMATORS:
            raise ValueError(f"estimator must be one of {_ESTIMATORS}, got {estimator!r}")
        N = self.n_samples if n_samples is None else _check_n_samples(n_samples, self.sample_method)
        shape = y_hat.shape[:-1]
        flat = y_hat.reshape(-1, lat.dim)
        if flat.shape[0] == 0:
            return y_hat.new_zeros(shape)
        u = lat.sample_voronoi(N, generator=generator, method=self.sample_method, device=y_hat.device, dtype=flat.dtype)
        log_vol = math.log(lat.volume)
        if estimator == "joint" and isinstance(self.density, MixtureDensity):
            logw, mu, logs = self.density.params()
            out = MC_LOG_LIKELIHOOD(flat, u, logw, mu, logs, backend=backend)
        else:
            t = flat.unsqueeze(1) + u.unsqueeze(0)  # (B, N, n)
            if estimator == "joint":
                out = torch.logsumexp(self.density.log_prob(t), 1) - math.log(N)
            else:
                lpc = self.density.log_prob_channels(t)  # (B, N, n)
                out = (torch.logsumexp(lpc, 1) - math.log(N)).sum(-1)
        return (out + log_vol).reshape(shape)

    def forward(self, y_hat: torch.Tensor) -> torch.Tensor:
        """Likelihoods ``P(ŷ)`` lower-bounded by ``likelihood_bound`` (if ``> 0``), ``(..., n) -> (...)``."""
        log_p = self.log_likelihood(y_hat)
        if self.likelihood_bound > 0:
            log_p = log_p.clamp_min(math.log(self.likelihood_bound))
        return torch.exp(log_p)

    def bits(self, y_hat: torch.Tensor, n_samples: int | None = None, generator: torch.Generator | None = None):
        """Rate ``−log2 P(ŷ)`` in bits per vector, ``(..., n) -> (...)``."""
        return -self.log_likelihood(y_hat, n_samples=n_samples, generator=generator) / math.log(2.0)
