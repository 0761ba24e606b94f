"""A deterministic offline chat model and ready-made responders (no I/O, no randomness).

``OfflineChatModel(responder)`` calls ``responder(conversation, config, sample_index)`` for every
requested sample; a responder returns a string or a full :class:`ChatResponse`. ``logprobs`` may be a
first-token distribution (a dict or a callable) so code that reads judge probabilities is testable.
"""

from __future__ import annotations

import hashlib
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ._util import Bar, canonical_json, truncate_at_stop
from .media import canonical_conversation
from .types import (
    DEFAULT_GENERATION,
    MAX_TOP_LOGPROBS,
    MODALITIES,
    Capabilities,
    ChatResponse,
    Conversation,
    GenerationConfig,
    TokenLogprob,
    Usage,
    message_text,
    validate_conversations,
)

__all__ = ["OfflineChatModel", "echo", "hashed", "last_user_text", "letter_guesser", "scripted"]

Responder = Callable[[Conversation, GenerationConfig, int], "str | ChatResponse"]
LogprobSpec = Mapping[str, float] | Callable[[Conversation, GenerationConfig, int, str], Mapping[str, float]]


def last_user_text(conversation: Conversation) -> str:
    """Text of the last user message ("" when there is none)."""
    for m in reversed(conversation):
        if m.role == "user":
            return message_text(m)
    return ""


class _Responder:
    """Base of the ready-made responders: a stable ``identity`` enters cache keys."""

    identity: dict[str, Any]

    def __repr__(self) -> str:
        return f"{type(self).__name__.lstrip('_')}({canonical_json(self.identity)})"


class _Echo(_Responder):
    def __init__(self) -> None:
        self.identity = {"responder": "echo"}

    def __call__(self, conversation: Conversation, config: GenerationConfig, sample_index: int) -> str:
        return last_user_text(conversation)


def echo() -> Responder:
    """Reply with the text of the last user message."""
    return _Echo()


class _Scripted(_Responder):
    def __init__(self, rules: Sequence[tuple[str, Any]], default: str) -> None:
        self.rules = [(re.compile(p), r) for p, r in rules]
        self.default = default
        self.identity = {
            "responder": "scripted",
            "rules": [(p, r if isinstance(r, str) else getattr(r, "__qualname__", repr(r))) for p, r in rules],
            "default": default,
        }

    def __call__(self, conversation: Conversation, config: GenerationConfig, sample_index: int) -> Any:
        text = last_user_text(conversation)
        for pat, reply in self.rules:
            m = pat.search(text)
            if m:
                return reply if isinstance(reply, str) else reply(m, conversation)
        return self.default


def scripted(rules: Sequence[tuple[str, str | Callable[..., str]]], default: str = "") -> Responder:
    """First rule whose regex matches (``re.search``) the last user text wins.

    A reply is a string or ``callable(match, conversation) -> str``; ``default`` when nothing matches.
    """
    for p, _ in rules:
        re.compile(p)  # fail early on a bad pattern
    return _Scripted(rules, default)


class _Hashed(_Responder):
    def __init__(self, choices: Sequence[str], seed: int) -> None:
        if not choices:
            raise ValueError("hashed(choices): choices must be non-empty")
        self.choices, self.seed = list(choices), int(seed)
        self.identity = {"responder": "hashed", "choices": self.choices, "seed": self.seed}

    def __call__(self, conversation: Conversation, config: GenerationConfig, sample_index: int) -> str:
        key = canonical_json([self.seed, canonical_conversation(conversation), sample_index])
        h = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little")
        return self.choices[h % len(self.choices)]


def hashed(choices: Sequence[str], seed: int = 0) -> Responder:
    """Pick a choice by SHA-256 of (seed, canonical conversation, sample index): a deterministic random baseline."""
    return _Hashed(choices, seed)


class _LetterGuesser(_Responder):
    _OPT = re.compile(r"(?m)(?:^|\s)\(?([A-Z])[\).:]\s")

    def __init__(self, seed: int) -> None:
        self.seed = int(seed)
        self.identity = {"responder": "letter_guesser", "seed": self.seed}

    def __call__(self, conversation: Conversation, config: GenerationConfig, sample_index: int) -> str:
        text = last_user_text(conversation)
        letters = sorted(set(self._OPT.findall(text))) or ["A", "B", "C", "D"]
        key = canonical_json([self.seed, canonical_conversation(conversation), sample_index])
        h = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little")
        return letters[h % len(letters)]


