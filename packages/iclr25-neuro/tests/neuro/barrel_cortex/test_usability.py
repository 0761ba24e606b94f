"""Everyday-use checks: global RNG, dtype changes, argument validation and edge inputs."""

import numpy as np
import pytest
import torch

from iclr25.neuro.barrel_cortex import (
    BarrelCortexRSNN,
    ConnectivitySpec,
    ConstrainedSpikingNetwork,
    evaluate,
    firing_statistics,
    make_whisker_dataset,
    selectivity_anova,
    to_spikes,
    train_barrel,
)


def _spikes(n: int = 4, t: int = 8, seed: int = 0) -> torch.Tensor:
    return (torch.rand(n, 2, t, 93, generator=torch.Generator().manual_seed(seed)) < 0.3).float()


def test_building_a_model_leaves_the_global_rng_alone():
    torch.manual_seed(42)
    want = torch.rand(5)
    torch.manual_seed(42)
    a = BarrelCortexRSNN(scale=0.05, seed=3)
    assert torch.equal(torch.rand(5), want)  # the caller's stream is not reseeded
    torch.manual_seed(7)
    b = BarrelCortexRSNN(scale=0.05, seed=3)
    for (k, p), q in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert torch.equal(p, q), k  # the init depends on `seed` only


def test_official_initial_state_survives_double():
    x = _spikes()
    m32 = BarrelCortexRSNN(scale=0.05, init_w=0.3, init_state="official", seed=1)
    m64 = BarrelCortexRSNN(scale=0.05, init_w=0.3, init_state="official", seed=1).double()
    v32 = m32.cortex.initial_state(2, torch.device("cpu"), torch.float32)
    v64 = m64.cortex.initial_state(2, torch.device("cpu"), torch.float64)
    assert all(a.dtype == torch.float64 and torch.equal(a.float(), b) for a, b in zip(v64, v32, strict=True))
    with torch.no_grad():
        s32, r32 = m32(x, record=True)
        s64, r64 = m64(x.double(), record=True)
    assert r32.sum() > 0 and torch.equal(r64.float(), r32)
    torch.testing.assert_close(s64.float(), s32)


def test_analyses_run_a_float64_model_on_float32_spikes():
    force, torque, labels = make_whisker_dataset(1, seed=0, frames=12)
    spikes, _ = to_spikes(force, torque, dt=1, generator=0)  # float32
    m32 = BarrelCortexRSNN(scale=0.05, init_w=0.3, seed=0)
    m64 = BarrelCortexRSNN(scale=0.05, init_w=0.3, seed=0).double()
    assert evaluate(m64, spikes, labels) == evaluate(m32, spikes, labels)
    assert selectivity_anova(m64, spikes, labels)["fraction"] == selectivity_anova(m32, spikes, labels)["fraction"]
    assert firing_statistics(m64, spikes)["rate_E"] == pytest.approx(firing_statistics(m32, spikes)["rate_E"])
    assert len(train_barrel(m64, spikes, labels, epochs=1, batch_size=3)["loss"]) == 1


def test_analyses_validate_batch_size_and_lengths():
    m = BarrelCortexRSNN(scale=0.05)
    x, y = _spikes(4), np.array([0, 1, 2, 0])
    with pytest.raises(ValueError, match="batch_size"):
        evaluate(m, x, y, batch_size=0)
    for xs, ys in ((x, y[:3]), (x[:3], y)):
        with pytest.raises(ValueError, match="same length"):
            evaluate(m, xs, ys)
        with pytest.raises(ValueError, match="same length"):
            selectivity_anova(m, xs, ys)
    before = {k: v.clone() for k, v in m.state_dict().items()}
    with pytest.raises(ValueError, match="step_size"):
        train_barrel(m, x, y, epochs=1, step_size=0)
    assert all(torch.equal(v, m.state_dict()[k]) for k, v in before.items())  # refused before training


def test_constrained_network_validates_its_input():
    spec = ConnectivitySpec([3, 2], ["E", "I"], np.ones((2, 2)), np.ones(2), n_input=4)
    net = ConstrainedSpikingNetwork(spec)
    assert net(torch.ones(5, 2, 4)).shape == (5, 2, 5)
    for bad in (torch.ones(5, 4), torch.ones(5, 2, 3)):
        with pytest.raises(ValueError, match=r"inputs must have shape \(T, B, 4\)"):
            net(bad)
    with pytest.raises(TypeError, match=r"inputs must be a float tensor.*int64"):
        net(torch.ones(5, 2, 4, dtype=torch.long))
    with pytest.raises(TypeError, match=r"spikes must be a float tensor.*dtype torch.bool"):
        BarrelCortexRSNN(scale=0.05)(torch.zeros(1, 2, 4, 93, dtype=torch.bool))


def test_numpy_scalars_are_accepted():
    force, torque, labels = make_whisker_dataset(np.int64(1), seed=0, sweeps=np.int64(1), frames=np.int64(6))
    assert force.shape == (3, 1, 6, 31, 3, 3)
    spikes, _ = to_spikes(force, torque, dt=np.int64(2), generator=0)
    assert spikes.shape == (3, 2, 1, 12, 93)
    m = BarrelCortexRSNN(n_whisker_inputs=np.int64(93), n_classes=np.int64(3), scale=np.float32(0.05))
    assert m.n_neurons == BarrelCortexRSNN(scale=0.05).n_neurons
    assert m(torch.from_numpy(spikes)).shape == (3, 3)
    assert evaluate(m, spikes, labels, batch_size=np.int64(2)) >= 0


def test_edge_datasets():
    force, torque, _ = make_whisker_dataset(0, frames=5)
    spikes, meta = to_spikes(force, torque, dt=2)
    assert spikes.shape == (0, 2, 1, 10, 93) and meta["rate_force"] == 0.0
    with pytest.raises(TypeError, match="classes"):
        make_whisker_dataset(1, frames=5, classes="box")


def test_spec_keeps_its_own_copy_of_the_tables():
    p, p_in = np.ones((2, 2)), np.ones(2)
    spec = ConnectivitySpec([3, 2], ["E", "I"], p, p_in, n_input=4)
    mask, mask_in = spec.masks()
    p[:] = 0.0
    p_in[:] = 0.0
    assert spec.p_recurrent.sum() == 4 and spec.p_input.sum() == 2
    assert all(torch.equal(a, b) for a, b in zip(spec.masks(), (mask, mask_in), strict=True))
