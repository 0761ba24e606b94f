"""Seeding: one call that makes a run repeatable."""

from __future__ import annotations

import operator
import os
import random

__all__ = ["seed_everything", "torch_generator"]


def seed_everything(seed: int, deterministic: bool = False) -> None:
    """Seed Python's ``random``, NumPy and torch (CPU and every CUDA device).

    Parameters
    ----------
    seed:
        A non-negative integer below 2**32.
    deterministic:
        Also ask torch for deterministic kernels (``torch.use_deterministic_algorithms``) and set
        ``CUBLAS_WORKSPACE_CONFIG`` as cuBLAS requires. Slower on GPU; off by default.
    """
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    if not 0 <= seed < 2**32:
        raise ValueError(f"seed must be in [0, 2**32), got {seed}")
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device
    if deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.benchmark = False


def torch_generator(seed: int, device: str = "cpu"):
    """A fresh ``torch.Generator`` on ``device`` seeded with ``seed`` (no global state touched).

    ``seed`` is an integer in [0, 2**64) (NumPy integers are accepted too).
    """
    import torch

    if isinstance(seed, bool) or not hasattr(seed, "__index__"):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    seed = operator.index(seed)
    if not 0 <= seed < 2**64:  # torch would wrap a negative seed silently
        raise ValueError(f"seed must be in [0, 2**64), got {seed}")
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    return gen
