"""``load_chat_model("hf:<path>" | "openai:<base_url>#<model>" | "offline:<responder>")`` and a backend registry."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .types import ChatModel

__all__ = ["load_chat_model", "register_backend"]

_BACKENDS: dict[str, Callable[..., ChatModel]] = {}


def register_backend(prefix: str, factory: Callable[..., ChatModel]) -> None:
    """Make ``load_chat_model("<prefix>:<rest>", **kw)`` call ``factory(rest, **kw)``."""
    if not prefix or ":" in prefix:
        raise ValueError(f"prefix must be a non-empty name without ':', got {prefix!r}")
    _BACKENDS[prefix] = factory


def _hf(rest: str, **kw: Any) -> ChatModel:
    from .hf import HFChatModel

    return HFChatModel(rest, **kw)


def _openai(rest: str, **kw: Any) -> ChatModel:
    from .openai import OpenAIChatModel

    if "#" not in rest:
        raise ValueError(f"openai spec must be 'openai:<base_url>#<model>', got 'openai:{rest}'")
    url, model = rest.rsplit("#", 1)
    return OpenAIChatModel(url, model, **kw)


def _offline(rest: str, **kw: Any) -> ChatModel:
    from . import offline

    kind = rest or "echo"
    if kind == "echo":
        responder = offline.echo()
    elif kind == "hashed":
        responder = offline.hashed(kw.pop("choices", ["A", "B", "C", "D"]), seed=kw.pop("seed", 0))
    elif kind == "letter_guesser":
        responder = offline.letter_guesser(seed=kw.pop("seed", 0))
    else:
        raise ValueError(f"offline responder must be echo, hashed or letter_guesser, got {kind!r}")
    kw.setdefault("name", f"offline:{kind}")
    return offline.OfflineChatModel(responder, **kw)


register_backend("hf", _hf)
register_backend("openai", _openai)
register_backend("offline", _offline)


def load_chat_model(spec: str, **kwargs: Any) -> ChatModel:
    """Build a chat model from a provider string.

    ``"hf:<local dir or hub id>"``, ``"openai:http://127.0.0.1:8000/v1#<model>"``, ``"offline:echo"``,
    ``"offline:hashed"`` (``choices=``, ``seed=``), ``"offline:letter_guesser"``, or any prefix added
    with :func:`register_backend`. ``kwargs`` go to the backend's constructor.
    """
    if not isinstance(spec, str) or ":" not in spec:
        raise ValueError(f"spec must look like '<backend>:<target>', got {spec!r}; backends: {sorted(_BACKENDS)}")
    prefix, rest = spec.split(":", 1)
    if prefix not in _BACKENDS:
        raise ValueError(f"unknown backend {prefix!r} in {spec!r}; known: {sorted(_BACKENDS)}")
    return _BACKENDS[prefix](rest, **kwargs)
