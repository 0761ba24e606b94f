"""Acceptance items 4 and 5 (simulator physics, spike conversion) and the analyses."""

import math

import numpy as np
import pytest
import torch

from iclr25.neuro.barrel_cortex import (
    OBJECTS,
    BarrelCortexRSNN,
    WhiskerSweepSimulator,
    deprive_whiskers,
    firing_statistics,
    make_whisker_dataset,
    selectivity_anova,
    to_spikes,
    whisker_deprivation_curve,
)

POSE = {"yaw": 0.3, "pitch": 0.1, "roll": -0.1, "scale": 1.0, "y0": 22.0, "z0": 0.0, "x_start": 55.0, "x_end": -70.0}


def test_shapes_and_determinism():
    sim = WhiskerSweepSimulator()
    f, t = sim.sweep("box", np.random.default_rng(0))
    assert f.shape == t.shape == (110, 31, 3, 3) and f.dtype == np.float32
    f2, t2 = WhiskerSweepSimulator().sweep("box", np.random.default_rng(0))
    assert np.array_equal(f, f2) and np.array_equal(t, t2)
    a = make_whisker_dataset(2, seed=5)
    b = make_whisker_dataset(2, seed=5)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert a[0].shape == (6, 1, 110, 31, 3, 3) and a[2].tolist() == [0, 1, 2, 0, 1, 2]


def test_no_contact_gives_zero_and_far_object_no_contacts():
    sim = WhiskerSweepSimulator()
    f, t, info = sim.sweep("box", pose=POSE, return_contacts=True)
    assert info["contact"].any()
    idle = ~info["contact"]
    raw = WhiskerSweepSimulator(resonate=False).sweep("box", pose=POSE)
    assert np.all(raw[0][idle] == 0) and np.all(raw[1][idle] == 0)
    far = dict(POSE, y0=POSE["y0"] + 40.0)
    f, t, info = sim.sweep("box", pose=far, return_contacts=True)
    assert not info["contact"].any() and not f.any() and not t.any()


def test_deeper_penetration_larger_force():
    sim = WhiskerSweepSimulator(resonate=False)
    norms = []
    for y0 in (26.0, 23.0, 20.0):  # object closer ⇒ deeper penetration
        f, _ = sim.sweep("box", pose=dict(POSE, y0=y0, yaw=0.0, pitch=0.0, roll=0.0))
        norms.append(np.linalg.norm(f[:, :, 0], axis=-1).max(0).sum())
    assert norms[0] < norms[1] < norms[2]


def test_torque_is_r_cross_f():
    sim = WhiskerSweepSimulator(resonate=False)
    f, t, info = sim.sweep("plane", pose=POSE, return_contacts=True)
    fr, w = np.nonzero(info["contact"])
    assert fr.size
    for node in range(3):
        r = info["point"][fr, w] - sim.nodes[w, node]
        fc = info["force"][fr, w]
        expected = np.stack(
            [
                r[:, 1] * fc[:, 2] - r[:, 2] * fc[:, 1],
                r[:, 2] * fc[:, 0] - r[:, 0] * fc[:, 2],
                r[:, 0] * fc[:, 1] - r[:, 1] * fc[:, 0],
            ],
            -1,
        )
        got = t[fr, w, node]
        # node j carries the load only when the contact lies beyond it along the whisker
        mask = np.einsum("ci,ci->c", r, sim.direction[w]) > 0
        assert np.all(got[~mask] == 0)
        np.testing.assert_allclose(got[mask], expected[mask].astype(np.float32), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(f[fr, w, node][mask], -fc[mask].astype(np.float32), rtol=1e-5, atol=1e-6)
    # node 0 (the base) is behind every contact: it always carries the full torque
    assert (np.linalg.norm(t[fr, w, 0], axis=-1) > 0).mean() > 0.9


def test_unknown_object():
    with pytest.raises(KeyError, match="helmet"):
        WhiskerSweepSimulator().sweep("cup")
    assert list(OBJECTS) == ["helmet", "box", "plane"]


def test_to_spikes_official_formula_and_rates():
    f, t, _ = make_whisker_dataset(1, seed=1)
    spikes, meta = to_spikes(f, t, dt=3, c_f=2, c_t=4, generator=0)
    assert spikes.shape == (3, 2, 1, 330, 93) and spikes.dtype == np.float32
    assert meta["c_f"] == 2 and meta["c_t"] == 4
    m = np.linalg.norm(f.astype(np.float64), axis=-1)
    m[m == 0] = 1e-5
    p_official = 1 / (1 + np.exp(-(np.log(m) - 2)))
    # empirical rates over dt = 1000 repeats within 3 s.d. of the official probabilities
    x = np.full((1, 1, 2, 31, 3, 3), 0.0, np.float32)
    x[0, 0, 0, :, :, 0] = np.exp(np.linspace(-3, 5, 93)).reshape(31, 3)
    s, _ = to_spikes(x, x, dt=1000, c_f=2, c_t=4, generator=1)
    rate = s[0, 0, 0, :1000].mean(0)
    p = 1 / (1 + np.exp(-(np.linspace(-3, 5, 93) - 2)))
    assert np.all(np.abs(rate - p) <= 3 * np.sqrt(p * (1 - p) / 1000) + 1e-9)
    zero_rate = s[0, 0, 0, 1000:].mean()
    assert zero_rate <= 1e-4 * math.exp(-2) * 10 + 1e-3  # zero input: p = sigmoid(log 1e-5 - 2) ≈ 1.4e-6
    assert p_official.shape == (3, 1, 110, 31, 3)


def test_deprivation_copies_and_zeroes():
    f, t, _ = make_whisker_dataset(1, seed=2)
    keep = f.copy()
    fd, td = deprive_whiskers(f, t, [0, 5, 30])
    assert np.array_equal(f, keep)
    assert not fd[..., [0, 5, 30], :, :].any() and not td[..., [0, 5, 30], :, :].any()
    s, _ = to_spikes(fd, td, dt=1, c_f=-3, c_t=-1, generator=0)
    chans = [3 * w + n for w in (0, 5, 30) for n in range(3)]
    assert s[..., chans].mean() < 1e-3
    for bad in ([31], [1, 1], [-1]):
        with pytest.raises(ValueError, match="whisker_idx"):
            deprive_whiskers(f, t, bad)


def test_analyses_run_on_a_tiny_model():
    torch.manual_seed(0)
    f, t, y = make_whisker_dataset(2, seed=3, frames=12)
    x, meta = to_spikes(f, t, dt=1, generator=0)
    model = BarrelCortexRSNN(scale=0.05, init_w=0.3)
    sel = selectivity_anova(model, x[:, :, 0], y)
    assert sel["p_values"].shape == (model.n_neurons,) and 0 <= sel["fraction"] <= 1
    torch.testing.assert_close(sel["ternary"].sum(1), torch.ones(model.n_neurons, dtype=torch.float64))
    st = firing_statistics(model, x[:, :, 0])
    assert len(st["rates"]) == 13 and st["in_degree"].shape == (model.n_neurons,)
    curve = whisker_deprivation_curve(model, f, t, y, ks=(0, 1, 2), draws=2, c_f=meta["c_f"], c_t=meta["c_t"])
    assert curve["ks"] == [0, 1, 2] and len(curve["per_draw"][1]) == 2 and len(curve["per_draw"][0]) == 1
    with pytest.raises(ValueError, match="ks"):
        whisker_deprivation_curve(model, f, t, y, ks=(40,))
