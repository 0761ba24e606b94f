"""The trainable fused recurrent steps: backward equals the torch step's autograd (Triton interpreter on CPU).

`recurrent_alif_triton` is one autograd node for T synchronous steps whose backward is written by
hand; these tests compare every gradient it returns with torch autograd through the loop of
`iclr25.neuro.spiking.reference.alif_update` (the spec), in float64 (agreement to rounding,
~1e-16 relative per operation), and the whole network's parameter gradients (BPTT through 8
steps) between ``backend="reference"`` and ``backend="triton"`` in float32. Sizes stay tiny: the
interpreter runs every program in Python.
"""

import pytest
import torch

from iclr25.core.triton import triton_available
from iclr25.neuro.barrel_cortex import BarrelCortexRSNN
from iclr25.neuro.spiking import Surrogate
from iclr25.neuro.spiking.reference import alif_update

pytestmark = [pytest.mark.triton, pytest.mark.skipif(not triton_available(), reason="triton not installed")]

B0, BETA = 0.04, 1.8
NAMES = ("drive", "w", "v0", "s0", "b_init", "alpha", "rho")


def _problem(steps=5, batch=3, n=70, dtype=torch.float64, seed=0):
    """Random inputs of the T-step recurrence; n = 70 gives ragged blocks of 64 (columns) and 32 (chunks)."""
    gen = torch.Generator().manual_seed(seed)

    def rand(*shape):
        return torch.rand(*shape, generator=gen, dtype=dtype)

    tensors = (
        rand(steps, batch, n) * 0.6,  # drive
        torch.randn(n, n, generator=gen, dtype=dtype) * 0.1,  # mixed-sign recurrent weights
        rand(batch, n),  # v0
        (rand(batch, n) < 0.3).to(dtype),  # s0
        rand(batch, n) * 0.1,  # b_init
        torch.exp(-1.0 / (8.0 + 4.0 * rand(n))),  # alpha, per-neuron τ_m in [8, 12]
        torch.exp(-1.0 / (4.0 + 2.0 * rand(n))),  # rho
    )
    return [t.requires_grad_() for t in tensors]


def _torch_steps(drive, w, v0, s0, b_init, alpha, rho, surrogate):
    s, v, b = s0, v0, b_init
    out = []
    for t in range(drive.shape[0]):
        s, v, b = alif_update(drive[t] + s @ w, v, s, b, alpha, rho, B0, BETA, 1.0, surrogate)
        out.append(s)
    return torch.stack(out), v, b


def _grads(outputs, weights, inputs):
    loss = sum((o * g).sum() for o, g in zip(outputs, weights, strict=True))
    return torch.autograd.grad(loss, inputs)


@pytest.mark.parametrize(
    ("surrogate", "product"),
    [("gaussian", "spike_driven"), ("atan", "spike_driven"), ("triangle", "spike_driven"), ("gaussian", "dense")],
)
def test_backward_equals_torch_autograd_float64(surrogate, product):
    from iclr25.neuro.barrel_cortex.kernels import recurrent_alif_triton

    surr = Surrogate.make(surrogate)
    inputs = _problem()
    s_ref, v_ref, b_ref = _torch_steps(*inputs, surr)
    s_ker, (v_ker, s_last, b_ker) = recurrent_alif_triton(*inputs, B0, BETA, 1.0, surr, product=product)
    assert 0.05 < float(s_ref.detach().mean()) < 0.8  # both firing and silent entries
    assert torch.equal(s_ker, s_ref) and torch.equal(s_last, s_ref[-1])
    torch.testing.assert_close(v_ker, v_ref, rtol=0, atol=1e-14)
    torch.testing.assert_close(b_ker, b_ref, rtol=0, atol=1e-14)
    # random cotangents on spikes and the final state exercise every adjoint path
    gen = torch.Generator().manual_seed(1)
    cot = [torch.randn(t.shape, generator=gen, dtype=t.dtype) for t in (s_ref, v_ref, b_ref)]
    g_ref = _grads((s_ref, v_ref, b_ref), cot, inputs)
    g_ker = _grads((s_ker, v_ker, b_ker), cot, inputs)
    for name, gr, gk in zip(NAMES, g_ref, g_ker, strict=True):
        assert gr.abs().max() > 0, name
        # float64: a few dozen roundings of O(10) values per entry (sums over n = 70 and T = 5)
        torch.testing.assert_close(gk, gr, rtol=1e-11, atol=1e-12, msg=name)


