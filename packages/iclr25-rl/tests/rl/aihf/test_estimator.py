import inspect
import pickle
import re
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from iclr25.rl.aihf import (
    AIHF,
    ARS,
    LinearReward,
    MLPReward,
    PreferenceDataset,
    RewardModel,
    RLHFPipeline,
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


def _disc_features(gw, segments):
    return np.stack([GAMMA ** np.arange(len(o)) @ gw.phi[o] for o, _ in segments])


@pytest.mark.parametrize("path", ["closed_form", "autograd"])
@pytest.mark.parametrize("beta", [1.0, 0.5])
def test_reward_step_is_the_gradient_of_the_objective(world, beta, path):
    # Acceptance 1 at the estimator: with π_θ soft-optimal (temperature β), the demonstration part of ĝ,
    # (w_D/β)(Φ_D − Φ_πθ), is ∇_θ (w_D/β)(θᵀΦ_D − μ0ᵀV_θ) because ∇_θ V_θ = Φ_πθ (soft-VI envelope); autograd
    # through soft VI gives it without any occupancy code. Demonstrations of length H = 300 make the estimator's
    # finite-horizon policy features equal the infinite-horizon ones up to γ^H/(1−γ).
    gw, _, expert, pool, true_ret = world
    h, lr, l2, n_d, n_p = 300, 0.1, 1e-2, 20, 30
    D = TrajectoryDataset.from_rollouts(gw.rollouts(expert, n_d, h, 5))
    P = synthetic_preferences(pool, true_ret, 1.0, n_p, 6)
    w_d, w_p = n_d / (n_d + n_p), n_p / (n_d + n_p)  # count weights
    phi, mu0 = torch.as_tensor(gw.phi), torch.as_tensor(gw.mu0)
    phi_d = torch.as_tensor(_disc_features(gw, D.episodes()).mean(0))
    dphi = torch.as_tensor(_disc_features(gw, P.seg_a) - _disc_features(gw, P.seg_b))
    y = torch.as_tensor(P.label)

    def grad_objective(theta):
        th = torch.tensor(theta, requires_grad=True)
        V = tabular.soft_value_iteration(gw.P, (phi @ th)[:, None].expand(25, 5), GAMMA, beta, 400)[1]
        bt = (y * F.logsigmoid(dphi @ th) + (1 - y) * F.logsigmoid(-dphi @ th)).mean()
        L = (w_d / beta) * (th @ phi_d - mu0 @ V) + w_p * bt - 0.5 * l2 * th @ th
        return torch.autograd.grad(L, th)[0].numpy()

    reward = LinearReward(gw.features, 6)
    thetas = []
    est = AIHF(
        reward if path == "closed_form" else _Wrapped(reward),
        tabular.SoftVI(temperature=beta, env=gw),
        beta=beta,
        reward_lr=lr,
        l2=l2,
        policy_steps_per_iter=400,  # the policy met by θ_1's reward step is soft-optimal to γ^400
    )
    est.fit(D, P, iters=2, callback=lambda k, e: thetas.append(reward.theta.detach().numpy().copy()))
    # truncation (w_D/β)γ^H/(1−γ) plus float64 round-off of H-term discounted sums, H·ε/(1−γ); ×10 margin
    tol = 10 * ((w_d / beta) * GAMMA**h / (1 - GAMMA) + h * np.finfo(float).eps / (1 - GAMMA))
    # θ_0 = 0 meets the uniform start policy, which is soft-optimal for r = 0
    for before, after in ((np.zeros(6), thetas[0]), (thetas[0], thetas[1])):
        np.testing.assert_allclose((after - before) / lr, grad_objective(before), rtol=0, atol=tol)


def test_soft_labels_and_empty_demonstrations_give_the_closed_form_bt_mle(world):
    gw = world[0]

    def feat(obs, acts):
        return np.asarray(obs, float)[:, None]

    # One feature and Φ(a) − Φ(b) = 1 in every pair: the unregularized BT MLE solves σ(θ) = mean label = 0.75.
    a, b = (np.array([1]), np.array([0])), (np.array([0]), np.array([0]))
    P = PreferenceDataset([a] * 4, [b] * 4, np.array([0.8, 0.6, 1.0, 0.6]))
    target = np.log(0.75 / 0.25)
    newton = fit_bradley_terry(LinearReward(feat, 1), P, GAMMA, l2=0.0)
    # gradient-ascent path: −J'' ≤ 1/4, so lr 4 contracts by |1 − 4σ(1−σ)| = 1/4 per step near the optimum
    ascent = fit_bradley_terry(_Wrapped(LinearReward(feat, 1)), P, GAMMA, l2=0.0, max_iter=200, lr=4.0)
    # One empty source selects the special case: no demonstrations is RLHF in one loop, i.e. the same MLE.
    est = AIHF(LinearReward(feat, 1), tabular.SoftVI(env=gw), reward_lr=4.0, l2=0.0).fit(None, P, iters=300)
    assert est.weights_ == (0.0, 1.0)
    for theta in (newton.theta, ascent.inner.theta, est.reward_.theta):
        assert abs(float(theta.detach()) - target) < 1e-12
    # ... and the returned policy is the soft-optimal one for the fitted reward (600 backups: γ^600 ≈ 3e-28)
    table = np.repeat(feat(np.arange(25), None) * float(est.reward_.theta.detach()), 5, 1)
    np.testing.assert_allclose(est.policy_, tabular.plan(gw, table, GAMMA, 1.0), rtol=0, atol=1e-12)


def test_empty_preferences_select_ml_irl(world):
    gw = world[0]
    D, P = _data(world, 20, 10)
    irl = AIHF.ml_irl(LinearReward(gw.features, 6), tabular.SoftVI(env=gw)).fit(D, P, iters=30)
    for empty in (None, PreferenceDataset.empty()):
        est = AIHF(LinearReward(gw.features, 6), tabular.SoftVI(env=gw)).fit(D, empty, iters=30)
        assert est.weights_ == (1.0, 0.0)
        np.testing.assert_array_equal(est.reward_.theta.detach().numpy(), irl.reward_.theta.detach().numpy())


def test_rlhf_pipeline_stages(world):
    gw = world[0]
    D, P = _data(world, 20, 40)
    kl = 0.7
    pipe = RLHFPipeline(LinearReward(gw.features, 6), tabular.SoftVI(env=gw), kl_to_sft=kl).fit(D, P)
    # SFT: add-one smoothed action frequencies of the demonstrations
    counts = np.ones((25, 5))
    np.add.at(counts, (D.obs, D.acts), 1.0)
    np.testing.assert_allclose(pipe.sft_, counts / counts.sum(1, keepdims=True), rtol=1e-14)
    # RM: the L2-1e-3 BT log-likelihood is strictly concave, so its stationary point is the MLE (Newton stops at
    # a max-norm gradient of 1e-12)
    theta = pipe.reward_.theta.detach().numpy()
    dphi = _disc_features(gw, P.seg_a) - _disc_features(gw, P.seg_b)
    grad = dphi.T @ (P.label - 1 / (1 + np.exp(-dphi @ theta))) / len(P) - 1e-3 * theta
    assert np.abs(grad).max() < 1e-10
    # RL: the KL-to-SFT optimum π ∝ π_SFT·exp(Q/kl), Q = r + γPV, V = kl·log Σ_a π_SFT exp(Q/kl)
    r = np.repeat((gw.phi @ theta)[:, None], 5, 1)
    V = np.zeros(25)
    for _ in range(600):
        z = np.log(pipe.sft_) + (r + GAMMA * gw.P @ V) / kl
        m = z.max(1, keepdims=True)
        V = kl * (m[:, 0] + np.log(np.exp(z - m).sum(1)))
    pi = np.exp(z - m) / np.exp(z - m).sum(1, keepdims=True)
    # the pipeline's 300 backups leave γ^300·max|V| in Q, i.e. a relative policy error of about that over kl
    tol = 10 * GAMMA**300 * (np.abs(V).max() + 1) / kl
    np.testing.assert_allclose(pipe.policy_, pi, rtol=0, atol=tol)


def test_rlhf_pipeline_rl_horizon_is_the_longest_episode(world):
    gw, _, expert, _, _ = world
    rng = np.random.default_rng(5)
    uniform = np.full((25, 5), 0.2)
    short, long = gw.rollouts(uniform, 4, 5, 1), gw.rollouts(uniform, 4, 8, 2)
    P = PreferenceDataset(short, long, rng.uniform(size=4))
    # no demonstrations: the longer side of the pairs, as AIHF takes (it used to look at seg_a only: 5)
    pipe = RLHFPipeline(LinearReward(gw.features, 6), tabular.SoftVI(env=gw), rl_steps=0).fit(None, P)
    assert pipe.policy_optimizer.horizon == 8
    # mixed demonstration lengths: the longest one, whatever the set's iteration order
    D = TrajectoryDataset.from_rollouts(gw.rollouts(expert, 3, 7, 3) + gw.rollouts(expert, 3, 3, 4))
    assert D.horizons == {3, 7}
    pipe = RLHFPipeline(LinearReward(gw.features, 6), tabular.SoftVI(env=gw), rl_steps=0).fit(D, P)
    assert pipe.policy_optimizer.horizon == 7
    assert len(pipe.policy_optimizer.rollouts(1)[0][0]) == 7


def test_rlhf_pipeline_bad_input(world):
    gw = world[0]
    D, _ = _data(world, 2, 0)
    with pytest.raises(ValueError, match="kl_to_sft must be >= 0"):
        RLHFPipeline(LinearReward(gw.features, 6), tabular.SoftVI(env=gw), kl_to_sft=-1.0)
    with pytest.raises(ValueError, match="P is empty"):
        RLHFPipeline(LinearReward(gw.features, 6), tabular.SoftVI(env=gw)).fit(D, PreferenceDataset.empty())


def test_public_defaults_match_the_issue():
    def defaults(f):
        return {k: v.default for k, v in inspect.signature(f).parameters.items() if v.default is not v.empty}

    assert (
        defaults(AIHF).items()
        >= {
            "w_demo": "count",
            "w_pref": "count",
            "beta": 1.0,
            "reward_lr": 0.5,
            "policy_steps_per_iter": 2,
            "n_policy_rollouts": 4,
            "l2": 1e-3,
            "seed": 0,
        }.items()
    )
    assert defaults(AIHF.fit)["iters"] == 300
    assert defaults(RLHFPipeline)["kl_to_sft"] == 1.0
    assert defaults(MLPReward)["hidden"] == (64, 64)
    assert defaults(synthetic_preferences) == {"seed": 0}
    assert (
        defaults(ARS).items()
        >= {
            "env_id": "HalfCheetah-v5",
            "horizon": 200,
            "n_dirs": 8,
            "top": 4,
            "step": 0.02,
            "noise": 0.03,
            "seed": 0,
        }.items()
    )
    assert defaults(tabular.GridWorld) == {"n": 5, "slip": 0.1, "n_features": 6, "seed": 0}
    assert defaults(tabular.SoftVI).items() >= {"gamma": 0.9, "temperature": 1.0}.items()


# --- bad input -------------------------------------------------------------------------------


def test_both_empty_raises(world):
    gw = world[0]
    with pytest.raises(ValueError, match="both D and P are empty"):
        AIHF(LinearReward(gw.features, 6), tabular.SoftVI(env=gw)).fit(
            TrajectoryDataset.from_rollouts([]), PreferenceDataset.empty()
        )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"temperature": 0.0}, "temperature must be > 0"),
        ({"n_pairs": -1}, "n_pairs must be >= 0"),
        ({"segments": [(np.array([0]), np.array([0]))]}, "at least 2 segments"),
    ],
)
def test_synthetic_preferences_bad_arguments(kwargs, match):
    args = {"segments": [(np.array([k]), np.array([0])) for k in range(3)], "temperature": 1.0, "n_pairs": 5}
    with pytest.raises(ValueError, match=match):
        synthetic_preferences(true_return_fn=lambda s: 0.0, **{**args, **kwargs})


