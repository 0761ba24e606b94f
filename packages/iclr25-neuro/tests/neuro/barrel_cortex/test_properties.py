"""Mathematical properties of the barrel-cortex module, derived from the method note.

Each test states a property that follows from the specification (the object geometry, the
whisker resonator ODE, the spike-conversion formula, Gauss-Seidel population updates, Bernoulli
masks) rather than from the code's own output; tolerances are float64 round-off bounds or exact
binomial quantiles.
"""

import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.stats import binom

from iclr25.neuro.barrel_cortex import (
    OBJECTS,
    ConnectivitySpec,
    ConstrainedSpikingNetwork,
    WhiskerSweepSimulator,
    to_spikes,
)

EPS = np.finfo(np.float64).eps
ZETA = 0.35  # method note: damping ratio of every whisker resonator


def _property(examples: int) -> settings:
    """Seeded hypothesis settings; the autouse one-thread fixture only sets the thread count, so
    sharing it between examples is safe."""
    return settings(
        max_examples=examples,
        derandomize=True,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )


# ---------------------------------------------------------------------------------------------
# object geometry (signed-distance functions)


def _inside(name: str, p: np.ndarray) -> np.ndarray:
    """Membership of object-frame points in the solids as the method note defines them."""
    x, y, z = p[..., 0], p[..., 1], p[..., 2]
    if name == "helmet":  # half-ellipsoid, radii (12, 10, 9), cut at z = -2
        return ((x / 12) ** 2 + (y / 10) ** 2 + (z / 9) ** 2 < 1) & (z > -2)
    if name == "box":  # cuboid, half-sizes (11, 8, 7)
        return (np.abs(x) < 11) & (np.abs(y) < 8) & (np.abs(z) < 7)
    # plane: capsule (half-length 14, radius 3.5) ∪ wing slab (3, 16, 0.8) at x + 1 ∪ fin (2.5, 0.8, 4) at (-12, 0, 3.5)
    capsule = np.maximum(np.abs(x) - 14, 0) ** 2 + y**2 + z**2 < 3.5**2
    wing = (np.abs(x - 1) < 3) & (np.abs(y) < 16) & (np.abs(z) < 0.8)
    fin = (np.abs(x + 12) < 2.5) & (np.abs(y) < 0.8) & (np.abs(z - 3.5) < 4)
    return capsule | wing | fin


def _box_distance(p: np.ndarray, half, centre=(0.0, 0.0, 0.0)) -> np.ndarray:
    """Euclidean distance to a solid box: the distance to its projection (coordinate-wise clip)."""
    c, h = np.asarray(centre), np.asarray(half)
    return np.linalg.norm(p - np.clip(p, c - h, c + h), axis=-1)


def _segment_distance(p: np.ndarray, half_length: float) -> np.ndarray:
    """Distance to the segment from (-half_length, 0, 0) to (half_length, 0, 0)."""
    foot = np.stack([np.clip(p[..., 0], -half_length, half_length), 0 * p[..., 1], 0 * p[..., 2]], -1)
    return np.linalg.norm(p - foot, axis=-1)


def _points(rng: np.random.Generator, n: int) -> np.ndarray:
    """Uniform points around all three objects plus points concentrated near the coordinate planes."""
    wide = rng.uniform(-24.0, 24.0, (n, 3))
    thin = rng.uniform(-24.0, 24.0, (n, 3)) * rng.uniform(0.0, 1.0, (n, 1)) ** 2
    return np.concatenate([wide, thin])


def test_object_sdfs_are_negative_exactly_inside_the_specified_solids():
    """sign(SDF) is the membership of the solid defined in the method note (contact = SDF < 0).

    The helmet is only a scaled-sphere approximation of the ellipsoid distance, but its zero level
    set must still be the half-ellipsoid; a point is compared only where |SDF| exceeds the float64
    round-off of evaluating it (|SDF| <= 64 mm, relative error a few eps)."""
    p = _points(np.random.default_rng(0), 100_000)
    for name, sdf in OBJECTS.items():
        d = sdf(p)
        inside = _inside(name, p)
        decided = np.abs(d) > 1e-12
        assert decided.mean() > 0.999
        assert inside[decided].any() and (~inside[decided]).any(), name
        np.testing.assert_array_equal(d[decided] < 0, inside[decided], err_msg=name)


