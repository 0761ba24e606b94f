"""File output that is never left half-written.

Every writer goes through :func:`atomic_open`: data lands in a temporary file in the target's
directory and is renamed over the target only after it was flushed and fsynced, so a crash or
exception leaves either the old file or the new one, never a truncated mix.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import stat
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any

__all__ = [
    "atomic_open",
    "atomic_write_bytes",
    "atomic_write_text",
    "ensure_writable_dir",
    "load_json",
    "load_safetensors",
    "save_json",
    "save_safetensors",
    "to_jsonable",
]


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO[Any]]:
    """Open a temporary sibling of ``path`` for writing; rename it onto ``path`` on success.

    ``mode`` is ``"w"`` (text) or ``"wb"`` (binary). On any exception the temporary file is
    removed and ``path`` is untouched.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"mode must be 'w' or 'wb', got {mode!r}")
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else encoding) as handle:
            # mkstemp creates the file 0600; give it the mode a plain open() would (umask applied) or
            # the mode of the file it replaces, so results.json stays as readable as any other output.
            os.chmod(tmp, _mode_for(target))
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _mode_for(target: Path) -> int:
    """Permission bits for a new ``target``: those of the file it replaces, else 0o666 minus the umask."""
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        pass
    umask = os.umask(0o022)  # reading the umask means setting it; put it straight back
    os.umask(umask)
    return 0o666 & ~umask


def atomic_write_text(path: str | os.PathLike[str], text: str, encoding: str = "utf-8") -> Path:
    """Write ``text`` to ``path`` atomically; returns the path."""
    with atomic_open(path, "w", encoding=encoding) as handle:
        handle.write(text)
    return Path(path)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically; returns the path."""
    with atomic_open(path, "wb") as handle:
        handle.write(data)
    return Path(path)


def to_jsonable(obj: Any) -> Any:
    """Convert numbers from NumPy/torch, paths, tuples and NaN/inf to plain JSON values.

    Non-finite floats become the strings ``"nan"``, ``"inf"``, ``"-inf"`` so the file stays
    strict JSON that any parser accepts.
    """
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return obj
    if isinstance(obj, int):
        return obj
    if isinstance(obj, float):
        if math.isfinite(obj):
            return obj
        return "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    # NumPy scalars/arrays and torch tensors both offer .tolist(); .item() covers 0-d values.
    if hasattr(obj, "tolist"):
        return to_jsonable(obj.tolist())
    if hasattr(obj, "item"):
        return to_jsonable(obj.item())
    raise TypeError(f"cannot convert {type(obj).__name__} to JSON")


def save_json(path: str | os.PathLike[str], obj: Any, indent: int = 2) -> Path:
    """Serialize ``obj`` (see :func:`to_jsonable`) to ``path`` atomically."""
    text = json.dumps(to_jsonable(obj), indent=indent, sort_keys=False, allow_nan=False)
    return atomic_write_text(path, text + "\n")


def load_json(path: str | os.PathLike[str]) -> Any:
    """Read a JSON file."""
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def save_safetensors(
    tensors: Mapping[str, Any],
    path: str | os.PathLike[str],
    metadata: Mapping[str, str] | None = None,
) -> Path:
    """Save a dict of torch tensors as safetensors, atomically."""
    from safetensors.torch import save

    if not isinstance(tensors, Mapping):
        raise TypeError(f"tensors must be a mapping of name -> tensor, got {type(tensors).__name__}")
    data = save(
        {k: v.detach().contiguous().cpu() for k, v in tensors.items()},
        metadata=dict(metadata or {}),
    )
    return atomic_write_bytes(path, data)


def load_safetensors(path: str | os.PathLike[str], device: str = "cpu") -> dict[str, Any]:
    """Load a safetensors file into a dict of torch tensors on ``device`` (no pickle involved)."""
    from safetensors.torch import load_file

    return load_file(os.fspath(path), device=device)


def ensure_writable_dir(path: str | os.PathLike[str]) -> Path:
    """Create ``path`` if needed and prove it is writable by creating and removing a file.

    Raises
    ------
    PermissionError / NotADirectoryError / OSError
        With a message naming ``path`` and why it cannot be used.
    """
    target = Path(path)
    if target.exists() and not target.is_dir():
        raise NotADirectoryError(f"output path {str(target)!r} exists and is not a directory")
    try:
        target.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".iclr25-write-test.", dir=target)
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise PermissionError(f"output directory {str(target)!r} is not writable: {err.strerror or err}") from err
    return target