def test_labels_outside_unit_interval():
    seg = (np.array([0, 1]), np.array([0, 0]))
    with pytest.raises(ValueError, match=r"label must lie in \[0, 1\], got 1.5 at index 1"):
        PreferenceDataset([seg, seg], [seg, seg], np.array([0.3, 1.5]))


def test_nan_in_observations_names_dataset_and_index():
    obs = np.zeros((4, 2))
    obs[2, 1] = np.nan
    with pytest.raises(ValueError, match="TrajectoryDataset: obs has NaN or inf at index 2"):
        TrajectoryDataset(obs, np.zeros(4), np.array([1, 0, 1, 0], bool))


@pytest.mark.parametrize("bad_value", [np.nan, np.inf])
def test_non_finite_features_name_dataset_and_index(world, bad_value):
    gw = world[0]
    D, P = _data(world, 3, 3)

    def poisoned(state):
        def fn(obs, acts):
            f = gw.features(obs, acts).copy()
            f[np.asarray(obs) == state] = bad_value
            return f

        return fn

    state = D.episodes()[2][0][0]
    first = next(k for k, (o, _) in enumerate(D.episodes()) if state in o)
    with pytest.raises(ValueError, match=rf"^TrajectoryDataset: features of segment {first} contain NaN or inf"):
        AIHF(LinearReward(poisoned(state), 6), tabular.SoftVI(env=gw)).fit(D, P, iters=2)
    state = P.seg_a[1][0][0]
    first = next(k for k, (o, _) in enumerate(P.seg_a) if state in o)
    with pytest.raises(ValueError, match=rf"^PreferenceDataset\.seg_a: features of segment {first} contain NaN or inf"):
        AIHF(LinearReward(poisoned(state), 6), tabular.SoftVI(env=gw)).fit(None, P, iters=2)


