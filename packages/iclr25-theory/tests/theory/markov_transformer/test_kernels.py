"""The Triton sampler against the torch loop reference (TRITON_INTERPRET=1 on CPU)."""

import pytest
import torch

from iclr25.theory.markov_transformer import markov_sample


@pytest.mark.triton
@pytest.mark.parametrize(("p", "q", "init_one"), [(0.8, 0.8, 0.5), (0.1, 0.35, 0.2)])
def test_triton_sampler_identical_to_reference(p, q, init_one):
    u = torch.rand(130, 9, generator=torch.Generator().manual_seed(0))  # 130 rows: two blocks, one masked
    ref = markov_sample(u, p, q, init_one, backend="reference")
    assert torch.equal(markov_sample(u, p, q, init_one, backend="triton"), ref)


@pytest.mark.gpu
def test_triton_sampler_on_cuda():
    u = torch.rand(4096, 256, device="cuda", generator=torch.Generator(device="cuda").manual_seed(0))
    ref = markov_sample(u, 0.3, 0.6, 0.4, backend="reference")
    assert torch.equal(markov_sample(u, 0.3, 0.6, 0.4, backend="triton"), ref)
