import numpy as np
import pytest

from iclr25.rl.efg_pg import QFR, CFRPlus, TabularPolicy, exploitability, games, policy_value, q_values, regularized_gap

KUHN = games.kuhn_poker()


def _soft_br_distance(game, probs, tau):
    cf, r, _ = q_values(game, probs, tau)
    q = cf / r[:, None] / tau
    q = np.where(game.mask, q, -np.inf)
    sm = np.exp(q - q.max(1, keepdims=True)) * game.mask
    sm /= sm.sum(1, keepdims=True)
    return np.abs(probs - sm).sum(1).max()


@pytest.mark.parametrize("tau, expected", [(0.1, 0.0214), pytest.param(0.05, 0.0079, marks=pytest.mark.slow)])
def test_qfr_reaches_regularized_equilibrium_acceptance_3(tau, expected):
    policies = {}
    for feedback, eta in (("q", 1.0), ("traj_q", 5.0), ("cf", 5.0)):
        solver = QFR(KUHN, eta=eta, tau=tau, gamma=0.0, feedback=feedback)
        for _ in range(3000):
            solver.step()
        pol = solver.policy.probs
        assert _soft_br_distance(KUHN, pol, tau) < 1e-6
        assert regularized_gap(KUHN, pol, tau) < 1e-8
        assert abs(exploitability(KUHN, pol) - expected) < 1e-3
        policies[feedback] = pol
    assert max(np.abs(policies["q"] - p).max() for p in policies.values()) < 1e-6


def test_unshifted_or_one_sided_regularizer_would_fail_fixed_point():
    """The fixed-point test can fail: a policy at the tau=0.1 equilibrium is not one at tau=0.05."""
    solver = QFR(KUHN, eta=1.0, tau=0.1, gamma=0.0)
    for _ in range(1500):
        solver.step()
    assert _soft_br_distance(KUHN, solver.policy.probs, 0.05) > 1e-3
    assert regularized_gap(KUHN, solver.policy.probs, 0.05) > 1e-6


def test_cfr_plus_kuhn_acceptance_4():
    avg = CFRPlus(KUHN).run(2000)
    assert exploitability(KUHN, avg) < 1e-3
    assert abs(policy_value(KUHN, avg) + 1 / 18) < 1e-3


def test_torch_engine_matches_numpy_engine():
    pytest.importorskip("torch")
    a = QFR(KUHN, eta=1.0, tau=1e-2, gamma=1e-3)
    b = QFR(KUHN, eta=1.0, tau=1e-2, gamma=1e-3, array_backend="torch")
    for _ in range(20):
        a.step()
        b.step()
    np.testing.assert_allclose(a.policy.numpy(), b.policy.numpy(), atol=1e-12)


def test_sampled_mode_updates_only_visited_and_counts_trajectories():
    s = QFR(KUHN, eta=0.5, feedback="sampled", batch_trajectories=8, seed=1)
    before = s.policy.numpy().copy()
    s.step()
    assert s.trajectories == 8
    after = s.policy.numpy()
    assert not np.allclose(before, after)
    np.testing.assert_allclose(after.sum(1), 1.0, atol=1e-12)


@pytest.mark.slow
def test_sampled_mode_kuhn_acceptance_7():
    s = QFR(KUHN, eta=0.5, tau=1e-3, gamma=1e-3, feedback="sampled", batch_trajectories=64, seed=0)
    log = s.run(1563, eval_every=50)
    assert s.trajectories >= 100_000
    assert min(r["exploitability"] for r in log) <= 0.15


def test_gamma_floor_and_euclidean_rows_valid():
    for reg in ("entropy", "euclidean"):
        s = QFR(KUHN, eta=1.0, tau=1e-2, gamma=0.05, regularizer=reg)
        for _ in range(50):
            s.step()
        p = s.policy.numpy()
        assert p[KUHN.mask].min() >= 0.05 - 1e-12
        np.testing.assert_allclose(p.sum(1), 1.0, atol=1e-12)


def test_run_log_and_best_iterate():
    s = QFR(KUHN, eta=1.0, tau=1e-3, gamma=1e-3)
    log = s.run(200, eval_every=100)
    assert [r["iter"] for r in log] == [0, 100, 200]
    assert log[0]["exploitability"] == pytest.approx(11 / 24)
    assert log[-1]["exploitability"] < 0.01


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"tau": -1e-3}, "tau"),
        ({"eta": 0.0}, "eta"),
        ({"gamma": 0.5}, "gamma"),
        ({"gamma": -0.1}, "gamma"),
        ({"regularizer": "l2"}, "regularizer"),
        ({"feedback": "outcome"}, "feedback"),
        ({"batch_trajectories": 0}, "batch_trajectories"),
    ],
)
def test_bad_construction_raises(kwargs, match):
    with pytest.raises(ValueError, match=match):
        QFR(KUHN, **kwargs)


def test_tabular_policy_validation():
    with pytest.raises(TypeError, match="game"):
        TabularPolicy("kuhn", np.ones((12, 2)) / 2)
    with pytest.raises(TypeError, match="probs"):
        TabularPolicy(KUHN, [[0.5, 0.5]] * 12)
