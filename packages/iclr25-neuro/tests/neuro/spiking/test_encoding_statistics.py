"""Acceptance 5 (Bernoulli encoder) and 6 (ANOVA vs scipy), plus firing statistics."""

import math

import numpy as np
import pytest
import torch
from scipy import stats

from iclr25.neuro.spiking import anova_selectivity, bernoulli_encode, cv_binary, firing_rate, isi_cv, rate_encode


def test_bernoulli_rate_within_three_sd():
    p = torch.tensor([[0.0, 0.02, 0.1, 0.25, 0.5, 0.8, 0.97, 1.0]])
    s = bernoulli_encode(p, repeat=2000, generator=torch.Generator().manual_seed(0))
    assert s.shape == (2000, 8)
    assert set(s.unique().tolist()) <= {0.0, 1.0}
    rate = firing_rate(s)
    sd = torch.sqrt(p[0] * (1 - p[0]) / 2000)
    assert torch.all((rate - p[0]).abs() <= 3 * sd + 1e-12), (rate, p)


def test_bernoulli_repeats_along_time_dim_and_is_reproducible():
    p = torch.rand(4, 3, 5, generator=torch.Generator().manual_seed(1))
    a = bernoulli_encode(p, repeat=3, time_dim=1, generator=torch.Generator().manual_seed(7))
    b = rate_encode(p, repeat=3, time_dim=1, generator=torch.Generator().manual_seed(7))
    assert a.shape == (4, 9, 5) and torch.equal(a, b)
    ones = bernoulli_encode(torch.ones(2, 3), repeat=4)
    assert torch.equal(ones, torch.ones(8, 3))


def test_bernoulli_bad_input():
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        bernoulli_encode(torch.tensor([[1.2]]))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        bernoulli_encode(torch.tensor([[-0.1]]))
    with pytest.raises(TypeError, match="floating-point"):
        bernoulli_encode(torch.tensor([[1]]))
    with pytest.raises(ValueError, match="finite"):
        bernoulli_encode(torch.tensor([[float("nan")]]))
    with pytest.raises(ValueError, match="repeat"):
        bernoulli_encode(torch.tensor([[0.5]]), repeat=0)


def test_anova_equals_scipy_f_oneway():
    rng = np.random.default_rng(0)
    neurons = 40
    groups = [rng.poisson(lam, size=(n, neurons)).astype(np.float64) for lam, n in [(3.0, 30), (3.5, 25), (5.0, 28)]]
    res = anova_selectivity([torch.from_numpy(g) for g in groups], alpha=1e-3)
    for j in range(neurons):
        f, p = stats.f_oneway(*(g[:, j] for g in groups))
        assert res.pvalues[j].item() == pytest.approx(p, rel=1e-9, abs=1e-300)
        assert res.fstat[j].item() == pytest.approx(f, rel=1e-9)
    assert torch.equal(res.selective, res.pvalues < 1e-3)
    assert 0 < int(res.selective.sum()) < neurons


def test_anova_constant_neuron_gets_p_one():
    a = torch.zeros(10, 3)
    b = torch.zeros(12, 3)
    a[:, 1] = torch.arange(10.0)
    b[:, 1] = torch.arange(12.0) + 5
    res = anova_selectivity([a, b])
    assert res.pvalues[0] == 1.0 and res.pvalues[2] == 1.0 and res.pvalues[1] < 1
    assert not bool(torch.isnan(res.pvalues).any())


def test_firing_rate_and_cv_binary():
    s = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 1.0], [0.0, 0.0, 1.0]])
    assert torch.equal(firing_rate(s), torch.tensor([0.5, 0.0, 0.75]))
    per = cv_binary(s, reduce=False)
    # neuron 0: std 0.5 / mean 0.5 = 1; silent neuron 1: 0; neuron 2: sqrt(3)/4 / 0.75
    np.testing.assert_allclose(per.numpy(), [1.0, 0.0, math.sqrt(3) / 4 / 0.75], rtol=1e-12)
    assert cv_binary(s).item() == pytest.approx(per.mean().item())


def test_isi_cv_closed_forms_and_exclusion():
    T = 100
    s = torch.zeros(T, 4)
    s[::10, 0] = 1  # regular: CV 0
    s[[0, 1, 4, 13], 1] = 1  # ISIs 1, 3, 9: std/mean = sqrt(((1-13/3)²+(3-13/3)²+(9-13/3)²)/3)/(13/3)
    s[[5, 50], 2] = 1  # 2 spikes: excluded
    res = isi_cv(s)
    isi = np.array([1.0, 3.0, 9.0])
    assert res.n_excluded == 2 and res.included.tolist() == [True, True, False, False]
    np.testing.assert_allclose(res.values.numpy(), [0.0, isi.std() / isi.mean()], rtol=1e-12)
    assert res.mean == pytest.approx(isi.std() / isi.mean() / 2)
    assert isi_cv(torch.zeros(10, 3)).mean is None


def test_anova_bad_input_and_stacked_tensor():
    a, b = torch.rand(5, 3), torch.rand(6, 3)
    with pytest.raises(TypeError, match="at least 2"):
        anova_selectivity([a])
    with pytest.raises(TypeError, match="at least 2"):
        anova_selectivity([a, b.numpy()])
    with pytest.raises(ValueError, match="neurons"):
        anova_selectivity([a, torch.rand(6, 4)])
    with pytest.raises(ValueError, match="alpha"):
        anova_selectivity([a, b], alpha=0.0)
    with pytest.raises(ValueError, match="observation"):
        anova_selectivity([torch.rand(1, 3), torch.rand(1, 3)])  # n_total - k = 0 degrees of freedom
    # a (classes, n, neurons) tensor is the list of its classes
    stacked = torch.rand(3, 7, 4, generator=torch.Generator().manual_seed(0))
    assert torch.equal(anova_selectivity(stacked).pvalues, anova_selectivity(list(stacked)).pvalues)
    with pytest.raises(ValueError, match="min_spikes"):
        isi_cv(torch.zeros(5, 2), min_spikes=1)
