"""Triton kernels under TRITON_INTERPRET=1 against their torch references (37 vectors)."""

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
