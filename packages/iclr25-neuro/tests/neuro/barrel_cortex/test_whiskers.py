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


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n_whiskers": 30}, "n_whiskers must be 31"),
        ({"frames": 1}, "frames must be an int >= 2"),  # the sweep velocity divides by frames - 1
        ({"frames": 2.5}, "frames must be an int >= 2"),
        ({"frames": True}, "frames must be an int >= 2"),
        ({"points_per_whisker": 1}, "points_per_whisker must be an int >= 2"),
        ({"points_per_whisker": 3.0}, "points_per_whisker must be an int >= 2"),
    ],
)
def test_simulator_refuses_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        WhiskerSweepSimulator(**kwargs)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n_per_class": -1}, "n_per_class must be a non-negative int"),
        ({"n_per_class": 1.5}, "n_per_class must be a non-negative int"),
        ({"n_per_class": 1, "sweeps": 0}, "sweeps must be"),
        ({"n_per_class": 1, "sweeps": 2.0}, "sweeps must be"),
    ],
)
def test_dataset_refuses_bad_counts(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_whisker_dataset(frames=4, **kwargs)


def test_conversion_and_deprivation_check_the_force_torque_pair():
    f, t, _ = make_whisker_dataset(1, seed=7, frames=4)
    for call in (lambda a, b: to_spikes(a, b, dt=1), lambda a, b: deprive_whiskers(a, b, [0])):
        with pytest.raises(TypeError, match="force must be a numpy array"):
            call(f.tolist(), t)
        with pytest.raises(TypeError, match="torque must be a numpy array"):
            call(f, torch.from_numpy(t))
        with pytest.raises(ValueError, match="force must have shape"):
            call(f[:, 0], t)  # sweep axis missing
        with pytest.raises(ValueError, match="torque must have shape"):
            call(f, t[..., :2])  # two of xyz
        with pytest.raises(ValueError, match="force and torque shapes differ"):
            call(f, t[:, :, :2])  # fewer frames
    for dt in (0, 1.5, True):
        with pytest.raises(ValueError, match="dt must be an int >= 1"):
            to_spikes(f, t, dt=dt)


def test_unknown_object():
    with pytest.raises(KeyError, match="helmet"):
        WhiskerSweepSimulator().sweep("cup")
    assert list(OBJECTS) == ["helmet", "box", "plane"]


def test_to_spikes_official_formula_and_rates():
    f, t, _ = make_whisker_dataset(1, seed=1)
    spikes, meta = to_spikes(f, t, dt=3, c_f=2, c_t=4, generator=0)
    assert spikes.shape == (3, 2, 1, 330, 93) and spikes.dtype == np.float32
    assert meta["c_f"] == 2 and meta["c_t"] == 4
    # on simulated sweeps: total spikes per modality within 3 s.d. of the official formula's expectation
    for mod, (x_mod, c) in enumerate(((f, 2.0), (t, 4.0))):
        m = np.linalg.norm(x_mod.astype(np.float64), axis=-1)
        m[m == 0] = 1e-5
        p_official = np.repeat(1 / (1 + np.exp(-(np.log(m) - c))), 3, axis=2)  # each frame dt = 3 times
        mu, sd = p_official.sum(), np.sqrt((p_official * (1 - p_official)).sum())
        assert abs(spikes[:, mod].sum() - mu) <= 3 * sd
    # empirical rates over dt = 1000 repeats within 3 s.d. of the official probabilities
    x = np.full((1, 1, 2, 31, 3, 3), 0.0, np.float32)
    x[0, 0, 0, :, :, 0] = np.exp(np.linspace(-3, 5, 93)).reshape(31, 3)
    s, _ = to_spikes(x, x, dt=1000, c_f=2, c_t=4, generator=1)
    rate = s[0, 0, 0, :1000].mean(0)
    p = 1 / (1 + np.exp(-(np.linspace(-3, 5, 93) - 2)))
    assert np.all(np.abs(rate - p) <= 3 * np.sqrt(p * (1 - p) / 1000) + 1e-9)
    zero_rate = s[0, 0, 0, 1000:].mean()
    assert zero_rate <= 1e-4 * math.exp(-2) * 10 + 1e-3  # zero input: p = sigmoid(log 1e-5 - 2) ≈ 1.4e-6


def test_deprivation_copies_and_zeroes():
    f, t, _ = make_whisker_dataset(1, seed=2)
    keep = f.copy()
    fd, td = deprive_whiskers(f, t, [0, 5, 30])
    assert np.array_equal(f, keep)
    assert not fd[..., [0, 5, 30], :, :].any() and not td[..., [0, 5, 30], :, :].any()
    s, _ = to_spikes(fd, td, dt=1, c_f=-3, c_t=-1, generator=0)
    chans = [3 * w + n for w in (0, 5, 30) for n in range(3)]
    assert s[..., chans].mean() < 1e-3
    for bad in ([31], [1, 1], [-1], [1.7], [True]):
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


def _array_geometry():
    """Whisker bases, unit directions and lengths written from the method note (rows 5, 6, 7, 7, 6)."""
    base, direction, length = [], [], []
    for r, n in enumerate((5, 6, 7, 7, 6)):
        for c in range(n):
            az, el = math.radians(-35.0 + 70.0 * c / (n - 1)), math.radians(8.0 * (r - 2))
            base.append((-2.0 * c, 0.0, 2.5 * (r - 2)))
            direction.append((math.sin(az) * math.cos(el), math.cos(az) * math.cos(el), math.sin(el)))
            length.append(48.0 - 6.0 * c)
    return np.array(base), np.array(direction), np.array(length)


@pytest.mark.parametrize("y0", [20.0, 26.0])
def test_contact_force_and_torque_against_a_wall_closed_form(monkeypatch, y0):
    """A flat wall y >= y0 in front of the array: every term of the contact model is closed form.

    All whisker points have y > 0 increasing along the whisker, so the deepest sample is the tip,
    the penetration is ``tip_y - y0`` (capped at 6 mm), the SDF normal is -y, the stiffness at the
    tip is ``0.5 (L/48)^4`` and friction points along the object's motion (-x). The tip lies beyond
    all three nodes, so each node gets ``-F`` and ``(tip - node) x F``.
    """
    monkeypatch.setitem(OBJECTS, "wall", lambda q: -q[..., 1])
    pose = dict(POSE, yaw=0.0, pitch=0.0, roll=0.0, scale=1.0, y0=y0)
    f, t = WhiskerSweepSimulator(resonate=False).sweep("wall", pose=pose)
    base, axis, length = _array_geometry()
    tip = base + length[:, None] * axis
    depth = np.minimum(tip[:, 1] - y0, 6.0)
    touch = depth > 0
    normal = np.array([0.0, -1.0, 0.0])
    n_perp = normal - (axis @ normal)[:, None] * axis
    f_n = (0.5 * (length / 48.0) ** 4 * np.maximum(depth, 0.0))[:, None] * n_perp
    f_c = f_n + 0.3 * np.linalg.norm(f_n, axis=1, keepdims=True) * np.array([-1.0, 0.0, 0.0])
    nodes = base[:, None] + (length[:, None] * np.arange(3) / 3.0)[..., None] * axis[:, None]
    want_f = np.where(touch[:, None, None], -np.repeat(f_c[:, None], 3, axis=1), 0.0)  # (31, 3 nodes, 3)
    want_t = np.where(touch[:, None, None], np.cross(tip[:, None] - nodes, f_c[:, None]), 0.0)
    # the wall is infinite in x: every frame is the same quasi-static contact
    assert touch.any() and not touch.all()  # both contacting and free whiskers are checked
    for frame in (0, 54, 109):
        np.testing.assert_allclose(f[frame], want_f, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(t[frame], want_t, rtol=1e-5, atol=1e-6)
    # force grows linearly with penetration below the 6 mm cap: a deeper push gives a larger ‖F‖
    closer, _ = WhiskerSweepSimulator(resonate=False).sweep("wall", pose=dict(pose, y0=y0 - 1.0))
    # (a whisker pointing straight at the wall, n ∥ axis, feels no bending force: n⊥ = 0)
    grow = touch & (depth + 1.0 <= 6.0) & (np.linalg.norm(n_perp, axis=1) > 1e-3)
    assert grow.any()
    ratio = np.linalg.norm(closer[0, grow, 0], axis=-1) / np.linalg.norm(f[0, grow, 0], axis=-1)
    np.testing.assert_allclose(ratio, (depth[grow] + 1.0) / depth[grow], rtol=1e-5)


def test_to_spikes_layout_torque_centre_and_norm():
    """Force and torque get their own centre (c_f, c_t); the norm is over xyz; channel = 3·whisker
    + node; each frame is repeated dt times; samples and sweeps keep their own magnitudes."""
    from scipy.stats import binom

    dt = 400
    log_m = np.linspace(-3.0, 7.0, 93)
    direction = np.array([2.0, -1.0, 2.0]) / 3.0  # unit vector: ‖m·u‖ = m only for the full xyz norm
    force = np.zeros((2, 2, 2, 31, 3, 3), np.float32)
    torque = np.zeros_like(force)
    for n in range(2):
        for s in range(2):
            shift = n + 2 * s  # a different magnitude profile per sample and sweep
            force[n, s, 0] = (np.exp(log_m - shift).reshape(31, 3)[..., None] * direction).astype(np.float32)
            torque[n, s, 0] = (np.exp(log_m[::-1] + shift).reshape(31, 3)[..., None] * direction).astype(np.float32)
    spikes, meta = to_spikes(force, torque, dt=dt, c_f=2, c_t=4, generator=3)
    assert spikes.shape == (2, 2, 2, 2 * dt, 93) and (meta["c_f"], meta["c_t"]) == (2.0, 4.0)
    counts, p = [], []
    for n in range(2):
        for s in range(2):
            shift = n + 2 * s
            for mod, (lm, c) in enumerate(((log_m - shift, 2.0), (log_m[::-1] + shift, 4.0))):
                m = np.linalg.norm(np.exp(lm).astype(np.float32)[:, None] * direction.astype(np.float32), axis=1)
                counts.append(spikes[n, mod, s, :dt].sum(0))
                p.append(1.0 / (1.0 + np.exp(-(np.log(m.astype(np.float64)) - c))))
                # frame 1 is all zero: magnitude 1e-5, p = sigmoid(log 1e-5 - c) < 1.4e-6
                counts.append(spikes[n, mod, s, dt:].sum(0))
                p.append(np.full(93, 1.0 / (1.0 + np.exp(-(np.log(1e-5) - c)))))
    counts, p = np.concatenate(counts), np.concatenate(p)
    # exact binomial bounds per channel, Bonferroni over all channels at family-wise level 1e-3
    level = 1e-3 / counts.size
    lo, hi = binom.ppf(level / 2, dt, p), binom.isf(level / 2, dt, p)
    assert np.all((counts >= lo) & (counts <= hi))


def test_to_spikes_rejects_nan_and_leaves_inputs_untouched():
    f, t, _ = make_whisker_dataset(1, seed=4, frames=8)
    keep_f, keep_t = f.copy(), t.copy()
    to_spikes(f, t, dt=2, generator=0)
    deprive_whiskers(f, t, [2, 7])
    assert np.array_equal(f, keep_f) and np.array_equal(t, keep_t)
    for name in ("force", "torque"):
        bad = [f.copy(), t.copy()]
        bad[name == "torque"][0, 0, 3, 4, 1, 2] = np.nan
        with pytest.raises(ValueError, match=f"{name} contains NaN"):
            to_spikes(*bad, dt=1, generator=0)


def test_unknown_class_names_and_object_index():
    with pytest.raises(KeyError, match="valid names"):
        make_whisker_dataset(1, classes=("helmet", "cup"))
    with pytest.raises(KeyError, match="helmet"):
        WhiskerSweepSimulator().sweep(3)
    sim = WhiskerSweepSimulator(frames=10)
    a = sim.sweep(1, pose=POSE)
    b = sim.sweep("box", pose=POSE)  # label index = position in OBJECTS
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def test_deprivation_curve_protocol(monkeypatch):
    """k = 0 intact; k = 1 each of the 31 whiskers once; k > 1: ``draws`` sets of k distinct whiskers
    from the pool 0..29; accuracy per k is the mean over its draws; the same seed gives the same sets."""
    from iclr25.neuro.barrel_cortex import analysis

    f, t, y = make_whisker_dataset(1, seed=6, frames=4)
    keep = f.copy(), t.copy()
    seen: list[list[int]] = []
    real = analysis.deprive_whiskers

    def spy(force, torque, idx):
        seen.append(list(idx))
        return real(force, torque, idx)

    monkeypatch.setattr(analysis, "deprive_whiskers", spy)
    # a stand-in accuracy that depends on the deprived set, so the per-k means can be checked exactly
    monkeypatch.setattr(analysis, "evaluate", lambda model, spikes, labels: 1.0 - 0.01 * sum(seen[-1]) / 30)
    curve = whisker_deprivation_curve(None, f, t, y, seed=4)
    assert curve["ks"] == list(range(1, 9))
    sets = list(seen)
    assert sorted(s[0] for s in sets[:31]) == list(range(31)) and all(len(s) == 1 for s in sets[:31])
    rest = sets[31:]
    assert len(rest) == 7 * 50
    for j, k in enumerate(range(2, 9)):
        for s in rest[50 * j : 50 * (j + 1)]:
            assert len(s) == k and len(set(s)) == k and all(0 <= w < 30 for w in s)
    start = 0
    for k, acc in zip(curve["ks"], curve["accuracy"], strict=True):
        n = 31 if k == 1 else 50
        want = np.mean([1.0 - 0.01 * sum(s) / 30 for s in sets[start : start + n]])
        assert acc == pytest.approx(want, rel=1e-12) and curve["per_draw"][k] == pytest.approx(
            [1.0 - 0.01 * sum(s) / 30 for s in sets[start : start + n]]
        )
        start += n
    assert np.array_equal(f, keep[0]) and np.array_equal(t, keep[1])
    seen.clear()
    whisker_deprivation_curve(None, f, t, y, ks=(0, 3), draws=4, seed=4)
    first = list(seen)
    seen.clear()
    whisker_deprivation_curve(None, f, t, y, ks=(0, 3), draws=4, seed=4)
    assert first == seen and first[0] == [] and len(first) == 5


def test_firing_statistics_against_direct_computation():
    torch.manual_seed(0)
    model = BarrelCortexRSNN(scale=0.05, init_w=0.3, seed=4)
    x = (torch.rand(3, 2, 25, 93, generator=torch.Generator().manual_seed(2)) < 0.3).float()
    st = firing_statistics(model, x)
    with torch.no_grad():
        rec = model(x, record=True)[1].double().numpy()  # (B, T, n)
    spec = model.cortex.spec
    off, kinds = spec.offsets, list(spec.kinds)
    per_pop = [rec[..., off[i] : off[i + 1]].mean() for i in range(13)]
    # the module averages float32 spikes: relative error ~ eps_32 · log2(count) < 1e-5
    np.testing.assert_allclose(st["rates"], per_pop, rtol=1e-5)
    e_cols = np.concatenate([np.arange(off[i], off[i + 1]) for i in range(13) if kinds[i] == "E"])
    i_cols = np.setdiff1d(np.arange(spec.n), e_cols)
    assert st["rate_E"] == pytest.approx(rec[..., e_cols].mean(), rel=1e-5)
    assert st["rate_I"] == pytest.approx(rec[..., i_cols].mean(), rel=1e-5)
    trains = rec.transpose(1, 0, 2).reshape(rec.shape[1], -1)  # every (trial, neuron) is one train
    mean = trains.mean(0)
    cv = np.where(mean > 0, trains.std(0) / np.where(mean > 0, mean, 1.0), 0.0)
    assert st["cv_binary"] == pytest.approx(cv.mean(), rel=1e-9)
    isi = [np.diff(np.flatnonzero(tr)) for tr in trains.T if tr.sum() >= 3]
    assert len(isi) > 0 and (trains.sum(0) == 0).any()  # both regular and silent trains occur
    assert st["isi_cv"] == pytest.approx(np.mean([d.std() / d.mean() for d in isi]), rel=1e-9)
    c = model.cortex
    w = np.clip(c.weight.detach().double().numpy(), 0, 1) * c.mask.numpy() / spec.scale
    np.testing.assert_allclose(st["in_degree"].numpy(), w.sum(0), rtol=1e-5)
    np.testing.assert_allclose(st["out_degree"].numpy(), w.sum(1), rtol=1e-5)
