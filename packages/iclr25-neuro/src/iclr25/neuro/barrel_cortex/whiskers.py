"""Offline whisker-sweep simulator (replaces the Bullet-physics dataset) and spike conversion.

31 whiskers in rows of 5, 6, 7, 7, 6; objects are signed-distance functions swept past the array
along x. Quasi-static contact per frame: deepest sample below the surface, tapered-beam normal
force plus Coulomb friction, force and torque at 3 nodes per whisker (arc length 0, L/3, 2L/3), then
a damped 2nd-order resonator per whisker. Output layout of the original data: ``[frames, 31, 3, 3]``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["OBJECTS", "WhiskerSweepSimulator", "deprive_whiskers", "make_whisker_dataset", "to_spikes"]

ROWS = (5, 6, 7, 7, 6)
N_WHISKERS = sum(ROWS)
N_NODES = 3
MAX_PENETRATION = 6.0  # mm
FRICTION = 0.3
ZETA = 0.35
ZERO_FLOOR = 1e-5  # official: zero magnitudes replaced before the log


def _is_int(v: Any) -> bool:
    """Python or NumPy integer (not bool)."""
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _is_finite_real(v: Any) -> bool:
    """Finite Python or NumPy real (not bool)."""
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)


def _box(p: np.ndarray, half: Sequence[float], centre: Sequence[float] = (0.0, 0.0, 0.0)) -> np.ndarray:
    q = np.abs(p - np.asarray(centre)) - np.asarray(half)
    return np.linalg.norm(np.maximum(q, 0.0), axis=-1) + np.minimum(q.max(-1), 0.0)


def _helmet(p: np.ndarray) -> np.ndarray:
    radii = np.array([12.0, 10.0, 9.0])
    # scaled-sphere SDF approximation of the ellipsoid, intersected with the half-space z >= -2
    ell = (np.linalg.norm(p / radii, axis=-1) - 1.0) * radii.min()
    return np.maximum(ell, -2.0 - p[..., 2])


def _plane(p: np.ndarray) -> np.ndarray:
    x = np.clip(p[..., 0], -14.0, 14.0)
    fuselage = np.sqrt((p[..., 0] - x) ** 2 + p[..., 1] ** 2 + p[..., 2] ** 2) - 3.5
    wing = _box(p, (3.0, 16.0, 0.8), (1.0, 0.0, 0.0))
    fin = _box(p, (2.5, 0.8, 4.0), (-12.0, 0.0, 3.5))
    return np.minimum(np.minimum(fuselage, wing), fin)


#: Object classes (label = position): name → signed distance (mm) of ``(..., 3)`` object-frame points.
OBJECTS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "helmet": _helmet,
    "box": lambda p: _box(p, (11.0, 8.0, 7.0)),
    "plane": _plane,
}


def _rotation(yaw: float, pitch: float, roll: float) -> np.ndarray:
    cy, sy, cp, sp, cr, sr = (
        math.cos(yaw),
        math.sin(yaw),
        math.cos(pitch),
        math.sin(pitch),
        math.cos(roll),
        math.sin(roll),
    )
    rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
    ry = np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]])
    rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
    return rz @ ry @ rx


class WhiskerSweepSimulator:
    """Deterministic whisker-array simulator.

    Parameters
    ----------
    n_whiskers:
        Must be 31 (rows 5, 6, 7, 7, 6), kept for the interface.
    frames:
        Frames per sweep (110 as in the original data).
    points_per_whisker:
        Samples K along each whisker for the contact test.
    seed:
        Seed of the default pose generator.
    resonate:
        Pass every channel through the per-whisker damped resonator (``False``: raw quasi-static).

    Attributes
    ----------
    base, direction:
        ``(31, 3)`` whisker base (mm) and unit direction; ``length``: ``(31,)`` mm; ``nodes``:
        ``(31, 3, 3)`` node positions; ``omega``: ``(31,)`` resonance frequency per frame.
    """

    def __init__(
        self,
        n_whiskers: int = 31,
        frames: int = 110,
        points_per_whisker: int = 24,
        seed: int = 0,
        resonate: bool = True,
    ) -> None:
        if n_whiskers != N_WHISKERS:
            raise ValueError(f"n_whiskers must be {N_WHISKERS} (rows {ROWS}), got {n_whiskers!r}")
        if not _is_int(frames) or frames < 2:
            raise ValueError(f"frames must be an int >= 2, got {frames!r}")
        if not _is_int(points_per_whisker) or points_per_whisker < 2:
            raise ValueError(f"points_per_whisker must be an int >= 2, got {points_per_whisker!r}")
        self.frames, self.k, self.resonate = int(frames), int(points_per_whisker), resonate
        self.rng = np.random.default_rng(seed)
        base, direction, length = [], [], []
        for r, n in enumerate(ROWS):
            for c in range(n):
                az = math.radians(-35.0 + 70.0 * c / (n - 1))
                el = math.radians(8.0 * (r - 2))
                base.append((-2.0 * c, 0.0, 2.5 * (r - 2)))
                direction.append((math.sin(az) * math.cos(el), math.cos(az) * math.cos(el), math.sin(el)))
                length.append(48.0 - 6.0 * c)
        self.base, self.direction, self.length = np.array(base), np.array(direction), np.array(length)
        self.arc = self.length[:, None] * np.linspace(0.0, 1.0, self.k)[None]  # (31, K)
        self.points = self.base[:, None] + self.arc[..., None] * self.direction[:, None]  # (31, K, 3)
        node_arc = self.length[:, None] * np.arange(N_NODES)[None] / 3.0
        self.node_arc = node_arc
        self.nodes = self.base[:, None] + node_arc[..., None] * self.direction[:, None]
        self.omega = np.clip(0.6 * (30.0 / self.length) ** 2, 0.05, 1.2)

    def random_pose(self, rng: np.random.Generator | None = None) -> dict[str, float]:
        """Draw a pose: yaw, pitch, roll (rad), scale, lateral distance y0, height z0, x start/end (mm)."""
        rng = self.rng if rng is None else rng
        return {
            "yaw": rng.uniform(0, 2 * math.pi),
            "pitch": rng.uniform(-0.25, 0.25),
            "roll": rng.uniform(-0.25, 0.25),
            "scale": rng.uniform(0.8, 1.2),
            "y0": rng.uniform(18.0, 30.0),
            "z0": rng.uniform(-4.0, 4.0),
            "x_start": 55.0 + rng.uniform(-5.0, 5.0),
            "x_end": -70.0 + rng.uniform(-5.0, 5.0),
        }

    def stiffness(self, s: np.ndarray, length: np.ndarray) -> np.ndarray:
        """Tapered-beam bending stiffness ``k(s) = 0.5 (L/48)^4 (L / max(s, L/6))^3``."""
        return 0.5 * (length / 48.0) ** 4 * (length / np.maximum(s, length / 6.0)) ** 3

    def sweep(
        self, shape: int | str, rng: np.random.Generator | None = None, pose: dict[str, float] | None = None,
        return_contacts: bool = False,
    ) -> tuple[np.ndarray, ...]:  # fmt: skip
        """Sweep one object past the array.

        Parameters
        ----------
        shape:
            Object name in `OBJECTS` or its index.
        rng:
            Pose generator (default: the simulator's own).
        pose:
            Explicit pose (keys of `random_pose`); overrides ``rng``.
        return_contacts:
            Also return a dict with ``contact (F, 31)`` bool, ``point (F, 31, 3)``, ``force (F, 31, 3)``
            (contact force on the whisker) and ``pose``.

        Returns
        -------
        tuple
            ``force, torque``: ``(frames, 31, 3, 3)`` float32 (frame, whisker, node, xyz).
        """
        names = list(OBJECTS)
        if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
            if not 0 <= shape < len(names):
                raise KeyError(f"unknown object index {shape}; valid: {dict(enumerate(names))}")
            shape = names[shape]
        if shape not in OBJECTS:
            raise KeyError(f"unknown object {shape!r}; valid names: {names}")
        sdf_obj = OBJECTS[shape]
        pose = self.random_pose(rng) if pose is None else pose
        rot = _rotation(pose["yaw"], pose["pitch"], pose["roll"])
        sc = pose["scale"]
        xs = np.linspace(pose["x_start"], pose["x_end"], self.frames)
        centres = np.stack([xs, np.full_like(xs, pose["y0"]), np.full_like(xs, pose["z0"])], -1)  # (F, 3)
        velocity = np.array([(pose["x_end"] - pose["x_start"]) / (self.frames - 1), 0.0, 0.0])

        def sdf(p: np.ndarray, c: np.ndarray) -> np.ndarray:  # world points (..., 3), centres broadcastable
            return sdf_obj(((p - c) @ rot) / sc) * sc

        d = sdf(self.points[None], centres[:, None, None])  # (F, 31, K)
        deepest = d.argmin(-1)
        contact = d.min(-1) < 0
        f_idx, w_idx = np.nonzero(contact)
        k_idx = deepest[f_idx, w_idx]
        p_c = self.points[w_idx, k_idx]
        c_c = centres[f_idx]
        eps = 1e-3
        grad = np.stack([(sdf(p_c + e, c_c) - sdf(p_c - e, c_c)) / (2 * eps) for e in np.eye(3) * eps], -1)  # (C, 3)
        normal = grad / np.maximum(np.linalg.norm(grad, axis=-1, keepdims=True), 1e-12)
        axis = self.direction[w_idx]
        n_perp = normal - (normal * axis).sum(-1, keepdims=True) * axis
        depth = np.minimum(-d[f_idx, w_idx, k_idx], MAX_PENETRATION)
        s_c = self.arc[w_idx, k_idx]
        f_n = self.stiffness(s_c, self.length[w_idx])[:, None] * depth[:, None] * n_perp
        # friction opposes the whisker's sliding relative to the object: along the object's tangential motion
        v_t = velocity - (normal @ velocity)[:, None] * normal
        t_hat = v_t / np.maximum(np.linalg.norm(v_t, axis=-1, keepdims=True), 1e-12)
        f_contact = f_n + FRICTION * np.linalg.norm(f_n, axis=-1, keepdims=True) * t_hat
        force = np.zeros((self.frames, N_WHISKERS, N_NODES, 3))
        torque = np.zeros_like(force)
        beyond = s_c[:, None] > self.node_arc[w_idx]  # (C, 3): the contact lies beyond node j
        r = p_c[:, None] - self.nodes[w_idx]  # (C, 3, 3)
        force[f_idx, w_idx] = np.where(beyond[..., None], -f_contact[:, None], 0.0)
        torque[f_idx, w_idx] = np.where(beyond[..., None], np.cross(r, f_contact[:, None]), 0.0)
        if self.resonate:
            force, torque = self._resonate(force), self._resonate(torque)
        out: tuple[np.ndarray, ...] = (force.astype(np.float32), torque.astype(np.float32))
        if return_contacts:
            point = np.zeros((self.frames, N_WHISKERS, 3))
            fc = np.zeros_like(point)
            point[f_idx, w_idx], fc[f_idx, w_idx] = p_c, f_contact
            out += ({"contact": contact, "point": point, "force": fc, "pose": pose},)
        return out

    def _resonate(self, u: np.ndarray) -> np.ndarray:
        """Damped resonator ``ẍ = ω²(u − x) − 2ζωẋ`` per whisker, unit step, over frames."""
        om = self.omega[:, None, None]
        x = np.zeros(u.shape[1:])
        v = np.zeros_like(x)
        out = np.empty_like(u)
        for t in range(u.shape[0]):
            v = v + om**2 * (u[t] - x) - 2 * ZETA * om * v
            x = x + v
            out[t] = x
        return out


def make_whisker_dataset(
    n_per_class: int,
    seed: int = 0,
    sweeps: int = 1,
    frames: int = 110,
    classes: Sequence[str] = ("helmet", "box", "plane"),
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Simulate ``n_per_class`` objects per class, each swept ``sweeps`` times with random poses.

    Returns
    -------
    tuple
        ``force, torque``: float32 ``[N, sweeps, frames, 31, 3, 3]``; ``labels``: int64 ``[N]``
        (class order of ``classes``), N = ``n_per_class * len(classes)``, classes interleaved.
    """
    for name, v in (("n_per_class", n_per_class), ("sweeps", sweeps)):
        if not _is_int(v) or v < 0 or (name == "sweeps" and v < 1):
            raise ValueError(f"{name} must be a non-negative int (sweeps >= 1), got {v!r}")
    n_per_class, sweeps = int(n_per_class), int(sweeps)
    if isinstance(classes, str):  # "box" would otherwise be read as the classes "b", "o", "x"
        raise TypeError(f"classes must be a sequence of object names, e.g. ('box',), got the string {classes!r}")
    for c in classes:
        if c not in OBJECTS:
            raise KeyError(f"unknown object {c!r}; valid names: {list(OBJECTS)}")
    sim = WhiskerSweepSimulator(frames=frames, seed=seed)
    rng = np.random.default_rng(seed)
    n = n_per_class * len(classes)
    force = np.zeros((n, sweeps, frames, N_WHISKERS, N_NODES, 3), np.float32)
    torque = np.zeros_like(force)
    labels = np.tile(np.arange(len(classes), dtype=np.int64), n_per_class)
    for i, lab in enumerate(labels):
        for s in range(sweeps):
            force[i, s], torque[i, s] = sim.sweep(classes[lab], rng)
    return force, torque, labels


def _magnitude(x: np.ndarray) -> np.ndarray:
    m = np.linalg.norm(np.asarray(x, dtype=np.float64), axis=-1)
    return np.where(m == 0, ZERO_FLOOR, m)


def _check_pair(force: Any, torque: Any) -> None:
    for name, a in (("force", force), ("torque", torque)):
        if not isinstance(a, np.ndarray):
            raise TypeError(f"{name} must be a numpy array [N, sweeps, frames, 31, 3, 3], got {type(a).__name__}")
        if a.ndim != 6 or a.shape[-3:] != (N_WHISKERS, N_NODES, 3):
            raise ValueError(f"{name} must have shape [N, sweeps, frames, 31, 3, 3], got {a.shape}")
    if force.shape != torque.shape:
        raise ValueError(f"force and torque shapes differ: {force.shape} vs {torque.shape}")


def to_spikes(
    force: np.ndarray,
    torque: np.ndarray,
    dt: int = 5,
    c_f: float | None = None,
    c_t: float | None = None,
    generator: np.random.Generator | int | None = None,
) -> tuple[np.ndarray, dict[str, Any]]:
    """Convert force/torque to Bernoulli spike trains (RSNN_bfd's conversion).

    ``p = sigmoid(log‖F‖ − c_f)`` and ``sigmoid(log‖τ‖ − c_t)`` (norm over xyz, zeros → 1e-5), each
    frame repeated ``dt`` times, then Bernoulli. ``c_f=2, c_t=4`` is the official formula; ``None``
    uses the log of the median magnitude above the 1e-5 floor of these inputs (the official
    constants are tied to Bullet's units).

    Parameters
    ----------
    force, torque:
        ``[N, sweeps, frames, 31, 3, 3]``; not modified.
    dt:
        Repeats per frame (int >= 1).
    c_f, c_t:
        Finite centres of the force / torque sigmoid, or ``None`` (from the data, see above).
    generator:
        NumPy generator or seed for the Bernoulli draws.

    Returns
    -------
    tuple
        ``spikes``: float32 ``[N, 2, sweeps, frames·dt, 93]`` (channel = 3·whisker + node) and
        ``meta``: ``{"c_f", "c_t", "rate_force", "rate_torque"}``.
    """
    _check_pair(force, torque)
    if not _is_int(dt) or dt < 1:
        raise ValueError(f"dt must be an int >= 1, got {dt!r}")
    dt = int(dt)
    for name, c in (("c_f", c_f), ("c_t", c_t)):
        # a NaN centre gives p = NaN (no spikes at all), an infinite one p = 0 or 1, all silently
        if c is not None and not _is_finite_real(c):
            raise ValueError(f"{name} must be a finite float or None, got {c!r}")
    for name, a in (("force", force), ("torque", torque)):
        # a NaN magnitude gives p = NaN, which Bernoulli sampling would silently turn into no spikes
        if not np.isfinite(a).all():
            raise ValueError(f"{name} contains NaN or Inf")
    mf, mt = _magnitude(force), _magnitude(torque)  # [N, S, F, 31, 3]

    def centre(m: np.ndarray, c: float | None) -> float:
        if c is not None:
            return float(c)
        nz = m[m > ZERO_FLOOR]
        return float(np.log(np.median(nz))) if nz.size else 0.0

    c_f, c_t = centre(mf, c_f), centre(mt, c_t)
    rng = generator if isinstance(generator, np.random.Generator) else np.random.default_rng(generator)
    out = []
    for m, c in ((mf, c_f), (mt, c_t)):
        p = 1.0 / (1.0 + np.exp(-(np.log(m) - c)))
        p = np.repeat(p.reshape(*p.shape[:3], N_WHISKERS * N_NODES), dt, axis=2)  # [N, S, F·dt, 93]
        out.append((rng.random(p.shape) < p).astype(np.float32))
    spikes = np.stack(out, axis=1)
    meta = {"c_f": c_f, "c_t": c_t, "rate_force": float(out[0].mean()) if out[0].size else 0.0}
    meta["rate_torque"] = float(out[1].mean()) if out[1].size else 0.0
    return spikes, meta


def deprive_whiskers(
    force: np.ndarray, torque: np.ndarray, whisker_idx: Sequence[int]
) -> tuple[np.ndarray, np.ndarray]:
    """Zero the force and torque of the given whiskers (copies; inputs are never modified).

    Parameters
    ----------
    force, torque:
        ``[N, sweeps, frames, 31, 3, 3]``.
    whisker_idx:
        Distinct whisker indices in ``0..30``: a sequence, NumPy array or tensor of ints.
    """
    _check_pair(force, torque)
    if hasattr(whisker_idx, "tolist"):  # NumPy arrays and tensors iterate as 0-d arrays, not ints
        whisker_idx = whisker_idx.tolist()
    if isinstance(whisker_idx, (numbers.Number, str)):
        raise TypeError(f"whisker_idx must be a sequence of whisker indices, e.g. [3], got {whisker_idx!r}")
    # int(1.7) would silently deprive whisker 1: accept only integral values (ints, numpy ints)
    bad = [i for i in whisker_idx if isinstance(i, bool) or not isinstance(i, (int, np.integer))]
    if bad:
        raise ValueError(f"whisker_idx must hold integers, got {bad}")
    idx = [int(i) for i in whisker_idx]
    if any(not 0 <= i < N_WHISKERS for i in idx):
        raise ValueError(f"whisker_idx must lie in 0..{N_WHISKERS - 1}, got {idx}")
    if len(set(idx)) != len(idx):
        raise ValueError(f"whisker_idx must not contain duplicates, got {idx}")
    f, t = force.copy(), torque.copy()
    f[..., idx, :, :] = 0.0
    t[..., idx, :, :] = 0.0
    return f, t
