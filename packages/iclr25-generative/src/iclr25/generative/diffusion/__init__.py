"""Shared diffusion core of ``iclr25-generative`` (not a paper).

The small, tested substrate that the generative paper modules (tcm, inversebench, treg, diff2in1,
cpe, topodiffusion, slowfast_vgen) import. Anchors: EDM -- Karras et al., "Elucidating the Design
Space of Diffusion-Based Generative Models", NeurIPS 2022, https://arxiv.org/abs/2206.00364
(preconditioning, loss, Heun sampler); DDPM (https://arxiv.org/abs/2006.11239); DDIM
(https://arxiv.org/abs/2010.02502); consistency models (https://arxiv.org/abs/2303.01469);
diffusers/k-diffusion conventions.

One calling convention: a *denoiser* ``D(x, sigma, **cond) -> x0_hat`` with ``x = x0 + sigma n``
(VE/EDM). Epsilon/VP networks are adapted by :class:`precond.EpsVPDenoiser`, never special-cased
in samplers::

    raw net F ──EDMPrecond/ConsistencyPrecond/EpsVPDenoiser/CFGDenoiser──► D(x, sigma, **cond)
    D ──► samplers.heun_sample / euler_sample / consistency_sample      (VE noise levels)
    eps_net ──► samplers.ddim_sample / ddim_invert / ddpm_sample        (VP schedule)

Sub-modules: :mod:`schedules`, :mod:`precond`, :mod:`losses`, :mod:`samplers`, :mod:`nn`,
:mod:`text`, :mod:`training`, :mod:`data`, :mod:`metrics`.
"""

from . import data, losses, metrics, nn, precond, samplers, schedules, text, training

__all__ = ["data", "losses", "metrics", "nn", "precond", "samplers", "schedules", "text", "training"]
