"""Acceptance 8: the Triton multi-step LIF and ALIF kernels equal the torch loop (exact spikes, grads atol 1e-5).

The iclr25.core.testing plugin sets TRITON_INTERPRET=1 on machines without CUDA before this module
imports, so ``backend="triton"`` runs the kernels in Triton's CPU interpreter (T = 8, N = 37: a
ragged last block).
"""

import itertools
import zlib

import pytest
import torch

from iclr25.core.triton import BackendUnavailableError
from iclr25.neuro.spiking import LIF, SURROGATES, LIFState, lif_multistep

RESETS = ["soft", "hard", "none"]
SCALES = ["one_minus_alpha", "none"]
# finite STE width: with width = inf and a hard reset the gradient grows geometrically in T and
# float32 rounding, not the kernel, dominates the comparison
SURR = [(name, {"width": 1.0} if name == "ste" else {}) for name in SURROGATES]


def run_both(reset, input_scale, surrogate, surrogate_kw, detach, firing="gt", device="cpu", T=8, N=37):
    gen = torch.Generator().manual_seed(zlib.crc32(f"{reset}/{input_scale}/{surrogate}/{detach}".encode()))
    gain = 6.0 if input_scale == "one_minus_alpha" else 1.0  # (1 - α) ≈ 0.1 shrinks the drive
    x = (gain * (torch.randn(T, N, generator=gen) * 2 + 0.5)).to(device)
    v0 = torch.randn(N, generator=gen).to(device)
    tau = (torch.rand(N, generator=gen) * 15 + 2).to(device)
    w = torch.randn(T, N, generator=gen).to(device)
    results = []
    for backend in ("reference", "triton"):
        xs, vs, ts = (t.clone().requires_grad_() for t in (x, v0, tau))
        s, st = lif_multistep(
            xs,
            LIFState(vs),
            tau_m=ts,
            threshold=0.9,
            reset=reset,
            v_reset=-0.1,
            input_scale=input_scale,
            surrogate=surrogate,
            surrogate_kw=surrogate_kw,
            detach_reset=detach,
            firing=firing,
            backend=backend,
        )
        loss = (s * w).sum() + (st.v**2).sum()
        results.append((s.detach(), st.v.detach(), torch.autograd.grad(loss, [xs, vs, ts])))
    return results


def assert_match(results):
    (s_ref, v_ref, g_ref), (s_tri, v_tri, g_tri) = results
    assert 0.05 < s_ref.mean() < 0.95
    assert torch.equal(s_ref, s_tri)
    torch.testing.assert_close(v_tri, v_ref, rtol=0, atol=1e-5)
    # atol 1e-5 as specified, plus ~8 float32 ulps relative for gradients summed over T steps
    # that reach |g| ~ 100 (one such case in the 60 LIF combinations differs by 2 ulps, 1.5e-5)
    for i, (a, b) in enumerate(zip(g_tri, g_ref, strict=True)):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-5, msg=lambda m, n=i: f"grad of leaf {n}: {m}")


def _cpu_only():
    if torch.cuda.is_available():
        pytest.skip("interpreter check is for CPU-only machines; the gpu test covers CUDA")


# each reset × scaling once, the five surrogates and detach_reset rotated across them
ROTATED = [
    (reset, scale, *SURR[i % len(SURR)], i % 2 == 1, "ge" if i == 3 else "gt")
    for i, (reset, scale) in enumerate(itertools.product(RESETS, SCALES))
]


@pytest.mark.triton
@pytest.mark.parametrize(("reset", "input_scale", "surrogate", "kw", "detach", "firing"), ROTATED)
def test_lif_kernel_matches_reference_in_interpreter(reset, input_scale, surrogate, kw, detach, firing):
    _cpu_only()
    assert_match(run_both(reset, input_scale, surrogate, kw, detach, firing))


