"""The AuxT building blocks: orthogonal linear projection (OLP), WLS and inverse WLS.

``WLS``  (encoder side, halves the resolution)::

    a (B, Cin, H, W) -> Haar DWT -> (B, 4Cin, H/2, W/2) -> * exp(s) -> OLP -> (B, Cout, H/2, W/2)

``InverseWLS`` (decoder side, doubles the resolution)::

    b (B, Cin, H, W) -> OLP -> (B, 4Cout, H, W) -> / exp(s) -> inverse Haar -> (B, Cout, 2H, 2W)

Both are linear, so each collapses to one 2×2 stride-2 (transposed) convolution, recomputed from
``s`` and the OLP weight; ``folded=True`` trains through that single convolution (cuDNN-friendly).
For ``InverseWLS`` the folded bias is a 2×2-periodic pattern added after the transposed
convolution, not a per-channel constant; only :meth:`WLS.fold` returns an ``nn.Conv2d``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .haar import _check_map, haar_dwt2d, haar_filters, haar_idwt2d

__all__ = ["OLP", "WLS", "InverseWLS", "ortho_loss"]

SCALE_INIT = (0.5, 0.5, 0.5, 0.0)  # official init of s for [LL, LH, HL, HH]


def ortho_loss(weight: torch.Tensor) -> torch.Tensor:
    """Orthogonality penalty of a projection matrix.

    ``mean((W Wᵀ − I)²)`` when ``W`` has at least as many columns as rows (rows orthonormal),
    else ``mean((Wᵀ W − I)²)`` (columns orthonormal); ``I`` has size ``min(out, in)``.

    Parameters
    ----------
    weight:
        ``(out, in)`` float tensor.

    Returns
    -------
    torch.Tensor
        Scalar, zero exactly when ``W`` is (semi-)orthogonal.

    Raises
    ------
    TypeError
        ``weight`` is not a floating-point tensor.
    ValueError
        ``weight`` is not 2-D.
    """
    if not isinstance(weight, torch.Tensor) or not weight.is_floating_point():
        got = f"dtype {weight.dtype}" if isinstance(weight, torch.Tensor) else type(weight).__name__
        raise TypeError(f"weight must be a floating-point torch.Tensor, got {got}")
    if weight.dim() != 2:
        raise ValueError(f"weight must be a 2-D (out, in) tensor, got shape {tuple(weight.shape)}")
    out_f, in_f = weight.shape
    gram = weight @ weight.T if in_f >= out_f else weight.T @ weight
    eye = torch.eye(gram.shape[0], device=weight.device, dtype=weight.dtype)
    return ((gram - eye) ** 2).mean()


class OLP(nn.Module):
    """Per-pixel linear projection on the channel axis (a 1×1 convolution with bias).

    Parameters
    ----------
    in_channels, out_channels:
        Channel counts.

    Attributes
    ----------
    weight: ``(out_channels, in_channels)``; bias: ``(out_channels,)``. Initialised like
    ``nn.Linear``; orthogonality comes from the penalty :meth:`ortho_loss`.
    """

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        _check_channels(in_channels=in_channels, out_channels=out_channels)
        self.in_channels, self.out_channels = in_channels, out_channels
        self.weight = nn.Parameter(torch.empty(out_channels, in_channels))
        self.bias = nn.Parameter(torch.empty(out_channels))
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        bound = 1 / math.sqrt(in_channels)
        nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, in, H, W) -> (B, out, H, W)``."""
        return F.conv2d(x, self.weight[:, :, None, None], self.bias)

    def ortho_loss(self) -> torch.Tensor:
        """:func:`ortho_loss` of :attr:`weight`."""
        return ortho_loss(self.weight)

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}"


def _check_channels(**kw: int) -> None:
    for name, v in kw.items():
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")


def _scale_param(channels: int, scale_init: Sequence[float]) -> nn.Parameter:
    if len(scale_init) != 4:
        raise ValueError(f"scale_init must have 4 values (LL, LH, HL, HH), got {len(scale_init)}")
    return nn.Parameter(torch.tensor([float(v) for v in scale_init]).repeat_interleave(channels))


def _check_wavelet(wavelet: str) -> None:
    if wavelet != "haar":
        raise ValueError(f"wavelet must be 'haar' (the paper's choice), got {wavelet!r}")


