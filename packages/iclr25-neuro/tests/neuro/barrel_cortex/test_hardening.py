"""Edge inputs a user hits: dtypes, NumPy scalars and views, empty sets, bad analysis arguments."""

import math

import numpy as np
import pytest
import torch

from iclr25.neuro.barrel_cortex import (
    BarrelCortexRSNN,
    deprive_whiskers,
    evaluate,
    firing_statistics,
    make_whisker_dataset,
    selectivity_anova,
    to_spikes,
    train_barrel,
    whisker_deprivation_curve,
)


def _spikes(n: int = 3, t: int = 8, seed: int = 0) -> torch.Tensor:
    return (torch.rand(n, 2, t, 93, generator=torch.Generator().manual_seed(seed)) < 0.3).float()


def test_model_casts_spikes_to_its_own_dtype():
    """`to_spikes` gives float32: a .double() model takes it (as the analyses do) with the same result."""
    x = _spikes()
    m64 = BarrelCortexRSNN(scale=0.05, init_w=0.3, seed=1).double()
    with torch.no_grad():
        s32, r32 = m64(x, record=True)
        s64, r64 = m64(x.double(), record=True)
    assert s32.dtype == r32.dtype == torch.float64 and r64.sum() > 0
    assert torch.equal(s32, s64) and torch.equal(r32, r64)
    m32 = BarrelCortexRSNN(scale=0.05, init_w=0.3, seed=1)
    keep = x.double()
    with torch.no_grad():
        assert torch.equal(m32(keep), m32(x))
    assert keep.dtype == torch.float64 and torch.equal(keep, x.double())  # cast, not in place


def test_hyperparameters_accept_numpy_scalars_and_refuse_non_finite():
    m = BarrelCortexRSNN(scale=0.05, init_w=np.float32(0.06), init_b=np.float32(0.04))
    groups = m.param_groups(np.float32(0.01))
    lr = float(np.float32(0.01))
    assert [g["lr"] for g in groups] == [lr, 5 * lr, 2 * lr]
    assert all(type(g["lr"]) is float for g in groups)
    for kwargs, name in (
        ({"init_w": math.inf}, "init_w"),  # inf x mask 0 = NaN weights
        ({"init_w": True}, "init_w"),
        ({"init_b": math.nan}, "init_b"),  # NaN threshold: a network that never fires
    ):
        with pytest.raises(ValueError, match=name):
            BarrelCortexRSNN(scale=0.05, **kwargs)
    with pytest.raises(ValueError, match="lr"):
        m.param_groups(math.inf)


def test_analyses_take_negative_stride_numpy_views():
    force, torque, labels = make_whisker_dataset(1, seed=0, frames=8)
    spikes, _ = to_spikes(force, torque, dt=1, generator=0)
    x = spikes[:, :, 0]
    m = BarrelCortexRSNN(scale=0.05, init_w=0.3, seed=0)
    flipped, y = np.flip(x, axis=0), labels[::-1]
    assert evaluate(m, flipped, y) == evaluate(m, flipped.copy(), y.copy())
    sel = selectivity_anova(m, flipped, y)
    torch.testing.assert_close(sel["p_values"], selectivity_anova(m, flipped.copy(), y.copy())["p_values"])
    assert firing_statistics(m, flipped)["rate_E"] == firing_statistics(m, flipped.copy())["rate_E"]
    assert len(train_barrel(m, flipped, y, epochs=1, batch_size=2)["loss"]) == 1


def test_analyses_refuse_an_empty_set():
    m = BarrelCortexRSNN(scale=0.05)
    x, y = _spikes(0), np.zeros(0, dtype=np.int64)
    before = {k: v.clone() for k, v in m.state_dict().items()}
    for call in (
        lambda: train_barrel(m, x, y, epochs=1),
        lambda: selectivity_anova(m, x, y),
        lambda: firing_statistics(m, x),
    ):
        with pytest.raises(ValueError, match="spikes must hold at least one sweep"):
            call()
    assert all(torch.equal(v, m.state_dict()[k]) for k, v in before.items())


def test_deprivation_curve_refuses_fractional_or_repeated_k():
    f, t, y = make_whisker_dataset(1, seed=1, frames=4)
    m = BarrelCortexRSNN(scale=0.05)
    for ks in ((0, 1.5), (0, 2, 2), (True,)):
        with pytest.raises(ValueError, match="ks must be distinct ints"):
            whisker_deprivation_curve(m, f, t, y, ks=ks, draws=1)
    with pytest.raises(ValueError, match="pool"):
        whisker_deprivation_curve(m, f, t, y, ks=(0, 2), draws=1, pool=20.5)
    curve = whisker_deprivation_curve(m, f, t, y, ks=np.array([0, 2]), draws=1, pool=np.int64(20))
    assert curve["ks"] == [0, 2]


