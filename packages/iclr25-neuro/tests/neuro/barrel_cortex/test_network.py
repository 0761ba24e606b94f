"""Acceptance item 3 (vectorized network vs per-population NumPy reference) and bad input."""

import math

import numpy as np
import pytest
import torch

from iclr25.neuro.barrel_cortex import BarrelCortexRSNN


def _numpy_reference(model: BarrelCortexRSNN, x: np.ndarray, update: str) -> np.ndarray:
    """Explicit per-population loops in float64 NumPy (RSNN_bfd structure)."""
    p = {k: v.detach().double().numpy() for k, v in model.state_dict().items()}
    c = model.cortex
    spec, b0, beta = c.spec, c.b0, c.beta
    off = spec.offsets
    n_pop = len(spec.sizes)
    batch, _, t_steps, _ = x.shape

    def alif(cur, v, s, b, tau_m, tau_adp):
        alpha, rho = np.exp(-1 / tau_m), np.exp(-1 / tau_adp)
        b = rho * b + (1 - rho) * s
        big_b = b0 + beta * b
        v = alpha * v + (1 - alpha) * cur - big_b * s
        return (v - big_b > 0).astype(np.float64), v, b

    # thalamus
    th_cur = (
        np.concatenate(
            [
                x[:, 0] @ p["fc_force.weight"].T + p["fc_force.bias"],
                x[:, 1] @ p["fc_torque.weight"].T + p["fc_torque.bias"],
            ],
            -1,
        )
        @ p["fc_thalamus.weight"].T
        + p["fc_thalamus.bias"]
    )  # (B, T, 200)
    v = s = b = np.zeros((batch, 200))
    thal = []
    for t in range(t_steps):
        s, v, b = alif(th_cur[:, t], v, s, b, p["tau_m_thal"], p["tau_adp_thal"])
        thal.append(s)
    gain = 1 / spec.scale
    w = np.clip(p["cortex.weight"], 0, 1) * p["cortex.mask"]
    w_in = np.clip(p["cortex.weight_in"], 0, 1) * p["cortex.mask_in"]
    sign = [1.0 if k == "E" else -1.0 for k in spec.kinds]
    sl = [slice(off[i], off[i + 1]) for i in range(n_pop)]
    vs = [np.zeros((batch, spec.sizes[i])) for i in range(n_pop)]
    ss = [np.zeros_like(a) for a in vs]
    bs = [np.zeros_like(a) for a in vs]
    out = []
    for t in range(t_steps):
        prev = list(ss)
        for i in range(n_pop):
            cur = thal[t] @ w_in[:, sl[i]]  # the thalamus is not scaled, so no gain
            for j in range(n_pop):
                src = ss[j] if (update == "sequential" and j < i) else prev[j]
                cur = cur + sign[j] * (src @ w[sl[j], sl[i]]) * gain
            ss[i], vs[i], bs[i] = alif(cur, vs[i], prev[i], bs[i], p["cortex.tau_m"][sl[i]], p["cortex.tau_adp"][sl[i]])
        out.append(np.concatenate(ss, 1))
    return np.stack(out, 1)  # (B, T, n)


@pytest.mark.parametrize("update", ["synchronous", "sequential"])
def test_network_matches_numpy_reference(update):
    torch.manual_seed(0)
    model = BarrelCortexRSNN(scale=0.05, update=update, init_w=0.3, seed=2).double()
    with torch.no_grad():  # perturb time constants so per-neuron values matter
        model.cortex.tau_m.mul_(torch.empty_like(model.cortex.tau_m).uniform_(0.7, 1.3))
    x = (torch.rand(3, 2, 30, 93, generator=torch.Generator().manual_seed(1)) < 0.3).double()
    _, spikes = model(x, record=True)
    ref = _numpy_reference(model, x.numpy(), update)
    assert spikes.shape == (3, 30, model.n_neurons)
    assert ref.sum() > 50  # the test must exercise spiking
    np.testing.assert_array_equal(spikes.detach().numpy(), ref)


def test_update_modes_differ_and_official_state_is_seeded():
    torch.manual_seed(0)
    x = (torch.rand(2, 2, 10, 93) < 0.3).float()
    a = BarrelCortexRSNN(scale=0.05, init_w=0.3, update="synchronous")(x, record=True)[1]
    b = BarrelCortexRSNN(scale=0.05, init_w=0.3, update="sequential")(x, record=True)[1]
    assert not torch.equal(a, b)
    m = BarrelCortexRSNN(scale=0.05, init_state="official")
    assert torch.equal(m(x, record=True)[1], m(x, record=True)[1])


