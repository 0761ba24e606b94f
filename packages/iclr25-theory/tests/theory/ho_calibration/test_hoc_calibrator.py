"""HigherOrderCalibrator: the aleatoric guarantee on level sets, HOCE_k, fallbacks, warnings; MixtureHead."""

import pytest
import torch

from iclr25.theory.ho_calibration import (
    HigherOrderCalibrator,
    Mixture,
    MixtureHead,
    counts_from_labels,
    decompose,
    gini_entropy,
    hoce_k,
    level_set_error,
    sample_snapshots,
    snapshot_nll,
)

# Three regions; inside each the true conditionals p*(x) take two values with known frequencies.
REGION_P = torch.tensor(
    [
        [[0.95, 0.03, 0.02], [0.40, 0.30, 0.30]],
        [[0.10, 0.80, 0.10], [0.05, 0.05, 0.90]],
        [[0.34, 0.33, 0.33], [0.60, 0.20, 0.20]],
    ],
    dtype=torch.float64,
)
REGION_W = torch.tensor([[0.7, 0.3], [0.5, 0.5], [0.2, 0.8]], dtype=torch.float64)


def _region_data(n_per_region, k, gen):
    region = torch.arange(3).repeat_interleave(n_per_region)
    which = torch.multinomial(REGION_W[region], 1, generator=gen)[:, 0]
    p_star = REGION_P[region, which]
    # the base model only knows the region: a fixed, region-identifying prediction
    base = torch.full((region.numel(), 3), 0.2, dtype=torch.float64)
    base[torch.arange(region.numel()), region] = 0.6
    counts = counts_from_labels(sample_snapshots(p_star, k, gen), 3)
    return base, counts, p_star, region


def test_calibrated_aleatoric_matches_level_set_average_and_hoce_detects_sharpening():
    gen = torch.Generator().manual_seed(0)
    n = 10_000
    base, counts, p_star, region = _region_data(n, 2, gen)
    cal = HigherOrderCalibrator(em_iters=100, restarts=2, seed=0).fit(base, counts)
    au = decompose(cal.predict(base), "gini")["aleatoric"]
    truth = gini_entropy(p_star)
    # With k = 2, the fitted Gini AU is one minus the empirical collision rate of the region;
    # its standard error is at most 0.5 / sqrt(n) = 0.005, so 4 sigma = 0.02.
    for r in range(3):
        sel = region == r
        assert abs(au[sel].mean() - truth[sel].mean()).item() <= 0.02
    assert level_set_error(au, truth, region) <= 0.02

    # HOCE_2 on fresh snapshots: a calibrated predictor's error is only sampling noise
    # (6 count vectors, 10k points per level set: E[TV] <~ 0.5 * 6 * sqrt(0.5 / (pi n)) ~ 0.012).
    fresh = counts_from_labels(sample_snapshots(p_star, 2, gen), 3)
    ids = cal.bucket_ids(base)
    calibrated = hoce_k(cal.mixtures_, ids, fresh)
    sharp = cal.mixtures_.components**3
    sharpened = Mixture(cal.mixtures_.weights, sharp / sharp.sum(-1, keepdim=True))
    assert calibrated <= 0.02
    assert hoce_k(sharpened, ids, fresh) > 0.05


def test_first_order_mixture_gets_the_gini_aleatoric_wrong_where_calibration_does_not():
    gen = torch.Generator().manual_seed(1)
    base, counts, p_star, region = _region_data(4000, 2, gen)
    truth = gini_entropy(p_star)
    # the region's mean label distribution as a point mass puts all of the spread into AU
    means = torch.stack([p_star[region == r].mean(0) for r in range(3)])
    naive = decompose(Mixture.point_mass(means[region]), "gini")["aleatoric"]
    cal = HigherOrderCalibrator(em_iters=100, restarts=2).fit(base, counts)
    au = decompose(cal.predict(base), "gini")["aleatoric"]
    assert level_set_error(au, truth, region) < 0.5 * level_set_error(naive, truth, region)


