"""Needles and the two needle operations of VideoNIAH: insert (splice/replace frames) and edit (overlay).

Needle assets of this project (the paper's own assets are not reproduced):

- ``insert1``: a *text card*, a short word rendered large on a plain background, filling a frame;
- ``insert2``: a *picture*, a procedural image with a describable content ("red disk", ...), or a
  user image through :meth:`NeedleGallery.from_images`;
- ``edit1``: a *subtitle*, a word on a dark box overlaid in the lower third of existing frames;
- counting ``edit``: a small colored *sprite* (disk, square, triangle, diamond, cross) with an alpha mask.

Text uses a built-in 5x7 bitmap font (A-Z, 0-9, space), so rendering is identical on every machine
and needs no font file or Pillow.

Both needle operations also accept the video as a ``torch.uint8`` tensor on any device (a GPU
compositor for building large benchmarks): they then run in torch on that device, return a tensor,
and produce bit-identical frames and the same metadata as the numpy path (the alpha blend does
the same float64 operations in the same order, and ``torch.round`` rounds half to even like
``np.rint``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .video import check_frames, is_tensor

if TYPE_CHECKING:
    import torch

__all__ = ["COLORS", "NeedleGallery", "edit_needle", "insert_needle", "render_text", "sprite"]

# 5x7 glyphs: each row is 5 bits, most significant bit = leftmost pixel
_FONT: dict[str, tuple[int, ...]] = {
    "A": (0x0E, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11),
    "B": (0x1E, 0x11, 0x11, 0x1E, 0x11, 0x11, 0x1E),
    "C": (0x0E, 0x11, 0x10, 0x10, 0x10, 0x11, 0x0E),
    "D": (0x1E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x1E),
    "E": (0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x1F),
    "F": (0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x10),
    "G": (0x0E, 0x11, 0x10, 0x17, 0x11, 0x11, 0x0F),
    "H": (0x11, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11),
    "I": (0x0E, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E),
    "J": (0x07, 0x02, 0x02, 0x02, 0x02, 0x12, 0x0C),
    "K": (0x11, 0x12, 0x14, 0x18, 0x14, 0x12, 0x11),
    "L": (0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x1F),
    "M": (0x11, 0x1B, 0x15, 0x15, 0x11, 0x11, 0x11),
    "N": (0x11, 0x11, 0x19, 0x15, 0x13, 0x11, 0x11),
    "O": (0x0E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E),
    "P": (0x1E, 0x11, 0x11, 0x1E, 0x10, 0x10, 0x10),
    "Q": (0x0E, 0x11, 0x11, 0x11, 0x15, 0x12, 0x0D),
    "R": (0x1E, 0x11, 0x11, 0x1E, 0x14, 0x12, 0x11),
    "S": (0x0F, 0x10, 0x10, 0x0E, 0x01, 0x01, 0x1E),
    "T": (0x1F, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04),
    "U": (0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E),
    "V": (0x11, 0x11, 0x11, 0x11, 0x11, 0x0A, 0x04),
    "W": (0x11, 0x11, 0x11, 0x15, 0x15, 0x15, 0x0A),
    "X": (0x11, 0x11, 0x0A, 0x04, 0x0A, 0x11, 0x11),
    "Y": (0x11, 0x11, 0x11, 0x0A, 0x04, 0x04, 0x04),
    "Z": (0x1F, 0x01, 0x02, 0x04, 0x08, 0x10, 0x1F),
    "0": (0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E),
    "1": (0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E),
    "2": (0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F),
    "3": (0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E),
    "4": (0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02),
    "5": (0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E),
    "6": (0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E),
    "7": (0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08),
    "8": (0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E),
    "9": (0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C),
    " ": (0, 0, 0, 0, 0, 0, 0),
}

COLORS: dict[str, tuple[int, int, int]] = {
    "red": (230, 30, 30),
    "green": (30, 200, 60),
    "blue": (30, 70, 230),
    "yellow": (240, 220, 30),
    "magenta": (220, 40, 220),
    "cyan": (30, 220, 220),
    "orange": (250, 140, 20),
    "white": (250, 250, 250),
}
SHAPES = ("disk", "square", "triangle", "diamond", "cross", "ring")


def text_mask(text: str, scale: int = 1) -> np.ndarray:
    """Boolean mask of ``text`` in the 5x7 font, shape ``(7*scale, (6*len-1)*scale)``."""
    text = text.upper()
    bad = sorted({c for c in text if c not in _FONT})
    if bad:
        raise ValueError(f"text may only hold A-Z, 0-9 and spaces, got unsupported characters {bad}")
    if not text:
        raise ValueError("text must be non-empty")
    cols = []
    for i, ch in enumerate(text):
        g = np.array([[(row >> (4 - b)) & 1 for b in range(5)] for row in _FONT[ch]], dtype=bool)
        cols.append(g)
        if i < len(text) - 1:
            cols.append(np.zeros((7, 1), dtype=bool))
    m = np.concatenate(cols, axis=1)
    return np.kron(m, np.ones((scale, scale), dtype=bool)).astype(bool)


def render_text(
    text: str,
    size: tuple[int, int],
    *,
    fg: tuple[int, int, int] = (20, 20, 20),
    bg: tuple[int, int, int] = (245, 245, 235),
) -> np.ndarray:
    """Render ``text`` centered, as large as fits, on a plain ``size = (H, W)`` card.

    Returns
    -------
    (H, W, 3) uint8 array.
    """
    h, w = int(size[0]), int(size[1])
    base = text_mask(text, 1)
    scale = max(1, min((h - 2) // base.shape[0], (w - 2) // base.shape[1]))
    m = text_mask(text, scale)
    if m.shape[0] > h or m.shape[1] > w:
        raise ValueError(f"text {text!r} needs at least {base.shape} pixels, got card size {(h, w)}")
    out = np.empty((h, w, 3), dtype=np.uint8)
    out[:] = bg
    y, x = (h - m.shape[0]) // 2, (w - m.shape[1]) // 2
    out[y : y + m.shape[0], x : x + m.shape[1]][m] = fg
    return out


def sprite(shape: str, color: str | tuple[int, int, int], size: int) -> np.ndarray:
    """A colored shape with alpha mask.

    Parameters
    ----------
    shape : one of ``"disk", "square", "triangle", "diamond", "cross", "ring"``.
    color : a name from :data:`COLORS` or an RGB triple.
    size : side of the square sprite in pixels (>= 3).

    Returns
    -------
    (size, size, 4) uint8 RGBA array; alpha is 255 on the shape, 0 elsewhere (the shape is one
    4-connected component).
    """
    if shape not in SHAPES:
        raise ValueError(f"shape must be one of {SHAPES}, got {shape!r}")
    if not isinstance(size, (int, np.integer)) or size < 3:
        raise ValueError(f"size must be an int >= 3, got {size!r}")
    if isinstance(color, str):
        if color not in COLORS:
            raise ValueError(f"color must be one of {tuple(COLORS)} or an RGB triple, got {color!r}")
        rgb = COLORS[color]
    else:
        try:
            rgb = tuple(int(c) for c in color)
        except (TypeError, ValueError):
            rgb = ()
        if len(rgb) != 3 or not all(0 <= c <= 255 for c in rgb):
            raise ValueError(f"color must be a name from COLORS or an RGB triple of ints in [0, 255], got {color!r}")
    c = (size - 1) / 2.0
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float64)
    r = size / 2.0
    if shape == "disk":
        m = (yy - c) ** 2 + (xx - c) ** 2 <= r * r
    elif shape == "square":
        m = np.ones((size, size), dtype=bool)
    elif shape == "triangle":
        m = np.abs(xx - c) <= (yy + 1) / 2.0
    elif shape == "diamond":
        m = np.abs(yy - c) + np.abs(xx - c) <= r
    elif shape == "cross":
        t = max(1, size // 3)
        lo = (size - t) // 2
        m = np.zeros((size, size), dtype=bool)
        m[lo : lo + t, :] = True
        m[:, lo : lo + t] = True
    else:  # ring
        d = (yy - c) ** 2 + (xx - c) ** 2
        m = (d <= r * r) & (d >= (0.45 * r) ** 2)
    out = np.zeros((size, size, 4), dtype=np.uint8)
    out[..., :3] = rgb
    out[..., 3] = np.where(m, 255, 0)
    return out


def _picture(shape: str, color: str, size: tuple[int, int], rng: np.random.Generator) -> np.ndarray:
    """A describable procedural picture: a large ``color`` ``shape`` on a muted two-tone background."""
    h, w = size
    bg0, bg1 = rng.uniform(40, 110, 3), rng.uniform(40, 110, 3)
    t = np.linspace(0, 1, h)[:, None, None]
    img = (bg0 * (1 - t) + bg1 * t) * np.ones((1, w, 1))
    s = int(0.7 * min(h, w))
    spr = sprite(shape, color, s)
    y, x = (h - s) // 2, (w - s) // 2
    m = spr[..., 3] > 0
    img[y : y + s, x : x + s][m] = spr[..., :3][m]
    return img.astype(np.uint8)


@dataclass
class NeedleGallery:
    """Named needle assets of one kind.

    Attributes
    ----------
    kind : ``"text"`` (text cards), ``"image"`` (pictures), ``"subtitle"`` (words for overlays) or
        ``"sprite"`` (RGBA shapes).
    items : ``{name: array}``: (H, W, 3) uint8 for text/image, (h, w, 4) uint8 RGBA for subtitle/sprite.
    """

    kind: str
    items: dict[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in ("text", "image", "subtitle", "sprite"):
            raise ValueError(f"kind must be 'text', 'image', 'subtitle' or 'sprite', got {self.kind!r}")
        ch = 4 if self.kind in ("subtitle", "sprite") else 3
        for name, arr in self.items.items():
            if not isinstance(arr, np.ndarray) or arr.dtype != np.uint8 or arr.ndim != 3 or arr.shape[2] != ch:
                got = f"{arr.dtype} {arr.shape}" if isinstance(arr, np.ndarray) else type(arr).__name__
                raise ValueError(f"gallery item {name!r} must be uint8 (h, w, {ch}), got {got}")

    @property
    def names(self) -> list[str]:
        return list(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, name: str) -> np.ndarray:
        return self.items[name]

    @classmethod
    def text_cards(cls, words: Sequence[str], size: tuple[int, int] = (96, 96)) -> NeedleGallery:
        """Full-frame cards, one per word (``insert1`` needles)."""
        return cls("text", {str(wd).upper(): render_text(str(wd), size) for wd in words})

    @classmethod
    def subtitles(cls, words: Sequence[str], frame_width: int = 96, height: int | None = None) -> NeedleGallery:
        """Subtitle overlays (``edit1`` needles): light text on an opaque dark box, ``frame_width - 4`` wide."""
        hgt = height or max(9, frame_width // 6)
        items = {}
        for wd in words:
            rgb = render_text(str(wd), (hgt, frame_width - 4), fg=(250, 250, 250), bg=(15, 15, 15))
            items[str(wd).upper()] = np.concatenate([rgb, np.full((*rgb.shape[:2], 1), 255, np.uint8)], axis=2)
        return cls("subtitle", items)

    @classmethod
    def pictures(cls, size: tuple[int, int] = (96, 96), n: int | None = None, seed: int = 0) -> NeedleGallery:
        """Procedural pictures named by content, e.g. ``"red disk"`` (``insert2`` needles)."""
        rng = np.random.default_rng(seed)
        combos = [(c, s) for s in SHAPES for c in COLORS]
        if n is not None:
            pick = rng.choice(len(combos), size=min(n, len(combos)), replace=False)
            combos = [combos[i] for i in sorted(pick)]
        return cls("image", {f"{c} {s}": _picture(s, c, size, rng) for c, s in combos})

    @classmethod
    def sprites(cls, size: int = 12) -> NeedleGallery:
        """Small colored shapes with alpha (counting ``edit`` needles), named ``"<color> <shape>"``."""
        return cls("sprite", {f"{c} {s}": sprite(s, c, size) for s in SHAPES for c in COLORS})

    @classmethod
    def from_images(cls, images: Mapping[str, np.ndarray], kind: str = "image") -> NeedleGallery:
        """Wrap user images ``{name: (H, W, 3) uint8}`` (or RGBA for overlay kinds)."""
        return cls(kind, {str(k): np.asarray(v) for k, v in images.items()})


def _is_uint8(x: object) -> bool:
    if isinstance(x, np.ndarray):
        return x.dtype == np.uint8
    if is_tensor(x):
        import torch

        return x.dtype == torch.uint8
    return False


def _describe(x: object) -> str:
    return f"{x.dtype} {tuple(x.shape)}" if hasattr(x, "dtype") and hasattr(x, "shape") else type(x).__name__


def _check_needle(needle: Any, length: int, h: int, w: int) -> tuple[int, int]:
    """Validate an insertion needle against the frame size; returns its (h, w)."""
    if not _is_uint8(needle) or needle.ndim not in (3, 4):
        raise ValueError(f"needle must be a uint8 image (h, w, 3) or clip (L, h, w, 3), got {_describe(needle)}")
    if needle.shape[-1] != 3:
        raise ValueError(f"needle must have 3 channels (RGB), got shape {tuple(needle.shape)}")
    nh, nw = int(needle.shape[-3]), int(needle.shape[-2])
    if nh > h or nw > w:
        raise ValueError(f"needle of size {(nh, nw)} is larger than the frame {(h, w)}; it must fit in the frame")
    if needle.ndim == 4 and needle.shape[0] != length:
        raise ValueError(f"a needle clip must have length={length} frames, got {needle.shape[0]}")
    return nh, nw


def _needle_clip(needle: np.ndarray, length: int, h: int, w: int) -> np.ndarray:
    """The L frames an insertion adds: an image repeated, or a clip; smaller images are centered on black."""
    if is_tensor(needle):
        needle = needle.detach().cpu().numpy()
    nh, nw = _check_needle(needle, length, h, w)
    clip = np.zeros((length, h, w, 3), dtype=np.uint8)
    y, x = (h - nh) // 2, (w - nw) // 2
    clip[:, y : y + nh, x : x + nw] = needle
    return clip


def _on_device(x: Any, frames: Any) -> Any:
    """``x`` (numpy array or tensor) as a tensor on the device of ``frames``."""
    import torch

    return torch.as_tensor(x).to(frames.device)


def _insert_torch(frames: Any, needle: Any, start: int, length: int, mode: str) -> Any:
    """The torch compositor of :func:`insert_needle` (same layout, on the device of ``frames``)."""
    import torch

    T, h, w = frames.shape[:3]
    nh, nw = _check_needle(needle, length, h, w)
    nd = _on_device(needle, frames)
    y, x = (h - nh) // 2, (w - nw) // 2
    if mode == "insert":
        out = torch.empty((T + length, h, w, 3), dtype=torch.uint8, device=frames.device)
        out[:start] = frames[:start]
        out[start + length :] = frames[start:]
    else:
        out = frames.clone()
    span = out[start : start + length]
    if (nh, nw) != (h, w):
        span.zero_()  # a smaller needle sits on black, as in _needle_clip
    span[:, y : y + nh, x : x + nw] = nd
    return out


def insert_needle(
    frames: np.ndarray | torch.Tensor,
    needle: np.ndarray | torch.Tensor,
    start: int,
    length: int,
    mode: str = "insert",
) -> tuple[np.ndarray | torch.Tensor, dict]:
    """Insert needle frames into a video.

    Parameters
    ----------
    frames : (T, H, W, 3) uint8 haystack: a numpy array, or a ``torch.uint8`` tensor on any device
        (the splice then runs in torch on that device and returns a tensor, bit-identical to the
        numpy result).
    needle : (h, w, 3) uint8 image (repeated ``length`` times, centered on black when smaller than
        the frame) or an (L, h, w, 3) clip with ``L == length``; numpy or torch (moved to the
        device of ``frames``).
    start : first frame index of the needle in the output.
    length : number of needle frames L (>= 1).
    mode : ``"insert"`` splices L new frames at ``start`` (output has T+L frames, later frames shift
        by L; ``0 <= start <= T``), ``"replace"`` overwrites frames ``[start, start+L)`` (output has T
        frames; ``0 <= start <= T-L``).

    Returns
    -------
    (out, meta) : out is a new (T', H, W, 3) array (a tensor on the device of ``frames`` for a tensor
        input); meta is ``{"op": "insert", "mode", "start",
        "length", "span": [start, start+length], "shift"}`` where ``shift`` (L or 0) is what later
        spans move by.
    """
    tensor = is_tensor(frames)
    check_frames(frames, allow_tensor=True)
    T, h, w = frames.shape[:3]
    if not isinstance(length, (int, np.integer)) or length < 1:
        raise ValueError(f"length must be an int >= 1, got {length!r}")
    if mode not in ("insert", "replace"):
        raise ValueError(f"mode must be 'insert' or 'replace', got {mode!r}")
    hi = T if mode == "insert" else T - length
    if not isinstance(start, (int, np.integer)) or not 0 <= start <= hi:
        raise ValueError(f"start must be an int in [0, {hi}] for mode={mode!r}, T={T}, length={length}; got {start!r}")
    start, length = int(start), int(length)
    if tensor:
        out = _insert_torch(frames, needle, start, length, mode)
    elif mode == "insert":
        clip = _needle_clip(needle, length, h, w)
        out = np.concatenate([frames[:start], clip, frames[start:]], axis=0)
    else:
        out = frames.copy()
        out[start : start + length] = _needle_clip(needle, length, h, w)
    meta = {
        "op": "insert",
        "mode": mode,
        "start": start,
        "length": length,
        "span": [start, start + length],
        "shift": length if mode == "insert" else 0,
    }
    return out, meta


def edit_needle(
    frames: np.ndarray | torch.Tensor,
    overlay: np.ndarray | torch.Tensor,
    start: int,
    length: int,
    pos: tuple[int, int],
    alpha: float = 1.0,
    *,
    inplace: bool = False,
) -> tuple[np.ndarray | torch.Tensor, dict]:
    """Overlay a needle on existing frames ``[start, start+length)`` at ``pos = (y, x)``.

    Parameters
    ----------
    frames : (T, H, W, 3) uint8: a numpy array, or a ``torch.uint8`` tensor on any device (the blend
        then runs in torch on that device and returns a tensor, bit-identical to the numpy result).
    overlay : (h, w, 3) uint8 (opaque box) or (h, w, 4) RGBA (alpha channel is the per-pixel mask);
        numpy or torch (moved to the device of ``frames``).
    start, length : the frame span; ``0 <= start`` and ``start + length <= T``.
    pos : top-left corner (y, x); the box must fit: ``y + h <= H``, ``x + w <= W``.
    alpha : global opacity in [0, 1]; pixel = round(a * overlay + (1 - a) * frame), a = alpha * mask / 255.
    inplace : write into ``frames`` instead of a copy (for building many edits cheaply).

    Returns
    -------
    (out, meta) : meta is ``{"op": "edit", "start", "length", "span", "pos", "box": [y, x, h, w], "alpha"}``.
    Only pixels inside the box and span can change.
    """
    tensor = is_tensor(frames)
    check_frames(frames, min_len=1, allow_tensor=True)
    T, H, W = frames.shape[:3]
    if not _is_uint8(overlay) or overlay.ndim != 3 or overlay.shape[2] not in (3, 4):
        raise ValueError(f"overlay must be uint8 (h, w, 3) or (h, w, 4), got {_describe(overlay)}")
    oh, ow = int(overlay.shape[0]), int(overlay.shape[1])
    if oh > H or ow > W:
        raise ValueError(f"overlay of size {(oh, ow)} is larger than the frame {(H, W)}")
    if not isinstance(length, (int, np.integer)) or length < 1:
        raise ValueError(f"length must be an int >= 1, got {length!r}")
    if not isinstance(start, (int, np.integer)) or not 0 <= start <= T - length:
        raise ValueError(f"start must be in [0, {T - length}] (T={T}, length={length}), got {start!r}")
    if isinstance(pos, (str, bytes)) or not hasattr(pos, "__len__") or len(pos) != 2:
        raise ValueError(f"pos must be the top-left corner (y, x) of the overlay, got {pos!r}")
    y, x = (int(v) for v in pos)
    if not (0 <= y <= H - oh and 0 <= x <= W - ow):
        raise ValueError(f"pos=(y, x) must satisfy 0 <= y <= {H - oh} and 0 <= x <= {W - ow} for an overlay {(oh, ow)}")
    if not 0.0 <= float(alpha) <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha!r}")
    start, length = int(start), int(length)
    box = (slice(start, start + length), slice(y, y + oh), slice(x, x + ow))
    if tensor:
        out = _blend_torch(frames, overlay, box, float(alpha), inplace)
    else:
        if is_tensor(overlay):
            overlay = overlay.detach().cpu().numpy()
        out = _blend_numpy(frames if inplace else frames.copy(), overlay, box, float(alpha))
    meta = {
        "op": "edit",
        "start": int(start),
        "length": int(length),
        "span": [int(start), int(start + length)],
        "pos": [y, x],
        "box": [y, x, oh, ow],
        "alpha": float(alpha),
    }
    return out, meta


def _blend_numpy(out: np.ndarray, overlay: np.ndarray, box: tuple[slice, slice, slice], alpha: float) -> np.ndarray:
    """The numpy compositor of :func:`edit_needle`: blend ``overlay`` into ``out[box]`` in place."""
    oh, ow = overlay.shape[:2]
    if alpha == 1.0 and (overlay.shape[2] == 3 or np.isin(overlay[..., 3], (0, 255)).all()):
        # a = 1 blends to the overlay and a = 0 to the frame; the float64 formula below gives the same
        # integers after rint (its rounding error is < 1e-12), so the arithmetic is skipped
        if overlay.shape[2] == 3:
            out[box] = overlay[None]
        else:
            np.copyto(out[box], overlay[None, :, :, :3], where=overlay[None, :, :, 3:] == 255)
        return out
    # float64 throughout; _blend_torch repeats these exact operations so both paths round alike
    a = np.full((oh, ow), alpha) if overlay.shape[2] == 3 else overlay[..., 3].astype(np.float64) * (alpha / 255.0)
    a = a[None, :, :, None]
    region = out[box].astype(np.float64)
    blended = a * overlay[None, :, :, :3].astype(np.float64) + (1.0 - a) * region
    out[box] = np.clip(np.rint(blended), 0, 255).astype(np.uint8)
    return out


def _blend_torch(frames: Any, overlay: Any, box: tuple[slice, slice, slice], alpha: float, inplace: bool) -> Any:
    """The torch compositor of :func:`edit_needle`.

    Each float64 operation of the numpy path is a separate eager torch op here (no fused
    multiply-add), each IEEE-rounded, and ``torch.round`` rounds half to even like ``np.rint``, so
    the uint8 result is bit-identical to numpy on every device.
    """
    import torch

    ov = _on_device(overlay, frames)
    out = frames if inplace else frames.clone()
    oh, ow = ov.shape[:2]
    if ov.shape[2] == 3:
        a = torch.full((oh, ow), alpha, dtype=torch.float64, device=frames.device)
    else:
        a = ov[..., 3].to(torch.float64) * (alpha / 255.0)
    a = a[None, :, :, None]
    region = out[box].to(torch.float64)
    blended = a * ov[None, :, :, :3].to(torch.float64) + (1.0 - a) * region
    out[box] = torch.round(blended).clamp_(0, 255).to(torch.uint8)
    return out
