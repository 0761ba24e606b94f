"""Orthonormal 2-D Haar transform on feature maps, subbands stacked on channels.

For each 2×2 block ``(a b; c d)`` of every channel::

    LL = (a + b + c + d) / 2      LH = (a - b + c - d) / 2
    HL = (a + b - c - d) / 2      HH = (a - b - c + d) / 2

The four outputs form an orthonormal basis of the block, so the transform preserves energy and
its inverse is its transpose. Channels are subband-major: ``[LL(all C), LH(all C), HL, HH]``,
the order the AuxT scale initialisation (0.5, 0.5, 0.5, 0) refers to.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["haar_dwt2d", "haar_filters", "haar_idwt2d"]


def haar_filters(*, device: torch.device | str | None = None, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The four 2×2 Haar analysis filters in the order LL, LH, HL, HH.

    Returns
    -------
    torch.Tensor
        ``(4, 2, 2)``; filter ``k`` applied to a block ``(a b; c d)`` gives subband ``k``.
    """
    f = torch.tensor(
        [
            [[1.0, 1.0], [1.0, 1.0]],  # LL
            [[1.0, -1.0], [1.0, -1.0]],  # LH: horizontal detail (column difference)
            [[1.0, 1.0], [-1.0, -1.0]],  # HL: vertical detail (row difference)
            [[1.0, -1.0], [-1.0, 1.0]],  # HH
        ],
        device=device,
        dtype=dtype,
    )
    return f / 2.0


def _check_map(x: torch.Tensor, name: str) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 4:
        raise ValueError(f"{name} must be 4-D (batch, channels, H, W), got shape {tuple(x.shape)}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")


def haar_dwt2d(x: torch.Tensor) -> torch.Tensor:
    """One level of the orthonormal 2-D Haar DWT.

    Parameters
    ----------
    x:
        ``(B, C, H, W)`` float tensor with even ``H`` and ``W``.

    Returns
    -------
    torch.Tensor
        ``(B, 4C, H/2, W/2)``: ``[LL, LH, HL, HH]`` stacked subband-major on the channel axis.
    """
    _check_map(x, "x")
    h, w = x.shape[-2:]
    if h % 2 or w % 2:
        raise ValueError(f"x must have even height and width, got H={h}, W={w}")
    a = x[..., 0::2, 0::2]
    bb = x[..., 0::2, 1::2]
    cc = x[..., 1::2, 0::2]
    d = x[..., 1::2, 1::2]
    ll = (a + bb + cc + d) / 2
    lh = (a - bb + cc - d) / 2
    hl = (a + bb - cc - d) / 2
    hh = (a - bb - cc + d) / 2
    return torch.cat([ll, lh, hl, hh], dim=1)


def haar_idwt2d(z: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`haar_dwt2d`.

    Parameters
    ----------
    z:
        ``(B, 4C, H, W)`` float tensor, subbands ``[LL, LH, HL, HH]`` stacked subband-major.

    Returns
    -------
    torch.Tensor
        ``(B, C, 2H, 2W)``.
    """
    _check_map(z, "z")
    if z.shape[1] % 4:
        raise ValueError(f"z must have a multiple of 4 channels (4 subbands), got {z.shape[1]}")
    ll, lh, hl, hh = z.chunk(4, dim=1)
    b, c, h, w = ll.shape
    # The filters are orthonormal, so the inverse is the transposed (stride-2) convolution.
    f = haar_filters(device=z.device, dtype=z.dtype)
    stacked = torch.stack([ll, lh, hl, hh], dim=2).reshape(b * c, 4, h, w)
    out = F.conv_transpose2d(stacked, f.unsqueeze(1), stride=2)
    return out.reshape(b, c, 2 * h, 2 * w)