def test_scores_and_param_groups():
    m = BarrelCortexRSNN(scale=0.05)
    x = (torch.rand(2, 2, 6, 93) < 0.3).float()
    scores = m(x)
    assert scores.shape == (2, 3)
    torch.testing.assert_close(scores.sum(1), torch.full((2,), 5 / 6))  # softmax summed over t >= 1, / T
    groups = m.param_groups(0.01)
    assert [g["lr"] for g in groups] == [0.01, 0.05, 0.02]
    assert sum(len(g["params"]) for g in groups) == len(list(m.parameters()))
    assert m.loss(scores, torch.tensor([0, 1])).ndim == 0
    official = BarrelCortexRSNN(scale=0.05, seed=0, readout="nll_mean_prob")
    assert official.loss(scores, torch.tensor([0, 1])) > 0


def test_five_dim_official_layout_uses_sweep_zero():
    m = BarrelCortexRSNN(scale=0.05)
    x = (torch.rand(2, 2, 3, 6, 93) < 0.3).float()
    torch.testing.assert_close(m(x), m(x[:, :, 0]))


@pytest.mark.parametrize(
    "x, match",
    [
        (torch.zeros(2, 6, 93), "layout"),
        (torch.zeros(2, 2, 6, 92), "layout"),
        (torch.full((1, 2, 4, 93), 0.5), "0/1"),
        (torch.full((1, 2, 4, 93), float("nan")), "NaN"),
        (torch.zeros(1, 2, 0, 4, 93), "at least one sweep"),  # official 5-D layout, no sweep to take
    ],
)
def test_bad_input(x, match):
    m = BarrelCortexRSNN(scale=0.05)
    with pytest.raises(ValueError, match=match):
        m(x)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"update": "async"}, "update must be one of"),
        ({"init_state": "random"}, "init_state must be one of"),
        ({"backend": "cuda"}, "backend must be one of"),
        ({"readout": "mse"}, "readout must be one of"),
        ({"n_whisker_inputs": 0}, "n_whisker_inputs must be an int >= 1"),
        ({"n_whisker_inputs": 93.0}, "n_whisker_inputs must be an int >= 1"),
        ({"n_classes": True}, "n_classes must be an int >= 1"),
        ({"n_classes": 2.5}, "n_classes must be an int >= 1"),
    ],
)
def test_bad_model_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        BarrelCortexRSNN(scale=0.05, **kwargs)


def test_negative_adaptation_strength_is_refused():
    from iclr25.neuro.barrel_cortex import ConnectivitySpec, ConstrainedSpikingNetwork

    spec = ConnectivitySpec([3, 2], ["E", "I"], np.ones((2, 2)), np.ones(2), n_input=4)
    # β < 0 would lower the threshold after every spike (runaway firing) instead of raising it
    with pytest.raises(ValueError, match="beta must be a finite float >= 0"):
        ConstrainedSpikingNetwork(spec, beta=-0.5)
    assert ConstrainedSpikingNetwork(spec, beta=0).beta == 0.0  # no adaptation is allowed


def test_rates_allowed_empty_batch_and_input_untouched():
    m = BarrelCortexRSNN(scale=0.05)
    x = torch.full((1, 2, 4, 93), 0.5)
    keep = x.clone()
    assert m(x, allow_rates=True).shape == (1, 3)
    assert torch.equal(x, keep)
    scores, spikes = m(torch.zeros(0, 2, 4, 93), record=True)
    assert scores.shape == (0, 3) and spikes.shape == (0, 4, m.n_neurons)
    with pytest.raises(ValueError, match="scale"):
        BarrelCortexRSNN(scale=-1.0)


def test_readout_losses_closed_form():
    scores = torch.tensor([[0.5, 0.3, 0.1], [0.2, 0.2, 0.5]], dtype=torch.float64)
    y = torch.tensor([0, 2])
    # official: cross-entropy with the averaged probabilities used as logits (RSNN_bfd)
    official = -(scores[[0, 1], y] - torch.logsumexp(scores, 1)).mean()
    nll = -torch.log(scores[[0, 1], y]).mean()
    m_off = BarrelCortexRSNN(scale=0.05, readout="official")
    m_nll = BarrelCortexRSNN(scale=0.05, readout="nll_mean_prob")
    torch.testing.assert_close(m_off.loss(scores, y), official, rtol=1e-12, atol=0)
    torch.testing.assert_close(m_nll.loss(scores, y), nll, rtol=1e-12, atol=0)


def test_param_groups_give_each_time_constant_its_rate():
    m = BarrelCortexRSNN(scale=0.05)
    rest, adp, mem = m.param_groups(0.008)
    ids = [{id(p) for p in g["params"]} for g in (rest, adp, mem)]
    assert ids[1] == {id(m.cortex.tau_adp), id(m.tau_adp_thal)} and adp["lr"] == pytest.approx(5 * 0.008)
    assert ids[2] == {id(m.cortex.tau_m), id(m.tau_m_thal)} and mem["lr"] == pytest.approx(2 * 0.008)
    assert id(m.cortex.weight) in ids[0] and id(m.fc_out.weight) in ids[0] and rest["lr"] == 0.008
    assert not (ids[0] & (ids[1] | ids[2]))
    with pytest.raises(ValueError, match="lr"):
        m.param_groups(0.0)


