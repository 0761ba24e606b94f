"""The Triton sampler against the torch loop reference (TRITON_INTERPRET=1 on CPU)."""

import os
import subprocess
import sys
import textwrap

import pytest
import torch

from iclr25.core.triton import triton_available
from iclr25.theory.markov_transformer import markov_sample

if triton_available():
    import triton
    import triton.language as tl

    from iclr25.theory.markov_transformer.kernels import _block_rows

    @triton.jit
    def _row_offsets_probe(out_ptr, block_id, stride, BLOCK: tl.constexpr):
        tl.store(out_ptr + tl.arange(0, BLOCK), _block_rows(block_id, BLOCK) * stride)


@pytest.mark.triton
@pytest.mark.parametrize(("p", "q", "init_one"), [(0.8, 0.8, 0.5), (0.1, 0.35, 0.2)])
def test_triton_sampler_identical_to_reference(p, q, init_one):
    u = torch.rand(130, 9, generator=torch.Generator().manual_seed(0))  # 130 rows: two blocks, one masked
    ref = markov_sample(u, p, q, init_one, backend="reference")
    assert torch.equal(markov_sample(u, p, q, init_one, backend="triton"), ref)


@pytest.mark.triton
def test_row_offsets_are_exact_past_int32():
    # block_id arrives as int32, like tl.program_id; rows * stride computed in int32 wrapped to
    # -2**31 here, which the sampler then used as a pointer offset
    block, stride = 128, 2**20
    block_id = 2**31 // (block * stride)
    got = torch.zeros(block, dtype=torch.long)
    _row_offsets_probe[(1,)](got, block_id, stride, BLOCK=block)
    want = (block_id * block + torch.arange(block)) * stride
    assert want[0] == 2**31
    assert torch.equal(got, want)


@pytest.mark.triton
def test_triton_sampler_strided_views_of_a_buffer_past_int32():
    """The real kernel on rows and time steps 2**30 elements apart, so offsets reach 2**31.

    The views touch a few pages of an 8 GiB buffer that stays virtual; int32 offsets made the old
    kernel read 8 GiB before it (a segfault under the interpreter), so this runs in a subprocess.
    """
    code = textwrap.dedent(
        """
        import torch
        from iclr25.theory.markov_transformer import markov_sample
        try:
            big = torch.empty(2**31 + 8, dtype=torch.float32)
        except (RuntimeError, MemoryError):
            print("no address space")
            raise SystemExit
        g = torch.Generator().manual_seed(0)
        for shape, strides in (((3, 8), (2**30, 1)), ((2, 3), (1, 2**30))):
            u = big.as_strided(shape, strides)
            u.copy_(torch.rand(shape, generator=g))
            ref = markov_sample(u, 0.3, 0.6, 0.4, backend="reference")
            assert torch.equal(markov_sample(u, 0.3, 0.6, 0.4, backend="triton"), ref), strides
        print("ok")
        """
    )
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, (out.returncode, out.stderr[-2000:])
    if "no address space" in out.stdout:
        pytest.skip("cannot reserve 8 GiB of virtual memory for the sparse buffer")
    assert out.stdout.strip() == "ok"


@pytest.mark.gpu
def test_triton_sampler_on_cuda():
    u = torch.rand(4096, 256, device="cuda", generator=torch.Generator(device="cuda").manual_seed(0))
    ref = markov_sample(u, 0.3, 0.6, 0.4, backend="reference")
    assert torch.equal(markov_sample(u, 0.3, 0.6, 0.4, backend="triton"), ref)


def test_explicit_triton_without_triton_says_why():
    """Without triton installed, backend="triton" must say so, not call "triton" an unknown backend."""
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
