"""LTC, Block-LTC and the NTC baseline for vector sources (official ``LTC`` / ``BlockLTC``).

::

    x ──g_a──> y ──Q_Λ (STE)──> ŷ ──g_s──> x̂
                                 └──> LatticeEntropyModel ──> P(ŷ)    (rate −log2 P(ŷ))

NTC is the same model with ``Λ = Zⁿ`` (integer rounding), identical transforms and density family.
"""

from __future__ import annotations

import copy
import math

import torch
from torch import nn

from .densities import Density, FactorizedDensity, FlowDensity, MixtureDensity
from .entropy import LatticeEntropyModel
from .lattices import Lattice, lattice
from .quantizer import LatticeQuantizer

__all__ = ["LTC", "NTC", "BlockLTC", "make_density", "make_transform", "rate_distortion_loss"]


def make_transform(d_in: int, d_out: int, hidden: int = 100, kind: str = "mlp", activation: str = "softplus"):
    """The official vector-source transform: a 3-layer MLP ``d_in → hidden → hidden → d_out`` or a linear map."""
    if kind == "linear":
        return nn.Linear(d_in, d_out)
    if kind != "mlp":
        raise ValueError(f"transform must be 'mlp' or 'linear', got {kind!r}")
    acts = {"softplus": nn.Softplus, "leaky_relu": nn.LeakyReLU, "relu": nn.ReLU}
    if activation not in acts:
        raise ValueError(f"activation must be one of {sorted(acts)}, got {activation!r}")
    act = acts[activation]
    return nn.Sequential(nn.Linear(d_in, hidden), act(), nn.Linear(hidden, hidden), act(), nn.Linear(hidden, d_out))


def make_density(kind: str | Density, dim: int) -> Density:
    """A density by name: ``"factorized"`` (Ballé), ``"mixture"`` (per-channel Gaussians) or ``"flow"`` (RealNVP)."""
    if isinstance(kind, Density):
        return kind
    table = {"factorized": FactorizedDensity, "mixture": MixtureDensity, "flow": FlowDensity}
    if kind not in table:
        raise ValueError(f"density must be one of {sorted(table)} or a Density, got {kind!r}")
    return table[kind](dim)


