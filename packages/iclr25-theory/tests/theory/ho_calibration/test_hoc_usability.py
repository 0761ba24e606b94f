"""Usability fixes: exact logs survive .to(), -inf logits, batch-only indexing, EM init, argument checks."""

import numpy as np
import pytest
import torch

from iclr25.theory.ho_calibration import (
    HigherOrderCalibrator,
    Mixture,
    MixtureHead,
    count_vectors,
    counts_from_labels,
    fit_mixture_em,
    level_set_error,
    project_k,
    sample_snapshots,
    snapshot_nll,
)


def test_mixture_to_keeps_the_exact_log_probabilities_of_from_logits():
    # p = e^-200 underflows to 0 in float32; only the kept log-probabilities give a finite likelihood
    mix = Mixture.from_logits(torch.zeros(1, 2), torch.tensor([[[0.0, -200.0], [-200.0, 0.0]]]))
    counts = torch.tensor([[25.0, 25.0]])
    assert snapshot_nll(mix, counts).item() == pytest.approx(5000.0, rel=1e-6)
    for moved in (mix.to("cpu"), mix.to(torch.float64)):
        assert snapshot_nll(moved, counts).item() == pytest.approx(5000.0, rel=1e-6)
    assert mix.to(torch.float64).log_components.dtype == torch.float64


def test_snapshot_nll_from_logits_handles_classes_masked_with_minus_inf():
    wl = torch.zeros(2, 2, requires_grad=True)
    cl = torch.tensor([[[0.0, float("-inf")], [0.0, 0.0]]] * 2, requires_grad=True)
    counts = torch.tensor([[2.0, 0.0], [1.0, 1.0]])
    mix = Mixture.from_logits(wl, cl)
    nll = snapshot_nll(mix, counts, reduction="none")
    prob_path = snapshot_nll(Mixture(mix.weights.detach(), mix.components.detach()), counts, reduction="none")
    assert torch.isfinite(nll).all()
    assert torch.allclose(nll.detach(), prob_path, atol=1e-6, rtol=0)
    nll.sum().backward()
    assert torch.isfinite(wl.grad).all()


def test_mixture_indexing_selects_batch_positions_only():
    gen = torch.Generator().manual_seed(0)
    mix = Mixture.from_logits(torch.randn(4, 2, generator=gen), torch.randn(4, 2, 3, generator=gen))
    # mix[:, 0] used to pick component 0 of every row and call the 4 rows "components"
    with pytest.raises(IndexError, match="batch dims only"):
        mix[:, 0]
    grid = Mixture.from_logits(torch.randn(4, 5, 2, generator=gen), torch.randn(4, 5, 2, 3, generator=gen))
    col = grid[..., 0]  # the first position of the last batch dim, not the first component
    assert col.batch_shape == (4,) and col.n_components == 2
    assert torch.equal(col.weights, grid.weights[:, 0]) and torch.equal(col.log_weights, grid.log_weights[:, 0])
    assert torch.equal(mix[[0, 2]].components, mix.components[[0, 2]])


def test_em_checks_init_and_takes_an_unbatched_init_for_one_bucket():
    gen = torch.Generator().manual_seed(1)
    counts = counts_from_labels(torch.randint(3, (50, 4), generator=gen), 3).double()
    w0 = torch.full((2, 3), 1 / 3, dtype=torch.float64)
    p0 = torch.softmax(torch.randn(2, 3, 3, generator=gen, dtype=torch.float64), -1)
    batched = fit_mixture_em(counts, iters=5, init=(w0[None], p0[None]))
    unbatched = fit_mixture_em(counts, iters=5, init=(w0, p0))
    assert torch.equal(batched.mixture.weights, unbatched.mixture.weights)
    # an init for two buckets used to broadcast silently against one bucket of counts
    with pytest.raises(ValueError, match="B = 1 and C = 3"):
        fit_mixture_em(counts, iters=5, init=(w0.expand(2, 2, 3), p0.expand(2, 2, 3, 3)))
    with pytest.raises(ValueError, match="B = 1 and C = 3"):
        fit_mixture_em(counts, iters=5, init=(w0[None], torch.full((1, 2, 3, 4), 0.25, dtype=torch.float64)))


def test_level_set_error_checks_its_inputs():
    pred, truth, ids = torch.rand(6), torch.rand(6), torch.tensor([0, 0, 1, 1, 2, 2])
    with pytest.raises(TypeError, match=r"pred must be a torch\.Tensor"):
        level_set_error(pred.numpy(), truth, ids)
    with pytest.raises(ValueError, match="bucket_ids must be non-negative"):
        level_set_error(pred, truth, ids - 1)
    with pytest.raises(ValueError, match="bucket_ids must be an integer tensor"):
        level_set_error(pred, truth, ids + 0.7)
    with pytest.raises(ValueError, match="at least one point"):
        level_set_error(pred[:0], truth[:0], ids[:0])


def test_numpy_integers_are_accepted_and_bools_rejected():
    labels = torch.tensor([[0, 2], [1, 1], [2, 2]])
    n_classes = labels.numpy().max() + 1  # a numpy int64
    assert counts_from_labels(labels, n_classes).tolist() == [[1, 0, 1], [0, 2, 0], [0, 0, 2]]
    assert counts_from_labels(labels.to(torch.int8), 3).tolist() == [[1, 0, 1], [0, 2, 0], [0, 0, 2]]
    assert MixtureHead(np.int64(4), n_classes).n_classes == 3
    mix = Mixture.from_ensemble(torch.tensor([[[0.9, 0.1], [0.5, 0.5]]]))
    assert torch.equal(project_k(mix, np.int64(2))[1], project_k(mix, 2)[1])
    gen = torch.Generator().manual_seed(2)
    base = torch.softmax(torch.randn(60, 3, generator=gen, dtype=torch.float64), -1)
    counts = counts_from_labels(torch.randint(3, (60, 2), generator=gen), 3)
    kw = dict(n_components=2, n_bins=1, em_iters=5, restarts=1, min_bucket=5)
    ref = HigherOrderCalibrator(**kw, seed=3).fit(base, counts)
    via_np = HigherOrderCalibrator(**{k: np.int64(v) for k, v in kw.items()}, seed=np.int64(3)).fit(base, counts)
    assert torch.equal(ref.mixtures_.weights, via_np.mixtures_.weights)
    with pytest.raises(TypeError, match="seed must be an int"):
        HigherOrderCalibrator(seed=None)
    with pytest.raises(ValueError, match="k must be a positive int"):
        sample_snapshots(base, True)
    with pytest.raises(ValueError, match="n_components must be a positive int"):
        fit_mixture_em(counts.double(), n_components=True)


def test_bad_inputs_name_the_argument():
    with pytest.raises(TypeError, match=r"base_probs must be a floating torch\.Tensor, got ndarray"):
        HigherOrderCalibrator().fit(np.full((4, 2), 0.5), torch.ones(4, 2))
    with pytest.raises(ValueError, match="n_classes must be a positive int"):
        count_vectors(2, 0)
    with pytest.raises(ValueError, match="p must be non-negative"):
        sample_snapshots(torch.tensor([[-0.5, 1.5]]), 2)
    with pytest.raises(ValueError, match="p must sum to 1"):
        sample_snapshots(torch.tensor([[2.0, 2.0]]), 2)
    with pytest.raises(TypeError, match=r"weight_logits must be a floating torch\.Tensor"):
        Mixture.from_logits(np.zeros((2, 2)), torch.zeros(2, 2, 3))
    with pytest.raises(ValueError, match="n must be a positive int"):
        Mixture.point_mass(torch.tensor([[0.5, 0.5]])).sample(0)
