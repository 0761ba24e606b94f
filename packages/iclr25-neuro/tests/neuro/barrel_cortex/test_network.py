"""Acceptance item 3 (vectorized network vs per-population NumPy reference) and bad input."""

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
    ],
)
def test_bad_input(x, match):
    m = BarrelCortexRSNN(scale=0.05)
    with pytest.raises(ValueError, match=match):
        m(x)


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
