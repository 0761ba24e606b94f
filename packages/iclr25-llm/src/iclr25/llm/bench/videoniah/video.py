"""Haystack videos: validation, synthetic generation, loading user videos and frame sampling.

A video is always a ``(T, H, W, 3) uint8`` numpy array here. Synthetic haystacks need nothing but
numpy; user videos load from ``.npy``/``.npz`` arrays or a folder of PNG frames without extra
packages, and from ``.mp4``/``.avi``/... through PyAV (``pip install av``) when it is installed.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from pathlib import Path

import numpy as np

__all__ = [
    "VideoDecodeError",
    "check_frames",
    "load_video",
    "sample_frames",
    "sample_indices",
    "synthetic_haystack",
]

logger = logging.getLogger(__name__)

HAYSTACK_SOURCES = ("texture", "shapes", "noise", "skimage")


class VideoDecodeError(ValueError):
    """A video file exists but could not be decoded into frames."""


def is_tensor(x: object) -> bool:
    """True for a ``torch.Tensor``, without importing torch (the numpy path must not pay for it)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def check_frames(frames: object, name: str = "frames", min_len: int = 2, allow_tensor: bool = False) -> np.ndarray:
    """Validate a video array and return it.

    Parameters
    ----------
    frames : (T, H, W, 3) uint8 array (or a ``torch.uint8`` tensor when ``allow_tensor``).
    name : argument name used in error messages.
    min_len : smallest accepted T.
    allow_tensor : also accept a torch tensor, checked by the same rules.

    Raises
    ------
    ValueError : wrong type/dtype/shape, NaN in a float array, or ``T < min_len``.
    """
    tensor = allow_tensor and is_tensor(frames)
    if not (tensor or isinstance(frames, np.ndarray)):
        raise ValueError(f"{name} must be a uint8 numpy array of shape (T, H, W, 3), got {type(frames).__name__}")
    if tensor:
        import torch

        floating, uint8, kind = frames.is_floating_point(), frames.dtype == torch.uint8, "tensor"
        has_nan = floating and bool(torch.isnan(frames).any())
    else:
        floating, uint8, kind = np.issubdtype(frames.dtype, np.floating), frames.dtype == np.uint8, "array"
        has_nan = floating and bool(np.isnan(frames).any())
    shape = tuple(frames.shape)
    if has_nan:
        raise ValueError(f"{name} contains NaN; expected uint8 frames of shape (T, H, W, 3)")
    if not uint8 or len(shape) != 4 or shape[3] != 3:
        raise ValueError(f"{name} must be uint8 of shape (T, H, W, 3), got {frames.dtype} {kind} of shape {shape}")
    if shape[0] < min_len:
        raise ValueError(f"{name} must have T >= {min_len} frames, got T={shape[0]}")
    if shape[1] < 1 or shape[2] < 1:
        raise ValueError(f"{name} must have H, W >= 1, got shape {shape}")
    return frames


def _smooth_field(rng: np.random.Generator, h: int, w: int, cell: int) -> np.ndarray:
    """A smooth random RGB field in [0, 255] (bilinear upsampling of a coarse grid), shape (h, w, 3)."""
    gh, gw = h // cell + 2, w // cell + 2
    grid = rng.uniform(0, 255, size=(gh, gw, 3))
    ys = np.arange(h) / cell
    xs = np.arange(w) / cell
    y0, x0 = ys.astype(int), xs.astype(int)
    fy, fx = (ys - y0)[:, None, None], (xs - x0)[None, :, None]
    a = grid[y0][:, x0]
    b = grid[y0][:, x0 + 1]
    c = grid[y0 + 1][:, x0]
    d = grid[y0 + 1][:, x0 + 1]
    return (a * (1 - fy) * (1 - fx) + b * (1 - fy) * fx + c * fy * (1 - fx) + d * fy * fx).astype(np.float32)


