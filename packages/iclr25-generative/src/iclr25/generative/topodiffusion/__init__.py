"""TopoDiffusionNet: A Topology-aware Diffusion Model (Gupta, Samaras, Chen; ICLR 2025).

arXiv: https://arxiv.org/abs/2410.16646 · official code: https://github.com/Saumya-Gupta-26/TopoDiffusionNet

A DDPM conditioned on a requested Betti number c (components beta_0 or holes beta_1) is trained
with an extra persistent-homology loss on its clean-image prediction: the c most persistent dots of
the superlevel persistence diagram of x0_hat are pushed to full persistence and every other dot to
the diagonal, so sampled masks have the requested topology more often than with conditioning alone::

    x0, c ──► x_t ──► eps_theta(x_t, t, c) ──► L_simple
                          │
                          └─► x0_hat = clamp(Tweedie, -1, 1) ──► union-find persistence (detached)
                                   ▲                                   │ critical pixels
                                   └──── gather b, d (attached) ◄──────┘ ──► lambda L_top (t < T/2)

Includes a union-find persistence (numpy and scipy only) with critical pixels (0-dim by the elder
rule, 1-dim by duality on the padded complement; a batched form runs a whole batch in lockstep),
optional cripser/gudhi backends (extra ``topo``) and Betti-number evaluation.
"""

from iclr25.generative.diffusion.data import annulus_masks, blob_masks

from .data import disk_masks, holed_masks
from .losses import TopoCountLoss, TopoMatchLoss, critical_values
from .persistence import Diagram, betti_numbers, superlevel_persistence, superlevel_persistence_batch
from .trainer import TopoDiffusionTrainer, count_accuracy

__all__ = [
    "Diagram",
    "TopoCountLoss",
    "TopoDiffusionTrainer",
    "TopoMatchLoss",
    "annulus_masks",
    "betti_numbers",
    "blob_masks",
    "count_accuracy",
    "critical_values",
    "disk_masks",
    "holed_masks",
    "superlevel_persistence",
    "superlevel_persistence_batch",
]
