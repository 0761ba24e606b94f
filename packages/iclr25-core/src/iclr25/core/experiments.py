"""The experiment registry behind ``iclr25 reproduce``.

Each paper registers one small-scale reproduction. Its claims and the paper's figures come from
the paper's card (:mod:`iclr25.core.cards`), never from a second hand-written copy; the
experiment only measures::

    # iclr25/compress/ltc/experiment.py
    from iclr25.core.experiments import Experiment, Measurement, Outcome

    def run(quick: bool, device, seed: int, out) -> Outcome:
        ...train NTC and LTC with the same budget...
        return Outcome(
            claims={"ltc_gap_db": Measurement(ours=0.91, baseline=1.56, holds=0.91 <= 1.15)},
            extra={"steps": 400},
        )

    experiment = Experiment("ltc", run)

and its distribution declares it in ``pyproject.toml``::

    [project.entry-points."iclr25.experiments"]
    ltc = "iclr25.compress.ltc.experiment:experiment"

The registry lists slugs from entry-point metadata alone, so nothing is imported until an
experiment is actually requested.
"""

from __future__ import annotations

import contextlib
import math
import os
import platform
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from .cards import Card, discover_cards

__all__ = [
    "ENTRY_POINT_GROUP",
    "Experiment",
    "ExperimentError",
    "Measurement",
    "Outcome",
    "Registry",
    "registry",
]

ENTRY_POINT_GROUP = "iclr25.experiments"
Number = float | int | str | None


class ExperimentError(RuntimeError):
    """An experiment is missing, misregistered, or returned results that do not fit its card."""


@dataclass(frozen=True)
class Measurement:
    """What one run measured for one claim.

    Attributes
    ----------
    ours:
        Our figure for the claim's metric.
    baseline:
        The baseline's figure, measured in the same run with the same budget (``None`` when the
        claim has no baseline).
    holds:
        Whether the claim's direction holds at this scale; must be a bool for gated claims and
        ``None`` for report-only ones.
    note:
        Optional short remark shown in results.json (e.g. the tolerance used).
    """

    ours: Number
    baseline: Number = None
    holds: bool | None = None
    note: str = ""


@dataclass(frozen=True)
class Outcome:
    """The return value of an experiment's ``run``: measurements by claim id, plus free-form extras."""

    claims: Mapping[str, Measurement]
    extra: Mapping[str, Any] = field(default_factory=dict)


RunFn = Callable[..., Outcome]


class Experiment:
    """A registered reproduction.

    Parameters
    ----------
    slug:
        The paper's slug; must match a card.
    run:
        ``run(quick: bool, device: torch.device, seed: int, out: pathlib.Path) -> Outcome``.
    card:
        The card to read claims from. Default: the installed card with this slug, looked up on
        first use. Tests pass one explicitly.
    """

    def __init__(self, slug: str, run: RunFn, *, card: Card | None = None) -> None:
        if not callable(run):
            raise TypeError(f"run must be callable, got {type(run).__name__}")
        self.slug = slug
        self._run = run
        self._card = card
        if card is not None and card.slug != slug:
            raise ValueError(f"card slug {card.slug!r} does not match experiment slug {slug!r}")

    @property
    def card(self) -> Card:
        if self._card is None:
            cards = discover_cards()
            if self.slug not in cards:
                raise ExperimentError(f"experiment {self.slug!r} has no installed card")
            self._card = cards[self.slug]
        return self._card

    @property
    def title(self) -> str:
        return self.card.title

    def __repr__(self) -> str:
        return f"Experiment({self.slug!r})"

    def execute(self, *, quick: bool, device: Any, seed: int, out: str | Path) -> dict[str, Any]:
        """Run and return the results document (the content of results.json).

        Raises
        ------
        ExperimentError
            When the run reports a claim the card does not have, misses a gated claim, or gives a
            non-bool ``holds`` for a gated claim.
        """
        card = self.card
        start = time.perf_counter()
        outcome = self._run(quick=quick, device=device, seed=seed, out=Path(out))
        seconds = time.perf_counter() - start
        if not isinstance(outcome, Outcome):
            raise ExperimentError(f"{self.slug}: run must return an Outcome, got {type(outcome).__name__}")
        known = {c.id for c in card.claims}
        unknown = sorted(set(outcome.claims) - known)
        if unknown:
            raise ExperimentError(f"{self.slug}: run reported claims {unknown} that the card lacks ({sorted(known)})")
        rows = []
        for claim in card.claims:
            m = outcome.claims.get(claim.id)
            gated = claim.gated_in(quick)
            if m is None:
                if gated:
                    raise ExperimentError(f"{self.slug}: gated claim {claim.id!r} was not measured")
                m = Measurement(ours=None, note="gated in full runs only" if claim.gated else "")
            if gated and not isinstance(m.holds, bool):
                raise ExperimentError(f"{self.slug}: gated claim {claim.id!r} needs holds=True/False, got {m.holds!r}")
            if not claim.gated and m.holds is not None:
                raise ExperimentError(f"{self.slug}: report-only claim {claim.id!r} must have holds=None")
            row = {
                "id": claim.id,
                "text": claim.text,
                "metric": claim.metric,
                "paper": claim.paper,
                "ours": _plain(m.ours),
                "baseline": _plain(m.baseline),
                "holds": m.holds,
            }
            if m.note:
                row["note"] = m.note
            rows.append(row)
        return {
            "slug": self.slug,
            "title": card.title,
            "quick": bool(quick),
            "device": str(device),
            "seed": int(seed),
            "seconds": round(seconds, 3),
            "versions": versions(),
            "platform": platform_info(device),
            "claims": rows,
            "extra": dict(outcome.extra),
        }


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if hasattr(value, "item"):  # 0-d tensor / NumPy scalar
        value = value.item()
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    return value


