"""A disk response cache around any :class:`ChatModel`: SQLite (WAL) with JSON values, never pickle.

Key = SHA-256 of canonical JSON over: the model name, the backend identity (base URL for HTTP; class,
config and a weight fingerprint for HF), the conversation with media replaced by content hashes, every
:class:`GenerationConfig` field except ``n`` (the sample index identifies the sample, so an ``n=1``
run is reused by a later ``n=3`` run), the sample index and the scopes. Transport settings never enter
the key. Only successful responses are stored; a row that fails to decode is a miss and is rewritten.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import numbers
import os
import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

from ._util import Bar, canonical_json, logger
from .media import canonical_conversation
from .types import (
    DEFAULT_GENERATION,
    Capabilities,
    ChatModel,
    ChatResponse,
    Conversation,
    GenerationConfig,
    validate_conversations,
)

__all__ = ["CachedChatModel", "cache_key", "model_identity"]

_MODES = ("readwrite", "readonly", "refresh")


def model_identity(model: Any) -> dict[str, Any]:
    """What identifies a backend in cache keys (``model.cache_identity()`` when defined)."""
    fn = getattr(model, "cache_identity", None)
    if callable(fn):
        return fn()
    return {"class": f"{type(model).__module__}.{type(model).__qualname__}"}


def cache_key(
    model: Any, conversation: Conversation, config: GenerationConfig, sample_index: int, scopes: Any = None
) -> str:
    """The SHA-256 hex key of one (model, conversation, config, sample) request."""
    cfg = config.to_dict()
    cfg.pop("n")
    # equal configs give equal keys: temperature=1 and temperature=1.0 are the same request
    cfg["temperature"], cfg["top_p"] = float(cfg["temperature"]), float(cfg["top_p"])
    doc = {
        "name": getattr(model, "name", ""),
        "identity": model_identity(model),
        "conversation": canonical_conversation(conversation),
        "config": cfg,
        "sample_index": sample_index,
        "scopes": scopes,
    }
    return hashlib.sha256(canonical_json(doc).encode()).hexdigest()


class CachedChatModel:
    """Wrap ``inner`` so identical requests are answered from an SQLite file.

    Parameters
    ----------
    inner : any :class:`ChatModel`.
    path : the SQLite file (created, with its folder).
    expiry : seconds (or ``timedelta``) after which an entry is a miss; None = never.
    scopes : any JSON-able value mixed into the key (e.g. ``{"run": "v2"}``) to separate caches.
    mode : "readwrite" (default), "readonly" (never writes), "refresh" (ignores hits, rewrites).
    """

    def __init__(
        self,
        inner: ChatModel,
        path: str | os.PathLike,
        *,
        expiry: float | _dt.timedelta | None = None,
        scopes: Any = None,
        mode: str = "readwrite",
    ) -> None:
        if not isinstance(inner, ChatModel):
            raise TypeError(f"inner must be a ChatModel (name, capabilities(), generate()), got {type(inner).__name__}")
        if mode not in _MODES:
            raise ValueError(f"mode must be one of {_MODES}, got {mode!r}")
        if isinstance(expiry, _dt.timedelta):
            expiry = expiry.total_seconds()
        if expiry is not None and (not isinstance(expiry, numbers.Real) or isinstance(expiry, bool) or not expiry > 0):
            raise ValueError(f"expiry must be > 0 seconds (a number or timedelta) or None, got {expiry!r}")
        if os.path.isdir(path):
            raise ValueError(f"path must be an SQLite file (created if missing), got the directory {os.fspath(path)!r}")
        try:  # strict JSON: a value only str()-able (object, set) would give a new key in every process
            json.dumps(scopes)
        except (TypeError, ValueError) as e:
            raise TypeError(
                f"scopes must be a JSON-able value (dict/list/str/number/bool/None), got {scopes!r}: {e}"
            ) from None
        self.inner, self.path, self.expiry, self.scopes, self.mode = inner, os.fspath(path), expiry, scopes, mode
        self.name = inner.name
        self._local = threading.local()
        self._write_lock = threading.Lock()
        if mode == "readonly":
            return  # never creates the file, the table or the WAL files
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        with self._write_lock:
            con = self._con()
            con.execute(
                "CREATE TABLE IF NOT EXISTS responses "
                "(key TEXT PRIMARY KEY, created REAL NOT NULL, expires REAL, value TEXT NOT NULL)"
            )
            con.commit()

    def __repr__(self) -> str:
        return f"CachedChatModel({self.inner!r}, {self.path!r}, mode={self.mode!r})"

    def _con(self) -> sqlite3.Connection | None:
        con = getattr(self._local, "con", None)
        if con is None and self.mode == "readonly":
            if not os.path.exists(self.path):
                return None  # nothing cached yet: every lookup misses
            uri = "file:" + urllib.parse.quote(os.path.abspath(self.path)) + "?mode=ro"
            con = sqlite3.connect(uri, uri=True, timeout=60.0, isolation_level=None)
            con.execute("PRAGMA busy_timeout=60000")
            self._local.con = con
        elif con is None:
            con = sqlite3.connect(self.path, timeout=60.0, isolation_level=None)
            con.execute("PRAGMA busy_timeout=60000")
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=NORMAL")
            self._local.con = con
        return con

    def close(self) -> None:
        """Close this thread's connection."""
        con = getattr(self._local, "con", None)
        if con is not None:
            con.close()
            self._local.con = None

    def __enter__(self) -> CachedChatModel:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __len__(self) -> int:
        con = self._con()
        return 0 if con is None else int(con.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def capabilities(self) -> Capabilities:
        return self.inner.capabilities()

    def cache_identity(self) -> dict[str, Any]:
        return model_identity(self.inner)

    def key(self, conversation: Conversation, config: GenerationConfig, sample_index: int) -> str:
        return cache_key(self.inner, conversation, config, sample_index, self.scopes)

    def _lookup(self, keys: Sequence[str]) -> dict[str, ChatResponse]:
        out: dict[str, ChatResponse] = {}
        now = time.time()
        con = self._con()
        if con is None:
            return out
        for i in range(0, len(keys), 500):
            chunk = keys[i : i + 500]
            rows = con.execute(
                f"SELECT key, expires, value FROM responses WHERE key IN ({','.join('?' * len(chunk))})", chunk
            ).fetchall()
            for k, expires, value in rows:
                if expires is not None and expires < now:
                    continue
                try:
                    r = ChatResponse.from_dict(json.loads(value))
                except (ValueError, KeyError, TypeError) as e:
                    logger.warning("cache %s: undecodable row %s… treated as a miss (%s)", self.path, k[:12], e)
                    continue
                out[k] = r
        return out

    def _store(self, items: Sequence[tuple[str, ChatResponse]]) -> None:
        if not items or self.mode == "readonly":
            return
        now = time.time()
        expires = None if self.expiry is None else now + self.expiry
        rows = []
        for k, r in items:
            d = r.to_dict()
            d["cached"] = False
            rows.append((k, now, expires, json.dumps(d, ensure_ascii=False)))
        with self._write_lock:
            con = self._con()
            con.execute("BEGIN IMMEDIATE")
            try:
                con.executemany(
                    "INSERT OR REPLACE INTO responses (key, created, expires, value) VALUES (?,?,?,?)", rows
                )
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise

    def generate(
        self,
        conversations: Sequence[Conversation],
        config: GenerationConfig | None = DEFAULT_GENERATION,
        *,
        progress: bool | str = False,
    ) -> list[list[ChatResponse]]:
        """Answer hits from the cache and forward the misses to ``inner`` as one batch."""
        config = DEFAULT_GENERATION if config is None else config  # None: the default config
        convs = validate_conversations(conversations, config, self.capabilities())
        if not convs:
            return []
        t0 = time.perf_counter()
        keys = [[self.key(c, config, s) for s in range(config.n)] for c in convs]
        hits = {} if self.mode == "refresh" else self._lookup([k for row in keys for k in row])
        dt = (time.perf_counter() - t0) / max(1, len(convs) * config.n)
        results: list[list[ChatResponse | None]] = [
            [
                hits[k].replace(cached=True, latency_s=dt, sample_index=s) if k in hits else None
                for s, k in enumerate(row)
            ]
            for row in keys
        ]
        miss = [i for i, row in enumerate(results) if any(r is None for r in row)]
        if miss:
            # conversations with any missing sample are re-run with the full n; only misses are replaced
            fresh = self.inner.generate([convs[i] for i in miss], config, progress=progress)
            to_store = []
            for i, row in zip(miss, fresh, strict=True):
                for s, r in enumerate(row):
                    if results[i][s] is not None:
                        continue
                    results[i][s] = r
                    if r.finish_reason != "error" and self.mode != "readonly":
                        to_store.append((keys[i][s], r))
            self._store(to_store)
        else:
            bar = Bar(progress, len(convs), f"{self.name} (cached)")
            bar.update(len(convs))
            bar.close()
        return [list(row) for row in results]  # type: ignore[arg-type]

    def stats(self) -> Mapping[str, int]:
        """``{"rows": ...}`` for quick inspection."""
        return {"rows": len(self)}
