"""iclr25.core — shared plumbing for every iclr25 distribution.

Submodules are imported on demand so that ``import iclr25.core`` (and the ``iclr25 list``
command) stay free of torch:

- :mod:`iclr25.core.device`      resolve ``"auto" | "cpu" | "cuda[:n]"`` to a ``torch.device``
- :mod:`iclr25.core.seed`        seed torch / numpy / random, optional deterministic mode
- :mod:`iclr25.core.triton`      is Triton usable here; backend dispatch (Triton kernel vs torch reference)
- :mod:`iclr25.core.io`          atomic writes, JSON and safetensors helpers
- :mod:`iclr25.core.progress`    tqdm wrapper, silent when not a TTY or when ``ICLR25_NO_PROGRESS=1``
- :mod:`iclr25.core.cards`       paper cards (the single source of truth for claims)
- :mod:`iclr25.core.experiments` the experiment registry behind ``iclr25 reproduce``
- :mod:`iclr25.core.bench`       the shared timer of the ratio benchmarks (warm-up, sync, median)
- :mod:`iclr25.core.modes`       eval mode for a block, every submodule's train/eval flag restored after
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_SUBMODULES = ("bench", "cards", "device", "experiments", "io", "lazy", "modes", "progress", "seed", "triton")
__all__ = ["__version__", *_SUBMODULES]


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
