"""Neuron modules keep their constants in the module's dtype, as torch.nn factory kwargs do.

A float64 model must match the float64 torch loop to ~1e-12. θ = 0.1, 1/3, 0.7 are not float32
numbers: rounded to float32 they move by ~1e-8 relative, which flips the levels of inputs that
sit exactly on a multiple of θ and shifts every decoded value by ~1e-8.
"""

import pytest
import torch

from iclr25.neuro.spiking import (
    ALIF,
    IF,
    LIF,
    GIFNeuron,
    LIFState,
    alif_step,
    gif_decode,
    gif_encode,
    gif_encode_int,
    lif_multistep,
)

F64 = torch.float64
THETA = (0.1, 1 / 3, 0.7)


def on_the_levels():
    """Inputs ``k θ_c`` (k = 0..39) for the three channels, computed in float64."""
    theta = torch.tensor(THETA, dtype=F64)
    return theta, torch.arange(40, dtype=F64)[:, None] * theta


def test_float64_threshold_matches_the_float64_reference():
    theta, x = on_the_levels()
    want_s = gif_encode(x, 16, 4, v_th=theta)
    want = gif_decode(want_s, theta)
    # the control: θ stored in float32 (the old constructor's `.float()`) drifts by ~1e-8
    rounded = theta.float().double()
    drift = (gif_decode(gif_encode(x, 16, 4, v_th=rounded), rounded) - want).abs().max()
    assert drift > 1e-9
    for learn in (False, True):
        neuron = GIFNeuron(16, 4, v_th=theta, learn_threshold=learn)
        assert neuron.v_th.dtype == F64 and torch.equal(neuron.v_th.detach(), theta)
        assert isinstance(neuron.v_th, torch.nn.Parameter) == learn
        s = neuron(x)
        assert s.dtype == F64 and torch.equal(s, want_s)
        torch.testing.assert_close(neuron.decode(s), want, rtol=0, atol=1e-12)


@pytest.mark.parametrize("theta", THETA)
def test_dtype_factory_kwarg_builds_a_float64_neuron_from_a_python_float(theta):
    x = torch.arange(40, dtype=F64) * theta
    neuron = GIFNeuron(16, 4, v_th=theta, dtype=F64)
    assert neuron.v_th.dtype == F64 and neuron.v_th.item() == theta
    s = neuron(x)
    want_s = gif_encode(x, 16, 4, v_th=theta)
    assert torch.equal(s, want_s)
    torch.testing.assert_close(neuron.decode(s), theta * want_s.sum(0), rtol=0, atol=1e-12)
    # dtype wins over a tensor's own dtype, as torch.as_tensor(..., dtype=)
    assert GIFNeuron(4, 2, v_th=torch.tensor(theta, dtype=F64), dtype=torch.float32).v_th.dtype == torch.float32


def test_double_converts_the_threshold_state_and_float_keeps_float32_behaviour():
    neuron = GIFNeuron(4, 3, v_th=torch.tensor([0.25, 0.5, 1.0]), learn_threshold=True)
    assert neuron.v_th.dtype == torch.float32
    neuron.double()
    assert isinstance(neuron.v_th, torch.nn.Parameter) and neuron.v_th.dtype == F64
    x = torch.linspace(-1, 6, 30, dtype=F64).view(10, 3)
    s = neuron(x)
    assert s.dtype == F64 and torch.equal(s, gif_encode(x, 4, 3, v_th=neuron.v_th.detach()))
    neuron.decode(s).sum().backward()
    assert neuron.v_th.grad.dtype == F64
    assert neuron.float().v_th.dtype == torch.float32
    buffer = GIFNeuron(4, 3, v_th=torch.tensor(THETA, dtype=F64)).float()
    assert buffer.v_th.dtype == torch.float32 and torch.equal(buffer.v_th, torch.tensor(THETA))
    assert "v_th" in dict(buffer.named_buffers())


