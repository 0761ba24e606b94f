import numpy as np
import pytest
import torch

from iclr25.rl.aihf import (
    AIHF,
    LinearReward,
    MLPReward,
    PreferenceDataset,
    RewardModel,
    TrajectoryDataset,
    fit_bradley_terry,
    synthetic_preferences,
    tabular,
)

GAMMA, H = 0.9, 30


@pytest.fixture(scope="module")
def world():
    gw = tabular.GridWorld(seed=0)
    theta_star = np.random.default_rng(0).normal(size=6)
    r_star = np.repeat((gw.phi @ theta_star)[:, None], 5, 1)
    expert = tabular.plan(gw, r_star, GAMMA, 1.0)
    disc = GAMMA ** np.arange(H)
    pool = gw.rollouts(np.full((25, 5), 0.2), 600, H, 1) + gw.rollouts(tabular.plan(gw, r_star, GAMMA, 5.0), 600, H, 2)

    def true_ret(seg):
        return float(disc[: len(seg[0])] @ (gw.phi[seg[0]] @ theta_star))

    return gw, theta_star, expert, pool, true_ret


def _data(world, n_d, n_p, seed=0):
    gw, _, expert, pool, true_ret = world
    D = TrajectoryDataset.from_rollouts(gw.rollouts(expert, n_d, H, seed + 10))
    P = synthetic_preferences(pool, true_ret, 1.0, n_p, seed + 20)
    return D, P


def test_rlhf_preset_is_the_bt_mle(world):
    gw = world[0]
    D, P = _data(world, 20, 300)
    est = AIHF.rlhf(LinearReward(gw.features, 6), tabular.SoftVI(env=gw), reward_lr=0.4).fit(D, P, iters=800)
    mle = fit_bradley_terry(LinearReward(gw.features, 6), P, GAMMA, l2=1e-3)
    np.testing.assert_allclose(est.reward_.theta.detach().numpy(), mle.theta.detach().numpy(), atol=1e-4)


def test_ml_irl_preset_matches_features(world):
    gw = world[0]
    D, P = _data(world, 50, 10)
    opt = tabular.SoftVI(env=gw)
    est = AIHF.ml_irl(LinearReward(gw.features, 6), opt, l2=0.0, policy_steps_per_iter=5).fit(D, P, iters=1500)
    opt.improve(est.reward_, 300)  # the exact soft-optimal policy for the final reward
    phi_d = LinearReward(gw.features, 6).discounted_features(D.episodes(), GAMMA).mean(0).numpy()
    feats = gw.features(*gw.all_pairs())
    assert np.abs(phi_d - opt.policy_features(feats)).max() < 1e-4


def test_recovery_from_demos_and_preferences(world):
    gw, theta_star = world[0], world[1]
    D, P = _data(world, 500, 2000)
    est = AIHF(LinearReward(gw.features, 6), tabular.SoftVI(env=gw)).fit(D, P, iters=300)
    err = np.linalg.norm(est.reward_.theta.detach().numpy() - theta_star) / np.linalg.norm(theta_star)
    assert err < 0.15


@pytest.mark.slow
def test_stochastic_single_loop_reduces_gradient(world):
    gw = world[0]
    D, P = _data(world, 50, 50)
    rew = LinearReward(gw.features, 6)
    phi_d = rew.discounted_features(D.episodes(), GAMMA).mean(0).numpy()
    dphi = (rew.discounted_features(P.seg_a, GAMMA) - rew.discounted_features(P.seg_b, GAMMA)).numpy()
    feats = gw.features(*gw.all_pairs())
    exact = tabular.SoftVI(env=gw).reset(H)
    grads = []

    def true_grad_norm2(k, est):
        # ∇L(θ_k) with the exact soft-optimal policy for θ_k (what the O(K^-1/2) guarantee is about)
        theta = est.reward.theta.detach().numpy()
        exact._V = None
        exact.improve(est.reward, 200)
        p = 1 / (1 + np.exp(-dphi @ theta))
        g = 0.5 * (phi_d - exact.policy_features(feats)) + 0.5 * dphi.T @ (P.label - p) / len(p) - 1e-3 * theta
        grads.append(float(g @ g))

    opt = tabular.SoftVI(env=gw, exact=False)
    AIHF(rew, opt, reward_lr=0.05, n_policy_rollouts=4).fit(D, P, iters=150, callback=true_grad_norm2)
    g = np.array(grads)
    assert g[-50:].mean() < g[:50].mean()


