"""The lattice quantizer as a drop-in ``nn.Module`` (STE, dithered, hard)."""

from __future__ import annotations

import torch
from torch import nn

from .lattices import Lattice, lattice

__all__ = ["LatticeQuantizer"]

_MODES = ("ste", "dither", "hard")


class LatticeQuantizer(nn.Module):
    """Nearest-point lattice quantization with a training surrogate.

    Modes
    -----
    ``"ste"`` (default, as the official code)
        ``ŷ = y + sg(Q(y) − y)``: forward is ``Q(y)``, the gradient w.r.t. ``y`` is the identity.
    ``"dither"``
        Training: ``ŷ = y + u`` with fresh ``u ~ U(V)`` per vector. Evaluation (``self.training`` is
        False): subtractive dithered quantization ``ŷ = Q(y − u) + u`` with a *shared* dither drawn
        from a generator seeded by ``dither_seed`` (encoder and decoder regenerate the same ``u``).
    ``"hard"``
        ``ŷ = Q(y)`` with no gradient path.

    Parameters
    ----------
    lat:
        A :class:`Lattice` or a name for :func:`lattice`.
    mode:
        Default mode, one of ``"ste"``, ``"dither"``, ``"hard"``.
    dither_seed:
        Seed of the shared evaluation dither.
    """

    def __init__(self, lat: Lattice | str, mode: str = "ste", dither_seed: int = 0) -> None:
        super().__init__()
        self.lattice = lattice(lat) if isinstance(lat, str) else lat
        if not isinstance(self.lattice, Lattice):
            raise TypeError(f"lat must be a Lattice or a name, got {type(lat).__name__}")
        self._check_mode(mode)
        self.mode = mode
        self.dither_seed = int(dither_seed)

    @staticmethod
    def _check_mode(mode: str) -> None:
        if mode not in _MODES:
            raise ValueError(f"mode must be one of {_MODES}, got {mode!r}")

    def shared_dither(self, count: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        """The evaluation dither for ``count`` vectors, ``(count, n)``; identical on every call."""
        g = torch.Generator(device="cpu").manual_seed(self.dither_seed)
        return self.lattice.sample_voronoi(count, generator=g).to(device=device, dtype=dtype)

    def forward(self, y: torch.Tensor, mode: str | None = None) -> torch.Tensor:
        """Quantize ``y``.

        Parameters
        ----------
        y:
            ``(..., n)`` latents, ``n = lattice.dim``.
        mode:
            Overrides the default mode for this call.

        Returns
        -------
        torch.Tensor
            ``(..., n)`` quantized latents ``ŷ``.
        """
        mode = self.mode if mode is None else mode
        self._check_mode(mode)
        lat = self.lattice
        lat.check_input(y)
        if mode == "hard":
            return lat._quantize(y.detach())
        if mode == "ste":
            return y + (lat._quantize(y.detach()) - y).detach()
        flat = y.reshape(-1, lat.dim)
        if self.training:
            u = lat.sample_voronoi(flat.shape[0], device=y.device, dtype=y.dtype)
            return (flat + u).reshape(y.shape)
        u = self.shared_dither(flat.shape[0], y.device, y.dtype)
        return (lat._quantize(flat.detach() - u) + u).reshape(y.shape)

    def extra_repr(self) -> str:
        return f"lattice={self.lattice.name}, mode={self.mode!r}"
