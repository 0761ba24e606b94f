"""Device selection: one place that turns a user's device string into a ``torch.device``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = ["DeviceUnavailableError", "compute_dtype", "cpu_threads", "parse_device", "resolve_device"]

_DEVICE_RE = re.compile(r"^(auto|cpu|cuda(?::(\d+))?)$")


class DeviceUnavailableError(RuntimeError):
    """A well-formed device was requested but this machine cannot provide it."""


def compute_dtype(*xs: torch.Tensor | torch.dtype) -> torch.dtype:
    """The dtype to compute in: the widest of the inputs' dtypes, and at least float32.

    float16/bfloat16 (and integer) inputs are lifted to float32, since sums, exponentials and small
    differences lose too much in half precision; float64 is never narrowed, so a ``.double()`` model
    keeps float64 accuracy. Takes tensors or dtypes.
    """
    import torch

    dtype = torch.float32
    for x in xs:
        dtype = torch.promote_types(dtype, x if isinstance(x, torch.dtype) else x.dtype)
    return dtype


def parse_device(spec: str) -> tuple[str, int | None]:
    """Check the syntax of a device string without importing torch.

    Parameters
    ----------
    spec:
        ``"auto"``, ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.

    Returns
    -------
    (kind, index): kind is ``"auto"``, ``"cpu"`` or ``"cuda"``; index is ``None`` unless given.

    Raises
    ------
    ValueError
        When ``spec`` is not one of the accepted forms.
    """
    if not isinstance(spec, str):
        raise TypeError(f"device must be a string such as 'auto', 'cpu' or 'cuda:0', got {spec!r}")
    match = _DEVICE_RE.match(spec.strip().lower())
    if match is None:
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N' (N a GPU index), got {spec!r}")
    kind = match.group(1).split(":")[0]
    index = int(match.group(2)) if match.group(2) is not None else None
    return kind, index


def resolve_device(spec: str | torch.device = "auto") -> torch.device:
    """Turn ``spec`` into a usable ``torch.device``.

    ``"auto"`` picks ``cuda`` when a GPU is visible and ``cpu`` otherwise. Asking for CUDA on a
    machine without it raises :class:`DeviceUnavailableError` (never a silent CPU fallback).
    """
    import torch

    if isinstance(spec, torch.device):
        spec = str(spec)
    kind, index = parse_device(spec)
    if kind == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if kind == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise DeviceUnavailableError(
            f"device {spec!r} was requested but CUDA is not available on this machine "
            f"(torch {torch.__version__}, built with CUDA {torch.version.cuda}); use 'cpu' or 'auto'"
        )
    count = torch.cuda.device_count()
    if index is not None and index >= count:
        raise DeviceUnavailableError(f"device {spec!r} was requested but only {count} CUDA device(s) are visible")
    return torch.device("cuda", index if index is not None else torch.cuda.current_device())


@contextmanager
def cpu_threads(n: int = 1, device: str | torch.device | None = None) -> Iterator[None]:
    """Run a block with ``n`` intra-op CPU threads, then restore the previous count.

    Tiny models (a few thousand parameters, batches of tens) spend more time synchronising
    intra-op threads than computing; one thread was up to 10x faster on a loaded 2-core machine.
    Reproductions wrap their CPU work in this. When ``device`` is given and is not a CPU device the
    thread count is left alone (the work runs on the accelerator).

    Parameters
    ----------
    n:
        Threads to use inside the block (>= 1).
    device:
        The device the block computes on; ``None`` means the CPU.
    """
    import torch

    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int (intra-op threads), got {n!r}")
    if device is not None and torch.device(device).type != "cpu":
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
