"""The selectivity analysis and the reproduction's protocol against RSNN_bfd's ``ANOVA()``.

The official procedure: run every sweep of a class (training and test pooled) through the
network, sum the spikes of each cortical neuron over the class's trials (one count per time
step), one-way ANOVA per neuron across the 3 classes, selective when p < 0.001, counted over all
cortical neurons (neurons whose three count vectors are identical, e.g. silent ones, keep p = 1).
"""

import math
import warnings

import numpy as np
import pytest
import torch
from scipy.stats import f_oneway

from iclr25.neuro.barrel_cortex import BarrelCortexRSNN, make_whisker_dataset, selectivity_anova, to_spikes


def _official_p_values(rec: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Per-neuron loop written from RSNN_bfd's ``ANOVA()`` description (scipy ``f_oneway``)."""
    # counts are integers, so float64 is exact; scipy would keep float32 input in float32
    by_class = [rec[labels == c].astype(np.float64).sum(0).T for c in range(3)]  # each (n, T)
    p_values = np.ones(rec.shape[2])
    for i in range(rec.shape[2]):
        a, b, c = (g[i] for g in by_class)
        if np.all(a == b) and np.all(a == c):
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # constant-input warnings: handled below as in RSNN_bfd
            f, p = f_oneway(a, b, c)
        if math.isnan(p) or math.isnan(f):
            continue
        p_values[i] = p
    return p_values


def test_selectivity_equals_the_official_per_neuron_anova():
    torch.manual_seed(0)
    f, t, y = make_whisker_dataset(3, seed=5, frames=16)
    x, _ = to_spikes(f, t, dt=1, generator=0)
    model = BarrelCortexRSNN(scale=0.05, init_w=0.3, seed=1)
    sel = selectivity_anova(model, x[:, :, 0], y)
    with torch.no_grad():
        rec = model(torch.from_numpy(x[:, :, 0]), record=True)[1].numpy()
    p_ref = _official_p_values(rec, y)
    # same F statistic and F distribution: agreement to float64 round-off
    np.testing.assert_allclose(sel["p_values"].numpy(), p_ref, rtol=1e-9, atol=1e-12)
    assert sel["fraction"] == pytest.approx(float((p_ref < 1e-3).mean()))
    silent = rec.sum((0, 1)) == 0
    assert torch.equal(sel["active"], torch.from_numpy(~silent))
    # silent neurons stay in the denominator with p = 1 (RSNN_bfd reports selective cells out of all)
    assert silent.any() and np.all(sel["p_values"].numpy()[silent] == 1.0)
    assert sel["p_values"].shape == (model.n_neurons,)


def test_counts_are_summed_over_trials_not_averaged_or_concatenated():
    """A neuron that fires one spike more per trial in class 0 at every step of half the trials:
    summing over trials keeps one observation per time step (T per class, df = (2, 3T - 3))."""
    from iclr25.neuro.spiking import anova_selectivity

    rng = np.random.default_rng(0)
    counts = [torch.from_numpy(rng.poisson(4.0, (20, 2)).astype(np.float64)) for _ in range(3)]
    res = anova_selectivity(counts)
    ref = [f_oneway(*(c[:, j].numpy() for c in counts)).pvalue for j in range(2)]
    np.testing.assert_allclose(res.pvalues.numpy(), ref, rtol=1e-9)


def test_reproduction_tests_selectivity_on_train_and_test_sweeps(monkeypatch):
    """RSNN_bfd's ANOVA() pools each class's training and test data; the reproduction must hand
    both splits to the analysis, for the trained and the untrained network alike."""
    from iclr25.neuro.barrel_cortex import experiment as exp

    f_tr, t_tr, y_tr = make_whisker_dataset(2, seed=0, frames=10)
    f_te, t_te, y_te = make_whisker_dataset(1, seed=1, frames=10)
    x_tr, meta = to_spikes(f_tr, t_tr, dt=1, generator=0)
    x_te, _ = to_spikes(f_te, t_te, dt=1, c_f=meta["c_f"], c_t=meta["c_t"], generator=1)
    data = {"x_tr": x_tr[:, :, 0], "y_tr": y_tr, "x_te": x_te[:, :, 0], "y_te": y_te, "meta": meta}
    seen = []
    real = exp.selectivity_anova

    def spy(model, spikes, labels, **kw):
        seen.append((np.asarray(spikes).copy(), np.asarray(labels).copy()))
        return real(model, spikes, labels, **kw)

    monkeypatch.setattr(exp, "selectivity_anova", spy)
    cfg = {"scale": 0.05, "epochs": 0}
    out = exp._rsnn_seed(cfg, data, seed=0, deprivation=False)
    assert len(seen) == 2  # untrained, then trained
    want_x = np.concatenate([data["x_tr"], data["x_te"]])
    want_y = np.concatenate([y_tr, y_te])
    for spikes, labels in seen:
        np.testing.assert_array_equal(spikes, want_x)
        np.testing.assert_array_equal(labels, want_y)
    assert out["selectivity_trials"] == len(y_tr) + len(y_te)
    assert 0 <= out["active"] <= 1 and 0 <= out["selective_of_active"] <= 1


def test_reproduction_reports_selective_neurons_per_preferred_class(monkeypatch):
    """Diagnostic (not gated): selective neurons counted by preferred class, so a network-wide gain
    difference (every selective neuron prefers the same class) is told apart from per-neuron tuning."""
    from iclr25.neuro.barrel_cortex import experiment as exp

    f_tr, t_tr, y_tr = make_whisker_dataset(2, seed=0, frames=10)
    f_te, t_te, y_te = make_whisker_dataset(1, seed=1, frames=10)
    x_tr, meta = to_spikes(f_tr, t_tr, dt=1, generator=0)
    x_te, _ = to_spikes(f_te, t_te, dt=1, c_f=meta["c_f"], c_t=meta["c_t"], generator=1)
    data = {"x_tr": x_tr[:, :, 0], "y_tr": y_tr, "x_te": x_te[:, :, 0], "y_te": y_te, "meta": meta}
    calls = []
    real = exp.selectivity_anova

    def fake(model, spikes, labels, **kw):
        # first call = untrained network, second = trained; plant known selective/preferred neurons
        res = real(model, spikes, labels, **kw)
        n = len(res["selective"])
        pref = torch.arange(n) % 3 if not calls else torch.ones(n, dtype=torch.long)
        selective = torch.arange(n) < (12 if not calls else 7)
        calls.append(1)
        return {**res, "selective": selective, "preferred": pref, "fraction": float(selective.double().mean())}

    monkeypatch.setattr(exp, "selectivity_anova", fake)
    out = exp._rsnn_seed({"scale": 0.05, "epochs": 0}, data, seed=0, deprivation=False)
    assert out["selective_by_class_untrained"] == [4, 4, 4]
    assert out["selective_by_class"] == [0, 7, 0]


def test_preferred_class_is_a_label_for_any_label_set():
    """On a subset of classes (labels {1, 2}) the preferred class is the label, not the column of
    ``ternary``; shifting every label shifts ``preferred`` and leaves the proportions alone."""
    f, t, y = make_whisker_dataset(3, seed=5, frames=16)
    x, _ = to_spikes(f, t, dt=1, generator=0)
    x, y = x[y > 0, :, 0], y[y > 0]
    model = BarrelCortexRSNN(scale=0.05, init_w=0.3, seed=1)
    sel = selectivity_anova(model, x, y)
    with torch.no_grad():
        rec = model(torch.from_numpy(x), record=True)[1].numpy()
    # integer counts: exact in float64, so only the final division rounds
    totals = np.stack([rec[y == c].astype(np.float64).sum((0, 1)) for c in (1, 2)], 1) + 182.0
    want = np.array([1, 2])[totals.argmax(1)]
    assert (want == 2).any() and (want == 1).any()
    np.testing.assert_array_equal(sel["preferred"].numpy(), want)
    np.testing.assert_allclose(sel["ternary"].numpy(), totals / totals.sum(1, keepdims=True), rtol=1e-12)
    shifted = selectivity_anova(model, x, y + 5)
    assert torch.equal(shifted["preferred"], sel["preferred"] + 5)
    assert torch.equal(shifted["ternary"], sel["ternary"])