def test_non_finite_actions_and_segments_name_dataset_and_index():
    acts = np.zeros(4)
    acts[3] = np.inf
    with pytest.raises(ValueError, match="TrajectoryDataset: acts has NaN or inf at index 3"):
        TrajectoryDataset(np.zeros((4, 2)), acts, np.array([1, 0, 1, 0], bool))
    with pytest.raises(ValueError, match="TrajectoryDataset: acts of segment 1 has NaN or inf"):
        TrajectoryDataset.from_rollouts([(np.zeros(2), np.zeros(2)), (np.zeros(2), np.array([0.0, np.nan]))])
    ok, bad = (np.array([0.0, 1.0]), np.array([0, 0])), (np.array([0.0, np.nan]), np.array([0, 0]))
    with pytest.raises(ValueError, match=r"PreferenceDataset\.seg_b: obs of segment 1 has NaN or inf"):
        PreferenceDataset([ok, ok], [ok, bad], np.array([1.0, 0.0]))


def test_actions_outside_action_space(world):
    gw = world[0]
    D = TrajectoryDataset.from_rollouts([(np.array([0, 1]), np.array([0, 7]))])
    with pytest.raises(ValueError, match="actions must be integers in"):
        AIHF(LinearReward(gw.features, 6), tabular.SoftVI(env=gw)).fit(D, None, iters=2)


