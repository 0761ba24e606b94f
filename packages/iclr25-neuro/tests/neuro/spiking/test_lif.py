"""Acceptance 1 (LIF vs a NumPy loop), IF, module state, T = 0 and bad input."""

import math

import numpy as np
import pytest
import torch

from iclr25.neuro.spiking import IF, LIF, LIFState, lif_multistep, lif_step


def numpy_lif(x, tau, threshold, reset, v_reset, input_scale, inclusive=False):
    """The equations of the spec, as a plain float32 NumPy loop (α correctly rounded from float64)."""
    alpha = np.exp(-1.0 / np.asarray(tau, np.float64)).astype(np.float32)
    c = (np.float32(1) - alpha) if input_scale == "one_minus_alpha" else np.float32(1)
    v = np.zeros(x.shape[1:], np.float32)
    spikes, vs = [], []
    for k in range(x.shape[0]):
        h = alpha * v + c * x[k]
        s = ((h - np.float32(threshold) >= 0) if inclusive else (h - np.float32(threshold) > 0)).astype(np.float32)
        if reset == "soft":
            v = h - np.float32(threshold) * s
        elif reset == "hard":
            v = h * (1 - s) + np.float32(v_reset) * s
        else:
            v = h
        spikes.append(s)
        vs.append(v)
    return np.stack(spikes), np.stack(vs)


def agreeing_taus(rng, n):
    """Random τ in [2, 20] whose float32 α = exp(-1/τ) from torch is the correctly rounded value.

    NumPy's float32 exp differs from torch's in the last ulp for about half of all inputs; the
    check isolates the update loop from that, so spikes and membranes must agree bit for bit.
    """
    cand = rng.uniform(2.0, 20.0, size=20 * n).astype(np.float32)
    exact = np.exp(-1.0 / cand.astype(np.float64)).astype(np.float32)
    ours = torch.exp(-1.0 / torch.from_numpy(cand)).numpy()
    return cand[exact == ours][:n]


@pytest.mark.parametrize("reset", ["soft", "hard", "none"])
@pytest.mark.parametrize("input_scale", ["one_minus_alpha", "none"])
def test_lif_equals_numpy_loop(reset, input_scale):
    rng = np.random.default_rng(11)
    T, B, N = 50, 3, 7
    tau = agreeing_taus(rng, N)
    gain = 4.0 if input_scale == "one_minus_alpha" else 0.6  # both regimes fire often
    x = (rng.standard_normal((T, B, N)) * gain + gain / 2).astype(np.float32)
    threshold, v_reset = 0.8, -0.2
    want_s, want_v = numpy_lif(x, tau, threshold, reset, v_reset, input_scale)
    assert 0.05 < want_s.mean() < 0.95, "the test must exercise firing and resets"

    xt, taut = torch.from_numpy(x), torch.from_numpy(tau)
    state, got_s, got_v = None, [], []
    for k in range(T):  # functional single steps
        s, state = lif_step(
            xt[k], state, tau_m=taut, threshold=threshold, reset=reset, v_reset=v_reset, input_scale=input_scale
        )
        got_s.append(s)
        got_v.append(state.v)
    assert np.array_equal(torch.stack(got_s).numpy(), want_s)
    assert np.abs(torch.stack(got_v).numpy() - want_v).max() < 1e-6

    layer = LIF(shape=(N,), threshold=threshold, reset=reset, v_reset=v_reset, input_scale=input_scale)
    layer.tau_m.copy_(taut)
    spikes, final = layer(xt, return_state=True)  # multi-step module
    assert np.array_equal(spikes.numpy(), want_s)
    assert np.abs(final.v.numpy() - want_v[-1]).max() < 1e-6


def test_if_fires_at_threshold_and_lif_does_not():
    x = torch.tensor([[0.5], [0.5], [0.25]])
    assert IF(threshold=1.0)(x).flatten().tolist() == [0.0, 1.0, 0.0]  # 0.5 + 0.5 == θ fires (≥)
    lif = LIF(tau_m=math.inf, input_scale="none", threshold=1.0)  # same dynamics, strict >
    assert lif(x).flatten().tolist() == [0.0, 0.0, 1.0]


