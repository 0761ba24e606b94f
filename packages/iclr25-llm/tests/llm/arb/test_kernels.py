"""The Triton threshold-search kernel equals the torch reference (interpreter on CPU)."""

import pytest
import torch

from iclr25.llm.arb import binarize, threshold_search
from iclr25.llm.arb.reference import threshold_search_reference


def _case(seed=0, n=5, m=12, T=7):
    g = torch.Generator().manual_seed(seed)
    W = torch.randn(n, m, generator=g) * torch.exp(torch.randn(m, generator=g))
    base = torch.rand(n, m, generator=g) > 0.25
    base[0] = False  # an empty row: zero error, no NaN
    thr = torch.quantile(W.abs()[base], torch.linspace(0.1, 0.9, T))
    return W, base, thr


def test_reference_equals_per_threshold_binarize():
    W, base, thr = _case()
    ref = threshold_search_reference(W.double(), base, thr.double())
    for t, p in enumerate(thr.tolist()):
        big = (W.abs() > p) & base
        Wh = binarize(W.double(), big, "plain").W_hat + binarize(W.double(), base & ~big, "plain").W_hat
        assert float(ref[t]) == pytest.approx(float(((W.double() - Wh) ** 2 * base).sum()), rel=1e-10)


@pytest.mark.triton
def test_search_kernel_equals_reference():
    W, base, thr = _case(1)
    out = threshold_search(W, base, thr, backend="triton")
    ref = threshold_search(W, base, thr, backend="reference")
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)


def test_auto_uses_reference_on_cpu():
    W, base, thr = _case(2)
    assert torch.equal(threshold_search(W, base, thr), threshold_search(W, base, thr, backend="reference"))