def _pan(canvas: np.ndarray, T: int, h: int, w: int, rng: np.random.Generator) -> np.ndarray:
    """Crop a window of size (h, w) that drifts along a random straight path over ``canvas``."""
    ch, cw = canvas.shape[:2]
    y0, x0 = rng.uniform(0, ch - h), rng.uniform(0, cw - w)
    y1, x1 = rng.uniform(0, ch - h), rng.uniform(0, cw - w)
    t = np.linspace(0.0, 1.0, T)
    ys = np.round(y0 + (y1 - y0) * t).astype(int)
    xs = np.round(x0 + (x1 - x0) * t).astype(int)
    out = np.empty((T, h, w, 3), dtype=np.uint8)
    for i in range(T):
        out[i] = canvas[ys[i] : ys[i] + h, xs[i] : xs[i] + w]
    return out


def synthetic_haystack(
    T: int, size: tuple[int, int] = (96, 96), fps: float = 1.0, source: str = "texture", seed: int = 0
) -> np.ndarray:
    """Generate a haystack video offline.

    Parameters
    ----------
    T : number of frames (>= 2).
    size : (H, W) of each frame.
    fps : nominal frame rate (only sets how fast the camera drifts: the pan covers the canvas once
        per 60 s of video).
    source : ``"texture"`` (camera pan over a smooth procedural texture; default), ``"shapes"``
        (colored disks moving over a drifting gradient), ``"noise"`` (i.i.d. pixels) or
        ``"skimage"`` (pan over ``skimage.data`` photographs; needs scikit-image, which is not a
        dependency of this package).
    seed : seed of the ``numpy.random.Generator`` that draws everything.

    Returns
    -------
    (T, H, W, 3) uint8 array.
    """
    if not isinstance(T, (int, np.integer)) or T < 2:
        raise ValueError(f"T must be an int >= 2, got {T!r}")
    if len(size) != 2 or min(size) < 4:
        raise ValueError(f"size must be (H, W) with H, W >= 4, got {size!r}")
    if not fps > 0:
        raise ValueError(f"fps must be > 0, got {fps!r}")
    if source not in HAYSTACK_SOURCES:
        raise ValueError(f"source must be one of {HAYSTACK_SOURCES}, got {source!r}")
    h, w = int(size[0]), int(size[1])
    T = int(T)
    rng = np.random.default_rng(seed)
    scale = 1.0 + min(1.0, T / (60.0 * fps))  # longer videos pan over a larger canvas
    if source == "noise":
        return rng.integers(0, 256, size=(T, h, w, 3), dtype=np.uint8)
    if source == "texture":
        ch, cw = int(h * (1 + scale)), int(w * (1 + scale))
        canvas = _smooth_field(rng, ch, cw, max(4, h // 6))
        canvas += _smooth_field(rng, ch, cw, max(2, h // 24)) * 0.35
        canvas = np.clip(canvas / 1.35, 0, 255).astype(np.uint8)
        return _pan(canvas, T, h, w, rng)
    if source == "skimage":
        try:
            from skimage import data as skdata
        except ImportError as e:
            raise ImportError(
                "source='skimage' needs scikit-image (pip install scikit-image); "
                "source='texture' or 'shapes' need nothing extra"
            ) from e
        names = ("astronaut", "coffee", "chelsea", "rocket", "immunohistochemistry")
        img = np.asarray(getattr(skdata, names[int(rng.integers(len(names)))])(), dtype=np.uint8)
        if img.ndim == 2:
            img = np.repeat(img[..., None], 3, axis=2)
        img = img[..., :3]
        # nearest-neighbour rescale so the crop window covers about half the photograph
        target = (int(h * (1 + scale)), int(w * (1 + scale)))
        yi = (np.arange(target[0]) * img.shape[0] / target[0]).astype(int)
        xi = (np.arange(target[1]) * img.shape[1] / target[1]).astype(int)
        return _pan(img[yi][:, xi], T, h, w, rng)
    # shapes: a drifting gradient with a few disks on straight-line paths
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    c0, c1 = rng.uniform(30, 220, 3), rng.uniform(30, 220, 3)
    phase = rng.uniform(0, 2 * np.pi)
    n = 4
    pos0 = rng.uniform(0, 1, (n, 2)) * [h, w]
    vel = rng.uniform(-1, 1, (n, 2)) * [h, w] / max(T, 1) * 1.5
    rad = rng.uniform(0.06, 0.15, n) * min(h, w)
    col = rng.uniform(0, 255, (n, 3))
    out = np.empty((T, h, w, 3), dtype=np.uint8)
    for t in range(T):
        g = 0.5 + 0.5 * np.sin(phase + 2 * np.pi * (xx / w + t / max(T, 1)))
        frame = c0 * g[..., None] + c1 * (1 - g[..., None])
        for j in range(n):
            cy, cx = pos0[j] + vel[j] * t
            cy, cx = cy % h, cx % w
            m = (yy - cy) ** 2 + (xx - cx) ** 2 <= rad[j] ** 2
            frame[m] = col[j]
        out[t] = np.clip(frame, 0, 255).astype(np.uint8)
    return out


def _read_array_file(p: Path) -> np.ndarray:
    try:
        if p.suffix.lower() == ".npy":
            arr = np.load(p, allow_pickle=False)
        else:
            with np.load(p, allow_pickle=False) as z:
                keys = list(z.keys())
                if not keys:
                    raise VideoDecodeError(f"cannot decode video {os.fspath(p)!r}: the .npz archive is empty")
                arr = z["frames"] if "frames" in keys else z[keys[0]]
    except VideoDecodeError:
        raise
    except (OSError, ValueError, EOFError) as e:
        raise VideoDecodeError(f"cannot decode video {os.fspath(p)!r}: {e}") from e
    return arr


def _read_frame_folder(p: Path) -> np.ndarray:
    from ..chat.media import read_image

    files = sorted(f for f in p.iterdir() if f.suffix.lower() in (".png", ".jpg", ".jpeg", ".bmp"))
    if not files:
        raise VideoDecodeError(f"cannot decode video {os.fspath(p)!r}: the folder holds no .png/.jpg frames")
    try:
        frames = [read_image(f) for f in files]
    except (OSError, ValueError) as e:
        raise VideoDecodeError(f"cannot decode video {os.fspath(p)!r}: {e}") from e
    if len({f.shape for f in frames}) != 1:
        raise VideoDecodeError(f"cannot decode video {os.fspath(p)!r}: frames have different sizes")
    return np.stack(frames)


def _read_with_av(p: Path) -> tuple[np.ndarray, float]:
    try:
        import av
    except ImportError as e:
        raise ImportError(
            f"decoding {p.suffix or 'this'} video files needs PyAV: pip install av "
            "(or convert the video to a .npy/.npz frame array or a folder of PNG frames)"
        ) from e
    try:
        with av.open(os.fspath(p)) as container:
            stream = container.streams.video[0]
            fps = float(stream.average_rate) if stream.average_rate else 0.0
            frames = [f.to_ndarray(format="rgb24") for f in container.decode(stream)]
    except Exception as e:  # PyAV raises its own error hierarchy
        raise VideoDecodeError(f"cannot decode video {os.fspath(p)!r}: {e}") from e
    if not frames:
        raise VideoDecodeError(f"cannot decode video {os.fspath(p)!r}: no frames")
    return np.stack(frames), fps


def load_video(path: str | os.PathLike) -> np.ndarray:
    """Load a user video as ``(T, H, W, 3) uint8``.

    Parameters
    ----------
    path : a ``.npy`` array, a ``.npz`` archive (key ``frames`` or its first array), a folder of
        image frames (sorted by file name; PNG read natively, other formats need Pillow), or a
        container file such as ``.mp4`` (needs PyAV: ``pip install av``).

    Raises
    ------
    FileNotFoundError : ``path`` does not exist.
    VideoDecodeError : the file exists but holds no valid video (the message names the path).
    ImportError : a container format was given and PyAV is not installed (names ``av``).
    """
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"video not found: {os.fspath(p)!r}")
    if p.is_dir():
        arr = _read_frame_folder(p)
    elif p.suffix.lower() in (".npy", ".npz"):
        arr = _read_array_file(p)
    else:
        arr, _ = _read_with_av(p)
    if arr.ndim == 3 and arr.shape[2] in (3, 4):
        raise VideoDecodeError(
            f"cannot decode video {os.fspath(p)!r}: it holds one {arr.dtype} image of shape {arr.shape}; "
            "expected frames (T, H, W, 3) or grayscale frames (T, H, W) (add a leading frame axis for an image)"
        )
    if arr.ndim == 3:  # grayscale (T, H, W)
        arr = np.repeat(arr[..., None], 3, axis=3)
    if arr.ndim == 4 and arr.shape[3] == 4:
        arr = arr[..., :3]
    if arr.dtype != np.uint8 or arr.ndim != 4 or arr.shape[3] != 3:
        raise VideoDecodeError(
            f"cannot decode video {os.fspath(p)!r}: expected uint8 frames (T, H, W, 3), got {arr.dtype} {arr.shape}"
        )
    return np.ascontiguousarray(arr)


def sample_indices(
    T: int, k: int | None = None, *, strategy: str = "uniform", fps: float = 1.0, rate=None
) -> np.ndarray:
    """Frame indices a sampler picks from a T-frame video.

    Parameters
    ----------
    T : number of frames.
    k : number of frames for ``strategy="uniform"`` (``round(linspace(0, T-1, k))``, de-duplicated,
        as in the official LLaVA example). ``k > T`` returns all frames with a warning.
    strategy : ``"uniform"``, ``"fps"`` (every ``fps / rate``-th frame) or ``"all"``.
    fps : frame rate of the video (for ``"fps"``).
    rate : target frames per second (for ``"fps"``).

    Returns
    -------
    (K',) int64 array of increasing indices.
    """
    if not isinstance(T, (int, np.integer)) or T < 1:
        raise ValueError(f"T must be an int >= 1, got {T!r}")
    if strategy == "all":
        return np.arange(T)
    if strategy == "fps":
        if rate is None or not rate > 0 or not fps > 0:
            raise ValueError(f"strategy='fps' needs rate > 0 and fps > 0, got rate={rate!r}, fps={fps!r}")
        step = fps / rate
        return np.unique(np.floor(np.arange(0, T, step)).astype(np.int64).clip(0, T - 1))
    if strategy != "uniform":
        raise ValueError(f"strategy must be 'uniform', 'fps' or 'all', got {strategy!r}")
    if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 1:
        raise ValueError(f"k (number of sampled frames) must be an int >= 1, got {k!r}")
    if k > T:
        warnings.warn(f"k={k} > T={T}: sampling all {T} frames", stacklevel=2)
        return np.arange(T)
    # linspace(...).round() repeats indices when k is close to T; np.unique also sorts
    return np.unique(np.linspace(0, T - 1, int(k)).round().astype(np.int64))


def sample_frames(
    frames: np.ndarray, k: int | None = None, *, strategy: str = "uniform", fps: float = 1.0, rate=None
) -> tuple[np.ndarray, np.ndarray]:
    """Sample frames from a video.

    Parameters
    ----------
    frames : (T, H, W, 3) uint8 array.
    k, strategy, fps, rate : see :func:`sample_indices`.

    Returns
    -------
    (frames[idx] of shape (K', H, W, 3), idx of shape (K',)).
    """
    check_frames(frames, "frames", min_len=1)
    idx = sample_indices(frames.shape[0], k, strategy=strategy, fps=fps, rate=rate)
    return frames[idx], idx
