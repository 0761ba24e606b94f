"""Proj_k, the snapshot likelihood and HOCE_k against brute force, closed forms and Monte Carlo."""

import math

import pytest
import torch

from iclr25.theory.ho_calibration import (
    Mixture,
    SnapshotDataset,
    count_vectors,
    counts_from_labels,
    hoce_k,
    project_k,
    snapshot_nll,
)


def _mix(batch, m, c, seed, dtype=torch.float64):
    gen = torch.Generator().manual_seed(seed)
    w = torch._sample_dirichlet(torch.ones(*batch, m, dtype=dtype), generator=gen)
    p = torch._sample_dirichlet(torch.ones(*batch, m, c, dtype=dtype), generator=gen)
    return Mixture(w, p)


@pytest.mark.parametrize(("k", "c"), [(1, 3), (2, 3), (4, 3), (3, 5), (7, 2)])
def test_count_vectors_enumerate_every_composition(k, c):
    v = count_vectors(k, c)
    assert v.shape == (math.comb(k + c - 1, c - 1), c)
    assert (v.sum(1) == k).all() and (v >= 0).all()
    assert len({tuple(r) for r in v.tolist()}) == v.shape[0]


@pytest.mark.parametrize(("k", "c"), [(1, 3), (2, 4), (5, 3), (10, 3)])
def test_project_k_sums_to_one(k, c):
    _, probs = project_k(_mix((7,), 4, c, seed=k), k)
    assert torch.allclose(probs.sum(-1), torch.ones(7, dtype=torch.float64), atol=1e-12, rtol=0)


def test_project_1_is_the_mean():
    mix = _mix((5,), 3, 4, seed=0)
    v, probs = project_k(mix, 1)
    # count vector e_y has probability mean_y
    for s, vec in enumerate(v.tolist()):
        y = vec.index(1)
        assert torch.allclose(probs[:, s], mix.mean()[:, y], atol=1e-14, rtol=0)


def test_project_2_collision_probability_is_exact():
    mix = _mix((9,), 5, 4, seed=1)
    v, probs = project_k(mix, 2)
    collision = probs[:, (v == 2).any(1)].sum(1)
    closed = (mix.weights * (mix.components**2).sum(-1)).sum(-1)
    assert torch.allclose(collision, closed, atol=1e-14, rtol=0)


def test_project_k_matches_monte_carlo_within_3_sigma():
    k, n = 3, 200_000
    mix = _mix((), 3, 3, seed=2)
    gen = torch.Generator().manual_seed(5)
    comp = torch.multinomial(mix.weights, n, replacement=True, generator=gen)
    labels = torch.multinomial(mix.components[comp], k, replacement=True, generator=gen)
    counts = counts_from_labels(labels, 3)
    v, probs = project_k(mix, k)
    emp = torch.stack([(counts == row).all(1).double().mean() for row in v])
    sigma = (probs * (1 - probs) / n).sqrt()
    assert ((emp - probs).abs() <= 3 * sigma).all(), ((emp - probs) / sigma).tolist()


def test_project_k_refuses_huge_supports_and_points_to_collisions():
    mix = _mix((2,), 2, 10, seed=3)
    with pytest.raises(ValueError, match="collision"):
        project_k(mix, 50)
    with pytest.raises(ValueError, match="k must be a positive int"):
        project_k(mix, 0)


def _brute_sequence_loglik(w, p, seq):
    return math.log(sum(w[j] * math.prod(p[j][y] for y in seq) for j in range(len(w))))


def test_snapshot_nll_is_the_sequence_likelihood():
    k, c, n = 4, 3, 12
    mix = _mix((n,), 3, c, seed=4)
    gen = torch.Generator().manual_seed(6)
    labels = torch.randint(c, (n, k), generator=gen)
    counts = counts_from_labels(labels, c)
    nll = snapshot_nll(mix, counts, reduction="none")
    v, probs = project_k(mix, k)
    for i in range(n):
        brute = _brute_sequence_loglik(mix.weights[i].tolist(), mix.components[i].tolist(), labels[i].tolist())
        assert -nll[i].item() == pytest.approx(brute, abs=1e-12)
        # the count vector's probability is the sequence probability times the multinomial coefficient
        s = (v == counts[i]).all(1).nonzero().item()
        log_coef = math.lgamma(k + 1) - sum(math.lgamma(x + 1) for x in counts[i].tolist())
        assert -nll[i].item() == pytest.approx(math.log(probs[i, s].item()) - log_coef, abs=1e-12)
    assert snapshot_nll(mix, counts).item() == pytest.approx(nll.mean().item(), abs=1e-14)
    assert snapshot_nll(mix, counts, "sum").item() == pytest.approx(nll.sum().item(), abs=1e-12)


