"""The fused Triton GIF encoder equals the torch loop: exact spikes, input and θ gradients within 1e-5.

The iclr25.core.testing plugin sets TRITON_INTERPRET=1 on machines without CUDA before this module
imports, so ``backend="triton"`` runs the kernels in Triton's CPU interpreter. S = 4 steps; N = 37
is one ragged block (the CPU block is 64) and ``(5, 37)`` is three blocks, the last ragged, with a
per-channel θ broadcast over the rows.

Inputs sit on a 1/16 grid and most θ are powers of two, so many ``u/θ`` land exactly on a level or a
half level: the floor/round boundaries and the straight-through clip edges are exercised, not
only generic values.
"""

import itertools
import zlib

import pytest
import torch

from iclr25.core.triton import BackendUnavailableError
from iclr25.neuro.spiking import SURROGATES, GIFNeuron, Surrogate, gif_encode

DRIVES = ["initial", "constant"]
RESETS = ["soft", "hard"]
ROUNDINGS = ["floor", "round"]
THETAS = ["float", "scalar", "channel"]  # python float (no θ grad), learnable 0-d, learnable per channel


def make_inputs(drive, reset, rounding, bipolar, theta_kind, shape, tag=""):
    gen = torch.Generator().manual_seed(zlib.crc32(f"{drive}/{reset}/{rounding}/{bipolar}/{theta_kind}{tag}".encode()))
    lo, hi = (-4, 9) if drive == "initial" else (-1, 2)  # a constant drive adds x every step
    if bipolar:
        lo, hi = -hi, hi
    x = torch.randint(16 * lo, 16 * hi + 1, shape, generator=gen).float() / 16
    if theta_kind == "float":
        theta = 0.5
    elif theta_kind == "scalar":
        theta = torch.tensor(0.75)
    else:
        choices = torch.tensor([0.25, 0.5, 1.0, 0.75, 0.3, 1.5])
        theta = choices[torch.randint(0, len(choices), shape[-1:], generator=gen)]
    w = torch.randn(4, *shape, generator=gen)  # upstream gradient of the spikes
    w2 = torch.randn(shape, generator=gen)  # and of the decoded value θ Σ s (the LSQ path)
    return x, theta, w, w2


def run_both(drive, reset, rounding, bipolar, theta_kind, shape=(37,), surrogate="ste", kw=None, levels=4, tag=""):
    x, theta, w, w2 = make_inputs(drive, reset, rounding, bipolar, theta_kind, shape, tag)
    w, w2 = w.to(x.device), w2.to(x.device)
    results = []
    for backend in ("reference", "triton"):
        xs = x.clone().requires_grad_()
        th = theta if isinstance(theta, float) else theta.clone().requires_grad_()
        s = gif_encode(
            xs,
            levels,
            4,
            v_th=th,
            bipolar=bipolar,
            rounding=rounding,
            drive=drive,
            reset=reset,
            surrogate=surrogate,
            surrogate_kw=kw,
            backend=backend,
        )
        loss = (s * w).sum() + (th * s.sum(0) * w2).sum()
        leaves = [xs] if isinstance(th, float) else [xs, th]
        results.append((s.detach(), torch.autograd.grad(loss, leaves)))
    return results


def assert_match(results):
    (s_ref, g_ref), (s_tri, g_tri) = results
    nonzero = (s_ref != 0).float().mean()
    assert 0.05 < nonzero < 0.95, f"degenerate spike train (nonzero fraction {nonzero:.3f})"
    assert torch.equal(s_ref, s_tri)
    for i, (a, b) in enumerate(zip(g_tri, g_ref, strict=True)):
        assert b.abs().max() > 0, f"gradient of leaf {i} is identically zero: the comparison would be void"
        # atol 1e-5 as specified, plus ~8 float32 ulps relative for per-element gradients summed over
        # the steps; a θ shared by many elements sums hundreds of terms in another order than the torch
        # loop (which reduces per step), where rounding reaches 2.3e-5 at |g| ≈ 12
        rtol = 1e-5 if b.numel() < g_ref[0].numel() else 1e-6
        torch.testing.assert_close(a, b, rtol=rtol, atol=1e-5, msg=lambda m, n=i: f"grad of leaf {n}: {m}")


def _cpu_only():
    if torch.cuda.is_available():
        pytest.skip("interpreter check is for CPU-only machines; the gpu test covers CUDA")


# drive × reset × rounding once each, bipolar and the three θ kinds rotated so every (bipolar, θ)
# pair appears
ROTATED = [
    (drive, reset, rounding, i % 2 == 1, THETAS[i % 3])
    for i, (drive, reset, rounding) in enumerate(itertools.product(DRIVES, RESETS, ROUNDINGS))
]
PARAMS = ("drive", "reset", "rounding", "bipolar", "theta_kind")


