"""decompose: exact zeros, brute-force mutual information / variance, Jensen's inequality."""

import math

import pytest
import torch

from iclr25.theory.ho_calibration import Mixture, decompose


def _random_mixtures(n, m, c, gen, concentration=1.0):
    w = torch._sample_dirichlet(torch.full((n, m), concentration, dtype=torch.float64), generator=gen)
    p = torch._sample_dirichlet(torch.full((n, m, c), concentration, dtype=torch.float64), generator=gen)
    return Mixture(w, p)


@pytest.mark.parametrize("entropy", ["shannon", "gini", lambda p: 1 - p.max(-1).values])
def test_point_mass_has_no_epistemic_uncertainty(entropy):
    gen = torch.Generator().manual_seed(0)
    p = torch._sample_dirichlet(torch.ones(50, 4, dtype=torch.float64), generator=gen)
    out = decompose(Mixture.point_mass(p), entropy)
    assert torch.equal(out["epistemic"], torch.zeros(50, dtype=torch.float64))
    assert torch.equal(out["total"], out["aleatoric"])


def test_shannon_epistemic_is_brute_force_mutual_information():
    gen = torch.Generator().manual_seed(1)
    probs = torch._sample_dirichlet(torch.ones(20, 5, 3, dtype=torch.float64), generator=gen)  # 20 ensembles of 5
    eu = decompose(Mixture.from_ensemble(probs), "shannon")["epistemic"]
    for i in range(20):
        members = probs[i].tolist()
        mean = [sum(mb[y] for mb in members) / 5 for y in range(3)]
        # I(Y; J) with J uniform over members: sum_j sum_y (1/M) p_jy log(p_jy / p_bar_y)
        mi = sum(mb[y] * math.log(mb[y] / mean[y]) for mb in members for y in range(3)) / 5
        assert eu[i].item() == pytest.approx(mi, abs=1e-12)


def test_gini_epistemic_is_sum_of_variances():
    gen = torch.Generator().manual_seed(2)
    probs = torch._sample_dirichlet(torch.ones(20, 7, 4, dtype=torch.float64), generator=gen)
    eu = decompose(Mixture.from_ensemble(probs), "gini")["epistemic"]
    for i in range(20):
        members = probs[i].tolist()
        var = 0.0
        for y in range(4):
            vals = [mb[y] for mb in members]
            mu = sum(vals) / len(vals)
            var += sum((v - mu) ** 2 for v in vals) / len(vals)  # population variance under the uniform mixture
        assert eu[i].item() == pytest.approx(var, abs=1e-12)


@pytest.mark.parametrize("entropy", ["shannon", "gini", lambda p: 1 - p.max(-1).values])
@pytest.mark.parametrize("concentration", [0.1, 1.0, 10.0])
def test_epistemic_is_nonnegative_on_random_mixtures(entropy, concentration):
    gen = torch.Generator().manual_seed(3)
    out = decompose(_random_mixtures(1000, 6, 5, gen, concentration), entropy)
    # Jensen gap of a concave G; only float64 rounding (~1e-15) may go below zero
    assert out["epistemic"].min().item() >= -1e-12
    assert torch.allclose(out["total"], out["aleatoric"] + out["epistemic"], atol=1e-15, rtol=0)


def test_decompose_rejects_unknown_entropy():
    mix = Mixture.point_mass(torch.tensor([[0.5, 0.5]]))
    with pytest.raises(ValueError, match="entropy"):
        decompose(mix, "renyi")
    with pytest.raises(TypeError, match="Mixture"):
        decompose(torch.ones(2), "gini")


def test_mixture_rejects_off_simplex_and_nan():
    p = torch.tensor([[[0.5, 0.5], [0.2, 0.8]]])
    with pytest.raises(ValueError, match="weights must sum to 1"):
        Mixture(torch.tensor([[0.5, 0.6]]), p)
    with pytest.raises(ValueError, match="weights must be finite"):
        Mixture(torch.tensor([[float("nan"), 1.0]]), p)
    with pytest.raises(ValueError, match="components must be non-negative"):
        Mixture(torch.tensor([[0.5, 0.5]]), torch.tensor([[[1.5, -0.5], [0.2, 0.8]]]))
    with pytest.raises(ValueError, match="weights must have shape"):
        Mixture(torch.tensor([[1.0]]), p)


def test_mixture_sample_and_index():
    gen = torch.Generator().manual_seed(4)
    mix = _random_mixtures(3, 2, 4, gen)
    draws = mix.sample(5, generator=gen)
    assert draws.shape == (5, 3, 4)
    # every draw is one of the components of its mixture
    for i in range(3):
        for d in draws[:, i]:
            assert torch.isclose(mix.components[i], d).all(-1).any()
    assert mix[1:].batch_shape == (2,)
