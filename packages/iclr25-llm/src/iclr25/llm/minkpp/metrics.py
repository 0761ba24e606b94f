"""Detection metrics (AUROC, FPR@95%TPR, TPR@5%FPR) with bootstrap intervals, and ``evaluate_mia``.

The ROC curve keeps every distinct threshold (sklearn's ``roc_curve(..., drop_intermediate=False)``):
dropping collinear points, sklearn's default, can hide the operating point that
``TPR@5%FPR`` should read. AUROC is the trapezoidal area, identical to ``roc_auc_score``
(the Mann-Whitney statistic with ties counted as one half). Label 1 = member.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from iclr25.core.progress import progress

from .scores import _check_ks, _check_methods, _is_int, _is_real, score_all

__all__ = ["MIAResult", "evaluate_mia", "mia_metrics", "roc_curve"]

log = logging.getLogger(__name__)


def _check_labels_scores(scores, labels) -> tuple[np.ndarray, np.ndarray]:
    # numpy has no bfloat16: a bf16 score tensor is widened in torch first (exact, as is fp32/fp16 -> fp64)
    s = np.asarray(scores.detach().cpu().double() if isinstance(scores, torch.Tensor) else scores, dtype=np.float64)
    y = np.asarray(labels.detach().cpu() if isinstance(labels, torch.Tensor) else labels)
    if s.ndim != 1 or y.ndim != 1 or s.shape != y.shape:
        raise ValueError(f"scores and labels must be 1-D of equal length; got shapes {s.shape} and {y.shape}")
    if not np.isin(y, (0, 1)).all():
        raise ValueError(f"labels must be binary 0/1 (1 = member); got values {sorted(set(y.tolist()))[:5]}")
    if len(np.unique(y)) < 2:
        raise ValueError(f"labels must contain both classes (0 and 1); got only {int(y[0]) if len(y) else 'none'}")
    if not np.isfinite(s).all():
        raise ValueError("scores must be finite; got NaN or inf")
    return s, y.astype(np.int64)


def roc_curve(scores, labels) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ROC curve over every distinct threshold.

    Parameters
    ----------
    scores : (n,) array-like, higher = more likely positive
    labels : (n,) array-like of 0/1, both classes present

    Returns
    -------
    fpr, tpr : (m + 1,) arrays, starting at (0, 0)
    thresholds : (m + 1,) array, descending; the first is ``inf``
    """
    s, y = _check_labels_scores(scores, labels)
    order = np.argsort(-s, kind="mergesort")
    s, y = s[order], y[order]
    last = np.r_[np.nonzero(np.diff(s))[0], len(s) - 1]
    tps = np.cumsum(y)[last]
    fps = (last + 1) - tps
    tpr = np.r_[0.0, tps / tps[-1]]
    fpr = np.r_[0.0, fps / fps[-1]]
    return fpr, tpr, np.r_[np.inf, s[last]]


def mia_metrics(scores, labels) -> dict[str, float]:
    """``auroc``, ``fpr95`` (FPR at the first threshold with TPR ≥ 0.95) and ``tpr05`` (TPR at the
    last threshold with FPR ≤ 0.05), as in the official evaluation script.

    Parameters
    ----------
    scores : (n,) array-like; labels : (n,) 0/1 array-like

    Returns
    -------
    dict of float
    """
    fpr, tpr, _ = roc_curve(scores, labels)
    return {
        "auroc": float(np.trapezoid(tpr, fpr) if hasattr(np, "trapezoid") else np.trapz(tpr, fpr)),
        "fpr95": float(fpr[np.nonzero(tpr >= 0.95)[0][0]]),
        "tpr05": float(tpr[np.nonzero(fpr <= 0.05)[0][-1]]),
    }


