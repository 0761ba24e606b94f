"""BinaryMarkovChain: closed forms vs brute-force enumeration, sampler statistics, bad input."""

import math

import pytest
import torch

from iclr25.theory.markov_transformer import BinaryMarkovChain, binary_entropy, markov_sample

PAIRS = [(0.8, 0.8), (0.5, 0.8), (0.2, 0.2), (0.1, 0.7), (0.95, 0.3)]


def _block_entropy(probs: torch.Tensor) -> float:
    return float(-(probs * probs.log()).sum())


@pytest.mark.parametrize(("p", "q"), PAIRS)
def test_entropies_match_enumeration(p, q):
    chain = BinaryMarkovChain(p, q)
    seqs, probs = chain.enumerate(8)
    assert seqs.shape == (256, 8) and abs(float(probs.sum()) - 1.0) < 1e-12
    # Marginal of the first symbol and of the last (stationarity) both give H(pi).
    for col in (0, 7):
        p1 = float(probs[seqs[:, col] == 1].sum())
        assert abs(binary_entropy(p1) - chain.unigram_entropy()) < 1e-10
    # For a stationary Markov chain H(X_1..X_8) = H(pi) + 7 * rate.
    rate = (_block_entropy(probs) - chain.unigram_entropy()) / 7
    assert abs(rate - chain.entropy_rate()) < 1e-10


def test_reference_values_in_nats():
    assert abs(BinaryMarkovChain(0.8, 0.8).entropy_rate() - 0.5004024235) < 1e-9
    assert abs(BinaryMarkovChain(0.5, 0.8).unigram_entropy() - 0.6662784424) < 1e-9
    iid = BinaryMarkovChain(0.25, 0.75)  # p + q = 1: i.i.d. symbols, bigram = unigram
    assert abs(iid.entropy_rate() - iid.unigram_entropy()) < 1e-12


def test_uniform_start_probabilities():
    seqs, probs = BinaryMarkovChain(0.2, 0.6, init="uniform").enumerate(3)
    # P(0, 1, 1) = 1/2 * p * (1 - q)
    idx = int((seqs == torch.tensor([0, 1, 1])).all(dim=1).nonzero())
    assert abs(float(probs[idx]) - 0.5 * 0.2 * 0.4) < 1e-15


def test_sampled_transitions_within_three_sigma():
    p, q = 0.3, 0.6
    chain = BinaryMarkovChain(p, q)
    x = chain.sample(64, 512, generator=torch.Generator().manual_seed(0))
    assert x.shape == (64, 512) and x.dtype == torch.long
    prev, nxt = x[:, :-1], x[:, 1:]
    n0, n1 = int((prev == 0).sum()), int((prev == 1).sum())
    p_hat = float(((prev == 0) & (nxt == 1)).sum()) / n0
    q_hat = float(((prev == 1) & (nxt == 0)).sum()) / n1
    assert abs(p_hat - p) <= 3 * math.sqrt(p * (1 - p) / n0)
    assert abs(q_hat - q) <= 3 * math.sqrt(q * (1 - q) / n1)
    pi1 = p / (p + q)
    first = float(x[:, 0].float().mean())
    assert abs(first - pi1) <= 3 * math.sqrt(pi1 * (1 - pi1) / 64)


@pytest.mark.parametrize(("p", "q", "init_one"), [(0.8, 0.8, 0.5), (0.2, 0.3, 0.1), (0.01, 0.99, 0.0), (0.5, 0.5, 1.0)])
def test_scan_sampler_equals_loop_reference(p, q, init_one):
    u = torch.rand(50, 97, generator=torch.Generator().manual_seed(3))
    before = u.clone()
    ref = markov_sample(u, p, q, init_one, backend="reference")
    assert torch.equal(markov_sample(u, p, q, init_one, backend="scan"), ref)
    assert torch.equal(u, before), "the uniforms were modified"


def test_sample_is_reproducible():
    chain = BinaryMarkovChain(0.4, 0.7)
    a = chain.sample(4, 16, generator=torch.Generator().manual_seed(5))
    b = chain.sample(4, 16, generator=torch.Generator().manual_seed(5))
    assert torch.equal(a, b)


@pytest.mark.parametrize(("p", "q"), [(0.0, 0.5), (1.0, 0.5), (0.5, -0.1), (0.5, float("nan")), (1.5, 0.2)])
def test_bad_probabilities(p, q):
    with pytest.raises(ValueError, match="open interval"):
        BinaryMarkovChain(p, q)


def test_bad_lengths_and_enumerate_limit():
    chain = BinaryMarkovChain(0.5, 0.5)
    with pytest.raises(ValueError, match="length must be >= 2"):
        chain.sample(3, 1)
    with pytest.raises(ValueError, match="length must be >= 2"):
        chain.enumerate(1)
    with pytest.raises(ValueError, match="allow_large"):
        chain.enumerate(21)
    with pytest.raises(ValueError, match="init"):
        BinaryMarkovChain(0.5, 0.5, init="steady")
    with pytest.raises(TypeError, match="float32"):
        markov_sample(torch.rand(2, 3, dtype=torch.float64), 0.5, 0.5, 0.5)


def test_bad_argument_types_name_the_argument():
    chain = BinaryMarkovChain(0.5, 0.5)
    with pytest.raises(TypeError, match=r"generator must be a torch\.Generator"):
        chain.sample(2, 4, generator=0)
    with pytest.raises(TypeError, match="init_one must be a float"):
        markov_sample(torch.rand(2, 4), 0.5, 0.5, "a")
    with pytest.raises(TypeError, match="init_one must be a float"):
        markov_sample(torch.rand(2, 4), 0.5, 0.5, None)
    with pytest.raises(TypeError, match="x must be a float"):
        binary_entropy("a")
