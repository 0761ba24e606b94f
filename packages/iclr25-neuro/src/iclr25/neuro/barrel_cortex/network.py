"""The constrained recurrent spiking network and the barrel-cortex model built on it.

Per time step t (synchronous update; ``update="sequential"`` lets population i see the new spikes
of populations j < i, as RSNN_bfd's loop over populations does)::

    force[t] (93) ─ Linear(93,100) ┐
                                   ├ cat ─ Linear(200,200) ─ ALIF thalamus (200) ─┐ W_in ⊙ M_in
    torque[t] (93) ─ Linear(93,100)┘                                             ▼
    cortex: I_t = s_thal,t @ (W_in⊙M_in) + s_{t-1} @ (sign ⊙ W ⊙ M) / scale,  W, W_in ← clamp(·,0,1)
            s_t = ALIF(I_t)   (τ_m, τ_adp learnable per neuron)
    readout: s_t[E populations] ─ Linear(n_E,128) ─ Linear(128,3) ─ softmax, summed over t ≥ 1, / T
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from torch import nn

from iclr25.core.triton import BackendUnavailableError, triton_reasons
from iclr25.neuro.spiking import Surrogate, alif_initial_state
from iclr25.neuro.spiking.reference import alif_update

from .populations import ConnectivitySpec
from .whiskers import _is_finite_real, _is_int

logger = logging.getLogger(__name__)

__all__ = ["BarrelCortexRSNN", "ConstrainedSpikingNetwork", "check_spike_input"]

_UPDATES = ("synchronous", "sequential")
_READOUTS = ("official", "nll_mean_prob")
_INITS = ("zeros", "official")
_BACKENDS = ("auto", "reference", "triton")
OFFICIAL_STATE_SEED = 515  # RSNN_bfd seeds its random initial state with 515


def _choice(name: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")


def _check_real(name: str, value: Any, positive: bool = True) -> None:
    # NumPy scalars (np.float32 from a hyper-parameter grid) are floats too; bools are not
    if not _is_finite_real(value) or (positive and not value > 0):
        raise ValueError(f"{name} must be a finite float{' > 0' if positive else ''}, got {value!r}")


class ConstrainedSpikingNetwork(nn.Module):
    """A recurrent ALIF network with fixed sparse masks, Dale's law and an input projection.

    Parameters
    ----------
    spec:
        `ConnectivitySpec` (populations, probabilities, scale, seed).
    init_w:
        Weights start ``U(0, init_w)`` (then masked); they are projected onto [0, 1] before every use
        (`project_weights`).
    init_b:
        Base threshold ``b0`` of the ALIF neurons.
    beta:
        Threshold adaptation strength β.
    tau_m, tau_adp:
        Initial membrane / adaptation time constants (learnable per neuron).
    update:
        ``"synchronous"`` (every population sees the previous step's spikes) or ``"sequential"``
        (population i sees the current step's spikes of populations j < i; RSNN_bfd).
    init_state:
        ``"zeros"`` or ``"official"`` (``v, s ~ U[0,1)`` from seed 515, ``b = b0``; RSNN_bfd).
    backend:
        Recurrent step: ``"reference"`` (torch, the spec), ``"triton"`` (fused spike-driven steps of
        `.kernels`, trainable: one autograd node for the T steps whose backward is the exact adjoint
        of the torch step; synchronous update and float32 only, else `BackendUnavailableError`;
        CPU only under ``TRITON_INTERPRET=1``) or ``"auto"`` (the kernel on CUDA when those hold,
        otherwise, e.g. for ``update="sequential"``, the torch step).

    Attributes
    ----------
    weight, weight_in:
        ``(n, n)`` and ``(n_input, n)`` raw weights (row = pre), projected onto [0, 1] before each use.
    mask, mask_in:
        Bool buffers of the same shapes; ``sign``: ``(n,)`` ±1 per presynaptic neuron.
    """

    def __init__(
        self,
        spec: ConnectivitySpec,
        init_w: float = 0.06,
        init_b: float = 0.04,
        beta: float = 1.8,
        tau_m: float = 10.0,
        tau_adp: float = 5.0,
        update: str = "synchronous",
        init_state: str = "zeros",
        backend: str = "auto",
    ) -> None:
        super().__init__()
        _choice("update", update, _UPDATES)
        _choice("init_state", init_state, _INITS)
        _choice("backend", backend, _BACKENDS)
        self.backend = backend
        for name, v in (("init_w", init_w), ("tau_m", tau_m), ("tau_adp", tau_adp)):
            _check_real(name, v)
        # a NaN threshold makes every comparison false: a network that never fires, without an error
        _check_real("init_b", init_b, positive=False)
        _check_real("beta", beta, positive=False)
        if beta < 0:
            raise ValueError(f"beta must be a finite float >= 0, got {beta!r}")
        self.spec = spec
        self.update, self.init_state = update, init_state
        self.b0, self.beta = float(init_b), float(beta)
        mask, mask_in = spec.masks()
        gen = torch.Generator().manual_seed(spec.seed + 1)
        n = spec.n
        self.register_buffer("mask", mask)
        self.register_buffer("mask_in", mask_in)
        self.register_buffer("sign", spec.signs())
        self.weight = nn.Parameter(torch.rand(n, n, generator=gen) * init_w * mask)
        self.weight_in = nn.Parameter(torch.rand(spec.n_input, n, generator=gen) * init_w * mask_in)
        self.tau_m = nn.Parameter(torch.full((n,), float(tau_m)))
        self.tau_adp = nn.Parameter(torch.full((n,), float(tau_adp)))
        self.surrogate = Surrogate.make("gaussian")

    @property
    def gain(self) -> float:
        """Synaptic gain ``1 / scale`` that keeps expected input per neuron when populations shrink."""
        return 1.0 / self.spec.scale

    @torch.no_grad()
    def project_weights(self) -> None:
        """Clamp the raw weights to [0, 1] in place (RSNN_bfd's ``weight.data.clamp_(0, 1)`` before each use).

        This is a projection step, not part of the graph: a weight the optimizer pushes below 0 is
        reset to exactly 0 and keeps receiving gradient, so it can grow again. A differentiable
        ``clamp`` in the forward pass would instead leave it negative with zero gradient forever;
        during training such weights pile up and the network falls silent.
        """
        self.weight.clamp_(0.0, 1.0)
        self.weight_in.clamp_(0.0, 1.0)

    def effective_weights(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Signed, masked weights ``(n, n)`` (gain ``1/scale`` included) and input weights ``(n_input, n)``.

        Calls `project_weights` first, so the raw weights are in [0, 1] and the gradient reaches
        every masked-in weight, including those sitting at 0.
        """
        self.project_weights()
        w = self.weight * self.mask * self.sign[:, None] * self.gain
        # no gain on the input weights: the thalamus keeps its 200 neurons at every scale, so each
        # cortical neuron already receives its full expected thalamic input
        w_in = self.weight_in * self.mask_in
        return w, w_in

    def initial_state(self, batch: int, device: torch.device, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
        """``(v, s, b)`` each ``(batch, n)`` as chosen by ``init_state``.

        The official state is drawn in float32 and then cast, so ``.double()`` (or ``.half()``) starts
        from the same state as float32 (as the thalamus does) instead of from a different random draw.
        """
        gen = torch.Generator().manual_seed(OFFICIAL_STATE_SEED)
        st = alif_initial_state((batch, self.spec.n), init=self.init_state, b0=self.b0, generator=gen)
        return tuple(t.to(device=device, dtype=dtype) for t in st)

    def _kernel_reasons(self, inputs: torch.Tensor, explicit: bool) -> list[str]:
        reasons = triton_reasons(inputs, allow_interpreter=explicit)
        if reasons:
            return reasons
        if self.update != "synchronous":
            # population i seeing this step's spikes of j < i would need 13 dependent launches
            # per step; the per-population loop of the official script stays on torch
            reasons.append(f"the fused step kernel runs update='synchronous' only, got {self.update!r}")
        if inputs.dtype != torch.float32:
            reasons.append(f"the fused step kernel runs float32 only, got {inputs.dtype}")
        return reasons

    def uses_kernel(self, inputs: torch.Tensor) -> bool:
        """Whether `forward` on ``inputs`` runs the fused Triton steps (see ``backend``).

        Raises
        ------
        BackendUnavailableError
            ``backend="triton"`` and the kernel cannot run these inputs (the reasons are listed).
        """
        if self.backend == "reference" or (self.backend == "auto" and inputs.device.type != "cuda"):
            return False
        reasons = self._kernel_reasons(inputs, explicit=self.backend == "triton")
        if reasons and self.backend == "triton":
            raise BackendUnavailableError("backend 'triton' cannot run: " + "; ".join(reasons))
        return not reasons

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        """Run the network.

        Parameters
        ----------
        inputs:
            ``(T, B, n_input)`` presynaptic input spikes.

        Returns
        -------
        torch.Tensor
            ``(T, B, n)`` 0/1 spikes.
        """
        n_in = self.spec.n_input
        if not isinstance(inputs, torch.Tensor) or not inputs.is_floating_point():
            got = f"a tensor of dtype {inputs.dtype}" if isinstance(inputs, torch.Tensor) else type(inputs).__name__
            raise TypeError(f"inputs must be a float tensor (T, B, {n_in}), got {got}")
        if inputs.ndim != 3 or inputs.shape[-1] != n_in:
            raise ValueError(f"inputs must have shape (T, B, {n_in}) (n_input = {n_in}), got {tuple(inputs.shape)}")
        t_steps, batch, _ = inputs.shape
        w, w_in = self.effective_weights()
        alpha = torch.exp(-1.0 / self.tau_m)
        rho = torch.exp(-1.0 / self.tau_adp)
        # explicit sizes: reshape(·, -1) is ambiguous for an empty (T = 0 or B = 0) input
        drive = (inputs.reshape(t_steps * batch, n_in) @ w_in).reshape(t_steps, batch, w_in.shape[1])
        v, s, b = self.initial_state(batch, inputs.device, inputs.dtype)
        offsets = self.spec.offsets
        out = []
        if t_steps and self.uses_kernel(inputs):
            from .kernels import recurrent_alif_triton  # imports triton only when this backend runs

            spikes, _ = recurrent_alif_triton(drive, w, v, s, b, alpha, rho, self.b0, self.beta, 1.0, self.surrogate)
            return spikes
        for t in range(t_steps):
            if self.update == "synchronous":
                s, v, b = alif_update(drive[t] + s @ w, v, s, b, alpha, rho, self.b0, self.beta, 1.0, self.surrogate)
            else:
                new_s, new_v, new_b = [], [], []
                for i in range(len(offsets) - 1):
                    sl = slice(offsets[i], offsets[i + 1])
                    mixed = torch.cat([*new_s, s[:, offsets[i] :]], dim=1)  # j < i: this step's spikes
                    si, vi, bi = alif_update(
                        drive[t, :, sl] + mixed @ w[:, sl], v[:, sl], s[:, sl], b[:, sl],
                        alpha[sl], rho[sl], self.b0, self.beta, 1.0, self.surrogate,
                    )  # fmt: skip
                    new_s.append(si)
                    new_v.append(vi)
                    new_b.append(bi)
                s, v, b = torch.cat(new_s, 1), torch.cat(new_v, 1), torch.cat(new_b, 1)
            out.append(s)
        return torch.stack(out) if out else inputs.new_zeros(0, batch, self.spec.n)


def check_spike_input(spikes: Any, n_inputs: int, allow_rates: bool = False) -> torch.Tensor:
    """Validate model input and return the ``[B, 2, T, n_inputs]`` view (official 5-D: sweep 0).

    Raises
    ------
    TypeError, ValueError
        Wrong type, rank, layout, non-binary values (unless ``allow_rates``) or NaN/Inf.
    """
    layout = f"[B, 2, T, {n_inputs}] or official [B, 2, sweeps, T, {n_inputs}]"
    if not isinstance(spikes, torch.Tensor) or not spikes.is_floating_point():
        got = f"a tensor of dtype {spikes.dtype}" if isinstance(spikes, torch.Tensor) else type(spikes).__name__
        raise TypeError(f"spikes must be a float tensor of layout {layout}, got {got}")
    if spikes.ndim == 5:
        if spikes.shape[2] < 1:
            raise ValueError(f"spikes must have at least one sweep, layout {layout}, got {tuple(spikes.shape)}")
        spikes = spikes[:, :, 0]
    if spikes.ndim != 4 or spikes.shape[1] != 2 or spikes.shape[-1] != n_inputs:
        raise ValueError(f"spikes must have layout {layout} (force, torque), got shape {tuple(spikes.shape)}")
    if spikes.numel():
        if not torch.isfinite(spikes).all():
            raise ValueError("spikes contain NaN or Inf")
        if allow_rates:
            if spikes.min() < 0 or spikes.max() > 1:
                raise ValueError("spike rates must lie in [0, 1] (allow_rates=True)")
        elif not ((spikes == 0) | (spikes == 1)).all():
            raise ValueError("spikes must be 0/1; pass allow_rates=True for rates in [0, 1]")
    return spikes


class BarrelCortexRSNN(nn.Module):
    """The barrel-column RSNN of RSNN_bfd: whisker spikes → thalamus → 13 cortical populations → readout.

    Parameters
    ----------
    n_whisker_inputs:
        Input channels per modality (31 whiskers × 3 nodes = 93).
    n_classes:
        Number of object classes.
    scale:
        Population-size factor (> 0); recurrent weights are divided by it (see `ConnectivitySpec`).
    init_w, init_b:
        Weight init bound (``U(0, init_w)``) and ALIF base threshold ``b0`` (RSNN_bfd 0.06 / 0.04).
    update, init_state:
        See `ConstrainedSpikingNetwork` (defaults: synchronous, zeros; official: sequential, official).
    readout:
        ``"official"``: loss = cross-entropy on the time-averaged softmax used as logits (RSNN_bfd);
        ``"nll_mean_prob"``: negative log of the averaged probability.
    seed:
        Seed of masks and initial weights.
    backend:
        Recurrent step of the cortex: ``"auto"``, ``"reference"`` or ``"triton"`` (see
        `ConstrainedSpikingNetwork`; training and inference alike). Where the fused cortex step
        runs, the thalamus uses the multi-step ALIF kernel of `iclr25.neuro.spiking`.

    Attributes
    ----------
    cortex:
        The `ConstrainedSpikingNetwork`; ``readout_index``: ``(n_E,)`` neurons read out (P0, P1, P4).
    """

    def __init__(
        self,
        n_whisker_inputs: int = 93,
        n_classes: int = 3,
        scale: float = 1.0,
        init_w: float = 0.06,
        init_b: float = 0.04,
        update: str = "synchronous",
        readout: str = "official",
        init_state: str = "zeros",
        seed: int = 0,
        backend: str = "auto",
    ) -> None:
        super().__init__()
        _choice("readout", readout, _READOUTS)
        _choice("backend", backend, _BACKENDS)
        for name, v in (("n_whisker_inputs", n_whisker_inputs), ("n_classes", n_classes)):
            if not _is_int(v) or v < 1:
                raise ValueError(f"{name} must be an int >= 1, got {v!r}")
        n_whisker_inputs, n_classes = int(n_whisker_inputs), int(n_classes)
        spec = ConnectivitySpec.barrel(scale=scale, seed=seed)
        self.n_inputs, self.n_classes, self.readout = n_whisker_inputs, n_classes, readout
        # the Linear layers' default and Xavier inits draw from the global generator seeded with
        # ``seed`` (as before); it is forked so that building a model leaves the caller's stream alone
        with torch.random.fork_rng(devices=[]):
            torch.random.default_generator.manual_seed(int(seed))
            self.fc_force = nn.Linear(n_whisker_inputs, 100)
            self.fc_torque = nn.Linear(n_whisker_inputs, 100)
            self.fc_thalamus = nn.Linear(200, 200)
            self.tau_m_thal = nn.Parameter(torch.full((200,), 10.0))
            self.tau_adp_thal = nn.Parameter(torch.full((200,), 5.0))
            self.cortex = ConstrainedSpikingNetwork(
                spec, init_w, init_b, update=update, init_state=init_state, backend=backend
            )
            e_pops = [i for i, k in enumerate(spec.kinds) if k == "E"]
            off = spec.offsets
            idx = torch.cat([torch.arange(off[i], off[i + 1]) for i in e_pops])
            self.register_buffer("readout_index", idx)
            self.fc_hidden = nn.Linear(len(idx), 128)
            self.fc_out = nn.Linear(128, n_classes)
            # RSNN_bfd re-initialises these weight matrices Xavier-uniform (biases and the thalamic
            # Linear(200,200) keep PyTorch's default); the larger input weights set the thalamic drive.
            for layer in (self.fc_force, self.fc_torque, self.fc_hidden, self.fc_out):
                nn.init.xavier_uniform_(layer.weight)

    @property
    def n_neurons(self) -> int:
        """Cortical neuron count."""
        return self.cortex.spec.n

    def thalamus(self, spikes: torch.Tensor) -> torch.Tensor:
        """Thalamic spikes ``(T, B, 200)`` from validated input ``(B, 2, T, n_inputs)``."""
        x = spikes.transpose(0, 2)  # (T, 2, B, n)
        cur = self.fc_thalamus(torch.cat([self.fc_force(x[:, 0]), self.fc_torque(x[:, 1])], dim=-1))
        alpha, rho = torch.exp(-1.0 / self.tau_m_thal), torch.exp(-1.0 / self.tau_adp_thal)
        gen = torch.Generator().manual_seed(OFFICIAL_STATE_SEED + 1)
        st = alif_initial_state(cur.shape[1:], init=self.cortex.init_state, b0=self.cortex.b0, generator=gen)
        v, s, b = (t.to(cur) for t in st)
        if self.cortex.uses_kernel(cur):
            # feed-forward layer (all T currents known): the shared multi-step ALIF kernel of
            # iclr25.neuro.spiking runs its whole time loop in one launch, forward and backward
            from iclr25.neuro.spiking.kernels import alif_multistep_triton

            surr = self.cortex.surrogate
            return alif_multistep_triton(cur, v, s, b, alpha, rho, self.cortex.b0, self.cortex.beta, 1.0, surr)[0]
        out = []
        for t in range(cur.shape[0]):
            s, v, b = alif_update(
                cur[t], v, s, b, alpha, rho, self.cortex.b0, self.cortex.beta, 1.0, self.cortex.surrogate
            )
            out.append(s)
        return torch.stack(out)

    def forward(
        self, spikes: torch.Tensor, record: bool = False, allow_rates: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Class scores for whisker spike trains.

        Parameters
        ----------
        spikes:
            ``[B, 2, T, 93]`` 0/1 (force, torque), or official ``[B, 2, sweeps, T, 93]`` (sweep 0 used);
            any float dtype, cast to the model's. Not modified.
        record:
            Also return the cortical spikes.
        allow_rates:
            Accept values in [0, 1] instead of 0/1.

        Returns
        -------
        torch.Tensor or tuple
            ``scores [B, n_classes]`` (softmax summed over t ≥ 1, divided by T) and, with ``record``,
            ``spikes [B, T, n]``.
        """
        # 0/1 spikes are exact in every float dtype: follow the model's, so float32 `to_spikes`
        # output drives a .double() model as it does the analyses (a cast, never in place)
        spikes = check_spike_input(spikes, self.n_inputs, allow_rates).to(self.fc_force.weight.dtype)
        batch, _, t_steps, _ = spikes.shape
        if batch == 0 or t_steps == 0:
            scores = spikes.new_zeros(batch, self.n_classes)
            return (scores, spikes.new_zeros(batch, t_steps, self.n_neurons)) if record else scores
        ctx = self.cortex(self.thalamus(spikes))  # (T, B, n)
        probs = torch.softmax(self.fc_out(self.fc_hidden(ctx[1:, :, self.readout_index])), dim=-1)
        scores = probs.sum(0) / t_steps
        return (scores, ctx.transpose(0, 1)) if record else scores

    def loss(self, scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """Training loss for ``scores [B, C]`` and ``labels [B]`` under the chosen ``readout``."""
        if self.readout == "official":
            return nn.functional.cross_entropy(scores, labels)
        return nn.functional.nll_loss(torch.log(scores.clamp_min(1e-12)), labels)

    def param_groups(self, lr: float = 0.008) -> list[dict[str, Any]]:
        """Adam groups of RSNN_bfd: weights ``lr``, τ_adp ``5·lr``, τ_m ``2·lr``."""
        _check_real("lr", lr)
        lr = float(lr)  # 5 * np.float32(lr) would stay float32 and round the group rates
        tau_m = [self.cortex.tau_m, self.tau_m_thal]
        tau_adp = [self.cortex.tau_adp, self.tau_adp_thal]
        special = {id(p) for p in tau_m + tau_adp}
        rest = [p for p in self.parameters() if id(p) not in special]
        return [{"params": rest, "lr": lr}, {"params": tau_adp, "lr": 5 * lr}, {"params": tau_m, "lr": 2 * lr}]