def test_float32_defaults_are_unchanged():
    assert GIFNeuron(4, 2).v_th.dtype == torch.float32
    assert GIFNeuron(4, 2, v_th=0.1).v_th.item() == torch.tensor(0.1).item()
    # an integer θ tensor carries no floating dtype: torch's default, as before
    assert GIFNeuron(4, 2, v_th=torch.tensor([1, 2])).v_th.dtype == torch.float32
    # a float64 θ used on float32 inputs rounds to what a float32 θ gives
    x = torch.randn(50, 3, generator=torch.Generator().manual_seed(0)) * 2
    theta = torch.tensor(THETA, dtype=F64)
    s64, s32 = GIFNeuron(8, 3, v_th=theta)(x), GIFNeuron(8, 3, v_th=theta.float())(x)
    assert s64.dtype == torch.float32 and torch.equal(s64, s32)
    for module in (LIF(3), IF(3), ALIF(3), ALIF(3, learn_tau=False)):
        assert all(t.dtype == torch.float32 for t in (*module.parameters(), *module.buffers()))


def test_factory_kwargs_are_checked_and_place_the_state():
    assert GIFNeuron(4, 2, v_th=torch.ones(3), device="meta").v_th.device.type == "meta"
    assert GIFNeuron(4, 2, device="meta").v_th.device.type == "meta"
    assert LIF(3, device="meta").tau_m.device.type == "meta"
    assert ALIF(3, device="meta").tau_adp.device.type == "meta"
    for make in (lambda d: GIFNeuron(4, 2, dtype=d), lambda d: LIF(dtype=d), lambda d: ALIF(3, dtype=d)):
        for bad in (torch.int64, "float64"):
            with pytest.raises(TypeError, match="dtype"):
                make(bad)


def test_decode_of_integer_spikes_keeps_a_float64_threshold():
    q = torch.arange(-10, 30)
    s = gif_encode_int(q, 4, 3)
    theta = torch.tensor(0.1, dtype=F64)
    out = gif_decode(s, theta)
    assert out.dtype == F64 and torch.equal(out, s.sum(0).double() * theta)
    assert gif_decode(s, torch.tensor(0.5)).dtype == torch.float32
    assert gif_decode(s, 0.5).dtype == torch.get_default_dtype()


@pytest.mark.parametrize("cls", [LIF, IF])
def test_float64_lif_matches_the_float64_reference(cls):
    tau = 3.3  # exp(-1/τ) of the float32-rounded τ differs by ~1e-9
    gen = torch.Generator().manual_seed(1)
    x = torch.rand(30, 2, 4, generator=gen, dtype=F64) * 1.5
    kw = {"tau_m": tau} if cls is LIF else {}
    neuron = cls(4, dtype=F64, **kw)
    assert neuron.tau_m.dtype == F64
    s, st = neuron(x, return_state=True)
    ref_kw = {"tau_m": tau} if cls is LIF else {"tau_m": float("inf"), "input_scale": "none", "firing": "ge"}
    want_s, want = lif_multistep(x, None, **ref_kw)
    assert s.dtype == F64 and torch.equal(s, want_s) and 0 < s.mean() < 1
    torch.testing.assert_close(st.v, want.v, rtol=0, atol=1e-12)
    if cls is LIF:
        # the control: τ_m rounded to float32 leaves the float64 loop by far more than 1e-12
        _, off = lif_multistep(x, LIFState(torch.zeros(2, 4, dtype=F64)), tau_m=float(torch.tensor(tau)))
        assert (off.v - want.v).abs().max() > 1e-10


def test_float64_alif_matches_the_float64_reference():
    tau_m, tau_adp = 3.3, 7.7
    gen = torch.Generator().manual_seed(2)
    x = torch.rand(40, 2, 5, generator=gen, dtype=F64) * 0.6
    for learn in (False, True):
        neuron = ALIF(5, tau_m=tau_m, tau_adp=tau_adp, learn_tau=learn, dtype=F64)
        assert neuron.tau_m.dtype == neuron.tau_adp.dtype == F64
        s, st = neuron(x, return_state=True)
        state, want = None, []
        for k in range(x.shape[0]):
            sk, state = alif_step(x[k], state, tau_m=tau_m, tau_adp=tau_adp)
            want.append(sk)
        assert s.dtype == F64 and torch.equal(s, torch.stack(want)) and 0 < s.mean() < 1
        for got, ref in zip(st, state, strict=True):
            torch.testing.assert_close(got, ref, rtol=0, atol=1e-12)