def test_preference_actions_outside_action_space(world):
    gw = world[0]
    ok, bad = (np.array([0, 1]), np.array([0, 4])), (np.array([0, 1]), np.array([0, 5]))
    P = PreferenceDataset([ok, ok], [ok, bad], np.array([1.0, 0.0]))
    with pytest.raises(ValueError, match="PreferenceDataset pair 1: actions must be integers in"):
        AIHF(LinearReward(gw.features, 6), tabular.SoftVI(env=gw)).fit(None, P, iters=1)


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
    snapshots = [[p.detach().clone() for p in rew.parameters()]]  # θ_0, then θ_{k+1} after each reward step

    def record(k, est):
        snapshots.append([p.detach().clone() for p in rew.parameters()])

    est = AIHF(rew, tabular.SoftVI(env=gw), reward_lr=0.01)
    with pytest.raises(RuntimeError, match=r"iteration \d+") as info:
        est.fit(D, P, iters=50, callback=record)
    m = int(re.search(r"iteration (\d+)", str(info.value)).group(1))
    assert m >= 1 and len(est.history_) == m  # iterations 0..m-1 completed
    # θ_m gave the non-finite reward: the estimator keeps θ_{m-1}, the last parameters with a finite one
    for p, q in zip(rew.parameters(), snapshots[m - 1], strict=True):
        assert torch.equal(p.detach(), q)


