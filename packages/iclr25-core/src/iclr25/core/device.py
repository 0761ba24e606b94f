"""Device selection: one place that turns a user's device string into a ``torch.device``."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = ["DeviceUnavailableError", "parse_device", "resolve_device"]

_DEVICE_RE = re.compile(r"^(auto|cpu|cuda(?::(\d+))?)$")


class DeviceUnavailableError(RuntimeError):
    """A well-formed device was requested but this machine cannot provide it."""


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