def test_only_final_state_gradient_and_constant_initial_state():
    """No cotangent on the spikes (g_spikes is None) and initial states that need no gradient."""
    from iclr25.neuro.barrel_cortex.kernels import recurrent_alif_triton

    surr = Surrogate.make("gaussian")
    inputs = _problem(steps=4, batch=2, n=40, seed=3)
    for i in (2, 3, 4):
        inputs[i] = inputs[i].detach()
    _, v_ref, b_ref = _torch_steps(*inputs, surr)
    _, (v_ker, _, b_ker) = recurrent_alif_triton(*inputs, B0, BETA, 1.0, surr)
    wanted = [inputs[i] for i in (0, 1, 5, 6)]
    g_ref = torch.autograd.grad(v_ref.sum() + 2.0 * b_ref.sum(), wanted)
    g_ker = torch.autograd.grad(v_ker.sum() + 2.0 * b_ker.sum(), wanted)
    for gr, gk in zip(g_ref, g_ker, strict=True):
        torch.testing.assert_close(gk, gr, rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize(("steps", "w_needs_grad"), [(1, True), (3, False)])
def test_single_step_and_constant_weight_gradients_equal_torch_autograd(steps, w_needs_grad):
    """T = 1: grad W is the s0 term alone (no stacked product); constant W: no grad W is formed."""
    from iclr25.neuro.barrel_cortex.kernels import recurrent_alif_triton

    surr = Surrogate.make("gaussian")
    inputs = _problem(steps=steps, batch=3, n=70, seed=7)
    if not w_needs_grad:
        inputs[1] = inputs[1].detach()
    s_ref, v_ref, b_ref = _torch_steps(*inputs, surr)
    s_ker, (v_ker, _, b_ker) = recurrent_alif_triton(*inputs, B0, BETA, 1.0, surr)
    assert 0.05 < float(s_ref.detach().mean()) < 0.8  # both firing and silent entries
    assert torch.equal(s_ker, s_ref)
    wanted = [t for t in inputs if t.requires_grad]
    assert any(t is inputs[1] for t in wanted) == w_needs_grad
    gen = torch.Generator().manual_seed(2)
    cot = [torch.randn(t.shape, generator=gen, dtype=t.dtype) for t in (s_ref, v_ref, b_ref)]
    g_ref = _grads((s_ref, v_ref, b_ref), cot, wanted)
    g_ker = _grads((s_ker, v_ker, b_ker), cot, wanted)
    for gr, gk in zip(g_ref, g_ker, strict=True):
        assert gr.abs().max() > 0
        # float64, as in the T = 5 comparison above
        torch.testing.assert_close(gk, gr, rtol=1e-11, atol=1e-12)


def test_zero_steps_return_the_initial_state():
    # no step is taken, so the final state is the initial one and passes its gradient through as is
    from iclr25.neuro.barrel_cortex.kernels import recurrent_alif_triton

    inputs = _problem(steps=0, batch=2, n=9, seed=4)
    spikes, (v, s, b) = recurrent_alif_triton(*inputs, B0, BETA, 1.0, Surrogate.make("gaussian"))
    assert spikes.shape == (0, 2, 9)
    assert torch.equal(v, inputs[2]) and torch.equal(s, inputs[3]) and torch.equal(b, inputs[4])
    g_v0, g_s0, g_b = torch.autograd.grad(v.sum() + 2.0 * s.sum() + 3.0 * b.sum(), inputs[2:5])
    assert torch.equal(g_v0, torch.ones_like(g_v0))
    assert torch.equal(g_s0, torch.full_like(g_s0, 2.0)) and torch.equal(g_b, torch.full_like(g_b, 3.0))


@pytest.mark.parametrize("product", ["spike_driven", "dense"])
def test_no_grad_path_equals_autograd_path_and_inputs_untouched(product):
    from iclr25.neuro.barrel_cortex.kernels import recurrent_alif_triton

    surr = Surrogate.make("gaussian")
    inputs = _problem(steps=4, batch=2, n=40, dtype=torch.float32, seed=5)
    before = [t.detach().clone() for t in inputs]
    s1, st1 = recurrent_alif_triton(*inputs, B0, BETA, 1.0, surr, product=product)
    with torch.no_grad():
        s2, st2 = recurrent_alif_triton(*inputs, B0, BETA, 1.0, surr, product=product)
    assert s1.requires_grad and not s2.requires_grad
    assert torch.equal(s1, s2)
    for a, b in zip(st1, st2, strict=True):
        assert torch.equal(a, b)
    for t, t0 in zip(inputs, before, strict=True):
        assert torch.equal(t, t0)


def test_bad_shapes_raise_naming_the_argument():
    from iclr25.neuro.barrel_cortex.kernels import recurrent_alif_triton

    surr = Surrogate.make("gaussian")
    inputs = [t.detach() for t in _problem(steps=2, batch=2, n=8, dtype=torch.float32)]
    with pytest.raises(ValueError, match="drive must be"):
        recurrent_alif_triton(inputs[0][0], *inputs[1:], B0, BETA, 1.0, surr)
    with pytest.raises(ValueError, match="w must have shape"):
        recurrent_alif_triton(inputs[0], inputs[1][:4], *inputs[2:], B0, BETA, 1.0, surr)
    with pytest.raises(ValueError, match="alpha must match"):
        recurrent_alif_triton(*inputs[:5], inputs[5].double(), inputs[6], B0, BETA, 1.0, surr)
    with pytest.raises(ValueError, match="product must be"):
        recurrent_alif_triton(*inputs, B0, BETA, 1.0, surr, product="sparse")


def test_network_bptt_gradients_equal_torch_backend():
    """All parameter gradients of the full model (BPTT through 8 steps) agree between backends."""
    gen = torch.Generator().manual_seed(0)
    x = (torch.rand(3, 2, 8, 93, generator=gen) < 0.2).float()
    y = torch.tensor([0, 1, 2])
    results = []
    for backend in ("reference", "triton"):
        model = BarrelCortexRSNN(scale=0.05, seed=2, backend=backend)
        with torch.no_grad():  # raised weights (still in [0, 1]) so the column fires
            model.cortex.weight.mul_(2.0)
            model.cortex.weight_in.mul_(4.0)
        scores, spikes = model(x, record=True)
        model.loss(scores, y).backward()
        results.append((model, spikes))
    (ref, s_ref), (ker, s_ker) = results
    assert 0.01 < float(s_ref.detach().mean()) < 0.9
    assert torch.equal(s_ref, s_ker)  # same spikes, so the same surrogate paths
    for (name, p_ref), (_, p_ker) in zip(ref.named_parameters(), ker.named_parameters(), strict=True):
        assert p_ref.grad is not None and p_ker.grad is not None, name
        assert p_ref.grad.abs().max() > 0, name
        # float32: the two backward passes sum the same terms in different orders; relative
        # rounding ~1e-7 per operation over ~n + T accumulations stays far below 1e-4 of the scale
        scale = float(p_ref.grad.abs().max())
        torch.testing.assert_close(p_ker.grad, p_ref.grad, rtol=1e-4, atol=1e-5 * scale, msg=name)
    # masked-out synapses get exactly zero gradient through the mask, as on the torch path
    assert float(ker.cortex.weight.grad[~ker.cortex.mask].abs().max()) == 0.0


@pytest.mark.gpu
def test_fused_training_gradients_equal_torch_full_scale_cuda():
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    from iclr25.neuro.barrel_cortex.kernels import recurrent_alif_triton

    c = BarrelCortexRSNN(scale=1.0, seed=0).cortex.cuda()
    w, _ = c.effective_weights()
    alpha, rho = torch.exp(-1.0 / c.tau_m), torch.exp(-1.0 / c.tau_adp)
    gen = torch.Generator(device="cuda").manual_seed(0)
    shape = (16, c.spec.n)
    drive = (torch.rand((3, *shape), generator=gen, device="cuda") * 0.5).requires_grad_()
    s0 = (torch.rand(shape, generator=gen, device="cuda") < 0.05).float()
    v0 = torch.rand(shape, generator=gen, device="cuda") * 0.2 - 0.05
    b_init = torch.rand(shape, generator=gen, device="cuda") * 0.1
    args = (drive, w, v0, s0, b_init, alpha, rho)
    s_ref, v_ref, b_ref = _torch_steps(*args, c.surrogate)
    s_ker, (v_ker, _, b_ker) = recurrent_alif_triton(*args, c.b0, c.beta, 1.0, c.surrogate)
    if not torch.equal(s_ker, s_ref):  # a v - B within rounding of 0 flips a spike: rare, and allowed
        assert float((s_ker != s_ref).float().mean().detach()) < 1e-5
        pytest.skip("a spike flipped by summation order; gradients not comparable")
    cot = torch.randn_like(s_ref)
    params = [c.weight, c.tau_m, c.tau_adp, drive]
    g_ref = _grads((s_ref, v_ref, b_ref), (cot, torch.ones_like(v_ref), torch.ones_like(b_ref)), params)
    g_ker = _grads((s_ker, v_ker, b_ker), (cot, torch.ones_like(v_ker), torch.ones_like(b_ker)), params)
    for gr, gk in zip(g_ref, g_ker, strict=True):
        scale = float(gr.abs().max())
        torch.testing.assert_close(gk, gr, rtol=1e-3, atol=1e-5 * scale)


def test_single_step_validates_its_arguments():
    # the kernel indexes alpha[col], v[row, col], w[k, col]: a broadcastable alpha or v, or a
    # wrong-sized w, read out of bounds (garbage, or a crash) instead of raising
    from iclr25.neuro.barrel_cortex.kernels import recurrent_alif_step_triton

    drive, w, v, s, b, alpha, rho = (t.detach() for t in _problem(steps=1, batch=3, n=37, dtype=torch.float32))
    drive = drive[0]
    s_ker, v_ker, b_ker = recurrent_alif_step_triton(s, w, drive, v, b, alpha, rho, B0, BETA)
    s_ref, v_ref, b_ref = alif_update(drive + s @ w, v, s, b, alpha, rho, B0, BETA, 1.0, Surrogate.make("gaussian"))
    assert torch.equal(s_ker, s_ref)
    torch.testing.assert_close(v_ker, v_ref, rtol=0, atol=1e-6)
    torch.testing.assert_close(b_ker, b_ref, rtol=0, atol=1e-6)
    with pytest.raises(ValueError, match="alpha must have shape"):
        recurrent_alif_step_triton(s, w, drive, v, b, torch.tensor(0.9), rho, B0, BETA)
    with pytest.raises(ValueError, match="v must have shape"):
        recurrent_alif_step_triton(s, w, drive, v[:1], b, alpha, rho, B0, BETA)
    with pytest.raises(ValueError, match="w must have shape"):
        recurrent_alif_step_triton(s, w[:, :10], drive, v, b, alpha, rho, B0, BETA)
    with pytest.raises(ValueError, match="drive must be"):
        recurrent_alif_step_triton(s, w, drive[0], v, b, alpha, rho, B0, BETA)
    with pytest.raises(ValueError, match="rho must match"):
        recurrent_alif_step_triton(s, w, drive, v, b, alpha, rho.double(), B0, BETA)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_is_refused_naming_drive(dtype):
    # the kernels accumulate in the inputs' dtype and are written for float32 (float64 in tests):
    # half precision failed inside Triton (bfloat16) or ran with a half-precision accumulator
    from iclr25.neuro.barrel_cortex.kernels import recurrent_alif_step_triton, recurrent_alif_triton

    inputs = [t.detach().to(dtype) for t in _problem(steps=2, batch=2, n=8, dtype=torch.float32)]
    with pytest.raises(ValueError, match="drive must be float32"):
        recurrent_alif_triton(*inputs, B0, BETA, 1.0, Surrogate.make("gaussian"))
    drive, w, v, s, b, alpha, rho = inputs
    with pytest.raises(ValueError, match="drive must be float32"):
        recurrent_alif_step_triton(s, w, drive[0], v, b, alpha, rho, B0, BETA)


def test_no_neurons_backward_and_empty_cortex_input():
    # n = 0: grad W's reshape(-1, n) was ambiguous; T = 0 or B = 0 cortex input: the drive's
    # reshape(·, -1) was (the forward failed on both backends)
    from iclr25.neuro.barrel_cortex.kernels import recurrent_alif_triton

    inputs = _problem(steps=3, batch=2, n=0, dtype=torch.float64)
    spikes, (v, _, b) = recurrent_alif_triton(*inputs, B0, BETA, 1.0, Surrogate.make("gaussian"))
    grads = torch.autograd.grad(spikes.sum() + v.sum() + b.sum(), inputs)
    assert [g.shape for g in grads] == [t.shape for t in inputs]
    for backend in ("reference", "triton"):
        cortex = BarrelCortexRSNN(scale=0.05, seed=0, backend=backend).cortex
        n = cortex.spec.n
        assert cortex(torch.zeros(0, 2, 200)).shape == (0, 2, n)
        assert cortex(torch.zeros(3, 0, 200)).shape == (3, 0, n)