def test_if_equals_numpy_integrator():
    rng = np.random.default_rng(2)
    x = rng.uniform(0, 0.7, size=(40, 5)).astype(np.float32)
    want_s, _ = numpy_lif(x, np.float32(np.inf), 1.0, "soft", 0.0, "none", inclusive=True)
    assert np.array_equal(IF()(torch.from_numpy(x)).numpy(), want_s)


def test_detach_reset_changes_only_gradients():
    gen = torch.Generator().manual_seed(0)
    x = (torch.randn(20, 4, generator=gen) * 3).requires_grad_()
    a, _ = lif_multistep(x, surrogate="atan")
    b, _ = lif_multistep(x, surrogate="atan", detach_reset=True)
    assert torch.equal(a, b)
    ga = torch.autograd.grad(a.sum(), x)[0]
    gb = torch.autograd.grad(b.sum(), x)[0]
    assert not torch.allclose(ga, gb)


def test_module_keeps_state_until_reset_and_matches_one_long_run():
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(30, 2, 5, generator=gen) * 3
    whole = LIF()(x)
    layer = LIF()
    parts = torch.cat([layer(x[:10]), layer(x[10:])])
    assert torch.equal(whole, parts)
    layer.reset()
    assert layer.state is None and torch.equal(layer(x), whole)
    explicit, st = lif_multistep(x[:10])
    rest, _ = lif_multistep(x[10:], st)
    assert torch.equal(torch.cat([explicit, rest]), whole)


def test_learnable_tau_gets_gradient():
    layer = LIF(shape=(5,), learn_tau=True)
    x = torch.randn(20, 3, 5, generator=torch.Generator().manual_seed(0)) * 5
    layer(x).sum().backward()
    assert layer.tau_m.grad is not None and layer.tau_m.grad.abs().sum() > 0


def test_empty_time_gives_empty_output_of_right_shape():
    x = torch.zeros(0, 3, 4)
    assert LIF()(x).shape == (0, 3, 4)
    s, st = lif_multistep(x)
    assert s.shape == (0, 3, 4) and st.v.shape == (3, 4)


def test_caller_tensors_are_not_modified():
    gen = torch.Generator().manual_seed(4)
    x, v = torch.randn(10, 3, generator=gen) * 3, torch.randn(3, generator=gen)
    x0, v0 = x.clone(), v.clone()
    lif_multistep(x, LIFState(v), reset="hard")
    lif_step(x[0], LIFState(v))
    assert torch.equal(x, x0) and torch.equal(v, v0)


def test_bad_input():
    with pytest.raises(TypeError, match="floating-point"):
        LIF()(torch.ones(3, 2, dtype=torch.int32))
    with pytest.raises(TypeError, match="floating-point"):
        lif_step(torch.ones(2, dtype=torch.int64))
    for kwargs, what in [
        ({"threshold": 0.0}, "threshold"),
        ({"threshold": -1.0}, "threshold"),
        ({"tau_m": 0.0}, "tau_m"),
        ({"tau_m": -3.0}, "tau_m"),
        ({"reset": "zero"}, "reset"),
        ({"input_scale": "half"}, "input_scale"),
        ({"firing": ">"}, "firing"),
    ]:
        with pytest.raises(ValueError, match=what):
            LIF(**kwargs)
    with pytest.raises(ValueError, match="finite"):
        LIF()(torch.tensor([[0.0, float("nan")]]))
    with pytest.raises(ValueError, match="finite"):
        lif_step(torch.tensor([float("inf")]))
    LIF(validate=False)(torch.tensor([[0.0, float("nan")]]))  # the check can be turned off
    with pytest.raises(ValueError, match=r"\(3, 4\).*\(3, 5\)"):
        LIF()(torch.zeros(2, 3, 5), state=LIFState(torch.zeros(3, 4)))
    with pytest.raises(ValueError, match=r"\(2,\).*\(3,\)"):
        lif_step(torch.zeros(3), LIFState(torch.zeros(2)))
    with pytest.raises(ValueError, match="tau_m of shape"):
        lif_multistep(torch.zeros(2, 3, 5), tau_m=torch.ones(4))
    with pytest.raises(ValueError, match="backend"):
        LIF(backend="cuda")


