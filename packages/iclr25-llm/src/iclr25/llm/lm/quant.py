"""Shared weight/activation quantizers: round-to-nearest, GPTQ, per-token fake quantization.

All return *dequantized* ("fake-quantized") tensors in the input's dtype, so the result drops
into an ``nn.Linear`` unchanged.

GPTQ (Frantar et al., ICLR 2023, arXiv 2210.17323) quantizes the columns of ``W`` one at a time
and spreads each column's rounding error over the columns not yet quantized using the inverse
Hessian ``H⁻¹`` of the layer-output error ``‖(W − Q) X‖²``, ``H = 2 X Xᵀ / n``:

    for each column i:  q_i = quant(w_i);  e = (w_i − q_i) / [H⁻¹]_ii;  W[:, i:] −= e · [H⁻¹]_i,i:
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from iclr25.core.device import compute_dtype

__all__ = ["MinMaxQuantizer", "fake_quant_per_token", "gptq", "rtn"]


def _check_bits(bits, name: str = "bits") -> int:
    if isinstance(bits, bool) or not isinstance(bits, int) or not 1 <= bits <= 16:
        raise ValueError(f"{name} must be an int in [1, 16]; got {bits!r}")
    return bits


def _check_matrix(W, name: str = "W") -> torch.Tensor:
    if not isinstance(W, torch.Tensor) or W.dim() != 2 or not W.dtype.is_floating_point:
        shape = tuple(W.shape) if isinstance(W, torch.Tensor) else type(W).__name__
        raise ValueError(f"{name} must be a 2-D floating tensor (out_features, in_features); got {shape}")
    if not torch.isfinite(W).all():
        raise ValueError(f"{name} contains NaN or inf")
    return W


@dataclass
class MinMaxQuantizer:
    """Per-output-row (optionally per-group) uniform min-max quantizer, as in GPTQ's reference code.

    The range always contains 0 so the zero point is an integer on the grid.

    Attributes
    ----------
    bits : int
        Grid has ``2**bits`` levels.
    symmetric : bool
        Symmetric grid around 0 (zero point at the middle level).
    """

    bits: int
    symmetric: bool = False

    def __post_init__(self) -> None:
        _check_bits(self.bits)

    @property
    def maxq(self) -> int:
        return 2**self.bits - 1

    def find_params(self, W: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(scale, zero)`` of shape ``(rows, 1)`` from the columns of ``W`` ``(rows, cols)``."""
        W = W.to(compute_dtype(W))  # fp16/bf16 rounding would change grid decisions
        xmin = W.min(dim=1, keepdim=True).values.clamp(max=0)
        xmax = W.max(dim=1, keepdim=True).values.clamp(min=0)
        if self.symmetric:
            xmax = torch.maximum(xmin.abs(), xmax)
            xmin = -xmax
        flat = (xmin == 0) & (xmax == 0)  # an all-zero row: any scale works, avoid 0/0
        xmin = torch.where(flat, -torch.ones_like(xmin), xmin)
        xmax = torch.where(flat, torch.ones_like(xmax), xmax)
        scale = (xmax - xmin) / self.maxq
        zero = torch.full_like(scale, (self.maxq + 1) / 2) if self.symmetric else torch.round(-xmin / scale)
        return scale, zero

    def quantize(self, W: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor) -> torch.Tensor:
        """Round ``W`` ``(rows, k)`` to the grid and dequantize."""
        q = torch.clamp(torch.round(W.to(scale.dtype) / scale) + zero, 0, self.maxq)
        return scale * (q - zero)


def rtn(W: torch.Tensor, bits: int, group_size: int | None = None, symmetric: bool = False) -> torch.Tensor:
    """Round-to-nearest quantization of a weight matrix, per output row or per group of columns.

    Parameters
    ----------
    W : (out_features, in_features) float tensor
    bits : int
    group_size : int, optional
        Columns sharing one scale/zero; must divide ``in_features``. Default: one per row.
    symmetric : bool

    Returns
    -------
    (out_features, in_features) tensor, dequantized, ``W``'s dtype.
    """
    W = _check_matrix(W)
    qz = MinMaxQuantizer(bits, symmetric)
    cols = W.shape[1]
    gs = _check_group(group_size, cols)
    out = torch.empty_like(W, dtype=compute_dtype(W))
    for j in range(0, cols, gs):
        blk = W[:, j : j + gs]
        out[:, j : j + gs] = qz.quantize(blk, *qz.find_params(blk))
    return out.to(W.dtype)


def _check_group(group_size, cols: int) -> int:
    if group_size is None:
        return cols
    if not isinstance(group_size, int) or group_size < 1 or cols % group_size:
        raise ValueError(f"group_size must be a positive int dividing in_features={cols}; got {group_size!r}")
    return group_size


