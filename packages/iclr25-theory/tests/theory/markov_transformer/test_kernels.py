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


def test_explicit_triton_without_triton_says_why():
    """Without triton installed, backend="triton" must say so, not call "triton" an unknown backend."""
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['triton'] = None\n"  # as if triton were not installed
        "import torch\n"
        "from iclr25.core.triton import BackendUnavailableError\n"
        "from iclr25.theory.markov_transformer import markov_sample\n"
        "u = torch.rand(3, 4)\n"
        "assert markov_sample(u, 0.3, 0.6, 0.4).shape == (3, 4)\n"
        "try:\n"
        "    markov_sample(u, 0.3, 0.6, 0.4, backend='triton')\n"
        "except BackendUnavailableError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "triton is not installed" in out.stdout
