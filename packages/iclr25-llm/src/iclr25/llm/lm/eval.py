"""Evaluation: log-probabilities, perplexity (bits/byte), multiple-choice accuracy, generation, model size.

Every function accepts a :class:`~iclr25.llm.lm.model.TinyLlama` or any causal LM whose output
is logits or has ``.logits`` (Hugging Face models).
"""

from __future__ import annotations

import contextlib
import fnmatch
import math
import numbers
import operator
import random
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from iclr25.core.device import compute_dtype
from iclr25.core.modes import eval_mode

from ._kv_compat import cache_kwarg, returned_cache
from .data import _check_stream, eval_windows
from .tokenizers import check_ids

__all__ = [
    "choice_accuracy",
    "cloze_from_corpus",
    "count_bits",
    "generate",
    "log_probs",
    "next_token_accuracy",
    "perplexity",
]

_LN2 = math.log(2.0)


def _vocab(model: nn.Module) -> int | None:
    cfg = getattr(model, "config", None)
    return getattr(cfg, "vocab_size", None)


def _device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


def _logits(out) -> torch.Tensor:
    return out.logits if hasattr(out, "logits") else out


@contextlib.contextmanager
def _eval_mode(model: nn.Module):
    # each submodule's own flag comes back (model.train(was) would reset a frozen part's mode)
    with eval_mode(model), torch.no_grad():
        yield


def _check_ids2d(model: nn.Module, input_ids) -> torch.Tensor:
    if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2 or input_ids.shape[1] < 2:
        shape = tuple(input_ids.shape) if isinstance(input_ids, torch.Tensor) else type(input_ids).__name__
        raise ValueError(f"input_ids must be a (batch, seq >= 2) integer tensor; got {shape}")
    vocab = _vocab(model)
    return check_ids(input_ids, vocab, "input_ids") if vocab else input_ids.long()