@dataclass
class MIAResult:
    """Scores and metrics of several membership-inference methods on one labelled text set.

    Attributes
    ----------
    scores : dict name -> (n,) ndarray
        Per-text scores (higher = member), names like ``"loss"``, ``"mink++@0.2"``.
    labels : (n,) ndarray of 0/1
    metrics : dict name -> dict
        ``auroc``, ``fpr95``, ``tpr05`` and, with bootstrap, ``auroc_ci`` / ``fpr95_ci`` / ``tpr05_ci``
        as ``(low, high)`` percentile intervals.
    n_bootstrap : int
    """

    scores: dict[str, np.ndarray]
    labels: np.ndarray
    metrics: dict[str, dict] = field(default_factory=dict)
    n_bootstrap: int = 0

    def auroc(self, name: str) -> float:
        """AUROC of method ``name``."""
        return self.metrics[name]["auroc"]

    def table(self) -> str:
        """A plain-text table: method, AUROC [CI], FPR@95%TPR, TPR@5%FPR."""
        lines = [f"{'method':<14} {'AUROC':>7} {'95% CI':>15} {'FPR95':>6} {'TPR05':>6}"]
        for name, m in self.metrics.items():
            ci = m.get("auroc_ci")
            ci_s = f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else ""
            lines.append(f"{name:<14} {m['auroc']:7.3f} {ci_s:>15} {m['fpr95']:6.3f} {m['tpr05']:6.3f}")
        return "\n".join(lines)


def _bootstrap(scores: np.ndarray, labels: np.ndarray, n: int, rng: np.random.Generator, level: float) -> dict:
    # Stratified resampling keeps both classes (and their sizes) in every replicate.
    pos, neg = np.nonzero(labels == 1)[0], np.nonzero(labels == 0)[0]
    draws = {"auroc": [], "fpr95": [], "tpr05": []}
    for _ in range(n):
        idx = np.r_[rng.choice(pos, len(pos)), rng.choice(neg, len(neg))]
        for key, v in mia_metrics(scores[idx], labels[idx]).items():
            draws[key].append(v)
    q = (100 * (1 - level) / 2, 100 * (1 + level) / 2)
    return {f"{key}_ci": tuple(float(x) for x in np.percentile(v, q)) for key, v in draws.items()}


def _encode(tokenizer, text: str) -> list[int]:
    if not isinstance(text, str):
        raise TypeError(f"texts must be strings; got {type(text).__name__}")
    ids = tokenizer.encode(text)
    ids = ids.tolist() if isinstance(ids, torch.Tensor) else list(ids)
    return [int(i) for i in ids]


