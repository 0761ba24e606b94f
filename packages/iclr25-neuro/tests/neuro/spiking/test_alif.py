"""Acceptance 2: ALIF equals a NumPy transcription of RSNN_bfd's update, and the reset order matters."""

import numpy as np
import pytest
import torch

from iclr25.neuro.spiking import ALIF, ALIFState, alif_initial_state, alif_step

B0, BETA = 0.04, 1.8


def numpy_alif(x, tau_m, tau_adp, wrong_order=False):
    """RSNN_bfd mem_update_adp in float32 NumPy (b, B, v with -B·s_{k-1}, then s).

    ``wrong_order`` resets after firing (v -= B_k s_k at the end of step k), the tempting "fix".
    """
    alpha = np.exp(-1.0 / tau_m.astype(np.float64)).astype(np.float32)
    rho = np.exp(-1.0 / tau_adp.astype(np.float64)).astype(np.float32)
    v = np.zeros(x.shape[1:], np.float32)
    s = np.zeros_like(v)
    b = np.zeros_like(v)
    out = []
    for k in range(x.shape[0]):
        b = rho * b + (1 - rho) * s
        big_b = np.float32(B0) + np.float32(BETA) * b
        if wrong_order:
            v = v * alpha + (1 - alpha) * x[k]
            s = (v - big_b > 0).astype(np.float32)
            v = v - big_b * s
        else:
            v = v * alpha + (1 - alpha) * x[k] - big_b * s * np.float32(1.0)
            s = (v - big_b > 0).astype(np.float32)
        out.append(s)
    return np.stack(out), v, b


def agreeing_taus(rng, n, lo, hi):
    """Random τ whose float32 exp(-1/τ) from torch is correctly rounded (see test_lif.agreeing_taus)."""
    cand = rng.uniform(lo, hi, size=20 * n).astype(np.float32)
    exact = np.exp(-1.0 / cand.astype(np.float64)).astype(np.float32)
    return cand[exact == torch.exp(-1.0 / torch.from_numpy(cand)).numpy()][:n]


def _data():
    rng = np.random.default_rng(515)
    T, B, N = 200, 4, 16
    tau_m, tau_adp = agreeing_taus(rng, N, 3.0, 20.0), agreeing_taus(rng, N, 2.0, 10.0)
    x = (rng.standard_normal((T, B, N)) * 0.6 + 0.3).astype(np.float32)
    return x, tau_m, tau_adp


def test_alif_equals_numpy_reference_and_not_the_wrong_order():
    x, tau_m, tau_adp = _data()
    want, want_v, want_b = numpy_alif(x, tau_m, tau_adp)
    wrong, _, _ = numpy_alif(x, tau_m, tau_adp, wrong_order=True)
    assert 0.02 < want.mean() < 0.6

    layer = ALIF(16)
    with torch.no_grad():
        layer.tau_m.copy_(torch.from_numpy(tau_m))
        layer.tau_adp.copy_(torch.from_numpy(tau_adp))
    spikes, state = layer(torch.from_numpy(x), return_state=True)
    assert np.array_equal(spikes.detach().numpy(), want)
    assert np.abs(state.v.detach().numpy() - want_v).max() < 1e-5
    assert np.abs(state.b.detach().numpy() - want_b).max() < 1e-6
    # the test can catch an implementation that resets after firing
    assert not np.array_equal(want, wrong)
    assert (want != wrong).sum() > 10

    # functional steps give the same train
    st, steps = None, []
    xt = torch.from_numpy(x)
    for k in range(x.shape[0]):
        s, st = alif_step(xt[k], st, tau_m=torch.from_numpy(tau_m), tau_adp=torch.from_numpy(tau_adp))
        steps.append(s)
    assert np.array_equal(torch.stack(steps).numpy(), want)


def test_alif_gradients_reach_time_constants_and_input():
    x, _, _ = _data()
    xt = torch.from_numpy(x[:50]).requires_grad_()
    layer = ALIF(16)
    layer(xt).sum().backward()
    assert layer.tau_m.grad.abs().sum() > 0 and layer.tau_adp.grad.abs().sum() > 0
    assert xt.grad.abs().sum() > 0


