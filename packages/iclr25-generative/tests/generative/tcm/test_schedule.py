import math

import pytest
import torch

from iclr25.generative.tcm import ECTSchedule, sample_truncated_log_student_t, sample_truncated_lognormal


def test_ratio_sequence_and_cap():
    s = ECTSchedule(q=2, double_every=10, ratio_limit=0.999)
    ratios = [s.ratio(10 * k) for k in range(12)]
    want = [min(1 - 2.0 ** -(k + 1), 0.999) for k in range(12)]
    assert ratios[:4] == [0.5, 0.75, 0.875, 0.9375]
    assert ratios == pytest.approx(want, abs=0)
    assert ratios[-1] == 0.999 and s.ratio(9) == 0.5 and s.ratio(10) == 0.75


def test_delta_bounds_and_monotone_in_stage():
    s = ECTSchedule(q=2, double_every=1)
    t = torch.logspace(math.log10(0.002), math.log10(80), 200, dtype=torch.float64)
    prev = None
    for step in range(12):
        d, r = s.delta(t, step), s.r(t, step)
        assert bool((d <= t).all()) and bool((d > 0).all()) and bool((r >= 1e-6).all())
        torch.testing.assert_close(t - d, r)
        raw = t * (1 - s.ratio(step)) * (1 + 8 * torch.sigmoid(-t))
        free = t - raw >= 1e-6  # where r is not clipped, Delta_t is the closed form
        torch.testing.assert_close(d[free], raw[free])
        if prev is not None:
            assert bool((d <= prev).all())
            if s.ratio(step) > s.ratio(step - 1):  # strictly smaller until the ratio cap is reached
                assert bool((d < prev)[t > 1].all())
        prev = d


def test_truncated_samplers_match_cdf():
    from scipy import special, stats

    g = torch.Generator().manual_seed(0)
    t = sample_truncated_log_student_t(20_000, 0.01, 0.0, 0.2, 1.0, 80.0, g)
    assert float(t.min()) >= 1.0 and float(t.max()) <= 80.0
    lo, hi = special.stdtr(0.01, 0.0), special.stdtr(0.01, math.log(80) / 0.2)
    cdf = lambda u: (special.stdtr(0.01, u / 0.2) - lo) / (hi - lo)  # noqa: E731
    ks = stats.kstest(t.log().numpy(), cdf)
    assert ks.pvalue > 1e-3
    t2 = sample_truncated_lognormal(20_000, -1.1, 2.0, 0.002, 80.0, g)
    a, b = (math.log(0.002) + 1.1) / 2, (math.log(80) + 1.1) / 2
    assert stats.kstest(t2.log().numpy(), stats.truncnorm(a, b, loc=-1.1, scale=2.0).cdf).pvalue > 1e-3


def test_bad_schedule_args():
    with pytest.raises(ValueError, match="q"):
        ECTSchedule(q=1.0)
    with pytest.raises(ValueError, match="ratio_limit"):
        ECTSchedule(ratio_limit=1.0)
    with pytest.raises(ValueError, match="step"):
        ECTSchedule().ratio(-1)
    with pytest.raises(ValueError, match="double_every"):
        ECTSchedule(double_every=0)
    with pytest.raises(TypeError, match="t"):
        ECTSchedule().delta(1.0, 0)


def test_ratio_stays_capped_far_beyond_the_float_range_of_q_powers():
    # 2.0 ** 1025 overflows: with double_every=1 the ratio used to raise OverflowError from step 1024 on,
    # killing a long run (or a small-stage digits run) mid-training
    s = ECTSchedule(q=2, double_every=1)
    assert s.ratio(1100) == s.ratio(10**9) == 0.999
    t = torch.tensor([0.5, 1.0, 80.0], dtype=torch.float64)
    torch.testing.assert_close(s.delta(t, 5000), s.delta(t, 20))


@pytest.mark.parametrize(("t_min", "t_max"), [(5.0, 80.0), (20.0, 80.0)])
def test_truncated_samplers_exact_in_the_upper_tail(t_min, t_max):
    """Truncation far above the location: the CDF rounds to 1 at both ends in float64.

    The old inverse CDF then put draws on t_max (lognormal) or on a handful of values; the law is
    checked against scipy's tail-accurate survival functions.
    """
    from scipy import stats

    g = torch.Generator().manual_seed(0)
    a, b = math.log(t_min) / 0.2, math.log(t_max) / 0.2
    t = sample_truncated_lognormal(4000, 0.0, 0.2, t_min, t_max, g)
    assert float(t.max()) < 2 * t_min  # the mass sits just above t_min, none at t_max
    assert stats.kstest(t.log().numpy() / 0.2, stats.truncnorm(a, b).cdf).pvalue > 1e-3
    df = 1000.0
    t = sample_truncated_log_student_t(4000, df, 0.0, 0.2, t_min, t_max, g)
    sf = lambda x: stats.t.sf(x, df)  # noqa: E731
    cdf = lambda x: (sf(a) - sf(x)) / (sf(a) - sf(b))  # noqa: E731
    assert float(t.max()) < 2 * t_min
    assert stats.kstest(t.log().numpy() / 0.2, cdf).pvalue > 1e-3


@pytest.mark.parametrize("k", [-1.0, float("nan"), float("inf")])
def test_schedule_rejects_bad_k(k):
    # k = inf used to pass: r was clipped to 1e-6 at every t (Delta_t = t), with no error
    with pytest.raises(ValueError, match=r"k must be .*>= 0"):
        ECTSchedule(k=k)
