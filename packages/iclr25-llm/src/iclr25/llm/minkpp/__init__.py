"""Min-K%++: pre-training data detection scores for causal LMs.

Paper: J. Zhang, J. Sun, E. Yeats, Y. Ouyang, M. Kuo, J. Zhang, H. F. Yang, H. Li, "Min-K%++:
Improved Baseline for Detecting Pre-Training Data from Large Language Models", ICLR 2025,
https://arxiv.org/abs/2404.02936 (official code: https://github.com/zjysteven/mink-plus-plus).

Given a causal LM and a text ``x``, each token is scored against the model's whole next-token
distribution: with ``ell_t = log p(x_t | x_<t)``, ``mu_t = Σ_z p(z) log p(z)`` and
``sigma_t² = Σ_z p(z) (log p(z) − mu_t)²``, the token score is ``s_t = (ell_t − mu_t) / sigma_t``
and Min-K%++ averages the ``⌊k(n−1)⌋`` smallest ``s_t`` (default ``k = 0.2``). Higher = member.
Loss, Zlib and Min-K% come from the same forward pass.

::

    ids ─► model ─► logits (B, T, V) ─► token_stats (fused: ell, mu, sigma) ─► s_t ─► min-k mean
                                                                     └─► Loss / Zlib / Min-K%
    texts + labels ─► evaluate_mia ─► AUROC, FPR@95%TPR, TPR@5%FPR (+ bootstrap CI)
"""

from .harness import inject_members, sample_passages
from .metrics import MIAResult, evaluate_mia, mia_metrics, roc_curve
from .scores import (
    SIGMA_FLOOR,
    loss_scores,
    min_k_mean,
    mink_pp_scores,
    mink_scores,
    model_token_stats,
    score_all,
    token_stats,
    zlib_scores,
)
from .tokenizer import WordTokenizer

__all__ = [
    "SIGMA_FLOOR",
    "MIAResult",
    "WordTokenizer",
    "evaluate_mia",
    "inject_members",
    "loss_scores",
    "mia_metrics",
    "min_k_mean",
    "mink_pp_scores",
    "mink_scores",
    "model_token_stats",
    "roc_curve",
    "sample_passages",
    "score_all",
    "token_stats",
    "zlib_scores",
]
