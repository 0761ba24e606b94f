"""Exact population loss, the canonical landscape points and second-order probes.

The population loss is the next-symbol cross-entropy averaged over positions 1..N and taken in
expectation over the chain,

    L(theta) = (1/N) sum_n E[ BCE(l_n(x_1..x_n), x_{n+1}) ].

Since l_n depends on x_1..x_n only and x_{n+1} | x_n is Bernoulli(P(1 | x_n)), the expectation over
x_{n+1} is done in closed form (BCE against the soft target P(1 | x_n)); the 2**N input sequences are
enumerated exactly.

Landscape facts checked by :func:`landscape_probe` (derived at the unigram point theta_pi, where only
``b = log(p/q)`` is non-zero):

- output bias: curvature ``pq/(p+q)^2``;
- tied model, along e: curvature ``2pq(p+q-1)/(p+q)^2`` (multiplicity d), a local minimum iff p+q > 1;
- untied model, the (e, a) block ``[[0, cI], [cI, 0]]`` with ``c = pq(p+q-1)/(p+q)^2``: eigenvalues +-c,
  a saddle whenever p + q != 1.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch.func import functional_call

from .chain import MAX_ENUMERATE, BinaryMarkovChain, _check_length
from .model import MarkovTransformer, MarkovTransformerConfig, _layer_norm

__all__ = ["bigram_point", "landscape_probe", "population_loss", "predicted_curvatures", "unigram_point"]


def _check_chain(chain: object) -> BinaryMarkovChain:
    if not isinstance(chain, BinaryMarkovChain):
        raise TypeError(f"chain must be a BinaryMarkovChain, got {type(chain).__name__}")
    return chain


def _check_model(model: object, length: int) -> MarkovTransformer:
    if not isinstance(model, MarkovTransformer):
        raise TypeError(f"model must be a MarkovTransformer, got {type(model).__name__}")
    if length > model.cfg.max_len:
        raise ValueError(f"length {length} exceeds the model's max_len {model.cfg.max_len}")
    return model


def _exact_inputs(
    model: MarkovTransformer, chain: BinaryMarkovChain, length: int, allow_large: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """All 2**N inputs, their probabilities and the soft targets P(x_{n+1}=1 | x_n), in the model's dtype."""
    if length > MAX_ENUMERATE and not allow_large:
        raise ValueError(
            f"length must be <= {MAX_ENUMERATE} for the exact loss (2**length sequences), got {length}; "
            "pass allow_large=True to enumerate anyway"
        )
    ref = model.embedding_vector
    seqs, probs = chain.enumerate(length, allow_large=True, dtype=ref.dtype)
    targets = chain.next_one_prob(seqs, dtype=ref.dtype)
    return seqs.to(ref.device), probs.to(ref.device), targets.to(ref.device)


