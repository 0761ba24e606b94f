"""The TopoLoss regulariser: blur each cortical sheet by down/up-sampling, penalise the cosine mismatch.

For a sheet ``W`` of shape ``(h, w, e)`` (``e`` = length of each unit's vector)::

    W ──permute──▶ [1, e, h, w] ──interpolate(1/f_h, 1/f_w)──▶ [1, e, ⌊h/f_h⌋, ⌊w/f_w⌋]
                                  ──interpolate(size=(h, w))──▶ Ŵ          (bilinear, align_corners=False)
    L_topo(W) = 1 − mean_u cos(W_u, Ŵ_u)                                    ∈ [0, 2]
    L = L_task + reduce_ℓ τ_ℓ · L_topo(W_ℓ)        (reduce = mean over layers with τ ≠ None)

The gradient reaches ``W`` through both ``W_u`` and ``Ŵ_u`` (no stop-gradient), as in the paper.
"""

from __future__ import annotations

import difflib
import json
import logging
import math
import numbers
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields

import torch
import torch.nn.functional as F
from torch import nn

from .sheet import LAYOUTS, TARGETS, cortical_sheet, is_conv1d

__all__ = ["MODES", "TopoLayer", "TopoLoss", "lowres_shape", "topo_loss", "topo_loss_batched"]

logger = logging.getLogger(__name__)

#: Interpolation modes accepted for the blur (the paper and the official package use bilinear).
MODES = ("bilinear", "nearest", "bicubic")
_COS_EPS = 1e-8  # F.cosine_similarity's default: an all-zero (dead) unit counts as dissimilar
_JSON_FORMAT = "iclr25.neuro.topoloss"
_JSON_VERSION = 1