@pytest.mark.triton
@pytest.mark.parametrize(PARAMS, ROTATED)
def test_gif_kernel_matches_reference_in_interpreter(drive, reset, rounding, bipolar, theta_kind):
    _cpu_only()
    assert_match(run_both(drive, reset, rounding, bipolar, theta_kind))


@pytest.mark.triton
@pytest.mark.parametrize(("drive", "reset"), [("constant", "hard"), ("initial", "soft")])
def test_gif_kernel_several_blocks_and_broadcast_theta(drive, reset):
    _cpu_only()
    assert_match(run_both(drive, reset, "round", True, "channel", shape=(5, 37)))
    assert_match(run_both(drive, reset, "floor", False, "scalar", shape=(5, 37)))


@pytest.mark.triton
@pytest.mark.parametrize("drive", DRIVES)
def test_gif_kernel_surrogate_summed_over_level_edges(drive):
    # a smooth surrogate is summed over the L - 1 level edges; L = 5 bipolar has edges -1..2
    _cpu_only()
    assert_match(run_both(drive, "soft", "round", True, "channel", surrogate="triangle", levels=5))


@pytest.mark.triton
@pytest.mark.slow
@pytest.mark.parametrize("shape", [(37,), (5, 37)])
@pytest.mark.parametrize("theta_kind", THETAS)
@pytest.mark.parametrize("bipolar", [False, True])
@pytest.mark.parametrize("rounding", ROUNDINGS)
@pytest.mark.parametrize("reset", RESETS)
@pytest.mark.parametrize("drive", DRIVES)
def test_gif_kernel_all_combinations_in_interpreter(drive, reset, rounding, bipolar, theta_kind, shape):
    _cpu_only()
    assert_match(run_both(drive, reset, rounding, bipolar, theta_kind, shape=shape))


@pytest.mark.triton
@pytest.mark.slow
# the interpreter evaluates the sigmoid surrogate's exp(-k z) in numpy, which warns when it reaches
# inf far from an edge; the derivative there is 0 in both paths
@pytest.mark.filterwarnings("ignore:overflow encountered in exp:RuntimeWarning")
@pytest.mark.parametrize("reset", RESETS)
@pytest.mark.parametrize("drive", DRIVES)
@pytest.mark.parametrize(("surrogate", "kw"), [(name, {}) for name in SURROGATES] + [("ste", {"width": 0.5})])
def test_gif_kernel_all_surrogates_in_interpreter(surrogate, kw, drive, reset):
    # the GIF straight-through rule is the clip range whatever the STE width: the kernel must agree
    _cpu_only()
    assert_match(run_both(drive, reset, "floor", True, "channel", surrogate=surrogate, kw=kw, levels=6, tag=surrogate))


@pytest.mark.triton
def test_gif_module_triton_path_learnable_threshold_and_edge_shapes():
    _cpu_only()
    gen = torch.Generator().manual_seed(11)
    x = torch.randint(-64, 64, (2, 3, 37), generator=gen).float() / 16
    theta = torch.rand(37, generator=gen) + 0.2
    w = torch.randn(2, 3, 37, generator=gen)
    grads = []
    for backend in ("reference", "triton"):
        neuron = GIFNeuron(16, 3, v_th=theta, bipolar=True, learn_threshold=True, backend=backend)
        s = neuron(x)  # x without grad: only θ needs the backward
        (neuron.decode(s) * w).sum().backward()
        grads.append((s, neuron.v_th.grad))
    (s_ref, g_ref), (s_tri, g_tri) = grads
    assert torch.equal(s_ref, s_tri) and s_ref.abs().sum() > 0
    torch.testing.assert_close(g_tri, g_ref, rtol=1e-6, atol=1e-5)
    neuron = GIFNeuron(4, 2, backend="triton")
    assert neuron(torch.zeros(0, 5)).shape == (2, 0, 5)
    assert torch.equal(neuron(torch.tensor(2.5)), GIFNeuron(4, 2, backend="reference")(torch.tensor(2.5)))


