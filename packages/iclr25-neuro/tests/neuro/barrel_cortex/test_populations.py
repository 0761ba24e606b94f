"""Acceptance items 1 and 2: population table, probability tables, masks, Dale's law."""

from pathlib import Path

import numpy as np
import pytest
import torch

from iclr25.neuro.barrel_cortex import BARREL_CONNECTIVITY, BARREL_POPULATIONS, BarrelCortexRSNN, ConnectivitySpec

REF = Path("/work/shared/papers/neuro/data/barrel_cortex")


def test_population_table():
    assert sum(p.size for p in BARREL_POPULATIONS) == 4218
    assert {i for i, p in enumerate(BARREL_POPULATIONS) if p.kind == "E"} == {0, 1, 4}
    assert sum(p.size for p in BARREL_POPULATIONS if p.kind == "E") == 3606


@pytest.mark.skipif(not REF.exists(), reason="reference arrays from RSNN_bfd not present on this machine")
def test_tables_equal_reference_arrays():
    exc, inh = np.load(REF / "Exc_AlltoAll_prob.npy"), np.load(REF / "Inh_AlltoAll_prob.npy")
    thal = np.load(REF / "Exc_ThtoAll_prob.npy")[0]
    # the embedded values are rounded to 4 decimals: error <= 5e-5
    np.testing.assert_allclose(BARREL_CONNECTIVITY["excitatory"], exc, atol=1e-4, rtol=0)
    np.testing.assert_allclose(BARREL_CONNECTIVITY["inhibitory"], inh, atol=1e-4, rtol=0)
    np.testing.assert_allclose(BARREL_CONNECTIVITY["thalamic"], thal, atol=1e-4, rtol=0)


def test_e_and_i_tables_disjoint_and_match_kinds():
    e, i = BARREL_CONNECTIVITY["excitatory"], BARREL_CONNECTIVITY["inhibitory"]
    assert not ((e > 0) & (i > 0)).any()
    kinds = np.array([p.kind for p in BARREL_POPULATIONS])
    assert ((e > 0).any(1) <= (kinds == "E")).all() and ((i > 0).any(1) <= (kinds == "I")).all()


def test_expected_and_realized_synapses():
    spec = ConnectivitySpec.barrel(scale=1.0, seed=0)
    assert spec.expected_synapses() == pytest.approx(1.2435e6, rel=5e-3)
    rec, inp = spec.masks()
    assert rec.shape == (4218, 4218) and inp.shape == (200, 4218)
    count = int(rec.sum())
    assert abs(count - spec.expected_synapses()) <= 4 * np.sqrt(spec.synapse_variance())
    # thalamic: 200 * sum_i p_i n_i ≈ 26.6 k, binomial
    p_in = spec.p_input[spec.population_index()]
    mu, sd = 200 * p_in.sum(), np.sqrt(200 * (p_in * (1 - p_in)).sum())
    assert abs(int(inp.sum()) - mu) <= 4 * sd


def test_masks_seeded_and_scale_preserves_probabilities():
    a, b, c = (ConnectivitySpec.barrel(scale=0.25, seed=s).masks()[0] for s in (3, 3, 4))
    assert torch.equal(a, b) and not torch.equal(a, c)
    spec = ConnectivitySpec.barrel(scale=0.25, seed=3)
    idx, off = spec.population_index(), spec.offsets
    for pre, post in [(0, 0), (1, 3), (4, 4), (5, 4), (2, 0)]:
        block = a[off[pre] : off[pre + 1], off[post] : off[post + 1]]
        p, n = spec.p_recurrent[pre, post], block.numel()
        assert abs(float(block.double().mean()) - p) <= 3 * np.sqrt(p * (1 - p) / n) + 1e-12, (pre, post)
    assert len(idx) == spec.n == 1055


