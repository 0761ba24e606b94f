"""The real 8×8 handwritten digits used by the reproduction.

scikit-learn bundles the UCI optical-recognition digits (1797 images, 32×32 bitmaps counted in
4×4 blocks to 8×8 values in 0..16) inside its wheel, so they are available offline.
"""

from __future__ import annotations

import torch

__all__ = ["load_digits_dataset"]


def load_digits_dataset() -> tuple[torch.Tensor, torch.Tensor]:
    """The 1797 UCI digits as ``(x, y)``.

    Returns
    -------
    (x, y):
        ``x``: ``(1797, 64)`` float32 in ``[0, 16]`` (8×8 images, row-major); ``y``: ``(1797,)`` int64.
    """
    from sklearn.datasets import load_digits  # a declared dependency; imported lazily to keep import light

    data = load_digits()
    return torch.tensor(data.data, dtype=torch.float32), torch.tensor(data.target, dtype=torch.long)
