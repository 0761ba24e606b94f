"""pytest plugin shared by every iclr25 test suite (load with ``-p iclr25.core.testing``).

- registers the project's markers (so ``--strict-markers`` works in any checkout or temp dir);
- skips ``gpu`` tests, with the reason, when CUDA is absent, and ``triton`` tests when Triton is
  not installed;
- on machines without CUDA sets ``TRITON_INTERPRET=1`` *before* test modules import kernels, so
  ``@triton.jit`` kernels are built for the CPU interpreter and can be checked against their
  torch references;
- offers the checks every distribution's test suite runs on itself: :func:`run_readme_examples`
  (the README's python blocks, read from the installed long description, so examples cannot
  rot), :func:`assert_import_is_light` and :func:`assert_cards_belong_to`;
- :class:`Fp32ScalarLauncher`, which makes an interpreter launch see Python float arguments as the
  fp32 values a GPU launch would pass (the interpreter keeps them as float64).

It is opt-in: nothing here runs for users who merely install iclr25-core.
"""

from __future__ import annotations

import os
import re
import struct
from importlib import metadata
from typing import Any

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


def run_readme_examples(distribution: str) -> int:
    """Execute every python block of ``distribution``'s README in a fresh namespace; return the count."""
    blocks = readme_code_blocks(distribution)
    assert blocks, f"the README of {distribution} has no python example"
    for block in blocks:
        exec(compile(block, f"{distribution}/README.md", "exec"), {})
    return len(blocks)


def assert_import_is_light(module: str, forbidden: tuple[str, ...] = ("torch", "scipy")) -> None:
    """Importing ``module`` in a fresh interpreter must not import any of ``forbidden``."""
    import subprocess
    import sys

    code = f"import sys, {module}; print(sorted({set(forbidden)!r} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", f"importing {module} pulled in {out.strip()}"


def assert_cards_belong_to(domain: str) -> None:
    """``iclr25-<domain>`` ships cards, and each names a module inside ``iclr25.<domain>``."""
    from .cards import discover_cards

    cards = [c for c in discover_cards().values() if c.package == f"iclr25-{domain}"]
    assert cards, f"iclr25-{domain} ships no cards"
    for card in cards:
        assert card.module.startswith(f"iclr25.{domain}."), card.module


def run_quick_reproduction(slug: str, out, *, need_baseline: bool = False) -> dict:
    """Run ``slug``'s registered ``--quick`` reproduction on CPU (seed 0) and check it fits its card.

    Every card claim is reported, in card order; claims gated in quick runs carry a bool ``holds``
    and a measured ``ours`` (and a ``baseline`` when ``need_baseline``); the others ``holds=None``.
    Returns the results document for the paper's own further checks.
    """
    from .experiments import registry

    assert slug in registry.slugs(), f"{slug} is not registered (is its distribution installed?)"
    exp = registry.get(slug)
    doc = exp.execute(quick=True, device="cpu", seed=0, out=out)
    assert [row["id"] for row in doc["claims"]] == [c.id for c in exp.card.claims]
    for row, claim in zip(doc["claims"], exp.card.claims, strict=True):
        if claim.gated_in(quick=True):
            assert isinstance(row["holds"], bool), row
            assert row["ours"] is not None, row
            assert not need_baseline or row["baseline"] is not None, row
        else:
            assert row["holds"] is None, row
    return doc


class Fp32ScalarLauncher:
    """Wraps a ``@triton.jit`` kernel so ``launcher[grid](*args)`` rounds Python float arguments to fp32.

    On a GPU, Triton types a Python ``float`` argument as fp32; the CPU interpreter keeps the full
    float64 value, so a kernel that loses precision through a float argument passes interpreter
    tests. Monkeypatch the module's kernel with this wrapper to see what a GPU launch would compute.
    """

    def __init__(self, kernel: Any) -> None:
        self.kernel = kernel

    def __getitem__(self, grid: Any) -> Any:
        def launch(*args: Any, **kwargs: Any) -> Any:
            args = tuple(struct.unpack("f", struct.pack("f", a))[0] if type(a) is float else a for a in args)
            return self.kernel[grid](*args, **kwargs)

        return launch