def test_neuron_constants_and_weight_init():
    """ALIF τ_m 10, τ_adp 5 (learnable), b0 = init_b, β 1.8; weights U(0, init_w) on the mask only."""
    m = BarrelCortexRSNN(scale=0.25, init_w=0.06, init_b=0.04, seed=0)
    c = m.cortex
    for tau, value in ((c.tau_m, 10.0), (m.tau_m_thal, 10.0), (c.tau_adp, 5.0), (m.tau_adp_thal, 5.0)):
        assert tau.requires_grad and torch.all(tau == value)
    assert m.tau_m_thal.shape == (200,) and c.tau_m.shape == (m.n_neurons,)
    assert c.b0 == 0.04 and c.beta == 1.8
    for w, mask in ((c.weight, c.mask), (c.weight_in, c.mask_in)):
        on = w.detach()[mask].double()
        assert torch.all(w.detach()[~mask] == 0) and on.min() >= 0 and on.max() <= 0.06
        # U(0, a): mean a/2, variance a²/12
        sd = 0.06 / math.sqrt(12 * on.numel())
        assert abs(float(on.mean()) - 0.03) <= 4 * sd


def test_official_initial_state_is_used():
    x = (torch.rand(2, 2, 8, 93, generator=torch.Generator().manual_seed(0)) < 0.3).float()
    off = BarrelCortexRSNN(scale=0.05, init_w=0.3, init_state="official", seed=1)
    zero = BarrelCortexRSNN(scale=0.05, init_w=0.3, init_state="zeros", seed=1)
    v, s, b = off.cortex.initial_state(2, torch.device("cpu"), torch.float32)
    # RSNN_bfd: v and s are torch.rand from seed 515 (non-binary "spikes"), b = b0
    gen = torch.Generator().manual_seed(515)
    want_v, want_s = torch.rand(2, off.n_neurons, generator=gen), torch.rand(2, off.n_neurons, generator=gen)
    assert torch.equal(v, want_v) and torch.equal(s, want_s) and torch.all(b == off.cortex.b0)
    assert all(torch.all(t == 0) for t in zero.cortex.initial_state(2, torch.device("cpu"), torch.float32))
    with torch.no_grad():
        a, z = off(x, record=True)[1], zero(x, record=True)[1]
    assert not torch.equal(a, z)  # same weights and input, so only the initial state differs


def test_rates_outside_unit_interval_rejected():
    m = BarrelCortexRSNN(scale=0.05)
    for value in (1.5, -0.2):
        with pytest.raises(ValueError, match=r"\[0, 1\]"):
            m(torch.full((1, 2, 4, 93), value), allow_rates=True)
    with pytest.raises(ValueError, match="layout"):
        m(torch.zeros(1, 2, 1, 4, 93, 1))  # rank 6
    x5 = (torch.rand(2, 2, 3, 5, 93, generator=torch.Generator().manual_seed(3)) < 0.3).float()
    keep = x5.clone()
    m(x5)
    assert torch.equal(x5, keep)


def test_constrained_network_with_a_custom_spec():
    """The generic network on a non-barrel table (2 populations, full connectivity) against an
    explicit NumPy ALIF loop; the sign of every synapse follows the presynaptic kind."""
    from iclr25.neuro.barrel_cortex import ConnectivitySpec, ConstrainedSpikingNetwork

    spec = ConnectivitySpec([3, 2], ["E", "I"], np.ones((2, 2)), np.ones(2), n_input=4, seed=0)
    net = ConstrainedSpikingNetwork(spec, init_w=0.8, init_b=0.04).double()
    assert net.mask.all() and net.mask_in.all()  # p = 1: every synapse exists
    x = (torch.rand(12, 2, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64) < 0.5).double()
    with torch.no_grad():
        out = net(x).numpy()
    w = net.weight.detach().numpy() * np.array([1, 1, 1, -1, -1])[:, None]
    w_in = net.weight_in.detach().numpy()
    alpha, rho = np.exp(-1 / 10.0), np.exp(-1 / 5.0)
    v = s = b = np.zeros((2, 5))
    ref = []
    for t in range(12):
        cur = x[t].numpy() @ w_in + s @ w
        b = rho * b + (1 - rho) * s
        big_b = 0.04 + 1.8 * b
        v = alpha * v + (1 - alpha) * cur - big_b * s
        s = (v - big_b > 0).astype(np.float64)
        ref.append(s)
    ref = np.stack(ref)
    assert out.shape == (12, 2, 5) and ref[..., 3:].any() and ref[..., :3].any()  # both kinds fire
    np.testing.assert_array_equal(out, ref)
    # no input table: no input synapses, so a network started at rest stays silent
    quiet = ConstrainedSpikingNetwork(ConnectivitySpec([3, 2], ["E", "I"], np.ones((2, 2)), None, n_input=4))
    assert not quiet.mask_in.any() and not quiet(x.float()).any()