def test_dale_and_masks_after_20_steps():
    torch.manual_seed(0)
    model = BarrelCortexRSNN(scale=0.05, seed=1)
    opt = torch.optim.Adam(model.param_groups(0.05))
    x = (torch.rand(3, 2, 4, 93) < 0.3).float()
    y = torch.tensor([0, 1, 2])
    for _ in range(20):
        w, w_in = model.cortex.effective_weights()
        # random directions on every weight, so the optimizer pushes some across the clamp and mask
        loss = model.loss(model(x), y) + (w * torch.randn_like(w)).sum() + (w_in * torch.randn_like(w_in)).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    w, w_in = model.cortex.effective_weights()
    mask = model.cortex.mask
    assert torch.equal(mask, model.cortex.spec.masks()[0])  # the fixed masks themselves never change
    assert torch.all(model.cortex.weight[~mask] == 0) and torch.all(w[~mask] == 0)
    # every synapse carries its presynaptic population's sign, taken from the population table
    sizes = model.cortex.spec.sizes
    sign = torch.tensor([1.0 if p.kind == "E" else -1.0 for p in BARREL_POPULATIONS]).repeat_interleave(
        torch.tensor(sizes)
    )
    assert torch.all(w * sign[:, None] >= 0)
    assert (w[sign > 0] > 0).any() and (w[sign < 0] < 0).any()
    assert torch.all(w_in >= 0) and torch.all(w_in[~model.cortex.mask_in] == 0)
    assert (w[mask] != 0).any()


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"p_recurrent": np.full((2, 2), 1.5)}, r"\[0, 1\]"),
        ({"p_recurrent": np.zeros((3, 2))}, "shape"),
        ({"p_recurrent": (np.ones((2, 2)) * 0.1, np.ones((2, 2)) * 0.1)}, "mixed E/I"),
        ({"p_recurrent": np.zeros((2, 2)), "scale": 0.0}, "scale"),
        ({"p_recurrent": np.zeros((2, 2)), "scale": -0.5}, "scale"),
        ({"p_recurrent": np.full((2, 2), np.nan)}, r"\[0, 1\]"),
        ({"p_recurrent": np.zeros((2, 2)), "p_input": np.array([0.1, -0.1])}, r"p_input.*\[0, 1\]"),
        ({"p_recurrent": np.zeros((2, 2)), "p_input": np.zeros(3)}, "p_input.*shape"),
        ({"p_recurrent": (np.zeros((2, 2)), np.zeros((3, 3)))}, "shape"),
        # an E population's row in the inhibitory table (kinds are E, I)
        ({"p_recurrent": (np.zeros((2, 2)), np.array([[0.1, 0.1], [0.0, 0.0]]))}, "contradict kinds"),
    ],
)
def test_bad_specs(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ConnectivitySpec([3, 2], ["E", "I"], **kwargs)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"sizes": []}, "sizes must be a non-empty sequence"),
        ({"sizes": [3, 0]}, "sizes must be a non-empty sequence"),
        ({"sizes": [3, -2]}, "sizes must be a non-empty sequence"),
        # int() truncated these silently: a population of 2 (or 1) neurons instead of an error
        ({"sizes": [2.5, 2]}, "sizes must be a non-empty sequence"),
        ({"sizes": [True, 2]}, "sizes must be a non-empty sequence"),
        ({"sizes": [float("nan"), 2]}, "sizes must be a non-empty sequence"),
        ({"kinds": ["E"]}, "kinds must be 2 entries"),
        ({"kinds": ["E", "X"]}, "kinds must be 2 entries"),
        ({"n_input": -1}, "n_input must be an int"),
        ({"n_input": 2.5}, "n_input must be an int"),
        ({"n_input": True}, "n_input must be an int"),
    ],
)
def test_bad_sizes_kinds_and_n_input(kwargs, match):
    args = {"sizes": [3, 2], "kinds": ["E", "I"], "p_recurrent": np.zeros((2, 2))} | kwargs
    with pytest.raises(ValueError, match=match):
        ConnectivitySpec(**args)


