"""One chat interface for local HF models, OpenAI-compatible servers and a deterministic offline model.

Shared model-access layer of ``iclr25.llm.bench`` (no paper). Design modeled on lm-evaluation-harness
(batch-first API, wrapper cache, order restoration), HELM (errors as data, ``cached`` flag, sample index
in the key) and inspect_ai (output vs transport config, expiry/scopes, mock model)::

    conversations ─► ChatModel.generate(convs, GenerationConfig) ─► [conv][sample] ChatResponse
                      ├─ HFChatModel        local causal LM: chat template, left padding, per-request seeds
                      ├─ OpenAIChatModel    stdlib HTTP, thread pool, retries/backoff, rate limits
                      ├─ OfflineChatModel   deterministic responders (echo/scripted/hashed/letter_guesser)
                      └─ CachedChatModel    SQLite+JSON cache around any of the above
    serve_openai(any ChatModel) ─► http://127.0.0.1:<port>/v1  (OpenAI-compatible, loopback)
"""

from .cache import CachedChatModel, cache_key
from .helpers import chat, choice_probability, summarize_usage
from .hf import HFChatModel
from .offline import OfflineChatModel, echo, hashed, letter_guesser, scripted
from .openai import OpenAIChatModel
from .ratelimit import RateLimiter
from .registry import load_chat_model, register_backend
from .server import ServerHandle, serve_openai
from .types import (
    AudioPart,
    Capabilities,
    ChatModel,
    ChatRequestError,
    ChatResponse,
    GenerationConfig,
    ImagePart,
    LogprobsUnavailable,
    Message,
    TextPart,
    TokenLogprob,
    TransportConfig,
    UnsupportedModality,
    Usage,
    VideoPart,
)

__all__ = [
    "AudioPart",
    "CachedChatModel",
    "Capabilities",
    "ChatModel",
    "ChatRequestError",
    "ChatResponse",
    "GenerationConfig",
    "HFChatModel",
    "ImagePart",
    "LogprobsUnavailable",
    "Message",
    "OfflineChatModel",
    "OpenAIChatModel",
    "RateLimiter",
    "ServerHandle",
    "TextPart",
    "TokenLogprob",
    "TransportConfig",
    "UnsupportedModality",
    "Usage",
    "VideoPart",
    "cache_key",
    "chat",
    "choice_probability",
    "echo",
    "hashed",
    "letter_guesser",
    "load_chat_model",
    "register_backend",
    "scripted",
    "serve_openai",
    "summarize_usage",
]
