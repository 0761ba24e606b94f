"""Attach AuxT to a CompressAI image codec.

:class:`AuxTransform` wraps an analysis (or synthesis) ``nn.Sequential`` and adds the chain of
shortcuts at its resolution-changing layers (taps)::

    a = x; h = x
    for i, layer in enumerate(g_a):
        h = layer(h)
        if i is the k-th tap: a = WLS_k(a); h = h + a
    y = h

:class:`AuxTModel` swaps the base model's ``g_a``/``g_s`` for wrapped ones, so the base model's
own ``forward``/``compress``/``decompress`` (and its entropy coder and bitstream) run unchanged.
The taps are found by a dry run (layers that halve / double the spatial size) or given.
"""

from __future__ import annotations

import logging
import math
import numbers
import struct
import zlib
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from iclr25.core.modes import eval_mode

from .haar import _check_map
from .shortcuts import WLS, InverseWLS

__all__ = [
    "AuxTModel",
    "AuxTransform",
    "attach_auxt",
    "check_images",
    "find_taps",
    "rd_loss_with_ortho",
]

log = logging.getLogger(__name__)

# AXT2: the CRC also covers the length and size fields (AXT1 checked the payload only).
_MAGIC = b"AXT2"
_OLD_MAGICS = (b"AXT1",)
# magic, payload length, CRC-32, original height, original width
_HEADER = struct.Struct(">4sIIII")
# The CRC covers the length and size fields as well as the payload: a flipped bit in H or W would
# otherwise crop the decoded image silently.
_CHECKED = struct.Struct(">III")