def test_small_buckets_fall_back_to_the_pooled_mixture():
    gen = torch.Generator().manual_seed(2)
    base, counts, _, region = _region_data(300, 3, gen)
    keep = (region != 2) | (torch.arange(region.numel()) % 30 == 0)  # region 2 keeps 10 points
    cal = HigherOrderCalibrator(n_bins=1, em_iters=30, restarts=1, min_bucket=50).fit(base[keep], counts[keep])
    assert cal.fallback_buckets_ == [2]
    assert torch.equal(cal.mixtures_.weights[2], cal.pooled_.weights)
    assert cal.bucket_sizes_.tolist() == [300, 300, 10]


def test_class_never_predicted_gives_empty_fallback_buckets():
    gen = torch.Generator().manual_seed(7)
    base, counts, _, _ = _region_data(100, 2, gen)
    base = base[:200]  # regions 0 and 1 only: class 2 is never the argmax
    cal = HigherOrderCalibrator(n_bins=2, em_iters=10, restarts=1, min_bucket=1).fit(base, counts[:200])
    assert cal.n_buckets_ == 6
    assert set(cal.fallback_buckets_) >= {4, 5}
    assert cal.bucket_sizes_[4:].tolist() == [0, 0]


def test_ensemble_inputs_and_kmeans_bucketer():
    gen = torch.Generator().manual_seed(3)
    base, counts, _, _ = _region_data(200, 2, gen)
    ens = torch.stack([base, base.roll(1, dims=0)], dim=1)  # (n, 2, C)
    cal = HigherOrderCalibrator(bucketer="kmeans", n_bins=1, em_iters=20, restarts=1).fit(ens, counts)
    assert cal.n_buckets_ == 3
    mix = cal.predict(ens)
    assert mix.batch_shape == (600,) and mix.n_components == 6


def test_fit_with_single_labels_warns():
    gen = torch.Generator().manual_seed(4)
    base, counts, _, _ = _region_data(100, 1, gen)
    with pytest.warns(UserWarning, match="first-order"):
        HigherOrderCalibrator(em_iters=5, restarts=1).fit(base, counts)


def test_calibrator_bad_input():
    gen = torch.Generator().manual_seed(5)
    base, counts, _, _ = _region_data(50, 2, gen)
    mixed = counts.clone()
    mixed[0] = torch.tensor([3, 0, 0])
    with pytest.raises(ValueError, match="same total k"):
        HigherOrderCalibrator().fit(base, mixed)
    bad = base.clone()
    bad[0, 0] = float("nan")
    with pytest.raises(ValueError, match="base_probs must be finite"):
        HigherOrderCalibrator().fit(bad, counts)
    with pytest.raises(ValueError, match="base_probs must sum to 1"):
        HigherOrderCalibrator().fit(base * 1.1, counts)
    with pytest.raises(ValueError, match="bucketer"):
        HigherOrderCalibrator(bucketer="tree")
    with pytest.raises(RuntimeError, match="not fitted"):
        HigherOrderCalibrator().predict(base)


def test_mixture_head_learns_from_snapshots():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(6)
    x = torch.randn(256, 4, generator=gen)
    p_star = torch.where((x[:, :1] > 0), torch.tensor([0.9, 0.05, 0.05]), torch.tensor([0.2, 0.4, 0.4]))
    counts = counts_from_labels(sample_snapshots(p_star, 5, gen), 3).float()
    head = MixtureHead(4, 3, n_components=3)
    opt = torch.optim.Adam(head.parameters(), lr=0.05)
    first = snapshot_nll(head(x), counts).item()
    for _ in range(100):
        opt.zero_grad()
        loss = snapshot_nll(head(x), counts)
        loss.backward()
        opt.step()
    assert loss.item() < first - 0.5
    mix = head(x)
    assert mix.batch_shape == (256,) and mix.components.shape == (256, 3, 3)
    with pytest.raises(ValueError, match="in_features = 4"):
        head(torch.zeros(2, 5))
