"""Unit-volume lattices with fast nearest-point decoders (Conway & Sloane, *SPLAG* ch. 20).

Every lattice ``Λ = {zG : z ∈ Zⁿ}`` is stored with a generator ``G`` (rows are basis vectors) of
unit volume ``|det G| = 1``; the decoder of the textbook-scaled lattice ``Λ₀ = Λ / a`` is applied
as ``Q(y) = a·Q₀(y / a)``.

Decoders
--------
* ``Zⁿ``: round each coordinate.
* ``Dₙ`` (even coordinate sum): round, and when the sum is odd re-round the coordinate with the
  largest rounding error the other way.
* ``Dₙ* = Zⁿ ∪ (Zⁿ + ½)``, ``A2 = (Z × √3Z) ∪ (Z × √3Z + (½, √3/2))``, ``E8 = D8 ∪ (D8 + ½)``:
  nearest of the coset decodes.
* ``Aₙ``: the ``Σ = 0`` hyperplane of ``Z^{n+1}``, decoded by rounding and moving the most
  deviating coordinates (Conway–Sloane), in an orthonormal basis of the hyperplane.
* Barnes–Wall ``Λ16 = ∪_{c ∈ RM(1,4)} (c + 2D16)`` (Construction B): 32 coset decodes.
* Leech ``Λ24`` (``√8``-scaled): ``∪_{c ∈ Golay} (2c + 4D24)`` and its shift by
  ``(−3, 1, …, 1)``: 8192 coset decodes, hence ``slow_ok=True``.
* Products ``X^k`` decode each factor independently.

Ties are broken *translation-equivariantly* (rounding half up, and between equidistant candidates
by a fixed generic linear functional of ``y − p``), so ``Q(y + λ) = Q(y) + λ`` holds for every
``λ ∈ Λ`` in exact arithmetic.

Exact integer models
--------------------
In floating point that equivariance is not exact for irrational generators (``Aₙ`` through the
Helmert basis, ``A2``, and products, whose factors are rescaled to unit volume by ``det^{−1/n}``):
``λ/q`` for ``λ`` on the boundary of ``qV`` lands on either side of a tie depending on rounding.
Each lattice therefore also carries an :class:`IntegerModel`: the same lattice, rotated and
rescaled into ``Z^N`` with the same integer coefficients ``z``, and a nearest-point decoder of
``x/den`` for integer ``x, den``: the decoders above, run on int64 numerators (distances and
rounding errors compared exactly, ties broken by the same rules as functions of the exact residual).
Voronoi codes reduce modulo ``qΛ`` with it, so boundary points are resolved identically however
they were reached.
"""

from __future__ import annotations

import copy
import functools
import math
import re
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import torch

__all__ = ["LATTICE_NAMES", "IntegerModel", "Lattice", "golay_codewords", "lattice", "nsm", "reed_muller_1_4"]

LATTICE_NAMES = ("Z", "Dn", "Dn*", "An", "A2", "E8", "BW16", "Leech", "<name>^k")

Decoder = Callable[[torch.Tensor], torch.Tensor]
IntDecoder = Callable[[torch.Tensor, int], torch.Tensor]


# --------------------------------------------------------------------------- elementary decoders
def _round_half_up(x: torch.Tensor) -> torch.Tensor:
    # torch.round rounds half to even, which is not translation-equivariant (0.5 -> 0, 1.5 -> 2).
    return torch.floor(x + 0.5)


def decode_z(y: torch.Tensor) -> torch.Tensor:
    """Nearest point of ``Zⁿ``; ``y``: ``(..., n)``."""
    return _round_half_up(y)


def decode_d(y: torch.Tensor) -> torch.Tensor:
    """Nearest point of ``Dₙ`` (integer vectors with even sum); ``y``: ``(..., n)``."""
    f = _round_half_up(y)
    err = y - f
    odd = torch.remainder(f.sum(-1), 2.0) != 0
    # Ties (|err| equal up to rounding noise, e.g. y = p/q for a lattice point p) go to the lowest
    # index: deterministic, and translation-equivariant because err is invariant under shifts.
    mag = err.abs()
    tol = 64 * torch.finfo(y.dtype).eps * (1.0 + y.abs().amax(-1, keepdim=True))
    near = (mag >= mag.amax(-1, keepdim=True) - tol).to(torch.uint8)
    k = near.argmax(-1, keepdim=True)
    ek = err.gather(-1, k)
    step = torch.where(ek >= 0, torch.ones_like(ek), -torch.ones_like(ek))
    fixed = f.scatter_add(-1, k, step)
    return torch.where(odd.unsqueeze(-1), fixed, f)


