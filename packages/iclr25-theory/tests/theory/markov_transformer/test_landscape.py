"""Exact population loss, theta_pi, the bigram construction and the Hessian at theta_pi."""

import itertools

import pytest
import torch
import torch.nn.functional as F

from iclr25.theory.markov_transformer import (
    BinaryMarkovChain,
    MarkovTransformer,
    MarkovTransformerConfig,
    bigram_point,
    landscape_probe,
    population_loss,
    predicted_curvatures,
    unigram_point,
)


def _model(cfg, state=None):
    model = MarkovTransformer(cfg).double()
    if state is not None:
        model.load_state_dict(state)
    return model


def test_population_loss_matches_full_enumeration():
    # Brute force over all 2**(N+1) sequences with hard targets, against the soft-target formula.
    torch.manual_seed(0)
    chain = BinaryMarkovChain(0.3, 0.6)
    model = _model(MarkovTransformerConfig(d_model=3, max_len=6, init_std=0.7))
    seqs, probs = chain.enumerate(7)
    logits = model(seqs[:, :-1])
    per = F.binary_cross_entropy_with_logits(logits, seqs[:, 1:].double(), reduction="none").mean(1)
    brute = float((probs * per).sum().detach())
    assert abs(float(population_loss(model, chain, 6).detach()) - brute) < 1e-12


@pytest.mark.parametrize(("p", "q", "tied"), [(0.8, 0.8, True), (0.2, 0.2, True), (0.5, 0.8, False), (0.3, 0.4, False)])
def test_unigram_point_loss_and_zero_gradient(p, q, tied):
    chain = BinaryMarkovChain(p, q)
    cfg = MarkovTransformerConfig(d_model=2, max_len=5, weight_tying=tied)
    model = _model(cfg, unigram_point(cfg, chain))
    loss = population_loss(model, chain, 5)
    assert abs(float(loss.detach()) - chain.unigram_entropy()) < 1e-10
    grads = torch.autograd.grad(loss, list(model.parameters()))
    assert max(float(g.abs().max()) for g in grads) <= 1e-10


def test_uniform_start_breaks_stationarity():
    chain = BinaryMarkovChain(0.8, 0.3, init="uniform")
    cfg = MarkovTransformerConfig(d_model=2, max_len=5)
    model = _model(cfg, unigram_point(cfg, chain))
    probe = landscape_probe(model, chain, 5, hessian=False)
    assert probe["grad_max_abs"] > 1e-3


def _has(eig, value, tol):
    return bool((eig - value).abs().min() <= tol)


def test_hessian_tied_high_switching_is_local_min():
    chain = BinaryMarkovChain(0.8, 0.8)
    cfg = MarkovTransformerConfig(d_model=2, max_len=5)
    probe = landscape_probe(_model(cfg, unigram_point(cfg, chain)), chain, 5)
    eig = probe["eigenvalues"]
    assert probe["min_eigenvalue"] >= -1e-8
    assert _has(eig, 0.25, 1e-6) and _has(eig, 0.30, 1e-6)
    assert int(((eig - 0.30).abs() < 1e-6).sum()) == 2  # multiplicity d
    assert abs(probe["predicted"]["tied_e"] - 0.30) < 1e-12 and abs(probe["predicted"]["bias"] - 0.25) < 1e-12
    assert probe["grad_max_abs"] <= 1e-10


def test_hessian_tied_low_switching_is_saddle():
    chain = BinaryMarkovChain(0.2, 0.2)
    cfg = MarkovTransformerConfig(d_model=2, max_len=5)
    probe = landscape_probe(_model(cfg, unigram_point(cfg, chain)), chain, 5)
    assert abs(probe["min_eigenvalue"] - (-0.30)) <= 1e-6
    assert abs(probe["min_eigenvalue"] - predicted_curvatures(chain)["tied_e"]) <= 1e-6


def test_hessian_untied_is_saddle_with_plus_minus_c():
    chain = BinaryMarkovChain(0.5, 0.8)
    cfg = MarkovTransformerConfig(d_model=2, max_len=5, weight_tying=False)
    eig = landscape_probe(_model(cfg, unigram_point(cfg, chain)), chain, 5)["eigenvalues"]
    c = predicted_curvatures(chain)["untied_c"]
    assert abs(c - 0.07101) < 1e-5
    assert _has(eig, 0.07101, 1e-5) and _has(eig, -0.07101, 1e-5)
    assert _has(eig, predicted_curvatures(chain)["bias"], 1e-8)


@pytest.mark.parametrize(
    ("tied", "pq"), list(itertools.product([True, False], [(0.8, 0.8), (0.5, 0.8), (0.2, 0.2), (0.1, 0.3)]))
)
def test_bigram_point_reaches_entropy_rate(tied, pq):
    chain = BinaryMarkovChain(*pq)
    cfg = MarkovTransformerConfig(d_model=3, max_len=6, weight_tying=tied)
    model = _model(cfg, bigram_point(cfg, chain))
    assert abs(float(population_loss(model, chain, 6).detach()) - chain.entropy_rate()) < 1e-8
    if tied:
        assert model.head_vector is model.embedding_vector


@pytest.mark.parametrize(
    "kw",
    [
        {"layer_norm": True},
        {"vocab": "two_token", "activation": "gelu", "layer_norm": True, "n_layers": 2},
        {"vocab": "two_token", "activation": "gelu"},
        {"n_layers": 2, "weight_tying": False},
    ],
)
def test_bigram_point_other_architectures(kw):
    chain = BinaryMarkovChain(0.9, 0.6)
    cfg = MarkovTransformerConfig(d_model=3, max_len=6, **kw)
    model = _model(cfg, bigram_point(cfg, chain))
    assert abs(float(population_loss(model, chain, 6).detach()) - chain.entropy_rate()) < 1e-8


def test_probe_rejects_nan_and_bad_input():
    chain = BinaryMarkovChain(0.8, 0.8)
    cfg = MarkovTransformerConfig(d_model=2, max_len=5)
    model = _model(cfg, unigram_point(cfg, chain))
    with torch.no_grad():
        model.pos[0, 0] = float("nan")
    with pytest.raises(FloatingPointError, match="pos"):
        landscape_probe(model, chain, 5)
    with pytest.raises(ValueError, match="max_len"):
        population_loss(_model(cfg), chain, 6)
    with pytest.raises(ValueError, match="length must be >= 2"):
        population_loss(_model(cfg), chain, 1)
    big = MarkovTransformer(MarkovTransformerConfig(d_model=2, max_len=32))
    with pytest.raises(ValueError, match="allow_large"):
        population_loss(big, chain, 21)
    with pytest.raises(ValueError, match="max_params"):
        landscape_probe(big, chain, 4, max_params=10)


def test_probe_hessian_of_a_half_precision_model_says_what_to_do():
    chain = BinaryMarkovChain(0.8, 0.8)
    cfg = MarkovTransformerConfig(d_model=2, max_len=5)
    model = _model(cfg, unigram_point(cfg, chain)).to(torch.bfloat16)
    with pytest.raises(ValueError, match=r"float32 or float64.*model\.double\(\).*bfloat16"):
        landscape_probe(model, chain, 5)