def test_snapshot_nll_gradcheck():
    gen = torch.Generator().manual_seed(7)
    wl = torch.randn(5, 3, dtype=torch.float64, generator=gen, requires_grad=True)
    cl = torch.randn(5, 3, 4, dtype=torch.float64, generator=gen, requires_grad=True)
    counts = counts_from_labels(torch.randint(4, (5, 6), generator=gen), 4).double()
    assert torch.autograd.gradcheck(lambda a, b: snapshot_nll(Mixture.from_logits(a, b), counts), (wl, cl))
    # the probability-space path (xlogy on the components)
    assert torch.autograd.gradcheck(
        lambda a, b: snapshot_nll(Mixture(a.softmax(-1), b.softmax(-1), validate=False), counts), (wl, cl)
    )


def test_snapshot_nll_from_logits_survives_many_labels_in_float32():
    wl = torch.zeros(1, 2)
    cl = torch.tensor([[[0.0, -60.0], [-60.0, 0.0]]])  # p = e^-60 underflows after 50 products
    counts = torch.tensor([[25.0, 25.0]])
    nll = snapshot_nll(Mixture.from_logits(wl, cl), counts)
    assert torch.isfinite(nll)
    # each component gives e^{-1500}; with weights 1/2 the mixture likelihood is e^{-1500} too
    assert nll.item() == pytest.approx(25 * 60, rel=1e-6)


def test_bad_counts_and_labels_raise():
    mix = _mix((2,), 2, 3, seed=8)
    with pytest.raises(ValueError, match="same total k"):
        snapshot_nll(mix, torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]]))
    with pytest.raises(ValueError, match="integer counts"):
        snapshot_nll(mix, torch.tensor([[0.5, 0.5, 0.0], [1.0, 0.0, 0.0]]))
    with pytest.raises(ValueError, match="C = 3 columns"):
        snapshot_nll(mix, torch.tensor([[1.0, 0.0], [1.0, 0.0]]))
    with pytest.raises(ValueError, match="reduction"):
        snapshot_nll(mix, torch.tensor([[1.0, 0, 0], [0, 1.0, 0]]), reduction="max")
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 3\)"):
        counts_from_labels(torch.tensor([[0, 3]]), 3)
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 3\)"):
        SnapshotDataset(torch.zeros(1, 2), torch.tensor([[-1, 2]]), n_classes=3)
    with pytest.raises(ValueError, match="non-negative"):
        SnapshotDataset(torch.zeros(1, 2), torch.tensor([[-1, 2]]))


def test_snapshot_dataset_counts():
    ds = SnapshotDataset(torch.zeros(3, 2), torch.tensor([[0, 0, 2], [1, 2, 2], [0, 1, 2]]), n_classes=4)
    assert ds.k == 3 and len(ds) == 3
    assert ds.counts.tolist() == [[2, 0, 1, 0], [0, 1, 2, 0], [1, 1, 1, 0]]
    _, c = ds[1]
    assert c.tolist() == [0, 1, 2, 0]


def test_hoce_k_is_brute_force_total_variation():
    mix = _mix((3,), 2, 3, seed=9)
    gen = torch.Generator().manual_seed(10)
    ids = torch.randint(3, (40,), generator=gen)
    counts = counts_from_labels(torch.randint(3, (40, 2), generator=gen), 3)
    v, probs = project_k(mix, 2)
    total = 0.0
    for b in range(3):
        rows = [tuple(r) for r in counts[ids == b].tolist()]
        emp = [rows.count(tuple(vec)) / len(rows) for vec in v.tolist()]
        tv = 0.5 * sum(abs(probs[b, s].item() - emp[s]) for s in range(v.shape[0]))
        total += len(rows) / 40 * tv
    assert hoce_k(mix, ids, counts) == pytest.approx(total, abs=1e-12)
    with pytest.raises(ValueError, match="bucket_ids must lie"):
        hoce_k(mix, ids + 3, counts)
