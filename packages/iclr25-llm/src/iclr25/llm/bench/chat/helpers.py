"""One-call helpers: ``chat``, ``choice_probability`` (judge read-out from log-probs), ``summarize_usage``."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .types import ChatModel, ChatRequestError, ChatResponse, GenerationConfig, LogprobsUnavailable, Message

__all__ = ["chat", "choice_probability", "summarize_usage"]


def chat(model: ChatModel, prompt: str | Sequence[Message], *, system: str | None = None, **config: Any) -> str:
    """Send one conversation (or one user text) and return the first sample's text.

    ``system`` is prepended as a system message (to a conversation too, unless it already starts with
    one: then ``ValueError``). ``config`` keywords are :class:`GenerationConfig` fields. Raises
    :class:`ChatRequestError` when the backend recorded an error.
    """
    if isinstance(prompt, str):
        conv = ([Message("system", system)] if system else []) + [Message("user", prompt)]
    else:
        conv = list(prompt)
        if system:
            first = conv[0] if conv else None
            role = first.get("role") if isinstance(first, Mapping) else getattr(first, "role", None)
            if role == "system":
                raise ValueError("system= was given but the conversation already starts with a system message")
            conv = [Message("system", system), *conv]
    r = model.generate([conv], GenerationConfig(**config))[0][0]
    if r.finish_reason == "error":
        raise ChatRequestError(f"{model.name}: {r.error}")
    return r.text


def _norm(token: str) -> str:
    return token.strip().casefold()


def choice_probability(resp: ChatResponse, options: Mapping[str, Sequence[str]]) -> dict[str, float]:
    """Probability of each option from the first generated token's top log-probs.

    Each option lists token variants; variants and top tokens are compared after stripping spaces and
    case-folding, so ``{"yes": ["Yes"]}`` also collects ``" yes"``. Probabilities of matching top tokens
    are summed per option (each top token counted once) and renormalized over the options.

    Parameters
    ----------
    resp : a response generated with ``logprobs=True, top_logprobs=k``.
    options : ``{option: [token variants]}``.

    Returns
    -------
    dict : ``{option: probability}`` summing to 1.

    Raises
    ------
    LogprobsUnavailable : the response has no log-probs, or no option appears among the top tokens.
    """
    if not options:
        raise ValueError("options must name at least one option")
    if not resp.logprobs:
        raise LogprobsUnavailable(
            f"response has no log-probabilities (finish_reason={resp.finish_reason!r}); "
            "generate with GenerationConfig(logprobs=True, top_logprobs=k) or fall back to sampling"
        )
    first = resp.logprobs[0]
    top = list(first.top) or [(first.token, first.logprob)]
    variants = {opt: {_norm(v) for v in vs} for opt, vs in options.items()}
    mass = dict.fromkeys(options, 0.0)
    for tok, lp in top:
        nt = _norm(tok)
        for opt, vs in variants.items():
            if nt in vs:
                mass[opt] += math.exp(lp)
                break
    total = sum(mass.values())
    if total <= 0:
        raise LogprobsUnavailable(f"none of the options {list(options)} is among the first token's top log-probs")
    return {k: v / total for k, v in mass.items()}


def summarize_usage(responses: Iterable[ChatResponse] | Iterable[Iterable[ChatResponse]]) -> dict[str, float]:
    """Totals over responses (flat or ``[conv][sample]``): requests, tokens, errors, cache hits, latency."""
    flat: list[ChatResponse] = []
    for r in responses:
        if isinstance(r, ChatResponse):
            flat.append(r)
        else:
            flat.extend(r)
    pt = sum(r.usage.prompt_tokens for r in flat)
    ct = sum(r.usage.completion_tokens for r in flat)
    return {
        "responses": len(flat),
        "prompt_tokens": pt,
        "completion_tokens": ct,
        "total_tokens": pt + ct,
        "errors": sum(r.finish_reason == "error" for r in flat),
        "cached": sum(r.cached for r in flat),
        "latency_s": sum(r.latency_s for r in flat),
    }
