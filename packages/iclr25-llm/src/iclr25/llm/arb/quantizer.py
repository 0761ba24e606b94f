"""Layer-level 1-bit PTQ: BiLLM's partition (salient columns, magnitude split, CGB) with GPTQ feedback.

Per 128-column block::

    W_blk ─► saliency W²/[Hinv]_jj² ─► top-k columns (k searched) ─► order-2 group(s)  ┐
                                   └─► rest: |w| threshold (81 quantiles) ─► 2 order-1 ├─► Ŵ_blk
                                                                                       ┘
    then column by column: e = (w − ŵ)/[Hinv]_jj, pushed to the later columns (GPTQ).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import torch

from iclr25.core.device import compute_dtype

from .binarize import METHODS, binarize, check_weight
from .reference import search_errors
from .search import threshold_search

__all__ = ["ARBConfig", "ARBQuantizer", "BlockResult", "LayerResult", "block_bits"]

log = logging.getLogger(__name__)
_FP16 = 16


@dataclass
class ARBConfig:
    """Settings of :class:`ARBQuantizer` (defaults: the paper's).

    Attributes
    ----------
    method : {"arb", "arb_x", "arb_rc", "plain"}
        Binarizer of the final groups (``"plain"`` is BiLLM).
    cgb : bool
        Column-group bitmap: also split the salient columns by magnitude (two order-2 groups).
    blocksize : int
        Columns per GPTQ block (paper: 128).
    percdamp : float
        Hessian dampening, a fraction of ``mean(diag H)`` (paper: 0.01).
    iters : int
        ARB refinement iterations T (paper: 15).
    x_iters : int
        ARB-X iterations after ARB (paper: 15).
    max_salient_cols : int
        Salient-column counts searched: ``1 … max_salient_cols − 1`` (paper: 50); 0 disables the
        salient split.
    split_quantiles : (float, float, int) or None
        Magnitude thresholds searched: ``linspace(lo, hi, count)`` quantiles of ``|W|`` (paper:
        0.10 … 0.90, 81); None disables the split.
    gptq : bool
        GPTQ error feedback (off: each block is binarized independently).
    calib_seqs, seq_len : int
        Calibration budget the paper uses (128 × 2048); informational, the caller builds batches.
    """

    method: str = "arb"
    cgb: bool = True
    blocksize: int = 128
    percdamp: float = 0.01
    iters: int = 15
    x_iters: int = 15
    max_salient_cols: int = 50
    split_quantiles: tuple[float, float, int] | None = (0.10, 0.90, 81)
    gptq: bool = True
    calib_seqs: int = 128
    seq_len: int = 2048

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}; got {self.method!r}")
        for name in ("blocksize", "iters", "x_iters", "max_salient_cols"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < (1 if name == "blocksize" else 0):
                raise ValueError(f"{name} must be an int >= {1 if name == 'blocksize' else 0}; got {v!r}")
        if not self.percdamp >= 0:
            raise ValueError(f"percdamp must be >= 0; got {self.percdamp!r}")
        if self.split_quantiles is not None:
            if not isinstance(self.split_quantiles, tuple | list) or len(self.split_quantiles) != 3:
                raise ValueError(f"split_quantiles must be (lo, hi, count) or None; got {self.split_quantiles!r}")
            lo, hi, cnt = self.split_quantiles
            if not (0 < lo <= hi < 1) or not isinstance(cnt, int) or cnt < 1:
                raise ValueError(
                    f"split_quantiles must be (lo, hi, count) with 0 < lo <= hi < 1; got {self.split_quantiles}"
                )


@dataclass
class BlockResult:
    """One column block: its offset, its groups and its storage cost.

    Attributes
    ----------
    start : int
        First column of the block in the layer.
    groups : list of BinarizationResult
        Disjoint groups covering the block.
    n_salient : int
        Salient columns chosen (0 when the split is off).
    salient_cols : (m,) bool tensor
        The column bitmap.
    bits : int
        Storage of the block (see :func:`block_bits`).
    """

    start: int
    groups: list
    n_salient: int
    salient_cols: torch.Tensor
    bits: int


@dataclass
class LayerResult:
    """A binarized layer: ``W_hat (out, in)``, its blocks, bits, and errors against the original W."""

    W_hat: torch.Tensor
    blocks: list = field(default_factory=list)
    bits: int = 0
    weight_error: float = 0.0
    output_error: float = 0.0

    @property
    def avg_bits(self) -> float:
        """Bits per weight including bitmaps and fp16 scales."""
        return self.bits / self.W_hat.numel()


def _compensate(Wc: torch.Tensor, W1: torch.Tensor, Q1: torch.Tensor, Hinv: torch.Tensor, i1: int, i2: int) -> None:
    """GPTQ error feedback for columns ``i1:i2`` quantized to ``Q1``, in place.

    Each column's error, scaled by the inverse-Hessian diagonal, is pushed onto the block's later
    columns (``W1``, the block's working copy) and, once the block is done, onto every column of
    ``Wc`` after it.
    """
    Hinv1 = Hinv[i1:i2, i1:i2]
    Err1 = torch.zeros_like(W1)
    for i in range(i2 - i1):
        err = (W1[:, i] - Q1[:, i]) / Hinv1[i, i]
        W1[:, i:] -= err[:, None] * Hinv1[i, i:][None, :]
        Err1[:, i] = err
    Wc[:, i2:] -= Err1 @ Hinv[i1:i2, i2:]


def block_bits(n: int, m: int, groups: list, col_bitmap: bool, group_bitmap_entries: int) -> int:
    """Exact storage of one block in bits.

    Counted: one sign bit per weight per plane of its group; the column bitmap (1 bit per column,
    when salient columns are split off); the group bitmap (1 bit per entry inside a magnitude
    split); fp16 scales per group: mean-based groups store α per plane and μ (one per plane for
    plain/BiLLM, one shared for ARB/ARB-X) for every row; ARB-RC groups store α (per row) and β
    (per column) per plane.
    """
    bits = sum(g.order * int(g.mask.sum()) for g in groups)
    bits += m if col_bitmap else 0
    bits += group_bitmap_entries
    for g in groups:
        if g.method == "arb_rc":
            bits += _FP16 * g.order * (n + m)
        else:
            n_mu = g.order if g.method == "plain" else 1
            bits += _FP16 * n * (g.order + n_mu)
    return bits


def _quantile_thresholds(W: torch.Tensor, mask: torch.Tensor, spec) -> torch.Tensor:
    lo, hi, cnt = spec
    vals = W.abs()[mask]
    if vals.numel() == 0:
        return torch.zeros(0, dtype=W.dtype, device=W.device)
    q = torch.linspace(lo, hi, cnt, dtype=vals.dtype, device=W.device)
    return torch.quantile(vals.to(compute_dtype(vals)), q.to(compute_dtype(vals))).to(W.dtype)


def _split(W, base, spec, order, S):
    """Best magnitude split of ``base``: masks ``(|w| > p) & base`` and ``(|w| <= p) & base``."""
    p = _quantile_thresholds(W, base, spec)
    if p.numel() == 0:
        return base, torch.zeros_like(base)
    if order == 1 and S is None:
        err = threshold_search(W, base, p)  # the dispatched op (Triton kernel on GPU)
    else:
        big = (W.abs()[None] > p[:, None, None]) & base[None]
        err = search_errors(W, big, base[None] & ~big, order, order, S)
    t = int(torch.argmin(err))
    big = (W.abs() > p[t]) & base
    return big, base & ~big


class ARBQuantizer:
    """Binarize one weight matrix with the partition, the chosen binarizer and GPTQ feedback.

    Parameters
    ----------
    config : ARBConfig, optional
    """

    def __init__(self, config: ARBConfig | None = None) -> None:
        self.config = config or ARBConfig()
        if not isinstance(self.config, ARBConfig):
            raise TypeError(f"config must be an ARBConfig; got {type(self.config).__name__}")

    def binarize_block(self, W: torch.Tensor, hinv_diag: torch.Tensor, S: torch.Tensor | None) -> BlockResult:
        """Partition and binarize one block.

        Parameters
        ----------
        W : (n, m) float tensor
        hinv_diag : (m,) tensor
            Diagonal of the upper Cholesky factor of ``H⁻¹`` for these columns (saliency scale).
        S : (m, m) tensor or None
            ``XᵀX/N`` for these columns; used by ARB-X (fit and split search).
        """
        cfg = self.config
        n, m = W.shape
        S_search = S if cfg.method == "arb_x" else None
        full = torch.ones(n, m, dtype=torch.bool, device=W.device)
        sal = torch.zeros(m, dtype=torch.bool, device=W.device)
        k = 0
        kmax = min(cfg.max_salient_cols - 1, m - 1)
        if kmax >= 1:
            score = (W**2 / hinv_diag[None, :] ** 2).sum(0)
            order_cols = torch.argsort(score, descending=True)
            ks = torch.arange(1, kmax + 1, device=W.device)
            rank = torch.empty_like(order_cols)
            rank[order_cols] = torch.arange(m, device=W.device)
            colmask = rank[None, :] < ks[:, None]  # (K, m)
            A = colmask[:, None, :].expand(-1, n, -1)
            err = search_errors(W, A, ~A, 2, 2, S_search)
            k = int(ks[int(torch.argmin(err))])
            sal = colmask[k - 1]
        sal_mask = full & sal[None, :]
        rest = full & ~sal[None, :]
        parts: list[tuple[torch.Tensor, int]] = []
        gb = 0
        if k and cfg.cgb and cfg.split_quantiles is not None:
            a, b = _split(W, sal_mask, cfg.split_quantiles, 2, S_search)
            parts += [(a, 2), (b, 2)]
            gb += int(sal_mask.sum())
        elif k:
            parts.append((sal_mask, 2))
        if cfg.split_quantiles is not None:
            a, b = _split(W, rest, cfg.split_quantiles, 1, S_search)
            parts += [(a, 1), (b, 1)]
            gb += int(rest.sum())
        else:
            parts.append((rest, 1))
        groups = [
            binarize(W, mk, cfg.method, order, cfg.iters, S if cfg.method == "arb_x" else None, cfg.x_iters)
            for mk, order in parts
        ]
        bits = block_bits(n, m, groups, col_bitmap=kmax >= 1, group_bitmap_entries=gb)
        return BlockResult(start=0, groups=groups, n_salient=k, salient_cols=sal, bits=bits)

    def quantize(self, W: torch.Tensor, H: torch.Tensor | None = None) -> LayerResult:
        """Binarize a layer.

        Parameters
        ----------
        W : (out_features, in_features) float tensor
        H : (in_features, in_features) tensor, optional
            Proxy Hessian ``2XᵀX/N`` of the layer inputs. None means the identity (no feedback,
            saliency by magnitude); ARB-X needs it.

        Returns
        -------
        LayerResult
        """
        cfg = self.config
        check_weight(W)
        _rows, cols = W.shape
        if H is None:
            if cfg.method == "arb_x":
                raise ValueError("ARB-X needs calibration inputs: pass H = 2XᵀX/N")
            H = 2.0 * torch.eye(cols, dtype=compute_dtype(W), device=W.device)
        if not isinstance(H, torch.Tensor) or H.shape != (cols, cols):
            raise ValueError(
                f"H must be ({cols}, {cols}) for W of shape {tuple(W.shape)}; got {getattr(H, 'shape', H)}"
            )
        if not torch.isfinite(H).all():
            raise ValueError("H contains NaN or Inf")
        W0 = W.detach().to(compute_dtype(W))  # GPTQ updates and Cholesky factors are too coarse in fp16/bf16
        Wc = W0.clone()
        H = H.detach().to(device=W.device, dtype=W0.dtype).clone()
        S_full = H / 2.0  # XᵀX/N, undamped: the output-error metric
        dead = torch.diag(H) == 0
        H[dead, dead] = 1.0
        Wc[:, dead] = 0.0
        H += cfg.percdamp * torch.mean(torch.diag(H)) * torch.eye(cols, device=W.device, dtype=H.dtype)
        L = torch.linalg.cholesky(H)
        Hinv = torch.linalg.cholesky(torch.cholesky_inverse(L), upper=True)
        Q = torch.zeros_like(Wc)
        blocks = []
        for i1 in range(0, cols, cfg.blocksize):
            i2 = min(i1 + cfg.blocksize, cols)
            W1 = Wc[:, i1:i2].clone()
            Hinv1 = Hinv[i1:i2, i1:i2]
            # the whole block is binarized first: its groups share statistics across columns
            blk = self.binarize_block(W1, torch.diag(Hinv1), S_full[i1:i2, i1:i2])
            blk.start = i1
            blocks.append(blk)
            Q1 = sum(g.W_hat for g in blk.groups)
            Q[:, i1:i2] = Q1
            if cfg.gptq:
                _compensate(Wc, W1, Q1, Hinv, i1, i2)
        R = W0 - Q
        return LayerResult(
            W_hat=Q.to(W.dtype),
            blocks=blocks,
            bits=sum(b.bits for b in blocks),
            weight_error=float((R**2).sum()),
            output_error=float(((R @ S_full) * R).sum()),
        )


def pbllm_quantize(
    W: torch.Tensor,
    H: torch.Tensor | None = None,
    salient_frac: float = 0.1,
    salient_bits: int = 8,
    blocksize: int = 128,
    percdamp: float = 0.01,
) -> LayerResult:
    """PB-LLM baseline: the top ``salient_frac`` weights per block (Hessian saliency) kept at
    ``salient_bits`` (per-row min-max grid), the rest binarized (plain, order 1), GPTQ feedback.

    Bits: 1 sign bit per binary weight, ``salient_bits`` per salient weight, a 1-bit/weight
    salient bitmap, fp16 α and μ per row for the binary part and fp16 scale and zero per row.
    """
    if not 0 <= salient_frac < 1:
        raise ValueError(f"salient_frac must be in [0, 1); got {salient_frac}")
    if not isinstance(salient_bits, int) or not 2 <= salient_bits <= 16:
        raise ValueError(f"salient_bits must be an int in [2, 16]; got {salient_bits!r}")
    if not isinstance(blocksize, int) or blocksize < 1:
        raise ValueError(f"blocksize must be an int >= 1; got {blocksize!r}")
    if not percdamp >= 0:
        raise ValueError(f"percdamp must be >= 0; got {percdamp!r}")
    check_weight(W)
    _rows, cols = W.shape
    if H is not None and not isinstance(H, torch.Tensor):
        raise TypeError(f"H must be a torch.Tensor or None; got {type(H).__name__}")
    dt = compute_dtype(W)
    H = 2.0 * torch.eye(cols, device=W.device, dtype=dt) if H is None else H.detach().to(dt).clone()
    if H.shape != (cols, cols):
        raise ValueError(f"H must be ({cols}, {cols}); got {tuple(H.shape)}")
    if not torch.isfinite(H).all():
        raise ValueError("H contains NaN or Inf")
    W0 = W.detach().to(dt)
    Wc = W0.clone()
    S_full = H / 2.0
    dead = torch.diag(H) == 0
    H[dead, dead] = 1.0
    H += percdamp * torch.mean(torch.diag(H)) * torch.eye(cols, device=W.device, dtype=dt)
    Hinv = torch.linalg.cholesky(torch.cholesky_inverse(torch.linalg.cholesky(H)), upper=True)
    Q = torch.zeros_like(Wc)
    bits = 0
    maxq = 2**salient_bits - 1
    for i1 in range(0, cols, blocksize):
        i2 = min(i1 + blocksize, cols)
        W1 = Wc[:, i1:i2].clone()
        Hinv1 = Hinv[i1:i2, i1:i2]
        score = W1**2 / torch.diag(Hinv1)[None, :] ** 2
        n_sal = round(salient_frac * score.numel())
        # contiguous even when W is a transposed view (GPT-2 Conv1D): sal.view(-1) below
        sal = torch.zeros(W1.shape, dtype=torch.bool, device=W1.device)
        if n_sal:
            sal.view(-1)[torch.topk(score.reshape(-1), n_sal).indices] = True
        lo = torch.where(sal, W1, torch.full_like(W1, float("inf"))).amin(1, keepdim=True)
        hi = torch.where(sal, W1, torch.full_like(W1, float("-inf"))).amax(1, keepdim=True)
        lo, hi = torch.where(torch.isfinite(lo), lo, 0.0), torch.where(torch.isfinite(hi), hi, 0.0)
        scale = ((hi - lo) / maxq).clamp_min(1e-12)
        q8 = torch.clamp(torch.round((W1 - lo) / scale), 0, maxq) * scale + lo
        Q1 = torch.where(sal, q8, binarize(W1, ~sal, "plain", 1, 0).W_hat)
        n = W1.shape[0]
        bits += int((~sal).sum()) + salient_bits * int(sal.sum()) + W1.numel() + _FP16 * n * 4
        Q[:, i1:i2] = Q1
        _compensate(Wc, W1, Q1, Hinv, i1, i2)
    R = W0 - Q
    return LayerResult(
        W_hat=Q.to(W.dtype),
        bits=bits,
        weight_error=float((R**2).sum()),
        output_error=float(((R @ S_full) * R).sum()),
    )
