"""EM on count vectors: recovery of a known mixture, batched == per-bucket loop, k = 1 keeps the mean."""

import itertools

import pytest
import torch

from iclr25.theory.ho_calibration import counts_from_labels, fit_mixture_em
from iclr25.theory.ho_calibration.em import em_init, pad_buckets
from iclr25.theory.ho_calibration.reference import fit_mixture_em_loop

W_TRUE = torch.tensor([0.4, 0.6], dtype=torch.float64)
P_TRUE = torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.3, 0.6]], dtype=torch.float64)


def _snapshots(n, k, seed):
    gen = torch.Generator().manual_seed(seed)
    comp = torch.multinomial(W_TRUE, n, replacement=True, generator=gen)
    labels = torch.multinomial(P_TRUE[comp], k, replacement=True, generator=gen)
    return counts_from_labels(labels, 3).double()


def test_em_recovers_a_two_component_mixture_from_10_snapshots():
    counts = _snapshots(5000, 10, seed=0)
    fit = fit_mixture_em(counts, n_components=2, iters=200, restarts=3, generator=torch.Generator().manual_seed(0))
    mix = fit.mixture
    errors = []
    for perm in itertools.permutations(range(2)):
        p_err = (mix.components[list(perm)] - P_TRUE).abs().sum(-1).max().item()
        w_err = (mix.weights[list(perm)] - W_TRUE).abs().sum().item()
        errors.append((p_err, w_err))
    p_err, w_err = min(errors)
    assert p_err <= 0.05, p_err
    assert w_err <= 0.05, w_err


def test_em_with_single_labels_matches_label_frequencies():
    counts = _snapshots(3000, 1, seed=1)
    mix = fit_mixture_em(
        counts, n_components=6, iters=50, restarts=2, generator=torch.Generator().manual_seed(1)
    ).mixture
    freq = counts.mean(0)
    # each M-step reproduces the label frequencies exactly, up to the 1e-6 pseudo-count
    assert torch.allclose(mix.mean(), freq, atol=1e-4, rtol=0)


def test_batched_em_equals_per_bucket_loop():
    gen = torch.Generator().manual_seed(2)
    sizes = [37, 120, 5, 64]
    ks = [2, 5, 3, 10]  # totals may differ between buckets
    buckets = [
        counts_from_labels(
            torch.randint(4, (n, k), generator=gen) * (torch.rand(n, 1, generator=gen) < 0.5), 4
        ).double()
        for n, k in zip(sizes, ks, strict=True)
    ]
    ids = torch.cat([torch.full((n,), b) for b, n in enumerate(sizes)])
    perm = torch.randperm(ids.numel(), generator=gen)
    padded, mask = pad_buckets(torch.cat(buckets)[perm], ids[perm], len(sizes))
    init = em_init(padded, mask, n_components=3, restarts=2, generator=gen)
    batched = fit_mixture_em(padded, mask, n_components=3, iters=60, restarts=2, init=init)
    # pad_buckets keeps input order within a bucket; the loop gets the same rows
    per_bucket = [torch.cat(buckets)[perm][ids[perm] == b] for b in range(len(sizes))]
    w, p, ll = fit_mixture_em_loop(per_bucket, *init, iters=60)
    assert torch.allclose(batched.mixture.weights, w, atol=1e-6, rtol=0)
    assert torch.allclose(batched.mixture.components, p, atol=1e-6, rtol=0)
    assert torch.allclose(batched.loglik, ll, atol=1e-6, rtol=0)


def test_em_input_checks():
    with pytest.raises(TypeError, match="floating"):
        fit_mixture_em(torch.ones(3, 2, dtype=torch.int64))
    with pytest.raises(ValueError, match="all-False"):
        fit_mixture_em(torch.ones(2, 3, 2), torch.tensor([[True, True, False], [False, False, False]]))