class AuxTransform(nn.Module):
    """A transform with linear shortcuts added after its tap layers.

    Parameters
    ----------
    transform:
        The nonlinear transform, an ``nn.Sequential`` (``g_a`` or ``g_s``).
    taps:
        Increasing indices of the layers after whose output the k-th shortcut is added.
    shortcuts:
        One module per tap (:class:`WLS` for analysis, :class:`InverseWLS` for synthesis); the
        k-th takes the (k-1)-th shortcut's output (the input for k = 0).
    """

    def __init__(self, transform: nn.Sequential, taps: Sequence[int], shortcuts: Sequence[nn.Module]) -> None:
        super().__init__()
        if not isinstance(transform, nn.Sequential):
            raise TypeError(f"transform must be an nn.Sequential, got {type(transform).__name__}")
        taps = [int(t) for t in taps]
        if len(taps) != len(shortcuts):
            raise ValueError(f"need one shortcut per tap, got {len(taps)} taps and {len(shortcuts)} shortcuts")
        if sorted(set(taps)) != taps or (taps and not 0 <= taps[0] <= taps[-1] < len(transform)):
            raise ValueError(f"taps must be increasing layer indices in [0, {len(transform)}), got {taps}")
        self.transform = transform
        self.taps = taps
        self.shortcuts = nn.ModuleList(shortcuts)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Run the transform with the shortcut chain added at the taps."""
        a, h, k = x, x, 0
        for i, layer in enumerate(self.transform):
            h = layer(h)
            if k < len(self.taps) and i == self.taps[k]:
                a = self.shortcuts[k](a)
                # A one-channel (or 1×1) shortcut would broadcast into h and pass unnoticed.
                if a.shape != h.shape:
                    raise ValueError(
                        f"shortcut {k} gives {tuple(a.shape)} but layer {i} gives {tuple(h.shape)}: "
                        "the taps or the shortcuts' channels do not fit the transform"
                    )
                h = h + a
                k += 1
        return h


def find_taps(transform: nn.Sequential, x: torch.Tensor, kind: str = "down") -> list[tuple[int, int, int]]:
    """Dry-run ``transform`` on ``x`` and list its resolution-changing top-level layers.

    Parameters
    ----------
    transform:
        An ``nn.Sequential``.
    x:
        ``(1, C, H, W)`` probe input.
    kind:
        ``"down"`` for layers that halve H and W, ``"up"`` for layers that double them.

    Returns
    -------
    list of (index, in_channels, out_channels)
    """
    if kind not in ("down", "up"):
        raise ValueError(f"kind must be 'down' or 'up', got {kind!r}")
    if not isinstance(transform, nn.Sequential):
        raise TypeError(f"transform must be an nn.Sequential, got {type(transform).__name__}")
    # Conv layers also accept an unbatched (C, H, W) probe, whose shape[1] is H, not the channels.
    _check_map(x, "x")
    found = []
    h = x
    # In train mode the probe would update BatchNorm running statistics of the user's transform.
    with torch.no_grad(), eval_mode(transform):
        for i, layer in enumerate(transform):
            out = layer(h)
            (hi, wi), (ho, wo) = h.shape[-2:], out.shape[-2:]
            if (kind == "down" and (ho, wo) == (hi // 2, wi // 2)) or (kind == "up" and (ho, wo) == (2 * hi, 2 * wi)):
                found.append((i, h.shape[1], out.shape[1]))
            h = out
    return found


def check_images(x: Any, multiple: int = 1, pad: bool = False, name: str = "x") -> None:
    """Validate a batch of RGB images for a codec.

    Parameters
    ----------
    x:
        ``(B, 3, H, W)`` float tensor with values in [0, 1], ``B, H, W ≥ 1``.
    multiple:
        H and W must be multiples of this unless ``pad``.
    pad:
        The caller pads H and W itself, so any size is accepted.
    name:
        The argument's name in error messages.

    Raises
    ------
    TypeError
        ``x`` is not a torch.Tensor.
    ValueError
        Not a floating-point dtype, wrong rank, channels ≠ 3, an empty batch or image, NaN/inf,
        values outside [0, 1], or H, W not multiples of ``multiple`` (unless ``pad``).
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of images, got {type(x).__name__}")
    if not x.is_floating_point():
        raise ValueError(f"{name} must be a float tensor with values in [0, 1], got dtype {x.dtype}")
    if x.dim() != 4 or x.shape[1] != 3:
        raise ValueError(f"{name} must be (B, 3, H, W) RGB images, got shape {tuple(x.shape)}")
    if x.numel() == 0:
        raise ValueError(f"{name} must hold at least one non-empty image, got shape {tuple(x.shape)}")
    if not torch.isfinite(x).all():
        raise ValueError(f"{name} contains NaN or inf")
    lo, hi = float(x.min()), float(x.max())
    if lo < 0.0 or hi > 1.0:
        raise ValueError(f"{name} must have values in [0, 1], got range [{lo:.4g}, {hi:.4g}]")
    h, w = x.shape[-2:]
    if not pad and (h % multiple or w % multiple):
        raise ValueError(
            f"{name} height and width must be multiples of {multiple} for this model, got {h}x{w} (or pass pad=True)"
        )


def _pad(x: torch.Tensor, multiple: int) -> torch.Tensor:
    h, w = x.shape[-2:]
    ph, pw = (-h) % multiple, (-w) % multiple
    # Zero padding on the bottom/right, cropped after decoding, as CompressAI's eval scripts do.
    return F.pad(x, (0, pw, 0, ph)) if ph or pw else x


