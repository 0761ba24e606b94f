"""Media codecs (standard library + numpy only): PNG, 16-bit PCM WAV, data URLs, content fingerprints.

PNG and WAV are lossless for what they carry (uint8 RGB; audio quantized to 16 bits), so an image
sent over HTTP arrives bit-exactly and audio arrives within 1/32768 per sample.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import struct
import wave
import zlib
from typing import Any

import numpy as np

from .types import AudioPart, ImagePart, Message, TextPart, VideoPart

__all__ = [
    "canonical_conversation",
    "data_url",
    "decode_png",
    "decode_wav",
    "encode_png",
    "encode_wav",
    "parse_data_url",
    "part_fingerprint",
    "read_audio",
    "read_image",
]

_PNG_SIG = b"\x89PNG\r\n\x1a\n"


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def encode_png(image: np.ndarray) -> bytes:
    """Encode ``(H, W, 3) uint8`` as an 8-bit RGB PNG (filter type 0 on every row)."""
    if not isinstance(image, np.ndarray) or image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        raise ValueError(f"image must be a uint8 (H, W, 3) array, got {getattr(image, 'shape', type(image))}")
    h, w, _ = image.shape
    rows = np.concatenate([np.zeros((h, 1), np.uint8), np.ascontiguousarray(image).reshape(h, w * 3)], axis=1)
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return _PNG_SIG + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", zlib.compress(rows.tobytes(), 6)) + _chunk(b"IEND", b"")


def _unfilter(raw: np.ndarray, h: int, stride: int, bpp: int) -> np.ndarray:
    out = np.zeros((h, stride), np.int32)
    raw = raw.reshape(h, stride + 1)
    for y in range(h):
        ft, line = raw[y, 0], raw[y, 1:].astype(np.int32)
        prev = out[y - 1] if y else np.zeros(stride, np.int32)
        if ft == 0:
            out[y] = line
        elif ft == 2:
            out[y] = (line + prev) & 0xFF
        elif ft in (1, 3, 4):
            cur = out[y]
            for x in range(stride):
                a = cur[x - bpp] if x >= bpp else 0
                b = prev[x]
                if ft == 1:
                    pred = a
                elif ft == 3:
                    pred = (a + b) >> 1
                else:
                    c = prev[x - bpp] if x >= bpp else 0
                    p = a + b - c
                    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                    pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                cur[x] = (line[x] + pred) & 0xFF
        else:
            raise ValueError(f"PNG: unknown filter type {ft}")
    return out.astype(np.uint8)


def decode_png(data: bytes) -> np.ndarray:
    """Decode an 8-bit non-interlaced PNG (gray, RGB, gray+alpha, RGBA) to ``(H, W, 3) uint8``."""
    if not data.startswith(_PNG_SIG):
        raise ValueError("not a PNG (bad signature)")
    pos, idat, hdr = 8, [], None
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    if hdr is None:
        raise ValueError("PNG: missing IHDR")
    w, h, depth, ctype, _, _, interlace = hdr
    channels = {0: 1, 2: 3, 4: 2, 6: 4}.get(ctype)
    if depth != 8 or channels is None or interlace:
        raise ValueError(f"PNG: only 8-bit non-interlaced gray/RGB(A) is supported (depth={depth}, type={ctype})")
    raw = np.frombuffer(zlib.decompress(b"".join(idat)), np.uint8)
    px = _unfilter(raw, h, w * channels, channels).reshape(h, w, channels)
    if channels in (1, 2):
        return np.repeat(px[:, :, :1], 3, axis=2)
    return np.ascontiguousarray(px[:, :, :3])


def encode_wav(samples: np.ndarray, sample_rate: int) -> bytes:
    """Mono 16-bit PCM WAV from float samples in [-1, 1] (clipped)."""
    pcm = np.round(np.clip(np.asarray(samples, np.float64), -1.0, 1.0) * 32767.0).astype("<i2")
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(int(sample_rate))
        w.writeframes(pcm.tobytes())
    return buf.getvalue()


def decode_wav(data: bytes) -> tuple[np.ndarray, int]:
    """``(samples (N,) float32 in [-1, 1], sample_rate)`` from PCM WAV bytes (channels averaged)."""
    with wave.open(io.BytesIO(data), "rb") as w:
        ch, width, sr, n = w.getnchannels(), w.getsampwidth(), w.getframerate(), w.getnframes()
        frames = w.readframes(n)
    if width == 2:
        x = np.frombuffer(frames, "<i2").astype(np.float32) / 32767.0
    elif width == 1:
        x = (np.frombuffer(frames, np.uint8).astype(np.float32) - 128.0) / 127.0
    elif width == 4:
        x = np.frombuffer(frames, "<i4").astype(np.float32) / 2147483647.0
    else:
        raise ValueError(f"WAV: unsupported sample width {width}")
    return x.reshape(-1, ch).mean(axis=1).astype(np.float32), int(sr)


def read_image(path: str | os.PathLike) -> np.ndarray:
    """Read an image file to ``(H, W, 3) uint8`` (PNG natively; other formats need Pillow)."""
    with open(path, "rb") as f:
        data = f.read()
    if data.startswith(_PNG_SIG):
        return decode_png(data)
    try:
        from PIL import Image
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ValueError(f"{os.fspath(path)!r} is not a PNG; reading other formats needs Pillow") from e
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"), dtype=np.uint8)


def read_audio(path: str | os.PathLike) -> tuple[np.ndarray, int]:
    """Read a WAV file to ``(samples float32, sample_rate)``."""
    with open(path, "rb") as f:
        return decode_wav(f.read())


def data_url(mime: str, payload: bytes) -> str:
    return f"data:{mime};base64," + base64.b64encode(payload).decode("ascii")


def parse_data_url(url: str) -> tuple[str, bytes]:
    """``(mime, bytes)`` of a base64 ``data:`` URL."""
    if not url.startswith("data:") or ";base64," not in url:
        raise ValueError(f"expected a base64 data: URL, got {url[:40]!r}")
    head, b64 = url[5:].split(";base64,", 1)
    return head, base64.b64decode(b64)


def _sha(arr: np.ndarray) -> str:
    a = np.ascontiguousarray(arr)
    h = hashlib.sha256(str(a.dtype).encode() + str(a.shape).encode())
    h.update(a.tobytes())
    return h.hexdigest()


def _file_sha(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def part_fingerprint(part: Any) -> Any:
    """JSON-able identity of a content part: text as-is, media replaced by a content hash + shape."""
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    if isinstance(part, ImagePart):
        arr = part.array()
        return {"type": "image", "sha256": _sha(arr), "shape": list(arr.shape)}
    if isinstance(part, AudioPart):
        x, sr = part.array()
        return {"type": "audio", "sha256": _sha(x.astype(np.float32)), "sample_rate": sr, "shape": list(x.shape)}
    if isinstance(part, VideoPart):
        if isinstance(part.frames, np.ndarray):
            return {"type": "video", "sha256": _sha(part.frames), "shape": list(part.frames.shape), "fps": part.fps}
        return {"type": "video", "sha256": _file_sha(part.frames), "fps": part.fps}
    raise TypeError(f"unknown content part {part!r}")


def canonical_conversation(conversation: list[Message]) -> list[dict[str, Any]]:
    """The conversation as JSON-able dicts with every media part replaced by its fingerprint."""
    out = []
    for m in conversation:
        content: Any = m.content if isinstance(m.content, str) else [part_fingerprint(p) for p in m.content]
        out.append({"role": m.role, "content": content})
    return out