@pytest.mark.parametrize("path", ["closed_form", "autograd"])
def test_diverging_reward_step_raises_and_keeps_parameters(world, path):
    gw = world[0]
    D, P = _data(world, 5, 5)

    def model(rew):
        return rew if path == "closed_form" else _Wrapped(rew)

    # θ_1 = α·ĝ_0 ≈ 1e300 is finite, but its objective (‖θ_1‖² in the L2 term) is not: iteration 1 raises, θ_0 = 0 kept.
    rew = LinearReward(gw.features, 6)
    with np.errstate(over="ignore"), pytest.raises(RuntimeError, match="at iteration 1;"):
        AIHF(model(rew), tabular.SoftVI(env=gw), reward_lr=1e300).fit(D, P, iters=3)
    assert not rew.theta.detach().any()
    # Features of order 1e10 make α·ĝ_0 itself overflow: even the last iteration's step must be caught.
    rew = LinearReward(lambda o, a: 1e10 * gw.features(o, a), 6)
    with np.errstate(over="ignore"), pytest.raises(RuntimeError, match="at iteration 0;"):
        AIHF(model(rew), tabular.SoftVI(env=gw), reward_lr=1e300).fit(D, P, iters=1)
    assert not rew.theta.detach().any()


def test_beta_must_match_tabular_temperature(world):
    gw = world[0]
    D, P = _data(world, 3, 3)
    with pytest.raises(ValueError, match=r"beta=2\.0"):
        AIHF(LinearReward(gw.features, 6), tabular.SoftVI(temperature=1.0, env=gw), beta=2.0).fit(D, P)


@pytest.mark.parametrize(
    ("make", "exc", "match"),
    [
        (lambda: TrajectoryDataset(np.array(["a", "b"]), np.zeros(2), [1, 0]), TypeError, "obs must be numeric"),
        (lambda: TrajectoryDataset(np.zeros(3), np.zeros(2), [1, 0, 0]), ValueError, "equal lengths, got 3, 2, 3"),
        (lambda: TrajectoryDataset(np.zeros(2), np.zeros(2), [[1], [0]]), ValueError, "episode_starts must be 1-D"),
        (lambda: TrajectoryDataset(np.zeros(2), np.zeros(2), [0, 1]), ValueError, r"episode_starts\[0\] must be True"),
        (
            lambda: TrajectoryDataset.from_rollouts([np.zeros(3)]),
            TypeError,
            "segment 0 must be an \\(obs, acts\\) pair",
        ),
        (
            lambda: TrajectoryDataset.from_rollouts([(np.zeros(3), np.zeros(2))]),
            ValueError,
            "segment 0 needs equal, non-zero lengths; got obs 3, acts 2",
        ),
        (
            lambda: PreferenceDataset([(np.zeros(0), np.zeros(0))], [(np.zeros(1), np.zeros(1))], [1.0]),
            ValueError,
            r"PreferenceDataset\.seg_a: segment 0 needs equal, non-zero lengths; got obs 0, acts 0",
        ),
        (
            lambda: PreferenceDataset([(np.zeros(1), np.zeros(1))], [], [1.0]),
            ValueError,
            "seg_a, seg_b, label need equal lengths, got 1, 0, 1",
        ),
    ],
)
def test_datasets_name_a_bad_argument(make, exc, match):
    with pytest.raises(exc, match=match):
        make()


@pytest.mark.parametrize(
    ("make", "exc", "match"),
    [
        (lambda: LinearReward("phi", 3), TypeError, "LinearReward: feature_fn must be callable, got str"),
        (lambda: LinearReward(lambda o, a: o, 0), ValueError, "LinearReward: dim must be >= 1, got 0"),
        (
            lambda: LinearReward(lambda o, a: np.zeros((len(o), 3)), 2).features(np.zeros(4), np.zeros(4)),
            ValueError,
            r"LinearReward: feature_fn must return \(T, 2\), got \(4, 3\)",
        ),
        (lambda: MLPReward(0, 1), ValueError, "MLPReward: obs_dim must be >= 1, got 0"),
        (lambda: MLPReward(2, -1), ValueError, "MLPReward: act_dim must be >= 0, got -1"),
        (
            lambda: MLPReward(2, 1, hidden=(3,))(np.zeros((4, 3)), np.zeros((4, 1))),
            ValueError,
            r"MLPReward: expected obs \(T, 2\) and acts \(T, 1\), got \(4, 3\) and \(4, 1\)",
        ),
    ],
)
def test_reward_models_name_a_bad_argument(make, exc, match):
    torch.manual_seed(0)
    with pytest.raises(exc, match=match):
        make()