class AuxTModel(nn.Module):
    """A CompressAI image codec with AuxT shortcuts beside its analysis and synthesis transforms.

    The base model is modified in place: its ``g_a`` and ``g_s`` become :class:`AuxTransform`
    wrappers; hyper-transforms, entropy models and the bitstream format are untouched.

    Parameters
    ----------
    base:
        A ``compressai.models.CompressionModel`` (or any module with ``nn.Sequential`` ``g_a``,
        ``g_s``) taking ``(B, 3, H, W)`` images.
    enc_taps, dec_taps:
        Layer indices of ``g_a`` / ``g_s`` after which the shortcuts are added. Default: found by a
        dry run (the 4 layers that halve, resp. double, the resolution).
    channels:
        Encoder channel chain ``(3, c1, c2, c3, c4)``; default read from the dry run. The decoder
        uses the dry run of ``g_s``.
    w_orth:
        Weight of the orthogonality penalty in the training loss (paper: 0.1).
    folded:
        Train each shortcut as one stride-2 (transposed) convolution.
    probe_size:
        Side of the square probe image used by the dry run: a power of two (or any size the
        downsampling divides exactly) large enough that the latents come out at least 2 pixels wide.

    Attributes
    ----------
    multiple: int
        H and W must be multiples of this: ``2^K`` for the ``K`` downsampling layers of ``g_a``
        (tapped or not), times the hyperprior's extra downsampling.
    """

    def __init__(
        self,
        base: nn.Module,
        enc_taps: Sequence[int] | None = None,
        dec_taps: Sequence[int] | None = None,
        channels: Sequence[int] | None = None,
        w_orth: float = 0.1,
        folded: bool = False,
        probe_size: int = 128,
    ) -> None:
        super().__init__()
        # Checked before the nn.Sequential test, which an attached AuxTransform would fail first.
        if isinstance(getattr(base, "g_a", None), AuxTransform) or isinstance(getattr(base, "g_s", None), AuxTransform):
            raise ValueError("base already has AuxT attached")
        for attr in ("g_a", "g_s"):
            mod = getattr(base, attr, None)
            if not isinstance(mod, nn.Sequential):
                got = type(mod).__name__ if mod is not None else "nothing"
                raise TypeError(f"base.{attr} must be an nn.Sequential, got {got}")
        if not isinstance(w_orth, numbers.Real) or isinstance(w_orth, bool):
            raise TypeError(f"w_orth must be a non-negative float, got {type(w_orth).__name__}")
        # An infinite weight turns the loss into inf (or NaN where the penalty is 0).
        if not (math.isfinite(w_orth) and w_orth >= 0):
            raise ValueError(f"w_orth must be a finite non-negative float, got {w_orth!r}")
        if not isinstance(probe_size, int) or isinstance(probe_size, bool):
            raise TypeError(f"probe_size must be an int, got {type(probe_size).__name__}")
        if probe_size < 1:
            raise ValueError(f"probe_size must be positive, got {probe_size}")
        self.w_orth = float(w_orth)
        param = next(base.parameters())
        probe = torch.zeros(1, 3, probe_size, probe_size, device=param.device, dtype=param.dtype)
        # The dry run needs eval mode; the user's modes, submodule by submodule, come back even if it fails.
        with eval_mode(base):
            down = find_taps(base.g_a, probe, "down")
            with torch.no_grad():
                y = base.g_a(probe)
            up = find_taps(base.g_s, y, "up")
            extra, z = 1, None
            if isinstance(getattr(base, "h_a", None), nn.Module):
                with torch.no_grad():
                    z = base.h_a(y)
                extra = _exact_factor(y.shape[-1], z.shape[-1])
            factor = _exact_factor(probe_size, y.shape[-1])
        if factor is None or extra is None:
            hyper = f" and a {z.shape[-1]}-pixel wide hyper-latent" if z is not None else ""
            raise ValueError(
                f"probe_size={probe_size} cannot measure the model's downsampling: the dry run gave a "
                f"{y.shape[-1]}-pixel wide latent{hyper}; pass a larger power of two so that every "
                "latent is at least 2 pixels wide"
            )

        enc_idx = self._pick("g_a", enc_taps, down, len(base.g_a))
        dec_idx = self._pick("g_s", dec_taps, up, len(base.g_s))
        if channels is None:
            by_idx = {i: (ci, co) for i, ci, co in down}
            if any(i not in by_idx for i in enc_idx):
                raise ValueError(f"channels must be given when the enc_taps {enc_idx} are not all downsampling layers")
            channels = [3] + [by_idx[i][1] for i in enc_idx]
        channels = [int(c) for c in channels]
        if len(channels) != len(enc_idx) + 1:
            raise ValueError(f"channels must have {len(enc_idx) + 1} entries (input + one per tap), got {channels}")
        by_idx_up = {i: (ci, co) for i, ci, co in up}
        if any(i not in by_idx_up for i in dec_idx):
            dec_channels = [channels[-1], *reversed(channels[:-1])]
        else:
            dec_channels = [y.shape[1], *(by_idx_up[i][1] for i in dec_idx)]
        if len(dec_channels) != len(dec_idx) + 1:
            raise ValueError(
                f"dec_taps {dec_idx} are not all upsampling layers, so their channels are taken from "
                f"channels reversed ({dec_channels}), which needs {len(dec_channels) - 1} taps, got {len(dec_idx)}"
            )
        # Both wrappers are built (and validated) before either replaces the base's transform: a bad
        # dec_taps must not leave g_a wrapped, which would also refuse every later attach.
        g_a = AuxTransform(
            base.g_a, enc_idx, [WLS(channels[k], channels[k + 1], folded=folded) for k in range(len(enc_idx))]
        ).to(device=param.device, dtype=param.dtype)
        g_s = AuxTransform(
            base.g_s,
            dec_idx,
            [InverseWLS(dec_channels[k], dec_channels[k + 1], folded=folded) for k in range(len(dec_idx))],
        ).to(device=param.device, dtype=param.dtype)
        self.base = base
        self.enc_channels, self.dec_channels = channels, dec_channels
        base.g_a, base.g_s = g_a, g_s
        # Every downsampling layer of g_a counts, not only the tapped ones (explicit taps may be fewer).
        self.multiple = factor * extra
        log.info("AuxT taps g_a=%s g_s=%s channels=%s / %s", enc_idx, dec_idx, channels, dec_channels)

    @staticmethod
    def _pick(name: str, taps: Sequence[int] | None, found: list, n_layers: int) -> list[int]:
        if taps is not None:
            return [int(t) for t in taps]
        if len(found) != 4:
            listed = ", ".join(f"layer {i}: {ci}->{co} ch" for i, ci, co in found) or "none"
            kind = "downsampling" if name == "g_a" else "upsampling"
            raise ValueError(
                f"{name} must have exactly 4 {kind} layers for automatic taps, found {len(found)} "
                f"({listed}) among {n_layers} layers; pass {'enc' if name == 'g_a' else 'dec'}_taps explicitly"
            )
        return [i for i, _, _ in found]

    @property
    def shortcuts(self) -> list[nn.Module]:
        """All WLS and InverseWLS modules, encoder first."""
        return [*self.base.g_a.shortcuts, *self.base.g_s.shortcuts]

    def forward(self, x: torch.Tensor, pad: bool = False) -> dict[str, Any]:
        """The base model's forward pass: ``{"x_hat", "likelihoods", ...}``.

        ``x``: ``(B, 3, H, W)`` float in [0, 1]; ``x_hat`` is not clamped (training). With ``pad``,
        any H, W is zero-padded to :attr:`multiple` and ``x_hat`` cropped back (the likelihoods
        cover the padded image).
        """
        check_images(x, self.multiple, pad)
        h, w = x.shape[-2:]
        out = self.base(_pad(x, self.multiple) if pad else x)
        if pad:
            out["x_hat"] = out["x_hat"][..., :h, :w]
        return out

    def ortho_loss(self) -> torch.Tensor:
        """``Σ`` of the orthogonality penalties of all shortcut projections (unweighted)."""
        return torch.stack([m.ortho_loss() for m in self.shortcuts]).sum()

    def aux_loss(self) -> torch.Tensor:
        """The base model's quantile (auxiliary) loss."""
        return self.base.aux_loss()

    def load_state_dict(self, state_dict: Any, strict: bool = True, assign: bool = False) -> Any:
        """Load a state dict, first resizing the entropy coders' CDF buffers to the checkpoint's.

        The CDF tables built by :meth:`update` change size with the learned distributions, so a
        model saved after ``update()`` would not load into a freshly built one by plain
        ``nn.Module.load_state_dict``. As CompressAI's own models do, the buffers are resized
        first; every parameter must still match (a different ``N``/``M`` still raises).
        """
        _fit_coder_buffers(self, state_dict)
        return super().load_state_dict(state_dict, strict=strict, assign=assign)

    def update(self, scale_table: Any = None, force: bool = False, update_quantiles: bool = False) -> bool:
        """Build the entropy coder's CDF tables (see CompressAI's ``update``).

        ``update_quantiles`` re-estimates the entropy bottleneck's quantiles from its CDF first, as
        in CompressAI; it is passed on only when set, so bases whose ``update`` lacks it still work.
        """
        kw: dict[str, Any] = {"force": force}
        if scale_table is not None:
            kw["scale_table"] = scale_table
        if update_quantiles:
            kw["update_quantiles"] = True
        return self.base.update(**kw)

    @torch.no_grad()
    def compress(self, x: torch.Tensor, pad: bool = False) -> dict[str, Any]:
        """Encode images to byte strings with the base model's entropy coder.

        Each byte string gets a 20-byte header (magic, length, CRC-32, original H and W) so that
        :meth:`decompress` rejects truncated or corrupted input instead of decoding garbage. With
        ``pad``, any H, W is zero-padded to :attr:`multiple`; :meth:`decompress` crops it back.

        Returns
        -------
        dict
            ``{"strings": list (one per latent) of lists (one per image) of bytes, "shape": ...}``.
        """
        check_images(x, self.multiple, pad)
        h, w = x.shape[-2:]
        enc = self.base.compress(_pad(x, self.multiple) if pad else x)
        strings = [[_frame(s, h, w) for s in group] for group in enc["strings"]]
        return {**enc, "strings": strings}

    @torch.no_grad()
    def decompress(self, strings: Sequence[Sequence[bytes]], shape: Any) -> dict[str, Any]:
        """Decode byte strings from :meth:`compress`; ``x_hat`` is clamped to [0, 1].

        Raises
        ------
        TypeError
            ``strings`` is not a list (per latent) of lists (per image) of bytes.
        ValueError
            A byte string is truncated, corrupted or not produced by :meth:`compress`, there are
            no byte strings, or their headers disagree on the image size.
        """
        if not isinstance(strings, (list, tuple)) or not all(isinstance(g, (list, tuple)) for g in strings):
            raise TypeError("strings must be a list (per latent) of lists (per image) of bytes")
        payload, sizes = [], set()
        for gi, group in enumerate(strings):
            row = []
            for bi, s in enumerate(group):
                data, hw = _unframe(s, f"strings[{gi}][{bi}]")
                row.append(data)
                sizes.add(hw)
            payload.append(row)
        if not sizes:
            raise ValueError("strings must hold at least one byte string")
        if len(sizes) != 1:
            raise ValueError(f"strings disagree on the image size: {sorted(sizes)}")
        (h, w) = sizes.pop()
        out = self.base.decompress(payload, shape)
        out["x_hat"] = out["x_hat"].clamp(0, 1)[..., :h, :w]
        return out


