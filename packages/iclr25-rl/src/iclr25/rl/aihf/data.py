"""Demonstration and preference datasets, and synthetic Bradley-Terry labelling."""

from __future__ import annotations

import itertools
import numbers
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["PreferenceDataset", "Segment", "TrajectoryDataset", "synthetic_preferences"]

Segment = tuple[np.ndarray, np.ndarray]  # (obs (T, ...), acts (T, ...))


def _check_count(owner: str, name: str, value: Any, minimum: int) -> None:
    """TypeError unless ``value`` is an int (NumPy ints too, not bool); ValueError below ``minimum``."""
    # int() would silently truncate 2.5 steps to 2
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{owner}: {name} must be an int, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise ValueError(f"{owner}: {name} must be >= {minimum}, got {value}")


def _check_finite(x: np.ndarray, dataset: str, field: str) -> None:
    # bool as in _as_segment: from_rollouts must accept what a segment accepts (binary actions)
    if not (np.issubdtype(x.dtype, np.number) or x.dtype == bool):
        raise TypeError(f"{dataset}: {field} must be numeric, got dtype {x.dtype}")
    bad = ~np.isfinite(x.reshape(len(x), -1)).all(axis=1) if len(x) else np.zeros(0, bool)
    if bad.any():
        raise ValueError(f"{dataset}: {field} has NaN or inf at index {int(np.flatnonzero(bad)[0])}")


def _as_segment(seg: Segment, dataset: str, i: int) -> Segment:
    if not (isinstance(seg, (tuple, list)) and len(seg) == 2):
        raise TypeError(f"{dataset}: segment {i} must be an (obs, acts) pair, got {type(seg).__name__}")
    obs, acts = np.asarray(seg[0]), np.asarray(seg[1])
    if len(obs) != len(acts) or len(obs) == 0:
        raise ValueError(f"{dataset}: segment {i} needs equal, non-zero lengths; got obs {len(obs)}, acts {len(acts)}")
    for name, x in (("obs", obs), ("acts", acts)):
        if not (np.issubdtype(x.dtype, np.number) or x.dtype == bool):
            raise TypeError(f"{dataset}: {name} of segment {i} must be numeric, got dtype {x.dtype}")
        if not np.isfinite(np.asarray(x, dtype=float)).all():
            raise ValueError(f"{dataset}: {name} of segment {i} has NaN or inf")
    return obs, acts


class TrajectoryDataset:
    """Demonstrations stored flat, split into episodes by ``episode_starts``.

    Parameters
    ----------
    obs : (N, ...) array
        Observations of every step (tabular: integer state ids of shape (N,)).
    acts : (N, ...) array
        Actions of every step.
    episode_starts : (N,) bool array
        True where an episode begins; ``episode_starts[0]`` must be True when N > 0.
    gamma : float, optional
        Discount the demonstrations are meant under; checked against the policy optimizer at fit time.
    """

    def __init__(
        self, obs: np.ndarray, acts: np.ndarray, episode_starts: np.ndarray, gamma: float | None = None
    ) -> None:
        obs, acts, starts = np.asarray(obs), np.asarray(acts), np.asarray(episode_starts, dtype=bool)
        if not (len(obs) == len(acts) == len(starts)):
            raise ValueError(
                f"TrajectoryDataset: obs, acts, episode_starts need equal lengths, got {len(obs)}, {len(acts)}, "
                f"{len(starts)}"
            )
        if starts.ndim != 1:
            raise ValueError(f"TrajectoryDataset: episode_starts must be 1-D, got shape {starts.shape}")
        if len(starts) and not starts[0]:
            raise ValueError("TrajectoryDataset: episode_starts[0] must be True")
        _check_finite(obs, "TrajectoryDataset", "obs")
        _check_finite(acts, "TrajectoryDataset", "acts")
        self.obs, self.acts, self.episode_starts, self.gamma = obs, acts, starts, gamma
        bounds = [*np.flatnonzero(starts).tolist(), len(starts)]
        self._slices = [slice(a, b) for a, b in itertools.pairwise(bounds)]

    @classmethod
    def from_rollouts(cls, rollouts: Sequence[Segment], gamma: float | None = None) -> TrajectoryDataset:
        """Build from a list of ``(obs (T, ...), acts (T, ...))`` episodes."""
        segs = [_as_segment(s, "TrajectoryDataset", i) for i, s in enumerate(rollouts)]
        if not segs:
            return cls(np.zeros(0), np.zeros(0), np.zeros(0, bool), gamma=gamma)
        starts = np.concatenate([np.eye(1, len(o), dtype=bool)[0] for o, _ in segs])
        return cls(np.concatenate([o for o, _ in segs]), np.concatenate([a for _, a in segs]), starts, gamma=gamma)

    def __len__(self) -> int:
        return len(self._slices)

    def episodes(self) -> list[Segment]:
        """The episodes as ``(obs, acts)`` pairs."""
        return [(self.obs[s], self.acts[s]) for s in self._slices]

    @property
    def horizons(self) -> set[int]:
        """Distinct episode lengths."""
        return {s.stop - s.start for s in self._slices}