# Third-party distributions whose version can move a reproduction's figures (a MuJoCo release changes
# HalfCheetah trajectories bit for bit, and ARS amplifies that into different returns): recorded when installed.
FIGURE_DEPENDENCIES = (
    "torch",
    "numpy",
    "scipy",
    "mujoco",
    "gymnasium",
    "compressai",
    "torch-geometric",
    "torchsde",
    "cvxpy",
    "transformers",
)


def versions() -> dict[str, str]:
    """Python, the installed :data:`FIGURE_DEPENDENCIES` and every installed iclr25 distribution, for results.json."""
    found = {"python": platform.python_version()}
    for dist in FIGURE_DEPENDENCIES:
        with contextlib.suppress(metadata.PackageNotFoundError):
            found[dist] = metadata.version(dist)
    for dist in metadata.distributions():
        name = (dist.metadata["Name"] or "").lower()
        if name.startswith("iclr25-"):
            found[name] = dist.version
    return dict(sorted(found.items()))


# Environment variables that change which CPU kernels run or how they block their loops (and so the
# last bits of every float result): set by a user who wants figures recorded on another host, or by
# the host itself, recorded when set. OPENBLAS_L2_SIZE overrides the cache size OpenBLAS reads from
# cpuid, which sets its GEMM block sizes.
KERNEL_SELECTION_VARIABLES = (
    "ATEN_CPU_CAPABILITY",
    "CUBLAS_WORKSPACE_CONFIG",
    "MKL_CBWR",
    "MKL_ENABLE_INSTRUCTIONS",
    "MKL_NUM_THREADS",
    "NPY_DISABLE_CPU_FEATURES",
    "OMP_NUM_THREADS",
    "OPENBLAS_CORETYPE",
    "OPENBLAS_L2_SIZE",
    "OPENBLAS_NUM_THREADS",
)


def _cpu_model() -> str:
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def platform_info(device: Any = None) -> dict[str, Any]:
    """The host facts a reproduction's figures can depend on, for results.json.

    Seeded runs repeat bit for bit on one host, but BLAS libraries and torch pick CPU kernels by
    instruction set at load time: NumPy's OpenBLAS runs different kernels on an AVX-512 host
    ("SkylakeX") and on an AVX2 one ("Haswell"), which round differently, and chaotic training loops
    (ARS on MuJoCo, for one) turn that into different returns. Recording the kernels lets a reader
    tell a code change from a host change. Returns ``machine``, ``system``, ``cpu``, ``cpu_count``,
    ``torch_threads``, ``torch_cpu_capability``, ``blas`` (the BLAS/OpenMP libraries loaded in this
    process as ``"internal_api version architecture"`` when ``threadpoolctl`` can inspect them),
    ``env`` (the :data:`KERNEL_SELECTION_VARIABLES` that are set) and, for a CUDA ``device``, ``gpu``.
    """
    import torch

    info: dict[str, Any] = {
        "machine": platform.machine(),
        "system": platform.system(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch_cpu_capability": getattr(torch.backends.cpu, "get_cpu_capability", lambda: None)(),
    }
    try:
        import threadpoolctl
    except ImportError:  # a dependency of iclr25-core; a broken install still gets its results.json
        info["blas"] = None
    else:
        try:
            libs = threadpoolctl.threadpool_info()
        except Exception as err:  # metadata must not fail a run that has finished
            info["blas"] = [f"not inspectable: {type(err).__name__}: {err}"]
        else:
            info["blas"] = sorted(
                " ".join(str(lib[k]) for k in ("internal_api", "version", "architecture") if lib.get(k)) for lib in libs
            )
    info["env"] = {k: os.environ[k] for k in KERNEL_SELECTION_VARIABLES if k in os.environ}
    dev = torch.device(device) if isinstance(device, (str, torch.device)) else None
    if dev is not None and dev.type == "cuda" and torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(dev)
    return info


class Registry:
    """Slug -> experiment, from the ``iclr25.experiments`` entry points plus explicit registrations."""

    def __init__(self, use_entry_points: bool = True) -> None:
        self._use_entry_points = use_entry_points
        self._explicit: dict[str, Experiment] = {}
        self._loaded: dict[str, Experiment] = {}

    def _entry_points(self) -> dict[str, metadata.EntryPoint]:
        if not self._use_entry_points:
            return {}
        return {ep.name: ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}

    def register(self, experiment: Experiment) -> Experiment:
        """Add an experiment by hand (tests, notebooks); it shadows an entry point of the same slug."""
        if not isinstance(experiment, Experiment):
            raise TypeError(f"expected an Experiment, got {type(experiment).__name__}")
        self._explicit[experiment.slug] = experiment
        return experiment

    def unregister(self, slug: str) -> None:
        self._explicit.pop(slug, None)
        self._loaded.pop(slug, None)

    def slugs(self) -> list[str]:
        """Registered slugs, without importing any experiment."""
        return sorted(set(self._entry_points()) | set(self._explicit))

    def __contains__(self, slug: object) -> bool:
        return slug in self.slugs()

    def get(self, slug: str) -> Experiment:
        """Load the experiment for ``slug`` (this imports its module)."""
        if slug in self._explicit:
            return self._explicit[slug]
        if slug in self._loaded:
            return self._loaded[slug]
        eps = self._entry_points()
        if slug not in eps:
            raise KeyError(f"no experiment registered for {slug!r}; registered: {self.slugs()}")
        obj = eps[slug].load()
        if not isinstance(obj, Experiment) or obj.slug != slug:
            raise ExperimentError(
                f"entry point {slug!r} = {eps[slug].value!r} must name an Experiment with slug {slug!r}, got {obj!r}"
            )
        self._loaded[slug] = obj
        return obj


registry = Registry()
