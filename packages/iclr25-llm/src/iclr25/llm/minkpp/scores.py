"""Membership scores from one forward pass: Loss, Zlib, Min-K% and Min-K%++.

All scores follow "higher = more likely a member". Positions 2…n are scored (the first token has
no prediction), so a sequence of ``n`` tokens has ``n − 1`` token scores and Min-K% / Min-K%++
average the ``⌊k·(n−1)⌋`` smallest of them (at least one), as in the official script.
"""

from __future__ import annotations

import inspect
import math
import numbers
import zlib
from collections.abc import Iterable, Sequence

import torch
from torch import nn

from iclr25.core.modes import eval_mode
from iclr25.core.triton import Backend, BackendOp

from .reference import token_stats_reference

__all__ = [
    "SIGMA_FLOOR",
    "TOKEN_STATS",
    "loss_scores",
    "min_k_mean",
    "mink_pp_scores",
    "mink_scores",
    "model_token_stats",
    "score_all",
    "token_stats",
    "zlib_scores",
]

# The official code divides by sqrt(σ²) with no floor; a degenerate (one-hot) next-token
# distribution then gives 0/0. We floor σ at 1e-6 so scores stay finite (documented deviation).
SIGMA_FLOOR = 1e-6


def _triton_fn(logits, targets):
    from .kernels import token_stats_triton

    return token_stats_triton(logits, targets)


def _triton_limits(logits, targets) -> list[str]:
    reasons = []
    if logits.requires_grad and torch.is_grad_enabled():
        reasons.append("the fused kernel is forward-only; logits require grad")
    if logits.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        reasons.append(f"the fused kernel takes fp32/fp16/bf16 logits, got {logits.dtype}")
    # the kernel reads one target per row: other shapes would index past targets (the reference broadcasts)
    if logits.dim() < 1 or tuple(targets.shape) != tuple(logits.shape[:-1]):
        reasons.append(
            f"the fused kernel takes targets of shape logits.shape[:-1] = {tuple(logits.shape[:-1])}, "
            f"got {tuple(targets.shape)}"
        )
    return reasons


TOKEN_STATS = BackendOp(
    "minkpp_token_stats",
    [
        Backend("triton", _triton_fn, supports=_triton_limits, uses_triton=True),
        Backend("reference", token_stats_reference),
    ],
)


