"""pytest plugin shared by every iclr25 test suite (load with ``-p iclr25.core.testing``).

- registers the project's markers (so ``--strict-markers`` works in any checkout or temp dir);
- skips ``gpu`` tests, with the reason, when CUDA is absent, and ``triton`` tests when Triton is
  not installed;
- on machines without CUDA sets ``TRITON_INTERPRET=1`` *before* test modules import kernels, so
  ``@triton.jit`` kernels are built for the CPU interpreter and can be checked against their
  torch references;
- offers :func:`readme_code_blocks`, which reads an installed distribution's README (its
  long description) so each package can run its README examples as tests.

It is opt-in: nothing here runs for users who merely install iclr25-core.
"""

from __future__ import annotations

import os
import re
from importlib import metadata

import pytest

MARKERS = (
    "slow: long checks, off by default (run with -m slow)",
    "gpu: needs CUDA; skipped with a reason when CUDA is absent",
    "triton: runs Triton kernels under TRITON_INTERPRET=1 on CPU",
    "repro: runs a quick reproduction",
    "cross: cross-package tests (top-level tests/)",
    "bench: ratio benchmarks, never part of the default run",
)


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def pytest_configure(config: pytest.Config) -> None:
    for line in MARKERS:
        config.addinivalue_line("markers", line)
    if not _cuda_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from .triton import triton_available

    cuda = _cuda_available()
    triton_ok = triton_available()
    for item in items:
        if item.get_closest_marker("gpu") and not cuda:
            item.add_marker(pytest.mark.skip(reason="needs CUDA; torch.cuda.is_available() is False here"))
        if item.get_closest_marker("triton") and not triton_ok:
            item.add_marker(pytest.mark.skip(reason="needs triton (pip install 'iclr25-core[triton]')"))


_BLOCK_RE = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def readme_code_blocks(distribution: str) -> list[str]:
    """The ```python blocks of an installed distribution's README, in order."""
    meta = metadata.metadata(distribution)
    text = meta.get_payload() or meta.get("Description") or ""  # type: ignore[attr-defined]
    return [m.group(1) for m in _BLOCK_RE.finditer(text)]