def test_gif_auto_uses_the_torch_loop_on_cpu_and_the_kernel_states_its_limits():
    from iclr25.neuro.spiking.gif import GIF_ENCODE, _gif_triton_limits

    x = torch.randn(4, 5, dtype=torch.float64)
    s = gif_encode(x, 4, 2)  # auto on CPU: the torch loop, which keeps float64
    assert s.dtype == torch.float64
    with pytest.raises(BackendUnavailableError):
        gif_encode(x, 4, 2, backend="triton")
    args = (x.float(), torch.tensor(1.0), 2, 0, 3, 0.0, False, "soft", Surrogate.make("ste"))
    # auto never picks the interpreter, so on CPU tensors it is always the torch loop
    assert GIF_ENCODE.select(*args).name == "reference"
    assert _gif_triton_limits(*args) == []
    assert any("float32" in r for r in _gif_triton_limits(x, torch.tensor(1.0, dtype=torch.float64), 2))
    big = torch.empty(2**29, 2, dtype=torch.float32, device="meta")
    assert any("int32" in r for r in _gif_triton_limits(big, torch.tensor(1.0, device="meta"), 4))
    assert any("one device" in r for r in _gif_triton_limits(x.float(), torch.tensor(1.0, device="meta"), 2))
    with pytest.raises(ValueError, match="backend"):
        GIFNeuron(4, 2, backend="cuda")
    with pytest.raises(ValueError, match="backend"):
        gif_encode(x, 4, 2, backend="cuda")


@pytest.mark.gpu
@pytest.mark.parametrize(PARAMS, ROTATED)
def test_gif_kernel_matches_reference_on_cuda(drive, reset, rounding, bipolar, theta_kind):
    # the kernel divides with IEEE rounding and is compiled without fused multiply-adds, so unlike
    # the LIF kernel the levels are expected to match the torch loop exactly on the GPU too
    x, theta, w, w2 = make_inputs(drive, reset, rounding, bipolar, theta_kind, (64, 4099))
    results = []
    for backend in ("reference", "triton"):
        xs = x.cuda().requires_grad_()
        th = theta if isinstance(theta, float) else theta.cuda().requires_grad_()
        s = gif_encode(xs, 4, 4, v_th=th, bipolar=bipolar, rounding=rounding, drive=drive, reset=reset, backend=backend)
        loss = (s * w.cuda()).sum() + (th * s.sum(0) * w2.cuda()).sum()
        leaves = [xs] if isinstance(th, float) else [xs, th]
        results.append((s.detach(), torch.autograd.grad(loss, leaves)))
    (s_ref, g_ref), (s_tri, g_tri) = results
    assert torch.equal(s_ref, s_tri)
    torch.testing.assert_close(g_tri[0], g_ref[0], rtol=1e-6, atol=1e-5)
    for a, b in zip(g_tri[1:], g_ref[1:], strict=True):  # θ sums 4 steps × 64 rows in another order
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-4)


@pytest.mark.triton
@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 4)])
def test_gif_kernel_empty_input_stays_differentiable(shape):
    # the torch loop's empty result is part of the graph; the kernel's was a detached zeros tensor,
    # so backward() raised in a training step that met an empty batch
    _cpu_only()
    grads = []
    for backend in ("reference", "triton"):
        x = torch.zeros(shape, requires_grad=True)
        theta = torch.ones(shape[-1:], requires_grad=True)
        s = gif_encode(x, 4, 3, v_th=theta, backend=backend)
        assert s.shape == (3, *shape) and s.requires_grad
        s.sum().backward()
        grads.append((x.grad, theta.grad))
    (gx_ref, gth_ref), (gx_tri, gth_tri) = grads
    assert torch.equal(gx_tri, gx_ref) and torch.equal(gth_tri, gth_ref)


@pytest.mark.triton
# the interpreter runs the overflow and the inf · 0 in numpy, which warns; both are the point here
@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_gif_kernel_clip_propagates_nan_as_torch_clamp():
    # finite inputs whose membrane overflows: inf · 0 in the hard reset gives a NaN membrane, which
    # torch.clamp keeps as a NaN level; the kernel's clip turned it into level lo (0 here)
    _cpu_only()
    x, theta = torch.tensor([2e38, 1.0]), torch.tensor([3e38, 1.0])
    kw = {"v_th": theta, "drive": "constant", "reset": "hard"}
    s_ref = gif_encode(x, 4, 4, backend="reference", **kw)
    s_tri = gif_encode(x, 4, 4, backend="triton", **kw)
    assert bool(s_ref.isnan().any())  # the case is live
    torch.testing.assert_close(s_tri, s_ref, rtol=0, atol=0, equal_nan=True)


def test_gif_kernel_refuses_a_theta_that_would_promote_x():
    from iclr25.neuro.spiking.gif import _gif_triton_limits

    x = torch.randn(3)
    assert any("v_th" in r for r in _gif_triton_limits(x, torch.ones(3, dtype=torch.float64), 2))
    # a 0-d float64 θ does not promote a float32 x in the torch loop either
    assert _gif_triton_limits(x, torch.tensor(1.0, dtype=torch.float64), 2) == []