def _check_factor(value: object, argname: str, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{where}: {argname} must be a real number, got {type(value).__name__}")
    value = float(value)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{where}: {argname} must be a finite number > 0, got {value}")
    return value


def _factor_pair(factor: object, where: str) -> tuple[float, float]:
    """``factor`` as ``(f_h, f_w)``: one real number for both sides, or a pair (tuple, list, array)."""
    if isinstance(factor, (str, bytes)) or not isinstance(factor, Iterable) or getattr(factor, "ndim", None) == 0:
        value = _check_factor(factor, "factor", where)  # a 0-d tensor/array is one value, not a pair
        return value, value
    pair = tuple(factor)
    if len(pair) != 2:
        raise ValueError(f"{where}: factor must be a number or a pair (f_h, f_w), got {factor!r}")
    return _check_factor(pair[0], "factor_h", where), _check_factor(pair[1], "factor_w", where)


def lowres_shape(h: int, w: int, factor_h: float, factor_w: float, *, where: str = "sheet") -> tuple[int, int]:
    """Size of the down-sampled sheet, with ``F.interpolate(scale_factor=...)``'s rule ``⌊side · (1/f)⌋``.

    Parameters
    ----------
    h, w:
        Sheet height and width.
    factor_h, factor_w:
        Down-sampling factors ``f_h, f_w`` (``> 0`` and at most the matching side).
    where:
        Name used in error messages (e.g. the layer name).

    Returns
    -------
    (h_low, w_low):
        The low-resolution sheet holds ``h_low · w_low`` units, about ``1/(f_h f_w)`` of them.
    """
    factor_h = _check_factor(factor_h, "factor_h", where)
    factor_w = _check_factor(factor_w, "factor_w", where)
    if h == 1 and factor_h > 1:
        raise ValueError(
            f"{where}: the cortical sheet is 1x{w} (a prime number of units), so factor_h must be <= 1; "
            f"got factor_h={factor_h}"
        )
    if factor_h > h or factor_w > w:
        raise ValueError(
            f"{where}: factors (factor_h={factor_h}, factor_w={factor_w}) must not exceed the cortical sheet "
            f"{h}x{w} (factor_h <= {h}, factor_w <= {w})"
        )
    # Same arithmetic as torch: floor(size * scale) with scale = 1/f in double precision.
    hl, wl = math.floor(h * (1.0 / factor_h)), math.floor(w * (1.0 / factor_w))
    if hl < 1 or wl < 1:
        raise ValueError(
            f"{where}: factors ({factor_h}, {factor_w}) shrink the {h}x{w} sheet to {hl}x{wl} (rounding); "
            "use a slightly smaller factor"
        )
    return hl, wl


def _blur(grid: torch.Tensor, factor_h: float, factor_w: float, mode: str) -> torch.Tensor:
    """Low-pass copy of ``grid`` (N, C, h, w): down-sample by (1/f_h, 1/f_w), up-sample back to (h, w)."""
    low = F.interpolate(grid, scale_factor=(1.0 / factor_h, 1.0 / factor_w), mode=mode)
    return F.interpolate(low, size=tuple(grid.shape[-2:]), mode=mode)


def _check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")


def topo_loss(
    sheet: torch.Tensor, factor_h: float = 4.0, factor_w: float = 4.0, mode: str = "bilinear", *, name: str = "sheet"
) -> torch.Tensor:
    """TopoLoss of one cortical sheet: ``1 − mean_u cos(W_u, Ŵ_u)``.

    Parameters
    ----------
    sheet:
        ``(h, w, e)`` float tensor (unit ``r·w + c`` at ``[r, c]``, see
        :func:`~iclr25.neuro.topoloss.cortical_sheet`), or a ``(h, w)`` bias sheet, for which the
        loss is ``1 − cos(b, b̂)`` over the whole flattened sheet (as the official package does).
    factor_h, factor_w:
        Down-sampling factors ``f_h, f_w`` of the blur; ``0 < f ≤`` the matching sheet side.
    mode:
        Interpolation mode of both resamplings (``"bilinear"`` in the paper).
    name:
        Used in error messages.

    Returns
    -------
    loss:
        0-dim tensor in ``[0, 2]``; differentiable in ``sheet`` through both ``W`` and ``Ŵ``.
    """
    if not isinstance(sheet, torch.Tensor):
        raise TypeError(f"{name}: sheet must be a torch.Tensor, got {type(sheet).__name__}")
    if sheet.ndim not in (2, 3) or not sheet.is_floating_point():
        raise ValueError(
            f"{name}: sheet must be a floating (h, w, e) or (h, w) tensor, got shape {tuple(sheet.shape)} "
            f"dtype {sheet.dtype}"
        )
    _check_mode(mode)
    h, w = int(sheet.shape[0]), int(sheet.shape[1])
    lowres_shape(h, w, factor_h, factor_w, where=name)
    if sheet.ndim == 2:
        flat = sheet.reshape(1, -1)
        up = _blur(sheet[None, None], factor_h, factor_w, mode).reshape(1, -1)
        return 1.0 - F.cosine_similarity(flat, up, dim=-1, eps=_COS_EPS).mean()
    return topo_loss_batched(sheet.unsqueeze(0), factor_h, factor_w, mode, name=name)[0]


def topo_loss_batched(
    sheets: torch.Tensor, factor_h: float = 4.0, factor_w: float = 4.0, mode: str = "bilinear", *, name: str = "sheets"
) -> torch.Tensor:
    """TopoLoss of ``L`` same-shape sheets with one interpolate pair (e.g. all 12 ``c_fc`` of a GPT).

    Parameters
    ----------
    sheets:
        ``(L, h, w, e)`` float tensor.
    factor_h, factor_w, mode:
        As in :func:`topo_loss`.
    name:
        Used in error messages.

    Returns
    -------
    losses:
        ``(L,)`` tensor; ``losses[i] == topo_loss(sheets[i])``.
    """
    if not isinstance(sheets, torch.Tensor) or sheets.ndim != 4 or not sheets.is_floating_point():
        got = tuple(sheets.shape) if isinstance(sheets, torch.Tensor) else type(sheets).__name__
        raise ValueError(f"{name}: sheets must be a floating (L, h, w, e) tensor, got {got}")
    _check_mode(mode)
    n, h, w, e = (int(s) for s in sheets.shape)
    lowres_shape(h, w, factor_h, factor_w, where=name)
    grid = sheets.permute(0, 3, 1, 2)  # (L, e, h, w): the sheet as an e-channel image
    up = _blur(grid, factor_h, factor_w, mode)
    cos = F.cosine_similarity(grid.reshape(n, e, h * w), up.reshape(n, e, h * w), dim=1, eps=_COS_EPS)
    return 1.0 - cos.mean(dim=1)


@dataclass
class TopoLayer:
    """One layer made topographic.

    Attributes
    ----------
    name:
        Dotted module path inside the model, e.g. ``"transformer.h.0.mlp.c_fc"``.
    factor_h, factor_w:
        Down-sampling factors ``f_h, f_w`` of the blur (paper: ``f_h = f_w``; larger = smoother).
    tau:
        Strength τ (the official package's ``scale``); ``None`` = compute and log, never add to the loss.
    target:
        ``"weight"`` (output units, default), ``"bias"`` or ``"input"`` (input units); see
        :func:`~iclr25.neuro.topoloss.cortical_sheet`.
    weight_layout:
        ``"auto"`` (``Conv1D`` → ``"in_out"``, else ``"out_in"``), ``"out_in"`` or ``"in_out"``.
    mode:
        Interpolation mode of the blur.
    """

    name: str
    factor_h: float = 4.0
    factor_w: float = 4.0
    tau: float | None = 1.0
    target: str = "weight"
    weight_layout: str = "auto"
    mode: str = "bilinear"

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"TopoLayer.name must be a non-empty module path, got {self.name!r}")
        where = f"layer {self.name!r}"
        self.factor_h = _check_factor(self.factor_h, "factor_h", where)
        self.factor_w = _check_factor(self.factor_w, "factor_w", where)
        if self.tau is not None:
            if isinstance(self.tau, bool) or not isinstance(self.tau, numbers.Real):
                raise TypeError(f"{where}: tau must be a float or None, got {type(self.tau).__name__}")
            if not math.isfinite(self.tau) or self.tau < 0:
                raise ValueError(f"{where}: tau must be a finite number >= 0 or None, got {self.tau}")
            self.tau = float(self.tau)
        if self.target not in TARGETS:
            raise ValueError(f"{where}: target must be one of {TARGETS}, got {self.target!r}")
        if self.weight_layout not in LAYOUTS:
            raise ValueError(f"{where}: weight_layout must be one of {LAYOUTS}, got {self.weight_layout!r}")
        if self.mode not in MODES:
            raise ValueError(f"{where}: mode must be one of {MODES}, got {self.mode!r}")

    @property
    def key(self) -> str:
        """Name in :meth:`TopoLoss.per_layer`: the module path, plus ``[bias]``/``[input]`` for those targets."""
        return self.name if self.target == "weight" else f"{self.name}[{self.target}]"


