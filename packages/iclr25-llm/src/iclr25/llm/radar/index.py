"""RadarIndex: the segment structure, random-feature summaries and top-k segment search.

One index serves one layer: keys of shape ``(batch, kv_heads, t, head_dim)`` (after RoPE). All
heads share the segment boundaries (positions), each head has its own summaries.

::

    positions  0 .. sink | seg 0 | seg 1 | ... | seg S-1 | remainder (< c) |
                         └── r_s = mean φ(k), s < S ──┘        ... recent window ┘
    query q ─► φ(q) ─► scores φ(q)ᵀr_s ─► top-k segments ─► exact attention over
               sinks ∪ selected segments ∪ remainder ∪ recent window
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import torch

from iclr25.core.device import compute_dtype
from iclr25.core.triton import Backend, BackendOp

from .config import RadarConfig
from .reference import feature_logits, gqa_segment_scores, segment_mass

__all__ = ["SEGMENT_SCORES", "RadarIndex", "Selection"]

log = logging.getLogger(__name__)


def _scores_triton(queries, omega, summaries, head_dim):
    from .kernels import segment_scores_triton

    return segment_scores_triton(queries, omega, summaries, head_dim)


def _scores_triton_limits(queries, omega, summaries, head_dim) -> list[str]:
    reasons = []
    if queries.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        reasons.append(f"the fused scoring kernel takes fp32/fp16/bf16 queries, got {queries.dtype}")
    if summaries.dtype != torch.float32 or omega.dtype != torch.float32:
        reasons.append(f"the fused scoring kernel takes fp32 summaries and Ω, got {summaries.dtype}, {omega.dtype}")
    if queries.shape[-1] > 256:
        reasons.append(f"the fused scoring kernel takes head_dim <= 256, got {queries.shape[-1]}")
    if torch.is_grad_enabled() and queries.requires_grad:
        reasons.append("the fused scoring kernel is forward-only; queries require grad")
    # the kernel indexes by these shapes: others would read out of bounds (the reference broadcasts or raises)
    q_shape, o_shape, s_shape = tuple(queries.shape), tuple(omega.shape), tuple(summaries.shape)
    if (
        len(q_shape) != 4
        or len(o_shape) != 2
        or len(s_shape) != 4
        or o_shape[0] != q_shape[3]
        or s_shape[0] != q_shape[0]
        or s_shape[1] < 1
        or q_shape[1] % s_shape[1]
        or s_shape[3] != 2 * o_shape[1]
    ):
        reasons.append(
            "the fused scoring kernel takes queries (B, Hq, Q, m), omega (m, D) and summaries (B, Hkv, S, 2D) "
            f"with Hq a multiple of Hkv, got queries {q_shape}, omega {o_shape}, summaries {s_shape}"
        )
    return reasons


SEGMENT_SCORES = BackendOp(
    "radar_segment_scores",
    [
        Backend("triton", _scores_triton, supports=_scores_triton_limits, uses_triton=True),
        Backend("reference", gqa_segment_scores),
    ],
)
"""φ(q)ᵀr_s per query head, ``(queries, omega, summaries, head_dim) -> (B, Hq, Q, S)``: the fused
Triton kernel on CUDA, :func:`.reference.gqa_segment_scores` elsewhere."""


def _check_finite(x: torch.Tensor, name: str) -> None:
    if not torch.isfinite(x).all():
        raise FloatingPointError(f"{name} contains NaN or inf values")


@dataclass
class Selection:
    """Tokens one search selected, per KV head and query.

    Attributes
    ----------
    segments : (B, Hkv, Q, k) long tensor
        Selected segment ids (k may be 0).
    c : int
        Segment length; segment s covers positions ``[s·c, (s+1)·c)``.
    sink_end : int
        Positions ``[0, sink_end)`` are attended (sinks).
    tail_start : int
        Positions ``[tail_start, t)`` are attended (remainder buffer and recent window).
    t : int
        Number of cached tokens.
    scored : int
        Number of segment scores computed per query (work of the search).
    """

    segments: torch.Tensor
    c: int
    sink_end: int
    tail_start: int
    t: int
    scored: int

    def gather_index(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Positions to gather and which of them count (duplicates with sinks/tail are masked).

        Returns
        -------
        idx : (B, Hkv, Q, L) long tensor, L = sink_end + k·c + (t − tail_start)
        valid : (B, Hkv, Q, L) bool tensor
        """
        b, h, q, k = self.segments.shape
        dev = self.segments.device
        offs = torch.arange(max(self.c, 1), device=dev)
        seg_pos = (self.segments[..., None] * self.c + offs).flatten(-2) if k else self.segments.new_empty(b, h, q, 0)
        seg_ok = (seg_pos >= self.sink_end) & (seg_pos < self.tail_start)
        sink = torch.arange(self.sink_end, device=dev).expand(b, h, q, -1)
        tail = torch.arange(self.tail_start, self.t, device=dev).expand(b, h, q, -1)
        idx = torch.cat([sink, seg_pos, tail], dim=-1)
        valid = torch.cat(
            [torch.ones_like(sink, dtype=torch.bool), seg_ok, torch.ones_like(tail, dtype=torch.bool)], -1
        )
        return idx, valid

    def mask(self) -> torch.Tensor:
        """Boolean mask over cached positions: (B, Hkv, Q, t)."""
        idx, valid = self.gather_index()
        b, h, q, _ = idx.shape
        cnt = torch.zeros(b, h, q, self.t, dtype=torch.long, device=idx.device)
        m = cnt.scatter_add_(-1, idx, valid.long()) > 0
        return m

    @property
    def attended(self) -> int:
        """Number of distinct attended tokens (max over heads and queries)."""
        return int(self.mask().sum(-1).max()) if self.t else 0


