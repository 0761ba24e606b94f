"""Data model of the chat layer: messages with media parts, configs, responses, the protocol.

``GenerationConfig`` holds only fields that change a model's output (they enter cache keys);
``TransportConfig`` holds how requests travel (timeouts, retries, concurrency, rate limits) and
never enters a cache key, so changing a timeout never invalidates cached answers.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

__all__ = [
    "DEFAULT_GENERATION",
    "DEFAULT_TRANSPORT",
    "MODALITIES",
    "ROLES",
    "AudioPart",
    "Capabilities",
    "ChatModel",
    "ChatRequestError",
    "ChatResponse",
    "ContentPart",
    "Conversation",
    "GenerationConfig",
    "ImagePart",
    "LogprobsUnavailable",
    "Message",
    "TextPart",
    "TokenLogprob",
    "TransportConfig",
    "UnsupportedModality",
    "Usage",
    "VideoPart",
    "conversation_modalities",
    "message_text",
    "validate_conversations",
]

Role = Literal["system", "user", "assistant"]
ROLES: tuple[str, ...] = ("system", "user", "assistant")
MODALITIES: tuple[str, ...] = ("text", "image", "audio", "video")
MAX_TOP_LOGPROBS = 20


class UnsupportedModality(ValueError):
    """A conversation holds a content type (image/audio/video) the model does not accept."""


class LogprobsUnavailable(LookupError):
    """A response carries no (or not enough) token log-probabilities for the requested read-out."""


class ChatRequestError(RuntimeError):
    """A request failed after all retries and the transport was configured with ``on_error="raise"``."""


def _is_pathlike(x: object) -> bool:
    return isinstance(x, (str, os.PathLike))


def _is_real(x: object) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


@dataclass(frozen=True)
class TextPart:
    """Plain text content."""

    text: str

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise TypeError(f"TextPart.text must be str, got {type(self.text).__name__}")


@dataclass(frozen=True, eq=False)
class ImagePart:
    """An RGB image.

    Parameters
    ----------
    image : (H, W, 3) uint8 array, or a path to an image file (PNG is read without extra packages).
    """

    image: Any

    def __post_init__(self) -> None:
        if _is_pathlike(self.image):
            return
        arr = self.image
        if not isinstance(arr, np.ndarray) or arr.dtype != np.uint8 or arr.ndim != 3 or arr.shape[2] != 3:
            got = f"{arr.dtype} array of shape {arr.shape}" if isinstance(arr, np.ndarray) else type(arr).__name__
            raise ValueError(f"ImagePart.image must be a uint8 array of shape (H, W, 3) or a path, got {got}")

    def array(self) -> np.ndarray:
        """The pixels, ``(H, W, 3) uint8`` (reads the file for a path)."""
        if isinstance(self.image, np.ndarray):
            return self.image
        from .media import read_image

        return read_image(self.image)


def _check_audio(samples: Any, name: str) -> None:
    if not isinstance(samples, np.ndarray) or samples.ndim != 1 or not np.issubdtype(samples.dtype, np.floating):
        got = f"{samples.dtype} array of shape {samples.shape}" if isinstance(samples, np.ndarray) else type(samples)
        raise ValueError(f"{name} must be a 1-D float array (mono samples in [-1, 1]), got {got}")
    if not np.all(np.isfinite(samples)):
        raise ValueError(f"{name} contains NaN or inf samples")


@dataclass(frozen=True, eq=False)
class AudioPart:
    """Mono audio.

    Parameters
    ----------
    samples : (N,) float array in [-1, 1], or a path to a WAV file.
    sample_rate : samples per second (required with an array; read from the file for a path).
    """

    samples: Any
    sample_rate: int | None = None

    def __post_init__(self) -> None:
        if _is_pathlike(self.samples):
            return
        _check_audio(self.samples, "AudioPart.samples")
        sr = self.sample_rate
        if not isinstance(sr, numbers.Integral) or isinstance(sr, (bool, np.bool_)) or sr <= 0:
            raise ValueError(f"AudioPart.sample_rate must be a positive int, got {sr!r} ({type(sr).__name__})")
        object.__setattr__(self, "sample_rate", int(sr))  # numpy integers (e.g. read from a dataset) -> int

    def array(self) -> tuple[np.ndarray, int]:
        """``(samples (N,) float32, sample_rate)`` (reads the file for a path)."""
        if isinstance(self.samples, np.ndarray):
            return self.samples.astype(np.float32, copy=False), int(self.sample_rate)
        from .media import read_audio

        return read_audio(self.samples)


@dataclass(frozen=True, eq=False)
class VideoPart:
    """A video as frames.

    Parameters
    ----------
    frames : (T, H, W, 3) uint8 array, or a path to a video file (sent as-is with ``video_format="video_url"``).
    fps : frames per second of ``frames``.
    """

    frames: Any
    fps: float | None = None

    def __post_init__(self) -> None:
        if _is_pathlike(self.frames):
            return
        arr = self.frames
        if not isinstance(arr, np.ndarray) or arr.dtype != np.uint8 or arr.ndim != 4 or arr.shape[3] != 3:
            got = f"{arr.dtype} array of shape {arr.shape}" if isinstance(arr, np.ndarray) else type(arr).__name__
            raise ValueError(f"VideoPart.frames must be a uint8 array of shape (T, H, W, 3) or a path, got {got}")
        fps = self.fps
        if not _is_real(fps) or not fps > 0:
            raise ValueError(f"VideoPart.fps must be a positive number, got {fps!r} ({type(fps).__name__})")
        if not isinstance(fps, (int, float)):
            object.__setattr__(self, "fps", float(fps))  # numpy scalars -> float (python numbers stay as given)


ContentPart = TextPart | ImagePart | AudioPart | VideoPart
_PART_MODALITY = {TextPart: "text", ImagePart: "image", AudioPart: "audio", VideoPart: "video"}


@dataclass(frozen=True)
class Message:
    """One chat turn: ``role`` in {"system", "user", "assistant"} and text or a list of parts."""

    role: str
    content: str | Sequence[ContentPart]

    def __post_init__(self) -> None:
        if isinstance(self.content, str):
            return
        if not isinstance(self.content, (list, tuple)):
            raise TypeError(f"Message.content must be str or a list of parts, got {type(self.content).__name__}")
        for j, p in enumerate(self.content):
            if type(p) not in _PART_MODALITY:
                raise TypeError(f"Message.content[{j}] must be TextPart/ImagePart/AudioPart/VideoPart, got {p!r}")
        object.__setattr__(self, "content", tuple(self.content))

    @property
    def parts(self) -> tuple[ContentPart, ...]:
        """The content as parts (a plain string becomes one :class:`TextPart`)."""
        return (TextPart(self.content),) if isinstance(self.content, str) else tuple(self.content)


Conversation = list[Message]


def message_text(message: Message) -> str:
    """The text parts of ``message`` joined by newlines."""
    return "\n".join(p.text for p in message.parts if isinstance(p, TextPart))


def conversation_modalities(conversation: Sequence[Message]) -> set[str]:
    """Modalities used anywhere in ``conversation`` (subset of {"text","image","audio","video"})."""
    return {_PART_MODALITY[type(p)] for m in conversation for p in m.parts}


@dataclass(frozen=True)
class GenerationConfig:
    """Fields that change what a model outputs (all of them enter cache keys).

    Attributes
    ----------
    max_tokens : maximum number of generated tokens (> 0).
    temperature : 0 means greedy decoding.
    top_p : nucleus mass in (0, 1].
    stop : strings at which generation stops (excluded from the text).
    seed : sampling seed; with a seed, sample ``i`` of a conversation is reproducible on its own.
    n : samples per conversation.
    logprobs : return per-token log-probabilities.
    top_logprobs : number of alternatives per token (0..20).
    response_format : "text" or "json".
    """

    max_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    seed: int | None = None
    n: int = 1
    logprobs: bool = False
    top_logprobs: int = 0
    response_format: Literal["text", "json"] = "text"

    def __post_init__(self) -> None:
        stop = self.stop
        if isinstance(stop, str):
            stop = (stop,)
        stop = tuple(stop or ())
        if not all(isinstance(s, str) and s for s in stop):
            raise ValueError(f"stop must be non-empty strings, got {self.stop!r}")
        object.__setattr__(self, "stop", stop)
        if not isinstance(self.max_tokens, int) or isinstance(self.max_tokens, bool) or self.max_tokens <= 0:
            raise ValueError(f"max_tokens must be a positive int, got {self.max_tokens!r}")
        if not isinstance(self.temperature, (int, float)) or not self.temperature >= 0 or math.isinf(self.temperature):
            raise ValueError(f"temperature must be a finite number >= 0, got {self.temperature!r}")
        if not isinstance(self.top_p, (int, float)) or not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p!r}")
        if not isinstance(self.n, int) or isinstance(self.n, bool) or self.n < 1:
            raise ValueError(f"n must be an int >= 1, got {self.n!r}")
        bad = not isinstance(self.top_logprobs, int) or isinstance(self.top_logprobs, bool)
        if bad or not 0 <= self.top_logprobs <= MAX_TOP_LOGPROBS:
            raise ValueError(f"top_logprobs must be an int in [0, {MAX_TOP_LOGPROBS}], got {self.top_logprobs!r}")
        if self.seed is not None and (not isinstance(self.seed, int) or isinstance(self.seed, bool)):
            raise ValueError(f"seed must be an int or None, got {self.seed!r}")
        if self.response_format not in ("text", "json"):
            raise ValueError(f"response_format must be 'text' or 'json', got {self.response_format!r}")

    def replace(self, **changes: Any) -> GenerationConfig:
        """A copy with ``changes`` applied (validated)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["stop"] = list(self.stop)
        return d


