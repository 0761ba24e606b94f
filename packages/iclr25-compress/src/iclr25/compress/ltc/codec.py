"""A real entropy-coded bitstream for low-dimensional lattices (CompressAI's rANS).

The lattice points carrying probability mass ``>= 1 − 1e-7`` under the entropy model are
enumerated into a table (growing a ball until the enumerated mass stops increasing); their
probabilities become one quantized CDF and a latent is coded as the index of its point.
Decoding rebuilds points from integer coordinates through the quantizer itself, so they are
bitwise equal to the quantizer's output.
"""

from __future__ import annotations

import itertools
import logging
import math
import numbers

import numpy as np
import torch

from .entropy import LatticeEntropyModel
from .lattices import Lattice, lattice

__all__ = ["LatticeCodec"]

log = logging.getLogger(__name__)


class LatticeCodec:
    """Entropy coder for lattice-quantized latents of dimension ``<= 4``.

    Parameters
    ----------
    lat:
        The lattice (or its name).
    density:
        The entropy model (a :class:`LatticeEntropyModel` on ``lat``) or a density, which is wrapped.
    mass:
        Total probability the table must cover.
    n_samples:
        MC samples per point when tabulating probabilities.
    precision:
        CDF precision in bits (CompressAI's default 16), at most 16: CompressAI's rANS coder works at
        16 bits, and a finer CDF gives streams that do not decode (a coarser one costs about
        ``16 − precision`` extra bits per point). The table holds at most ``2**precision − 1`` points.
    seed:
        Seed of the MC samples (tables are reproducible).
    """

    MAX_DIM = 4
    # CompressAI's rANS encoder writes into a buffer of one 32-bit word per symbol and always flushes
    # two words, so fewer than 3 symbols overrun it (heap corruption / segfault); shorter messages are
    # padded with the most probable symbol, which the decoder never reads (it decodes ``count`` symbols).
    MIN_SYMBOLS = 3

    def __init__(
        self,
        lat: Lattice | str,
        density,
        mass: float = 1 - 1e-7,
        n_samples: int = 4096,
        precision: int = 16,
        seed: int = 0,
    ) -> None:
        lat = lattice(lat) if isinstance(lat, str) else lat
        if not isinstance(lat, Lattice):
            raise TypeError(f"lat must be a Lattice or a name, got {type(lat).__name__}")
        if lat.dim > self.MAX_DIM:
            raise NotImplementedError(
                f"LatticeCodec enumerates lattice points and supports dim <= {self.MAX_DIM}, got {lat.name} "
                f"(dim {lat.dim}); use LatticeEntropyModel.bits for the estimated rate"
            )
        if isinstance(precision, bool) or not isinstance(precision, int) or not 1 <= precision <= 16:
            raise ValueError(f"precision must be an int in [1, 16] (CompressAI's rANS precision), got {precision!r}")
        self.lattice = lat
        self.model = density if isinstance(density, LatticeEntropyModel) else LatticeEntropyModel(lat, density)
        self.mass = mass
        self.n_samples = n_samples
        self.precision = precision
        self.seed = seed
        self._table: torch.Tensor | None = None

    @torch.no_grad()
    def _probs(self, pts: torch.Tensor) -> torch.Tensor:
        g = torch.Generator().manual_seed(self.seed)  # same u_i for every point: the table sums coherently
        param = next(self.model.parameters(), None)  # evaluate on the model's device
        # a float64 model tabulates in float64 (lattice points such as A2's are not float32-exact);
        # anything else in float32, the precision the table is documented in
        dtype = torch.float64 if param is not None and param.dtype == torch.float64 else torch.float32
        pts = pts.to(device=param.device if param is not None else "cpu", dtype=dtype)
        return torch.exp(self.model.log_likelihood(pts, n_samples=self.n_samples, generator=g)).double().cpu()

    def _ball(self, radius: float) -> torch.Tensor:
        # coefficient box containing the ball: |z_i| <= r·‖column i of G⁻¹‖
        ginv = self.lattice._Ginv
        bound = [math.ceil(radius * float(ginv[:, i].norm())) + 1 for i in range(self.lattice.dim)]
        z = torch.tensor(list(itertools.product(*[range(-b, b + 1) for b in bound])), dtype=torch.float64)
        pts = z @ self.lattice.G
        return z[pts.norm(dim=-1) <= radius]

    @torch.no_grad()
    def fit(self, radius: float = 2.0, max_radius: float = 64.0) -> LatticeCodec:
        """Enumerate the table: grow the ball until its mass reaches ``mass`` or stops growing."""
        total_prev = -1.0
        while True:
            z = self._ball(radius)
            p = self._probs(self.lattice.points(z, dtype=torch.float64))
            total = float(p.sum())
            if total >= self.mass or total - total_prev < 1e-12 or radius >= max_radius:
                break
            total_prev, radius = total, radius * 1.5
        keep = p > 0
        z, p = z[keep], p[keep]
        if len(p) + 1 > 2**self.precision:  # every point and the overflow symbol need a CDF step of >= 1
            raise ValueError(
                f"the coding table needs {len(p)} lattice points (mass {total:.9f}), more than the "
                f"2**precision - 1 = {2**self.precision - 1} a {self.precision}-bit CDF can code; the density is "
                f"too spread out for {self.lattice.name} cells (scale the latents down or lower mass)"
            )
        self.coords_table = z.to(torch.int64)
        self._table = self.lattice.quantize(self.lattice.points(z))
        self.pmf = (p / p.sum()).numpy()
        self.table_mass = total
        self._index = {tuple(row): i for i, row in enumerate(self.coords_table.tolist())}
        self._cdf = self._quantized_cdf(self.pmf)
        log.info("LatticeCodec(%s): %d points, mass %.9f, radius %.2f", self.lattice.name, len(p), total, radius)
        return self

    def _quantized_cdf(self, pmf: np.ndarray) -> list[int]:
        from compressai._CXX import pmf_to_quantized_cdf

        tail = 1e-9  # CompressAI's overflow (bypass) symbol must have non-zero mass
        return pmf_to_quantized_cdf([*(pmf * (1 - tail)).tolist(), tail], self.precision)

    @property
    def table(self) -> torch.Tensor:
        """``(T, n)`` the coded lattice points (float32, bitwise equal to quantizer outputs)."""
        if self._table is None:
            raise RuntimeError("call fit() first")
        return self._table

    def symbols(self, y_hat: torch.Tensor) -> list[int]:
        """Table indices of the nearest lattice points of ``y_hat: (B, n)``; raises for points outside the table.

        ``y_hat`` are lattice points (e.g. quantizer outputs); other latents are first quantized to
        their nearest point, as CompressAI's ``compress`` quantizes its input.
        """
        if self._table is None:
            self.fit()
        self.lattice.check_input(y_hat, "y_hat")
        # coords() alone would round the basis coefficients, which is not the nearest point off the lattice
        pts = self.lattice._quantize(y_hat.reshape(-1, self.lattice.dim))
        z = self.lattice.coords(pts).tolist()
        out = []
        for row in z:
            i = self._index.get(tuple(row))
            if i is None:
                raise ValueError(f"lattice point with coordinates {row} is outside the coding table (mass {self.mass})")
            out.append(i)
        return out

    def compress(self, y_hat: torch.Tensor) -> bytes:
        """rANS-encode lattice points ``y_hat: (B, n)`` into bytes (other latents are quantized first)."""
        from compressai.ans import RansEncoder

        sym = self.symbols(y_hat)
        if len(sym) < self.MIN_SYMBOLS:
            sym = sym + [int(np.argmax(self.pmf))] * (self.MIN_SYMBOLS - len(sym))
        return RansEncoder().encode_with_indexes(sym, [0] * len(sym), [self._cdf], [len(self._cdf)], [0])

    def decompress(self, data: bytes, count: int) -> torch.Tensor:
        """Decode ``count`` lattice points, ``(count, n)`` float32."""
        from compressai.ans import RansDecoder

        if self._table is None:
            raise RuntimeError("call fit() first")
        if isinstance(count, bool) or not isinstance(count, numbers.Integral) or count < 0:
            raise ValueError(f"count must be a non-negative int, got {count!r}")
        count = int(count)
        if count == 0:
            return self._table[:0].clone()
        if len(data) < 8:
            # the rANS decoder reads an 8-byte state first; shorter input would be read out of bounds
            raise ValueError(f"data must be a bitstream from compress() (at least 8 bytes), got {data!r:.40}")
        sym = RansDecoder().decode_with_indexes(data, [0] * count, [self._cdf], [len(self._cdf)], [0])
        bad = [s for s in sym if not 0 <= s < len(self.pmf)]
        if bad:
            raise ValueError(f"bitstream decodes to symbols {bad[:5]} outside the table [0, {len(self.pmf)})")
        return self._table[torch.tensor(sym, dtype=torch.int64)]

    def estimated_bits(self, y_hat: torch.Tensor) -> float:
        """``Σ −log2 P(ŷ)`` under the tabulated pmf."""
        idx = torch.tensor(self.symbols(y_hat), dtype=torch.int64)
        return float(-np.log2(self.pmf[idx.numpy()]).sum())