def letter_guesser(seed: int = 0) -> Responder:
    """Answer a multiple-choice prompt with a hashed pick among the option letters it lists ("A." / "(B)")."""
    return _LetterGuesser(seed)


def _count_tokens(text: str) -> int:
    return len(text.split())


class OfflineChatModel:
    """Deterministic in-process chat model.

    Parameters
    ----------
    responder : ``responder(conversation, config, sample_index) -> str | ChatResponse``.
    name : identity used in cache keys and reports.
    logprobs : first-token distribution ``{token: probability}`` (or a callable
        ``(conversation, config, sample_index, text) -> dict``); enables ``config.logprobs``.
    modalities : content types accepted (a subset of text/image/audio/video).

    Notes
    -----
    Tokens are whitespace-separated words: ``max_tokens`` truncates to that many words
    (``finish_reason="length"``) and ``usage`` counts words.
    """

    def __init__(
        self,
        responder: Responder,
        *,
        name: str = "offline",
        logprobs: LogprobSpec | None = None,
        modalities: Sequence[str] = ("text",),
    ) -> None:
        if not callable(responder):
            raise TypeError(f"responder must be callable, got {type(responder).__name__}")
        bad = set(modalities) - set(MODALITIES)
        if bad or "text" not in modalities:
            raise ValueError(f"modalities must include 'text' and be a subset of {MODALITIES}, got {modalities!r}")
        if logprobs is not None and not (callable(logprobs) or isinstance(logprobs, Mapping)):
            raise TypeError("logprobs must be a {token: probability} mapping, a callable or None")
        self.responder, self.name, self._logprobs, self.modalities = responder, name, logprobs, tuple(modalities)

    def capabilities(self) -> Capabilities:
        has = self._logprobs is not None
        return Capabilities(self.modalities, has, MAX_TOP_LOGPROBS if has else 0, None)

    def cache_identity(self) -> dict[str, Any]:
        ident = getattr(self.responder, "identity", None) or {"responder": getattr(self.responder, "__qualname__", "?")}
        return {"backend": "offline", "responder": ident}

    def _first_token(self, conv: Conversation, config: GenerationConfig, i: int, text: str) -> list[TokenLogprob]:
        dist = self._logprobs(conv, config, i, text) if callable(self._logprobs) else self._logprobs
        items = sorted(((str(t), float(p)) for t, p in dist.items() if p > 0), key=lambda tp: -tp[1])
        if not items:
            raise ValueError("offline logprobs distribution has no positive probability")
        prefix = [tp for tp in items if text.startswith(tp[0])]
        token, p = max(prefix, key=lambda tp: len(tp[0])) if prefix else items[0]
        top = [(t, math.log(q)) for t, q in items[: config.top_logprobs]]
        return [TokenLogprob(token, math.log(p), top)]

    def generate(
        self,
        conversations: Sequence[Conversation],
        config: GenerationConfig | None = DEFAULT_GENERATION,
        *,
        progress: bool | str = False,
    ) -> list[list[ChatResponse]]:
        """Run the responder for every (conversation, sample); see :class:`ChatModel`."""
        config = DEFAULT_GENERATION if config is None else config  # None: the default config
        convs = validate_conversations(conversations, config, self.capabilities())
        bar = Bar(progress, len(convs), self.name)
        out: list[list[ChatResponse]] = []
        for conv in convs:
            row = []
            prompt_tokens = sum(_count_tokens(message_text(m)) for m in conv)
            for i in range(config.n):
                t0 = time.perf_counter()
                r = self.responder(conv, config, i)
                if isinstance(r, ChatResponse):
                    row.append(r.replace(model=r.model or self.name, sample_index=i))
                    continue
                text, _stopped = truncate_at_stop(str(r), config.stop)
                words = text.split()
                finish = "stop"
                if len(words) > config.max_tokens:
                    # keep the original spacing of the kept words
                    text = " ".join(words[: config.max_tokens])
                    finish = "length"
                lp = self._first_token(conv, config, i, text) if config.logprobs else None
                usage = Usage(prompt_tokens, min(len(words), config.max_tokens))
                row.append(
                    ChatResponse(text, finish, lp, usage, self.name, False, time.perf_counter() - t0, i, None, None)
                )
            out.append(row)
            bar.update()
        bar.close()
        return out
