"""``BinarizedLinear``: a linear layer stored as sign bits, bitmaps and fp16 scales."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from iclr25.core.device import compute_dtype

from .binarize import BinarizationResult
from .packed import PackedBinaryLinear, PackedBinaryWeight, pack_groups
from .quantizer import LayerResult

__all__ = ["BinarizedLinear"]


def _packbits(x: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(np.packbits(x.detach().cpu().numpy().astype(np.uint8).reshape(-1)))


def _unpackbits(p: torch.Tensor, shape) -> torch.Tensor:
    n = int(np.prod(shape))
    return torch.from_numpy(np.unpackbits(p.numpy())[:n].reshape(shape).astype(bool))


class BinarizedLinear(nn.Module):
    """A linear layer whose weight is a sum of binarized groups.

    Parameters
    ----------
    in_features, out_features : int
    groups : list of (int, BinarizationResult)
        ``(first_column, result)``; each result covers a column range of the weight.
    bias : (out_features,) tensor, optional

    Notes
    -----
    ``forward`` uses the dequantized weight (a buffer, rebuilt from the groups); :meth:`pack`
    gives the 1-bit storage and :meth:`from_packed` rebuilds the layer from it (scales in fp16).
    ``load_state_dict`` restores the dequantized weight only: when it differs from this layer's
    groups, the groups are dropped and :meth:`pack` / :meth:`pack_bits` raise instead of packing a
    weight the layer no longer computes (save :meth:`pack`'s archive to keep the bits).
    """

    def __init__(self, in_features: int, out_features: int, groups: list, bias: torch.Tensor | None = None) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.groups: list | None = list(groups)
        for start, g in self.groups:
            if not isinstance(g, BinarizationResult):
                raise TypeError(f"groups must hold BinarizationResult; got {type(g).__name__}")
            m = g.mask.shape[1]
            if g.mask.shape[0] != out_features or start < 0 or start + m > in_features:
                raise ValueError(f"group of shape {tuple(g.mask.shape)} at column {start} does not fit the weight")
        self.register_buffer("weight", self._dequantize())
        self.register_buffer("bias", None if bias is None else bias.detach().clone())
        self.register_load_state_dict_post_hook(_drop_stale_groups)

    def _dequantize(self) -> torch.Tensor:
        # fp32 at least; groups binarized in fp64 (from an fp64 weight) keep their fp64 reconstruction
        dt = compute_dtype(*(g.params["alpha"] for _, g in self.groups or ()))
        W = torch.zeros(self.out_features, self.in_features, dtype=dt)
        for start, g in self.groups or ():
            W[:, start : start + g.mask.shape[1]] += g.reconstruct().to(dt).cpu()
        return W

    def _groups(self) -> list:
        if self.groups is None:
            raise ValueError(
                "this layer's weight was replaced by load_state_dict and no longer matches its binarized groups; "
                "rebuild it with BinarizedLinear.from_packed(archive) from a saved pack() archive"
            )
        return self.groups

    @classmethod
    def from_result(cls, linear: nn.Module, res: BinarizationResult | LayerResult) -> BinarizedLinear:
        """Build from a linear layer (for its bias and shape) and a binarization of its weight."""
        if not isinstance(getattr(linear, "weight", None), torch.Tensor):
            raise TypeError(f"linear must be an nn.Linear or a Conv1D; got {type(linear).__name__}")
        out_f, in_f = (
            (linear.out_features, linear.in_features) if isinstance(linear, nn.Linear) else linear.weight.t().shape
        )
        if isinstance(res, LayerResult):
            if not res.blocks:
                raise ValueError(
                    "res has no binarized blocks (a PB-LLM result keeps 8-bit weights): use its W_hat as a dense weight"
                )
            groups = [(b.start, g) for b in res.blocks for g in b.groups]
            shape = tuple(res.W_hat.shape)
        elif isinstance(res, BinarizationResult):
            groups = [(0, res)]
            shape = tuple(res.mask.shape)
        else:
            raise TypeError(f"res must be a BinarizationResult or LayerResult; got {type(res).__name__}")
        if shape != (out_f, in_f):
            raise ValueError(f"res is for a weight of shape {shape}; the linear's weight is ({out_f}, {in_f})")
        layer = cls(in_f, out_f, groups, getattr(linear, "bias", None))
        return layer.to(linear.weight.device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight.to(x.dtype), None if self.bias is None else self.bias.to(x.dtype))

    def pack(self) -> dict:
        """1-bit storage: per group the mask and the sign planes as packed bits, fp16 scales.

        Returns
        -------
        dict
            ``{"in_features", "out_features", "bias", "groups": [{start, shape, method, order,
            mask (uint8), B (uint8), alpha, mu | beta (fp16)}]}``.
        """
        out = []
        for start, g in self._groups():
            p = g.params
            d = {
                "start": start,
                "shape": tuple(g.mask.shape),
                "method": g.method,
                "order": g.order,
                "mask": _packbits(g.mask),
                "B": _packbits(p["B"] > 0),
                "alpha": p["alpha"].half().cpu(),
            }
            d["beta" if "beta" in p else "mu"] = (p["beta"] if "beta" in p else p["mu"]).half().cpu()
            out.append(d)
        bias = None if self.bias is None else self.bias.half().cpu()
        return {"in_features": self.in_features, "out_features": self.out_features, "bias": bias, "groups": out}

    @classmethod
    def from_packed(cls, packed: dict) -> BinarizedLinear:
        """Rebuild a layer from :meth:`pack`'s output."""
        groups = []
        for d in packed["groups"]:
            shape = d["shape"]
            mask = _unpackbits(d["mask"], shape)
            B = _unpackbits(d["B"], (d["order"], *shape)).float() * 2 - 1
            params = {"B": B, "alpha": d["alpha"].float()}
            params["beta" if "beta" in d else "mu"] = (d["beta"] if "beta" in d else d["mu"]).float()
            g = BinarizationResult(W_hat=torch.zeros(0), mask=mask, method=d["method"], order=d["order"], params=params)
            groups.append((d["start"], g))
        bias = packed["bias"]
        return cls(packed["in_features"], packed["out_features"], groups, None if bias is None else bias.float())

    def pack_bits(self) -> PackedBinaryWeight:
        """The GEMV layout: sign words, bitmaps and fp16 scales (see :mod:`iclr25.llm.arb.packed`).

        Unlike :meth:`pack` (a per-group archive), this stores each weight once: for the default
        partition its bits equal the hand count of :func:`~iclr25.llm.arb.block_bits`. The tensors
        are on the layer's device.
        """
        return pack_groups(self.in_features, self.out_features, self._groups(), self.bias).to(self.weight.device)

    def to_packed(self, backend: str = "auto") -> PackedBinaryLinear:
        """A :class:`~iclr25.llm.arb.PackedBinaryLinear` computing this layer from the bits."""
        return PackedBinaryLinear(self.pack_bits(), backend=backend)

    def extra_repr(self) -> str:
        groups = "stale" if self.groups is None else len(self.groups)
        return f"in_features={self.in_features}, out_features={self.out_features}, groups={groups}"


def _drop_stale_groups(module: BinarizedLinear, incompatible_keys) -> None:
    # the groups are not part of the state: keep them only while they still give the loaded weight
    w = module.weight.detach().cpu()
    if module.groups is not None and not torch.equal(module._dequantize().to(w.dtype), w):
        module.groups = None
