"""Nested-lattice (Voronoi) codes: fixed-rate coding with a self-similar coarse lattice ``qΛ``.

Encoder: ``m = coords(Q_Λ(y)) mod q ∈ Z_qⁿ`` (exactly ``n·log2 q`` bits, no entropy coder).
Decoder: ``ŷ = mG − q·Q_Λ(mG / q)``, the representative of ``m`` inside the coarse cell ``qV``.
Lossless (``ŷ = Q_Λ(y)``) whenever ``Q_Λ(y) ∈ qV``; otherwise the point is *overloaded*.

The reduction runs in the lattice's textbook coordinates (``Λ₀``, before unit-volume scaling) so
that, for ``q`` a power of two and a rational generator (Zⁿ, Dₙ, Dₙ*, E8, Λ16, Λ24), ``p/q`` is
exact and points on the boundary of ``qV`` are resolved by the decoder's translation-equivariant
tie-break, identically in :meth:`VoronoiCode.decode` and :meth:`VoronoiCode.overloaded`. For other
``q`` or irrational generators a boundary point may decode to another representative of its coset.
"""

from __future__ import annotations

import math
import numbers

import torch

from .lattices import Lattice, lattice

__all__ = ["VoronoiCode"]


class VoronoiCode:
    """Voronoi code of a lattice with nesting ratio ``q``.

    Parameters
    ----------
    lat:
        The fine lattice ``Λ`` (or its name).
    q:
        Integer nesting ratio ``>= 2``; the coarse lattice is ``qΛ``.
    """

    def __init__(self, lat: Lattice | str, q: int) -> None:
        self.lattice = lattice(lat) if isinstance(lat, str) else lat
        if not isinstance(self.lattice, Lattice):
            raise TypeError(f"lat must be a Lattice or a name, got {type(lat).__name__}")
        if isinstance(q, bool) or not isinstance(q, numbers.Real) or q != int(q) or q < 2:
            raise ValueError(f"q must be an integer >= 2, got {q!r}")
        self.q = int(q)

    @property
    def bits_per_vector(self) -> float:
        """``n·log2 q``."""
        return self.lattice.dim * math.log2(self.q)

    def encode(self, y: torch.Tensor) -> torch.Tensor:
        """Messages ``(..., n)`` int64 in ``[0, q)`` for latents ``y: (..., n)``."""
        z = self.lattice.coords(self.lattice.quantize(y))
        return torch.remainder(z, self.q)

    def decode(self, m: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """Reconstruction ``(..., n)`` in the coarse Voronoi cell for messages ``m: (..., n)``."""
        if m.dtype.is_floating_point or m.dtype == torch.bool:
            raise TypeError(f"m must be an integer tensor, got {m.dtype}")
        if m.dim() == 0 or m.shape[-1] != self.lattice.dim:
            raise ValueError(f"m must have last dimension {self.lattice.dim}, got shape {tuple(m.shape)}")
        if m.numel() and (int(m.min()) < 0 or int(m.max()) >= self.q):
            raise ValueError(f"m must lie in [0, {self.q}), got range [{int(m.min())}, {int(m.max())}]")
        lat = self.lattice
        p0 = m.double() @ lat.G0.to(m.device)
        flat = p0.reshape(-1, lat.dim)
        r0 = flat - self.q * lat.decode_unscaled(flat / self.q)
        return (r0 * lat.scale).reshape(p0.shape).to(dtype)

    def overloaded(self, y: torch.Tensor) -> torch.Tensor:
        """Boolean ``(...)``: True where ``Q(y)`` falls outside the coarse cell ``qV``."""
        lat = self.lattice
        lat.check_input(y)
        p0 = lat.decode_unscaled(y.double().reshape(-1, lat.dim) / lat.scale)
        return (lat.decode_unscaled(p0 / self.q) != 0).any(-1).reshape(y.shape[:-1])