def test_object_sdfs_are_1_lipschitz_and_exact_distances_where_closed_form():
    """Every object SDF is 1-Lipschitz, |f(p) - f(q)| <= |p - q| (the ellipsoid term is scaled by
    the smallest radius; max, min and exact distances keep the constant 1), hence |SDF| never
    exceeds the distance to the surface. The box SDF is the exact signed distance everywhere and
    the plane's is the exact distance to the union outside it (min of exact component distances)."""
    rng = np.random.default_rng(1)
    p = _points(rng, 50_000)
    step = rng.normal(size=p.shape) * rng.choice([1e-3, 0.1, 3.0, 20.0], size=(len(p), 1))
    q = p + step
    for name, sdf in OBJECTS.items():
        gap = np.abs(sdf(p) - sdf(q))
        dist = np.linalg.norm(step, axis=1)
        # each SDF is a few dozen float64 operations on values below 100 mm: round-off < 1e-12
        assert np.all(gap <= dist + 1e-12), (name, float((gap - dist).max()))
        # the bound is attained: near the surfaces the SDF has unit slope (not a weaker contraction)
        assert (gap / dist).max() > 0.99, name
    box = OBJECTS["box"](p)
    half = np.array([11.0, 8.0, 7.0])
    inside = _inside("box", p)
    want = np.where(inside, -np.min(half - np.abs(p), axis=-1), _box_distance(p, half))
    np.testing.assert_allclose(box, want, rtol=0, atol=1e-12)
    plane = OBJECTS["plane"](p)
    out = ~_inside("plane", p)
    union = np.minimum.reduce(
        [
            _segment_distance(p, 14.0) - 3.5,
            _box_distance(p, (3.0, 16.0, 0.8), (1.0, 0.0, 0.0)),
            _box_distance(p, (2.5, 0.8, 4.0), (-12.0, 0.0, 3.5)),
        ]
    )
    assert out.mean() > 0.5
    np.testing.assert_allclose(plane[out], union[out], rtol=0, atol=1e-12)
    # helmet: the SDF vanishes on its surface (ellipsoid cap above z = -2 and the cut disk), so
    # with the Lipschitz bound |SDF(p)| <= distance from p to the surface
    u = rng.normal(size=(20_000, 3))
    cap = u / np.linalg.norm(u / np.array([12.0, 10.0, 9.0]), axis=1, keepdims=True)
    cap = cap[cap[:, 2] > -2]
    disk = np.concatenate([rng.uniform(-12, 12, (20_000, 2)), np.full((20_000, 1), -2.0)], 1)
    disk = disk[(disk[:, 0] / 12) ** 2 + (disk[:, 1] / 10) ** 2 + (2 / 9) ** 2 < 1]
    assert len(cap) > 10_000 and len(disk) > 10_000
    np.testing.assert_allclose(OBJECTS["helmet"](np.concatenate([cap, disk])), 0.0, rtol=0, atol=1e-12)


# ---------------------------------------------------------------------------------------------
# whisker resonator: ẍ = ω²(u − x) − 2ζωẋ at unit step, ω = clip(0.6 (30/L)², 0.05, 1.2)


def _spec_omega() -> np.ndarray:
    """ω of the 31 whiskers from the method note: rows 5, 6, 7, 7, 6 and length 48 − 6c mm."""
    length = np.array([48.0 - 6.0 * c for n in (5, 6, 7, 7, 6) for c in range(n)])
    return np.clip(0.6 * (30.0 / length) ** 2, 0.05, 1.2)


def _propagation_bound(omega: float, steps: int) -> float:
    """Σ_k ||A^k||_∞ for the state map (x, ẋ) of one unit step: the worst amplification of a
    local round-off error over ``steps`` steps."""
    a = np.array([[1 - omega**2, 1 - 2 * ZETA * omega], [-(omega**2), 1 - 2 * ZETA * omega]])
    total, power = 0.0, np.eye(2)
    for _ in range(steps):
        total += np.abs(power).sum(1).max()
        power = a @ power
    return total