_REDUCTIONS = ("mean", "sum")


def _stack_on_first_device(values: list[torch.Tensor]) -> torch.Tensor:
    """``torch.stack`` of per-layer values that may sit on different devices (a model split over GPUs)."""
    device = values[0].device
    return torch.stack([v.to(device) for v in values])


def _supported(module: nn.Module) -> bool:
    return isinstance(module, (nn.Linear, nn.Conv2d)) or is_conv1d(module)


class TopoLoss(nn.Module):
    """TopoLoss over several layers of a model: ``reduce_ℓ τ_ℓ · L_topo(W_ℓ)``.

    Add it to the task loss: ``loss = task_loss + topo(model)``. It holds no parameters and reads
    the weights of ``model`` at each call, so one instance serves the model through training.

    Parameters
    ----------
    layers:
        The :class:`TopoLayer` specs (names must be unique per target).
    reduce:
        ``"mean"`` (default, the official ``compute(reduce_mean=True)``: adding layers does not add
        strength) or ``"sum"`` over the layers whose ``tau`` is not ``None``.
    strict_types:
        Only accept ``nn.Linear``, ``nn.Conv2d`` and Hugging Face ``Conv1D`` (``TypeError`` otherwise);
        ``False`` accepts any module with a 2-D or 4-D ``weight``.
    check_finite:
        Raise ``FloatingPointError`` naming the layer when a layer's loss is NaN/inf (costs one
        device sync per call).
    batched:
        Evaluate same-shape layers together (one interpolate pair per group); equal to the
        per-layer path up to float rounding.
    """

    def __init__(
        self,
        layers: Sequence[TopoLayer],
        reduce: str = "mean",
        strict_types: bool = True,
        check_finite: bool = False,
        batched: bool = True,
    ) -> None:
        super().__init__()
        if isinstance(layers, TopoLayer):
            raise TypeError("layers must be a sequence of TopoLayer instances, got one TopoLayer; wrap it in a list")
        layers = list(layers)
        if not all(isinstance(layer, TopoLayer) for layer in layers):
            bad = next(type(layer).__name__ for layer in layers if not isinstance(layer, TopoLayer))
            raise TypeError(f"layers must be TopoLayer instances, got a {bad}")
        if reduce not in _REDUCTIONS:
            raise ValueError(f"reduce must be one of {_REDUCTIONS}, got {reduce!r}")
        keys = [layer.key for layer in layers]
        dupes = sorted({k for k in keys if keys.count(k) > 1})
        if dupes:
            raise ValueError(f"layers must be unique per (name, target), got duplicates {dupes}")
        self.layers = layers
        self.reduce = reduce
        self.strict_types = bool(strict_types)
        self.check_finite = bool(check_finite)
        self.batched = bool(batched)

    def extra_repr(self) -> str:
        return f"layers={[layer.key for layer in self.layers]}, reduce={self.reduce!r}, batched={self.batched}"

    # ----------------------------------------------------------------- construction helpers
    @classmethod
    def from_pattern(
        cls,
        model: nn.Module,
        pattern: str,
        factor: float | tuple[float, float] = 4.0,
        tau: float | None = 1.0,
        target: str = "weight",
        weight_layout: str = "auto",
        **kwargs: object,
    ) -> TopoLoss:
        """One :class:`TopoLayer` per supported module whose dotted name matches ``pattern`` (``re.search``).

        Parameters
        ----------
        model:
            The model whose ``named_modules()`` are searched.
        pattern:
            Regular expression, e.g. ``r"c_fc$"`` (every GPT-2 MLP up-projection) or ``r"fc1"``.
        factor:
            ``f`` for both sides, or ``(f_h, f_w)``.
        tau, target, weight_layout:
            Shared by every selected layer (see :class:`TopoLayer`).
        **kwargs:
            Passed to :class:`TopoLoss` (``reduce``, ``strict_types``, ...).
        """
        if not isinstance(model, nn.Module):
            raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
        if not isinstance(pattern, str):
            raise TypeError(f"pattern must be a str (regular expression), got {type(pattern).__name__}")
        regex = re.compile(pattern)
        fh, fw = _factor_pair(factor, "from_pattern")
        names = [name for name, module in model.named_modules() if name and regex.search(name) and _supported(module)]
        if not names:
            raise ValueError(
                f"pattern {pattern!r} matched no Linear/Conv2d/Conv1D module; module names start with "
                f"{[n for n, _ in model.named_modules() if n][:8]}"
            )
        layers = [TopoLayer(n, fh, fw, tau=tau, target=target, weight_layout=weight_layout) for n in names]
        return cls(layers, **kwargs)  # type: ignore[arg-type]

    def state_dict_json(self) -> str:
        """The configuration (not the model's weights) as a JSON string; inverse of :meth:`from_json`."""
        return json.dumps(
            {
                "format": _JSON_FORMAT,
                "version": _JSON_VERSION,
                "reduce": self.reduce,
                "strict_types": self.strict_types,
                "check_finite": self.check_finite,
                "batched": self.batched,
                "layers": [asdict(layer) for layer in self.layers],
            },
            indent=2,
        )

    @classmethod
    def from_json(cls, text: str) -> TopoLoss:
        """Rebuild a :class:`TopoLoss` from :meth:`state_dict_json`'s output."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a JSON str, got {type(text).__name__}")
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("format") != _JSON_FORMAT:
            raise ValueError(f"not a TopoLoss config: expected an object with format={_JSON_FORMAT!r}")
        if data.get("version") != _JSON_VERSION:
            raise ValueError(f"unsupported TopoLoss config version {data.get('version')!r}, expected {_JSON_VERSION}")
        known = {f.name for f in fields(TopoLayer)}
        items = data.get("layers", [])
        if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
            raise ValueError(f"TopoLoss config 'layers' must be a list of objects (one per TopoLayer), got {items!r}")
        layers = []
        for item in items:
            unknown = sorted(set(item) - known)
            if unknown:
                raise ValueError(f"TopoLoss config layer has unknown keys {unknown}; known: {sorted(known)}")
            layers.append(TopoLayer(**item))
        return cls(
            layers,
            reduce=data.get("reduce", "mean"),
            strict_types=data.get("strict_types", True),
            check_finite=data.get("check_finite", False),
            batched=data.get("batched", True),
        )

    # ----------------------------------------------------------------- evaluation
    def _module(self, model: nn.Module, layer: TopoLayer) -> nn.Module:
        try:
            module = model.get_submodule(layer.name)
        except AttributeError:
            names = [n for n, _ in model.named_modules() if n]
            close = difflib.get_close_matches(layer.name, names, n=5, cutoff=0.5)
            raise KeyError(
                f"layer {layer.name!r} not found in {type(model).__name__}; close matches: {close}"
            ) from None
        if self.strict_types and not _supported(module):
            raise TypeError(
                f"layer {layer.name!r} is a {type(module).__name__}; strict_types=True accepts nn.Linear, "
                "nn.Conv2d and Hugging Face Conv1D (pass strict_types=False for other modules with a weight)"
            )
        return module

    def sheets(self, model: nn.Module) -> dict[str, torch.Tensor]:
        """Every listed layer's cortical sheet (views of the weights), keyed like :meth:`per_layer`.

        Raises
        ------
        KeyError, TypeError, ValueError
            Unknown layer (with close matches), unsupported module type, missing bias, or a factor
            that does not fit the sheet.
        """
        if not isinstance(model, nn.Module):
            raise TypeError(f"model must be the nn.Module holding the layers, got {type(model).__name__}")
        out = {}
        for layer in self.layers:
            module = self._module(model, layer)
            try:
                sheet = cortical_sheet(module, layer.target, layer.weight_layout)
            except (ValueError, TypeError) as exc:
                raise type(exc)(f"layer {layer.name!r}: {exc}") from None
            lowres_shape(
                int(sheet.shape[0]),
                int(sheet.shape[1]),
                layer.factor_h,
                layer.factor_w,
                where=f"layer {layer.name!r} (cortical sheet {tuple(sheet.shape)})",
            )
            out[layer.key] = sheet
        return out

    def per_layer(self, model: nn.Module, scaled: bool = False) -> dict[str, torch.Tensor]:
        """Each layer's TopoLoss.

        Parameters
        ----------
        model:
            The model holding the layers.
        scaled:
            ``False``: the raw ``L_topo`` of every layer (``tau=None`` layers included, for logging).
            ``True``: ``τ · L_topo`` of the layers that contribute (``tau`` not ``None``).

        Returns
        -------
        dict
            :attr:`TopoLayer.key` → 0-dim tensor.
        """
        sheets = self.sheets(model)
        raw: dict[str, torch.Tensor] = {}
        groups: dict[tuple, list[TopoLayer]] = {}
        for layer in self.layers:
            sheet = sheets[layer.key]
            if self.batched and sheet.ndim == 3:
                gkey = (tuple(sheet.shape), layer.factor_h, layer.factor_w, layer.mode, sheet.dtype, sheet.device)
                groups.setdefault(gkey, []).append(layer)
            else:
                raw[layer.key] = topo_loss(sheet, layer.factor_h, layer.factor_w, layer.mode, name=layer.key)
        for (_, fh, fw, mode, _, _), members in groups.items():
            if len(members) == 1:
                lay = members[0]
                raw[lay.key] = topo_loss(sheets[lay.key], fh, fw, mode, name=lay.key)
                continue
            stacked = torch.stack([sheets[lay.key] for lay in members])
            values = topo_loss_batched(stacked, fh, fw, mode, name=members[0].key)
            for i, lay in enumerate(members):
                raw[lay.key] = values[i]
        raw = {layer.key: raw[layer.key] for layer in self.layers}  # the user's order
        if (
            self.check_finite
            and raw
            and not bool(torch.isfinite(_stack_on_first_device([v.detach().float() for v in raw.values()])).all())
        ):
            bad = [k for k, v in raw.items() if not math.isfinite(float(v.detach()))]
            raise FloatingPointError(f"TopoLoss is not finite for layer(s) {bad}: their weights hold NaN or inf")
        if not scaled:
            return raw
        return {layer.key: raw[layer.key] * layer.tau for layer in self.layers if layer.tau is not None}

    def forward(self, model: nn.Module) -> torch.Tensor:
        """Total regulariser ``reduce_ℓ τ_ℓ · L_topo(W_ℓ)`` (0-dim tensor; 0 when no layer has a τ).

        Layers on different devices (a model split over GPUs) are summed on the first layer's device.
        """
        scaled = self.per_layer(model, scaled=True)
        if not scaled:
            param = next(model.parameters(), None)
            device = param.device if param is not None else None
            return torch.zeros((), device=device)
        total = _stack_on_first_device(list(scaled.values())).sum()
        return total / len(scaled) if self.reduce == "mean" else total