def gptq(
    W: torch.Tensor,
    H: torch.Tensor,
    quantizer: MinMaxQuantizer | int,
    blocksize: int = 128,
    percdamp: float = 0.01,
    act_order: bool = False,
    group_size: int | None = None,
) -> torch.Tensor:
    """GPTQ: column-by-column quantization with optimal error compensation (reference implementation).

    Parameters
    ----------
    W : (out_features, in_features) float tensor
    H : (in_features, in_features) tensor
        Proxy Hessian ``2 X Xᵀ / n`` of the layer inputs (see :func:`~iclr25.llm.lm.surgery.hessians`).
    quantizer : MinMaxQuantizer or int
        The grid (an int means ``MinMaxQuantizer(bits)``). Any object with
        ``find_params(W) -> params`` and ``quantize(W, *params)`` works.
    blocksize : int
        Columns per lazy-update block (changes speed, not the result up to rounding).
    percdamp : float
        Dampening ``λ = percdamp · mean(diag H)`` added to the diagonal.
    act_order : bool
        Quantize columns in order of decreasing ``diag H``; groups are then fixed from the
        original weights (GPTQ's ``static_groups``).
    group_size : int, optional
        Columns sharing one scale/zero, found when the first column of a group is reached.

    Returns
    -------
    (out_features, in_features) tensor, dequantized, ``W``'s dtype.

    Notes
    -----
    With ``H`` a multiple of the identity no error is propagated and the result equals :func:`rtn`.
    """
    W0 = _check_matrix(W)
    _rows, cols = W0.shape
    if not isinstance(H, torch.Tensor) or H.shape != (cols, cols):
        raise ValueError(f"H must be ({cols}, {cols}) for W of shape {tuple(W0.shape)}; got {getattr(H, 'shape', H)}")
    if not isinstance(blocksize, int) or blocksize < 1:
        raise ValueError(f"blocksize must be a positive int; got {blocksize!r}")
    if not percdamp >= 0:
        raise ValueError(f"percdamp must be >= 0; got {percdamp}")
    qz = MinMaxQuantizer(quantizer) if isinstance(quantizer, int) else quantizer
    gs = _check_group(group_size, cols)
    W = W0.detach().to(compute_dtype(W0)).clone()
    H = H.detach().to(device=W.device, dtype=W.dtype).clone()
    dead = torch.diag(H) == 0  # inputs that are always zero: their weights cannot matter
    H[dead, dead] = 1.0
    W[:, dead] = 0.0
    static = None
    if act_order and group_size is not None:
        static = [qz.find_params(W[:, j : j + gs]) for j in range(0, cols, gs)]
    perm = torch.argsort(torch.diag(H), descending=True) if act_order else torch.arange(cols, device=W.device)
    W, H = W[:, perm], H[perm][:, perm]
    H += percdamp * torch.mean(torch.diag(H)) * torch.eye(cols, device=W.device, dtype=W.dtype)
    L = torch.linalg.cholesky(H)
    Hinv = torch.linalg.cholesky(torch.cholesky_inverse(L), upper=True)
    Q = torch.zeros_like(W)
    params = qz.find_params(W) if group_size is None else None
    for i1 in range(0, cols, blocksize):
        i2 = min(i1 + blocksize, cols)
        W1 = W[:, i1:i2].clone()
        Err1 = torch.zeros_like(W1)
        Hinv1 = Hinv[i1:i2, i1:i2]
        for i in range(i2 - i1):
            col = i1 + i
            if group_size is not None:
                if static is not None:
                    params = static[int(perm[col]) // gs]
                elif col % gs == 0:
                    # current (error-updated) values of the group's columns
                    params = qz.find_params(torch.cat([W1[:, i:], W[:, i2:]], dim=1)[:, :gs])
            w = W1[:, i : i + 1]
            q = qz.quantize(w, *params)
            Q[:, col : col + 1] = q
            err = (w - q) / Hinv1[i, i]
            W1[:, i:] -= err @ Hinv1[i : i + 1, i:]
            Err1[:, i : i + 1] = err
        W[:, i2:] -= Err1 @ Hinv[i1:i2, i2:]
    Q = Q[:, torch.argsort(perm)]
    return Q.to(W0.dtype)


class _STERound(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return torch.round(x)

    @staticmethod
    def backward(ctx, g):
        return g


def fake_quant_per_token(x: torch.Tensor, bits: int, symmetric: bool = True) -> torch.Tensor:
    """Quantize-dequantize activations with one scale per token (per row of the last dimension).

    Symmetric: ``s = max|x| / (2^(b-1) − 1)``, ``q = clamp(round(x/s), −2^(b-1), 2^(b-1) − 1)``.
    Asymmetric: min-max over the token. Rounding uses a straight-through gradient, so this can sit
    inside a model during training.

    Parameters
    ----------
    x : (..., features) float tensor
    bits : int
        At least 2 for the symmetric grid.

    Returns
    -------
    tensor of ``x``'s shape and dtype
    """
    if not isinstance(x, torch.Tensor) or not x.dtype.is_floating_point or x.dim() < 1:
        raise ValueError(f"x must be a floating tensor with a feature dimension; got {getattr(x, 'shape', type(x))}")
    _check_bits(bits)
    if symmetric and bits < 2:
        raise ValueError(f"bits must be >= 2 for the symmetric grid; got {bits}")
    xf = x.to(compute_dtype(x))
    if symmetric:
        qmax = 2 ** (bits - 1) - 1
        scale = xf.abs().amax(dim=-1, keepdim=True).clamp(min=1e-8) / qmax
        q = torch.clamp(_STERound.apply(xf / scale), -qmax - 1, qmax)
        return (q * scale).to(x.dtype)
    maxq = 2**bits - 1
    lo, hi = xf.amin(dim=-1, keepdim=True), xf.amax(dim=-1, keepdim=True)
    scale = (hi - lo).clamp(min=1e-8) / maxq
    zero = torch.round(-lo / scale)
    q = torch.clamp(_STERound.apply(xf / scale) + zero, 0, maxq)
    return ((q - zero) * scale).to(x.dtype)