@dataclass(frozen=True)
class TransportConfig:
    """How requests travel; never part of a cache key.

    Attributes
    ----------
    timeout_s : socket timeout per attempt.
    max_retries : retries after the first attempt (connect errors, timeouts, 408/409/429/5xx).
    backoff_initial_s, backoff_max_s : full-jitter exponential backoff
        ``U(0, 1) * min(backoff_max_s, backoff_initial_s * 2**attempt)`` when no ``Retry-After`` is given.
    max_concurrency : parallel requests.
    requests_per_minute, tokens_per_minute : client-side rate limits (None = unlimited).
    on_error : "record" (error responses) or "raise" (:class:`ChatRequestError`).
    """

    timeout_s: float = 60.0
    max_retries: int = 5
    backoff_initial_s: float = 0.5
    backoff_max_s: float = 30.0
    max_concurrency: int = 8
    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    on_error: Literal["record", "raise"] = "record"

    def __post_init__(self) -> None:
        if not _is_real(self.timeout_s) or not self.timeout_s > 0:
            raise ValueError(f"timeout_s must be a number > 0, got {self.timeout_s!r}")
        if not isinstance(self.max_retries, int) or self.max_retries < 0:
            raise ValueError(f"max_retries must be an int >= 0, got {self.max_retries!r}")
        for k in ("backoff_initial_s", "backoff_max_s"):
            v = getattr(self, k)
            if not _is_real(v) or not v >= 0:
                raise ValueError(f"{k} must be a number >= 0, got {v!r}")
        if not isinstance(self.max_concurrency, int) or self.max_concurrency < 1:
            raise ValueError(f"max_concurrency must be an int >= 1, got {self.max_concurrency!r}")
        for k in ("requests_per_minute", "tokens_per_minute"):
            v = getattr(self, k)
            if v is not None and (not _is_real(v) or not v > 0):
                raise ValueError(f"{k} must be a number > 0 or None, got {v!r}")
        if self.on_error not in ("record", "raise"):
            raise ValueError(f"on_error must be 'record' or 'raise', got {self.on_error!r}")