@pytest.mark.parametrize("reset", ["soft", "hard"])
def test_detach_reset_gradient_equals_a_loop_with_a_detached_reset_term(reset):
    # independent of the library's update code: the loop below writes the reset with s.detach()
    # (and, for the contrast, without); only `spike` (its gradient is acceptance 3) is shared
    from iclr25.neuro.spiking import spike

    gen = torch.Generator().manual_seed(8)
    x = (torch.randn(20, 6, generator=gen, dtype=torch.float64) * 3 + 0.5).requires_grad_()
    w = torch.randn(20, 6, generator=gen, dtype=torch.float64)
    alpha, theta, v_reset = math.exp(-1 / 10.0), 0.9, -0.2

    def manual(detach):
        v, out = torch.zeros(6, dtype=torch.float64), []
        for k in range(20):
            h = alpha * v + (1 - alpha) * x[k]
            s = spike(h - theta, "atan")
            sr = s.detach() if detach else s
            v = h - theta * sr if reset == "soft" else h * (1 - sr) + v_reset * sr
            out.append(s)
        return torch.stack(out)

    for detach in (False, True):
        got, _ = lif_multistep(x, reset=reset, threshold=theta, v_reset=v_reset, detach_reset=detach)
        want = manual(detach)
        assert torch.equal(got, want)
        g_got, g_want = (torch.autograd.grad((s * w).sum(), x)[0] for s in (got, want))
        torch.testing.assert_close(g_got, g_want, rtol=1e-12, atol=1e-12)  # same float64 operations
    g_plain, g_detached = (torch.autograd.grad((manual(d) * w).sum(), x)[0] for d in (False, True))
    assert (g_plain - g_detached).abs().max() > 1e-3, "the seed must make the two rules distinguishable"


def test_learned_tau_below_the_floor_is_clamped_not_rejected():
    # LIF(learn_tau=True) documents τ_m clamped to >= 1e-2·Δt in the forward pass: a τ that drifts
    # to <= 0 during training runs as τ = 1e-2·Δt (α = e^-100) instead of raising mid-training
    x = torch.randn(12, 2, 3, generator=torch.Generator().manual_seed(6)) * 2
    floor = LIF(shape=(3,), tau_m=1e-2)(x)
    for bad in (1e-3, 0.0, -4.0):
        layer = LIF(shape=(3,), learn_tau=True)
        with torch.no_grad():
            layer.tau_m.fill_(bad)
        assert torch.equal(layer(x), floor)
    layer = LIF(shape=(3,), learn_tau=True)
    with torch.no_grad():
        layer.tau_m.fill_(float("nan"))
    with pytest.raises(ValueError, match="tau_m"):
        layer(x)


def test_functional_ops_validate_their_own_input():
    with pytest.raises(ValueError, match="finite"):
        lif_multistep(torch.tensor([[0.0, float("inf")]]))
    lif_multistep(torch.tensor([[0.0, float("nan")]]), validate=False)
    with pytest.raises(TypeError, match=r"torch\.Tensor"):
        lif_step(np.ones(3, np.float32))
    with pytest.raises(TypeError, match=r"torch\.Tensor"):
        LIF()(np.ones((2, 3), np.float32))
    # a τ_m that broadcasts to a larger shape must not silently grow the state
    with pytest.raises(ValueError, match=r"tau_m of shape \(2, 1, 5\).*\(3, 5\)"):
        lif_step(torch.zeros(3, 5), tau_m=torch.full((2, 1, 5), 5.0))
    with pytest.raises(ValueError, match=r"\(3, 4\).*\(3, 5\)"):
        lif_multistep(torch.zeros(2, 3, 5), LIFState(torch.zeros(3, 4)))
