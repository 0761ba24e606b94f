"""Radar: Fast Long-Context Decoding for Any Transformer (ICLR 2025).

arXiv: https://arxiv.org/abs/2503.10571 · official code: https://github.com/BorealisAI/radar-decoding

Radar keeps the whole KV cache. The cached keys (after RoPE) are cut into segments of length
c = ⌊√t/a⌋, each summarised by the mean of positive random features φ(k) with
E[φ(q)ᵀφ(k)] = exp(qᵀk/√d). A decoding query scores every segment by φ(q)ᵀr_s (its estimated
attention mass), keeps the top-k, and attends exactly to the sink tokens, the selected segments,
the remainder buffer and a recent window. New segments are appended as tokens arrive; when there
are more than 2·c·a² of them the index is rebuilt with the current c, so per-step work is O(√t).

::

    keys ─► segments (c = ⌊√t/a⌋) ─► r_s = mean φ(k)          (RadarIndex.add)
    query ─► φ(q)ᵀr_s ─► top-k ─► exact softmax over sinks ∪ segments ∪ remainder ∪ recent
                                                                (RadarIndex.search, radar_attention)

Selectors under the same API: ``"radar"``, ``"oracle"`` (exact segment mass), ``"random"`` and
``"stream"`` (StreamingLLM: sinks + recent tokens at the same budget).
"""

from .attention import attention_recall, radar_attention
from .cache import RadarCache, hf_radar_cache, radar_attention_fn, use_radar
from .config import SELECTORS, RadarConfig
from .index import RadarIndex, Selection
from .reference import (
    feature_logits,
    feature_map,
    gqa_segment_scores,
    masked_attention,
    segment_mass,
    segment_scores,
)

__all__ = [
    "SELECTORS",
    "RadarCache",
    "RadarConfig",
    "RadarIndex",
    "Selection",
    "attention_recall",
    "feature_logits",
    "feature_map",
    "gqa_segment_scores",
    "hf_radar_cache",
    "masked_attention",
    "radar_attention",
    "radar_attention_fn",
    "segment_mass",
    "segment_scores",
    "use_radar",
]