DEFAULT_GENERATION = GenerationConfig()
DEFAULT_TRANSPORT = TransportConfig()


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token: its text, log-probability, and the top alternatives ``[(token, logprob)]``."""

    token: str
    logprob: float
    top: list[tuple[str, float]] = field(default_factory=list)


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0


FinishReason = Literal["stop", "length", "error", "content_filter"]


@dataclass(frozen=True)
class ChatResponse:
    """One generated sample (or an error, recorded as data).

    Attributes
    ----------
    text : the completion ("" on error).
    finish_reason : "stop" | "length" | "error" | "content_filter".
    logprobs : per-token log-probabilities when requested, else None.
    usage : token counts.
    model : the model's name.
    cached : served from a :class:`CachedChatModel`.
    latency_s : wall time of the request (or of the cache lookup).
    sample_index : 0..n-1.
    error : the error message when ``finish_reason == "error"``.
    raw : backend-specific extras (JSON-serializable).
    """

    text: str
    finish_reason: FinishReason = "stop"
    logprobs: list[TokenLogprob] | None = None
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    cached: bool = False
    latency_s: float = 0.0
    sample_index: int = 0
    error: str | None = None
    raw: dict | None = None

    @property
    def ok(self) -> bool:
        return self.finish_reason != "error"

    def replace(self, **changes: Any) -> ChatResponse:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serializable dict (inverse of :meth:`from_dict`)."""
        return {
            "text": self.text,
            "finish_reason": self.finish_reason,
            "logprobs": None
            if self.logprobs is None
            else [{"token": t.token, "logprob": t.logprob, "top": [list(x) for x in t.top]} for t in self.logprobs],
            "usage": {"prompt_tokens": self.usage.prompt_tokens, "completion_tokens": self.usage.completion_tokens},
            "model": self.model,
            "cached": self.cached,
            "latency_s": self.latency_s,
            "sample_index": self.sample_index,
            "error": self.error,
            "raw": self.raw,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ChatResponse:
        lp = d.get("logprobs")
        return cls(
            text=str(d["text"]),
            finish_reason=d.get("finish_reason", "stop"),
            logprobs=None
            if lp is None
            else [
                TokenLogprob(str(t["token"]), float(t["logprob"]), [(str(a), float(b)) for a, b in t.get("top", [])])
                for t in lp
            ],
            usage=Usage(**d.get("usage", {})),
            model=str(d.get("model", "")),
            cached=bool(d.get("cached", False)),
            latency_s=float(d.get("latency_s", 0.0)),
            sample_index=int(d.get("sample_index", 0)),
            error=d.get("error"),
            raw=d.get("raw"),
        )


@dataclass(frozen=True)
class Capabilities:
    """What a model accepts: modalities ⊆ {"text","image","audio","video"}, log-prob support, context size."""

    modalities: tuple[str, ...] = ("text",)
    logprobs: bool = False
    max_top_logprobs: int = 0
    context_tokens: int | None = None


@runtime_checkable
class ChatModel(Protocol):
    """Batch-first chat model: every backend (HF, HTTP, offline, cache wrapper) implements this.

    ``generate`` takes a list of conversations and returns, in input order, a list of ``config.n``
    responses per conversation (``config=None`` means the default :class:`GenerationConfig`).
    """

    name: str

    def capabilities(self) -> Capabilities: ...

    def generate(
        self,
        conversations: Sequence[Conversation],
        config: GenerationConfig | None = ...,
        *,
        progress: bool | str = False,
    ) -> list[list[ChatResponse]]: ...


def _coerce_message(m: Any, i: int, j: int) -> Message:
    if isinstance(m, Message):
        return m
    if isinstance(m, Mapping) and "role" in m and "content" in m:
        return Message(m["role"], m["content"])
    raise TypeError(f"conversations[{i}][{j}] must be a Message or a {{'role','content'}} dict, got {m!r}")


def validate_conversations(
    conversations: Sequence[Sequence[Message]],
    config: GenerationConfig | None = None,
    capabilities: Capabilities | None = None,
) -> list[list[Message]]:
    """Check a batch before any request is sent; returns it as lists of :class:`Message`.

    Raises ``ValueError`` naming the conversation index for an empty conversation or an unknown role,
    :class:`UnsupportedModality` for content outside ``capabilities.modalities``, and ``ValueError``
    when log-probs are requested from a model without them.
    """
    if isinstance(conversations, (str, Message)) or not isinstance(conversations, Sequence):
        raise TypeError(f"conversations must be a list of conversations, got {type(conversations).__name__}")
    if config is not None and not isinstance(config, GenerationConfig):
        raise TypeError(f"config must be a GenerationConfig, got {type(config).__name__}")
    out: list[list[Message]] = []
    for i, conv in enumerate(conversations):
        if isinstance(conv, (str, Message)) or not isinstance(conv, Sequence):
            raise TypeError(f"conversations[{i}] must be a list of Message, got {type(conv).__name__}")
        if len(conv) == 0:
            raise ValueError(f"conversations[{i}] is empty; expected at least one message")
        msgs = [_coerce_message(m, i, j) for j, m in enumerate(conv)]
        for j, m in enumerate(msgs):
            if m.role not in ROLES:
                raise ValueError(f"conversations[{i}][{j}].role must be one of {ROLES}, got {m.role!r}")
        if capabilities is not None:
            extra = conversation_modalities(msgs) - set(capabilities.modalities)
            if extra:
                raise UnsupportedModality(
                    f"conversations[{i}] uses {sorted(extra)} but the model supports {list(capabilities.modalities)}"
                )
        out.append(msgs)
    if capabilities is not None and config is not None and config.logprobs:
        if not capabilities.logprobs:
            raise ValueError("config.logprobs=True but this model does not return log-probabilities")
        if config.top_logprobs > capabilities.max_top_logprobs:
            raise ValueError(
                f"top_logprobs must be <= {capabilities.max_top_logprobs} for this model, got {config.top_logprobs}"
            )
    return out
