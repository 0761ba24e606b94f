"""Lazy submodule access for the domain packages.

``import iclr25.compress`` must not import every paper (and torch with them); each domain's
``__init__`` lists its submodules and lets attribute access import them on first use::

    __getattr__, __dir__, __all__ = attach(__name__, ["ltc", "auxt"])
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["attach"]


def attach(package: str, submodules: Sequence[str]) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """Return ``(__getattr__, __dir__, __all__)`` for ``package`` exposing ``submodules`` lazily."""
    names = sorted(set(submodules))

    def __getattr__(name: str) -> Any:
        if name in names:
            return importlib.import_module(f"{package}.{name}")
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return list(names)

    return __getattr__, __dir__, list(names)
