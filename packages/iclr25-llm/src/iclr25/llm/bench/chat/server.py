"""An OpenAI-compatible HTTP server (standard library) that exposes any :class:`ChatModel`.

``POST /v1/chat/completions`` and ``GET /v1/models``; image data URLs and ``input_audio`` /
``audio_url`` WAV are decoded back into :class:`ImagePart` / :class:`AudioPart`. Model calls are
serialized with a lock (backends such as a local HF model are not thread-safe); request parsing,
fault injection and I/O run concurrently. Loopback-only unless ``allow_non_loopback=True``.

``fault_plan`` (for tests) injects faults by 1-based request number, deterministically::

    {"every": 3, "status": 429, "retry_after": 0}   # requests 3, 6, 9, ... get 429
    {"first": 10, "status": 503}                     # requests 1..10 get 503
    {"delay_s": 2.0}                                 # every request waits 2 s first
    {"every": 2, "malformed": True}                  # a 200 whose body is not JSON
"""

from __future__ import annotations

import base64
import ipaddress
import json
import socket
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ._util import logger
from .media import decode_png, decode_wav, parse_data_url
from .types import (
    AudioPart,
    ChatModel,
    GenerationConfig,
    ImagePart,
    Message,
    TextPart,
    UnsupportedModality,
)

__all__ = ["ServerHandle", "decode_message", "serve_openai"]


def decode_message(m: Mapping[str, Any]) -> Message:
    """An OpenAI wire-format message back into a :class:`Message` (media decoded)."""
    content = m.get("content")
    if content is None or isinstance(content, str):
        return Message(str(m.get("role")), content or "")
    parts = []
    for p in content:
        kind = p.get("type")
        if kind == "text":
            parts.append(TextPart(p["text"]))
        elif kind == "image_url":
            mime, data = parse_data_url(p["image_url"]["url"])
            if mime != "image/png":
                raise ValueError(f"only PNG data URLs are decoded, got {mime}")
            parts.append(ImagePart(decode_png(data)))
        elif kind == "input_audio":
            x, sr = decode_wav(base64.b64decode(p["input_audio"]["data"]))
            parts.append(AudioPart(x, sr))
        elif kind == "audio_url":
            _, data = parse_data_url(p["audio_url"]["url"])
            x, sr = decode_wav(data)
            parts.append(AudioPart(x, sr))
        else:
            raise UnsupportedModality(f"content part type {kind!r} is not supported by this server")
    return Message(str(m.get("role")), parts)


def _first_given(body: Mapping[str, Any], *keys: str, default: Any) -> Any:
    # explicit None checks: ``or`` would turn a requested 0 into the default instead of a 400
    for k in keys:
        if body.get(k) is not None:
            return body[k]
    return default


def _config_from_body(body: Mapping[str, Any]) -> GenerationConfig:
    stop = body.get("stop") or ()
    rf = body.get("response_format") or {}
    return GenerationConfig(
        max_tokens=int(_first_given(body, "max_completion_tokens", "max_tokens", default=256)),
        temperature=float(body.get("temperature", 0.0) if body.get("temperature") is not None else 1.0),
        top_p=float(body.get("top_p") if body.get("top_p") is not None else 1.0),
        stop=(stop,) if isinstance(stop, str) else tuple(stop),
        seed=body.get("seed"),
        n=int(_first_given(body, "n", default=1)),
        logprobs=bool(body.get("logprobs", False)),
        top_logprobs=int(body.get("top_logprobs") or 0),
        response_format="json" if rf.get("type") in ("json_object", "json_schema") else "text",
    )


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # a client that timed out and hung up is routine here (retries/timeouts are tested), not a crash
        logger.debug("serve_openai: connection from %s ended abruptly", client_address, exc_info=True)


