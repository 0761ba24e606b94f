"""Triton availability and backend dispatch.

Papers with a hot loop keep a readable torch reference (the spec) and a Triton kernel, and expose
one public op with ``backend="auto" | "reference" | "triton"``. :class:`BackendOp` holds that
choice in one place::

    op = BackendOp("lif_multistep", [
        Backend("triton", lif_triton, supports=lif_triton_limits, uses_triton=True),
        Backend("reference", lif_reference),
    ])
    spikes = op(x, tau=10.0)                      # auto: first backend that accepts the input
    spikes = op(x, tau=10.0, backend="reference")

``auto`` takes the first backend whose ``supports(*args, **kwargs)`` returns no reasons. An
explicit backend that refuses raises :class:`BackendUnavailableError` listing its reasons.

Interpreter mode: with ``TRITON_INTERPRET=1`` set *before* a kernels module is imported,
``@triton.jit`` builds interpreted kernels that run on CPU tensors. That is how the test suite
checks kernels against their references without a GPU. ``auto`` never picks the interpreter
(it is orders of magnitude slower than torch); ask for ``backend="triton"`` explicitly.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Backend",
    "BackendOp",
    "BackendUnavailableError",
    "interpret_mode",
    "triton_available",
    "triton_reasons",
]


class BackendUnavailableError(RuntimeError):
    """An explicitly requested backend cannot run on the given input."""


@functools.cache
def triton_available() -> bool:
    """True when the ``triton`` package imports (it need not have a GPU to target)."""
    try:
        import triton
        import triton.language  # noqa: F401
    except Exception:  # ImportError, or a broken install raising at import
        return False
    return True


def interpret_mode() -> bool:
    """True when ``TRITON_INTERPRET=1``: Triton kernels run in its CPU interpreter."""
    return os.environ.get("TRITON_INTERPRET", "0").strip() == "1"


def _tensors(values: Sequence[Any]) -> list[Any]:
    import torch

    return [v for v in values if isinstance(v, torch.Tensor)]


def triton_reasons(*values: Any, allow_interpreter: bool = True) -> list[str]:
    """Reasons Triton kernels cannot run on these values (empty list: they can).

    Parameters
    ----------
    *values:
        The op's arguments; the tensors among them decide the device.
    allow_interpreter:
        Whether CPU tensors under ``TRITON_INTERPRET=1`` are acceptable (only when the caller asked
        for Triton explicitly).
    """
    reasons: list[str] = []
    if not triton_available():
        reasons.append("triton is not installed (pip install 'iclr25-core[triton]')")
        return reasons
    devices = {t.device.type for t in _tensors(values)}
    if interpret_mode():
        if not allow_interpreter:
            reasons.append(
                "TRITON_INTERPRET=1 would run the kernel in the slow CPU interpreter; "
                "auto never picks it, ask for backend='triton'"
            )
        elif devices - {"cpu"}:
            reasons.append(f"under TRITON_INTERPRET=1 tensors must be on the CPU, got {sorted(devices)}")
    elif devices != {"cuda"}:
        reasons.append(
            f"Triton kernels need CUDA tensors (or TRITON_INTERPRET=1 on CPU), got {sorted(devices) or 'no tensors'}"
        )
    return reasons


def _accepts_everything(*args: Any, **kwargs: Any) -> list[str]:
    return []


@dataclass(frozen=True)
class Backend:
    """One implementation of an op.

    Attributes
    ----------
    name:
        What users pass as ``backend=``.
    fn:
        The implementation, called with the op's arguments.
    supports:
        ``supports(*args, **kwargs) -> list[str]``: reasons this backend refuses the input
        (dtype, shape limits, ...); an empty list means it accepts.
    uses_triton:
        Adds :func:`triton_reasons` (device, installation, interpreter rules) to ``supports``.
    """

    name: str
    fn: Callable[..., Any]
    supports: Callable[..., list[str]] = field(default=_accepts_everything)
    uses_triton: bool = False

    def reasons(self, args: Sequence[Any], kwargs: dict[str, Any], explicit: bool) -> list[str]:
        found: list[str] = []
        if self.uses_triton:
            found += triton_reasons(*args, *kwargs.values(), allow_interpreter=explicit)
            if found:  # limits of the kernel are moot when Triton cannot run at all
                return found
        return found + list(self.supports(*args, **kwargs))


class BackendOp:
    """A public op with several backends; see the module docstring."""

    def __init__(self, name: str, backends: Sequence[Backend]) -> None:
        if not backends:
            raise ValueError("backends must name at least one Backend")
        names = [b.name for b in backends]
        if len(set(names)) != len(names) or "auto" in names:
            raise ValueError(f"backend names must be unique and not 'auto', got {names}")
        self.name = name
        self.backends = tuple(backends)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(b.name for b in self.backends)

    def select(self, *args: Any, backend: str = "auto", **kwargs: Any) -> Backend:
        """The backend that would run for these arguments."""
        if backend == "auto":
            refused: list[str] = []
            for candidate in self.backends:
                why = candidate.reasons(args, kwargs, explicit=False)
                if not why:
                    return candidate
                refused.append(f"{candidate.name}: {'; '.join(why)}")
            raise BackendUnavailableError(f"{self.name}: no backend accepts this input ({' | '.join(refused)})")
        for candidate in self.backends:
            if candidate.name == backend:
                why = candidate.reasons(args, kwargs, explicit=True)
                if why:
                    raise BackendUnavailableError(
                        f"{self.name}: backend {backend!r} cannot run this input: " + "; ".join(why)
                    )
                return candidate
        raise ValueError(f"backend must be 'auto' or one of {list(self.names)}, got {backend!r}")

    def __call__(self, *args: Any, backend: str = "auto", **kwargs: Any) -> Any:
        return self.select(*args, backend=backend, **kwargs).fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"BackendOp({self.name!r}, backends={list(self.names)})"
