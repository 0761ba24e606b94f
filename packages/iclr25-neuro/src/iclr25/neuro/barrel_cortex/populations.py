"""Population table, anatomical connection probabilities and seeded sparse masks.

The 13 populations of one mouse barrel-cortex column (L4: P0-P3, L2/3: P4-P12) and their pairwise
connection probabilities follow the NetPyNE model of Huang, Zeldenrust & Celikel (2022), "Cortical
representation of touch in silico", Neuroinformatics 20, as instantiated by the RSNN_bfd authors.
Values are rounded to 4 decimals; code keys on population indices, names are positional labels.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch

from .whiskers import _is_int

__all__ = ["BARREL_CONNECTIVITY", "BARREL_POPULATIONS", "ConnectivitySpec", "Population"]


class Population(NamedTuple):
    """One neuron population: ``name``, ``size``, ``kind`` ("E" or "I") and cortical ``layer``."""

    name: str
    size: int
    kind: str
    layer: str


_SIZES = (440, 934, 94, 93, 2232, 106, 4, 55, 64, 64, 34, 60, 38)
_KINDS = "EEIIEIIIIIIII"
#: The 13 populations (4,218 neurons); E populations are P0, P1 (L4) and P4 (L2/3 pyramidal).
BARREL_POPULATIONS: tuple[Population, ...] = tuple(
    Population(f"P{i}", n, k, "L4" if i < 4 else "L2/3") for i, (n, k) in enumerate(zip(_SIZES, _KINDS, strict=True))
)

_ = 0.0
# Rows: presynaptic population, columns: postsynaptic population (Huang, Zeldenrust & Celikel 2022).
_P_RECURRENT = np.array(
    [
        [0.0542, 0.0387, 0.0665, 0.0605, 0.1382, 0.2384, 0.2574, 0.2045, _, 0.1986, 0.2152, 0.2249, 0.0941],
        [0.0806, 0.0379, 0.1098, 0.3426, 0.1164, 0.168, 0.1817, 0.1347, _, 0.1379, 0.136, 0.1339, 0.0931],
        [0.3829, 0.0286, 0.3388, 0.1353, 0.0121, 0.0074, 0.0027, _, _, 0.006, 0.0069, 0.0027, 0.0056],
        [0.3597, 0.0186, 0.1557, 0.2651, _, _, _, _, _, _, _, _, _],
        [_, _, _, _, 0.061, 0.2116, 0.2028, 0.0678, 0.1941, 0.0629, 0.0578, 0.0586, 0.178],
        [_, _, _, _, 0.2967, 0.2642, 0.2429, _, _, 0.1165, 0.1168, 0.0871, 0.1775],
        [_, _, _, _, 0.2577, 0.1863, 0.25, _, _, 0.1328, 0.1029, 0.0458, 0.1184],
        [_, _, _, _, 0.1063, 0.0722, 0.0682, 0.1038, 0.1051, 0.1102, _, 0.0842, 0.0732],
        [_, _, _, _, 0.2062, 0.2314, 0.168, 0.2276, _, 0.208, 0.2192, 0.2357, 0.1587],
        [_, _, _, _, 0.1396, 0.1352, 0.1406, 0.0861, 0.2349, 0.1172, 0.1222, 0.1313, 0.1225],
        [_, _, _, _, 0.038, 0.0988, 0.0662, _, 0.2348, 0.1153, 0.1142, 0.1333, 0.1184],
        [_, _, _, _, 0.0457, 0.0671, 0.0333, 0.1539, 0.1565, 0.1583, 0.1554, 0.06, 0.161],
        [_, _, _, _, 0.0837, 0.0951, 0.0724, 0.0718, 0.0847, 0.0942, 0.1703, 0.1145, 0.1593],
    ]
)
_P_THALAMIC = np.array([0.0794, 0.0841, 0.0994, 0.089, 0.0007, 0.0008, _, 0.002, _, 0.001, 0.0005, 0.0002, 0.0005])
_E_ROWS = np.array([k == "E" for k in _KINDS])
_P_RECURRENT.setflags(write=False)
_P_THALAMIC.setflags(write=False)

#: ``"recurrent"``: (13, 13) p(pre→post); ``"excitatory"`` / ``"inhibitory"``: its E and I rows
#: (disjoint, as RSNN_bfd's two tables); ``"thalamic"``: (13,) p(thalamus→post) for 200 thalamic neurons.
BARREL_CONNECTIVITY: dict[str, np.ndarray] = {
    "recurrent": _P_RECURRENT,
    "excitatory": np.where(_E_ROWS[:, None], _P_RECURRENT, 0.0),
    "inhibitory": np.where(_E_ROWS[:, None], 0.0, _P_RECURRENT),
    "thalamic": _P_THALAMIC,
}
for _a in BARREL_CONNECTIVITY.values():
    _a.setflags(write=False)


def _is_positive_integral(v: object) -> bool:
    return (
        isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v) and float(v).is_integer() and v > 0
    )


def _check_probabilities(name: str, p: np.ndarray, shape: tuple[int, ...]) -> None:
    if p.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {p.shape}")
    if not np.all(np.isfinite(p)) or p.min() < 0 or p.max() > 1:
        raise ValueError(f"{name} entries must be probabilities in [0, 1], got range [{p.min()}, {p.max()}]")


class ConnectivitySpec:
    """Populations plus connection probabilities: builds seeded Bernoulli masks.

    Parameters
    ----------
    sizes:
        Population sizes (``P`` positive ints).
    kinds:
        ``P`` entries "E" or "I": the sign of every synapse leaving that population (Dale's law).
    p_recurrent:
        ``(P, P)`` p(pre→post) in [0, 1]; or a pair ``(p_excitatory, p_inhibitory)`` of such tables whose
        non-zero rows must be disjoint and match ``kinds`` (RSNN_bfd layout).
    p_input:
        ``(P,)`` p(input neuron→post) for the ``n_input`` input neurons, or ``None``: no input
        synapses (the input mask is all ``False``, so inputs do not reach the network).
    n_input:
        Number of input (e.g. thalamic) neurons.
    scale:
        Population sizes are ``max(1, round(size * scale))``; probabilities are unchanged and the
        network divides recurrent weights by ``scale`` so each neuron keeps its expected recurrent
        input (the ``n_input`` input neurons are not scaled, so input weights need no gain).
    seed:
        Seed of the masks (identical seeds give identical masks).
    """

    def __init__(
        self,
        sizes: Sequence[int],
        kinds: Sequence[str],
        p_recurrent: np.ndarray | tuple[np.ndarray, np.ndarray],
        p_input: np.ndarray | None = None,
        n_input: int = 200,
        scale: float = 1.0,
        seed: int = 0,
    ) -> None:
        if hasattr(sizes, "tolist"):  # a tensor iterates as 0-d tensors, not numbers
            sizes = sizes.tolist()
        sizes = list(sizes)
        # int(2.5) would silently build a population of 2; integral floats such as 3.0 stay accepted
        if not sizes or not all(_is_positive_integral(n) for n in sizes):
            raise ValueError(f"sizes must be a non-empty sequence of positive ints, got {sizes}")
        sizes = [int(n) for n in sizes]
        kinds = list(kinds)
        n_pop = len(sizes)
        if len(kinds) != n_pop or any(k not in ("E", "I") for k in kinds):
            raise ValueError(f"kinds must be {n_pop} entries 'E' or 'I', got {kinds}")
        if not isinstance(scale, numbers.Real) or isinstance(scale, bool) or not scale > 0 or not math.isfinite(scale):
            raise ValueError(f"scale must be a float > 0, got {scale!r}")
        # int() would silently turn seed=1.5 into the masks of seed 1
        if not _is_int(seed):
            raise ValueError(f"seed must be an int, got {seed!r}")
        is_e = np.array([k == "E" for k in kinds])
        if isinstance(p_recurrent, tuple):
            p_e, p_i = (np.asarray(p, dtype=np.float64) for p in p_recurrent)
            _check_probabilities("p_recurrent[0] (excitatory)", p_e, (n_pop, n_pop))
            _check_probabilities("p_recurrent[1] (inhibitory)", p_i, (n_pop, n_pop))
            both = np.flatnonzero((p_e > 0).any(1) & (p_i > 0).any(1))
            if both.size:
                raise ValueError(f"rows {both.tolist()} are both excitatory and inhibitory (mixed E/I rows)")
            wrong = np.flatnonzero(((p_e > 0).any(1) & ~is_e) | ((p_i > 0).any(1) & is_e))
            if wrong.size:
                raise ValueError(f"rows {wrong.tolist()} contradict kinds {kinds}: E rows go in table 0, I rows in 1")
            p = p_e + p_i
        else:
            p = np.array(p_recurrent, dtype=np.float64)  # a copy: later edits of the caller's table do not leak in
            _check_probabilities("p_recurrent", p, (n_pop, n_pop))
        if p_input is not None:
            p_input = np.array(p_input, dtype=np.float64)
            _check_probabilities("p_input", p_input, (n_pop,))
        if not isinstance(n_input, numbers.Integral) or isinstance(n_input, bool) or n_input < 0:
            raise ValueError(f"n_input must be an int >= 0, got {n_input!r}")
        n_input = int(n_input)
        self.full_sizes = tuple(sizes)
        self.sizes = tuple(max(1, round(n * scale)) for n in sizes)
        self.kinds = tuple(kinds)
        self.p_recurrent = p
        self.p_input = p_input
        self.n_input = n_input
        self.scale = float(scale)
        self.seed = int(seed)

    @classmethod
    def barrel(cls, scale: float = 1.0, seed: int = 0) -> ConnectivitySpec:
        """The barrel-column preset: `BARREL_POPULATIONS`, `BARREL_CONNECTIVITY`, 200 thalamic inputs."""
        return cls(
            [p.size for p in BARREL_POPULATIONS],
            [p.kind for p in BARREL_POPULATIONS],
            (BARREL_CONNECTIVITY["excitatory"], BARREL_CONNECTIVITY["inhibitory"]),
            BARREL_CONNECTIVITY["thalamic"],
            n_input=200,
            scale=scale,
            seed=seed,
        )

    @property
    def n(self) -> int:
        """Total number of neurons."""
        return sum(self.sizes)

    @property
    def offsets(self) -> tuple[int, ...]:
        """Start index of every population (``P + 1`` entries, the last is ``n``)."""
        return tuple(np.concatenate([[0], np.cumsum(self.sizes)]).tolist())

    def population_index(self) -> np.ndarray:
        """``(n,)`` int array: the population of every neuron."""
        return np.repeat(np.arange(len(self.sizes)), self.sizes)

    def signs(self) -> torch.Tensor:
        """``(n,)`` float tensor: +1 for neurons of E populations, -1 for I (sign of outgoing synapses)."""
        per_pop = torch.tensor([1.0 if k == "E" else -1.0 for k in self.kinds])
        return per_pop.repeat_interleave(torch.tensor(self.sizes))

    def probability_matrix(self) -> torch.Tensor:
        """``(n, n)`` float64 tensor: p(pre neuron → post neuron) expanded from the population table."""
        idx = torch.from_numpy(self.population_index())
        p = torch.tensor(self.p_recurrent)
        return p[idx][:, idx]

    def masks(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Seeded Bernoulli masks.

        Returns
        -------
        tuple
            ``recurrent``: ``(n, n)`` bool (row = pre, column = post) and ``input``: ``(n_input, n)``
            bool (all ``False`` when ``p_input`` is ``None``).
        """
        gen = torch.Generator().manual_seed(self.seed)
        rec = torch.rand(self.n, self.n, generator=gen, dtype=torch.float64) < self.probability_matrix()
        if self.p_input is None:
            return rec, torch.zeros(self.n_input, self.n, dtype=torch.bool)
        p_in = torch.tensor(self.p_input)[torch.from_numpy(self.population_index())]
        inp = torch.rand(self.n_input, self.n, generator=gen, dtype=torch.float64) < p_in
        return rec, inp

    def expected_synapses(self) -> float:
        """Expected number of recurrent synapses ``Σ_ij p_ij n_i n_j`` at this scale."""
        n = np.asarray(self.sizes, dtype=np.float64)
        return float(n @ self.p_recurrent @ n)

    def synapse_variance(self) -> float:
        """Binomial variance ``Σ_ij p_ij (1 - p_ij) n_i n_j`` of the realized recurrent count."""
        n = np.asarray(self.sizes, dtype=np.float64)
        return float(n @ (self.p_recurrent * (1 - self.p_recurrent)) @ n)
