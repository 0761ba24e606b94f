"""Packed 1-bit storage of a binarized layer and its GEMV: ``y = x Ŵᵀ (+ bias)`` read from the bits.

Layout (``out_features = n``, ``in_features = K``, column blocks of ``blocksize``; bit ``j % 32``
of word ``j // 32`` holds column ``j``, 1 meaning ``+1`` / "in the set")::

    signs   (n, K/32)  int32   sign of plane 1, every weight
    gmap    (n, K/32)  int32   group bitmap: 1 = the "big" group of the magnitude split
    cols    (K/32,)    int32   column bitmap: 1 = salient column (order 2)
    signs2  (Ks, ⌈n/32⌉) int32 sign of plane 2, salient columns only (Ks of them), packed along rows
    alpha   (n, nb, 6) fp16    per row and block: [ns-small, ns-big, s-small p1, s-small p2, s-big p1, s-big p2]
    mu      (n, nb, 6) fp16    BiLLM (one mean per plane, same slots) | (n, nb, 4) ARB/ARB-X
                               [ns-small, ns-big, s-small, s-big] | absent for ARB-RC
    beta    (K, 6)     fp16    ARB-RC column scales, same slots as alpha
    s2_index (K,)      int32   row of ``signs2`` for each salient column, -1 elsewhere (derived
                               from ``cols``; a lookup index for the kernel, not counted as storage)

The weight of entry ``(i, j)`` in block ``b`` with ``s = cols[j]`` and ``g = gmap[i, j]`` is
``α₁ B₁ (β₁) + s·α₂ B₂ (β₂) + μ`` with the slot ``(s, g)``'s scales: the sum of the groups of
:class:`~iclr25.llm.arb.BinarizedLinear`. For the paper's default partition (salient columns,
CGB and the magnitude split in every block) with ``n % 32 == 0`` and ``K % 32 == 0`` the bits
stored equal the hand count of :func:`~iclr25.llm.arb.block_bits` exactly (:attr:`PackedBinaryWeight.payload_bits`);
a partition with fewer groups keeps the same slots, zero-filled.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from iclr25.core.triton import Backend, BackendOp

from .binarize import BinarizationResult

__all__ = [
    "PACKED_GEMV",
    "PackedBinaryLinear",
    "PackedBinaryWeight",
    "pack_bits",
    "pack_groups",
    "packed_gemv",
    "unpack_bits",
]

_TENSORS = ("signs", "gmap", "cols", "signs2", "s2_index", "alpha", "mu", "beta", "bias")
_SLOTS = 6  # plane scales per row and block: (ns-small, ns-big, s-small ×2, s-big ×2)


def pack_bits(bits: torch.Tensor) -> torch.Tensor:
    """Pack a bool tensor ``(..., L)`` with ``L % 32 == 0`` into int32 words ``(..., L/32)``, LSB first."""
    if bits.dtype != torch.bool:
        raise TypeError(f"bits must be a bool tensor; got {bits.dtype}")
    if bits.shape[-1] % 32:
        raise ValueError(f"the last dimension of bits must be a multiple of 32; got {bits.shape[-1]}")
    b = bits.reshape(*bits.shape[:-1], bits.shape[-1] // 32, 32).to(torch.int64)
    words = (b << torch.arange(32, device=bits.device)).sum(-1)
    return torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)


def unpack_bits(words: torch.Tensor, length: int | None = None) -> torch.Tensor:
    """Inverse of :func:`pack_bits`: int32 ``(..., W)`` → bool ``(..., length or 32·W)``."""
    if words.dtype != torch.int32:
        raise TypeError(f"words must be int32; got {words.dtype}")
    sh = torch.arange(32, device=words.device, dtype=torch.int32)
    bits = ((words[..., None] >> sh) & 1).bool().reshape(*words.shape[:-1], 32 * words.shape[-1])
    return bits if length is None else bits[..., :length]


@dataclass
class PackedBinaryWeight:
    """Packed 1-bit weight (see the module docstring for the layout).

    Attributes
    ----------
    shape : (int, int)
        ``(out_features, in_features)``.
    blocksize : int
        Columns per scale block.
    signs, gmap, cols, signs2, s2_index : int32 tensors
    alpha : (n, nb, 6) float16
    mu : (n, nb, 6) or (n, nb, 4) float16, or None (ARB-RC)
    beta : (K, 6) float16 or None
    bias : (n,) float16 or None
    """

    shape: tuple
    blocksize: int
    signs: torch.Tensor
    gmap: torch.Tensor
    cols: torch.Tensor
    signs2: torch.Tensor
    s2_index: torch.Tensor
    alpha: torch.Tensor
    mu: torch.Tensor | None
    beta: torch.Tensor | None
    bias: torch.Tensor | None = None

    @property
    def device(self) -> torch.device:
        return self.signs.device

    def tensors(self) -> dict:
        """The stored tensors by name (None entries left out)."""
        return {k: getattr(self, k) for k in _TENSORS if getattr(self, k) is not None}

    @property
    def nbytes(self) -> int:
        """Bytes the weight occupies in memory (everything but the bias, the derived index included)."""
        return sum(t.numel() * t.element_size() for k, t in self.tensors().items() if k != "bias")

    @property
    def payload_bits(self) -> int:
        """Stored bits of the weight: :attr:`nbytes` without the derived ``s2_index``."""
        return 8 * (self.nbytes - self.s2_index.numel() * self.s2_index.element_size())

    def to(self, device) -> PackedBinaryWeight:
        """A copy on ``device``."""
        kw = {k: v.to(device) for k, v in self.tensors().items()}
        return PackedBinaryWeight(shape=self.shape, blocksize=self.blocksize, **{"mu": None, "beta": None, **kw})

    def dequantize(self) -> torch.Tensor:
        """The dense ``(n, K)`` float32 weight the bits encode (the spec of the kernel)."""
        n, K = self.shape
        s1 = unpack_bits(self.signs, K).float() * 2 - 1
        big = unpack_bits(self.gmap, K)
        sal = unpack_bits(self.cols, K)
        s2 = torch.zeros(n, K, device=self.device)
        if self.signs2.shape[0]:
            s2[:, sal] = (unpack_bits(self.signs2, n).float() * 2 - 1).t()
        blk = torch.arange(K, device=self.device) // self.blocksize
        A = self.alpha.float()[:, blk, :]  # (n, K, 6)

        def pick(T, ns_small, ns_big, s_small, s_big):
            # T: (..., K, slots); choose the slot of each entry from (salient column, big group)
            return torch.where(
                sal,
                torch.where(big, T[..., s_big], T[..., s_small]),
                torch.where(big, T[..., ns_big], T[..., ns_small]),
            )

        p1 = pick(A, 0, 1, 2, 4)
        p2 = torch.where(sal, torch.where(big, A[..., 5], A[..., 3]), torch.zeros_like(p1))
        if self.beta is not None:
            Bt = self.beta.float()
            p1 = p1 * pick(Bt, 0, 1, 2, 4)
            p2 = p2 * torch.where(sal, torch.where(big, Bt[:, 5], Bt[:, 3]), torch.zeros_like(Bt[:, 3]))
        W = p1 * s1 + p2 * s2
        if self.mu is not None:
            Mu = self.mu.float()[:, blk, :]
            if Mu.shape[-1] == _SLOTS:  # one mean per plane (BiLLM): the planes' means add up
                Mu = torch.stack([Mu[..., 0], Mu[..., 1], Mu[..., 2] + Mu[..., 3], Mu[..., 4] + Mu[..., 5]], -1)
            W = W + pick(Mu, 0, 1, 2, 3)
        return W


def _block_slots(groups: list, start: int, n: int, m: int) -> tuple:
    """Assign a block's groups to the slots; returns (salient columns, big mask, [(slot, group)])."""
    by_order = {1: [], 2: []}
    for g in groups:
        if g.order not in by_order:
            raise ValueError(f"block at column {start}: group order must be 1 or 2; got {g.order}")
        by_order[g.order].append(g)
    if any(len(v) > 2 for v in by_order.values()):
        raise ValueError(f"block at column {start}: at most two groups per order can be packed")
    cover = sum(g.mask.to(torch.int32) for g in groups)
    if not bool((cover == 1).all()):
        raise ValueError(f"block at column {start}: group masks must be disjoint and cover the block")
    o2 = sum(g.mask.to(torch.int32) for g in by_order[2]) if by_order[2] else torch.zeros(n, m, dtype=torch.int32)
    sal = o2.bool().any(0)
    if not bool((o2.bool() == sal[None, :]).all()):
        raise ValueError(f"block at column {start}: order-2 groups must cover whole columns (salient columns)")
    big = torch.zeros(n, m, dtype=torch.bool, device=sal.device)
    slots = []
    for order, base in ((1, 0), (2, 2)):
        gs = by_order[order]
        # the quantizer lists a magnitude split as (big, small); a lone group is "small"
        if len(gs) == 2:
            big |= gs[0].mask
            slots += [(base + 1, gs[0]), (base, gs[1])]
        elif gs:
            slots.append((base, gs[0]))
    return sal, big, slots


