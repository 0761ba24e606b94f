"""The fused spike-driven recurrent step kernel equals the torch step (Triton interpreter on CPU).

The iclr25.core.testing plugin sets TRITON_INTERPRET=1 on machines without CUDA, so
``backend="triton"`` runs the kernel on CPU tensors. Scale 0.05 (N = 211: a ragged last block of
64 and of 32) and T = 6 keep the interpreter fast.
"""

import pytest
import torch

from iclr25.core.triton import BackendUnavailableError, triton_available
from iclr25.neuro.barrel_cortex import BarrelCortexRSNN

pytestmark = [pytest.mark.triton, pytest.mark.skipif(not triton_available(), reason="triton not installed")]


def _input(batch=2, t_steps=6, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return (torch.rand(batch, 2, t_steps, 93, generator=gen) < 0.2).float()


@pytest.mark.parametrize("init_state", ["zeros", "official"])
def test_fused_step_equals_torch_step(init_state):
    x = _input()
    ref = BarrelCortexRSNN(scale=0.05, seed=2, init_state=init_state, backend="reference")
    ker = BarrelCortexRSNN(scale=0.05, seed=2, init_state=init_state, backend="triton")
    ker.load_state_dict(ref.state_dict())
    with torch.no_grad():
        # strong random thalamic drive and raised weights so the column fires (a silent network
        # would compare nothing); the weights stay inside [0, 1], so the projection keeps them
        for m in (ref, ker):
            m.cortex.weight.mul_(2.0)
            m.cortex.weight_in.mul_(4.0)
        gen = torch.Generator().manual_seed(1)
        thal = (torch.rand(6, 2, 200, generator=gen) < 0.2).float()
        s_ref = ref.cortex(thal)
        s_ker = ker.cortex(thal)
        scores_ref, scores_ker = ref(x), ker(x)
    assert s_ref.shape == s_ker.shape == (6, 2, ref.n_neurons)
    # both firing and silent neurons; with init_state="zeros" step 0 has no previous spike, so every
    # weight chunk is skipped there
    assert 0.01 < float(s_ref.mean()) < 0.9
    assert torch.equal(s_ref, s_ker)  # exact spikes: only the summation order differs
    torch.testing.assert_close(scores_ker, scores_ref, rtol=0, atol=1e-6)


def test_triton_backend_refuses_what_it_cannot_run():
    x = _input(batch=2, t_steps=3)
    seq = BarrelCortexRSNN(scale=0.05, seed=0, backend="triton", update="sequential")
    with pytest.raises(BackendUnavailableError, match="synchronous"):
        seq(x)  # training: the fused path runs the synchronous update only
    with torch.no_grad(), pytest.raises(BackendUnavailableError, match="synchronous"):
        seq(x)
    double = BarrelCortexRSNN(scale=0.05, seed=0, backend="triton").double()
    with pytest.raises(BackendUnavailableError, match="float32"):
        double(x.double())
    auto = BarrelCortexRSNN(scale=0.05, seed=0, backend="auto")
    assert not auto.cortex.uses_kernel(x)  # auto on CPU never picks the interpreter
    auto_seq = BarrelCortexRSNN(scale=0.05, seed=0, backend="auto", update="sequential")
    assert not auto_seq.cortex.uses_kernel(x)


def test_device_reason_is_reported_alone():
    # a device the kernel cannot run on is the whole answer: the update and dtype reasons are not
    # listed after it (they would only matter once the device is right)
    cortex = BarrelCortexRSNN(scale=0.05, seed=0, backend="triton", update="sequential").cortex
    x = torch.zeros(2, 1, 200, device="meta", dtype=torch.float64)
    with pytest.raises(BackendUnavailableError, match="meta") as err:
        cortex.uses_kernel(x)
    assert "synchronous" not in str(err.value) and "float32" not in str(err.value)


@pytest.mark.gpu
def test_fused_step_equals_torch_step_full_scale_cuda():
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    from iclr25.neuro.barrel_cortex.kernels import recurrent_alif_step_triton
    from iclr25.neuro.spiking.reference import alif_update

    c = BarrelCortexRSNN(scale=1.0, seed=0).cortex.cuda()
    with torch.no_grad():
        w, _ = c.effective_weights()
        alpha, rho = torch.exp(-1.0 / c.tau_m), torch.exp(-1.0 / c.tau_adp)
        gen = torch.Generator(device="cuda").manual_seed(0)
        for rate in (0.02, 0.1, 0.3):  # one step from random states (no cascade of flipped spikes)
            shape = (128, c.spec.n)
            s = (torch.rand(shape, generator=gen, device="cuda") < rate).float()
            v = torch.rand(shape, generator=gen, device="cuda") * 0.2 - 0.05
            b = torch.rand(shape, generator=gen, device="cuda") * 0.1
            drive = torch.rand(shape, generator=gen, device="cuda") * 0.5
            s_ref, v_ref, b_ref = alif_update(drive + s @ w, v, s, b, alpha, rho, c.b0, c.beta, 1.0, c.surrogate)
            s_ker, v_ker, b_ker = recurrent_alif_step_triton(s, w, drive, v, b, alpha, rho, c.b0, c.beta)
            # cuBLAS and the kernel sum in different orders (both fp32): v agrees to rounding, and a
            # spike can differ only where v - B is within that rounding of 0
            torch.testing.assert_close(v_ker, v_ref, rtol=0, atol=1e-5)
            torch.testing.assert_close(b_ker, b_ref, rtol=0, atol=1e-6)  # FMA contraction may differ
            assert float((s_ker != s_ref).float().mean()) < 1e-5
