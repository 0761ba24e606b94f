"""Precision audit: inputs below float64 are validated and computed at the precision they were promised."""

import pytest
import torch

from iclr25.theory.ho_calibration import HigherOrderCalibrator, Mixture, counts_from_labels, fit_mixture_em, hoce_k
from iclr25.theory.ho_calibration.em import em_init


@pytest.mark.parametrize("bucketer", ["argmax_conf", "kmeans"])
def test_fit_accepts_float32_probs_within_their_own_tolerance(bucketer):
    gen = torch.Generator().manual_seed(0)
    probs = torch.softmax(torch.randn(200, 3, generator=gen), dim=-1)
    labels = torch.multinomial(probs, 2, replacement=True, generator=gen)
    # Rows off by 3e-6: inside the float32 tolerance (7.6e-6), outside the float64 one (1e-6).
    probs = probs * (1 + 3e-6)
    assert probs.dtype == torch.float32
    cal = HigherOrderCalibrator(n_bins=2, em_iters=5, min_bucket=5, bucketer=bucketer, seed=0)
    cal.fit(probs, counts_from_labels(labels, 3))
    assert cal.bucket_ids(probs).shape == (200,)
    assert cal.predict(probs).weights.dtype == torch.float32


def test_fit_accepts_bfloat16_probs():
    gen = torch.Generator().manual_seed(1)
    probs = torch.softmax(torch.randn(200, 3, generator=gen, dtype=torch.float64), dim=-1)
    labels = torch.multinomial(probs, 2, replacement=True, generator=gen)
    cal = HigherOrderCalibrator(n_bins=2, em_iters=5, min_bucket=5, seed=0)
    cal.fit(probs.to(torch.bfloat16), counts_from_labels(labels, 3))
    assert cal.predict(probs.to(torch.bfloat16)).components.dtype == torch.bfloat16


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_hoce_k_counts_half_precision_mixtures_exactly(dtype):
    gen = torch.Generator().manual_seed(2)
    weights = torch.tensor([[0.5, 0.5]], dtype=torch.float64)
    components = torch.tensor([[[0.9, 0.1], [0.2, 0.8]]], dtype=torch.float64)
    labels = torch.multinomial(torch.tensor([[0.55, 0.45]]).expand(5000, 2), 2, replacement=True, generator=gen)
    counts = counts_from_labels(labels, 2)  # thousands per count vector: past bf16's 256 and fp16's 2048
    ids = torch.zeros(5000, dtype=torch.int64)
    exact = hoce_k(Mixture(weights, components), ids, counts)
    low = hoce_k(Mixture(weights.to(dtype), components.to(dtype)), ids, counts)
    # Only the rounding of the mixture itself (a few 1e-3) may separate the two.
    assert low == pytest.approx(exact, abs=5e-3)


def test_em_on_an_all_zero_bucket_is_finite_in_float32():
    counts = torch.zeros(2, 4, 3)
    counts[0, :, 0] = 2.0
    mask = torch.ones(2, 4, dtype=torch.bool)
    _, comps = em_init(counts, mask, 2, 2, torch.Generator().manual_seed(0))
    assert torch.isfinite(comps).all()
    res32 = fit_mixture_em(counts, mask, n_components=2, iters=5, generator=torch.Generator().manual_seed(0))
    res64 = fit_mixture_em(counts.double(), mask, n_components=2, iters=5, generator=torch.Generator().manual_seed(0))
    assert torch.isfinite(res32.mixture.components).all() and torch.isfinite(res32.loglik).all()
    torch.testing.assert_close(res32.mixture.components[1].double(), res64.mixture.components[1])