def decode_a(x: torch.Tensor) -> torch.Tensor:
    """Nearest point of ``Aₙ = {z ∈ Z^{n+1} : Σz = 0}`` for ``x``: ``(..., n+1)`` on the hyperplane."""
    f = _round_half_up(x)
    delta = f.sum(-1, keepdim=True)  # integer, how many coordinates must move by one
    err = x - f
    m = x.shape[-1]
    # Coordinates sorted by rounding error: the most negative errors were rounded up the most.
    order = torch.argsort(err, dim=-1, stable=True)
    rank = torch.empty_like(order)
    rank.scatter_(-1, order, torch.arange(m, device=x.device).expand_as(order))
    rank = rank.to(x.dtype)
    down = (delta > 0) & (rank < delta)
    up = (delta < 0) & (rank >= m + delta)
    return f - down.to(x.dtype) + up.to(x.dtype)


def _generic_direction(n: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    # Secondary tie-break key: distinct candidates never tie on this irrational direction.
    return torch.tensor([math.sqrt(2.0 + k) + k * math.pi for k in range(n)], device=device, dtype=dtype)


def coset_decode(y: torch.Tensor, shifts: torch.Tensor, base: Decoder) -> torch.Tensor:
    """Nearest point of ``∪_k (shifts[k] + L)`` where ``base`` decodes ``L``.

    Parameters
    ----------
    y:
        ``(B, n)`` points.
    shifts:
        ``(K, n)`` coset representatives.
    base:
        Nearest-point decoder of the sublattice ``L``.

    Returns
    -------
    torch.Tensor
        ``(B, n)`` nearest points; equidistant candidates are resolved by a fixed functional of
        ``y − p``, which keeps the decoder translation-equivariant.
    """
    diff = y.unsqueeze(1) - shifts.unsqueeze(0)  # (B, K, n)
    cand = base(diff) + shifts.unsqueeze(0)
    resid = y.unsqueeze(1) - cand
    dist = resid.square().sum(-1)  # (B, K)
    dmin = dist.min(-1, keepdim=True).values
    tol = 16 * torch.finfo(y.dtype).eps * (1.0 + dmin)
    key = resid @ _generic_direction(y.shape[-1], y.device, y.dtype)
    key = torch.where(dist <= dmin + tol, key, torch.full_like(key, float("inf")))
    idx = key.argmin(-1)
    return cand[torch.arange(y.shape[0], device=y.device), idx]


# --------------------------------------------------------------------------- exact integer decoders
# Each takes int64 numerators ``x: (..., N)`` and a positive int ``den`` and returns the int64 nearest
# point to ``x / den``, following the float decoder above on the exact rational input.
def _round_half_up_int(x: torch.Tensor, den: int) -> torch.Tensor:
    return torch.div(2 * x + den, 2 * den, rounding_mode="floor")


def decode_z_int(x: torch.Tensor, den: int) -> torch.Tensor:
    """Nearest point of ``Zⁿ`` to ``x / den`` (int64)."""
    return _round_half_up_int(x, den)


def decode_d_int(x: torch.Tensor, den: int) -> torch.Tensor:
    """Nearest point of ``Dₙ`` to ``x / den`` (int64), ties as :func:`decode_d`."""
    f = _round_half_up_int(x, den)
    err = x - den * f  # den × rounding error: exact, so ties need no tolerance
    odd = torch.remainder(f.sum(-1), 2) != 0
    k = err.abs().argmax(-1, keepdim=True)  # the first of equal errors, as decode_d
    ek = err.gather(-1, k)
    step = torch.where(ek >= 0, torch.ones_like(ek), -torch.ones_like(ek))
    return torch.where(odd.unsqueeze(-1), f.scatter_add(-1, k, step), f)


def decode_a_int(x: torch.Tensor, den: int) -> torch.Tensor:
    """Nearest point of ``Aₙ`` to ``x / den`` (int64, ``Σx = 0``), ties as :func:`decode_a`."""
    f = _round_half_up_int(x, den)
    delta = f.sum(-1, keepdim=True)
    err = x - den * f
    m = x.shape[-1]
    order = torch.argsort(err, dim=-1, stable=True)
    rank = torch.empty_like(order)
    rank.scatter_(-1, order, torch.arange(m, device=x.device).expand_as(order))
    down = (delta > 0) & (rank < delta)
    up = (delta < 0) & (rank >= m + delta)
    return f - down.to(f.dtype) + up.to(f.dtype)


def coset_decode_int(x: torch.Tensor, den: int, shifts: torch.Tensor, base: IntDecoder) -> torch.Tensor:
    """Nearest point of ``∪_k (shifts[k] + L)`` to ``x / den``; ``x``: ``(B, N)``, ``shifts``: ``(K, N)`` int64.

    Distances are compared exactly. Equidistant candidates are resolved as in :func:`coset_decode`
    (the generic functional of the residual ``x − den·p``), then, should two keys round to the same
    float, by the lexicographically smallest residual. Both depend on the residual alone, which is
    exactly invariant under translations, so the decoder is exactly translation-equivariant.
    """
    cand = base(x.unsqueeze(1) - den * shifts, den) + shifts  # (B, K, N)
    resid = x.unsqueeze(1) - den * cand
    dist = resid.square().sum(-1)
    alive = dist == dist.min(-1, keepdim=True).values
    key = resid.double() @ _generic_direction(x.shape[-1], x.device, torch.float64)
    key = key.masked_fill(~alive, float("inf"))
    alive &= key == key.min(-1, keepdim=True).values
    rows = (alive.sum(-1) > 1).nonzero().squeeze(-1)
    if rows.numel():  # only rows whose keys rounded equal (the Leech lattice has 8192 candidates)
        sub, big = alive[rows], torch.iinfo(torch.int64).max
        for i in range(x.shape[-1]):
            r = resid[rows, :, i].masked_fill(~sub, big)
            sub &= r == r.min(-1, keepdim=True).values
        alive[rows] = sub
    idx = alive.to(torch.uint8).argmax(-1)  # distinct candidates have distinct residuals: one is left
    return cand[torch.arange(x.shape[0], device=x.device), idx]


def _scaled_coset_int(shifts: torch.Tensor, scale: int, base: IntDecoder) -> IntDecoder:
    """Exact decoder of ``∪_k (shifts[k] + scale·L)`` from the exact decoder ``base`` of ``L``."""

    def decode(x: torch.Tensor, den: int) -> torch.Tensor:
        return coset_decode_int(x, den, shifts.to(x.device), lambda t, d: scale * base(t, scale * d))

    return decode


def _left_inverse(basis: np.ndarray) -> tuple[np.ndarray, int]:
    """``(C, d)`` with integer ``C`` and ``(zB) C = d·z`` for every ``z`` (exact, via ``Bᵀ(BBᵀ)⁻¹``)."""
    b = [[Fraction(int(v)) for v in row] for row in basis]
    n = len(b)
    gram = [[sum(x * y for x, y in zip(b[i], b[j], strict=True)) for j in range(n)] for i in range(n)]
    aug = [gram[i] + [Fraction(int(i == j)) for j in range(n)] for i in range(n)]
    for col in range(n):  # Gauss–Jordan; the Gram matrix is positive definite, so pivots are non-zero
        piv = next(r for r in range(col, n) if aug[r][col] != 0)
        aug[col], aug[piv] = aug[piv], aug[col]
        p = aug[col][col]
        aug[col] = [v / p for v in aug[col]]
        for r in range(n):
            if r != col and aug[r][col] != 0:
                f = aug[r][col]
                aug[r] = [v - f * w for v, w in zip(aug[r], aug[col], strict=True)]
    inv = [row[n:] for row in aug]
    left = [[sum(b[k][i] * inv[k][j] for k in range(n)) for j in range(n)] for i in range(len(b[0]))]
    d = math.lcm(*(v.denominator for row in left for v in row))
    return np.array([[int(v * d) for v in row] for row in left], dtype=np.int64), d


class IntegerModel:
    """A lattice rotated and rescaled into ``Z^N`` as ``{zB : z ∈ Zⁿ}``, with an exact decoder.

    ``z`` are the same coefficients as for :attr:`Lattice.G`, and ``B Bᵀ`` is a multiple of
    ``G Gᵀ``, so nearest points (and Voronoi cells) correspond. A product ``X^k`` is ``blocks = k``
    copies of the model of ``X``.

    Parameters
    ----------
    basis:
        ``(n₀, N₀)`` integer basis of one block.
    decode:
        Exact nearest-point decoder of one block: ``(x: (B, N₀) int64, den: int) -> (B, N₀) int64``.
    blocks:
        Number of independent blocks.
    """

    def __init__(self, basis: np.ndarray, decode: IntDecoder, blocks: int = 1) -> None:
        ints = np.rint(basis).astype(np.int64)
        if not np.array_equal(ints, basis):
            raise ValueError("the basis of an integer model must be integral")
        self.basis = ints
        self.decode_block = decode
        self.blocks = blocks
        self._inverse: tuple[np.ndarray, int] | None = None

    def power(self, k: int) -> IntegerModel:
        """The model of the product of ``k`` copies."""
        return IntegerModel(self.basis, self.decode_block, self.blocks * k)

    def points(self, z: torch.Tensor) -> torch.Tensor:
        """``zB``: int64 ``(B, n)`` -> ``(B, N)``."""
        n0, big_n0 = self.basis.shape
        zb = z.reshape(-1, n0, 1)
        # elementwise product-sum: exact, and works where integer matmul does not (CUDA)
        x = (zb * torch.as_tensor(self.basis, device=z.device)).sum(-2)
        return x.reshape(z.shape[0], self.blocks * big_n0)

    def nearest(self, x: torch.Tensor, den: int) -> torch.Tensor:
        """Nearest model point to ``x / den``: int64 ``(B, N)`` -> ``(B, N)``."""
        big_n0 = self.basis.shape[1]
        return self.decode_block(x.reshape(-1, big_n0), den).reshape(x.shape)

    def coords(self, p: torch.Tensor) -> torch.Tensor:
        """Coefficients ``z`` of model points ``p = zB``: int64 ``(B, N)`` -> ``(B, n)``."""
        if self._inverse is None:
            self._inverse = _left_inverse(self.basis)
        c, d = self._inverse
        big_n0, n0 = c.shape
        pb = p.reshape(-1, big_n0, 1)
        num = (pb * torch.as_tensor(c, device=p.device)).sum(-2)
        return torch.div(num, d, rounding_mode="floor").reshape(p.shape[0], self.blocks * n0)


# --------------------------------------------------------------------------- codes
@functools.cache
def reed_muller_1_4() -> np.ndarray:
    """The 32 codewords of the first-order Reed–Muller code RM(1, 4), ``(32, 16)`` of 0/1."""
    pts = np.array([[(i >> b) & 1 for b in range(4)] for i in range(16)])  # points of F_2^4
    words = []
    for a in range(16):
        lin = (pts @ np.array([(a >> b) & 1 for b in range(4)])) % 2
        for c in (0, 1):
            words.append((lin + c) % 2)
    return np.array(words, dtype=np.int64)


@functools.cache
def golay_codewords() -> np.ndarray:
    """The 4096 codewords of the extended binary Golay code, ``(4096, 24)`` of 0/1.

    Built as the cyclic [23, 12] code with generator ``g(x) = 1 + x² + x⁴ + x⁵ + x⁶ + x¹⁰ + x¹¹``
    plus an overall parity bit.
    """
    g = np.zeros(23, dtype=np.int64)
    g[[0, 2, 4, 5, 6, 10, 11]] = 1
    gen = np.stack([np.roll(g, s) for s in range(12)])
    gen = np.concatenate([gen, gen.sum(1, keepdims=True) % 2], axis=1)
    msgs = np.array([[(i >> b) & 1 for b in range(12)] for i in range(4096)], dtype=np.int64)
    return (msgs @ gen) % 2


# --------------------------------------------------------------------------- bases
def _integer_basis(generators: list[list[int]]) -> list[list[int]]:
    """A basis (Hermite-style row echelon form) of the integer lattice spanned by ``generators``."""
    rows = [list(map(int, r)) for r in generators]
    n = len(rows[0])
    basis: list[list[int]] = []
    for col in range(n):
        # Euclid on column `col` across the remaining rows.
        while True:
            nz = [r for r in rows if r[col] != 0]
            if len(nz) <= 1:
                break
            piv = min(nz, key=lambda r: abs(r[col]))
            for r in nz:
                if r is piv:
                    continue
                q = r[col] // piv[col]
                for j in range(n):
                    r[j] -= q * piv[j]
            rows = [r for r in rows if any(r)]
        nz = [r for r in rows if r[col] != 0]
        if nz:
            basis.append(nz[0])
            rows = [r for r in rows if r is not nz[0]]
    if len(basis) != n:
        raise ValueError(f"generators span rank {len(basis)}, expected {n}")
    return basis


def _lll(basis: np.ndarray, delta: float = 0.75) -> np.ndarray:
    """LLL-reduce the rows of ``basis`` (float64; exact enough for the small lattices here)."""
    b = basis.astype(np.float64).copy()
    n = b.shape[0]

    def gso(b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        bs = np.zeros_like(b)
        mu = np.zeros((n, n))
        for i in range(n):
            bs[i] = b[i]
            for j in range(i):
                mu[i, j] = b[i] @ bs[j] / (bs[j] @ bs[j])
                bs[i] -= mu[i, j] * bs[j]
        return bs, mu

    bs, mu = gso(b)
    k = 1
    while k < n:
        for j in range(k - 1, -1, -1):
            q = round(mu[k, j])
            if q:
                b[k] -= q * b[j]
                bs, mu = gso(b)
        if bs[k] @ bs[k] >= (delta - mu[k, k - 1] ** 2) * (bs[k - 1] @ bs[k - 1]):
            k += 1
        else:
            b[[k, k - 1]] = b[[k - 1, k]]
            bs, mu = gso(b)
            k = max(k - 1, 1)
    return b


def _reduced_basis(generators: np.ndarray, denom: int) -> np.ndarray:
    """LLL-reduced basis of the lattice generated by ``generators / denom`` (integer generators)."""
    ints = [[int(Fraction(v).limit_denominator(64) * denom) for v in row] for row in generators]
    return _lll(np.array(_integer_basis(ints), dtype=np.float64)) / denom


def _d_generators(n: int) -> np.ndarray:
    # The official D_n basis: -I with +1 below the diagonal and M[0, 1] = -1.
    m = -np.eye(n)
    m[np.arange(1, n), np.arange(n - 1)] = 1.0
    m[0, 1] = -1.0
    return m


def _hyperplane_basis(n: int) -> np.ndarray:
    """Orthonormal rows spanning ``{x ∈ R^{n+1} : Σx = 0}``, ``(n, n+1)`` (Helmert basis)."""
    h = np.zeros((n, n + 1))
    for k in range(1, n + 1):
        h[k - 1, :k] = 1.0
        h[k - 1, k] = -k
        h[k - 1] /= math.sqrt(k * (k + 1))
    return h


# --------------------------------------------------------------------------- the Lattice class
class Lattice:
    """A unit-volume lattice with a batched nearest-point quantizer.

    Build one with :func:`lattice`. Decoding runs in the input's dtype (float16/bfloat16 inputs
    are upcast to float32 and the result cast back) on the input's device.

    Attributes
    ----------
    name:
        Canonical name, e.g. ``"E8"``, ``"D4"``, ``"A2^4"``.
    dim:
        Dimension ``n``.
    G:
        ``(n, n)`` float64 generator matrix with ``|det G| = 1``; rows are basis vectors.
    volume:
        Cell volume, always 1.
    integer_model:
        The :class:`IntegerModel` used for exact reductions modulo ``qΛ`` (Voronoi codes), or None.
    """

    def __init__(
        self,
        name: str,
        G0: np.ndarray,
        decode0: Decoder,
        shifts0: np.ndarray | None = None,
        integer_model: IntegerModel | None = None,
    ) -> None:
        self.name = name
        self.dim = int(G0.shape[0])
        det = abs(float(np.linalg.det(G0)))
        self._scale = det ** (-1.0 / self.dim)  # a in Q(y) = a·Q₀(y / a)
        self.G = torch.as_tensor(G0 * self._scale, dtype=torch.float64)
        self.G0 = torch.as_tensor(G0, dtype=torch.float64)  # textbook scaling: exact for rational lattices
        self._Ginv = torch.linalg.inv(self.G)
        self._decode0 = decode0
        self._shifts0 = shifts0
        self._cache: dict[tuple, torch.Tensor] = {}
        self.volume = 1.0
        self.integer_model = integer_model

    def __repr__(self) -> str:
        return f"Lattice({self.name!r}, dim={self.dim})"

    def __reduce_ex__(self, protocol):
        # The decoders are closures, which pickle cannot store: a lattice built by lattice() is
        # pickled as that call (so torch.save / pickle of a whole model work).
        spec = self.__dict__.get("_spec")
        if spec is not None:
            return lattice, spec
        return super().__reduce_ex__(protocol)

    def __deepcopy__(self, memo: dict) -> Lattice:
        # the default deep copy (attribute by attribute), not the rebuild of __reduce_ex__
        new = object.__new__(type(self))
        memo[id(self)] = new
        new.__dict__.update(copy.deepcopy(self.__dict__, memo))
        return new

    @property
    def scale(self) -> float:
        """Factor ``a`` with ``Λ = a·Λ₀`` (``Λ₀`` the textbook-scaled lattice)."""
        return self._scale

    def _const(self, key: str, value: np.ndarray | torch.Tensor, device: torch.device, dtype: torch.dtype):
        k = (key, device, dtype)
        if k not in self._cache:
            self._cache[k] = torch.as_tensor(value).to(device=device, dtype=dtype)
        return self._cache[k]

    def generator(self, device: torch.device | str | None = None, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """``G`` on ``device`` in ``dtype``, ``(n, n)``."""
        return self._const("G", self.G, torch.device(device or "cpu"), dtype)

    def check_input(self, y: torch.Tensor, argname: str = "y") -> None:
        """Raise when ``y`` is not a finite floating tensor of shape ``(..., dim)``."""
        if not isinstance(y, torch.Tensor):
            raise TypeError(f"{argname} must be a torch.Tensor, got {type(y).__name__}")
        if not y.is_floating_point():
            raise TypeError(f"{argname} must have a floating dtype, got {y.dtype}")
        if y.dim() == 0 or y.shape[-1] != self.dim:
            raise ValueError(
                f"{argname} must have last dimension {self.dim} (lattice {self.name} dim), got shape {tuple(y.shape)}"
            )
        if y.numel() and not bool(torch.isfinite(y).all()):
            raise ValueError(f"{argname} contains NaN or Inf values; the nearest lattice point is undefined")

    def decode_unscaled(self, y: torch.Tensor) -> torch.Tensor:
        """Nearest point of the textbook-scaled lattice ``Λ₀``; ``y``: ``(B, n)``, no validation."""
        return self._decode0(y)

    def quantize(self, y: torch.Tensor) -> torch.Tensor:
        """Nearest lattice point.

        Parameters
        ----------
        y:
            ``(..., n)`` finite floating tensor.

        Returns
        -------
        torch.Tensor
            ``(..., n)`` nearest points of the unit-volume lattice, same dtype as ``y``.
        """
        self.check_input(y)
        return self._quantize(y)

    def _quantize(self, y: torch.Tensor) -> torch.Tensor:
        if y.numel() == 0:
            return y.clone()
        work = y.float() if y.dtype in (torch.float16, torch.bfloat16) else y
        flat = work.reshape(-1, self.dim)
        a = self._scale
        p = self._decode0(flat / a) * a
        return p.reshape(y.shape).to(y.dtype)

    def coords(self, points: torch.Tensor) -> torch.Tensor:
        """Integer coefficients ``z`` with ``z G = points``.

        Parameters
        ----------
        points:
            ``(..., n)`` lattice points.

        Returns
        -------
        torch.Tensor
            ``(..., n)`` int64 tensor (rounded; use :meth:`coords_float` to check integrality).
        """
        return torch.round(self.coords_float(points)).to(torch.int64)

    def coords_float(self, points: torch.Tensor) -> torch.Tensor:
        """``points @ G⁻¹`` in float64 without rounding, ``(..., n)``."""
        self.check_input(points, "points")
        return points.double() @ self._Ginv.to(points.device)

    def points(self, z: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """Lattice points ``z G`` for integer coefficients ``z``: ``(..., n)`` -> ``(..., n)``."""
        if z.shape[-1] != self.dim:
            raise ValueError(f"z must have last dimension {self.dim}, got shape {tuple(z.shape)}")
        return (z.double() @ self.G.to(z.device)).to(dtype)

    def sample_voronoi(
        self,
        n: int,
        generator: torch.Generator | None = None,
        method: str = "uniform",
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> torch.Tensor:
        """Samples uniform on the Voronoi cell ``V`` of the origin: ``u = zG − Q(zG)``.

        ``zG`` with ``z ~ U[0, 1)ⁿ`` is uniform on a fundamental cell; reducing it modulo the lattice
        maps it one-to-one (up to measure zero) onto ``V``, so ``u`` is exactly uniform on ``V``.

        Parameters
        ----------
        n:
            Number of samples.
        generator:
            Optional torch generator (its device decides where ``z`` is drawn).
        method:
            ``"uniform"`` (i.i.d.), ``"sobol"`` (scrambled Sobol ``z``; seeded from ``generator``)
            or ``"antithetic"`` (pairs ``±u``; ``n`` must be even).
        device, dtype:
            Where and in which dtype to return the samples.

        Returns
        -------
        torch.Tensor
            ``(n, dim)`` samples.
        """
        if not isinstance(n, int) or n < 0:
            raise ValueError(f"n must be a non-negative int, got {n!r}")
        if method not in ("uniform", "sobol", "antithetic"):
            raise ValueError(f"method must be 'uniform', 'sobol' or 'antithetic', got {method!r}")
        device = torch.device(device) if device is not None else torch.device("cpu")
        work = torch.float64 if dtype == torch.float64 else torch.float32
        gdev = generator.device if generator is not None else device
        if method == "sobol":
            seed = int(torch.randint(0, 2**31 - 1, (1,), generator=generator, device=gdev).item())
            z = torch.quasirandom.SobolEngine(self.dim, scramble=True, seed=seed).draw(n, dtype=work)
        elif method == "antithetic":
            if n % 2:
                raise ValueError(f"n must be even for method='antithetic', got {n}")
            z = torch.rand(n // 2, self.dim, generator=generator, device=gdev, dtype=work)
        else:
            z = torch.rand(n, self.dim, generator=generator, device=gdev, dtype=work)
        z = z.to(device)
        x = z @ self.generator(device, work)
        u = x - self._quantize(x)
        if method == "antithetic":
            u = torch.cat([u, -u])
        return u.to(dtype)


class _ProductLattice(Lattice):
    def __init__(self, base: Lattice, k: int) -> None:
        self.base = base
        self.k = k
        G0 = np.kron(np.eye(k), base.G.numpy())

        def decode(y: torch.Tensor) -> torch.Tensor:
            flat = y.reshape(-1, base.dim)
            return base._quantize(flat).reshape(y.shape)

        model = base.integer_model.power(k) if base.integer_model is not None else None
        super().__init__(f"{base.name}^{k}", G0, decode, integer_model=model)


# --------------------------------------------------------------------------- constructors
def _z(n: int) -> Lattice:
    return Lattice(f"Z{n}" if n > 1 else "Z", np.eye(n), decode_z, integer_model=IntegerModel(np.eye(n), decode_z_int))


def _d(n: int) -> Lattice:
    if n < 2:
        raise ValueError(f"D_n needs n >= 2, got {n}")
    return Lattice(f"D{n}", _d_generators(n), decode_d, integer_model=IntegerModel(_d_generators(n), decode_d_int))


def _d_dual(n: int) -> Lattice:
    G0 = np.eye(n)
    G0[-1] = 0.5
    half = torch.full((1, n), 0.5, dtype=torch.float64)
    shifts = torch.cat([torch.zeros_like(half), half])

    def decode(y: torch.Tensor) -> torch.Tensor:
        return coset_decode(y, shifts.to(y.device, y.dtype), decode_z)

    # doubled to make the model integral: 2Dₙ* = 2Zⁿ ∪ (2Zⁿ + 1)
    decode_int = _scaled_coset_int(torch.tensor([[0] * n, [1] * n]), 2, decode_z_int)
    return Lattice(f"D{n}*", G0, decode, integer_model=IntegerModel(2 * G0, decode_int))


def _a2() -> Lattice:
    s3 = math.sqrt(3.0)
    G0 = np.array([[1.0, 0.0], [0.5, s3 / 2]])

    def rect(y: torch.Tensor) -> torch.Tensor:  # nearest point of Z × √3 Z
        r = torch.stack([_round_half_up(y[..., 0]), _round_half_up(y[..., 1] / s3) * s3], -1)
        return r

    shifts = torch.tensor([[0.0, 0.0], [0.5, s3 / 2]], dtype=torch.float64)

    def decode(y: torch.Tensor) -> torch.Tensor:
        return coset_decode(y, shifts.to(y.device, y.dtype), rect)

    # model: the root lattice {x ∈ Z³ : Σx = 0} in the basis e₀ − e₁, e₀ − e₂ (Gram 2·G0 G0ᵀ)
    model = IntegerModel(np.array([[1, -1, 0], [1, 0, -1]]), decode_a_int)
    return Lattice("A2", G0, decode, integer_model=model)


def _a(n: int) -> Lattice:
    if n == 2:
        return _a2()
    if n < 1:
        raise ValueError(f"A_n needs n >= 1, got {n}")
    H = _hyperplane_basis(n)  # (n, n+1), orthonormal rows
    roots = np.eye(n + 1)[:-1] - np.eye(n + 1)[1:]  # e_i - e_{i+1}
    G0 = roots @ H.T
    Ht = torch.as_tensor(H)

    def decode(y: torch.Tensor) -> torch.Tensor:
        h = Ht.to(y.device, y.dtype)
        return decode_a(y @ h) @ h.T

    return Lattice(f"A{n}", G0, decode, integer_model=IntegerModel(roots, decode_a_int))


def _e8() -> Lattice:
    gens = np.concatenate([_d_generators(8), np.full((1, 8), 0.5)])
    G0 = _reduced_basis(gens, 2)
    half = torch.full((1, 8), 0.5, dtype=torch.float64)
    shifts = torch.cat([torch.zeros_like(half), half])

    def decode(y: torch.Tensor) -> torch.Tensor:
        return coset_decode(y, shifts.to(y.device, y.dtype), decode_d)

    # doubled to make the model integral: 2E8 = 2D8 ∪ (2D8 + 1)
    decode_int = _scaled_coset_int(torch.tensor([[0] * 8, [1] * 8]), 2, decode_d_int)
    return Lattice("E8", G0, decode, integer_model=IntegerModel(2 * G0, decode_int))


def _bw16() -> Lattice:
    rm = reed_muller_1_4().astype(np.float64)
    gens = np.concatenate([2 * _d_generators(16), _rm_generators()])
    G0 = _reduced_basis(gens, 1)
    shifts = torch.as_tensor(rm)

    def decode(y: torch.Tensor) -> torch.Tensor:
        return coset_decode(y, shifts.to(y.device, y.dtype), lambda t: 2 * decode_d(t / 2))

    decode_int = _scaled_coset_int(torch.as_tensor(reed_muller_1_4()), 2, decode_d_int)
    return Lattice("BW16", G0, decode, integer_model=IntegerModel(G0, decode_int))


def _rm_generators() -> np.ndarray:
    pts = np.array([[(i >> b) & 1 for b in range(4)] for i in range(16)], dtype=np.float64)
    return np.concatenate([np.ones((1, 16)), pts.T])  # all-ones word and the 4 coordinate functions


def _leech() -> Lattice:
    golay = golay_codewords().astype(np.float64)
    odd = np.ones(24)
    odd[0] = -3.0
    gens = np.concatenate([4 * _d_generators(24), 2 * golay[[1 << b for b in range(12)]], odd[None]])
    G0 = _reduced_basis(gens, 1)
    shifts = torch.as_tensor(np.concatenate([2 * golay, 2 * golay + odd[None]]))

    def decode(y: torch.Tensor) -> torch.Tensor:
        s = shifts.to(y.device, y.dtype)
        out = torch.empty_like(y)
        chunk = 64  # bounds the (chunk, 8192, 24) intermediate
        for i in range(0, y.shape[0], chunk):
            out[i : i + chunk] = coset_decode(y[i : i + chunk], s, lambda t: 4 * decode_d(t / 4))
        return out

    coset_int = _scaled_coset_int(shifts.round().to(torch.int64), 4, decode_d_int)

    def decode_int(x: torch.Tensor, den: int) -> torch.Tensor:
        out = torch.empty_like(x)
        chunk = 16  # bounds the (chunk, 8192, 24) int64 intermediates
        for i in range(0, x.shape[0], chunk):
            out[i : i + chunk] = coset_int(x[i : i + chunk], den)
        return out

    return Lattice("Leech", G0, decode, integer_model=IntegerModel(G0, decode_int))


_NAME_RE = re.compile(r"^(Z|D|A)(\d*)(\*?)$")


def lattice(name: str, dim: int | None = None, slow_ok: bool = False) -> Lattice:
    """Build a unit-volume lattice by name.

    Parameters
    ----------
    name:
        ``"Z"``, ``"Dn"``, ``"Dn*"``, ``"An"`` (with ``dim``) or with the dimension in the name
        (``"Z8"``, ``"D4"``, ``"D4*"``, ``"A2"``, ``"A3"``), ``"E8"``, ``"BW16"`` (aliases
        ``"Lambda16"``, ``"Λ16"``), ``"Leech"`` (``"Lambda24"``, ``"Λ24"``), or a product
        ``"<name>^k"`` such as ``"E8^2"`` or ``"A2^4"``.
    dim:
        Dimension for the families ``Z``, ``Dn``, ``Dn*``, ``An`` when the name does not carry it.
    slow_ok:
        Must be True for the Leech lattice (8192 coset decodes per vector).

    Returns
    -------
    Lattice

    Raises
    ------
    KeyError
        For an unknown name (the message lists the known ones).
    """
    lat = _lattice(name, dim, slow_ok)
    lat._spec = (name, dim, slow_ok)  # how to rebuild it (pickling)
    return lat


def _lattice(name: str, dim: int | None, slow_ok: bool) -> Lattice:
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    key = name.strip()
    if "^" in key:
        base_name, _, k = key.rpartition("^")
        if not k.isdigit() or int(k) < 1:
            raise ValueError(f"product power in {name!r} must be a positive integer")
        base = lattice(base_name, dim=dim, slow_ok=slow_ok)
        return base if int(k) == 1 else _ProductLattice(base, int(k))
    aliases = {"lambda16": "BW16", "λ16": "BW16", "bw16": "BW16", "lambda24": "Leech", "λ24": "Leech"}
    key = aliases.get(key.lower(), key)
    if key.lower() == "e8":
        return _e8()
    if key == "BW16":
        return _bw16()
    if key.lower() == "leech":
        if not slow_ok:
            raise ValueError("the Leech decoder runs 8192 coset decodes per vector; pass slow_ok=True to use it")
        return _leech()
    m = _NAME_RE.match(key.replace("n", "")) if key not in ("", "n") else None
    if m is None:
        raise KeyError(f"unknown lattice {name!r}; known: {', '.join(LATTICE_NAMES)}")
    family, digits, star = m.groups()
    n = int(digits) if digits else dim
    if n is None:
        raise ValueError(f"lattice {name!r} needs a dimension: pass dim= or write e.g. {family}4")
    if dim is not None and digits and int(digits) != dim:
        raise ValueError(f"lattice {name!r} has dimension {digits} but dim={dim} was given")
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"dim must be a positive int, got {n!r}")
    if family == "Z" and not star:
        return _z(n)
    if family == "D":
        return _d_dual(n) if star else _d(n)
    if family == "A" and not star:
        return _a(n)
    raise KeyError(f"unknown lattice {name!r}; known: {', '.join(LATTICE_NAMES)}")


def nsm(
    lat: Lattice,
    n_samples: int = 200_000,
    generator: torch.Generator | None = None,
    chunk: int = 20_000,
) -> tuple[float, float]:
    """Monte-Carlo normalized second moment ``G(Λ) = E‖u‖² / (n·V^{2/n})`` with ``u ~ U(V)``.

    Parameters
    ----------
    lat:
        The lattice (unit volume, so ``G = E‖u‖²/n``).
    n_samples:
        Number of Voronoi samples.
    generator:
        Optional torch generator for reproducibility.
    chunk:
        Samples drawn per batch (bounds memory).

    Returns
    -------
    tuple[float, float]
        The estimate and its standard error.
    """
    if n_samples < 2:
        raise ValueError(f"n_samples must be >= 2, got {n_samples}")
    vals = []
    for i in range(0, n_samples, chunk):
        u = lat.sample_voronoi(min(chunk, n_samples - i), generator=generator, dtype=torch.float64)
        vals.append(u.square().sum(-1) / lat.dim)
    v = torch.cat(vals) / lat.volume ** (2.0 / lat.dim)
    return float(v.mean()), float(v.std() / math.sqrt(v.numel()))