class _Wrapped(RewardModel):
    """A linear reward the estimator cannot recognise, so it takes the autograd path."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, obs, acts):
        return self.inner(obs, acts)


def test_closed_form_path_equals_autograd_path(world):
    gw = world[0]
    D, P = _data(world, 10, 10)
    a = AIHF(LinearReward(gw.features, 6), tabular.SoftVI(env=gw)).fit(D, P, iters=20)
    b = AIHF(_Wrapped(LinearReward(gw.features, 6)), tabular.SoftVI(env=gw)).fit(D, P, iters=20)
    np.testing.assert_allclose(a.reward_.theta.detach().numpy(), b.reward_.inner.theta.detach().numpy(), atol=1e-10)
    np.testing.assert_allclose([h["grad_norm2"] for h in a.history_], [h["grad_norm2"] for h in b.history_])


def test_count_weights(world):
    gw = world[0]
    D, P = _data(world, 2, 200)
    est = AIHF(LinearReward(gw.features, 6), tabular.SoftVI(env=gw)).fit(D, P, iters=1)
    assert est.weights_ == pytest.approx((2 / 202, 200 / 202))


def test_synthetic_preference_frequencies():
    segs = [(np.array([k]), np.array([0])) for k in range(4)]
    P = synthetic_preferences(segs, lambda s: float(s[0][0]), temperature=1.5, n_pairs=40000, seed=0)
    a = np.array([s[0][0] for s in P.seg_a])
    b = np.array([s[0][0] for s in P.seg_b])
    assert (a != b).all()
    for i in range(4):
        for j in range(4):
            m = (a == i) & (b == j)
            if i == j:
                continue
            p = 1 / (1 + np.exp(-(i - j) / 1.5))
            se = np.sqrt(p * (1 - p) / m.sum())
            assert abs(P.label[m].mean() - p) < 3 * se + 1e-12


def test_mlp_reward_runs_in_the_autograd_path(world):
    gw = world[0]
    D, P = _data(world, 5, 5)
    enc = np.eye(25)

    class OneHotMLP(MLPReward):
        def forward(self, obs, acts):
            return super().forward(enc[np.asarray(obs, int)], np.zeros((len(obs), 0)))

    torch.manual_seed(0)
    est = AIHF(OneHotMLP(25, 0, hidden=(8,)), tabular.SoftVI(env=gw), reward_lr=0.1).fit(D, P, iters=5)
    assert len(est.history_) == 5 and np.isfinite(est.history_[-1]["objective"])


# --- bad input -------------------------------------------------------------------------------


def test_both_empty_raises(world):
    gw = world[0]
    with pytest.raises(ValueError, match="both D and P are empty"):
        AIHF(LinearReward(gw.features, 6), tabular.SoftVI(env=gw)).fit(
            TrajectoryDataset.from_rollouts([]), PreferenceDataset.empty()
        )


def test_labels_outside_unit_interval():
    seg = (np.array([0, 1]), np.array([0, 0]))
    with pytest.raises(ValueError, match=r"label must lie in \[0, 1\], got 1.5 at index 1"):
        PreferenceDataset([seg, seg], [seg, seg], np.array([0.3, 1.5]))


def test_nan_in_observations_names_dataset_and_index():
    obs = np.zeros((4, 2))
    obs[2, 1] = np.nan
    with pytest.raises(ValueError, match="TrajectoryDataset: obs has NaN or inf at index 2"):
        TrajectoryDataset(obs, np.zeros(4), np.array([1, 0, 1, 0], bool))


def test_nan_in_features(world):
    gw = world[0]
    D, P = _data(world, 3, 3)

    def bad(obs, acts):
        f = gw.features(obs, acts).copy()
        f[obs == 7] = np.nan
        return f

    with pytest.raises(ValueError, match="features of segment"):
        AIHF(LinearReward(bad, 6), tabular.SoftVI(env=gw)).fit(D, P, iters=2)


def test_actions_outside_action_space(world):
    gw = world[0]
    D = TrajectoryDataset.from_rollouts([(np.array([0, 1]), np.array([0, 7]))])
    with pytest.raises(ValueError, match="actions must be integers in"):
        AIHF(LinearReward(gw.features, 6), tabular.SoftVI(env=gw)).fit(D, None, iters=2)


def test_mismatched_horizon_and_discount(world):
    gw = world[0]
    D = TrajectoryDataset.from_rollouts([(np.array([0, 1]), np.array([0, 0])), (np.array([0]), np.array([1]))])
    with pytest.raises(ValueError, match="one horizon"):
        AIHF(LinearReward(gw.features, 6), tabular.SoftVI(env=gw)).fit(D, None, iters=2)
    D = TrajectoryDataset.from_rollouts([(np.array([0, 1]), np.array([0, 0]))], gamma=0.99)
    with pytest.raises(ValueError, match=r"gamma=0\.99"):
        AIHF(LinearReward(gw.features, 6), tabular.SoftVI(gamma=0.9, env=gw)).fit(D, None, iters=2)


def test_non_finite_reward_names_iteration_and_keeps_parameters(world):
    gw = world[0]
    D, P = _data(world, 5, 5)
    calls = {"n": 0}

    class Exploding(MLPReward):
        def forward(self, obs, acts):
            calls["n"] += 1
            out = super().forward(np.asarray(obs, float)[:, None], np.asarray(acts, float)[:, None])
            return out * (float("inf") if calls["n"] > 12 else 1.0)

    torch.manual_seed(0)
    rew = Exploding(1, 1, hidden=(4,))
    with pytest.raises(RuntimeError, match=r"iteration \d+"):
        AIHF(rew, tabular.SoftVI(env=gw), reward_lr=0.01).fit(D, P, iters=50)
    assert all(torch.isfinite(p).all() for p in rew.parameters())


def test_beta_must_match_tabular_temperature(world):
    gw = world[0]
    D, P = _data(world, 3, 3)
    with pytest.raises(ValueError, match=r"beta=2\.0"):
        AIHF(LinearReward(gw.features, 6), tabular.SoftVI(temperature=1.0, env=gw), beta=2.0).fit(D, P)