class RadarIndex:
    """Segment index over one layer's keys with Radar's dynamic restructuring.

    Parameters
    ----------
    cfg : RadarConfig
    head_dim : int
        d; keys and queries must have this last dimension.
    device : torch.device or str, optional
        Where Ω lives (it follows the keys on first ``add`` otherwise).
    omega : (head_dim, D) tensor, optional
        Share one projection across layers (the official code's choice); drawn from ``cfg.seed``
        (in fp32) when None. Stored in fp32, or fp64 when given in fp64; features are computed in
        the keys' and queries' dtype, at least fp32.

    Examples
    --------
    >>> idx = RadarIndex(RadarConfig(target_tokens=8, recent_window=4), head_dim=16)
    >>> sel = idx.add(torch.randn(1, 2, 100, 16)).search(torch.randn(1, 2, 1, 16))
    >>> sel.mask().shape
    torch.Size([1, 2, 1, 100])
    """

    def __init__(
        self,
        cfg: RadarConfig,
        head_dim: int,
        device: torch.device | str | None = None,
        omega: torch.Tensor | None = None,
    ) -> None:
        if not isinstance(cfg, RadarConfig):
            raise TypeError(f"cfg must be a RadarConfig; got {type(cfg).__name__}")
        if not isinstance(head_dim, int) or head_dim < 1:
            raise ValueError(f"head_dim must be a positive int; got {head_dim!r}")
        self.cfg, self.head_dim = cfg, head_dim
        n_feat = cfg.features(head_dim)
        if omega is None:
            g = torch.Generator().manual_seed(cfg.seed)
            omega = torch.randn(head_dim, n_feat, generator=g)
        elif not isinstance(omega, torch.Tensor) or omega.shape != (head_dim, n_feat):
            raise ValueError(
                f"omega must be a ({head_dim}, {n_feat}) tensor; got {tuple(getattr(omega, 'shape', ())) or omega!r}"
            )
        # a caller's fp64 Ω is kept: rounding it to fp32 would put fp32 error into fp64 scores
        omega = omega.to(compute_dtype(omega))
        self.omega = omega.to(device) if device is not None else omega
        self._gen = torch.Generator().manual_seed(cfg.seed + 1)
        self.keys: torch.Tensor | None = None
        self.c = 0
        self.n_seg = 0
        self.summaries: torch.Tensor | None = None  # (B, H, S, 2D)
        self.shift: torch.Tensor | None = None  # (B, H, 1, 1)
        self.rebuilds = 0
        self.featurized = 0  # keys passed through φ so far (restructuring work)

    # -- bookkeeping ------------------------------------------------------------------------------
    @property
    def t(self) -> int:
        """Number of indexed keys."""
        return 0 if self.keys is None else int(self.keys.shape[2])

    def boundaries(self) -> list[tuple[int, int]]:
        """Segments as ``(start, end)`` position pairs, in order."""
        return [(s * self.c, (s + 1) * self.c) for s in range(self.n_seg)]

    def select_batch(self, indices: torch.Tensor) -> RadarIndex:
        """Keep, reorder or repeat batch rows (beam search): row i becomes old row ``indices[i]``.

        Keys, summaries and shifts are per batch row, so the index stays exactly the one the
        selected rows would have built.

        Parameters
        ----------
        indices : (B',) long tensor
            Old batch rows, in their new order (repeats allowed).

        Returns
        -------
        RadarIndex
            ``self``, for chaining.
        """
        if self.keys is not None:
            idx = torch.as_tensor(indices, device=self.keys.device)
            idx = torch.arange(self.keys.shape[0], device=idx.device)[idx]  # also accepts a bool mask
            self.keys = self.keys.index_select(0, idx)
            if self.summaries is not None:
                self.summaries = self.summaries.index_select(0, idx)
                self.shift = self.shift.index_select(0, idx)
        return self

    def truncate(self, n: int) -> RadarIndex:
        """Forget every key from position ``n`` on (a cache crop), dropping the segments they cut.

        The remaining segments keep their length and summaries; ``n = 0`` empties the index.

        Returns
        -------
        RadarIndex
            ``self``, for chaining.
        """
        if not isinstance(n, int) or n < 0:
            raise ValueError(f"n must be an int >= 0; got {n!r}")
        if n >= self.t:
            return self
        if n == 0:
            self.keys, self.summaries, self.shift = None, None, None
            self.c = self.n_seg = 0
            return self
        self.keys = self.keys[:, :, :n]
        if self.n_seg > n // self.c:
            self.n_seg = n // self.c
            if self.summaries is not None:
                self.summaries = self.summaries[:, :, : self.n_seg]
        return self

    def add(self, keys: torch.Tensor) -> RadarIndex:
        """Append keys and restructure (new segments, or a rebuild when they became too fine).

        Parameters
        ----------
        keys : (B, H, n, head_dim) tensor
            New keys after RoPE.

        Returns
        -------
        RadarIndex
            ``self``, for chaining.
        """
        if not isinstance(keys, torch.Tensor) or keys.dim() != 4:
            raise ValueError(f"keys must be a (batch, heads, n, head_dim) tensor; got {getattr(keys, 'shape', keys)!r}")
        if keys.shape[-1] != self.head_dim:
            raise ValueError(f"keys head_dim must be {self.head_dim}; got {keys.shape[-1]}")
        if self.keys is not None and keys.shape[:2] != self.keys.shape[:2]:
            raise ValueError(f"keys batch/heads must be {tuple(self.keys.shape[:2])}; got {tuple(keys.shape[:2])}")
        _check_finite(keys, "keys")
        if self.omega.device != keys.device:
            self.omega = self.omega.to(keys.device)
        self.keys = keys if self.keys is None else torch.cat([self.keys, keys], dim=2)
        self._restructure()
        return self

    def _restructure(self) -> None:
        t, a = self.t, self.cfg.aspect_ratio
        if t == 0:
            return
        if self.c == 0:
            self._rebuild()
            return
        m = t // self.c
        if m > self.n_seg:
            self._append_segments(m)
        if self.n_seg > 2 * self.c * a * a:
            self._rebuild()

    def _rebuild(self) -> None:
        t = self.t
        self.c = max(1, math.floor(math.sqrt(t) / self.cfg.aspect_ratio))
        self.n_seg = t // self.c
        self.summaries, self.shift = None, None
        if self.n_seg:
            self._summarize(0, self.n_seg)
        self.rebuilds += 1

    def _append_segments(self, m: int) -> None:
        self._summarize(self.n_seg, m)
        self.n_seg = m

    def _summarize(self, s0: int, s1: int) -> None:
        if self.cfg.selector != "radar":  # only Radar's search reads the feature summaries
            return
        c = self.c
        # the index is a search structure: no gradient flows through the (top-k) selection
        logits = feature_logits(self.keys[:, :, s0 * c : s1 * c].detach(), self.omega, head_dim=self.head_dim)
        new_max = logits.amax(dim=(-2, -1), keepdim=True)
        if self.shift is None:
            self.shift = new_max
        elif bool((new_max > self.shift).any()):
            # keep one shift per head: rescale old summaries so every segment shares the constant
            grown = torch.maximum(self.shift, new_max)
            self.summaries = self.summaries * torch.exp(self.shift - grown)
            self.shift = grown
        # in place and normalised after the mean: the (t, 2D) feature block is the index's largest tensor
        phi = logits.sub_(self.shift).exp_()
        summ = phi.unflatten(2, (s1 - s0, c)).mean(3) / math.sqrt(logits.shape[-1])
        self.summaries = summ if self.summaries is None or s0 == 0 else torch.cat([self.summaries, summ], dim=2)
        self.featurized += (s1 - s0) * c

    # -- search -----------------------------------------------------------------------------------
    def topk(self) -> int:
        """k: segments selected per query."""
        cfg = self.cfg
        if cfg.topk_segments is not None:
            return cfg.topk_segments
        return cfg.target_tokens // max(self.c, 1) if cfg.target_tokens else 0

    def search(self, queries: torch.Tensor, *, backend: str = "auto") -> Selection:
        """Select the tokens each query attends to.

        Parameters
        ----------
        queries : (B, Hq, Q, head_dim) tensor
            Queries after RoPE, all placed after the cached keys; Hq a multiple of the KV heads
            (a GQA group shares one selection: the sum of its heads' normalised segment scores).
        backend : {"auto", "reference", "triton"}
            Implementation of Radar's segment scores (:data:`SEGMENT_SCORES`); ``auto`` uses the
            fused Triton kernel on CUDA, plain torch elsewhere. Other selectors ignore it.

        Returns
        -------
        Selection
        """
        cfg = self.cfg
        if not isinstance(queries, torch.Tensor) or queries.dim() != 4:
            raise ValueError(
                f"queries must be a (batch, heads, Q, head_dim) tensor; got {getattr(queries, 'shape', queries)!r}"
            )
        if queries.shape[-1] != self.head_dim:
            raise ValueError(f"queries head_dim must be {self.head_dim}; got {queries.shape[-1]}")
        _check_finite(queries, "queries")
        t = self.t
        b, hq, nq, _ = queries.shape
        hkv = hq if self.keys is None else int(self.keys.shape[1])
        if self.keys is not None and (queries.shape[0] != self.keys.shape[0] or hq % hkv):
            raise ValueError(
                f"queries (batch, heads) must be ({self.keys.shape[0]}, a multiple of {hkv}); got {(b, hq)}"
            )
        dev = queries.device
        sink_end = min(cfg.num_sink_tokens, t)
        empty = torch.zeros(b, hkv, nq, 0, dtype=torch.long, device=dev)
        if cfg.selector == "stream":
            tail = max(t - cfg.recent_window - cfg.target_tokens, sink_end)
            return Selection(empty, max(self.c, 1), sink_end, tail, t, 0)
        tail = max(min(self.n_seg * self.c, t - cfg.recent_window), sink_end)
        starts = torch.arange(self.n_seg, device=dev) * self.c
        eligible = (starts < tail) & (starts + self.c > sink_end)
        # the same count in integer arithmetic (s·c < tail and (s+1)·c > sink_end): reading
        # eligible.sum() back would stall every decode step on a GPU → host copy
        n_eligible = max(0, min(self.n_seg, -(-tail // self.c)) - sink_end // self.c) if self.n_seg else 0
        k = min(self.topk(), n_eligible)
        if k == 0:
            return Selection(empty, max(self.c, 1), sink_end, tail, t, 0)
        rep = hq // hkv
        if cfg.selector == "random":
            scores = torch.rand(b, hkv, nq, self.n_seg, generator=self._gen).to(dev)
        else:
            if cfg.selector == "radar":
                # Ω in the queries' compute dtype: fp32 queries keep the fused kernel's fp32 contract
                # even under a caller's fp64 Ω, fp64 ones score in fp64 (the kernel refuses them)
                omega = self.omega.to(compute_dtype(queries))
                raw = SEGMENT_SCORES(queries.detach(), omega, self.summaries, self.head_dim, backend=backend)
            else:  # oracle: exact per-segment attention mass
                keys = self.keys.repeat_interleave(rep, 1) if rep > 1 else self.keys
                raw = segment_mass(queries, keys, self.c, self.n_seg)
            raw = raw.masked_fill(~eligible, 0.0)
            # normalise per query head so a GQA group's heads vote with equal weight
            raw = raw / raw.sum(-1, keepdim=True).clamp_min(torch.finfo(raw.dtype).tiny)
            scores = raw.unflatten(1, (hkv, rep)).sum(2)
        scores = scores.masked_fill(~eligible, float("-inf"))
        segs = scores.topk(k, dim=-1).indices
        return Selection(segs, self.c, sink_end, tail, t, self.n_seg)