@_property(25)
@given(
    seed=st.integers(0, 2**32 - 1),
    a=st.floats(-3.0, 3.0),
    b=st.floats(-3.0, 3.0),
    delay=st.integers(1, 20),
)
def test_whisker_resonator_is_linear_and_time_invariant(seed, a, b, delay):
    """The resonator is a linear ODE started at rest: superposition R(a u + b v) = a R(u) + b R(v)
    up to round-off, and a delayed input gives the exactly delayed output (zeros before it)."""
    sim = WhiskerSweepSimulator(frames=2)
    rng = np.random.default_rng(seed)
    frames = 48
    u = rng.normal(size=(frames, 31, 3, 3)) * (rng.random((frames, 31, 1, 1)) < 0.3)  # contact-like bursts
    v = rng.normal(size=(frames, 31, 3, 3))
    ru, rv, ruv = sim._resonate(u), sim._resonate(v), sim._resonate(a * u + b * v)
    # per step ≤ 8 roundings on terms ≤ 4·M (ω² ≤ 1.44, 2ζω ≤ 0.84), each propagated by Σ||A^k||
    gain = max(_propagation_bound(w, frames) for w in np.unique(sim.omega))
    size = max(np.abs(x).max() for x in (ru, rv, u, v))
    tol = 3 * 8 * 4 * EPS * gain * (1 + abs(a) + abs(b)) * size
    np.testing.assert_allclose(ruv, a * ru + b * rv, rtol=0, atol=tol)
    shifted = np.concatenate([np.zeros((delay, 31, 3, 3)), u[: frames - delay]])
    r_shift = sim._resonate(shifted)
    assert np.all(r_shift[:delay] == 0)
    np.testing.assert_array_equal(r_shift[delay:], ru[: frames - delay])


def test_whisker_resonator_is_the_specified_underdamped_oscillator():
    """Unit-step finite differences of ẍ = ω²(u − x) − 2ζωẋ with the note's ω per whisker:
    Δ²x_t = ω²(u_t − x_{t−1}) − 2ζω Δx_{t−1} (x_{−1} = x_{−2} = 0); a held input is reached exactly
    (fixed point x = u, ẋ = 0), and ζ < 1 makes the whisker ring (overshoot, and swing past 0
    after release). A sweep's resonated force/torque is that filter applied to its raw output."""
    sim = WhiskerSweepSimulator(frames=110)
    omega = _spec_omega()[:, None, None]  # (31, 1, 1): per whisker, same for its nodes and xyz
    rng = np.random.default_rng(3)
    u = rng.normal(size=(80, 31, 3, 3)) * (rng.random((80, 31, 1, 1)) < 0.4)
    x = sim._resonate(u)
    xp = np.concatenate([np.zeros((2, 31, 3, 3)), x])  # x_{-2}, x_{-1}, x_0, ...
    lhs = xp[2:] - 2 * xp[1:-1] + xp[:-2]
    rhs = omega**2 * (u - xp[1:-1]) - 2 * ZETA * omega * (xp[1:-1] - xp[:-2])
    # a local identity (no accumulation): ≤ 10 roundings of terms ≤ 4·max(|x|, |u|)
    scale = max(np.abs(x).max(), np.abs(u).max())
    np.testing.assert_allclose(lhs, rhs, rtol=0, atol=40 * EPS * scale)

    # step and release: |λ| ≤ 0.915 for every whisker, so 2000 steps leave < 1e-70 of the transient
    level = rng.uniform(0.5, 2.0, (31, 3, 3))
    held = np.concatenate([np.broadcast_to(level, (2000, 31, 3, 3)), np.zeros((2000, 31, 3, 3))])
    x = sim._resonate(held)
    np.testing.assert_allclose(x[1999], level, rtol=16 * EPS)
    np.testing.assert_allclose(x[-1], 0.0, atol=16 * EPS * level.max())
    assert np.all(x[:2000].max(0) > level)  # overshoot of an underdamped oscillator
    assert np.all(x[2000:].min(0) < 0)  # ringing after release

    # the public sweep applies exactly this filter to the raw quasi-static force and torque
    pose = {
        "yaw": 0.7,
        "pitch": 0.1,
        "roll": -0.05,
        "scale": 1.1,
        "y0": 20.0,
        "z0": 1.0,
        "x_start": 55.0,
        "x_end": -70.0,
    }
    raw = WhiskerSweepSimulator(frames=110, resonate=False).sweep("box", pose=pose)
    res = sim.sweep("box", pose=pose)
    gain = max(_propagation_bound(w, 110) for w in np.unique(omega))
    eps32 = np.finfo(np.float32).eps
    for r, s in zip(raw, res, strict=True):
        r = r.astype(np.float64)
        assert np.abs(r).max() > 0
        want = np.zeros_like(r)
        pos, vel = np.zeros(r.shape[1:]), np.zeros(r.shape[1:])
        for t in range(len(r)):  # the ODE step written from the note, independent of _resonate
            vel = vel + omega**2 * (r[t] - pos) - 2 * ZETA * omega * vel
            pos = pos + vel
            want[t] = pos
        # raw is float32 (relative error eps32/2, amplified by the filter gain) and so is the output
        tol = eps32 * (gain * np.abs(r).max() + np.abs(want).max())
        np.testing.assert_allclose(s, want, rtol=0, atol=tol)