def pack_groups(in_features: int, out_features: int, groups: list, bias: torch.Tensor | None = None):
    """Pack the groups of a :class:`~iclr25.llm.arb.BinarizedLinear` into :class:`PackedBinaryWeight`.

    Parameters
    ----------
    in_features, out_features : int
        ``K`` (a multiple of 32) and ``n``.
    groups : list of (int, BinarizationResult)
        ``(first_column, group)``; groups with the same first column form a block. Blocks must
        share one width (a multiple of 32; the last may be shorter); inside a block at most two
        groups per order, disjoint, covering it, the order-2 ones on whole columns.
    bias : (n,) tensor, optional
    """
    n, K = out_features, in_features
    if not groups:
        raise ValueError("groups is empty: nothing to pack")
    if K % 32:
        raise ValueError(f"in_features must be a multiple of 32 to pack; got {K}")
    blocks: dict[int, list] = {}
    for start, g in groups:
        if not isinstance(g, BinarizationResult):
            raise TypeError(f"groups must hold BinarizationResult; got {type(g).__name__}")
        blocks.setdefault(int(start), []).append(g)
    starts = sorted(blocks)
    widths = [blocks[s][0].mask.shape[1] for s in starts]
    bs = widths[0]
    if starts != [i * bs for i in range(len(starts))] or any(w != bs for w in widths[:-1]) or widths[-1] > bs:
        raise ValueError(f"blocks must have one width (the last may be shorter); got starts {starts[:4]}…")
    if starts[-1] + widths[-1] != K or bs % 32:
        raise ValueError(f"blocks must cover {K} columns with a width that is a multiple of 32; got width {bs}")
    kinds = {g.method == "arb_rc" for gs in blocks.values() for g in gs}
    if len(kinds) > 1:
        raise ValueError("cannot pack a layer mixing ARB-RC groups with mean-based groups")
    rc = kinds == {True}
    per_plane_mu = not rc and all(g.method == "plain" for gs in blocks.values() for g in gs)
    nb = len(starts)
    dev = blocks[starts[0]][0].mask.device
    S1 = torch.zeros(n, K, dtype=torch.bool, device=dev)
    BIG = torch.zeros(n, K, dtype=torch.bool, device=dev)
    SAL = torch.zeros(K, dtype=torch.bool, device=dev)
    S2 = torch.zeros(n, K, dtype=torch.bool, device=dev)
    alpha = torch.zeros(n, nb, _SLOTS, device=dev)
    mu = None if rc else torch.zeros(n, nb, _SLOTS if per_plane_mu else 4, device=dev)
    beta = torch.zeros(K, _SLOTS, device=dev) if rc else None
    plane_slots = {0: [0], 1: [1], 2: [2, 3], 3: [4, 5]}  # slot → its alpha/beta columns per plane
    for b, s in enumerate(starts):
        gs = blocks[s]
        m = gs[0].mask.shape[1]
        sal, big, slots = _block_slots(gs, s, n, m)
        SAL[s : s + m], BIG[:, s : s + m] = sal, big
        for slot, g in slots:
            M, B = g.mask, g.params["B"]
            S1[:, s : s + m] |= M & (B[0] > 0)
            if g.order == 2:
                S2[:, s : s + m] |= M & (B[1] > 0)
            for k, c in enumerate(plane_slots[slot][: g.order]):
                alpha[:, b, c] = g.params["alpha"][k]
                if rc:
                    beta[s : s + m, c] = g.params["beta"][k]
                elif per_plane_mu:
                    mu[:, b, c] = g.params["mu"][k]
            if not rc and not per_plane_mu:
                mu[:, b, slot] = g.params["mu"].sum(0)
    nw = -(-n // 32)
    S2c = torch.zeros(nw * 32, int(SAL.sum()), dtype=torch.bool, device=dev)
    S2c[:n] = S2[:, SAL]
    cols = pack_bits(SAL)
    s2_index = torch.where(SAL, torch.cumsum(SAL.to(torch.int32), 0) - 1, -1).to(torch.int32)
    return PackedBinaryWeight(
        shape=(n, K),
        blocksize=bs,
        signs=pack_bits(S1),
        gmap=pack_bits(BIG),
        cols=cols,
        signs2=pack_bits(S2c.t().contiguous()),
        s2_index=s2_index,
        alpha=alpha.half(),
        mu=None if mu is None else mu.half(),
        beta=None if beta is None else beta.half(),
        bias=None if bias is None else bias.detach().half(),
    )


def packed_gemv_reference(x: torch.Tensor, P: PackedBinaryWeight) -> torch.Tensor:
    """Spec: dequantize the bits to float32 and multiply. ``x: (batch, K)`` → ``(batch, n)`` float32."""
    y = x.float() @ P.dequantize().t()
    return y if P.bias is None else y + P.bias.float()


def _triton(x, P):
    from .kernels import packed_gemv_triton

    return packed_gemv_triton(x, P)


_MAX_BATCH = 16


def _limits(x, P) -> list[str]:
    reasons = []
    if x.dim() != 2 or x.shape[1] != P.shape[1]:  # the kernel reads x as (batch, K) rows
        reasons.append(f"the GEMV kernel takes x of shape (batch, {P.shape[1]}), got {tuple(x.shape)}")
    elif x.shape[0] > _MAX_BATCH:
        reasons.append(f"the GEMV kernel is for small batches (<= {_MAX_BATCH} rows), got {x.shape[0]}")
    if x.device != P.device:
        reasons.append(f"x is on {x.device} but the packed weight on {P.device}")
    if P.blocksize % 32:
        reasons.append(f"the GEMV kernel needs a blocksize that is a multiple of 32, got {P.blocksize}")
    return reasons


PACKED_GEMV = BackendOp(
    "arb_packed_gemv",
    [Backend("triton", _triton, supports=_limits, uses_triton=True), Backend("reference", packed_gemv_reference)],
)


def packed_gemv(x: torch.Tensor, P: PackedBinaryWeight, backend: str = "auto") -> torch.Tensor:
    """``y = x Ŵᵀ (+ bias)`` from the packed bits.

    Parameters
    ----------
    x : (batch, in_features) or (in_features,) float tensor
    P : PackedBinaryWeight
    backend : {"auto", "reference", "triton"}
        ``"triton"`` reads the packed words directly (batch <= 16, CUDA or the interpreter).

    Returns
    -------
    (batch, out_features) or (out_features,) float32 tensor
    """
    if not isinstance(P, PackedBinaryWeight):
        raise TypeError(f"P must be a PackedBinaryWeight; got {type(P).__name__}")
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise TypeError(f"x must be a float tensor; got {getattr(x, 'dtype', type(x).__name__)}")
    squeeze = x.dim() == 1
    x2 = x[None] if squeeze else x
    if x2.dim() != 2 or x2.shape[1] != P.shape[1]:
        raise ValueError(f"x must be (batch, {P.shape[1]}) or ({P.shape[1]},); got {tuple(x.shape)}")
    y = PACKED_GEMV(x2, P, backend=backend)
    return y[0] if squeeze else y


class PackedBinaryLinear(nn.Module):
    """A linear layer computed from :class:`PackedBinaryWeight` (no dense weight kept).

    Parameters
    ----------
    packed : PackedBinaryWeight
    backend : {"auto", "reference", "triton"}
        Passed to :func:`packed_gemv` for inputs with at most 16 rows; larger inputs dequantize
        once and use ``torch.matmul`` (a GEMM is compute-bound, the bits buy nothing there).

    Notes
    -----
    ``state_dict()`` holds the packed tensors by name (``signs``, ``gmap``, ``alpha``, …);
    ``load_state_dict`` copies them into a layer whose packed tensors have the same shapes.
    """

    def __init__(self, packed: PackedBinaryWeight, backend: str = "auto") -> None:
        super().__init__()
        if not isinstance(packed, PackedBinaryWeight):
            raise TypeError(f"packed must be a PackedBinaryWeight; got {type(packed).__name__}")
        if backend != "auto" and backend not in PACKED_GEMV.names:
            raise ValueError(f"backend must be 'auto' or one of {list(PACKED_GEMV.names)}; got {backend!r}")
        self.packed = packed
        self.backend = backend
        self.out_features, self.in_features = packed.shape

    def _apply(self, fn, recurse=True):
        # keep the packed tensors on the module's device when it is moved
        self.packed = self.packed.to(fn(torch.zeros(0, device=self.packed.device)).device)
        return super()._apply(fn, recurse)

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        # the packed tensors are the layer's state: ``state_dict()`` / ``torch.save`` keep them
        super()._save_to_state_dict(destination, prefix, keep_vars)
        for k, t in self.packed.tensors().items():
            destination[prefix + k] = t

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, errors):
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, errors)
        own = self.packed.tensors()
        new, bad = {}, False
        for k in _TENSORS:
            key = prefix + k
            if key in unexpected_keys:
                unexpected_keys.remove(key)
            if k not in own:
                if strict and key in state_dict:
                    unexpected_keys.append(key)
            elif key not in state_dict:
                if strict:
                    missing_keys.append(key)
            elif not isinstance(state_dict[key], torch.Tensor) or state_dict[key].shape != own[k].shape:
                got = getattr(state_dict[key], "shape", type(state_dict[key]).__name__)
                errors.append(f"size mismatch for {key}: got {got} from the checkpoint, the layer has {own[k].shape}")
                bad = True
            else:
                new[k] = state_dict[key]
        with torch.no_grad():  # all or nothing: a mix of two packings would be a different weight
            for k, v in ({} if bad else new).items():
                own[k].copy_(v)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lead = x.shape[:-1]
        x2 = x.reshape(-1, x.shape[-1])
        # larger inputs dequantize once (the reference), after the same input checks
        backend = self.backend if x2.shape[0] <= _MAX_BATCH else "reference"
        y = packed_gemv(x2, self.packed, backend=backend)
        return y.to(x.dtype).reshape(*lead, self.out_features)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bytes={self.packed.nbytes}"