def test_official_initial_state():
    gen = torch.Generator().manual_seed(0)
    st = alif_initial_state((3, 5), init="official", b0=0.04, generator=gen)
    assert torch.all(st.b == 0.04) and st.v.min() >= 0 and st.v.max() < 1 and st.s.min() >= 0 and st.s.max() < 1
    z = alif_initial_state((3, 5))
    assert all(torch.equal(t, torch.zeros(3, 5)) for t in z)


def test_alif_bad_input():
    for kwargs, what in [({"tau_m": 0.0}, "tau_m"), ({"tau_adp": -1.0}, "tau_adp"), ({"beta": -1.0}, "beta")]:
        with pytest.raises(ValueError, match=what):
            ALIF(4, **kwargs)
    with pytest.raises(ValueError, match="n must be"):
        ALIF(0)
    with pytest.raises(ValueError, match=r"\(T, \.\.\., 4\)"):
        ALIF(4)(torch.zeros(3, 2, 5))
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(2, 4\)"):
        ALIF(4)(torch.zeros(3, 2, 4), state=ALIFState(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(2, 3)))
    with pytest.raises(TypeError, match="floating-point"):
        alif_step(torch.zeros(4, dtype=torch.int64))
    with pytest.raises(ValueError, match="finite"):
        ALIF(2)(torch.tensor([[[float("nan"), 0.0]]]))
    assert ALIF(4)(torch.zeros(0, 2, 4)).shape == (0, 2, 4)


def test_module_keeps_state_until_reset_and_official_init():
    x, _, _ = _data()
    xt = torch.from_numpy(x[:60])
    whole = ALIF(16)(xt)
    layer = ALIF(16)
    parts = torch.cat([layer(xt[:25]), layer(xt[25:])])  # continues from the stored (v, s, b)
    assert torch.equal(whole, parts)
    assert not torch.equal(layer(xt[:25]), whole[:25]), "the stored state must change the next call"
    layer.reset()
    assert layer.state is None and torch.equal(layer(xt), whole)
    # init="official" draws v, s ~ U[0, 1) and b = b0 from the given generator
    official = ALIF(16, init="official")(xt, generator=torch.Generator().manual_seed(3))
    st = alif_initial_state(xt.shape[1:], init="official", b0=B0, generator=torch.Generator().manual_seed(3))
    assert torch.equal(official, ALIF(16)(xt, state=st))


def test_learned_time_constants_are_clamped_in_the_forward_pass():
    # RSNN_bfd leaves τ unconstrained; the core floors it at 1e-2·Δt (α, ρ = e^-100) instead of
    # producing exp(+x) growth for τ <= 0
    x, _, _ = _data()
    xt = torch.from_numpy(x[:30])
    floor = ALIF(16, tau_m=1e-2, tau_adp=1e-2)(xt)
    layer = ALIF(16)
    with torch.no_grad():
        layer.tau_m.fill_(-2.0)
        layer.tau_adp.fill_(0.0)
    assert torch.equal(layer(xt), floor)


def test_alif_step_bad_input():
    with pytest.raises(ValueError, match="finite"):
        alif_step(torch.tensor([float("inf"), 0.0]))
    alif_step(torch.tensor([float("nan"), 0.0]), validate=False)
    with pytest.raises(ValueError, match=r"\(3,\).*\(4,\)"):
        alif_step(torch.zeros(4), ALIFState(torch.zeros(4), torch.zeros(3), torch.zeros(4)))
    with pytest.raises(ValueError, match=r"tau_adp of shape \(2, 1, 4\).*\(3, 4\)"):
        alif_step(torch.zeros(3, 4), tau_adp=torch.full((2, 1, 4), 5.0))
    with pytest.raises(ValueError, match="tau_m"):
        alif_step(torch.zeros(4), tau_m=-1.0)


def test_caller_tensors_are_not_modified():
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(10, 3, 4, generator=gen)
    st = ALIFState(torch.rand(3, 4, generator=gen), (torch.rand(3, 4, generator=gen) > 0.5).float(), torch.rand(3, 4))
    before = [t.clone() for t in (x, *st)]
    ALIF(4)(x, state=st)
    alif_step(x[0], st)
    assert all(torch.equal(a, b) for a, b in zip((x, *st), before, strict=True))
