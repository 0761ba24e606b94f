"""Timing for the ratio benchmarks in each package's ``benchmarks/`` folder.

Every benchmark in this repository reports ratios measured in one run (ours vs the plain-torch
path or the official code), never absolute thresholds. :func:`time_call` is the one timer they
share, so that every ratio is taken the same way: warm-up calls first (Triton compiles on the
first call, cuDNN picks algorithms), a device synchronisation around each timed repeat (CUDA
launches are asynchronous, so a timer without it measures the launch, not the work), and the
median over repeats (robust to a shared machine's stalls)::

    from iclr25.core.bench import speedup, time_call

    ref = time_call(lambda: model_ref(x).sum().backward(), device="cuda", repeats=20)
    fused = time_call(lambda: model_fused(x).sum().backward(), device="cuda", repeats=20)
    print(f"{ref.median * 1e3:.2f} ms vs {fused.median * 1e3:.2f} ms: {speedup(ref, fused):.2f}x")
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

__all__ = ["Timing", "speedup", "synchronize", "time_call"]


@dataclass(frozen=True)
class Timing:
    """Seconds per call of each timed repeat, and the CUDA peak memory of the timed calls.

    Attributes
    ----------
    seconds:
        One entry per repeat: the repeat's wall time divided by its number of calls.
    peak_mib:
        Peak CUDA memory allocated during the timed calls, above what was allocated before them,
        in MiB; ``None`` on CPU or when memory was not measured.
    """

    seconds: tuple[float, ...]
    peak_mib: float | None = None

    @property
    def median(self) -> float:
        """Median seconds per call over the repeats (what benchmarks report)."""
        return statistics.median(self.seconds)

    @property
    def min(self) -> float:
        """Fastest repeat, seconds per call."""
        return min(self.seconds)

    @property
    def per_second(self) -> float:
        """Calls per second at the median (``inf`` for a call too fast for the clock)."""
        return 1.0 / self.median if self.median > 0 else float("inf")


def _as_device(device: str | torch.device | None) -> torch.device | None:
    if device is None:
        return None
    import torch

    if isinstance(device, str):
        try:
            return torch.device(device)
        except RuntimeError as err:
            msg = f"device must be a torch device or a string such as 'cpu' or 'cuda:0'; got {device!r}"
            raise ValueError(msg) from err
    if isinstance(device, torch.device):
        return device
    raise TypeError(f"device must be a torch.device, a string or None; got {type(device).__name__}")


def synchronize(device: str | torch.device | None) -> None:
    """Wait for queued work on ``device`` (CUDA only; a no-op on CPU and for ``None``)."""
    dev = _as_device(device)
    if dev is not None and dev.type == "cuda":
        import torch

        torch.cuda.synchronize(dev)


def _check_count(name: str, value: Any, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{name} must be an int >= {least}; got {value!r}")
    return value


def time_call(
    fn: Callable[[], Any],
    *,
    device: str | torch.device | None = None,
    warmup: int = 1,
    repeats: int = 5,
    number: int = 1,
    memory: bool = False,
    clock: Callable[[], float] = time.perf_counter,
) -> Timing:
    """Time ``fn()``: ``warmup`` untimed calls, then ``repeats`` timed repeats of ``number`` calls each.

    Parameters
    ----------
    fn:
        The work to time, called with no arguments; its result is ignored.
    device:
        The device ``fn`` runs on. For CUDA the device is synchronised before and after each timed
        repeat; ``None`` or a CPU device never synchronises.
    warmup:
        Untimed calls before timing (>= 0): compilation, autotuning and allocator warm-up.
    repeats:
        Timed repeats (>= 1); :attr:`Timing.median` is the figure to report.
    number:
        Calls per repeat (>= 1); raise it for calls much shorter than a millisecond.
    memory:
        Also record the CUDA peak memory of the timed calls (:attr:`Timing.peak_mib`).
    clock:
        Seconds counter; the default is :func:`time.perf_counter`.

    Returns
    -------
    Timing
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable with no arguments; got {type(fn).__name__}")
    _check_count("warmup", warmup, 0)
    _check_count("repeats", repeats, 1)
    _check_count("number", number, 1)
    dev = _as_device(device)
    cuda = dev is not None and dev.type == "cuda"
    for _ in range(warmup):
        fn()
    base = 0
    if cuda and memory:
        import torch

        torch.cuda.synchronize(dev)
        base = torch.cuda.memory_allocated(dev)
        torch.cuda.reset_peak_memory_stats(dev)
    seconds = []
    for _ in range(repeats):
        synchronize(dev)
        t0 = clock()
        for _ in range(number):
            fn()
        synchronize(dev)
        seconds.append((clock() - t0) / number)
    peak = None
    if cuda and memory:
        import torch

        peak = (torch.cuda.max_memory_allocated(dev) - base) / 2**20
    return Timing(tuple(seconds), peak)


def speedup(baseline: Timing, ours: Timing) -> float:
    """How many times faster ``ours`` is than ``baseline``: the ratio of their median times."""
    for name, t in (("baseline", baseline), ("ours", ours)):
        if not isinstance(t, Timing):
            raise TypeError(f"{name} must be a Timing from time_call; got {type(t).__name__}")
    if ours.median <= 0:
        raise ValueError("ours has a median time of 0: raise number= so each repeat spans several clock ticks")
    return baseline.median / ours.median