def _expected_bce(logits: torch.Tensor, probs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    per_pos = F.binary_cross_entropy_with_logits(logits, targets, reduction="none")
    return (probs[:, None] * per_pos).sum(0).mean()


def population_loss(
    model: MarkovTransformer, chain: BinaryMarkovChain, length: int, allow_large: bool = False
) -> torch.Tensor:
    """Exact expected next-symbol cross-entropy (nats), differentiable in the model's parameters.

    Parameters
    ----------
    model:
        A :class:`MarkovTransformer` with ``max_len >= length``.
    chain:
        The source.
    length:
        N, the number of input symbols (= prediction positions); the chain supplies N + 1 symbols.
        2 <= N <= 20 unless ``allow_large`` (the cost is 2**N forward rows).
    allow_large:
        Permit N > 20.

    Returns
    -------
    0-d tensor in the model's dtype: ``(1/N) sum_n E[BCE(l_n, x_{n+1})]``.
    """
    _check_chain(chain)
    _check_length(length)
    _check_model(model, length)
    seqs, probs, targets = _exact_inputs(model, chain, length, allow_large)
    return _expected_bce(model(seqs), probs, targets)


def _zero_state(cfg: MarkovTransformerConfig, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    model = MarkovTransformer(cfg).to(dtype)
    state = {}
    for name, tensor in model.state_dict().items():
        keep_ones = name == "ln_f" or name.endswith((".ln_1", ".ln_2"))
        state[name] = torch.ones_like(tensor) if keep_ones else torch.zeros_like(tensor)
    return state


def _set_head_bias(state: dict[str, torch.Tensor], cfg: MarkovTransformerConfig, value: float) -> None:
    if cfg.vocab == "binary":
        state["head_bias"] = torch.tensor(value, dtype=state["head_bias"].dtype)
    else:
        state["head_bias"] = torch.tensor([0.0, value], dtype=state["head_bias"].dtype)


def unigram_point(
    cfg: MarkovTransformerConfig, chain: BinaryMarkovChain, dtype: torch.dtype = torch.float64
) -> dict[str, torch.Tensor]:
    """The unigram stationary point theta_pi as a state dict.

    Every weight is zero (LayerNorm gains stay 1) except the output bias ``b = log(p/q)``, so the
    model predicts ``sigmoid(b) = pi_1`` everywhere and its loss is ``H(pi)``.

    Parameters
    ----------
    cfg:
        The architecture.
    chain:
        The source.
    dtype:
        Dtype of the returned tensors.

    Returns
    -------
    dict for ``MarkovTransformer(cfg).load_state_dict``.
    """
    if not isinstance(cfg, MarkovTransformerConfig):
        raise TypeError(f"cfg must be a MarkovTransformerConfig, got {type(cfg).__name__}")
    _check_chain(chain)
    state = _zero_state(cfg, dtype)
    _set_head_bias(state, cfg, math.log(chain.p / chain.q))
    return state


def bigram_point(
    cfg: MarkovTransformerConfig, chain: BinaryMarkovChain, dtype: torch.dtype = torch.float64
) -> dict[str, torch.Tensor]:
    """Hand-built parameters whose prediction is the bigram kernel (a global minimum).

    The target logit is ``b + c x_n`` with ``b = log(p/(1-p))`` and ``c = log((1-p)(1-q)/(pq))``
    (``c < 0`` iff p + q > 1). Attention, positions and any extra blocks are zero, and ``e`` is the
    first unit vector (first row of ``wte`` zero, second ``e``, for the two-token vocabulary), so
    the residual stream is ``x_n e``. Then:

    - without LayerNorm, untied: ``a = c e``;
    - without LayerNorm, tied (``a = e``): the first feed-forward turns ``x_n e`` into ``x_n (1-k) e``
      with ``W_1 = r 1 e^T``, ``W_2 = -k e 1^T / (m act(r))`` and ``k = 1 - c`` (``act(0) = 0``);
    - with LayerNorm: the final LN gain is the constant ``c / <a, LN(e)>`` (this needs d >= 2;
      ``e`` is then ``(1, -1, 0, ...)`` so that LN(e) is not zero).

    Parameters
    ----------
    cfg:
        The architecture.
    chain:
        The source.
    dtype:
        Dtype of the returned tensors.

    Returns
    -------
    dict for ``MarkovTransformer(cfg).load_state_dict``.
    """
    if not isinstance(cfg, MarkovTransformerConfig):
        raise TypeError(f"cfg must be a MarkovTransformerConfig, got {type(cfg).__name__}")
    _check_chain(chain)
    p, q = chain.p, chain.q
    b = math.log(p / (1.0 - p))
    c = math.log((1.0 - p) * (1.0 - q) / (p * q))
    d = cfg.d_model
    state = _zero_state(cfg, dtype)
    e = torch.zeros(d, dtype=dtype)
    if cfg.layer_norm:
        e[0], e[1] = 1.0, -1.0
    else:
        e[0] = 1.0

    def put_vector(key: str, vec: torch.Tensor) -> None:
        if cfg.vocab == "binary":
            state[key] = vec.clone()
        else:
            state[key] = torch.stack([torch.zeros_like(vec), vec])

    put_vector("embedding_vector", e)
    _set_head_bias(state, cfg, b)
    if cfg.layer_norm:
        a = e
        if not cfg.weight_tying:
            put_vector("head_vector", a)
        gain = c / float(a @ _layer_norm(e, torch.ones(d, dtype=dtype)))
        state["ln_f"] = torch.full((d,), gain, dtype=dtype)
    elif not cfg.weight_tying:
        put_vector("head_vector", c * e)
    else:
        m = cfg.ff_mult * d
        r = 1.0
        act_r = float(F.relu(torch.tensor(r)) if cfg.activation == "relu" else F.gelu(torch.tensor(r, dtype=dtype)))
        k = 1.0 - c
        state["blocks.0.w_1.weight"] = r * torch.ones(m, 1, dtype=dtype) @ e[None, :]
        state["blocks.0.w_2.weight"] = -k * e[:, None] @ torch.ones(1, m, dtype=dtype) / (m * act_r)
    if cfg.weight_tying:
        state["head_vector"] = state["embedding_vector"]
    return state


def predicted_curvatures(chain: BinaryMarkovChain) -> dict[str, float]:
    """Closed-form Hessian eigenvalues at theta_pi (derived; see the module docstring).

    Returns
    -------
    dict with ``bias`` = pq/(p+q)^2, ``tied_e`` = 2pq(p+q-1)/(p+q)^2 and ``untied_c`` = pq(p+q-1)/(p+q)^2.
    """
    _check_chain(chain)
    p, q = chain.p, chain.q
    s2 = (p + q) ** 2
    return {
        "bias": p * q / s2,
        "tied_e": 2.0 * p * q * (p + q - 1.0) / s2,
        "untied_c": p * q * (p + q - 1.0) / s2,
    }


def landscape_probe(
    model: MarkovTransformer,
    chain: BinaryMarkovChain,
    length: int,
    hessian: bool = True,
    max_params: int = 5000,
    allow_large: bool = False,
) -> dict[str, Any]:
    """Loss, gradient and Hessian spectrum of the exact population loss at the model's parameters.

    Parameters
    ----------
    model:
        The point to probe (use float64 for Hessians). It is not modified.
    chain:
        The source.
    length:
        N, input symbols per sequence (2**N sequences are enumerated).
    hessian:
        Also form the full Hessian (cost: one backward pass per parameter).
    max_params:
        Refuse (``ValueError``) a full Hessian over more parameters than this.
    allow_large:
        Permit N > 20.

    Returns
    -------
    dict with ``loss`` (float), ``grad_norm`` (L2), ``grad_max_abs``, ``n_params``, ``eigenvalues``
    (ascending ``(P,)`` tensor, when ``hessian``), ``min_eigenvalue``, ``unigram_entropy``,
    ``entropy_rate``, ``predicted`` (:func:`predicted_curvatures`) and ``tied``.

    Raises
    ------
    FloatingPointError
        When a parameter holds NaN or inf.
    ValueError
        For a Hessian over more than ``max_params`` parameters or of a half-precision model.
    """
    _check_chain(chain)
    _check_length(length)
    _check_model(model, length)
    names, params = zip(*model.named_parameters(), strict=True)
    for name, param in zip(names, params, strict=True):
        if not torch.isfinite(param).all():
            raise FloatingPointError(f"parameter {name!r} holds NaN or inf values")
    n_params = sum(p.numel() for p in params)
    if hessian and n_params > max_params:
        raise ValueError(f"a full Hessian needs n_params <= max_params={max_params}, got {n_params}")
    low = sorted({str(p.dtype).removeprefix("torch.") for p in params} - {"float32", "float64"})
    if hessian and low:
        # torch has no half-precision eigvalsh, and a half-precision Hessian spectrum would be noise anyway
        raise ValueError(f"a Hessian needs float32 or float64 parameters (use model.double()), got {low}")
    seqs, probs, targets = _exact_inputs(model, chain, length, allow_large)
    shapes = [p.shape for p in params]
    sizes = [p.numel() for p in params]

    def loss_of(flat: torch.Tensor) -> torch.Tensor:
        pieces = flat.split(sizes)
        state = {n: t.view(s) for n, t, s in zip(names, pieces, shapes, strict=True)}
        return _expected_bce(functional_call(model, state, (seqs,)), probs, targets)

    flat = torch.cat([p.detach().reshape(-1) for p in params]).requires_grad_(True)
    loss = loss_of(flat)
    (grad,) = torch.autograd.grad(loss, flat)
    out: dict[str, Any] = {
        "loss": float(loss.detach()),
        "grad_norm": float(grad.norm()),
        "grad_max_abs": float(grad.abs().max()),
        "n_params": n_params,
        "unigram_entropy": chain.unigram_entropy(),
        "entropy_rate": chain.entropy_rate(),
        "predicted": predicted_curvatures(chain),
        "tied": model.tied,
    }
    if hessian:
        hess = torch.autograd.functional.hessian(loss_of, flat.detach(), vectorize=True)
        hess = 0.5 * (hess + hess.T)
        eig = torch.linalg.eigvalsh(hess)
        out["eigenvalues"] = eig
        out["min_eigenvalue"] = float(eig[0])
    return out