class PreferenceDataset:
    """Pairwise preferences over segments.

    Parameters
    ----------
    seg_a, seg_b : list of (obs (T, ...), acts (T, ...)) pairs
        The compared segments; lengths may differ between pairs.
    label : (M,) float array in [0, 1]
        Probability that ``a`` is preferred to ``b`` (1 means a ≻ b); soft labels allowed.
    """

    def __init__(self, seg_a: Sequence[Segment], seg_b: Sequence[Segment], label: np.ndarray) -> None:
        label = np.asarray(label, dtype=float).reshape(-1)
        if not (len(seg_a) == len(seg_b) == len(label)):
            raise ValueError(
                f"PreferenceDataset: seg_a, seg_b, label need equal lengths, got {len(seg_a)}, {len(seg_b)}, "
                f"{len(label)}"
            )
        bad = ~np.isfinite(label) | (label < 0) | (label > 1)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(f"PreferenceDataset: label must lie in [0, 1], got {label[i]} at index {i}")
        self.seg_a = [_as_segment(s, "PreferenceDataset.seg_a", i) for i, s in enumerate(seg_a)]
        self.seg_b = [_as_segment(s, "PreferenceDataset.seg_b", i) for i, s in enumerate(seg_b)]
        self.label = label

    def __len__(self) -> int:
        return len(self.label)

    @classmethod
    def empty(cls) -> PreferenceDataset:
        """A dataset with no pairs (selects the ML-IRL special case)."""
        return cls([], [], np.zeros(0))


def synthetic_preferences(
    segments: Sequence[Segment],
    true_return_fn: Callable[[Segment], float],
    temperature: float,
    n_pairs: int,
    seed: int = 0,
) -> PreferenceDataset:
    """Label random pairs of segments with Bradley-Terry preferences on a true return.

    P(a ≻ b) = σ((R(a) − R(b)) / T); hard labels are drawn from that probability.

    Parameters
    ----------
    segments : list of (obs, acts) pairs
        The pool; pairs are drawn uniformly among distinct segments.
    true_return_fn : callable
        Maps one segment to its true return (a finite float; ValueError naming the segment otherwise).
    temperature : float > 0
        The Bradley-Terry temperature T.
    n_pairs : int >= 0
        Number of labelled pairs.
    seed : int
        Seed of the pair and label draws.
    """
    if not temperature > 0:
        raise ValueError(f"synthetic_preferences: temperature must be > 0, got {temperature}")
    if n_pairs < 0:
        raise ValueError(f"synthetic_preferences: n_pairs must be >= 0, got {n_pairs}")
    if n_pairs and len(segments) < 2:
        raise ValueError(f"synthetic_preferences: need at least 2 segments, got {len(segments)}")
    rng = np.random.default_rng(seed)
    returns = np.array([float(true_return_fn(s)) for s in segments])
    bad = ~np.isfinite(returns)
    if bad.any():
        # σ(NaN) compares False with every draw: the pair would silently be labelled b ≻ a.
        k = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"synthetic_preferences: true_return_fn must return finite values, got {returns[k]} for segment {k}"
        )
    i = rng.integers(0, len(segments), n_pairs)
    j = (i + rng.integers(1, len(segments), n_pairs)) % len(segments)  # j != i, uniform over the rest
    # exp overflows to inf for return gaps beyond ~709·T, where σ = 0 is exact; the warning would be noise
    with np.errstate(over="ignore"):
        p = 1.0 / (1.0 + np.exp(-(returns[i] - returns[j]) / temperature))
    label = (rng.random(n_pairs) < p).astype(float)
    return PreferenceDataset([segments[k] for k in i], [segments[k] for k in j], label)
