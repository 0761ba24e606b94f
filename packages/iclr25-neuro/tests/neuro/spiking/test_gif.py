"""Acceptance 4: GIF equivalences (IF, uniform quantizer, step merging, sums), integer coding, bits.

Inputs are dyadic rationals (k/1024 and powers-of-two θ) where the equivalences are checked
sample by sample: float32 arithmetic on them is exact, so any mismatch is a logic error.
"""

import math

import pytest
import torch

from iclr25.neuro.spiking import (
    IF,
    GIFNeuron,
    gif_decode,
    gif_encode,
    gif_encode_int,
    gif_range,
    gif_step,
    lif_step,
    spike_bits,
)


def dyadic(gen, shape, lo, hi, denom=1024):
    return torch.randint(int(lo * denom), int(hi * denom) + 1, shape, generator=gen).float() / denom


@pytest.mark.parametrize("theta", [1.0, 0.5, 2.0])
def test_levels_2_equals_binary_if(theta):
    gen = torch.Generator().manual_seed(0)
    x = dyadic(gen, (60, 4, 9), -0.5, 1.5) * theta
    want = IF(threshold=theta)(x)
    state, got = None, []
    for k in range(x.shape[0]):
        s, state = gif_step(x[k], state, levels=2, v_th=theta)
        got.append(s)
    got = torch.stack(got)
    assert 0.1 < want.mean() < 0.9
    assert torch.equal(got, want)


@pytest.mark.parametrize("levels", [2, 3, 4, 16])
@pytest.mark.parametrize("rounding", ["floor", "round"])
def test_one_step_is_the_uniform_quantizer(levels, rounding):
    gen = torch.Generator().manual_seed(levels)
    theta = 0.25
    x = torch.randn(5000, generator=gen) * levels * theta
    s = gif_encode(x, levels, 1, v_th=theta, rounding=rounding)
    n = torch.floor(x / theta + (0.5 if rounding == "round" else 0.0))
    assert torch.equal(s[0], torch.clamp(n, 0, levels - 1))
    assert torch.equal(
        GIFNeuron(levels, 1, v_th=theta, rounding=rounding).decode(s), theta * torch.clamp(n, 0, levels - 1)
    )


@pytest.mark.parametrize("theta", [1.0, 0.5])
def test_one_gif_step_merges_m_if_steps(theta):
    gen = torch.Generator().manual_seed(7)
    n_cases = 10_000
    m = torch.randint(1, 16, (n_cases,), generator=gen)
    u0 = dyadic(gen, (n_cases,), 0, 1 - 1 / 1024) * theta  # u0 in [0, θ)
    c = dyadic(gen, (n_cases,), 0, 1) * theta  # c in [0, θ]
    checked = 0
    for mm in m.unique().tolist():
        idx = m == mm
        s_gif, st_gif = gif_step(mm * c[idx], gif_state(u0[idx]), levels=mm + 1, v_th=theta)
        v = u0[idx]
        count = torch.zeros_like(v)
        for _ in range(mm):
            s, st = lif_step(c[idx], lif_state(v), tau_m=math.inf, input_scale="none", threshold=theta, firing="ge")
            v, count = st.v, count + s
        assert torch.equal(s_gif, count)
        assert torch.equal(st_gif.u, v)
        assert torch.equal(count, torch.floor((u0[idx] + mm * c[idx]) / theta))
        checked += int(idx.sum())
    assert checked == n_cases


def gif_state(u):
    from iclr25.neuro.spiking import GIFState

    return GIFState(u)


def lif_state(v):
    from iclr25.neuro.spiking import LIFState

    return LIFState(v)


@pytest.mark.parametrize(("levels", "steps"), [(2, 8), (4, 4), (16, 2), (3, 5)])
def test_sum_over_steps_with_constant_input(levels, steps):
    gen = torch.Generator().manual_seed(levels * steps)
    theta = 0.5
    x = dyadic(gen, (4000,), 0, levels - 1) * theta  # unsaturated: 0 <= x <= (L-1)θ
    s = gif_encode(x, levels, steps, v_th=theta, drive="constant")
    assert torch.equal(s.sum(0), torch.floor(steps * x / theta))
    assert s.min() >= 0 and s.max() <= levels - 1


@pytest.mark.parametrize("bipolar", [False, True])
def test_initial_drive_is_the_real_twin_of_integer_coding(bipolar):
    gen = torch.Generator().manual_seed(3)
    levels, steps, theta = 4, 3, 0.25
    x = dyadic(gen, (3000,), -20, 20) * theta
    s = gif_encode(x, levels, steps, v_th=theta, bipolar=bipolar)
    q = torch.floor(x / theta).long()
    assert torch.equal(s, gif_encode_int(q, levels, steps, bipolar=bipolar).float())