def test_sizes_accept_integral_numbers_of_any_container():
    want = ConnectivitySpec([3, 2], "EI", np.full((2, 2), 0.5), seed=1)
    for sizes in (np.array([3, 2]), torch.tensor([3, 2]), (np.int64(3), 2), [3.0, 2.0]):
        spec = ConnectivitySpec(sizes, "EI", np.full((2, 2), 0.5), seed=1)
        assert spec.sizes == (3, 2) and all(type(n) is int for n in spec.sizes)
        assert torch.equal(spec.masks()[0], want.masks()[0])


def test_weights_are_projected_not_clamped_in_the_graph():
    # RSNN_bfd clamps weight.data in place: a weight pushed below 0 sits at exactly 0 and still gets
    # gradient, so it can grow again (a differentiable clamp would give it zero gradient forever)
    model = BarrelCortexRSNN(scale=0.05, seed=3)
    c = model.cortex
    pre, post = torch.nonzero(c.mask)[0].tolist()
    pre_in, post_in = torch.nonzero(c.mask_in)[0].tolist()
    with torch.no_grad():
        c.weight[pre, post] = -0.3
        c.weight_in[pre_in, post_in] = 1.7
    w, w_in = c.effective_weights()
    assert c.weight[pre, post] == 0 and c.weight_in[pre_in, post_in] == 1
    assert c.weight.min() >= 0 and c.weight.max() <= 1 and c.weight_in.min() >= 0 and c.weight_in.max() <= 1
    (w.sum() + w_in.sum()).backward()
    assert c.weight.grad[pre, post] == c.sign[pre] * c.gain and c.weight_in.grad[pre_in, post_in] == 1


@pytest.mark.parametrize("scale", [0.05, 0.2])
def test_thalamic_weights_carry_no_scale_gain(scale):
    # the 200 thalamic neurons are not scaled, so the expected thalamic input per cortical neuron is
    # already that of the full column; only recurrent weights are divided by scale
    c = BarrelCortexRSNN(scale=scale, seed=0).cortex
    w, w_in = c.effective_weights()
    torch.testing.assert_close(w_in, c.weight_in * c.mask_in, rtol=0, atol=0)
    torch.testing.assert_close(w, c.weight * c.mask * c.sign[:, None] / scale, rtol=1e-6, atol=0)


def test_input_layers_use_xavier_init():
    # RSNN_bfd re-initialises fc_f, fc_t, fc2_1 and fc2_2 Xavier-uniform: bound sqrt(6 / (fan_in + fan_out))
    model = BarrelCortexRSNN(scale=0.05, seed=0)
    for layer in (model.fc_force, model.fc_torque, model.fc_hidden, model.fc_out):
        fan_out, fan_in = layer.weight.shape
        bound = (6 / (fan_in + fan_out)) ** 0.5
        assert layer.weight.abs().max() <= bound and layer.weight.abs().max() > 0.9 * bound
    default = 1 / 200**0.5  # the thalamic Linear(200, 200) keeps PyTorch's default bound
    assert model.fc_thalamus.weight.abs().max() <= default


@pytest.mark.parametrize("seed", [1.5, True, "0", None])
def test_seed_must_be_an_int(seed):
    with pytest.raises(ValueError, match="seed must be an int"):
        ConnectivitySpec([3, 2], ["E", "I"], np.ones((2, 2)), np.ones(2), n_input=4, seed=seed)
    with pytest.raises(ValueError, match="seed must be an int"):
        BarrelCortexRSNN(scale=0.05, seed=seed)


def test_numpy_int_seed_gives_the_masks_of_the_same_python_int():
    a = ConnectivitySpec.barrel(scale=0.05, seed=np.int64(3))
    b = ConnectivitySpec.barrel(scale=0.05, seed=3)
    assert type(a.seed) is int and a.seed == 3
    for ma, mb in zip(a.masks(), b.masks(), strict=True):
        assert torch.equal(ma, mb)