class ServerHandle:
    """A running server: ``base_url`` (ends in ``/v1``), ``request_count``, ``fault_count``, ``close()``."""

    def __init__(self, server: _Server, thread: threading.Thread, base_url: str, state: dict[str, Any]) -> None:
        self._server, self._thread, self.base_url, self._state = server, thread, base_url, state

    @property
    def request_count(self) -> int:
        """Requests received so far (including the ones answered with an injected fault)."""
        return self._state["count"]

    @property
    def fault_count(self) -> int:
        return self._state["faults"]

    def close(self) -> None:
        if self._state.get("closed"):
            return
        self._state["closed"] = True
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> ServerHandle:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _fault_for(plan: Sequence[Mapping[str, Any]], n: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in plan:
        every, first = f.get("every"), f.get("first")
        if (every is None and first is None) or (every and n % every == 0) or (first and n <= first):
            out.update(f)
    return out


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve_openai(
    model: ChatModel,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    fault_plan: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
    allow_non_loopback: bool = False,
    model_id: str | None = None,
) -> ServerHandle:
    """Serve ``model`` over the OpenAI chat-completions protocol in a background thread.

    Parameters
    ----------
    model : any :class:`ChatModel`.
    host, port : bind address; ``port=0`` picks a free port (see ``handle.base_url``).
    fault_plan : deterministic fault injection for tests (see the module docstring).
    allow_non_loopback : required to bind anything but a loopback address (the server has no auth).
    model_id : id reported by ``/v1/models`` (default ``model.name``).

    Returns
    -------
    ServerHandle : a context manager; ``close()`` stops the server.
    """
    if not _is_loopback(host) and not allow_non_loopback:
        raise PermissionError(
            f"serve_openai binds loopback only (127.0.0.1/::1/localhost) unless allow_non_loopback=True; got {host!r}"
        )
    if isinstance(fault_plan, Mapping):
        fault_plan = [fault_plan]
    plan = [dict(f) for f in (fault_plan or [])]
    state: dict[str, Any] = {"count": 0, "faults": 0}
    count_lock, model_lock = threading.Lock(), threading.Lock()
    mid = model_id or getattr(model, "name", "model")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt: str, *args: Any) -> None:
            logger.debug("serve_openai: " + fmt, *args)

        def _send(self, status: int, payload: Any, headers: Mapping[str, str] | None = None, raw: bytes | None = None):
            data = raw if raw is not None else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status: int, message: str, headers: Mapping[str, str] | None = None) -> None:
            self._send(
                status, {"error": {"message": message, "type": "invalid_request_error", "code": status}}, headers
            )

        def _begin(self) -> bool:
            with count_lock:
                state["count"] += 1
                n = state["count"]
            fault = _fault_for(plan, n)
            if fault.get("delay_s"):
                time.sleep(float(fault["delay_s"]))
            if fault.get("status"):
                with count_lock:
                    state["faults"] += 1
                hdr = {} if fault.get("retry_after") is None else {"Retry-After": str(fault["retry_after"])}
                self._error(int(fault["status"]), f"injected fault on request {n}", hdr)
                return False
            if fault.get("malformed"):
                with count_lock:
                    state["faults"] += 1
                self._send(200, None, raw=b"<html>not json: injected fault</html>")
                return False
            return True

        def do_GET(self) -> None:
            if self.path.rstrip("/") != "/v1/models":
                return self._error(404, f"unknown path {self.path}")
            self._send(200, {"object": "list", "data": [{"id": mid, "object": "model", "owned_by": "iclr25"}]})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if self.path.rstrip("/") != "/v1/chat/completions":
                return self._error(404, f"unknown path {self.path}")
            if not self._begin():
                return
            try:
                body = json.loads(raw)
                conv = [decode_message(m) for m in body["messages"]]
                cfg = _config_from_body(body)
            except (ValueError, KeyError, TypeError) as e:
                return self._error(400, f"bad request: {e}")
            try:
                with model_lock:
                    out = model.generate([conv], cfg)[0]
            except (ValueError, TypeError) as e:
                return self._error(400, f"{type(e).__name__}: {e}")
            except Exception as e:
                logger.exception("serve_openai: model failed")
                return self._error(500, f"{type(e).__name__}: {e}")
            errors = [r.error for r in out if r.finish_reason == "error"]
            if errors:
                return self._error(500, f"model error: {errors[0]}")
            choices = []
            for k, r in enumerate(out):
                lp = None
                if r.logprobs is not None:
                    lp = {
                        "content": [
                            {
                                "token": t.token,
                                "logprob": t.logprob,
                                "bytes": list(t.token.encode()),
                                "top_logprobs": [
                                    {"token": a, "logprob": b, "bytes": list(a.encode())} for a, b in t.top
                                ],
                            }
                            for t in r.logprobs
                        ]
                    }
                choices.append(
                    {
                        "index": k,
                        "message": {"role": "assistant", "content": r.text},
                        "finish_reason": r.finish_reason,
                        "logprobs": lp,
                    }
                )
            pt = out[0].usage.prompt_tokens if out else 0
            ct = sum(r.usage.completion_tokens for r in out)
            self._send(
                200,
                {
                    "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", mid),
                    "choices": choices,
                    "usage": {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct},
                },
            )

    server_cls = _Server
    if ":" in host:

        class _Server6(_Server):
            address_family = socket.AF_INET6

        server_cls = _Server6
    server = server_cls((host, port), Handler)
    bound = server.server_address[1]
    h = f"[{host}]" if ":" in host else host
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    return ServerHandle(server, thread, f"http://{h}:{bound}/v1", state)
