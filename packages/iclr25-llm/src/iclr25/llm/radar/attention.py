"""Functional Radar attention and attention-recall diagnostics."""

from __future__ import annotations

import math

import torch

from .index import RadarIndex, Selection
from .reference import masked_attention

__all__ = ["attention_recall", "radar_attention"]


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
    backend: str = "gather",
) -> torch.Tensor:
    """Exact softmax attention restricted to the tokens Radar selects for each query.

    Parameters
    ----------
    q : (B, Hq, Q, d) tensor
        Queries after RoPE, positioned after all cached tokens (decoding).
    k, v : (B, Hkv, t, d) tensors
        The whole KV cache (t must equal the index's length).
    index : RadarIndex or Selection
        Index over ``k`` (searched with ``q``) or a precomputed selection.
    backend : {"gather", "mask"}
        ``gather`` reads only the selected keys/values (the O(budget) path); ``mask`` computes
        all t scores and masks them (the reference).

    Returns
    -------
    (B, Hq, Q, d) tensor in ``q``'s dtype. With an empty cache (t = 0) the output is zero.
    """
    _check_qkv(q, k, v)
    sel = index.search(q) if isinstance(index, RadarIndex) else index
    if sel.t != k.shape[2]:
        raise ValueError(f"index holds {sel.t} keys but the cache k has {k.shape[2]}")
    if sel.t == 0:
        return torch.zeros_like(q)
    if backend == "mask":
        return masked_attention(q, k, v, sel.mask())
    if backend != "gather":
        raise ValueError(f"backend must be 'gather' or 'mask'; got {backend!r}")
    _b, hq, _nq, d = q.shape
    hkv = k.shape[1]
    idx, valid = sel.gather_index()  # (B, Hkv, Q, L)
    flat = idx.flatten(2)[..., None].expand(-1, -1, -1, d)
    kg = k.gather(2, flat).unflatten(2, idx.shape[2:]).float()  # (B, Hkv, Q, L, d)
    vg = v.gather(2, flat).unflatten(2, idx.shape[2:]).float()
    qg = q.float().unflatten(1, (hkv, hq // hkv))  # (B, Hkv, rep, Q, d)
    s = torch.einsum("bhrqd,bhqld->bhrql", qg, kg) / math.sqrt(d)
    s = s.masked_fill(~valid[:, :, None], float("-inf"))
    out = torch.einsum("bhrql,bhqld->bhrqd", torch.softmax(s, -1), vg)
    return out.flatten(1, 2).to(q.dtype)


def attention_recall(q: torch.Tensor, keys: torch.Tensor, selected: torch.Tensor | Selection) -> torch.Tensor:
    """Fraction of the exact softmax attention mass that falls on the selected tokens.

    Parameters
    ----------
    q : (B, Hq, Q, d) tensor
    keys : (B, Hkv, t, d) tensor
    selected : (B, Hkv or Hq, Q, t) bool tensor or Selection

    Returns
    -------
    (B, Hq, Q) float32 tensor in [0, 1]
    """
    mask = selected.mask() if isinstance(selected, Selection) else selected
    if q.shape[-1] != keys.shape[-1]:
        raise ValueError(f"q head_dim must equal keys head_dim {keys.shape[-1]}; got {q.shape[-1]}")
    if mask.shape[-1] != keys.shape[2] or mask.dtype != torch.bool:
        raise ValueError(
            f"selected must be a bool mask over t={keys.shape[2]} positions; got {mask.dtype} {tuple(mask.shape)}"
        )
    rep = q.shape[1] // keys.shape[1]
    kk = keys.repeat_interleave(rep, 1) if rep > 1 else keys
    if mask.shape[1] != q.shape[1]:
        mask = mask.repeat_interleave(q.shape[1] // mask.shape[1], 1)
    p = torch.softmax((q.float() @ kk.float().transpose(-1, -2)) / math.sqrt(q.shape[-1]), -1)
    return (p * mask).sum(-1)