def evaluate_mia(
    model: nn.Module,
    tokenizer,
    texts: Sequence[str],
    labels: Sequence[int],
    methods: Sequence[str] = ("loss", "zlib", "mink", "mink++"),
    ks: Sequence[float] = (0.2,),
    *,
    batch_size: int = 8,
    max_length: int | None = None,
    n_bootstrap: int = 1000,
    ci_level: float = 0.95,
    seed: int = 0,
    backend: str = "auto",
) -> MIAResult:
    """Score ``texts`` with every method and evaluate against membership ``labels``.

    Parameters
    ----------
    model : nn.Module
        Causal LM (TinyLlama or Hugging Face ``*ForCausalLM``).
    tokenizer
        Anything with ``encode(text) -> ids`` (the toolkit's tokenizers, :class:`WordTokenizer`,
        Hugging Face tokenizers).
    texts : sequence of str, length n
    labels : sequence of 0/1, length n (1 = member)
    methods : subset of {"loss", "zlib", "mink", "mink++"}
    ks : fractions in (0, 1] for Min-K% / Min-K%++
    batch_size : int
        Texts per forward pass (right padding with attention masks).
    max_length : int, optional
        Truncate each encoding to this many tokens. Zlib still divides by the compressed length of
        the whole text (the tokenizer need not decode).
    n_bootstrap : int
        Stratified bootstrap replicates for the intervals (0: none).
    ci_level : float
        Coverage of the percentile intervals.
    seed : int
        Seeds the bootstrap; every method is resampled with the same indices.
    backend : str
        Token-statistics backend (see :func:`token_stats`).

    Returns
    -------
    MIAResult

    Raises
    ------
    ValueError
        Empty text or a text of one token, labels that are not 0/1 or of one class, bad ``k``,
        ``max_length`` below 2.
    """
    methods = _check_methods(methods)
    ks = _check_ks(ks, methods)
    if isinstance(texts, (str, bytes)):
        raise ValueError(f"texts must be a sequence of str, one per label; got a single {texts!r:.40}")
    if len(texts) != len(labels):
        raise ValueError(f"texts and labels must be sequences of equal length; got {len(texts)} and {len(labels)}")
    if not _is_int(batch_size) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int; got {batch_size!r}")
    if not _is_int(n_bootstrap) or n_bootstrap < 0:
        raise ValueError(f"n_bootstrap must be a non-negative int; got {n_bootstrap!r}")
    batch_size, n_bootstrap = int(batch_size), int(n_bootstrap)
    if not _is_real(ci_level) or not 0.0 < ci_level < 1.0:
        raise ValueError(f"ci_level must be a number in (0, 1); got {ci_level!r}")
    # A negative max_length would slice from the end (silently dropping tokens), 0 or 1 leaves no
    # next-token prediction: refuse both here rather than per text.
    if max_length is not None:
        if not _is_int(max_length) or max_length < 2:
            raise ValueError(f"max_length must be None or an int >= 2; got {max_length!r}")
        max_length = int(max_length)
    y = np.asarray(labels.detach().cpu() if isinstance(labels, torch.Tensor) else labels)
    # Checked before scoring: mia_metrics would refuse (n, 1) labels only after every text was scored.
    if y.ndim != 1:
        raise ValueError(f"labels must be a 1-D sequence of 0/1, one per text; got shape {y.shape}")
    if not np.isin(y, (0, 1)).all() or len(np.unique(y)) < 2:
        raise ValueError(f"labels must be binary 0/1 with both classes present; got values {sorted(set(y.tolist()))}")
    encoded = []
    for i, text in enumerate(texts):
        ids = _encode(tokenizer, text)[:max_length]
        if len(ids) < 2:
            raise ValueError(f"text {i} encodes to {len(ids)} token(s); at least 2 are needed (got {text[:40]!r})")
        encoded.append(ids)
    chunks: dict[str, list[torch.Tensor]] = {}
    starts = range(0, len(encoded), batch_size)
    for s in progress(starts, desc="minkpp score", total=len(starts)):
        batch = encoded[s : s + batch_size]
        width = max(len(b) for b in batch)
        ids = torch.zeros(len(batch), width, dtype=torch.long)
        mask = torch.zeros(len(batch), width, dtype=torch.long)
        for r, b in enumerate(batch):
            ids[r, : len(b)] = torch.tensor(b)
            mask[r, : len(b)] = 1
        out = score_all(
            model, ids, mask, texts=list(texts[s : s + batch_size]), methods=methods, ks=ks, backend=backend
        )
        for name, v in out.items():
            chunks.setdefault(name, []).append(v)
    scores = {name: torch.cat(v).double().numpy() for name, v in chunks.items()}
    y = y.astype(np.int64)
    result = MIAResult(scores=scores, labels=y, n_bootstrap=n_bootstrap)
    for name, s in scores.items():
        m = mia_metrics(s, y)
        if n_bootstrap:
            # A fresh generator per method: every method is resampled with the same indices (paired
            # intervals), and a method's interval does not depend on which other methods or ks were asked
            # for, nor on their order (one shared stream made ks=(0.2, 0.5) and (0.5, 0.2) disagree).
            m.update(_bootstrap(s, y, n_bootstrap, np.random.default_rng(seed), ci_level))
        result.metrics[name] = m
        log.info("%s: AUROC %.3f", name, m["auroc"])
    return result