# Entropy-coder buffers whose size follows the learned distributions (CompressAI's EntropyModel).
_CODER_BUFFERS = ("_quantized_cdf", "_offset", "_cdf_length", "scale_table")


def _fit_coder_buffers(model: nn.Module, state_dict: Any) -> None:
    from compressai.entropy_models import EntropyModel

    for name, module in model.named_modules():
        if not isinstance(module, EntropyModel):
            continue
        for buf_name, buf in module.named_buffers(recurse=False):
            incoming = state_dict.get(f"{name}.{buf_name}") if buf_name in _CODER_BUFFERS else None
            if isinstance(incoming, torch.Tensor) and incoming.shape != buf.shape:
                buf.resize_(incoming.shape)


def _exact_factor(n_in: int, n_out: int) -> int | None:
    """``n_in / n_out`` when it is a power of two and ``n_out ≥ 2``, else ``None``.

    Each halving layer maps ``n`` to ``ceil(n/2)`` or ``floor(n/2)``; once a size reaches 1 more
    halvings leave it at 1 (so 16 -> 1 cannot tell 4 halvings from 6), and a size that is not
    a power of two can round (96 -> 2 after 6 halvings looks like a factor of 48). With
    ``n_out ≥ 2`` and an exact power-of-two ratio ``2^j``, the number of halvings is ``j``.
    """
    f, rem = divmod(n_in, n_out)
    if n_out < 2 or rem or f & (f - 1):
        return None
    return f


