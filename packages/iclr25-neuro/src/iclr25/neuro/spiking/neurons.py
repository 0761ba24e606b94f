"""LIF, IF and adaptive-threshold ALIF neurons: functional single steps with explicit state, and
time-first multi-step modules (``x: (T, B, ...)``).

LIF (per element, ``α = exp(-Δt/τ_m)``)::

    h_k = α v_{k-1} + c I_k        c = 1 - α  (input_scale="one_minus_alpha", RSNN_bfd)
                                   c = 1      (input_scale="none", snnTorch/SpikingJelly decay_input=False)
    s_k = H(h_k - θ)               firing="gt": h > θ (default for LIF) | "ge": h ≥ θ (default for IF)
    v_k = h_k - θ s_k              reset="soft" | h_k (1 - s_k) + v_reset s_k "hard" | h_k "none"

IF is LIF with α = 1, c = 1 and firing at ``h ≥ θ`` (the binary case of the GIF neuron).

ALIF (RSNN_bfd ``mem_update_adp``; ``ρ = exp(-Δt/τ_adp)``, β = 1.8, b0 = 0.04)::

    b_k = ρ b_{k-1} + (1 - ρ) s_{k-1} ;  B_k = b0 + β b_k
    v_k = α v_{k-1} + (1 - α) I_k - B_k s_{k-1} Δt     # reset by the *previous* spike, current B_k
    s_k = H(v_k - B_k)                                  # strict >
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
    check_finite_number,
    check_float_tensor,
    check_multistep,
    check_positive,
    check_state,
    check_state_type,
)
from .reference import alif_multistep_reference, alif_update, lif_multistep_reference, lif_update
from .surrogates import Surrogate

__all__ = [
    "ALIF",
    "IF",
    "LIF",
    "ALIFState",
    "LIFState",
    "alif_initial_state",
    "alif_step",
    "lif_multistep",
    "lif_step",
]

RESETS = ("soft", "hard", "none")
INPUT_SCALES = ("one_minus_alpha", "none")
FIRINGS = ("gt", "ge")
TAU_FLOOR = 1e-2  # τ is clamped to >= TAU_FLOOR·Δt in the forward pass (learnable τ may drift below 0)


class LIFState(NamedTuple):
    """LIF/IF state: membrane ``v`` after reset, shape of one input step."""

    v: torch.Tensor


class ALIFState(NamedTuple):
    """ALIF state after a step: membrane ``v``, last spike ``s`` and adaptation ``b`` (same shapes)."""

    v: torch.Tensor
    s: torch.Tensor
    b: torch.Tensor


def _factory_dtype(value: Any, dtype: torch.dtype | None) -> torch.dtype:
    """The dtype a module stores a constructor constant in, as torch.nn factory kwargs do.

    ``dtype`` when given, else the dtype of a floating ``value`` tensor, else torch's default dtype:
    a float64 value must not be narrowed on the way in, since a later ``.double()`` converts the
    storage but cannot restore the digits it lost.
    """
    if dtype is None:
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            return value.dtype
        return torch.get_default_dtype()
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating-point torch.dtype, got {dtype!r}")
    return dtype


def _alpha(tau: float | torch.Tensor, dt: float, like: torch.Tensor) -> torch.Tensor:
    tau_t = torch.as_tensor(tau, dtype=like.dtype, device=like.device)
    return torch.exp(-dt / torch.clamp(tau_t, min=TAU_FLOOR * dt))


def _check_lif_options(
    reset: str, input_scale: str, firing: str, threshold: Any, tau_m: Any, dt: float, v_reset: Any = 0.0
) -> None:
    check_choice("reset", reset, RESETS)
    check_choice("input_scale", input_scale, INPUT_SCALES)
    check_choice("firing", firing, FIRINGS)
    check_positive("threshold", threshold)
    check_positive("tau_m", tau_m, allow_inf=True)
    check_positive("dt", dt)
    check_finite_number("v_reset", v_reset)  # a NaN/Inf v_reset would poison the membrane after a spike


def lif_step(
    x: torch.Tensor,
    state: LIFState | None = None,
    *,
    tau_m: float | torch.Tensor = 10.0,
    threshold: float = 1.0,
    reset: str = "soft",
    v_reset: float = 0.0,
    input_scale: str = "one_minus_alpha",
    surrogate: str | Surrogate = "atan",
    surrogate_kw: dict[str, float] | None = None,
    detach_reset: bool = False,
    firing: str = "gt",
    dt: float = 1.0,
    validate: bool = True,
) -> tuple[torch.Tensor, LIFState]:
    """One LIF step with explicit state (see the module docstring for the equations).

    Parameters
    ----------
    x:
        ``(...)`` float input current ``I_k`` of one time step.
    state:
        `LIFState` with ``v`` of ``x.shape``; ``None`` starts from ``v = 0``.
    tau_m:
        Membrane time constant τ_m (> 0; ``math.inf`` gives α = 1), float or tensor broadcastable to ``x``.
    threshold:
        Firing threshold θ > 0.
    reset, v_reset:
        ``"soft"`` (subtract θ), ``"hard"`` (set to ``v_reset``) or ``"none"``.
    input_scale:
        ``"one_minus_alpha"`` scales the input by ``1 - α``; ``"none"`` adds it unscaled.
    surrogate, surrogate_kw:
        Surrogate derivative of the firing function and its parameters.
    detach_reset:
        Use ``s.detach()`` in the reset term (SpikingJelly option).
    firing:
        ``"gt"`` fires at ``h > θ``, ``"ge"`` at ``h ≥ θ``.
    dt:
        Time step Δt.
    validate:
        Check ``x`` for NaN/Inf (turn off inside hot loops).

    Returns
    -------
    tuple
        ``(s, LIFState(v))``: spikes ``(...)`` exact 0/1 in ``x.dtype`` and the new state.
    """
    check_float_tensor("x", x)
    _check_lif_options(reset, input_scale, firing, threshold, tau_m, dt, v_reset)
    check_state_type("state", state, LIFState)
    if validate:
        check_finite("x", x)
    v = x.new_zeros(x.shape) if state is None else state.v
    check_state("state.v", v, x.shape)
    surr = Surrogate.make(surrogate, **(surrogate_kw or {}))
    alpha = _alpha(tau_m, dt, x)
    _check_broadcast("tau_m", alpha, x.shape)  # a larger tau_m would silently grow the state
    s, v = lif_update(x, v, alpha, threshold, reset, v_reset, input_scale, surr, detach_reset, firing == "ge")
    return s, LIFState(v)


def _lif_triton(*args: Any) -> tuple[torch.Tensor, torch.Tensor]:
    from .kernels import lif_multistep_triton  # imports triton only when this backend runs

    return lif_multistep_triton(*args)


def _lif_triton_limits(
    x: torch.Tensor,
    v0: torch.Tensor,
    alpha: torch.Tensor,
    threshold: Any,
    reset: Any = None,
    v_reset: Any = 0.0,
    *rest: Any,
) -> list[str]:
    reasons = []
    if x.dtype != torch.float32:
        reasons.append(f"the LIF kernel runs float32 only, got {x.dtype}")
    if v0.dtype != x.dtype or alpha.dtype != x.dtype:
        # the torch loop would promote to the wider dtype; the kernel keeps v_T in the state's dtype
        reasons.append(
            f"the LIF kernel needs state.v and tau_m in x's dtype {x.dtype}, got {v0.dtype} and {alpha.dtype}"
        )
    if not isinstance(threshold, (int, float)):
        reasons.append("the LIF kernel takes a scalar float threshold, got a tensor")
    if isinstance(v_reset, torch.Tensor):
        # a per-neuron or learnable v_reset: the kernel takes one float and returns no gradient for it
        reasons.append("the LIF kernel takes a scalar float v_reset, got a tensor")
    if x.numel() >= 2**31:
        reasons.append(f"the LIF kernel uses int32 offsets: at most 2**31 - 1 elements, got {x.numel()}")
    if v0.device != x.device or alpha.device != x.device:
        reasons.append("x, state and tau must be on one device")
    return reasons


#: The multi-step LIF op: ``op(x, v0, alpha, threshold, reset, v_reset, input_scale, surrogate,
#: detach_reset, inclusive, backend=...) -> (spikes, v_T)``.
LIF_MULTISTEP = BackendOp(
    "lif_multistep",
    [
        Backend("triton", _lif_triton, supports=_lif_triton_limits, uses_triton=True),
        Backend("reference", lif_multistep_reference),
    ],
)


def _check_broadcast(name: str, t: torch.Tensor, shape: torch.Size) -> None:
    try:
        ok = torch.broadcast_shapes(t.shape, shape) == shape
    except RuntimeError:
        ok = False
    if not ok:
        raise ValueError(f"{name} of shape {tuple(t.shape)} must broadcast to one input step {tuple(shape)}")


def _resolve_backend(backend: str, x: torch.Tensor) -> str:
    check_choice("backend", backend, ("auto", "reference", "triton", "torch"))
    if backend == "torch":
        return "reference"
    # on CPU auto can only pick the torch loop: skip probing (and importing) triton
    if backend == "auto" and x.device.type != "cuda":
        return "reference"
    return backend


def lif_multistep(
    x: torch.Tensor,
    state: LIFState | None = None,
    *,
    tau_m: float | torch.Tensor = 10.0,
    threshold: float = 1.0,
    reset: str = "soft",
    v_reset: float = 0.0,
    input_scale: str = "one_minus_alpha",
    surrogate: str | Surrogate = "atan",
    surrogate_kw: dict[str, float] | None = None,
    detach_reset: bool = False,
    firing: str = "gt",
    dt: float = 1.0,
    backend: str = "auto",
    validate: bool = True,
) -> tuple[torch.Tensor, LIFState]:
    """LIF over a whole time-first sequence (arguments as `lif_step`).

    Parameters
    ----------
    x:
        ``(T, ...)`` float input currents; ``T = 0`` gives an empty ``(0, ...)`` result.
    state:
        Initial `LIFState` with ``v`` of ``x.shape[1:]`` (``None``: zeros).
    backend:
        ``"auto"`` (Triton on CUDA float32, else the torch loop), ``"reference"``/``"torch"``, or
        ``"triton"`` (also on CPU under ``TRITON_INTERPRET=1``).

    Returns
    -------
    tuple
        ``(spikes (T, ...), LIFState(v_T))``.
    """
    check_multistep("x", x, validate)
    _check_lif_options(reset, input_scale, firing, threshold, tau_m, dt, v_reset)
    check_state_type("state", state, LIFState)
    v0 = x.new_zeros(x.shape[1:]) if state is None else state.v
    check_state("state.v", v0, x.shape[1:])
    surr = Surrogate.make(surrogate, **(surrogate_kw or {}))
    alpha = _alpha(tau_m, dt, x)
    _check_broadcast("tau_m", alpha, x.shape[1:])
    if x.shape[0] == 0:
        return x.new_zeros(x.shape), LIFState(v0)
    spikes, v = LIF_MULTISTEP(
        x,
        v0,
        alpha,
        threshold,
        reset,
        v_reset,
        input_scale,
        surr,
        detach_reset,
        firing == "ge",
        backend=_resolve_backend(backend, x),
    )
    return spikes, LIFState(v)


def alif_initial_state(
    shape: tuple[int, ...] | torch.Size,
    *,
    init: str = "zeros",
    b0: float = 0.04,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
) -> ALIFState:
    """Initial ALIF state of ``shape``.

    ``init="zeros"``: ``v = s = b = 0`` (the core's default). ``init="official"``: RSNN_bfd's
    ``b = b0`` and ``v, s ~ U[0, 1)`` (``torch.rand``, drawn from ``generator``).
    """
    check_choice("init", init, ("zeros", "official"))
    if init == "zeros":
        z = torch.zeros(shape, device=device, dtype=dtype)
        return ALIFState(z, z.clone(), z.clone())
    v = torch.rand(shape, generator=generator, device=device, dtype=dtype)
    s = torch.rand(shape, generator=generator, device=device, dtype=dtype)
    return ALIFState(v, s, torch.full(shape, float(b0), device=device, dtype=dtype))


def _check_alif_options(tau_m: Any, tau_adp: Any, b0: float, beta: float, dt: float) -> None:
    check_positive("tau_m", tau_m)
    check_positive("tau_adp", tau_adp)
    check_positive("dt", dt)
    if not isinstance(b0, (int, float)) or isinstance(b0, bool):
        raise TypeError(f"b0 must be a float, got {type(b0).__name__}")
    if not math.isfinite(b0):
        raise ValueError(f"b0 must be finite, got {b0!r}")
    if not isinstance(beta, (int, float)) or isinstance(beta, bool) or not 0 <= beta < math.inf:
        raise ValueError(f"beta must be a finite float >= 0, got {beta!r}")


def alif_step(
    x: torch.Tensor,
    state: ALIFState | None = None,
    *,
    tau_m: float | torch.Tensor = 10.0,
    tau_adp: float | torch.Tensor = 5.0,
    b0: float = 0.04,
    beta: float = 1.8,
    dt: float = 1.0,
    surrogate: str | Surrogate = "gaussian",
    surrogate_kw: dict[str, float] | None = None,
    validate: bool = True,
) -> tuple[torch.Tensor, ALIFState]:
    """One adaptive-threshold LIF step (RSNN_bfd ``mem_update_adp``; module docstring).

    Parameters
    ----------
    x:
        ``(..., n)`` float input current.
    state:
        `ALIFState` of ``x.shape`` (``None``: zeros; see `alif_initial_state`).
    tau_m, tau_adp:
        Membrane and adaptation time constants (> 0), floats or tensors broadcastable to ``x``.
    b0, beta:
        Base threshold ``b0`` (RSNN_bfd ``init_b`` / ``b_j0``) and adaptation strength β.
    dt:
        Time step Δt (also multiplies the reset term).
    surrogate, surrogate_kw:
        Firing surrogate; default Gaussian with width 0.5 and scale 0.5.
    validate:
        Check ``x`` for NaN/Inf.

    Returns
    -------
    tuple
        ``(s, ALIFState(v, s, b))``; the adaptive threshold is ``B = b0 + beta * b``.
    """
    check_float_tensor("x", x)
    _check_alif_options(tau_m, tau_adp, b0, beta, dt)
    check_state_type("state", state, ALIFState)
    if validate:
        check_finite("x", x)
    if state is None:
        state = ALIFState(x.new_zeros(x.shape), x.new_zeros(x.shape), x.new_zeros(x.shape))
    for name, t in zip(("state.v", "state.s", "state.b"), state, strict=True):
        check_state(name, t, x.shape)
    surr = Surrogate.make(surrogate, **(surrogate_kw or {}))
    alpha, rho = _alpha(tau_m, dt, x), _alpha(tau_adp, dt, x)
    _check_broadcast("tau_m", alpha, x.shape)
    _check_broadcast("tau_adp", rho, x.shape)
    s, v, b = alif_update(x, state.v, state.s, state.b, alpha, rho, b0, beta, dt, surr)
    return s, ALIFState(v, s, b)


def _alif_triton(*args: Any) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    from .kernels import alif_multistep_triton

    return alif_multistep_triton(*args)


def _alif_triton_limits(x: torch.Tensor, *rest: Any) -> list[str]:
    reasons = []
    if x.dtype != torch.float32:
        reasons.append(f"the ALIF kernel runs float32 only, got {x.dtype}")
    if x.numel() >= 2**31:
        reasons.append(f"the ALIF kernel uses int32 offsets: at most 2**31 - 1 elements, got {x.numel()}")
    dtypes = sorted({str(t.dtype) for t in rest if isinstance(t, torch.Tensor) and t.dtype != x.dtype})
    if dtypes:
        # the kernel casts them to x's dtype, where the torch loop would promote to the wider one
        reasons.append(f"the ALIF kernel needs the state and time constants in x's dtype {x.dtype}, got {dtypes}")
    if any(isinstance(t, torch.Tensor) and t.device != x.device for t in rest):
        reasons.append("x, state and time constants must be on one device")
    return reasons


#: The multi-step ALIF op: ``op(x, v0, s0, b_init, alpha, rho, b0, beta, dt, surrogate, backend=...)
#: -> (spikes, (v_T, s_T, b_T))``. The Triton kernel serves feed-forward ALIF layers; recurrent
#: networks (barrel cortex) step with `alif_step` because their currents depend on the spikes.
ALIF_MULTISTEP = BackendOp(
    "alif_multistep",
    [
        Backend("triton", _alif_triton, supports=_alif_triton_limits, uses_triton=True),
        Backend("reference", alif_multistep_reference),
    ],
)


class LIF(nn.Module):
    """Multi-step leaky integrate-and-fire layer, ``forward(x: (T, B, ...)) -> spikes (T, B, ...)``.

    Parameters
    ----------
    shape:
        Shape of per-neuron time constants (broadcast against ``x[t]``, e.g. ``(n,)``); ``None``
        shares one τ_m.
    tau_m:
        Membrane time constant τ_m > 0 (``math.inf``: no leak).
    threshold:
        Firing threshold θ > 0.
    reset, v_reset, input_scale, surrogate, surrogate_kw, detach_reset, firing, dt:
        As in `lif_step`.
    learn_tau:
        Make τ_m a trainable parameter (clamped to ``>= 1e-2·Δt`` in the forward pass).
    backend:
        ``"auto"``, ``"reference"``/``"torch"`` or ``"triton"`` for the time loop.
    validate:
        Check inputs for NaN/Inf on every call.
    device, dtype:
        Factory kwargs of the τ_m buffer/parameter, as in torch.nn (default: torch's default
        dtype); build a float64 model with ``dtype=torch.float64`` so that τ_m is not first
        rounded to float32.

    Notes
    -----
    The module keeps the last state (``self.state``) and continues from it until `reset`,
    like SpikingJelly; pass ``state=`` explicitly for stateless use. Call `reset` between
    independent sequences (the stored state holds the autograd graph of the last call).
    """

    def __init__(
        self,
        shape: tuple[int, ...] | int | None = None,
        tau_m: float = 10.0,
        threshold: float = 1.0,
        reset: str = "soft",
        v_reset: float = 0.0,
        input_scale: str = "one_minus_alpha",
        learn_tau: bool = False,
        surrogate: str | Surrogate = "atan",
        surrogate_kw: dict[str, float] | None = None,
        detach_reset: bool = False,
        firing: str = "gt",
        dt: float = 1.0,
        backend: str = "auto",
        validate: bool = True,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        _check_lif_options(reset, input_scale, firing, threshold, tau_m, dt, v_reset)
        check_choice("backend", backend, ("auto", "reference", "torch", "triton"))
        if learn_tau and math.isinf(tau_m):
            raise ValueError("learn_tau=True needs a finite tau_m, got inf")
        shape = (shape,) if isinstance(shape, int) else tuple(shape or ())
        tau = torch.full(shape, float(tau_m), dtype=_factory_dtype(tau_m, dtype), device=device)
        if learn_tau:
            self.tau_m = nn.Parameter(tau)
        else:
            self.register_buffer("tau_m", tau)
        self.threshold = float(threshold)
        self.reset_mode, self.v_reset, self.input_scale = reset, float(v_reset), input_scale
        self.surrogate = Surrogate.make(surrogate, **(surrogate_kw or {}))
        self.detach_reset, self.firing, self.dt = bool(detach_reset), firing, float(dt)
        self.backend, self.validate = backend, validate
        self.state: LIFState | None = None

    def forward(
        self, x: torch.Tensor, state: LIFState | None = None, return_state: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, LIFState]:
        """Run ``x: (T, B, ...)``; returns spikes ``(T, B, ...)`` (and the final state if asked)."""
        check_multistep("x", x, self.validate)
        check_state_type("state", state, LIFState)
        state = state if state is not None else self.state
        if state is not None:
            check_state("state.v", state.v, x.shape[1:])
        spikes, new_state = lif_multistep(
            x,
            state,
            # the documented clamp: a learned τ_m that drifts to <= 0 is floored, not rejected
            tau_m=torch.clamp(self.tau_m, min=TAU_FLOOR * self.dt),
            threshold=self.threshold,
            reset=self.reset_mode,
            v_reset=self.v_reset,
            input_scale=self.input_scale,
            surrogate=self.surrogate,
            detach_reset=self.detach_reset,
            firing=self.firing,
            dt=self.dt,
            backend=self.backend,
            validate=False,
        )
        self.state = new_state
        return (spikes, new_state) if return_state else spikes

    def reset(self) -> None:
        """Forget the stored state (and its autograd graph)."""
        self.state = None

    def extra_repr(self) -> str:
        return (
            f"tau_m={tuple(self.tau_m.shape) or float(self.tau_m)}, threshold={self.threshold}, "
            f"reset={self.reset_mode!r}, input_scale={self.input_scale!r}, surrogate={self.surrogate.name!r}"
        )


class IF(LIF):
    """Multi-step integrate-and-fire layer: LIF with α = 1, unscaled input, firing at ``v ≥ θ``.

    Parameters are those of `LIF` without the leak (``device``/``dtype`` place its unused
    ``tau_m = inf`` buffer); ``firing="ge"`` by default so that IF equals the binary (``levels=2``)
    GIF neuron.
    """

    def __init__(
        self,
        shape: tuple[int, ...] | int | None = None,
        threshold: float = 1.0,
        reset: str = "soft",
        v_reset: float = 0.0,
        surrogate: str | Surrogate = "atan",
        surrogate_kw: dict[str, float] | None = None,
        detach_reset: bool = False,
        firing: str = "ge",
        backend: str = "auto",
        validate: bool = True,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__(
            shape=shape,
            tau_m=math.inf,
            threshold=threshold,
            reset=reset,
            v_reset=v_reset,
            input_scale="none",
            learn_tau=False,
            surrogate=surrogate,
            surrogate_kw=surrogate_kw,
            detach_reset=detach_reset,
            firing=firing,
            backend=backend,
            validate=validate,
            device=device,
            dtype=dtype,
        )


class ALIF(nn.Module):
    """Multi-step adaptive-threshold LIF (RSNN_bfd), ``forward(x: (T, ..., n)) -> spikes (T, ..., n)``.

    Parameters
    ----------
    n:
        Number of neurons (last input dimension); τ_m and τ_adp are per neuron.
    tau_m, tau_adp:
        Initial membrane / adaptation time constants (> 0): 10 and 5 in RSNN_bfd.
    b0, beta:
        Base threshold (0.04) and adaptation strength β (1.8).
    surrogate, surrogate_kw:
        Default Gaussian, width 0.5, scale 0.5 (RSNN_bfd ``lens``, ``gamma``).
    learn_tau:
        Train τ_m and τ_adp (clamped to ``>= 1e-2·Δt`` in the forward pass).
    dt:
        Time step Δt.
    init:
        Initial state when none is stored or given: ``"zeros"`` or ``"official"`` (see
        `alif_initial_state`).
    backend:
        ``"auto"`` (Triton on CUDA float32, else the torch loop), ``"reference"``/``"torch"`` or
        ``"triton"``. The fused kernel serves feed-forward layers whose currents are known for all
        steps; recurrent networks call `alif_step` per step instead.
    validate:
        Check inputs for NaN/Inf.
    device, dtype:
        Factory kwargs of τ_m and τ_adp, as in torch.nn (default: torch's default dtype); build a
        float64 model with ``dtype=torch.float64`` so that they are not first rounded to float32.
    """

    def __init__(
        self,
        n: int,
        tau_m: float = 10.0,
        tau_adp: float = 5.0,
        b0: float = 0.04,
        beta: float = 1.8,
        surrogate: str | Surrogate = "gaussian",
        surrogate_kw: dict[str, float] | None = None,
        learn_tau: bool = True,
        dt: float = 1.0,
        init: str = "zeros",
        backend: str = "auto",
        validate: bool = True,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"n must be a positive int, got {n!r}")
        _check_alif_options(tau_m, tau_adp, b0, beta, dt)
        check_choice("init", init, ("zeros", "official"))
        check_choice("backend", backend, ("auto", "reference", "torch", "triton"))
        self.n = n
        tm = torch.full((n,), float(tau_m), dtype=_factory_dtype(tau_m, dtype), device=device)
        ta = torch.full((n,), float(tau_adp), dtype=_factory_dtype(tau_adp, dtype), device=device)
        if learn_tau:
            self.tau_m, self.tau_adp = nn.Parameter(tm), nn.Parameter(ta)
        else:
            self.register_buffer("tau_m", tm)
            self.register_buffer("tau_adp", ta)
        self.b0, self.beta, self.dt, self.init = float(b0), float(beta), float(dt), init
        self.surrogate = Surrogate.make(surrogate, **(surrogate_kw or {}))
        self.backend, self.validate = backend, validate
        self.state: ALIFState | None = None

    def forward(
        self,
        x: torch.Tensor,
        state: ALIFState | None = None,
        return_state: bool = False,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, ALIFState]:
        """Run ``x: (T, ..., n)``; returns spikes of the same shape (and the final state if asked)."""
        check_multistep("x", x, self.validate)
        if x.dim() < 2 or x.shape[-1] != self.n:
            raise ValueError(f"x must have shape (T, ..., {self.n}), got {tuple(x.shape)}")
        check_state_type("state", state, ALIFState)
        if self.validate:  # as LIF: a learned τ that diverged to NaN must not silently silence the layer
            for name, tau in (("tau_m", self.tau_m), ("tau_adp", self.tau_adp)):
                if bool(torch.isnan(tau.detach()).any()):
                    raise ValueError(f"{name} must be > 0, got NaN (a learned time constant diverged)")
        state = state if state is not None else self.state
        if state is None:
            state = alif_initial_state(
                x.shape[1:], init=self.init, b0=self.b0, generator=generator, device=x.device, dtype=x.dtype
            )
        for name, t in zip(("state.v", "state.s", "state.b"), state, strict=True):
            check_state(name, t, x.shape[1:])
        alpha, rho = _alpha(self.tau_m, self.dt, x), _alpha(self.tau_adp, self.dt, x)
        backend = _resolve_backend(self.backend, x)
        spikes, (v, s, b) = ALIF_MULTISTEP(
            x, state.v, state.s, state.b, alpha, rho, self.b0, self.beta, self.dt, self.surrogate, backend=backend
        )
        self.state = ALIFState(v, s, b)
        return (spikes, self.state) if return_state else spikes

    def reset(self) -> None:
        """Forget the stored state (and its autograd graph)."""
        self.state = None

    def extra_repr(self) -> str:
        return f"n={self.n}, b0={self.b0}, beta={self.beta}, surrogate={self.surrogate.name!r}"