def test_returns_of_no_segments_are_empty():
    # Σ over an empty set of segments: no returns, in the parameters' dtype (not a failing concatenate)
    torch.manual_seed(0)
    mlp = MLPReward(2, 1, hidden=(3,), dtype=torch.float32)
    R = mlp.prepare([], GAMMA)()
    assert R.shape == (0,) and R.dtype == torch.float32
    lin = LinearReward(lambda o, a: np.ones((len(o), 3)), 3)
    phi = lin.discounted_features([], GAMMA)
    assert phi.shape == (0, 3) and phi.dtype == torch.float64
    assert lin.prepare([], GAMMA)().shape == (0,)
    # ... and one segment of ones sums the discounts: Φ = (1 − γ³)/(1 − γ) in every coordinate
    phi = lin.discounted_features([(np.zeros(3), np.zeros(3))], GAMMA)
    torch.testing.assert_close(phi, torch.full((1, 3), (1 - GAMMA**3) / (1 - GAMMA), dtype=torch.float64))


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"reward": "linear"}, TypeError, "AIHF: reward must be a RewardModel, got str"),
        ({"w_demo": -1.0}, ValueError, "AIHF: w_demo must be 'count' or a float >= 0, got -1.0"),
        ({"w_pref": "counts"}, ValueError, "AIHF: w_pref must be 'count' or a float >= 0, got 'counts'"),
        ({"w_pref": float("nan")}, ValueError, "AIHF: w_pref must be 'count' or a float >= 0, got nan"),
        ({"beta": 0.0}, ValueError, "AIHF: beta must be > 0, got 0.0"),
        ({"reward_lr": -0.1}, ValueError, "AIHF: reward_lr must be > 0, got -0.1"),
    ],
)
def test_aihf_names_a_bad_argument(world, kwargs, exc, match):
    gw = world[0]
    args = {"reward": LinearReward(gw.features, 6), "policy_optimizer": tabular.SoftVI(env=gw)} | kwargs
    with pytest.raises(exc, match=match):
        AIHF(**args)


def test_fit_names_a_wrong_dataset(world):
    gw = world[0]
    D, P = _data(world, 2, 2)
    est = AIHF(LinearReward(gw.features, 6), tabular.SoftVI(env=gw))
    with pytest.raises(TypeError, match=r"AIHF\.fit: D must be a TrajectoryDataset, got list"):
        est.fit(D.episodes(), P, iters=1)
    with pytest.raises(TypeError, match=r"AIHF\.fit: P must be a PreferenceDataset, got tuple"):
        est.fit(D, (P.seg_a, P.seg_b, P.label), iters=1)


def test_fit_bradley_terry_refuses_empty_preferences(world):
    gw = world[0]
    with pytest.raises(ValueError, match="fit_bradley_terry: prefs is empty"):
        fit_bradley_terry(LinearReward(gw.features, 6), PreferenceDataset.empty(), GAMMA)


def test_ml_irl_autograd_step_is_the_feature_gap_to_the_uniform_policy(world):
    # w_P = 0 on the autograd path: the first reward step meets the uniform start policy, so
    # θ_1 = (α/β)(Φ_D − Φ_unif) with Φ_unif = Σ_{t<H} γ^t d_tᵀφ, d_0 = μ0, d_{t+1} = d_t·P_unif.
    gw = world[0]
    D, P = _data(world, 6, 4)
    beta, lr = 0.5, 0.3
    thetas = []
    reward = LinearReward(gw.features, 6)
    est = AIHF.ml_irl(_Wrapped(reward), tabular.SoftVI(temperature=beta, env=gw), beta=beta, reward_lr=lr, l2=0.0)
    est.fit(D, P, iters=1, callback=lambda k, e: thetas.append(reward.theta.detach().numpy().copy()))
    phi_d = _disc_features(gw, D.episodes()).mean(0)
    P_unif, d, phi_u = gw.P.mean(1), gw.mu0.copy(), np.zeros(6)
    for t in range(H):
        phi_u += GAMMA**t * d @ gw.phi
        d = d @ P_unif
    np.testing.assert_allclose(thetas[0], (lr / beta) * (phi_d - phi_u), rtol=1e-10, atol=1e-13)
    assert est.history_[0]["bt"] == 0.0  # the preference term was never evaluated


