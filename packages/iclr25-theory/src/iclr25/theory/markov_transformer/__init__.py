"""Attention with Markov: A Curious Case of Single-layer Transformers (Makkuva et al., ICLR 2025).

arXiv: https://arxiv.org/abs/2402.04161 · official code: https://github.com/Bond1995/Markov

A small, exact laboratory for single-layer transformers trained on binary first-order Markov
chains ``P = [[1-p, p], [q, 1-q]]``. With the input embedding tied to the output head, the unigram
predictor theta_pi (all weights zero, output bias ``log(p/q)``) is a bad local minimum of the
next-token loss exactly when ``p + q > 1``; untied, or with ``p + q < 1``, it is a saddle, and the
bigram predictor is always a global minimum::

    BinaryMarkovChain --sample/enumerate--> x (B, N+1) --> MarkovTransformer --> logits (B, N)
          |                                                    |
          +-- H(pi), entropy rate                              +-- population_loss (exact, 2**N rows)
                                                               +-- unigram_point / bigram_point
                                                               +-- landscape_probe (grad, Hessian)
                                                               +-- train_markov / train_sweep
"""

from .chain import BinaryMarkovChain, binary_entropy, markov_sample
from .landscape import bigram_point, landscape_probe, population_loss, predicted_curvatures, unigram_point
from .model import MarkovTransformer, MarkovTransformerConfig
from .training import lr_factor, train_markov, train_sweep

__all__ = [
    "BinaryMarkovChain",
    "MarkovTransformer",
    "MarkovTransformerConfig",
    "bigram_point",
    "binary_entropy",
    "landscape_probe",
    "lr_factor",
    "markov_sample",
    "population_loss",
    "predicted_curvatures",
    "train_markov",
    "train_sweep",
    "unigram_point",
]