def _crc(data: bytes, h: int, w: int) -> int:
    return zlib.crc32(data, zlib.crc32(_CHECKED.pack(len(data), h, w)))


def _frame(data: bytes, h: int, w: int) -> bytes:
    return _HEADER.pack(_MAGIC, len(data), _crc(data, h, w), h, w) + data


def _unframe(s: Any, name: str) -> tuple[bytes, tuple[int, int]]:
    if not isinstance(s, (bytes, bytearray)):
        raise TypeError(f"{name} must be bytes, got {type(s).__name__}")
    if len(s) < _HEADER.size:
        raise ValueError(f"{name} is truncated: {len(s)} bytes, shorter than the {_HEADER.size}-byte header")
    magic, n, crc, h, w = _HEADER.unpack_from(s)
    if magic in _OLD_MAGICS:
        raise ValueError(
            f"{name} was written by an older AuxT bitstream format ({magic!r}); re-encode it with this "
            f"version, which writes {_MAGIC!r}"
        )
    if magic != _MAGIC:
        raise ValueError(f"{name} is not an AuxT bitstream (magic {magic!r}, expected {_MAGIC!r})")
    data = bytes(s[_HEADER.size :])
    if len(data) != n:
        raise ValueError(f"{name} is truncated or padded: header says {n} payload bytes, got {len(data)}")
    if _crc(data, h, w) != crc:
        raise ValueError(f"{name} is corrupted: CRC-32 mismatch")
    return data, (h, w)


