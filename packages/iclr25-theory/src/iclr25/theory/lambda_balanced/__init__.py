"""From Lazy to Rich: Exact Learning Dynamics in Deep Linear Networks (Dominé et al., ICLR 2025).

arXiv: https://arxiv.org/abs/2409.14623

A two-layer linear network ``ŷ = W2 W1 x`` is λ-balanced when ``W2ᵀW2 − W1W1ᵀ = λI``; gradient
flow conserves this matrix. For whitened inputs the stacked weights ``Q = [W1ᵀ; W2]`` then obey a
matrix Riccati equation with an exact solution, which gives the network function ``W2W1``, the
representations ``W1ᵀW1`` and ``W2W2ᵀ`` and hence the NTK at every time. λ moves training from
the rich regime (λ = 0, small weights: sigmoidal learning, NTK changes) to the lazy regime
(|λ| → ∞: exponential learning, NTK nearly fixed)::

    lambda_balanced_init ──► W1, W2 ──► exact_trajectory(Σyx, λ, times) ──► QQᵀ(t) blocks
                                   │                                          │
                                   └──► simulate_gd (Euler baseline)          └──► ntk ──► kernel_distance
"""

from .data import io_correlation, whiten
from .dynamics import exact_qqt, exact_trajectory, riccati_matrix, split_qqt
from .gd import simulate_gd
from .initialisation import LinearNet2, balanced_singular_values, init_linear_pair_, lambda_balanced_init
from .tangent import kernel_distance, ntk

__all__ = [
    "LinearNet2",
    "balanced_singular_values",
    "exact_qqt",
    "exact_trajectory",
    "init_linear_pair_",
    "io_correlation",
    "kernel_distance",
    "lambda_balanced_init",
    "ntk",
    "riccati_matrix",
    "simulate_gd",
    "split_qqt",
    "whiten",
]
