"""The fused Triton kernel against the plain-torch reference (interpreter on CPU, real kernel on CUDA)."""

import pytest
import torch

from iclr25.core.triton import triton_available
from iclr25.llm.minkpp import token_stats
from iclr25.llm.minkpp.reference import token_stats_reference

pytestmark = pytest.mark.skipif(not triton_available(), reason="triton is not installed")


def _inputs(device="cpu"):
    g = torch.Generator().manual_seed(0)
    logits = 4 * torch.randn(2, 16, 1000, generator=g)
    logits[0, 3, 10:] = -float("inf")  # a masked vocabulary row
    logits[1, 5, 7] = 60.0  # a near-degenerate row
    targets = torch.randint(0, 1000, (2, 16), generator=g)
    targets[0, 3] = 4
    return logits.to(device), targets.to(device)


def _check(device):
    logits, targets = _inputs(device)
    got = token_stats(logits, targets, backend="triton")
    ref = token_stats(logits, targets, backend="reference")
    for a, b in zip(got, ref, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    # The raw variance too (before the sigma floor hides small differences).
    from iclr25.llm.minkpp.kernels import token_stats_triton

    raw = token_stats_triton(logits, targets)
    for a, b in zip(raw, token_stats_reference(logits, targets), strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


@pytest.mark.triton
def test_kernel_matches_reference_interpreter():
    _check("cpu")


@pytest.mark.gpu
def test_kernel_matches_reference_cuda():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    _check("cuda")