@pytest.mark.triton
@pytest.mark.slow
@pytest.mark.parametrize("detach", [False, True])
@pytest.mark.parametrize(("surrogate", "kw"), SURR)
@pytest.mark.parametrize("input_scale", SCALES)
@pytest.mark.parametrize("reset", RESETS)
def test_lif_kernel_all_combinations_in_interpreter(reset, input_scale, surrogate, kw, detach):
    _cpu_only()
    assert_match(run_both(reset, input_scale, surrogate, kw, detach))


@pytest.mark.triton
def test_lif_kernel_module_path_batch_dims_and_empty_time():
    _cpu_only()
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(8, 2, 37, generator=gen) * 3
    ref = LIF(shape=(37,), backend="reference")(x)
    tri = LIF(shape=(37,), backend="triton")(x)
    assert torch.equal(ref, tri)
    s, st = lif_multistep(torch.zeros(0, 2, 37), backend="triton")
    assert s.shape == (0, 2, 37) and st.v.shape == (2, 37)


def test_auto_uses_the_torch_loop_on_cpu_and_triton_refuses_float64():
    x = torch.randn(4, 5, dtype=torch.float64)
    s, _ = lif_multistep(x)  # auto on CPU: the reference loop
    assert s.dtype == torch.float64
    with pytest.raises(BackendUnavailableError):
        lif_multistep(x, backend="triton")


@pytest.mark.gpu
@pytest.mark.parametrize(("reset", "input_scale", "surrogate", "kw", "detach", "firing"), ROTATED)
def test_lif_kernel_matches_reference_on_cuda(reset, input_scale, surrogate, kw, detach, firing):
    results = run_both(reset, input_scale, surrogate, kw, detach, firing, device="cuda", T=64, N=4099)
    (s_ref, _, _), (s_tri, _, _) = results
    # a fused multiply-add on the GPU may flip a spike sitting at threshold (and that neuron's later
    # spikes); allow 1e-3 of all spikes
    assert (s_ref != s_tri).float().mean() < 1e-3
    if torch.equal(s_ref, s_tri):
        assert_match(results)


def run_alif_both(surrogate, kw, device="cpu", T=8, N=37, dt=1.0):
    from iclr25.neuro.spiking import Surrogate
    from iclr25.neuro.spiking.neurons import ALIF_MULTISTEP

    gen = torch.Generator().manual_seed(zlib.crc32(surrogate.encode()))
    x = torch.randn(T, N, generator=gen) * 0.8 + 0.4
    state = [
        torch.rand(N, generator=gen),
        (torch.rand(N, generator=gen) > 0.5).float(),
        torch.rand(N, generator=gen) / 10,
    ]
    tau_m, tau_adp = torch.rand(N, generator=gen) * 15 + 2, torch.rand(N, generator=gen) * 8 + 2
    w = torch.randn(T, N, generator=gen).to(device)
    surr = Surrogate.make(surrogate, **kw)
    results = []
    for backend in ("reference", "triton"):
        leaves = [t.to(device).clone().requires_grad_() for t in (x, *state, tau_m, tau_adp)]
        xs, v0, s0, b_init, tm, ta = leaves
        spikes, (v, s, b) = ALIF_MULTISTEP(
            xs, v0, s0, b_init, torch.exp(-dt / tm), torch.exp(-dt / ta), 0.04, 1.8, dt, surr, backend=backend
        )
        loss = (spikes * w).sum() + (v**2).sum() + 3 * b.sum() + s.sum()
        # the whole final state (v_T, b_T, s_T) is compared, not only v_T
        results.append((spikes.detach(), torch.stack([v, b, s]).detach(), torch.autograd.grad(loss, leaves)))
    return results


@pytest.mark.triton
@pytest.mark.parametrize(("surrogate", "kw"), [SURR[0], SURR[4]])
def test_alif_kernel_matches_reference_in_interpreter(surrogate, kw):
    _cpu_only()
    assert_match(run_alif_both(surrogate, kw))


@pytest.mark.triton
def test_alif_kernel_matches_reference_with_dt_not_one():
    # Δt scales the reset term B·s·Δt and enters α, ρ: with Δt = 1 a kernel that drops it passes
    _cpu_only()
    assert_match(run_alif_both(*SURR[0], dt=0.5))


