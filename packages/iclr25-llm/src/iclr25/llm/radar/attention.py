"""Functional Radar attention and attention-recall diagnostics."""

from __future__ import annotations

import math

import torch

from iclr25.core.device import compute_dtype
from iclr25.core.triton import Backend, BackendOp

from .index import RadarIndex, Selection
from .reference import masked_attention

__all__ = ["GATHER_ATTENTION", "attention_recall", "radar_attention"]

BACKENDS = ("auto", "reference", "triton", "gather", "mask")


def _gather_reference(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sel: Selection, key_mask: torch.Tensor | None
) -> torch.Tensor:
    _b, hq, _nq, d = q.shape
    hkv = k.shape[1]
    idx, valid = sel.gather_index()  # (B, Hkv, Q, L)
    if key_mask is not None:
        valid = valid & key_mask.gather(-1, idx)
    flat = idx.flatten(2)[..., None]
    dt = compute_dtype(q, k, v)
    kg = k.gather(2, flat.expand(-1, -1, -1, d)).unflatten(2, idx.shape[2:]).to(dt)  # (B, Hkv, Q, L, d)
    vg = v.gather(2, flat.expand(-1, -1, -1, v.shape[-1])).unflatten(2, idx.shape[2:]).to(dt)  # v's own dim
    qg = q.to(dt).unflatten(1, (hkv, hq // hkv))  # (B, Hkv, rep, Q, d)
    s = torch.einsum("bhrqd,bhqld->bhrql", qg, kg) / math.sqrt(d)
    s = s.masked_fill(~valid[:, :, None], float("-inf"))
    # a query whose every gathered position is masked (padding) gets a zero output, not NaN
    p = torch.softmax(s, -1).nan_to_num(nan=0.0)
    out = torch.einsum("bhrql,bhqld->bhrqd", p, vg)
    return out.flatten(1, 2).to(q.dtype)


def _gather_triton(q, k, v, sel, key_mask):
    from .kernels import gather_attention_triton

    return gather_attention_triton(q, k, v, sel.segments, sel.c, sel.sink_end, sel.tail_start, key_mask)


def _gather_triton_limits(q, k, v, sel, key_mask) -> list[str]:
    reasons = []
    ok = (torch.float32, torch.float16, torch.bfloat16)
    for name, x in (("q", q), ("k", k), ("v", v)):
        # the kernel accumulates in fp32: fp64 would be rounded, so auto leaves it to the torch gather
        if x.dtype not in ok:
            reasons.append(f"the gather-attention kernel takes fp32/fp16/bf16 {name}, got {x.dtype}")
    if q.shape[-1] > 256:
        reasons.append(f"the gather-attention kernel takes head_dim <= 256, got {q.shape[-1]}")
    if v.shape[-1] != q.shape[-1]:
        reasons.append(f"the gather-attention kernel takes v of q's head_dim {q.shape[-1]}, got {v.shape[-1]}")
    if q.shape[1] // k.shape[1] > 64:
        reasons.append(
            f"the gather-attention kernel takes at most 64 query heads per KV head, got {q.shape[1] // k.shape[1]}"
        )
    if torch.is_grad_enabled() and any(x.requires_grad for x in (q, k, v)):
        reasons.append("the gather-attention kernel is forward-only; q, k or v require grad")
    if sel.segments.device != q.device:
        reasons.append(f"the selection lives on {sel.segments.device}, q on {q.device}")
    # the kernel indexes by these shapes: others would read out of bounds (the reference broadcasts or raises)
    b, hq, nq = q.shape[:3] if q.dim() == 4 else (-1, -1, -1)
    hkv = k.shape[1] if k.dim() == 4 else 0
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4 or k.shape[:3] != v.shape[:3] or k.shape[0] != b:
        reasons.append(
            f"the gather-attention kernel takes q, k, v of one batch, got {[tuple(x.shape) for x in (q, k, v)]}"
        )
    elif hkv < 1 or hq % hkv or k.shape[-1] != q.shape[-1]:
        reasons.append(
            "the gather-attention kernel takes q heads a multiple of k heads and q's head_dim, "
            f"got q {tuple(q.shape)}, k {tuple(k.shape)}"
        )
    elif tuple(sel.segments.shape[:3]) != (b, hkv, nq) or sel.segments.dim() != 4:
        reasons.append(
            f"the gather-attention kernel takes selected segments (B, Hkv, Q, k) = ({b}, {hkv}, {nq}, k), "
            f"got {tuple(sel.segments.shape)}"
        )
    elif sel.t != k.shape[2] or sel.sink_end < 0 or sel.tail_start > sel.t:
        reasons.append(
            f"the gather-attention kernel takes a selection with 0 <= sink_end, tail_start <= t = {k.shape[2]} keys, "
            f"got sink_end {sel.sink_end}, tail_start {sel.tail_start}, t {sel.t}"
        )
    elif key_mask is not None and tuple(key_mask.shape) != (b, hkv, nq, sel.t):
        reasons.append(
            f"the gather-attention kernel takes key_mask of shape {(b, hkv, nq, sel.t)} (expanded), "
            f"got {tuple(key_mask.shape)}"
        )
    return reasons


GATHER_ATTENTION = BackendOp(
    "radar_gather_attention",
    [
        Backend("triton", _gather_triton, supports=_gather_triton_limits, uses_triton=True),
        Backend("reference", _gather_reference),
    ],
)
"""Exact attention over a :class:`Selection`, ``(q, k, v, sel, key_mask) -> (B, Hq, Q, d)``: the
flash-decoding Triton kernel on CUDA (fp32/fp16/bf16), a torch gather + softmax elsewhere and for
fp64 (softmax in :func:`iclr25.core.device.compute_dtype`)."""


def _check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, torch.Tensor) or x.dim() != 4:
            raise ValueError(
                f"{name} must be a 4-d (batch, heads, seq, head_dim) tensor; got {getattr(x, 'shape', x)!r}"
            )
    if k.shape != (*v.shape[:-1], k.shape[-1]) or k.shape[:3] != v.shape[:3]:
        raise ValueError(f"k and v must agree in (batch, heads, seq); got {tuple(k.shape)} and {tuple(v.shape)}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q head_dim must equal k head_dim {k.shape[-1]}; got {q.shape[-1]}")
    if q.shape[0] != k.shape[0] or q.shape[1] % k.shape[1]:
        raise ValueError(
            f"q (batch, heads) must be ({k.shape[0]}, a multiple of {k.shape[1]}); got {tuple(q.shape[:2])}"
        )


def radar_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    index: RadarIndex | Selection,
    *,
    backend: str = "auto",
    key_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Exact softmax attention restricted to the tokens Radar selects for each query.

    Parameters
    ----------
    q : (B, Hq, Q, d) tensor
        Queries after RoPE, positioned after all cached tokens (decoding).
    k, v : (B, Hkv, t, d) tensors
        The whole KV cache (t must equal the index's length); v may have its own last dim d_v
        (the Triton kernel needs d_v = d).
    index : RadarIndex or Selection
        Index over ``k`` (searched with ``q``) or a precomputed selection.
    backend : {"auto", "reference", "triton", "mask"}
        ``reference`` (alias ``gather``) reads only the selected keys/values with torch gathers
        (the O(budget) path); ``triton`` runs the same computation as one flash-decoding kernel;
        ``auto`` picks Triton for CUDA tensors and the torch gather elsewhere (also for the index
        search when ``index`` is a :class:`RadarIndex`); ``mask`` computes all t scores and masks
        them (the dense check).
    key_mask : (B, 1 or Hkv, Q or 1, t) bool tensor, optional
        Cached positions a query may attend to at all (False: padding). It restricts the exact
        attention over the selection; None means every cached token is a real token.

    Returns
    -------
    (B, Hq, Q, d_v) tensor in ``q``'s dtype, computed in fp32 (fp64 when an input is fp64). With an
    empty cache (t = 0), or when ``key_mask`` leaves a query no selected token, that query's output
    is zero.
    """
    _check_qkv(q, k, v)
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}; got {backend!r}")
    if not isinstance(index, RadarIndex | Selection):
        raise TypeError(f"index must be a RadarIndex or a Selection; got {type(index).__name__}")
    search_backend = backend if backend in ("auto", "reference", "triton") else "reference"
    sel = index.search(q, backend=search_backend) if isinstance(index, RadarIndex) else index
    if sel.t != k.shape[2]:
        raise ValueError(f"index holds {sel.t} keys but the cache k has {k.shape[2]}")
    if sel.t == 0:
        return q.new_zeros(*q.shape[:-1], v.shape[-1])
    want = (q.shape[0], k.shape[1], q.shape[2])
    if tuple(sel.segments.shape[:3]) != want:
        raise ValueError(
            f"index (a Selection) must be for (batch, kv_heads, queries) = {want}; "
            f"got segments of shape {tuple(sel.segments.shape)}"
        )
    nq, hkv = q.shape[2], k.shape[1]
    if key_mask is not None:
        if (
            not isinstance(key_mask, torch.Tensor)
            or key_mask.dtype != torch.bool
            or key_mask.dim() != 4
            or key_mask.shape[0] != q.shape[0]
            or key_mask.shape[1] not in (1, hkv)
            or key_mask.shape[2] not in (1, nq)
            or key_mask.shape[3] != sel.t
        ):
            raise ValueError(
                f"key_mask must be a bool (B, 1 or {hkv}, 1 or {nq}, {sel.t}) tensor; "
                f"got {getattr(key_mask, 'dtype', None)} {tuple(getattr(key_mask, 'shape', ()))}"
            )
        key_mask = key_mask.expand(q.shape[0], hkv, nq, sel.t)
    if backend == "mask":
        mask = sel.mask() if key_mask is None else sel.mask() & key_mask
        return torch.nan_to_num(masked_attention(q, k, v, mask), nan=0.0)
    return GATHER_ATTENTION(q, k, v, sel, key_mask, backend="reference" if backend == "gather" else backend)


def attention_recall(q: torch.Tensor, keys: torch.Tensor, selected: torch.Tensor | Selection) -> torch.Tensor:
    """Fraction of the exact softmax attention mass that falls on the selected tokens.

    Parameters
    ----------
    q : (B, Hq, Q, d) tensor
    keys : (B, Hkv, t, d) tensor
    selected : (B, Hkv or Hq, Q, t) bool tensor or Selection

    Returns
    -------
    (B, Hq, Q) tensor in [0, 1]: float32, float64 for float64 input
    """
    mask = selected.mask() if isinstance(selected, Selection) else selected
    for name, x in (("q", q), ("keys", keys), ("selected", mask)):
        if not isinstance(x, torch.Tensor) or x.dim() != 4:
            raise ValueError(f"{name} must be a 4-d tensor (see the docstring); got {getattr(x, 'shape', x)!r}")
    if q.shape[-1] != keys.shape[-1]:
        raise ValueError(f"q head_dim must equal keys head_dim {keys.shape[-1]}; got {q.shape[-1]}")
    if q.shape[0] != keys.shape[0] or q.shape[1] % keys.shape[1]:
        raise ValueError(
            f"q (batch, heads) must be ({keys.shape[0]}, a multiple of {keys.shape[1]}); got {tuple(q.shape[:2])}"
        )
    if mask.shape[-1] != keys.shape[2] or mask.dtype != torch.bool:
        raise ValueError(
            f"selected must be a bool mask over t={keys.shape[2]} positions; got {mask.dtype} {tuple(mask.shape)}"
        )
    if mask.shape[0] != q.shape[0] or mask.shape[1] not in (keys.shape[1], q.shape[1]):
        raise ValueError(
            f"selected must be a (B={q.shape[0]}, {keys.shape[1]} or {q.shape[1]} heads, Q, t) mask; "
            f"got {tuple(mask.shape)}"
        )
    rep = q.shape[1] // keys.shape[1]
    kk = keys.repeat_interleave(rep, 1) if rep > 1 else keys
    if mask.shape[1] != q.shape[1]:
        mask = mask.repeat_interleave(q.shape[1] // mask.shape[1], 1)
    dt = compute_dtype(q, keys)
    p = torch.softmax((q.to(dt) @ kk.to(dt).transpose(-1, -2)) / math.sqrt(q.shape[-1]), -1)
    return (p * mask).sum(-1)