def rate_distortion_loss(out: dict[str, torch.Tensor], x: torch.Tensor, lmbda: float) -> dict[str, torch.Tensor]:
    """``L = R + λ·D`` with ``R`` in bits per source dimension and ``D`` the MSE per dimension.

    Parameters
    ----------
    out:
        A model's output dict (``"x_hat"``, ``"likelihoods"``).
    x:
        ``(..., d)`` source batch, the shape of ``out["x_hat"]``.
    lmbda:
        ``λ``.

    Returns
    -------
    dict
        ``{"loss", "bpd", "mse"}`` scalars.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.shape != out["x_hat"].shape:  # broadcasting would silently give a wrong MSE and rate normalization
        raise ValueError(f"x must have the shape of out['x_hat'] {tuple(out['x_hat'].shape)}, got {tuple(x.shape)}")
    dims = x.numel()
    bpd = -torch.log2(out["likelihoods"]).sum() / dims
    mse = (out["x_hat"] - x).square().mean()
    return {"loss": bpd + lmbda * mse, "bpd": bpd, "mse": mse}


class LTC(nn.Module):
    """Lattice transform coding for vectors ``x ∈ R^{d_in}`` (latent dimension = lattice dimension).

    Parameters
    ----------
    d_in:
        Source dimension.
    lattice:
        Lattice name or :class:`Lattice` (``n`` = its dimension is the latent dimension).
    hidden:
        MLP width (official 100).
    density:
        ``"factorized"``, ``"mixture"``, ``"flow"`` or a :class:`Density` of dimension ``n``.
    n_samples:
        MC samples of the entropy model during training (official 256).
    transform:
        ``"mlp"`` or ``"linear"``.
    activation:
        MLP activation (``"softplus"``, ``"leaky_relu"``, ``"relu"``).
    quantizer_mode:
        ``"ste"`` (official), ``"dither"`` or ``"hard"``.
    estimator:
        Entropy-model estimator (``"joint"`` or ``"per_channel_official"``).
    """

    def __init__(
        self,
        d_in: int,
        lattice: str | Lattice = "E8",
        hidden: int = 100,
        density: str | Density = "factorized",
        n_samples: int = 256,
        transform: str = "mlp",
        activation: str = "softplus",
        quantizer_mode: str = "ste",
        estimator: str = "joint",
    ) -> None:
        super().__init__()
        if not isinstance(d_in, int) or d_in < 1:
            raise ValueError(f"d_in must be a positive int, got {d_in!r}")
        lat = _as_lattice(lattice)
        n = lat.dim
        self.d_in = d_in
        self.g_a = make_transform(d_in, n, hidden, transform, activation)
        self.g_s = make_transform(n, d_in, hidden, transform, activation)
        self.quantizer = LatticeQuantizer(lat, quantizer_mode)
        self.entropy_model = LatticeEntropyModel(lat, make_density(density, n), n_samples, estimator)

    @property
    def lattice(self) -> Lattice:
        return self.quantizer.lattice

    def _check(self, x: torch.Tensor) -> None:
        if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.shape[1] != self.d_in:
            raise ValueError(f"x must be a (batch, {self.d_in}) tensor, got {getattr(x, 'shape', type(x))}")

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """Encode, quantize, estimate likelihoods and decode.

        Parameters
        ----------
        x:
            ``(B, d_in)`` source vectors.

        Returns
        -------
        dict
            ``"x_hat"`` ``(B, d_in)``, ``"likelihoods"`` ``(B,)`` cell probabilities,
            ``"y"`` and ``"y_hat"`` ``(B, n)``.
        """
        self._check(x)
        y = self.g_a(x)
        y_hat = self.quantizer(y)
        likelihoods = self.entropy_model(y_hat)
        return {"x_hat": self.g_s(y_hat), "likelihoods": likelihoods, "y": y, "y_hat": y_hat}

    @torch.no_grad()
    def evaluate(
        self, x: torch.Tensor, n_samples: int = 2048, generator: torch.Generator | None = None, chunk: int = 500
    ) -> dict[str, float]:
        """Rate (bits per source dimension, with standard error) and MSE with hard quantization.

        Parameters
        ----------
        x:
            ``(B, d_in)`` test vectors.
        n_samples:
            MC samples for the rate (``>= 1024`` recommended).
        generator:
            Generator for the MC samples.
        chunk:
            Vectors per batch.
        """
        self._check(x)
        bits, se, sq = [], [], []
        for xb in x.split(chunk):
            y_hat = self.quantizer(self.g_a(xb), mode="hard")
            bits.append(self.entropy_model.bits(y_hat, n_samples=n_samples, generator=generator))
            sq.append((self.g_s(y_hat) - xb).square().sum(-1))
        b = torch.cat(bits)
        s = torch.cat(sq)
        d = x.shape[1]
        se = float(b.std() / math.sqrt(b.numel())) / d
        return {"bpd": float(b.mean()) / d, "bpd_se": se, "mse": float(s.mean()) / d}


class NTC(LTC):
    """Nonlinear transform coding baseline: :class:`LTC` with integer rounding (``Λ = Z^{d_latent}``)."""

    def __init__(self, d_in: int, d_latent: int, **kwargs) -> None:
        if "lattice" in kwargs:
            raise TypeError("NTC always uses the integer lattice; use LTC for other lattices")
        super().__init__(d_in, lattice=lattice("Z", dim=d_latent), **kwargs)


class BlockLTC(nn.Module):
    """Block LTC: code ``n`` i.i.d. realizations jointly (official ``BlockLTC``).

    ``x: (B, n, d_in)`` → per-sample ``g_a`` → ``y: (B, n, d_y)`` → for every latent coordinate
    ``j`` a compander ``g_a^{(j)}: Rⁿ → Rⁿ`` across the block → lattice quantization in ``Rⁿ`` with
    its own entropy model → ``g_s^{(j)}`` → per-sample ``g_s``. Rate per realization is
    ``Σ_j R_j / n``.

    Parameters
    ----------
    d_in:
        Dimension of one realization.
    d_latent:
        ``d_y``, per-sample latent dimension.
    lattice:
        Lattice of dimension ``n`` (the block length).
    hidden:
        MLP width of the per-sample transforms and of the companders.
    activation:
        MLP activation of the per-sample transforms and companders. The default is LeakyReLU, the
        official ``BlockLTC``'s per-sample activation: with Softplus in both stacked MLPs the
        default initialization leaves the block latents with a spread of ~1e-3 of the unit cell,
        every block falls in one lattice cell, the rate term then concentrates the density on that
        cell and training stays at zero rate (D = σ²); LeakyReLU's larger gain lets the
        straight-through distortion gradient spread the latents out of that cell. (The official
        companders use Softplus; with LeakyReLU only in the per-sample MLPs training still collapsed.)
    density:
        As in :class:`LTC`; every latent coordinate gets its own density (a :class:`Density`
        instance is used for the first one and deep-copied for the others).
    n_samples, transform, quantizer_mode, estimator:
        As in :class:`LTC`.
    """

    def __init__(
        self,
        d_in: int,
        d_latent: int,
        lattice: str | Lattice = "E8",
        hidden: int = 100,
        density: str | Density = "factorized",
        n_samples: int = 256,
        transform: str = "mlp",
        activation: str = "leaky_relu",
        quantizer_mode: str = "ste",
        estimator: str = "joint",
    ) -> None:
        super().__init__()
        for argname, v in (("d_in", d_in), ("d_latent", d_latent)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{argname} must be a positive int, got {v!r}")
        lat = _as_lattice(lattice)
        n = lat.dim
        self.d_in, self.d_latent, self.block = d_in, d_latent, n
        self.g_a = make_transform(d_in, d_latent, hidden, transform, activation)
        self.g_s = make_transform(d_latent, d_in, hidden, transform, activation)
        self.companders_a = nn.ModuleList(make_transform(n, n, hidden, transform, activation) for _ in range(d_latent))
        self.companders_s = nn.ModuleList(make_transform(n, n, hidden, transform, activation) for _ in range(d_latent))
        self.quantizer = LatticeQuantizer(lat, quantizer_mode)
        # every latent coordinate gets its own density: a Density instance is used for the first one
        # and deep-copied for the others (sharing one would tie their parameters together)
        self.entropy_models = nn.ModuleList(
            LatticeEntropyModel(
                lat,
                make_density(density, n) if j == 0 or not isinstance(density, Density) else copy.deepcopy(density),
                n_samples,
                estimator,
            )
            for j in range(d_latent)
        )

    def _check(self, x: torch.Tensor) -> None:
        if not isinstance(x, torch.Tensor) or x.dim() != 3 or x.shape[1:] != (self.block, self.d_in):
            raise ValueError(
                f"x must be a (batch, {self.block}, {self.d_in}) tensor, got {tuple(getattr(x, 'shape', ()))}"
            )

    def _code(self, x: torch.Tensor, mode: str | None):
        y = self.g_a(x)  # (B, n, d_y)
        z_hat, lik = [], []
        for j in range(self.d_latent):
            z = self.companders_a[j](y[:, :, j])
            zq = self.quantizer(z, mode=mode)
            z_hat.append(zq)
            lik.append(self.entropy_models[j])
        y_hat = torch.stack([self.companders_s[j](z_hat[j]) for j in range(self.d_latent)], -1)
        return y, torch.stack(z_hat, 1), y_hat, lik

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """``x: (B, n, d_in)`` -> ``"x_hat"`` ``(B, n, d_in)``, ``"likelihoods"`` ``(B, d_y)``, ``"y"``, ``"y_hat"``."""
        self._check(x)
        y, z_hat, y_hat, models = self._code(x, None)
        likelihoods = torch.stack([models[j](z_hat[:, j]) for j in range(self.d_latent)], -1)
        return {"x_hat": self.g_s(y_hat), "likelihoods": likelihoods, "y": y, "y_hat": z_hat}

    @torch.no_grad()
    def evaluate(
        self, x: torch.Tensor, n_samples: int = 2048, generator: torch.Generator | None = None, chunk: int = 500
    ) -> dict[str, float]:
        """Bits per source dimension (with standard error) and MSE per dimension, hard quantization."""
        self._check(x)
        bits, sq = [], []
        for xb in x.split(chunk):
            _, z_hat, y_hat, models = self._code(xb, "hard")
            b = sum(models[j].bits(z_hat[:, j], n_samples=n_samples, generator=generator) for j in range(self.d_latent))
            bits.append(b)
            sq.append((self.g_s(y_hat) - xb).square().sum((1, 2)))
        b = torch.cat(bits)
        dims = self.block * self.d_in
        return {
            "bpd": float(b.mean()) / dims,
            "bpd_se": float(b.std() / math.sqrt(b.numel())) / dims,
            "mse": float(torch.cat(sq).mean()) / dims,
        }


def _as_lattice(lat: str | Lattice) -> Lattice:
    if isinstance(lat, Lattice):
        return lat
    if isinstance(lat, str):
        return lattice(lat)
    raise TypeError(f"lattice must be a name or a Lattice, got {type(lat).__name__}")