class _Shortcut(nn.Module):
    """What WLS and InverseWLS share: validated sizes, the scales ``s`` and the OLP."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        wavelet: str,
        scale_init: Sequence[float],
        folded: bool,
        scaled_channels: int,
        olp_shape: tuple[int, int],
    ) -> None:
        super().__init__()
        _check_channels(in_channels=in_channels, out_channels=out_channels)
        _check_wavelet(wavelet)
        self.in_channels, self.out_channels, self.folded = in_channels, out_channels, folded
        self.log_scale = _scale_param(scaled_channels, scale_init)
        self.olp = OLP(*olp_shape)

    def _check_input(self, x: torch.Tensor) -> None:
        _check_map(x, "x")  # a numpy array or an integer tensor: TypeError naming x, not AttributeError
        if x.shape[1] != self.in_channels:
            raise ValueError(f"x must be (B, {self.in_channels}, H, W), got {tuple(x.shape)}")

    def ortho_loss(self) -> torch.Tensor:
        """Orthogonality penalty of the OLP weight."""
        return self.olp.ortho_loss()

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}, folded={self.folded}"


class WLS(_Shortcut):
    """Wavelet-based linear shortcut: Haar DWT, subband-aware scaling ``exp(s)``, OLP.

    Parameters
    ----------
    in_channels, out_channels:
        ``C_in`` and ``C_out``.
    wavelet:
        Only ``"haar"``.
    scale_init:
        Initial ``s`` for the subband groups ``[LL, LH, HL, HH]`` (official: 0.5, 0.5, 0.5, 0).
    folded:
        Compute the forward pass as one 2×2 stride-2 convolution whose weight is rebuilt from
        ``s`` and the OLP weight (same function, same gradients, one kernel launch).

    Attributes
    ----------
    log_scale: ``(4·C_in,)`` the learnable ``s``, subband-major; olp: :class:`OLP` ``4·C_in → C_out``.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        wavelet: str = "haar",
        scale_init: Sequence[float] = SCALE_INIT,
        folded: bool = False,
    ) -> None:
        olp_shape = (4 * in_channels, out_channels)
        super().__init__(in_channels, out_channels, wavelet, scale_init, folded, in_channels, olp_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, C_in, H, W) -> (B, C_out, H/2, W/2)``; ``H`` and ``W`` must be even."""
        self._check_input(x)
        if self.folded:
            if x.shape[-2] % 2 or x.shape[-1] % 2:
                raise ValueError(f"x must have even height and width, got {tuple(x.shape[-2:])}")
            return F.conv2d(x, self.folded_weight(), self.olp.bias, stride=2)
        return self.olp(haar_dwt2d(x) * self.log_scale.exp()[None, :, None, None])

    def folded_weight(self) -> torch.Tensor:
        """The ``(C_out, C_in, 2, 2)`` weight of the equivalent stride-2 convolution."""
        f = haar_filters(device=self.log_scale.device, dtype=self.olp.weight.dtype)
        w = (self.olp.weight * self.log_scale.exp()).view(self.out_channels, 4, self.in_channels)
        return torch.einsum("okc,kij->ocij", w, f)

    @torch.no_grad()
    def fold(self) -> nn.Conv2d:
        """An ``nn.Conv2d(C_in, C_out, 2, stride=2)`` computing the same map (for inference)."""
        conv = nn.Conv2d(self.in_channels, self.out_channels, 2, stride=2)
        conv = conv.to(device=self.olp.weight.device, dtype=self.olp.weight.dtype)
        conv.weight.copy_(self.folded_weight())
        conv.bias.copy_(self.olp.bias)
        return conv


class InverseWLS(_Shortcut):
    """Inverse wavelet-based linear shortcut: OLP, divide by ``exp(s)``, inverse Haar.

    Parameters
    ----------
    in_channels, out_channels:
        ``C_in`` and ``C_out``; the OLP maps ``C_in → 4·C_out``.
    wavelet, scale_init, folded:
        As for :class:`WLS`; ``s`` has ``4·C_out`` entries.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        wavelet: str = "haar",
        scale_init: Sequence[float] = SCALE_INIT,
        folded: bool = False,
    ) -> None:
        olp_shape = (in_channels, 4 * out_channels)
        super().__init__(in_channels, out_channels, wavelet, scale_init, folded, out_channels, olp_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, C_in, H, W) -> (B, C_out, 2H, 2W)``."""
        self._check_input(x)
        inv = (-self.log_scale).exp()
        if self.folded:
            f = haar_filters(device=x.device, dtype=x.dtype)
            w = (self.olp.weight * inv[:, None]).view(4, self.out_channels, self.in_channels)
            weight = torch.einsum("koc,kij->coij", w, f)
            # The bias passes through the inverse Haar too: a 2×2-periodic pattern, not a constant.
            b = (self.olp.bias * inv).view(4, self.out_channels)
            pattern = torch.einsum("ko,kij->oij", b, f)
            y = F.conv_transpose2d(x, weight, stride=2)
            return y + pattern.repeat(1, x.shape[-2], x.shape[-1])[None]
        return haar_idwt2d(self.olp(x) * inv[None, :, None, None])