def test_to_spikes_refuses_non_finite_centres():
    f, t, _ = make_whisker_dataset(1, seed=2, frames=4)
    for kwargs, name in (({"c_f": math.nan}, "c_f"), ({"c_t": math.inf}, "c_t"), ({"c_f": "2"}, "c_f")):
        with pytest.raises(ValueError, match=f"{name} must be a finite float or None"):
            to_spikes(f, t, dt=1, **kwargs)
    _, meta = to_spikes(f, t, dt=1, c_f=np.float32(2), c_t=4, generator=0)
    assert (meta["c_f"], meta["c_t"]) == (2.0, 4.0)


def test_deprive_whiskers_takes_arrays_and_tensors_of_indices():
    f, t, _ = make_whisker_dataset(1, seed=3, frames=4)
    want = deprive_whiskers(f, t, [1, 4])
    for idx in (np.array([1, 4]), torch.tensor([1, 4]), (np.int64(1), 4)):
        got = deprive_whiskers(f, t, idx)
        assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))
    with pytest.raises(TypeError, match=r"whisker_idx must be a sequence.*\[3\]"):
        deprive_whiskers(f, t, 3)
    for bad in (np.array([1.7]), torch.tensor([True]), torch.tensor([1, 1])):
        with pytest.raises(ValueError, match="whisker_idx"):
            deprive_whiskers(f, t, bad)


def test_zero_input_rate_is_the_official_floor():
    """Zero force/torque: ‖·‖ → 1e-5, p = sigmoid(log 1e-5 − c) ≈ 1e-5·e^{-c}; the rate must stay
    below 1e-4·e^{-c} (the method note's bound). 1.86 M draws per modality: a floor of 1e-3 instead
    of 1e-5 (p ≈ 1.35e-4) would give about 250 force spikes against a bound of about 25."""
    x = np.zeros((2, 1, 1, 31, 3, 3), np.float32)
    s, _ = to_spikes(x, x, dt=10_000, c_f=2, c_t=4, generator=0)
    for mod, c in ((0, 2.0), (1, 4.0)):
        assert s[:, mod].mean() <= 1e-4 * math.exp(-c)


def test_analyses_refuse_a_column_of_labels():
    """Labels [N, 1] broadcast against the [B] predictions into a [B, B] comparison: `evaluate`
    reported an accuracy of 2.0 on three sweeps of three classes instead of refusing."""
    f, t, y = make_whisker_dataset(1, seed=0, frames=6)
    x, _ = to_spikes(f, t, dt=1, generator=0)
    m = BarrelCortexRSNN(scale=0.05, init_w=0.3, seed=0)
    for labels in (y[:, None], torch.from_numpy(y)[:, None]):
        for call in (
            lambda lab=labels: evaluate(m, x, lab),
            lambda lab=labels: train_barrel(m, x, lab, epochs=1),
            lambda lab=labels: selectivity_anova(m, x, lab),
            lambda lab=labels: whisker_deprivation_curve(m, f, t, lab, ks=(0,), draws=1),
        ):
            with pytest.raises(ValueError, match=r"labels must be 1-D \[N\] class indices, got shape \(3, 1\)"):
                call()
    assert 0.0 <= evaluate(m, x, y) <= 1.0


def test_evaluate_restores_each_submodule_mode_and_builds_no_graph():
    m = BarrelCortexRSNN(scale=0.05, seed=0).train()
    m.cortex.eval()  # a frozen column inside a training model; model.train(was) used to unfreeze it
    before = [mod.training for mod in m.modules()]
    x = (torch.rand(6, 2, 4, 93, generator=torch.Generator().manual_seed(1)) < 0.3).float()
    y = torch.tensor([0, 1, 2, 0, 1, 2])
    graphs = []
    hook = m.register_forward_hook(lambda _m, _i, out: graphs.append(out.requires_grad))
    acc = evaluate(m, x, y, batch_size=4)
    hook.remove()
    assert 0.0 <= acc <= 1.0 and graphs == [False, False]  # two batches, no autograd graph kept
    assert [mod.training for mod in m.modules()] == before