def greedy_loop(q, levels, steps, bipolar):
    lo, hi = gif_range(levels, bipolar)
    u, out = q.clone(), []
    for _ in range(steps):
        s = torch.clamp(u, lo, hi)
        u = u - s
        out.append(s)
    return torch.stack(out)


@pytest.mark.parametrize("bipolar", [False, True])
@pytest.mark.parametrize(("levels", "steps"), [(2, 1), (2, 7), (3, 4), (4, 2), (16, 3), (5, 6)])
def test_gif_encode_int_is_exact(levels, steps, bipolar):
    gen = torch.Generator().manual_seed(levels + 100 * steps)
    q = torch.randint(-3 * levels * steps, 3 * levels * steps, (5000,), generator=gen)
    s = gif_encode_int(q, levels, steps, bipolar=bipolar)
    lo, hi = gif_range(levels, bipolar)
    assert s.shape == (steps, 5000) and s.dtype == q.dtype
    assert torch.equal(s.sum(0), torch.clamp(q, steps * lo, steps * hi))
    assert s.min() >= lo and s.max() <= hi
    assert torch.equal(s, greedy_loop(q, levels, steps, bipolar))
    assert torch.equal(gif_decode(s, 0.5), 0.5 * torch.clamp(q, steps * lo, steps * hi).float())


def test_ranges_and_ternary():
    assert gif_range(2) == (0, 1) and gif_range(3, True) == (-1, 1) and gif_range(16, True) == (-8, 7)
    assert gif_range(4, True) == (-2, 1)
    q = torch.arange(-20, 21)
    s = gif_encode_int(q, 3, 4, bipolar=True)
    assert set(s.unique().tolist()) == {-1, 0, 1}


@pytest.mark.parametrize(("levels", "steps"), [(2, 1), (2, 16), (4, 4), (16, 2), (3, 5)])
def test_spike_bits(levels, steps):
    assert spike_bits(levels, steps) == pytest.approx(steps * math.log2(levels), abs=1e-12)
    assert GIFNeuron(levels, steps).bits == spike_bits(levels, steps)


def test_neuron_shapes_and_decode():
    x = torch.randn(3, 5, generator=torch.Generator().manual_seed(0)) * 3
    neuron = GIFNeuron(levels=4, steps=2, v_th=0.5)
    s = neuron(x)
    assert s.shape == (2, 3, 5)
    assert torch.equal(neuron.decode(s), 0.5 * s.sum(0))
    assert torch.equal(neuron.decode(s), 0.5 * torch.clamp(torch.floor(x / 0.5), 0, 6))
    per_channel = GIFNeuron(4, 2, v_th=torch.tensor([0.5, 1, 1, 1, 2]))(x)
    assert per_channel.shape == (2, 3, 5)


def test_ste_gradient_and_lsq_threshold_gradient():
    theta = torch.tensor(0.5, requires_grad=True)
    x = torch.tensor([-0.3, 0.1, 0.7, 1.2, 1.9, 5.0], requires_grad=True)
    neuron = GIFNeuron(levels=4, steps=1, v_th=0.5)
    s, _ = gif_step(x, levels=4, v_th=theta)
    out = theta * s
    gx, gt = torch.autograd.grad(out.sum(), [x, theta])
    inside = (x / 0.5 >= 0) & (x / 0.5 < 4)
    assert torch.equal(gx, inside.float())  # ∂(θ s)/∂x = 1 inside the clip range
    lsq = torch.where(inside, s - x / 0.5, s)  # ∂(θ s)/∂θ = s − x/θ inside, s outside
    assert torch.allclose(gt, lsq.sum().detach(), atol=1e-6)
    # learnable threshold on the module
    neuron = GIFNeuron(levels=4, steps=2, v_th=0.5, learn_threshold=True)
    neuron.decode(neuron(x.detach())).sum().backward()
    assert neuron.v_th.grad is not None


def test_surrogate_gradient_option():
    x = torch.linspace(-1, 4, 101, requires_grad=True)
    s, _ = gif_step(x, levels=4, v_th=1.0, surrogate="triangle")
    (g,) = torch.autograd.grad(s.sum(), x)
    want = sum(torch.clamp(1 - (x.detach() - k).abs(), min=0) for k in (1, 2, 3))
    assert torch.allclose(g, want, atol=1e-6)


