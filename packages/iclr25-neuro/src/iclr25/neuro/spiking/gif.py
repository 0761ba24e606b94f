"""Generalized integrate-and-fire (GIF) neurons of SpikeLLM: multi-level spikes, exact integer coding.

Level convention (one place): ``levels = L`` means every step emits an integer spike
``s_t ∈ [lo, hi]`` with ``lo = 0, hi = L - 1`` (unsigned) or ``lo = -⌊L/2⌋, hi = ⌈L/2⌉ - 1``
(``bipolar=True``; L = 3 is ternary {-1, 0, 1}). Binary IF is ``L = 2``; merging m binary IF steps
into one GIF step needs ``levels = m + 1``. S steps of L levels cost ``S·log2 L`` bits.

Real-valued form (membrane u, threshold θ > 0, soft reset)::

    u_t = u_{t-1} + I_t ;  s_t = clip(⌊u_t / θ⌋, lo, hi) ;  u_t ← u_t − θ s_t ;  decode = θ Σ_t s_t

``rounding="round"`` uses round-half-up ``⌊u/θ + 1/2⌋``. Two drives of a value x over S steps:
``"initial"`` (``I_1 = x``, then 0: decode is the ``S(L−1)+1``-level uniform quantizer of x, the
real twin of the integer form) and ``"constant"`` (``I_t = x`` every step, an IF neuron: Σ s =
⌊S x/θ⌋ while unsaturated).

Integer form (exact, ``u_1 = q``): ``s_t = clip(u_t, lo, hi)``, ``u_{t+1} = u_t − s_t``, so
``Σ_t s_t = clip(q, S·lo, S·hi)``.

Gradients: straight-through over the clip range (``surrogate="ste"``: ``∂s/∂u = 1/θ`` for u/θ in the
range, ``∂(θ s)/∂θ = s − u/θ`` there, LSQ-style), or a surrogate σ' summed over the level edges
(``∂s/∂(u/θ) = Σ_k σ'(u/θ − k)``, k = lo+1..hi).

Execution: `gif_step` is one step of the torch update in `.reference`; `gif_encode` and `GIFNeuron`
run all S steps through ``backend="auto"``: a fused Triton kernel (`.kernels`, one launch for the
whole loop, with a reverse-time backward) on CUDA float32, else the torch loop (the specification).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import torch
from torch import nn

from iclr25.core.triton import Backend, BackendOp

from ._checks import (
    check_choice,
    check_finite,
    check_float_tensor,
    check_int,
    check_positive,
    check_state,
    check_state_type,
)
from .neurons import _factory_dtype, _resolve_backend
from .reference import gif_encode_reference, gif_update
from .surrogates import Surrogate

__all__ = [
    "GIFNeuron",
    "GIFState",
    "gif_decode",
    "gif_encode",
    "gif_encode_int",
    "gif_range",
    "gif_step",
    "spike_bits",
]


class GIFState(NamedTuple):
    """GIF state: membrane ``u`` after reset, shape of one input step."""

    u: torch.Tensor


def gif_range(levels: int, bipolar: bool = False) -> tuple[int, int]:
    """``(lo, hi)`` spike values of a ``levels``-level GIF neuron (module docstring)."""
    check_int("levels", levels, 2)
    if bipolar:
        return -(levels // 2), (levels + 1) // 2 - 1
    return 0, levels - 1


def spike_bits(levels: int, steps: int) -> float:
    """Bits of a spike train of ``steps`` steps with ``levels`` levels: ``steps · log2(levels)``."""
    check_int("levels", levels, 2)
    check_int("steps", steps, 1)
    return steps * math.log2(levels)


def _theta(v_th: float | torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    check_positive("v_th", v_th)
    return torch.as_tensor(v_th, dtype=like.dtype, device=like.device)


def _check_gif(levels: int, rounding: str, reset: str) -> None:
    check_int("levels", levels, 2)
    check_choice("rounding", rounding, ("floor", "round"))
    check_choice("reset", reset, ("soft", "hard"))


def _check_theta_shape(theta: torch.Tensor, shape: torch.Size) -> None:
    try:
        ok = torch.broadcast_shapes(theta.shape, shape) == shape
    except RuntimeError:
        ok = False
    if not ok:
        raise ValueError(f"v_th of shape {tuple(theta.shape)} must broadcast to the input shape {tuple(shape)}")


def gif_step(
    x: torch.Tensor,
    state: GIFState | None = None,
    *,
    levels: int,
    v_th: float | torch.Tensor = 1.0,
    bipolar: bool = False,
    rounding: str = "floor",
    reset: str = "soft",
    surrogate: str | Surrogate = "ste",
    surrogate_kw: dict[str, float] | None = None,
    validate: bool = True,
) -> tuple[torch.Tensor, GIFState]:
    """One GIF step with explicit state.

    Parameters
    ----------
    x:
        ``(...)`` float input ``I_t``.
    state:
        `GIFState` with ``u`` of ``x.shape`` (``None``: ``u = 0``).
    levels:
        Number of spike levels L ≥ 2 (module docstring for the range).
    v_th:
        Threshold θ > 0: float or tensor broadcastable to ``x`` (e.g. a per-channel scale).
    bipolar:
        Signed spike range.
    rounding:
        ``"floor"`` or ``"round"`` (half up) of ``u/θ``.
    reset:
        ``"soft"`` (``u ← u − θ s``) or ``"hard"`` (``u ← 0`` where ``s ≠ 0``).
    surrogate, surrogate_kw:
        Backward rule (``"ste"`` straight-through over the clip range, or a surrogate name).
    validate:
        Check ``x`` for NaN/Inf.

    Returns
    -------
    tuple
        ``(s, GIFState(u))``: integer-valued float spikes ``(...)`` in ``[lo, hi]``, new state.
    """
    check_float_tensor("x", x)
    _check_gif(levels, rounding, reset)
    if validate:
        check_finite("x", x)
    theta = _theta(v_th, x)
    _check_theta_shape(theta, x.shape)
    check_state_type("state", state, GIFState)
    if state is not None:
        check_state("state.u", state.u, x.shape)
    lo, hi = gif_range(levels, bipolar)
    surr = Surrogate.make(surrogate, **(surrogate_kw or {}))
    offset = 0.5 if rounding == "round" else 0.0
    s, u = gif_update(x, None if state is None else state.u, theta, lo, hi, offset, reset, surr)
    return s, GIFState(u)


def _gif_triton(*args: Any) -> torch.Tensor:
    from .kernels import gif_encode_triton  # imports triton only when this backend runs

    return gif_encode_triton(*args)


def _gif_triton_limits(x: torch.Tensor, theta: torch.Tensor, steps: int, *rest: Any) -> list[str]:
    reasons = []
    if x.dtype != torch.float32:
        reasons.append(f"the GIF kernel runs float32 only, got {x.dtype}")
    if steps * x.numel() >= 2**31:
        reasons.append(
            f"the GIF kernel uses int32 offsets: at most 2**31 - 1 spikes (steps * x.numel()), got {steps * x.numel()}"
        )
    if theta.device != x.device:
        reasons.append(f"x and v_th must be on one device, got {x.device} and {theta.device}")
    if torch.result_type(x, theta) != x.dtype:
        # the kernel casts θ to x's dtype, where the torch loop would compute in the wider one
        reasons.append(f"the GIF kernel needs v_th in x's dtype {x.dtype}, got {theta.dtype}")
    return reasons


#: The multi-step GIF encoder: ``op(x, theta, steps, lo, hi, offset, constant, reset, surrogate,
#: backend=...) -> spikes (steps, *x.shape)``; ``theta`` is a tensor broadcastable to ``x``.
GIF_ENCODE = BackendOp(
    "gif_encode",
    [
        Backend("triton", _gif_triton, supports=_gif_triton_limits, uses_triton=True),
        Backend("reference", gif_encode_reference),
    ],
)


def gif_encode(
    x: torch.Tensor,
    levels: int,
    steps: int,
    v_th: float | torch.Tensor = 1.0,
    bipolar: bool = False,
    rounding: str = "floor",
    drive: str = "initial",
    reset: str = "soft",
    surrogate: str | Surrogate = "ste",
    surrogate_kw: dict[str, float] | None = None,
    validate: bool = True,
    backend: str = "auto",
) -> torch.Tensor:
    """Encode real ``x`` into ``steps`` multi-level spikes.

    Parameters
    ----------
    x:
        ``(...)`` float tensor.
    levels, steps:
        Levels per step L ≥ 2 and number of steps S ≥ 1.
    v_th, bipolar, rounding, reset, surrogate, surrogate_kw, validate:
        As in `gif_step`.
    drive:
        ``"initial"``: ``x`` enters the membrane once (``decode ≈ x``, ``S(L−1)+1`` levels);
        ``"constant"``: ``x`` is injected every step (IF; ``Σ s = ⌊S x/θ⌋`` while unsaturated).
    backend:
        ``"auto"`` (the fused Triton kernel on CUDA float32, else the torch loop),
        ``"reference"``/``"torch"`` (the S-step torch loop of `gif_step`), or ``"triton"`` (also on
        CPU under ``TRITON_INTERPRET=1``). The kernel runs all S steps in one launch and its
        backward reproduces the torch loop's gradients (input and θ, every surrogate).

    Returns
    -------
    torch.Tensor
        ``(steps, *x.shape)`` integer-valued float spikes.
    """
    check_float_tensor("x", x)
    _check_gif(levels, rounding, reset)
    check_int("steps", steps, 1)
    check_choice("drive", drive, ("initial", "constant"))
    if validate:
        check_finite("x", x)
    theta = _theta(v_th, x)
    _check_theta_shape(theta, x.shape)
    lo, hi = gif_range(levels, bipolar)
    surr = Surrogate.make(surrogate, **(surrogate_kw or {}))
    offset = 0.5 if rounding == "round" else 0.0
    return GIF_ENCODE(
        x, theta, steps, lo, hi, offset, drive == "constant", reset, surr, backend=_resolve_backend(backend, x)
    )


def gif_encode_int(
    q: torch.Tensor, levels: int, steps: int, bipolar: bool = False, dtype: torch.dtype | None = None
) -> torch.Tensor:
    """Exact integer GIF coding: ``u_1 = q``, ``s_t = clip(u_t, lo, hi)``, ``u_{t+1} = u_t − s_t``.

    Computed in closed form (no time loop): ``s_t = clip(q − t·hi, 0, hi) + clip(q − t·lo, lo, 0)``
    for ``t = 0..S−1``, which is what the greedy loop produces.

    Parameters
    ----------
    q:
        ``(...)`` integer tensor (already quantized values).
    levels, steps:
        Levels per step L ≥ 2, number of steps S ≥ 1.
    bipolar:
        Signed range (module docstring).
    dtype:
        Output dtype (default ``q.dtype``).

    Returns
    -------
    torch.Tensor
        ``(steps, *q.shape)`` spikes in ``[lo, hi]`` with ``Σ_t s_t == clip(q, S·lo, S·hi)``.
    """
    if not isinstance(q, torch.Tensor):
        raise TypeError(f"q must be a torch.Tensor, got {type(q).__name__}")
    if q.is_floating_point() or q.is_complex() or q.dtype == torch.bool:
        raise TypeError(f"q must be an integer tensor, got dtype {q.dtype}")
    check_int("steps", steps, 1)
    lo, hi = gif_range(levels, bipolar)
    t = torch.arange(steps, device=q.device, dtype=torch.int64).view(-1, *([1] * q.dim()))
    qq = q.to(torch.int64).unsqueeze(0)
    s = torch.clamp(qq - t * hi, 0, hi) + torch.clamp(qq - t * lo, lo, 0)
    return s.to(dtype or q.dtype)


def gif_decode(spikes: torch.Tensor, v_th: float | torch.Tensor = 1.0) -> torch.Tensor:
    """``v_th · Σ_t spikes_t``: ``(steps, ...)`` spikes to a ``(...)`` float tensor."""
    if not isinstance(spikes, torch.Tensor) or spikes.dim() < 1:
        raise TypeError("spikes must be a (steps, ...) tensor")
    total = spikes.sum(0)
    if not total.is_floating_point():
        dtype = torch.get_default_dtype()
        if isinstance(v_th, torch.Tensor) and v_th.is_floating_point():
            # integer spikes carry no precision of their own: a float64 θ must not be narrowed
            dtype = torch.promote_types(dtype, v_th.dtype)
        total = total.to(dtype)
    if isinstance(v_th, torch.Tensor):
        check_positive("v_th", v_th)
        return total * v_th.to(total.dtype)
    check_positive("v_th", v_th)
    return total * float(v_th)


class GIFNeuron(nn.Module):
    """Multi-level GIF neuron (SpikeLLM): ``forward(x) -> spikes (steps, *x.shape)``.

    Parameters
    ----------
    levels:
        Spike levels per step L ≥ 2 (L = 2 is binary IF).
    steps:
        Number of steps S ≥ 1; the train costs `spike_bits` ``= S·log2 L`` bits.
    v_th:
        Threshold/step θ > 0, float or tensor broadcastable to the input (per-channel scale).
    reset, bipolar, rounding, surrogate, drive:
        As in `gif_encode` (default drive ``"initial"``: ``decode(forward(x))`` quantizes x).
    learn_threshold:
        Make θ a trainable parameter (LSQ-style gradient ``s − u/θ`` inside the range).
    backend:
        ``"auto"`` (the fused Triton kernel on CUDA float32, else the torch loop),
        ``"reference"``/``"torch"`` or ``"triton"``; see `gif_encode`.
    validate:
        Check inputs for NaN/Inf.
    device, dtype:
        Factory kwargs of θ, as in torch.nn. ``dtype`` defaults to a floating ``v_th`` tensor's own
        dtype, else torch's default dtype. Build a float64 neuron with ``dtype=torch.float64`` (or
        a float64 ``v_th``): ``.double()`` converts θ but cannot restore digits already rounded to
        float32.
    """

    def __init__(
        self,
        levels: int,
        steps: int,
        v_th: float | torch.Tensor = 1.0,
        reset: str = "soft",
        bipolar: bool = False,
        rounding: str = "floor",
        learn_threshold: bool = False,
        surrogate: str | Surrogate = "ste",
        drive: str = "initial",
        backend: str = "auto",
        validate: bool = True,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        _check_gif(levels, rounding, reset)
        check_int("steps", steps, 1)
        check_choice("drive", drive, ("initial", "constant"))
        check_choice("backend", backend, ("auto", "reference", "torch", "triton"))
        check_positive("v_th", v_th)
        theta_dtype = _factory_dtype(v_th, dtype)
        if isinstance(v_th, torch.Tensor):
            theta = v_th.detach().to(device=device, dtype=theta_dtype, copy=True)
        else:
            theta = torch.tensor(float(v_th), dtype=theta_dtype, device=device)
        if learn_threshold:
            self.v_th = nn.Parameter(theta)
        else:
            self.register_buffer("v_th", theta)
        self.levels, self.steps, self.reset_mode, self.bipolar = levels, steps, reset, bool(bipolar)
        self.rounding, self.drive, self.validate, self.backend = rounding, drive, validate, backend
        self.surrogate = Surrogate.make(surrogate)

    @property
    def bits(self) -> float:
        """``steps · log2(levels)``."""
        return spike_bits(self.levels, self.steps)

    @property
    def range(self) -> tuple[int, int]:
        """``(lo, hi)`` spike values."""
        return gif_range(self.levels, self.bipolar)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Spikes ``(steps, *x.shape)`` (integer-valued, ``x.dtype``)."""
        return gif_encode(
            x,
            self.levels,
            self.steps,
            v_th=self.v_th,
            bipolar=self.bipolar,
            rounding=self.rounding,
            drive=self.drive,
            reset=self.reset_mode,
            surrogate=self.surrogate,
            validate=self.validate,
            backend=self.backend,
        )

    def decode(self, spikes: torch.Tensor) -> torch.Tensor:
        """``v_th · spikes.sum(0)``."""
        return gif_decode(spikes, self.v_th)

    def extra_repr(self) -> str:
        return f"levels={self.levels}, steps={self.steps}, bipolar={self.bipolar}, rounding={self.rounding!r}"
