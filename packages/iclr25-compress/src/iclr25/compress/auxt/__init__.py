"""AuxT: wavelet linear shortcuts that speed up learned image codec training.

Li, Li, Dai, Cao, Kan, Li, Zou, Xiong, "On Disentangled Training for Nonlinear Transform in
Learned Image Compression", ICLR 2025, https://arxiv.org/abs/2501.13751.

A nonlinear analysis transform has to learn energy compaction (decorrelation and an uneven
energy split across channels) from scratch, which slows training. AuxT adds, in parallel to the
analysis transform ``g_a``, a chain of linear wavelet shortcuts (WLS): at each of the 4
downsampling stages an orthonormal Haar DWT, a learnable per-subband scaling ``exp(s)`` and a
near-orthogonal 1×1 projection (OLP), added to the stage output; the synthesis side mirrors it
with inverse shortcuts (iWLS). Training adds ``w_orth · Σ mean((WWᵀ − I)²)`` to the RD loss
(``WᵀW`` instead of ``WWᵀ`` when ``W`` has more rows than columns)::

    x ─ g_a[0] ─(+)─ g_a[1..2] ─(+)─ ... ─(+)─ y      (taps after the strided layers 0, 2, 4, 6,
    └── WLS_1 ───┴──── WLS_2 ────┴─ ... ───┘          before the GDN that follows each of them)

The entropy model and bitstream are the base codec's.
"""

from .haar import haar_dwt2d, haar_filters, haar_idwt2d
from .model import AuxTModel, AuxTransform, attach_auxt, check_images, find_taps, rd_loss_with_ortho
from .shortcuts import OLP, WLS, InverseWLS, ortho_loss

__all__ = [
    "OLP",
    "WLS",
    "AuxTModel",
    "AuxTransform",
    "InverseWLS",
    "attach_auxt",
    "check_images",
    "find_taps",
    "haar_dwt2d",
    "haar_filters",
    "haar_idwt2d",
    "ortho_loss",
    "rd_loss_with_ortho",
]