def test_rlhf_pipeline_reports_a_diverged_reward_model(world):
    gw = world[0]
    # Φ(a) = 2e200, Φ(b) = 1e200: the first ascent step (θ = 0.1·½·1e200) overflows both returns to inf, so
    # R_a − R_b = inf − inf is NaN and so is every later step.
    a, b = (np.array([1]), np.array([0])), (np.array([0]), np.array([0]))
    P = PreferenceDataset([a, a], [b, b], np.array([1.0, 1.0]))
    rew = _Wrapped(LinearReward(lambda o, _: 1e200 * (np.asarray(o, float)[:, None] + 1), 1))
    with pytest.raises(RuntimeError, match=r"RLHFPipeline\.fit: the reward model diverged"):
        RLHFPipeline(rew, tabular.SoftVI(env=gw), rl_steps=0).fit(None, P)


@pytest.mark.parametrize("mode", [torch.no_grad, torch.inference_mode])
def test_autograd_fits_run_under_the_callers_no_grad_and_inference_mode(world, mode):
    # Both failed with "element 0 of tensors does not require grad" (the closed-form linear path ran).
    gw = world[0]
    D, P = _data(world, 5, 10)

    def models():
        torch.manual_seed(0)
        return MLPReward(1, 1, hidden=(3,)), LinearReward(gw.features, 6), MLPReward(1, 1, hidden=(3,))

    def fits(mlp, lin, bt):
        AIHF(mlp, tabular.SoftVI(env=gw, exact=False), reward_lr=0.1).fit(D, P, iters=3)
        AIHF(lin, tabular.SoftVI(env=gw, exact=False)).fit(D, P, iters=3)
        fit_bradley_terry(bt, P, GAMMA, max_iter=3)
        return [p.detach().clone() for m in (mlp, lin, bt) for p in m.parameters()]

    expected = fits(*models())
    # built outside the mode: parameters made under inference_mode are inference tensors, untrainable in torch
    fresh = models()
    with mode():
        got = fits(*fresh)
    # the same computation in the same order: bit-identical
    assert all(torch.equal(g, e) for g, e in zip(got, expected, strict=True))
    assert torch.is_grad_enabled()


def test_a_fitted_estimator_pickles_after_a_lambda_callback(world):
    # The callback used to stay on the estimator after fit, so pickling it failed on a lambda.
    gw = world[0]
    D, P = _data(world, 5, 10)
    seen = []
    for opt in (tabular.SoftVI(env=gw), tabular.SoftVI(env=gw, exact=False)):
        est = AIHF(LinearReward(gw.features, 6), opt).fit(D, P, iters=2, callback=lambda k, e: seen.append(k))
        back = pickle.loads(pickle.dumps(est))
        assert torch.equal(back.reward_.theta, est.reward_.theta)
    assert seen == [0, 1, 0, 1]


def test_synthetic_preferences_with_huge_return_gaps_warn_nothing():
    # σ of a gap beyond ~709·T used to go through exp overflow and emit a RuntimeWarning; σ = 0 or 1 is exact.
    segs = [(np.array([k]), np.array([0])) for k in range(4)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        P = synthetic_preferences(segs, lambda s: 1e4 * float(s[0][0]), temperature=1.0, n_pairs=50, seed=0)
    a = np.array([s[0][0] for s in P.seg_a])
    b = np.array([s[0][0] for s in P.seg_b])
    # every gap is >= 1e4 temperatures, so the higher return wins with probability 1 - exp(-1e4) = 1 in float64
    np.testing.assert_array_equal(P.label, (a > b).astype(float))