def token_stats(
    logits: torch.Tensor, targets: torch.Tensor, *, backend: str = "auto"
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-token ``ell = log p(x_t)``, ``mu_t = Σ p log p`` and ``sigma_t`` (floored at 1e-6).

    Parameters
    ----------
    logits : (..., V) float tensor
        Next-token logits, already aligned with ``targets`` (``logits[..., i, :]`` predicts
        ``targets[..., i]``). Accumulated in float32 at least; float64 stays float64.
    targets : (...) integer tensor
        Observed tokens in ``[0, V)``; same leading shape as ``logits``.
    backend : {"auto", "reference", "triton"}
        ``auto`` uses the fused Triton kernel on CUDA, else plain torch.

    Returns
    -------
    ell, mu, sigma : (...) float32 tensors (float64 for float64 logits, whichever backend runs)
        The Min-K%++ token score is ``(ell − mu) / sigma``. Forward only: computed from
        ``logits.detach()``, so they carry no gradient even when ``logits`` requires one.

    Raises
    ------
    TypeError
        Non-floating ``logits`` or non-integer ``targets``.
    ValueError
        ``targets`` not of shape ``logits.shape[:-1]`` or outside ``[0, V)``; an unknown ``backend``.
    BackendUnavailableError
        ``backend="triton"`` on an input the kernel cannot run (no CUDA tensors without
        ``TRITON_INTERPRET=1``, float64 logits).
    FloatingPointError
        When ``logits`` holds NaN or +inf, or a row whose logits are all ``-inf``.
    """
    if not isinstance(logits, torch.Tensor) or not logits.is_floating_point():
        got = logits.dtype if isinstance(logits, torch.Tensor) else type(logits).__name__
        raise TypeError(f"logits must be a floating (..., V) tensor; got {got}")
    if logits.dim() < 1:
        raise ValueError("logits must be a floating (..., V) tensor with a vocabulary axis; got a 0-d tensor")
    if (
        not isinstance(targets, torch.Tensor)
        or targets.is_floating_point()
        or targets.is_complex()
        or targets.dtype == torch.bool
    ):
        got = targets.dtype if isinstance(targets, torch.Tensor) else type(targets).__name__
        raise TypeError(f"targets must be an integer tensor; got {got}")
    if tuple(targets.shape) != tuple(logits.shape[:-1]):
        raise ValueError(
            f"targets must have shape logits.shape[:-1] = {tuple(logits.shape[:-1])}; got {tuple(targets.shape)}"
        )
    V = logits.shape[-1]
    if targets.numel() and (int(targets.min()) < 0 or int(targets.max()) >= V):
        raise ValueError(f"targets must lie in [0, {V}); got range [{int(targets.min())}, {int(targets.max())}]")
    # A row's maximum is NaN or +inf exactly when the row holds one (amax propagates NaN): one read of
    # the logits and a (...)-sized result, where isnan/isposinf would each write a (..., V) bool
    # tensor, as large as the log-probabilities the fused kernel exists to avoid.
    if logits.numel():
        row_max = logits.amax(-1)
        if bool(torch.isnan(row_max).any()) or bool(torch.isposinf(row_max).any()):
            raise FloatingPointError("logits contain NaN or +inf; cannot score")
    ell, mu, var = TOKEN_STATS(logits.detach(), targets, backend=backend)
    # With finite or -inf logits the only NaN source is a row that is all -inf (softmax 0/0); the
    # check reads the small (...) outputs, not another pass over the (..., V) logits.
    if bool(torch.isnan(ell).any()) or bool(torch.isnan(var).any()):
        raise FloatingPointError("logits contain a row whose entries are all -inf; cannot score")
    return ell, mu, var.clamp_min(0).sqrt().clamp_min(SIGMA_FLOOR)


def _is_int(v) -> bool:
    # numbers.Integral admits numpy ints (np.int64 is not an int subclass); a bool is an int to
    # Python but never a count (True was 1 exposure)
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _is_real(v) -> bool:
    # numbers.Real admits numpy scalars (np.float32 is not a float subclass)
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _check_k(k) -> float:
    if not _is_real(k) or not 0.0 < float(k) <= 1.0:
        raise ValueError(f"k must be a fraction in (0, 1]; got {k!r}")
    return float(k)


def _check_ks(ks, methods: Sequence[str]) -> tuple[float, ...]:
    # A bare number is not a sequence of ks (iterating it raised "'float' object is not iterable").
    try:
        if isinstance(ks, (str, bytes)):
            raise TypeError
        out = tuple(ks)
    except TypeError:
        raise ValueError(f"ks must be a sequence of fractions in (0, 1], e.g. (0.2, 0.5); got {ks!r}") from None
    if not out and ("mink" in methods or "mink++" in methods):
        raise ValueError(f"ks must hold at least one fraction in (0, 1] for methods 'mink' / 'mink++'; got {ks!r}")
    return tuple(_check_k(k) for k in out)


def _check_not_str(texts) -> None:
    # A str is a sequence of characters: without this check "ab" would score two one-letter texts.
    if isinstance(texts, (str, bytes)):
        raise ValueError(f"texts must be a sequence of str, one per row of input_ids; got a single {texts!r:.40}")


def min_k_mean(values: torch.Tensor, valid: torch.Tensor | None, k: float) -> torch.Tensor:
    """Mean of the ``max(1, ⌊k·n_i⌋)`` smallest valid entries of each row.

    Parameters
    ----------
    values : (batch, T) float tensor
    valid : (batch, T) bool tensor or None (all valid); every row needs at least one valid entry
    k : float in (0, 1]

    Returns
    -------
    (batch,) float tensor
    """
    k = _check_k(k)
    if not isinstance(values, torch.Tensor) or values.dim() != 2 or not values.is_floating_point():
        got = f"{values.dtype} {tuple(values.shape)}" if isinstance(values, torch.Tensor) else type(values).__name__
        raise ValueError(f"values must be a (batch, T) float tensor; got {got}")
    if valid is None:
        valid = torch.ones_like(values, dtype=torch.bool)
    elif not isinstance(valid, torch.Tensor) or valid.dtype != torch.bool or valid.shape != values.shape:
        got = f"{valid.dtype} {tuple(valid.shape)}" if isinstance(valid, torch.Tensor) else type(valid).__name__
        raise ValueError(f"valid must be None or a bool tensor of values' shape {tuple(values.shape)}; got {got}")
    n = valid.sum(-1)
    if bool((n < 1).any()):
        bad = int((n < 1).nonzero()[0, 0])
        raise ValueError(f"valid must mark at least one position in every row; row {bad} has none")
    # Python int(k * n) as in the official script, not a float-tolerant rounding.
    counts = torch.tensor([max(1, math.floor(k * int(c))) for c in n.tolist()], device=values.device)
    ordered = values.masked_fill(~valid, float("inf")).sort(-1).values
    keep = torch.arange(values.shape[-1], device=values.device) < counts[:, None]
    return torch.where(keep, ordered, torch.zeros_like(ordered)).sum(-1) / counts.to(values.dtype)


def _check_batch(input_ids, attention_mask) -> tuple[torch.Tensor, torch.Tensor]:
    if not isinstance(input_ids, torch.Tensor):
        raise TypeError(f"input_ids must be a (batch, seq) integer tensor; got {type(input_ids).__name__}")
    if input_ids.dim() != 2:
        raise ValueError(f"input_ids must be a (batch, seq) integer tensor; got shape {tuple(input_ids.shape)}")
    if input_ids.is_floating_point() or input_ids.dtype == torch.bool:
        raise TypeError(f"input_ids must be an integer tensor; got {input_ids.dtype}")
    if input_ids.shape[0] < 1:
        raise ValueError("input_ids must hold at least one sequence; got batch 0")
    if attention_mask is None:
        mask = torch.ones_like(input_ids, dtype=torch.bool)
    else:
        if not isinstance(attention_mask, torch.Tensor):
            raise TypeError(f"attention_mask must be None or a 0/1 tensor; got {type(attention_mask).__name__}")
        if tuple(attention_mask.shape) != tuple(input_ids.shape):
            got = tuple(attention_mask.shape)
            raise ValueError(f"attention_mask must have input_ids' shape {tuple(input_ids.shape)}; got {got}")
        if bool(((attention_mask != 0) & (attention_mask != 1)).any()):
            raise ValueError("attention_mask must hold only 0 and 1")
        mask = attention_mask.bool()
        if mask.shape[1] > 1 and bool((mask[:, 1:] & ~mask[:, :-1]).any()):
            raise ValueError("attention_mask must be right-padded (ones then zeros in every row)")
    lengths = mask.sum(-1)
    if bool((lengths < 2).any()):
        bad = int(lengths.argmin())
        raise ValueError(
            f"every sequence needs at least 2 tokens (one next-token prediction); row {bad} has {int(lengths[bad])}"
        )
    return input_ids.long(), mask


def _takes_attention_mask(model: nn.Module) -> bool:
    try:
        p = inspect.signature(model.forward).parameters.get("attention_mask")
    except (TypeError, ValueError):
        return False
    return p is not None and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)


def _forward_logits(model: nn.Module, input_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    param = next(model.parameters(), None)
    if param is None:
        param = next(model.buffers(), None)
    device = param.device if param is not None else input_ids.device
    ids = input_ids.to(device)
    padded = not bool(mask.all())
    # Right padding never influences earlier positions of a causal LM, so models whose forward has
    # no ``attention_mask`` parameter (the toolkit's TinyLlama, a plain module returning logits)
    # run on the padded batch unmasked; HF models get the mask as usual.
    kwargs = {"attention_mask": mask.to(device).long()} if padded and _takes_attention_mask(model) else {}
    out = model(ids, **kwargs)
    return out.logits if hasattr(out, "logits") else out


def model_token_stats(
    model: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    *,
    backend: str = "auto",
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Run ``model`` once and return the per-position statistics of :func:`token_stats`.

    Parameters
    ----------
    model : nn.Module
        A causal LM returning logits or an object with ``.logits`` (TinyLlama, HF ``*ForCausalLM``).
        Called as ``model(ids)``, plus ``attention_mask=`` on a padded batch when its ``forward``
        has that parameter (right padding cannot change a causal LM's earlier positions).
    input_ids : (batch, n) integer tensor
    attention_mask : (batch, n) 0/1 tensor, optional
        Right padding only; each row needs at least 2 real tokens.
    backend : str
        Passed to :func:`token_stats`.

    Returns
    -------
    ell, mu, sigma : (batch, n − 1) float32 tensors (float64 for a float64 model)
        For predicting token ``t + 1`` from tokens ``≤ t``.
    valid : (batch, n − 1) bool tensor
        Whether the predicted token is a real (unpadded) token.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module; got {type(model).__name__}")
    input_ids, mask = _check_batch(input_ids, attention_mask)
    # Every submodule's own flag is restored (model.train(was) alone would overwrite a submodule
    # the caller had put in the other mode, e.g. a frozen backbone in eval inside a training model).
    with eval_mode(model), torch.no_grad():
        logits = _forward_logits(model, input_ids, mask)
    targets = input_ids[:, 1:].to(logits.device)
    ell, mu, sigma = token_stats(logits[:, :-1], targets, backend=backend)
    return ell, mu, sigma, mask[:, 1:].to(ell.device)


def _masked_mean(x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    return torch.where(valid, x, torch.zeros_like(x)).sum(-1) / valid.sum(-1)


def loss_scores(model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Loss attack: mean token log-likelihood ``(1/(n−1)) Σ ell_t``, shape ``(batch,)``; higher = member."""
    ell, _, _, valid = model_token_stats(model, input_ids, attention_mask)
    return _masked_mean(ell, valid)


def mink_scores(
    model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, k: float = 0.2
) -> torch.Tensor:
    """Min-K%: mean of the ``⌊k(n−1)⌋`` smallest token log-probabilities, shape ``(batch,)``.

    ``k = 1`` gives :func:`loss_scores`.
    """
    k = _check_k(k)
    ell, _, _, valid = model_token_stats(model, input_ids, attention_mask)
    return min_k_mean(ell, valid, k)


def mink_pp_scores(
    model: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    k: float = 0.2,
    *,
    backend: str = "auto",
) -> torch.Tensor:
    """Min-K%++: mean of the ``⌊k(n−1)⌋`` smallest standardised token scores.

    ``s_t = (ell_t − mu_t) / sigma_t`` with ``mu_t``, ``sigma_t`` the mean and standard deviation of
    ``log p(z | x_<t)`` for ``z ∼ p(· | x_<t)`` (paper Eq. 3).

    Parameters
    ----------
    model : nn.Module
        Causal LM (TinyLlama or a Hugging Face ``*ForCausalLM``).
    input_ids : (batch, n) integer tensor
    attention_mask : (batch, n) 0/1 tensor, optional; right padding
    k : float in (0, 1]
        Fraction of positions kept (paper default 0.2).
    backend : str
        Token-statistics backend (see :func:`token_stats`).

    Returns
    -------
    (batch,) float32 tensor (float64 for a float64 model), higher = more likely a member.
    """
    k = _check_k(k)
    ell, mu, sigma, valid = model_token_stats(model, input_ids, attention_mask, backend=backend)
    return min_k_mean((ell - mu) / sigma, valid, k)


def _zlib_len(text: str) -> int:
    if not isinstance(text, str):
        raise TypeError(f"texts must be strings; got {type(text).__name__}")
    return len(zlib.compress(text.encode("utf-8")))


def zlib_scores(
    model: nn.Module,
    input_ids: torch.Tensor,
    texts: Sequence[str],
    attention_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Zlib attack in the official code's form: mean ``ell_t`` divided by ``len(zlib.compress(text))``.

    Parameters
    ----------
    texts : sequence of str, one per row of ``input_ids`` (the text the ids encode)

    Returns
    -------
    (batch,) float32 tensor (float64 for a float64 model), higher = more likely a member.
    """
    _check_not_str(texts)
    if len(texts) != len(input_ids):
        raise ValueError(f"texts must have one entry per row of input_ids ({len(input_ids)}); got {len(texts)}")
    lengths = torch.tensor([_zlib_len(t) for t in texts], dtype=torch.float32)
    loss = loss_scores(model, input_ids, attention_mask)
    return loss / lengths.to(loss.device)


def score_all(
    model: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    *,
    texts: Sequence[str] | None = None,
    methods: Sequence[str] = ("loss", "zlib", "mink", "mink++"),
    ks: Sequence[float] = (0.2,),
    backend: str = "auto",
) -> dict[str, torch.Tensor]:
    """Every requested score from a single forward pass.

    Parameters
    ----------
    methods : subset of {"loss", "zlib", "mink", "mink++"}
        ``"zlib"`` needs ``texts``.
    ks : sequence of float in (0, 1]
        One ``"mink@k"`` / ``"mink++@k"`` entry per value.

    Returns
    -------
    dict name -> (batch,) float32 tensor on CPU (float64 for a float64 model); names ``"loss"``,
    ``"zlib"``, ``"mink@0.2"``, ``"mink++@0.2"`` …
    """
    methods = _check_methods(methods)
    ks = _check_ks(ks, methods)
    _check_not_str(texts)
    if "zlib" in methods and (texts is None or len(texts) != len(input_ids)):
        raise ValueError(f"method 'zlib' needs texts, one per row of input_ids ({len(input_ids)})")
    ell, mu, sigma, valid = model_token_stats(model, input_ids, attention_mask, backend=backend)
    out: dict[str, torch.Tensor] = {}
    loss = _masked_mean(ell, valid)
    if "loss" in methods:
        out["loss"] = loss
    if "zlib" in methods:
        out["zlib"] = loss / torch.tensor([_zlib_len(t) for t in texts], dtype=torch.float32, device=loss.device)
    s = (ell - mu) / sigma
    for k in ks:
        if "mink" in methods:
            out[f"mink@{k:g}"] = min_k_mean(ell, valid, k)
        if "mink++" in methods:
            out[f"mink++@{k:g}"] = min_k_mean(s, valid, k)
    return {name: v.cpu() for name, v in out.items()}


METHODS = ("loss", "zlib", "mink", "mink++")


def _check_methods(methods) -> tuple[str, ...]:
    if not isinstance(methods, Iterable):
        raise TypeError(f"methods must be a non-empty sequence drawn from {METHODS}; got {type(methods).__name__}")
    methods = tuple(methods) if not isinstance(methods, str) else methods
    if isinstance(methods, str) or not methods:
        raise ValueError(f"methods must be a non-empty sequence drawn from {METHODS}; got {methods!r}")
    bad = [m for m in methods if m not in METHODS]
    if bad:
        raise ValueError(f"methods must be drawn from {METHODS}; got unknown {bad}")
    return tuple(methods)
