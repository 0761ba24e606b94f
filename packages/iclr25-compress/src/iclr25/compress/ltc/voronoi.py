"""Nested-lattice (Voronoi) codes: fixed-rate coding with a self-similar coarse lattice ``qΛ``.

Encoder: ``m = coords(Q_Λ(y)) mod q ∈ Z_qⁿ`` (exactly ``n·log2 q`` bits, no entropy coder).
Decoder: ``ŷ = mG − q·Q_Λ(mG / q)``, the representative of ``m`` inside the coarse cell ``qV``.
Lossless (``ŷ = Q_Λ(y)``) whenever ``Q_Λ(y) ∈ qV``; otherwise the point is *overloaded*.

The reduction modulo ``qΛ`` runs on integers, in the lattice's :class:`~.lattices.IntegerModel`:
the coset of ``z`` is reduced by the exact nearest point of ``zB/q``, whose ties are broken
translation-equivariantly. On the boundary of ``qV`` (a tie of the coarse quantizer) exactly one
point of each coset counts as inside, whatever the lattice (``Aₙ`` and unit-volume products have
irrational generators, where the float quantizer would resolve ``λ/q`` by rounding noise), and
:meth:`VoronoiCode.decode` and :meth:`VoronoiCode.overloaded` agree on it. Reconstructions are
rebuilt through the quantizer, so they are bitwise equal to ``Q_Λ(y)`` in the same dtype.
"""

from __future__ import annotations

import math
import numbers

import torch

from .lattices import Lattice, lattice

__all__ = ["VoronoiCode"]

# Largest nesting ratio whose int64 reductions cannot overflow: the squared residuals summed in the
# coset decoders are at most ~400·q² (Leech, 24 coordinates of up to 4q).
_MAX_Q = 2**24


class VoronoiCode:
    """Voronoi code of a lattice with nesting ratio ``q``.

    Parameters
    ----------
    lat:
        The fine lattice ``Λ`` (or its name).
    q:
        Integer nesting ratio in ``[2, 2**24]``; the coarse lattice is ``qΛ``.
    """

    def __init__(self, lat: Lattice | str, q: int) -> None:
        self.lattice = lattice(lat) if isinstance(lat, str) else lat
        if not isinstance(self.lattice, Lattice):
            raise TypeError(f"lat must be a Lattice or a name, got {type(lat).__name__}")
        if isinstance(q, bool) or not isinstance(q, numbers.Real) or q != int(q) or q < 2:
            raise ValueError(f"q must be an integer >= 2, got {q!r}")
        if q > _MAX_Q:
            raise ValueError(f"q must be at most 2**24 (exact int64 reduction), got {q!r}")
        if self.lattice.integer_model is None:
            raise ValueError(f"lattice {self.lattice.name} has no integer model; build it with lattice()")
        self.q = int(q)

    @property
    def bits_per_vector(self) -> float:
        """``n·log2 q``."""
        return self.lattice.dim * math.log2(self.q)

    def _coarse_coords(self, z: torch.Tensor) -> torch.Tensor:
        """Coefficients ``w`` of ``Q_Λ(zG / q)`` (exact): int64 ``(B, n)`` -> ``(B, n)``."""
        model = self.lattice.integer_model
        return model.coords(model.nearest(model.points(z), self.q))

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
        flat = m.reshape(-1, lat.dim).to(torch.int64)
        z = flat - self.q * self._coarse_coords(flat)
        # Through the quantizer in the dtype quantize() would use for such latents (half precision
        # is upcast to float32 there too), so the output is bitwise a quantizer output.
        work = torch.float64 if dtype == torch.float64 else torch.float32
        return lat._quantize(lat.points(z, dtype=work)).to(dtype).reshape(m.shape)

    def overloaded(self, y: torch.Tensor) -> torch.Tensor:
        """Boolean ``(...)``: True where ``Q(y)`` (as :meth:`encode` computes it) falls outside ``qV``."""
        z = self.lattice.coords(self.lattice.quantize(y)).reshape(-1, self.lattice.dim)
        return (self._coarse_coords(z) != 0).any(-1).reshape(y.shape[:-1])