def attach_auxt(model: nn.Module, **kw: Any) -> AuxTModel:
    """Add AuxT to a CompressAI image model (in place) and return the wrapper.

    Parameters
    ----------
    model:
        e.g. ``compressai.models.MeanScaleHyperprior(128, 192)``.
    **kw:
        Passed to :class:`AuxTModel` (``enc_taps``, ``dec_taps``, ``channels``, ``w_orth``, ``folded``,
        ``probe_size``).
    """
    return AuxTModel(model, **kw)


def rd_loss_with_ortho(
    out: dict[str, Any], x: torch.Tensor, lmbda: float, model: nn.Module | None = None, w_orth: float | None = None
) -> dict[str, torch.Tensor]:
    """The AuxT training objective ``λ·255²·MSE + bpp + w_orth·Σ L_orth``.

    Parameters
    ----------
    out:
        The codec's forward output (``"x_hat"``, ``"likelihoods"``).
    x:
        ``(B, 3, H, W)`` the input images.
    lmbda:
        λ (MSE weight; the paper uses 0.0018 ... 0.0483).
    model:
        An :class:`AuxTModel` for the ortho term; ``None`` (plain codec) adds nothing.
    w_orth:
        Overrides ``model.w_orth``.

    Returns
    -------
    dict
        ``{"loss", "mse", "bpp", "ortho"}`` scalars.
    """
    if x.dim() != 4:
        raise ValueError(f"x must be (B, C, H, W), got shape {tuple(x.shape)}")
    b, _, h, w = x.shape
    bpp = sum(torch.log(lk).sum() for lk in out["likelihoods"].values()) / (-math.log(2) * b * h * w)
    mse = F.mse_loss(out["x_hat"], x)
    # In the loss's dtype: a float32 zero would make the plain codec's "ortho" float32 for float64 models.
    ortho = model.ortho_loss() if isinstance(model, AuxTModel) else mse.new_zeros(())
    weight = (model.w_orth if isinstance(model, AuxTModel) else 0.0) if w_orth is None else w_orth
    loss = lmbda * 255**2 * mse + bpp + weight * ortho
    return {"loss": loss, "mse": mse, "bpp": bpp, "ortho": ortho}
