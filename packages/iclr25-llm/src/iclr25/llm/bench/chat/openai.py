"""Client for any OpenAI-compatible ``/chat/completions`` server (vLLM, llama.cpp, Ollama ``/v1``, ours).

Standard library only: ``http.client`` with one keep-alive connection per worker thread of a
``ThreadPoolExecutor(max_concurrency)``. Retries follow the usual client semantics: connection
errors, timeouts and HTTP 408/409/429/5xx are retried, honouring ``Retry-After`` (seconds or an HTTP
date) and otherwise waiting ``U(0, 1) * min(backoff_max_s, backoff_initial_s * 2**attempt)`` (full
jitter); other 4xx errors are final. A request that still fails becomes a response with
``finish_reason="error"`` (or raises :class:`ChatRequestError` with ``on_error="raise"``).
"""

from __future__ import annotations

import base64
import email.utils
import http.client
import json
import os
import random
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import Any

import numpy as np

from ._util import Bar, logger
from .media import data_url, encode_png, encode_wav
from .ratelimit import RateLimiter
from .types import (
    DEFAULT_GENERATION,
    DEFAULT_TRANSPORT,
    MAX_TOP_LOGPROBS,
    AudioPart,
    Capabilities,
    ChatRequestError,
    ChatResponse,
    Conversation,
    GenerationConfig,
    ImagePart,
    Message,
    TextPart,
    TokenLogprob,
    TransportConfig,
    UnsupportedModality,
    Usage,
    VideoPart,
    validate_conversations,
)

__all__ = ["RETRY_STATUS", "OpenAIChatModel", "encode_message"]

RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
_FINISH = {"stop": "stop", "length": "length", "content_filter": "content_filter", "error": "error"}


def _video_frames(frames: np.ndarray, max_frames: int) -> list[np.ndarray]:
    idx = np.linspace(0, len(frames) - 1, num=min(max_frames, len(frames))).round().astype(int)
    return [frames[i] for i in sorted(set(idx.tolist()))]


def encode_message(
    message: Message, *, audio_format: str = "input_audio", video_format: str = "frames", max_video_frames: int = 8
) -> dict[str, Any]:
    """One :class:`Message` in the OpenAI wire format (media as base64 data URLs / ``input_audio``)."""
    if isinstance(message.content, str):
        return {"role": message.role, "content": message.content}
    parts: list[dict[str, Any]] = []
    for p in message.content:
        if isinstance(p, TextPart):
            parts.append({"type": "text", "text": p.text})
        elif isinstance(p, ImagePart):
            parts.append({"type": "image_url", "image_url": {"url": data_url("image/png", encode_png(p.array()))}})
        elif isinstance(p, AudioPart):
            wav = encode_wav(*p.array())
            if audio_format == "input_audio":
                b64 = base64.b64encode(wav).decode("ascii")
                parts.append({"type": "input_audio", "input_audio": {"data": b64, "format": "wav"}})
            else:
                parts.append({"type": "audio_url", "audio_url": {"url": data_url("audio/wav", wav)}})
        elif isinstance(p, VideoPart):
            if video_format == "video_url":
                if isinstance(p.frames, np.ndarray):
                    raise UnsupportedModality(
                        "video_format='video_url' needs a VideoPart with a path to an mp4 file "
                        "(encoding frames to mp4 needs a video codec); use video_format='frames'"
                    )
                with open(p.frames, "rb") as f:
                    parts.append({"type": "video_url", "video_url": {"url": data_url("video/mp4", f.read())}})
            else:
                if not isinstance(p.frames, np.ndarray):
                    raise UnsupportedModality("video_format='frames' needs VideoPart.frames as a (T,H,W,3) array")
                for fr in _video_frames(p.frames, max_video_frames):
                    url = data_url("image/png", encode_png(np.ascontiguousarray(fr)))
                    parts.append({"type": "image_url", "image_url": {"url": url}})
    return {"role": message.role, "content": parts}


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        dt = email.utils.parsedate_to_datetime(value)
        return max(0.0, dt.timestamp() - time.time())
    except (TypeError, ValueError, IndexError):
        return None


def _parse_logprobs(lp: Any) -> list[TokenLogprob] | None:
    if not lp or not isinstance(lp, Mapping) or lp.get("content") is None:
        return None
    out = []
    for t in lp["content"]:
        top = [(str(a["token"]), float(a["logprob"])) for a in (t.get("top_logprobs") or [])]
        out.append(TokenLogprob(str(t["token"]), float(t["logprob"]), top))
    return out