def log_probs(model: nn.Module, input_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token log-probabilities from one forward pass (log-softmax in fp32, or fp64 for an fp64
    model; gradients kept).

    Parameters
    ----------
    model : nn.Module
    input_ids : (batch, seq) long tensor, seq >= 2

    Returns
    -------
    token_logp : (batch, seq - 1) tensor
        ``log p(input_ids[:, t+1] | input_ids[:, :t+1])``.
    logp_full : (batch, seq - 1, vocab) tensor
        The full next-token log-distribution at each position.
    """
    input_ids = _check_ids2d(model, input_ids)
    logits = _logits(model(input_ids.to(_device(model))))[:, :-1]
    logits = logits.to(compute_dtype(logits))
    logp = F.log_softmax(logits, dim=-1)
    tgt = input_ids[:, 1:].to(logp.device)
    return logp.gather(-1, tgt.unsqueeze(-1)).squeeze(-1), logp


def _first_windows(windows: list, max_windows: int | None) -> list:
    if max_windows is None:
        return windows
    if not isinstance(max_windows, int) or max_windows < 1:
        raise ValueError(f"max_windows must be a positive int; got {max_windows!r}")
    return windows[:max_windows]


def perplexity(
    model: nn.Module,
    tokens: torch.Tensor,
    seq_len: int = 128,
    stride: int | None = None,
    max_windows: int | None = None,
    batch_size: int = 32,
    n_bytes: int | None = None,
) -> dict[str, float]:
    """Cross-entropy of a token stream under the model, each target scored exactly once.

    Parameters
    ----------
    model : nn.Module
    tokens : (n,) long tensor
        The stream; targets are ``tokens[1:]``.
    seq_len : int
        Context window.
    stride : int, optional
        Sliding-window mode: windows advance by ``stride`` and score only their last ``stride``
        targets (see :func:`~iclr25.llm.lm.data.eval_windows`). Default: disjoint windows.
    max_windows : int, optional
        Score only the first this many windows.
    batch_size : int
        Windows per forward pass.
    n_bytes : int, optional
        UTF-8 bytes spanned by the scored targets, for ``bits_per_byte``; default one byte per
        scored token (exact for byte-level tokenizers).

    Returns
    -------
    dict
        ``nll`` (nats/token), ``ppl``, ``bits_per_token``, ``bits_per_byte``, ``n_tokens`` (scored).

    Raises
    ------
    FloatingPointError
        If the model produces NaN logits.
    """
    tokens = _check_stream(tokens, 1, _vocab(model))
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int; got {batch_size!r}")
    if n_bytes is not None and not (isinstance(n_bytes, numbers.Real) and n_bytes > 0):
        raise ValueError(f"n_bytes must be a positive number of bytes (or None); got {n_bytes!r}")
    windows = _first_windows(eval_windows(tokens.numel(), seq_len, stride), max_windows)
    # windows of equal length batch together; the last one is usually shorter
    by_len: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    for w in windows:
        by_len[w[1] - w[0]].append(w)
    device = _device(model)
    total, count = 0.0, 0
    with _eval_mode(model):
        for length, group in by_len.items():
            for i in range(0, len(group), batch_size):
                chunk = group[i : i + batch_size]
                ids = torch.stack([tokens[b:e] for b, e, _ in chunk]).to(device)
                logits = _logits(model(ids[:, :-1]))
                logits = logits.to(compute_dtype(logits))
                if torch.isnan(logits).any():
                    raise FloatingPointError("model produced NaN logits during perplexity evaluation")
                nll = F.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")  # (b, length-1)
                for row, (_, _, n) in zip(nll, chunk, strict=True):
                    total += float(row[length - 1 - n :].double().sum())
                    count += n
    nll_mean = total / count
    bytes_ = count if n_bytes is None else n_bytes
    return {
        "nll": nll_mean,
        "ppl": math.exp(nll_mean),
        "bits_per_token": nll_mean / _LN2,
        "bits_per_byte": total / _LN2 / bytes_,
        "n_tokens": count,
    }


def next_token_accuracy(
    model: nn.Module, tokens: torch.Tensor, seq_len: int = 128, max_windows: int | None = None
) -> float:
    """Fraction of targets where the arg-max prediction is right (disjoint windows)."""
    tokens = _check_stream(tokens, 1, _vocab(model))
    windows = _first_windows(eval_windows(tokens.numel(), seq_len), max_windows)
    device = _device(model)
    hit = n = 0
    with _eval_mode(model):
        for b, e, _ in windows:
            ids = tokens[b:e].to(device)[None]
            pred = _logits(model(ids[:, :-1])).argmax(-1)
            hit += int((pred == ids[:, 1:]).sum())
            n += e - b - 1
    return hit / n


def choice_accuracy(model: nn.Module, tok, items: Sequence[tuple[str, Sequence[str], int]]) -> dict[str, float]:
    """Multiple-choice accuracy, lm-eval-harness style.

    Each choice is scored by the summed log-likelihood of its tokens after the context (``acc``)
    and by that sum divided by the choice's UTF-8 length (``acc_norm``).

    Parameters
    ----------
    model : nn.Module
    tok : tokenizer
        Anything with ``encode(str) -> (n,) long tensor`` (a list of int ids works too).
    items : sequence of (context, choices, answer_index)
        ``context`` must encode to at least one token.

    Returns
    -------
    dict
        ``acc``, ``acc_norm`` and ``n`` (number of items).
    """
    if not items:
        raise ValueError("items is empty")
    max_len = getattr(getattr(model, "config", None), "max_seq_len", None) or getattr(
        getattr(model, "config", None), "max_position_embeddings", None
    )
    acc = acc_norm = 0
    for j, item in enumerate(items):
        try:
            context, choices, answer = item
        except (TypeError, ValueError) as exc:
            raise ValueError(f"items[{j}] must be (context, choices, answer); got {item!r}") from exc
        try:  # any integer type (numpy / torch integers from a dataset too), not a float
            index = operator.index(answer)
        except TypeError:
            index = -1
        n_choices = len(choices) if hasattr(choices, "__len__") else 0
        if not n_choices or not 0 <= index < n_choices:
            raise ValueError(f"items[{j}]: answer must be an int indexing into {n_choices} choices; got {answer!r}")
        answer = index
        ctx = torch.as_tensor(tok.encode(context), dtype=torch.long)
        if ctx.numel() == 0:
            raise ValueError(f"items[{j}]: context encodes to no tokens")
        scores, normed = [], []
        for choice in choices:
            cont = torch.as_tensor(tok.encode(choice), dtype=torch.long)
            ids = torch.cat([ctx, cont])
            if max_len and ids.numel() > max_len:  # keep the continuation, drop the oldest context
                ids = ids[-max_len:]
            with _eval_mode(model):
                lp, _ = log_probs(model, ids[None])
            s = float(lp[0, -cont.numel() :].sum()) if cont.numel() else 0.0
            scores.append(s)
            normed.append(s / max(1, len(choice.encode("utf-8"))))
        acc += int(max(range(len(scores)), key=scores.__getitem__) == answer)
        acc_norm += int(max(range(len(normed)), key=normed.__getitem__) == answer)
    return {"acc": acc / len(items), "acc_norm": acc_norm / len(items), "n": len(items)}


def cloze_from_corpus(
    texts: Mapping[str, str] | Iterable[str] | str,
    n: int,
    n_choices: int = 4,
    seed: int = 0,
    context_lines: int = 2,
    min_chars: int = 20,
) -> list[tuple[str, list[str], int]]:
    """Offline "which line comes next" items for :func:`choice_accuracy`.

    The context is ``context_lines`` consecutive lines (joined with newlines, ending in one); the
    right answer is the next line; distractors are other lines of the same length bucket
    (``len // 10``) drawn from the same texts, so length alone does not give the answer away.
    ``texts`` is ``{title: text}`` (the values are used), an iterable of texts, or one text.

    Returns
    -------
    list of (context, choices, answer_index)
    """
    if isinstance(texts, str):  # one text, not an iterable of one-character documents
        texts = [texts]
    docs = list(texts.values()) if isinstance(texts, Mapping) else list(texts)
    if not docs or not any(d.strip() for d in docs):
        raise ValueError("texts is empty: cloze_from_corpus needs non-empty documents")
    if not isinstance(n_choices, int) or n_choices < 2:
        raise ValueError(f"n_choices must be an int >= 2; got {n_choices!r}")
    if not isinstance(context_lines, int) or context_lines < 0:
        raise ValueError(f"context_lines must be a non-negative int; got {context_lines!r}")
    lines = [[ln.strip() for ln in d.splitlines() if ln.strip()] for d in docs]
    buckets: dict[int, list[str]] = defaultdict(list)
    candidates = []
    for di, doc in enumerate(lines):
        for li, ln in enumerate(doc):
            if len(ln) >= min_chars:
                buckets[len(ln) // 10].append(ln)
                if li >= context_lines:
                    candidates.append((di, li))
    rng = random.Random(seed)
    rng.shuffle(candidates)
    items = []
    for di, li in candidates:
        if len(items) >= n:
            break
        answer_line = lines[di][li]
        pool = sorted(set(buckets[len(answer_line) // 10]) - {answer_line})
        if len(pool) < n_choices - 1:
            continue
        choices = rng.sample(pool, n_choices - 1)
        k = rng.randrange(n_choices)
        choices.insert(k, answer_line)
        context = "\n".join(lines[di][li - context_lines : li]) + "\n"
        items.append((context, choices, k))
    if len(items) < n:
        raise ValueError(f"texts hold only {len(items)} usable items; asked for n={n}")
    return items


def generate(
    model: nn.Module,
    prompt_ids: torch.Tensor,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    generator: torch.Generator | None = None,
    use_cache: bool = True,
) -> torch.Tensor:
    """Sample a continuation: returns ``(batch, prompt + max_new_tokens)`` ids.

    ``temperature=0`` decodes greedily. With ``use_cache`` the model is called with its KV cache
    (``past_key_values``, or ``cache`` on transformers 5.x) and ``use_cache=True``; without,
    the whole sequence is recomputed each step.

    Parameters
    ----------
    model : nn.Module
    prompt_ids : (batch, prompt) or (prompt,) long tensor
    max_new_tokens : int
    temperature : float
        Softmax temperature (>= 0).
    top_k : int, optional
        Sample only among the ``top_k`` most likely tokens.
    generator : torch.Generator, optional
        Source of randomness for sampling (on the model's device).
    use_cache : bool
    """
    if not isinstance(prompt_ids, torch.Tensor) or prompt_ids.dim() not in (1, 2) or prompt_ids.shape[-1] < 1:
        raise ValueError("prompt_ids must be a non-empty (prompt,) or (batch, prompt) integer tensor")
    if not isinstance(max_new_tokens, int) or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be a non-negative int; got {max_new_tokens!r}")
    try:
        temperature_ok = bool(temperature >= 0)  # False for NaN
    except (TypeError, RuntimeError):
        temperature_ok = False
    if not temperature_ok:
        raise ValueError(f"temperature must be a number >= 0; got {temperature!r}")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
        raise ValueError(f"top_k must be a positive int; got {top_k!r}")
    squeeze = prompt_ids.dim() == 1
    ids = prompt_ids[None] if squeeze else prompt_ids
    # TinyLlama has a hard position limit: fail before any compute, not after max_seq_len - prompt steps
    # (the last sampled token is never fed back, hence the - 1)
    limit = getattr(getattr(model, "config", None), "max_seq_len", None)
    if isinstance(limit, int) and max_new_tokens and ids.shape[1] + max_new_tokens - 1 > limit:
        raise ValueError(
            f"prompt of {ids.shape[1]} tokens + max_new_tokens={max_new_tokens} needs "
            f"{ids.shape[1] + max_new_tokens - 1} positions, more than the model's max_seq_len={limit}"
        )
    vocab = _vocab(model)
    if vocab:
        ids = check_ids(ids, vocab, "prompt_ids")
    ids = ids.to(_device(model))
    past = None
    cache_kw = cache_kwarg(model)
    with _eval_mode(model):
        for _ in range(max_new_tokens):
            if use_cache:
                out = model(ids if past is None else ids[:, -1:], **{cache_kw: past}, use_cache=True)
                past = returned_cache(out)
            else:
                out = model(ids)
            logits = _logits(out)[:, -1].float()
            if temperature == 0:
                nxt = logits.argmax(-1, keepdim=True)
            else:
                logits = logits / temperature
                if top_k is not None and top_k < logits.shape[-1]:
                    kth = logits.topk(top_k, dim=-1).values[:, -1:]
                    logits = logits.masked_fill(logits < kth, float("-inf"))
                nxt = torch.multinomial(F.softmax(logits, -1), 1, generator=generator)
            ids = torch.cat([ids, nxt], dim=1)
    return ids[0] if squeeze else ids


def count_bits(
    model: nn.Module,
    policy: Mapping[str, float] | Callable[[str, torch.Tensor], float] | None = None,
    default: float = 16.0,
) -> float:
    """Model size in bits: Σ over parameters of ``numel × bits``.

    Parameters
    ----------
    model : nn.Module
        Tied parameters are counted once (``named_parameters`` deduplicates them).
    policy : mapping or callable, optional
        Bits per weight: either ``{pattern: bits}`` where patterns are ``fnmatch`` globs over
        parameter names (first match wins; a bare name like ``"q_proj.weight"`` also matches as a
        suffix), or ``policy(name, param) -> bits``.
    default : float
        Bits for parameters no pattern matches.
    """
    if policy is not None and not callable(policy) and not isinstance(policy, Mapping):
        raise TypeError(f"policy must be a mapping {{pattern: bits}} or a callable; got {type(policy).__name__}")
    total = 0.0
    for name, p in model.named_parameters():
        bits = default
        if callable(policy):
            bits = float(policy(name, p))
        elif policy:
            for pat, b in policy.items():
                if fnmatch.fnmatchcase(name, pat) or fnmatch.fnmatchcase(name, "*." + pat):
                    bits = float(b)
                    break
        if bits < 0:
            raise ValueError(f"policy gave negative bits ({bits}) for {name}")
        total += p.numel() * bits
    return total
