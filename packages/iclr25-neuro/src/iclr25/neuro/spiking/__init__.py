"""Shared spiking core: LIF / IF / ALIF / GIF neurons with surrogate gradients.

Not a paper of its own: it serves ``iclr25.neuro.barrel_cortex`` (the adaptive-threshold ALIF of
RSNN_bfd) and ``iclr25.llm.spikellm`` (the multi-level Generalized Integrate-and-Fire neuron of
*SpikeLLM: Scaling up Spiking Neural Network to Large Language Models via Saliency-based Spiking*,
ICLR 2025, https://arxiv.org/abs/2407.04752).

What it computes (per element, time step k; details in each module)::

    spike(x)  forward H(x) (exact 0/1), backward a surrogate σ'(x): gaussian|atan|sigmoid|triangle|ste
    LIF       h = α v + (1-α) I ;  s = H(h - θ) ;  v = h - θ s (soft) | v_reset (hard) | h (none)
    IF        LIF with α = 1, unscaled input, firing at h ≥ θ
    ALIF      b = ρ b + (1-ρ) s_prev ; B = b0 + β b ; v = α v + (1-α) I - B s_prev ; s = H(v - B)
    GIF       u += I ; s = clip(⌊u/θ⌋, lo, hi) ∈ {0..L-1} ; u -= θ s      (S steps: S·log2 L bits)

Functional single steps (``lif_step``, ``alif_step``, ``gif_step``) take and return explicit state
(NamedTuples); modules (``LIF``, ``IF``, ``ALIF``, ``GIFNeuron``) run time-first ``(T, B, ...)``
sequences. Multi-step LIF and ALIF and the multi-step GIF encoder (``gif_encode``, ``GIFNeuron``)
dispatch to fused Triton kernels on CUDA (``backend="auto"``), else a torch time loop. Importing
this package imports torch but not scipy, torch-geometric or triton.
"""

from .encoding import bernoulli_encode, rate_encode
from .gif import GIFNeuron, GIFState, gif_decode, gif_encode, gif_encode_int, gif_range, gif_step, spike_bits
from .neurons import (
    ALIF,
    IF,
    LIF,
    ALIFState,
    LIFState,
    alif_initial_state,
    alif_step,
    lif_multistep,
    lif_step,
)
from .statistics import AnovaResult, ISICVResult, anova_selectivity, cv_binary, firing_rate, isi_cv
from .surrogates import SURROGATES, Surrogate, spike

__all__ = [
    "ALIF",
    "IF",
    "LIF",
    "SURROGATES",
    "ALIFState",
    "AnovaResult",
    "GIFNeuron",
    "GIFState",
    "ISICVResult",
    "LIFState",
    "Surrogate",
    "alif_initial_state",
    "alif_step",
    "anova_selectivity",
    "bernoulli_encode",
    "cv_binary",
    "firing_rate",
    "gif_decode",
    "gif_encode",
    "gif_encode_int",
    "gif_range",
    "gif_step",
    "isi_cv",
    "lif_multistep",
    "lif_step",
    "rate_encode",
    "spike",
    "spike_bits",
]
