"""Triton kernels under TRITON_INTERPRET=1 against their torch references (37 vectors)."""

import math
import re

import pytest
import torch

from iclr25.compress.ltc import LatticeEntropyModel, MixtureDensity, lattice
from iclr25.compress.ltc.reference import e8_quantize_reference, mixture_mc_log_likelihood_reference


@pytest.mark.triton
def test_e8_kernel_equals_reference():
    from iclr25.compress.ltc.kernels import e8_quantize_triton

    g = torch.Generator().manual_seed(0)
    y = 3 * torch.randn(37, 8, generator=g)
    y[0] = torch.tensor([0.5, 0, 0, 0, 0, 0, 0, 0.5])  # exact ties go the same way
    y[1] = 0.25
    out = e8_quantize_triton(y)
    assert torch.equal(out, e8_quantize_reference(y))
    assert torch.equal(out, lattice("E8").quantize(y))


@pytest.mark.triton
def test_fused_likelihood_equals_reference():
    torch.manual_seed(0)
    dens = MixtureDensity(8)
    with torch.no_grad():
        for p in dens.parameters():
            p.add_(0.3 * torch.randn(p.shape))
    lat = lattice("E8")
    y_hat = lat.quantize(2 * torch.randn(37, 8))
    u = lat.sample_voronoi(19, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        logw, mu, logs = dens.params()
        ref = mixture_mc_log_likelihood_reference(y_hat, u, logw, mu, logs)
        em = LatticeEntropyModel(lat, dens, n_samples=19)
        fused = em.log_likelihood(y_hat, generator=torch.Generator().manual_seed(1), backend="triton")
    assert torch.allclose(fused, ref, atol=1e-5, rtol=0)


def test_auto_backend_uses_the_reference_on_cpu():
    dens = MixtureDensity(2)
    em = LatticeEntropyModel(lattice("A2"), dens, n_samples=8)
    y = torch.zeros(3, 2)
    a = em.log_likelihood(y, generator=torch.Generator().manual_seed(0))
    b = em.log_likelihood(y, generator=torch.Generator().manual_seed(0), backend="reference")
    assert torch.equal(a, b)


def _mixture_inputs(B, N, n, K, seed):
    g = torch.Generator().manual_seed(seed)
    y = (2 * torch.randn(B, n, generator=g)).round()
    u = torch.rand(N, n, generator=g) - 0.5
    logw = torch.log_softmax(torch.randn(n, K, generator=g), -1)
    mu = torch.randn(n, K, generator=g)
    logs = 0.4 * torch.randn(n, K, generator=g)
    gout = torch.randn(B, generator=g)  # a generic upstream gradient, both signs
    return y, u, logw, mu, logs, gout


def _gradient_tolerances(y, u, logw, mu, logs, gout):
    """Float32 error bounds for each gradient entry, from float64 per-term magnitudes.

    Every gradient entry is a sum of ``m`` terms (``m = N·K`` for ŷ, ``m = B·N`` for a parameter).
    Summing in float32 in any order errs by at most ``m·ε·Σ|term|``; each term is itself a product
    of ``exp(s − lse)`` and ``exp(comp − lpc)`` whose arguments carry absolute errors of about
    ``ε·(Σ_c |lpc| + |lse|)``, a relative error of the term. Hence
    ``tol = ε·(m + 4·A + 16)·Σ|term|`` with ``A = max (Σ_c |lpc| + |lse|)``.
    """
    y, u, logw, mu, logs, gout = (t.double() for t in (y, u, logw, mu, logs, gout))
    t = y[:, None, :, None] + u[None, :, :, None]  # (B, N, n, 1)
    z = (t - mu) * torch.exp(-logs)
    comp = logw - logs - 0.5 * z * z - 0.5 * math.log(2 * math.pi)
    lpc = torch.logsumexp(comp, -1)  # (B, N, n)
    s = lpc.sum(-1)
    lse = torch.logsumexp(s, -1)
    w = (gout[:, None] * torch.exp(s - lse[:, None]))[..., None, None] * torch.exp(comp - lpc[..., None])
    aw = w.abs()
    sums = {
        "y": (aw * z.abs() * torch.exp(-logs)).sum((1, 3)),
        "logw": aw.sum((0, 1)),
        "mu": (aw * z.abs() * torch.exp(-logs)).sum((0, 1)),
        "logs": (aw * (z * z - 1).abs()).sum((0, 1)),
    }
    B, N, _, K = w.shape
    A = float((lpc.abs().sum(-1) + lse.abs()[:, None]).max())
    eps = torch.finfo(torch.float32).eps
    m = {"y": N * K, "logw": B * N, "mu": B * N, "logs": B * N}
    return {k: eps * (m[k] + 4 * A + 16) * v for k, v in sums.items()}


def _grads(fn, y, u, logw, mu, logs, gout):
    leaves = [t.clone().requires_grad_(True) for t in (y, logw, mu, logs)]
    out = fn(leaves[0], u, *leaves[1:])
    torch.autograd.backward(out, gout.to(out.dtype))
    return out.detach(), dict(zip(("y", "logw", "mu", "logs"), (t.grad for t in leaves), strict=True))


@pytest.mark.triton
@pytest.mark.parametrize("B,N,n,K", [(37, 19, 8, 3), (5, 7, 3, 5)])
def test_fused_backward_equals_autograd_of_reference(B, N, n, K):
    from iclr25.compress.ltc.kernels import mixture_mc_log_likelihood_triton

    inputs = _mixture_inputs(B, N, n, K, seed=B)
    tol = _gradient_tolerances(*inputs)
    _, exact = _grads(mixture_mc_log_likelihood_reference, *(t.double() for t in inputs))
    out32, ref = _grads(mixture_mc_log_likelihood_reference, *inputs)
    fused_out, fused = _grads(mixture_mc_log_likelihood_triton, *inputs)
    assert torch.allclose(fused_out, out32, atol=1e-5, rtol=0)
    for k in exact:
        assert fused[k].dtype == torch.float32 and fused[k].shape == exact[k].shape
        # the bound is met by torch's own float32 autograd, and must be met by the fused kernel
        assert ((ref[k].double() - exact[k]).abs() <= tol[k]).all(), k
        err = (fused[k].double() - exact[k]).abs()
        assert (err <= tol[k]).all(), (k, float((err / tol[k]).max()))
        # and the bound is informative: far below the gradient's own size
        assert float(tol[k].max()) < 1e-2 * float(exact[k].abs().max()), k


@pytest.mark.triton
def test_fused_backward_through_the_entropy_model():
    torch.manual_seed(0)
    lat = lattice("E8")
    y = (2 * torch.randn(21, 8)).requires_grad_(True)
    grads = {}
    for backend in ("reference", "triton"):
        dens = MixtureDensity(8)
        with torch.no_grad():
            for p in dens.parameters():
                p.copy_(torch.linspace(-0.5, 0.5, p.numel()).reshape(p.shape))
        em = LatticeEntropyModel(lat, dens, n_samples=11)
        y_hat = y + (lat.quantize(y.detach()) - y).detach()  # STE, as in training
        bits = em.bits(y_hat, generator=torch.Generator().manual_seed(3)) if backend == "reference" else None
        log_p = em.log_likelihood(y_hat, generator=torch.Generator().manual_seed(3), backend=backend)
        if bits is not None:
            assert torch.allclose(bits, -log_p.detach() / math.log(2.0))
        (gy,) = torch.autograd.grad(log_p.sum(), y, retain_graph=True)
        log_p.sum().backward()
        grads[backend] = [gy] + [p.grad.clone() for p in dens.parameters()]
    for a, b in zip(grads["reference"], grads["triton"], strict=True):
        assert torch.allclose(a, b, atol=1e-4, rtol=1e-4)
        assert a.abs().max() > 1e-3  # the parameters do receive gradient


@pytest.mark.triton
def test_fused_path_refuses_differentiable_samples():
    from iclr25.core.triton import BackendUnavailableError

    dens = MixtureDensity(2)
    u = torch.zeros(4, 2, requires_grad=True)
    logw, mu, logs = dens.params()
    from iclr25.compress.ltc.entropy import MC_LOG_LIKELIHOOD

    with pytest.raises(BackendUnavailableError, match="u requires grad"):
        MC_LOG_LIKELIHOOD(torch.zeros(3, 2), u, logw, mu, logs, backend="triton")


@pytest.mark.triton
def test_fused_path_refuses_shapes_it_cannot_index():
    # the kernel indexes u as (N, n) and the parameters as (n, K); the reference broadcasts, so e.g. a
    # mixture shared by all channels must run on the reference, never be read out of bounds
    from iclr25.compress.ltc.entropy import MC_LOG_LIKELIHOOD
    from iclr25.core.triton import BackendUnavailableError

    y, u, logw, mu, logs, _ = _mixture_inputs(5, 4, 3, 2, seed=0)
    shared = (y, u, logw, mu[0], logs)  # (K,) means, broadcast over channels
    cases = [
        ("logw, mu, log_scale of shape (n, K)", shared),
        ("logw, mu, log_scale of shape (n, K)", (y, u, logw, mu, logs.new_tensor(0.1))),  # one scalar
        ("u (N, n)", (y, u[:, :1], logw, mu, logs)),  # u broadcast over channels
        ("y_hat (B, n)", (y[None], u, logw, mu, logs)),
    ]
    for match, args in cases:
        with pytest.raises(BackendUnavailableError, match=re.escape(match)):
            MC_LOG_LIKELIHOOD(*args, backend="triton")
    assert torch.equal(MC_LOG_LIKELIHOOD(*shared), mixture_mc_log_likelihood_reference(*shared))


@pytest.mark.triton
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the interpreter's numpy reports the intended overflow
def test_fused_likelihood_keeps_minus_inf_where_the_reference_does():
    # z * z overflowing float32 (a collapsed scale) makes every component -inf: torch.logsumexp gives
    # -inf there (clamped to the likelihood bound downstream), the online logsumexp must not give NaN
    from iclr25.compress.ltc.kernels import mixture_mc_log_likelihood_triton

    y, u, logw, mu, logs, _ = _mixture_inputs(5, 4, 3, 2, seed=0)
    logs = torch.full_like(logs, -60.0)
    logs[:, 1] = 0.0  # rows stay finite through one finite component per channel ...
    ref = mixture_mc_log_likelihood_reference(y + 1, u, logw, mu, logs)
    assert bool(ref.isfinite().all())
    assert torch.allclose(mixture_mc_log_likelihood_triton(y + 1, u, logw, mu, logs), ref, atol=1e-5, rtol=0)
    logs[:, 1] = -60.0  # ... and are -inf without it
    ref = mixture_mc_log_likelihood_reference(y + 1, u, logw, mu, logs)
    assert bool((ref == -math.inf).all())
    assert torch.equal(mixture_mc_log_likelihood_triton(y + 1, u, logw, mu, logs), ref)


@pytest.mark.triton
def test_fused_backward_refuses_double_backward():
    # the fused backward's gradients carry no graph: with create_graph=True a penalty on them would
    # silently be a constant, so the backward must refuse instead
    from iclr25.compress.ltc.kernels import mixture_mc_log_likelihood_triton

    y, u, logw, mu, logs, gout = _mixture_inputs(5, 4, 3, 2, seed=0)
    y.requires_grad_(True)
    out = mixture_mc_log_likelihood_triton(y, u, logw, mu, logs)
    with pytest.raises(RuntimeError, match="create_graph"):
        torch.autograd.grad(out, y, gout, create_graph=True)
    (gy,) = torch.autograd.grad(mixture_mc_log_likelihood_triton(y, u, logw, mu, logs), y, gout)
    (ref,) = torch.autograd.grad(mixture_mc_log_likelihood_reference(y, u, logw, mu, logs), y, gout)
    assert torch.allclose(gy, ref, atol=1e-5, rtol=1e-5)  # first order is unaffected


@pytest.mark.triton
@pytest.mark.parametrize("block", [0, -1, 48])
def test_e8_kernel_rejects_bad_block(block):
    from iclr25.compress.ltc.kernels import e8_quantize_triton

    with pytest.raises(ValueError, match="block must be a positive power of 2"):
        e8_quantize_triton(torch.zeros(5, 8), block=block)


@pytest.mark.triton
@pytest.mark.parametrize("dtype", [torch.float64, torch.float16])
def test_fused_likelihood_refuses_other_dtypes_instead_of_returning_float32(dtype):
    """Called directly, the kernel returned float32 for float64 inputs (the reference keeps the dtype)."""
    from iclr25.compress.ltc.kernels import mixture_mc_log_likelihood_triton

    lat = lattice("E8")
    y_hat = lat.quantize(2 * torch.randn(5, 8, generator=torch.Generator().manual_seed(0))).to(dtype)
    u = lat.sample_voronoi(7, generator=torch.Generator().manual_seed(1), dtype=dtype)
    logw, mu, logs = (t.detach().to(dtype) for t in MixtureDensity(8).params())
    assert mixture_mc_log_likelihood_reference(y_hat, u, logw, mu, logs).dtype == dtype
    with pytest.raises(ValueError, match="float32"):
        mixture_mc_log_likelihood_triton(y_hat, u, logw, mu, logs)