def test_gif_bad_input():
    for args, what in [((1, 2), "levels"), ((4, 0), "steps")]:
        with pytest.raises(ValueError, match=what):
            GIFNeuron(*args)
    with pytest.raises(ValueError, match="v_th"):
        GIFNeuron(4, 2, v_th=0.0)
    with pytest.raises(ValueError, match="rounding"):
        GIFNeuron(4, 2, rounding="ceil")
    with pytest.raises(TypeError, match="integer"):
        gif_encode_int(torch.zeros(3), 4, 2)
    with pytest.raises(TypeError, match="floating-point"):
        GIFNeuron(4, 2)(torch.zeros(3, dtype=torch.int64))
    with pytest.raises(ValueError, match="finite"):
        GIFNeuron(4, 2)(torch.tensor([float("nan")]))
    with pytest.raises(ValueError, match="levels"):
        spike_bits(1, 3)
    with pytest.raises(ValueError, match=r"\(2,\).*\(3,\)"):
        gif_step(torch.zeros(3), gif_state(torch.zeros(2)), levels=4)


@pytest.mark.parametrize("bipolar", [False, True])
def test_round_is_half_up_at_exact_half_levels(bipolar):
    # u/θ = k + 1/2 exactly (dyadic): round-half-up gives k + 1 for every k, where banker's
    # rounding (torch.round) would give the even neighbour and truncation k
    theta = 0.25
    k = torch.arange(-4, 4, dtype=torch.float32)
    x = (k + 0.5) * theta
    lo, hi = gif_range(8, bipolar)
    s = gif_encode(x, 8, 1, v_th=theta, bipolar=bipolar, rounding="round")
    assert torch.equal(s[0], torch.clamp(k + 1, lo, hi))
    s_floor = gif_encode(x, 8, 1, v_th=theta, bipolar=bipolar)
    assert torch.equal(s_floor[0], torch.clamp(k, lo, hi))


def test_hard_reset_zeroes_the_membrane_where_a_spike_is_emitted():
    # levels = 2: the hard-reset GIF is the hard-reset IF with v_reset = 0, step for step
    gen = torch.Generator().manual_seed(12)
    x = dyadic(gen, (40, 3, 7), -0.5, 1.5)
    want = IF(reset="hard", v_reset=0.0)(x)
    state, got = None, []
    for k in range(x.shape[0]):
        s, state = gif_step(x[k], state, levels=2, reset="hard")
        got.append(s)
    assert 0.1 < want.mean() < 0.9 and torch.equal(torch.stack(got), want)
    # multi-level: u = 2.5θ emits 2 and leaves 0 (soft would leave θ/2); u < θ emits 0 and keeps u
    s, st = gif_step(torch.tensor([1.25, 0.375]), levels=4, v_th=0.5, reset="hard")
    assert s.tolist() == [2.0, 0.0] and st.u.tolist() == [0.0, 0.375]


def test_learnable_per_channel_threshold_gets_the_lsq_gradient():
    # one step: decode = θ_c · clip(⌊x/θ_c⌋, 0, L−1); with STE, ∂/∂θ_c = Σ_rows (s − x/θ_c) inside
    # the clip range and s outside (acceptance: LSQ-style ∂o/∂θ = s − u/θ)
    gen = torch.Generator().manual_seed(4)
    theta = torch.tensor([0.25, 0.5, 1.0, 2.0])
    x = dyadic(gen, (64, 4), -2, 10)
    neuron = GIFNeuron(levels=4, steps=1, v_th=theta, learn_threshold=True)
    s = neuron(x)
    neuron.decode(s).sum().backward()
    z = x / theta
    inside = (z >= 0) & (z < 4)
    want = torch.where(inside, s[0] - z, s[0]).sum(0)
    # dyadic x and power-of-two θ: every term and the 64-term sums (< 2^20 ulps) are exact in float32
    assert torch.equal(neuron.v_th.grad, want)


def test_gif_functional_bad_input_and_no_in_place():
    with pytest.raises(ValueError, match="levels"):
        gif_encode(torch.zeros(3), 1, 2)
    with pytest.raises(ValueError, match="steps"):
        gif_encode(torch.zeros(3), 4, 0)
    with pytest.raises(ValueError, match="steps"):
        gif_encode_int(torch.zeros(3, dtype=torch.long), 4, 0)
    with pytest.raises(ValueError, match="levels"):
        gif_encode_int(torch.zeros(3, dtype=torch.long), 1, 2)
    with pytest.raises(ValueError, match="finite"):
        gif_step(torch.tensor([float("inf")]), levels=4)
    with pytest.raises(ValueError, match="v_th"):
        gif_step(torch.zeros(3), levels=4, v_th=torch.tensor([1.0, -1.0, 1.0]))
    with pytest.raises(ValueError, match=r"v_th of shape \(2,\)"):
        gif_step(torch.zeros(3), levels=4, v_th=torch.ones(2))
    x, u, q = torch.randn(5) * 3, torch.randn(5), torch.arange(-2, 3)
    before = [t.clone() for t in (x, u, q)]
    gif_step(x, gif_state(u), levels=4)
    gif_encode(x, 4, 3, drive="constant")
    gif_encode_int(q, 3, 2, bipolar=True)
    assert all(torch.equal(a, b) for a, b in zip((x, u, q), before, strict=True))