@pytest.mark.triton
@pytest.mark.slow
@pytest.mark.parametrize(("surrogate", "kw"), SURR[1:4])
def test_alif_kernel_other_surrogates_in_interpreter(surrogate, kw):
    _cpu_only()
    assert_match(run_alif_both(surrogate, kw))


@pytest.mark.triton
def test_alif_module_triton_path_matches():
    from iclr25.neuro.spiking import ALIF

    _cpu_only()
    x = torch.randn(8, 2, 37, generator=torch.Generator().manual_seed(9)) * 0.8 + 0.4
    ref_layer, tri_layer = ALIF(37, backend="reference"), ALIF(37, backend="triton")
    assert torch.equal(ref_layer(x), tri_layer(x))
    assert torch.equal(ref_layer(x), tri_layer(x))  # second call continues from the stored state
    assert tri_layer(torch.zeros(0, 2, 37)).shape == (0, 2, 37)


@pytest.mark.gpu
@pytest.mark.parametrize(("surrogate", "kw"), SURR)
def test_alif_kernel_matches_reference_on_cuda(surrogate, kw):
    results = run_alif_both(surrogate, kw, device="cuda", T=64, N=4099)
    (s_ref, _, _), (s_tri, _, _) = results
    assert (s_ref != s_tri).float().mean() < 1e-3  # see test_lif_kernel_matches_reference_on_cuda
    if torch.equal(s_ref, s_tri):
        assert_match(results)


@pytest.mark.triton
def test_lif_triton_refuses_a_tensor_v_reset_and_a_state_of_another_dtype():
    # the kernel takes one float v_reset (no gradient for it) and stores v_T in the state's dtype:
    # both must go to the torch loop (auto) or be refused with the reason (explicit triton), where
    # they crashed or returned a float16 v_T the torch loop computes in float32
    from iclr25.neuro.spiking.neurons import _lif_triton_limits

    _cpu_only()
    x = torch.randn(5, 7, generator=torch.Generator().manual_seed(0)) * 3
    v_reset = torch.tensor(-0.2, requires_grad=True)
    with pytest.raises(BackendUnavailableError, match="v_reset"):
        lif_multistep(x, reset="hard", v_reset=v_reset, backend="triton")
    with pytest.raises(BackendUnavailableError, match="v_reset"):
        lif_multistep(x, reset="hard", v_reset=torch.full((7,), -0.2), backend="triton")
    for dtype in (torch.float16, torch.float64):
        with pytest.raises(BackendUnavailableError, match=r"state\.v"):
            lif_multistep(x, LIFState(torch.zeros(7, dtype=dtype)), backend="triton")
    alpha = torch.full((7,), 0.9)
    assert _lif_triton_limits(x, torch.zeros(7), alpha, 1.0, "soft", 0.0) == []
    assert any("v_reset" in r for r in _lif_triton_limits(x, torch.zeros(7), alpha, 1.0, "hard", v_reset))


@pytest.mark.triton
def test_alif_triton_refuses_a_state_of_another_dtype():
    # the kernel casts the state to x's dtype; the torch loop promotes to float64 (float64 results)
    from iclr25.neuro.spiking import Surrogate
    from iclr25.neuro.spiking.neurons import ALIF_MULTISTEP

    _cpu_only()
    x = torch.randn(5, 7, generator=torch.Generator().manual_seed(0)) * 0.8 + 0.4
    z = torch.zeros(7, dtype=torch.float64)
    args = (x, z + 0.3, z, z + 0.01, z + 0.9, z + 0.8, 0.04, 1.8, 1.0, Surrogate.make("gaussian"))
    spikes, state = ALIF_MULTISTEP(*args, backend="reference")
    assert spikes.dtype == state[0].dtype == torch.float64
    with pytest.raises(BackendUnavailableError, match="x's dtype"):
        ALIF_MULTISTEP(*args, backend="triton")