# ---------------------------------------------------------------------------------------------
# spike conversion p = sigmoid(log‖F‖ − c)


def _random_rotations(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    q, r = np.linalg.qr(rng.normal(size=(*shape, 3, 3)))
    return q * np.sign(np.diagonal(r, axis1=-2, axis2=-1))[..., None, :]


@_property(20)
@given(seed=st.integers(0, 2**32 - 1), log_kf=st.floats(-4.0, 4.0), log_kt=st.floats(-4.0, 4.0))
def test_spikes_depend_on_magnitudes_only_and_data_centres_are_scale_free(seed, log_kf, log_kt):
    """Spikes depend on ‖F‖ and ‖τ‖ only (any rotation of every 3-vector leaves them unchanged);
    the default centre is the log of the median non-zero magnitude, so rescaling F by κ shifts it
    by log κ and leaves the spikes unchanged; with fixed centres a larger magnitude can only add
    spikes under the same uniform draws (p is increasing in ‖F‖)."""
    rng = np.random.default_rng(seed)
    shape = (2, 1, 6, 31, 3)
    # float64 magnitudes in [e^-3, e^3] along random unit directions (never at the 1e-5 zero
    # floor, also after scaling by e^±4)
    force = np.exp(rng.uniform(-3, 3, (*shape, 1))) * _random_rotations(rng, shape)[..., 0]
    torque = np.exp(rng.uniform(-3, 3, (*shape, 1))) * _random_rotations(rng, shape)[..., 0]
    kf, kt = math.exp(log_kf), math.exp(log_kt)
    f2 = kf * np.einsum("...ij,...j->...i", _random_rotations(rng, shape), force)
    t2 = kt * np.einsum("...ij,...j->...i", _random_rotations(rng, shape), torque)
    spikes, meta = to_spikes(force, torque, dt=3, generator=seed)
    spikes2, meta2 = to_spikes(f2, t2, dt=3, generator=seed)
    # the default centre is the log of the median non-zero magnitude (zero vectors are left out)
    holes = force.copy()
    holes[rng.random(shape) < 0.3] = 0.0
    _, meta0 = to_spikes(holes, torque, dt=1, generator=seed)
    mag = np.sqrt((holes**2).sum(-1))
    assert meta0["c_f"] == pytest.approx(math.log(np.median(mag[mag > 0])), abs=64 * EPS)
    assert meta["c_t"] == pytest.approx(math.log(np.median(np.sqrt((torque**2).sum(-1)))), abs=64 * EPS)
    # centre = log median: shifted by log κ up to float64 round-off of the logs
    assert meta2["c_f"] == pytest.approx(meta["c_f"] + log_kf, abs=64 * EPS)
    assert meta2["c_t"] == pytest.approx(meta["c_t"] + log_kt, abs=64 * EPS)
    # p moves by ~1e-15 at most: a flip needs a uniform draw that close to p (chance < 1e-9 here)
    np.testing.assert_array_equal(spikes2, spikes)
    # fixed centres: the same shift of the centre is equivalent to the rescaling
    fixed, _ = to_spikes(force, torque, dt=3, c_f=0.5, c_t=-0.5, generator=seed)
    fixed2, _ = to_spikes(f2, t2, dt=3, c_f=0.5 + log_kf, c_t=-0.5 + log_kt, generator=seed)
    np.testing.assert_array_equal(fixed2, fixed)
    # monotone coupling: magnitudes grown by e^|log κ| (fixed centres) give a superset of spikes
    grow_f, grow_t = math.exp(abs(log_kf)), math.exp(abs(log_kt))
    more, _ = to_spikes(grow_f * force, grow_t * torque, dt=3, c_f=0.5, c_t=-0.5, generator=seed)
    assert np.all(more >= fixed)
    if abs(log_kf) > 0.5:
        assert more[:, 0].sum() > fixed[:, 0].sum()


# ---------------------------------------------------------------------------------------------
# sequential (Gauss-Seidel) vs synchronous population updates and Dale's law


def _chain_networks(p: np.ndarray, p_input: np.ndarray, kinds: str, seed: int):
    spec = ConnectivitySpec([5] * len(kinds), kinds, p, p_input, n_input=4, seed=seed)
    nets = [ConstrainedSpikingNetwork(spec, init_w=1.0, update=u).double() for u in ("synchronous", "sequential")]
    assert torch.equal(nets[0].weight, nets[1].weight) and torch.equal(nets[0].weight_in, nets[1].weight_in)
    return nets


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sequential_update_removes_one_synaptic_delay_per_forward_link(seed):
    """Population i sees this step's spikes of j < i (sequential) or last step's (synchronous).

    Along a feed-forward chain P0 → P1 → P2 → P3 (input to P0 only, zero initial state) the k-th
    population of the synchronous network is therefore the sequential one delayed by exactly k
    steps. P3 (E) receives only from the inhibitory P2: by Dale's law its current is never positive,
    so from rest it never fires (threshold b0 > 0). With only backward links (j > i) and
    self-connections, the two update orders coincide exactly."""
    x = (torch.rand(40, 3, 4, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) < 0.5).double()
    forward = np.zeros((4, 4))
    forward[0, 1] = forward[1, 2] = forward[2, 3] = 1.0
    sync, seq = _chain_networks(forward, np.array([1.0, 0.0, 0.0, 0.0]), "EEIE", seed)
    with torch.no_grad():
        a, b = sync(x), seq(x)
    for k in range(3):
        sl = slice(5 * k, 5 * k + 5)
        assert b[:, :, sl].sum() > 10, k  # the chain carries spikes to P2
        assert torch.all(a[:k, :, sl] == 0)
        assert torch.equal(a[k:, :, sl], b[: 40 - k, :, sl]), k
    assert not a[:, :, 15:].any() and not b[:, :, 15:].any()

    backward = np.tril(np.ones((4, 4)))  # pre j >= post i: links to lower indices and self-links
    sync, seq = _chain_networks(backward, np.ones(4), "EEIE", seed)
    with torch.no_grad():
        a, b = sync(x), seq(x)
    assert all(a[:, :, 5 * k : 5 * k + 5].any() for k in range(4))
    assert torch.equal(a, b)


# ---------------------------------------------------------------------------------------------
# Bernoulli masks of the barrel preset


def test_barrel_mask_blocks_follow_the_anatomical_tables():
    """Every (pre, post) population block of the recurrent mask and every thalamus → population
    block is an independent Bernoulli(p) draw: blocks with p = 0 (the '·' of the table, e.g.
    P3 → L2/3, L2/3 → L4, thalamus → P6, P8) are empty, the others hold a Binomial(size, p) count
    inside its exact two-sided quantiles (family-wise level 1e-3 over all 182 blocks)."""
    from iclr25.neuro.barrel_cortex import BARREL_CONNECTIVITY

    spec = ConnectivitySpec.barrel(scale=0.5, seed=11)
    rec, inp = spec.masks()
    onehot = torch.nn.functional.one_hot(torch.from_numpy(spec.population_index())).double()
    counts = (onehot.T @ rec.double() @ onehot).numpy()  # (pre pop, post pop)
    thal = inp.double().sum(0) @ onehot
    sizes = np.array(spec.sizes, dtype=np.int64)
    p_rec, p_thal = BARREL_CONNECTIVITY["recurrent"], BARREL_CONNECTIVITY["thalamic"]
    trials = np.concatenate([np.outer(sizes, sizes).ravel(), 200 * sizes])
    p = np.concatenate([p_rec.ravel(), p_thal])
    got = np.concatenate([counts.ravel(), thal.numpy()])
    assert np.all(got[p == 0] == 0)
    level = 1e-3 / len(p)
    lo, hi = binom.ppf(level / 2, trials, p), binom.isf(level / 2, trials, p)
    bad = np.flatnonzero((p > 0) & ((got < lo) | (got > hi)))
    assert bad.size == 0, [(divmod(int(i), 13) if i < 169 else ("thalamus", int(i) - 169)) for i in bad]
