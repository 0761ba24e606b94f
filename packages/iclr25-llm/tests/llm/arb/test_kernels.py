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


@pytest.mark.triton
def test_search_kernel_float64_thresholds_compare_like_the_reference():
    # float32 W against float64 thresholds: the reference compares |w| > p in float64, the kernel rounded
    # p to the nearest float32, so p = 0.1 (float64, just below float32(0.1)) put |w| = float32(0.1)
    # in the small group instead of the big one.
    W = torch.tensor([[0.1, 1.0, 0.5, 0.3], [0.3, -0.1, 0.7, 0.2]])
    base = torch.ones_like(W, dtype=torch.bool)
    thr = torch.tensor([0.1, 0.3, 0.5, 0.2 + 1e-12], dtype=torch.float64)
    out = threshold_search(W, base, thr, backend="triton")
    torch.testing.assert_close(out, threshold_search(W, base, thr, backend="reference"), rtol=1e-5, atol=1e-6)


@pytest.mark.triton
def test_search_kernel_zero_columns_and_bad_shapes():
    from iclr25.core.triton import BackendUnavailableError

    # a block of zero columns: zero error for every threshold (the kernel failed to build a 0-wide range)
    W, base = torch.randn(3, 0), torch.ones(3, 0, dtype=torch.bool)
    assert torch.equal(threshold_search(W, base, torch.tensor([0.1, 0.2]), backend="triton"), torch.zeros(2))
    # the op called directly with base or thresholds of other shapes: the kernel read past them
    from iclr25.llm.arb.search import THRESHOLD_SEARCH

    W = torch.randn(4, 17)
    for b, t in ((torch.ones(1, 17, dtype=torch.bool), torch.tensor([0.5])), (W.abs() > 0.5, torch.tensor([[0.5]]))):
        with pytest.raises(BackendUnavailableError, match="base of W's shape"):
            THRESHOLD_SEARCH(W, b, t, backend="triton")
