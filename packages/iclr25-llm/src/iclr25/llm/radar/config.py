"""Configuration of Radar decoding (defaults of the paper / official code)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SELECTORS", "RadarConfig"]

SELECTORS = ("radar", "oracle", "random", "stream")


@dataclass
class RadarConfig:
    """Knobs of Radar decoding.

    Attributes
    ----------
    projection_dim : int or None
        D, the number of Gaussian projections of the random features (φ has 2D entries because of
        the antithetic pair); None means ``16 * head_dim`` (paper default).
    aspect_ratio : float
        a in c = ⌊√t / a⌋ (segment length) and in the rebuild rule "segments > 2·c·a²".
    topk_segments : int or None
        k, segments attended per query; None means ``max(1, target_tokens // c)``.
    target_tokens : int
        Token budget of the selected segments (sinks, remainder and recent window come on top).
    num_sink_tokens : int
        First tokens that are always attended (attention sinks).
    recent_window : int
        Most recent tokens that are always attended.
    selector : {"radar", "oracle", "random", "stream"}
        ``radar``: random-feature segment scores; ``oracle``: exact per-segment attention mass;
        ``random``: uniformly random segments; ``stream``: StreamingLLM (sinks + the last
        ``recent_window + target_tokens`` tokens, the same number of attended tokens).
    seed : int
        Seed of the projection Ω (and of the random selector).
    backend : {"auto", "reference", "triton"}
        Implementation of the decode-step hot paths (segment scoring and gather attention) used
        by the caches; ``auto`` runs the Triton kernels on CUDA and plain torch elsewhere.
    """

    projection_dim: int | None = None
    aspect_ratio: float = 2.0
    topk_segments: int | None = None
    target_tokens: int = 512
    num_sink_tokens: int = 1
    recent_window: int = 64
    selector: str = "radar"
    seed: int = 0
    backend: str = "auto"

    def __post_init__(self) -> None:
        if self.projection_dim is not None and (not isinstance(self.projection_dim, int) or self.projection_dim < 1):
            raise ValueError(f"projection_dim (D) must be an int >= 1 or None; got {self.projection_dim!r}")
        if not isinstance(self.aspect_ratio, int | float) or not self.aspect_ratio > 0:
            raise ValueError(f"aspect_ratio must be > 0; got {self.aspect_ratio!r}")
        if self.topk_segments is not None and (not isinstance(self.topk_segments, int) or self.topk_segments < 0):
            raise ValueError(f"topk_segments must be an int >= 0 or None; got {self.topk_segments!r}")
        for name in ("target_tokens", "num_sink_tokens", "recent_window"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 0:
                raise ValueError(f"{name} must be an int >= 0 (a token budget); got {v!r}")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise ValueError(f"seed must be an int; got {self.seed!r}")
        if self.selector not in SELECTORS:
            raise ValueError(f"selector must be one of {SELECTORS}; got {self.selector!r}")
        if self.backend not in ("auto", "reference", "triton"):
            raise ValueError(f"backend must be 'auto', 'reference' or 'triton'; got {self.backend!r}")

    def features(self, head_dim: int) -> int:
        """D for a given head dimension."""
        return self.projection_dim if self.projection_dim is not None else 16 * head_dim
