"""Small shared helpers: canonical hashing, stop-string truncation, progress bars."""

from __future__ import annotations

import hashlib
import json
import logging
import os
from typing import Any

from iclr25.core.progress import progress_enabled

from .media import canonical_conversation
from .types import Message

logger = logging.getLogger("iclr25.llm.bench.chat")


def canonical_json(obj: Any) -> str:
    """Sorted keys, no whitespace: equal objects give equal strings (the basis of every key)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def conversation_hash(conversation: list[Message]) -> str:
    return hashlib.sha256(canonical_json(canonical_conversation(conversation)).encode()).hexdigest()


def derived_seed(seed: int, conversation: list[Message], sample_index: int) -> int:
    """Per-request seed from (seed, conversation content, sample index): independent of batch composition."""
    h = hashlib.sha256(f"{seed}|{conversation_hash(conversation)}|{sample_index}".encode()).digest()
    return int.from_bytes(h[:8], "little") & ((1 << 63) - 1)


def truncate_at_stop(text: str, stop: tuple[str, ...]) -> tuple[str, bool]:
    """Cut ``text`` before the earliest stop string; returns (text, stopped)."""
    cut = min((i for i in (text.find(s) for s in stop) if i >= 0), default=-1)
    return (text[:cut], True) if cut >= 0 else (text, False)


class Bar:
    """A tqdm bar updated from the calling thread, or a no-op when disabled or tqdm is missing."""

    def __init__(self, progress: bool | str, total: int, default_desc: str) -> None:
        self._bar = None
        if not progress or not progress_enabled() or os.environ.get("ICLR25_NO_PROGRESS"):
            return
        try:
            from tqdm.auto import tqdm
        except ImportError:
            return
        desc = progress if isinstance(progress, str) else default_desc
        self._bar = tqdm(total=total, desc=desc, leave=False)

    def update(self, k: int = 1) -> None:
        if self._bar is not None:
            self._bar.update(k)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