class _Attempt(Exception):
    """One failed attempt: whether to retry and how long the server asked us to wait."""

    def __init__(self, message: str, retry: bool, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry, self.retry_after = retry, retry_after


class OpenAIChatModel:
    """Chat model behind an OpenAI-compatible HTTP endpoint.

    Parameters
    ----------
    base_url : e.g. ``"http://127.0.0.1:8000/v1"`` (requests go to ``{base_url}/chat/completions``).
    model : the server-side model id.
    api_key : bearer token; defaults to the ``api_key_env`` environment variable. Never logged or cached.
    transport : timeouts, retries, concurrency, rate limits, error policy.
    headers, extra_body : extra HTTP headers / JSON body fields.
    audio_format : "input_audio" (OpenAI) or "audio_url" (vLLM style data URL).
    video_format : "frames" (up to ``max_video_frames`` PNG images) or "video_url" (an mp4 file as data URL).
    capabilities : what the server accepts (servers differ; default: all modalities, 20 top log-probs).
    native_n : send ``n`` in one request; when False, ``n`` requests with seeds ``seed + i``.
    name : identity for caches and reports (default ``"openai:<model>"``).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        transport: TransportConfig = DEFAULT_TRANSPORT,
        headers: Mapping[str, str] | None = None,
        extra_body: Mapping[str, Any] | None = None,
        audio_format: str = "input_audio",
        video_format: str = "frames",
        max_video_frames: int = 8,
        capabilities: Capabilities | None = None,
        native_n: bool = True,
        name: str | None = None,
    ) -> None:
        u = urllib.parse.urlsplit(base_url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"base_url must be an http(s) URL, got {base_url!r}")
        if audio_format not in ("input_audio", "audio_url"):
            raise ValueError(f"audio_format must be 'input_audio' or 'audio_url', got {audio_format!r}")
        if video_format not in ("frames", "video_url"):
            raise ValueError(f"video_format must be 'frames' or 'video_url', got {video_format!r}")
        if not isinstance(max_video_frames, int) or isinstance(max_video_frames, bool) or max_video_frames < 1:
            raise ValueError(f"max_video_frames must be an int >= 1, got {max_video_frames!r}")
        if not isinstance(transport, TransportConfig):
            raise TypeError(f"transport must be a TransportConfig, got {type(transport).__name__}")
        self.base_url, self.model = base_url.rstrip("/"), model
        self._scheme, self._host, self._port = u.scheme, u.hostname, u.port
        self._path = u.path.rstrip("/")
        self.__api_key = api_key if api_key is not None else os.environ.get(api_key_env)
        self.transport, self.headers, self.extra_body = transport, dict(headers or {}), dict(extra_body or {})
        self.audio_format, self.video_format, self.max_video_frames = audio_format, video_format, max_video_frames
        self._caps = capabilities or Capabilities(("text", "image", "audio", "video"), True, MAX_TOP_LOGPROBS, None)
        self.native_n, self.name = native_n, name or f"openai:{model}"
        self._local = threading.local()
        self._limiter = (
            RateLimiter(transport.requests_per_minute, transport.tokens_per_minute)
            if transport.requests_per_minute or transport.tokens_per_minute
            else None
        )
        self._sleep: Callable[[float], None] = time.sleep
        self._rng = random.Random()

    def __repr__(self) -> str:  # the API key stays out of reprs, logs and results
        return f"OpenAIChatModel(base_url={self.base_url!r}, model={self.model!r})"

    def capabilities(self) -> Capabilities:
        return self._caps

    def cache_identity(self) -> dict[str, Any]:
        return {"backend": "openai", "base_url": self.base_url, "model": self.model}

    # -- HTTP ------------------------------------------------------------------------------------
    def _connection(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            cls = http.client.HTTPSConnection if self._scheme == "https" else http.client.HTTPConnection
            conn = cls(self._host, self._port, timeout=self.transport.timeout_s)
            self._local.conn = conn
        return conn

    def _drop_connection(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def _headers(self) -> dict[str, str]:
        h = {"Content-Type": "application/json", "Accept": "application/json", **self.headers}
        if self.__api_key:
            h["Authorization"] = f"Bearer {self.__api_key}"
        return h

    def _request(self, method: str, path: str, body: bytes | None) -> tuple[int, Mapping[str, str], bytes]:
        conn = self._connection()
        try:
            conn.request(method, self._path + path, body=body, headers=self._headers())
            resp = conn.getresponse()
            data = resp.read()
        except TimeoutError as e:
            self._drop_connection()
            raise _Attempt(f"timeout after {self.transport.timeout_s} s", True) from e
        except (OSError, http.client.HTTPException) as e:
            self._drop_connection()
            raise _Attempt(f"connection error: {type(e).__name__}: {e}", True) from e
        if resp.getheader("Connection", "").lower() == "close":
            self._drop_connection()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data

    def check(self) -> list[str]:
        """``GET {base_url}/models``: the served model ids; raises ``ConnectionError`` with a clear message."""
        try:
            status, _, data = self._request("GET", "/models", None)
        except _Attempt as e:
            raise ConnectionError(f"cannot reach {self.base_url}/models: {e}") from None
        if status != 200:
            raise ConnectionError(f"{self.base_url}/models answered HTTP {status}: {data[:200]!r}")
        return [m.get("id", "") for m in json.loads(data).get("data", [])]

    # -- one request with retries ---------------------------------------------------------------
    def _body(self, conv: Conversation, config: GenerationConfig, n: int, seed: int | None) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [
                encode_message(
                    m,
                    audio_format=self.audio_format,
                    video_format=self.video_format,
                    max_video_frames=self.max_video_frames,
                )
                for m in conv
            ],
            "max_tokens": config.max_tokens,
            "temperature": config.temperature,
            "top_p": config.top_p,
            "n": n,
        }
        if config.stop:
            body["stop"] = list(config.stop)
        if seed is not None:
            body["seed"] = seed
        if config.logprobs:
            body["logprobs"] = True
            body["top_logprobs"] = config.top_logprobs
        if config.response_format == "json":
            body["response_format"] = {"type": "json_object"}
        body.update(self.extra_body)
        return body

    def _attempt(self, payload: bytes, n: int, offset: int) -> list[ChatResponse]:
        status, headers, data = self._request("POST", "/chat/completions", payload)
        if status != 200:
            msg = f"HTTP {status}: {data[:200].decode('utf-8', 'replace')}"
            raise _Attempt(msg, status in RETRY_STATUS, _retry_after(headers.get("retry-after")))
        try:
            doc = json.loads(data)
            choices = sorted(doc["choices"], key=lambda c: c.get("index", 0))
            usage = doc.get("usage") or {}
            out = []
            for k, c in enumerate(choices[:n]):
                content = (c.get("message") or {}).get("content") or ""
                if isinstance(content, list):  # some servers return content parts
                    content = "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
                u = (
                    Usage(int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0)))
                    if k == 0
                    else Usage(0, 0)
                )
                out.append(
                    ChatResponse(
                        text=str(content),
                        finish_reason=_FINISH.get(c.get("finish_reason") or "stop", "stop"),
                        logprobs=_parse_logprobs(c.get("logprobs")),
                        usage=u,
                        model=self.name,
                        sample_index=offset + k,
                        raw={"id": doc.get("id"), "server_model": doc.get("model")},
                    )
                )
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise _Attempt(f"malformed JSON from server ({type(e).__name__}): {data[:200]!r}", False) from e
        if len(out) < n:
            raise _Attempt(f"server returned {len(out)} choices, expected {n}: {data[:200]!r}", False)
        return out

    def _call(self, conv: Conversation, config: GenerationConfig, n: int, offset: int) -> list[ChatResponse]:
        seed = None if config.seed is None else config.seed + offset
        payload = json.dumps(self._body(conv, config, n, seed)).encode()
        t0 = time.perf_counter()
        tr = self.transport
        err = ""
        for attempt in range(tr.max_retries + 1):
            if self._limiter is not None:
                self._limiter.acquire(len(payload) // 4 + config.max_tokens * n)
            try:
                out = self._attempt(payload, n, offset)
                dt = time.perf_counter() - t0
                return [r.replace(latency_s=dt) for r in out]
            except _Attempt as e:
                err = str(e)
                if not e.retry or attempt == tr.max_retries:
                    break
                delay = e.retry_after
                if delay is None:
                    delay = self._rng.random() * min(tr.backoff_max_s, tr.backoff_initial_s * 2**attempt)
                logger.info("retrying %s after %.2f s (attempt %d): %s", self.name, delay, attempt + 1, err)
                self._sleep(delay)
        dt = time.perf_counter() - t0
        if tr.on_error == "raise":
            raise ChatRequestError(f"{self.name}: {err}")
        logger.warning("%s: request failed: %s", self.name, err)
        return [ChatResponse("", "error", None, Usage(), self.name, False, dt, offset + k, err, None) for k in range(n)]

    # -- batch API --------------------------------------------------------------------------------
    def generate(
        self,
        conversations: Sequence[Conversation],
        config: GenerationConfig | None = DEFAULT_GENERATION,
        *,
        progress: bool | str = False,
    ) -> list[list[ChatResponse]]:
        """Send every conversation (concurrently) and return ``config.n`` responses each, in input order."""
        config = DEFAULT_GENERATION if config is None else config  # None: the default config
        convs = validate_conversations(conversations, config, self.capabilities())
        if not convs:
            return []
        jobs = []  # (conversation index, n, sample offset)
        for i in range(len(convs)):
            if self.native_n or config.n == 1:
                jobs.append((i, config.n, 0))
            else:
                jobs.extend((i, 1, k) for k in range(config.n))
        results: list[list[ChatResponse | None]] = [[None] * config.n for _ in convs]
        bar = Bar(progress, len(jobs), self.name)
        pool = ThreadPoolExecutor(max_workers=min(self.transport.max_concurrency, len(jobs)))
        try:
            futs = {pool.submit(self._call, convs[i], config, n, off): (i, off) for i, n, off in jobs}
            pending = set(futs)
            while pending:
                done, pending = wait(pending, return_when=FIRST_EXCEPTION)
                for f in done:
                    i, _off = futs[f]
                    for r in f.result():  # re-raises ChatRequestError in the caller's thread
                        results[i][r.sample_index] = r
                    bar.update()
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            bar.close()
        return [list(row) for row in results]  # type: ignore[arg-type]
