"""Progress bars for long loops: tqdm, silenced when nobody is watching.

Bars are shown only when stderr is a terminal and ``ICLR25_NO_PROGRESS`` is unset (or "0");
libraries never print, so a silent bar is simply a pass-through iterator.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from typing import TypeVar

__all__ = ["progress", "progress_enabled"]

T = TypeVar("T")


def progress_enabled() -> bool:
    """True when a bar would be drawn: stderr is a TTY and ICLR25_NO_PROGRESS is not set."""
    flag = os.environ.get("ICLR25_NO_PROGRESS", "").strip().lower()
    if flag not in ("", "0", "false", "no"):
        return False
    return bool(getattr(sys.stderr, "isatty", lambda: False)())


def progress(iterable: Iterable[T], desc: str | None = None, total: int | None = None, **kwargs) -> Iterator[T]:
    """Wrap ``iterable`` in a tqdm bar when :func:`progress_enabled`, else return it unchanged."""
    if not progress_enabled():
        return iter(iterable)
    from tqdm.auto import tqdm

    return iter(tqdm(iterable, desc=desc, total=total, leave=False, **kwargs))
