import numpy as np
import pytest
import torch

from iclr25.rl.aihf import (
    AIHF,
    ARS,
    LinearPolicy,
    LinearReward,
    PreferenceDataset,
    RLHFPipeline,
    TrajectoryDataset,
)


@pytest.fixture(scope="module")
def ars():
    a = ARS("HalfCheetah-v5", horizon=10, seed=0)
    yield a
    a.close()


def test_behavior_clone_recovers_a_linear_policy(ars):
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(400, ars.obs_dim + 1))
    M = 0.05 * rng.normal(size=(ars.act_dim, ars.obs_dim))
    s = obs[:, : ars.obs_dim]
    acts = ((s - s.mean(0)) / s.std(0)) @ M.T  # ARS policies have no bias: act on normalized observations
    D = TrajectoryDataset(obs, acts, np.eye(1, 400, dtype=bool)[0])
    pol = ars.behavior_clone(D)
    np.testing.assert_allclose(pol.act(obs), acts, atol=1e-8)


def test_actions_outside_box_raise(ars):
    obs, acts = np.zeros((10, ars.obs_dim + 1)), np.zeros((10, ars.act_dim))
    acts[3, 2] = 1.5
    D = TrajectoryDataset.from_rollouts([(obs, acts)])
    with pytest.raises(ValueError, match="index 3 lies outside"):
        AIHF(LinearReward(lambda o, a: o, ars.obs_dim + 1), ars).fit(D, None, iters=1)


def test_actions_of_the_wrong_size_name_the_dataset(ars):
    # used to fail inside a reshape ("cannot reshape array of size 50 into shape (6)") without naming the data
    D = TrajectoryDataset.from_rollouts([(np.zeros((10, ars.obs_dim + 1)), np.zeros((10, ars.act_dim - 1)))])
    with pytest.raises(ValueError, match=rf"TrajectoryDataset: actions must have shape \(T, {ars.act_dim}\)"):
        AIHF(LinearReward(lambda o, a: o, ars.obs_dim + 1), ars).fit(D, None, iters=1)


def test_horizon_mismatch_raises(ars):
    D = TrajectoryDataset.from_rollouts([(np.zeros((7, ars.obs_dim + 1)), np.zeros((7, ars.act_dim)))])
    with pytest.raises(ValueError, match="horizon 7 != policy rollout horizon 10"):
        AIHF(LinearReward(lambda o, a: o, ars.obs_dim + 1), ars).fit(D, None, iters=1)


def test_ars_improves_true_return(ars):
    ars.reset(10, seed=2)
    ars.rollouts(2)  # the training stream's first draws: the same rollouts as rollouts(2, seed=2) below
    before = ars.last_true_returns.mean()
    ars.improve(None, 5)
    ars.rollouts(2, seed=2)
    # forward progress is rewarded; 5 iterations from the zero policy move the cheetah forward
    assert ars.last_true_returns.mean() > before
    assert ars.env_steps > 0


def test_reset_records_the_start_policy(ars):
    ars.reset(10, seed=0)
    assert np.abs(ars.start_policy.M).max() == 0.0
    ref = ars.policy
    ref.M[:] = 0.3
    ars.reset(10, seed=0, ref=ref)
    np.testing.assert_array_equal(ars.start_policy.M, ref.M)
    ars.improve(None, 1)
    # the record is a copy: training moves M, not the start
    np.testing.assert_array_equal(ars.start_policy.M, ref.M)
    assert not np.array_equal(ars.M, ref.M)


def test_cheetah_features_use_info_x_velocity_and_contain_the_true_reward(ars):
    # Method notes (HalfCheetah-v5): φ(s, a) = [x_velocity, a², obs] (24 dims, contains the true reward), and
    # "HalfCheetah reward uses info["x_velocity"], not obs[8]". The true reward x_velocity − 0.1‖a‖² is then
    # θ*ᵀφ with θ* = (1, −0.1 × 6, 0 × 17), also on noisy actions (the preference segments' action noise 0.5).
    from iclr25.rl.aihf.experiment import _cheetah_features

    ars.reset(10, seed=0)
    ars.improve(None, 2)
    ((obs, acts),) = ars.rollouts(1, seed=1, action_noise=0.5)
    phi = _cheetah_features()(obs, acts)
    assert phi.shape == (10, 24)
    theta_star = np.r_[1.0, np.full(6, -0.1), np.zeros(17)]
    np.testing.assert_allclose((phi @ theta_star).sum(), ars.last_true_returns[0], rtol=1e-10, atol=1e-10)
    np.testing.assert_array_equal(phi[:, 7:], obs[:, : ars.obs_dim])
    assert not np.allclose(phi[:, 0], obs[:, 8])  # info's finite-difference velocity, not the observed qvel[0]


def test_cheetah_task_is_the_plain_env_and_its_segment_return_is_the_env_reward(ars):
    # The HalfCheetah arm must stay as it was: default env, default info keys, and the segment return the
    # preference labels use equals the environment's own return.
    from iclr25.rl.aihf.experiment import MUJOCO_TASKS, _cheetah_features

    features, true_return, kwargs = MUJOCO_TASKS["HalfCheetah-v5"]
    assert features is _cheetah_features and kwargs == {}
    ars.reset(10, seed=0)
    ((obs, acts),) = ars.rollouts(1, seed=3, action_noise=0.5)
    np.testing.assert_allclose(true_return(obs, acts), ars.last_true_returns[0], rtol=1e-10, atol=1e-10)


@pytest.fixture(scope="module")
def hopper():
    from iclr25.rl.aihf.experiment import MUJOCO_TASKS

    a = ARS("Hopper-v5", horizon=60, seed=0, **MUJOCO_TASKS["Hopper-v5"][2])
    yield a
    a.close()


def test_hopper_rollouts_last_the_full_horizon_with_terminations_off(hopper):
    # The zero policy under action noise 0.5 falls within ~20 steps; the default Hopper-v5 would terminate
    # there, ours keeps going so that demonstrations and policy rollouts share one horizon.
    hopper.reset(60, seed=0)
    segs = hopper.rollouts(3, seed=1, action_noise=0.5)
    assert [len(o) for o, _ in segs] == [60, 60, 60] and [len(a) for _, a in segs] == [60, 60, 60]
    healthy = np.concatenate([o[:, -1] for o, _ in segs])
    assert set(np.unique(healthy)) == {0.0, 1.0}  # both healthy and fallen steps were recorded
    default = ARS("Hopper-v5", horizon=60, seed=0, info_keys=("x_velocity", "reward_survive"))
    try:
        assert min(len(o) for o, _ in default.rollouts(3, seed=1, action_noise=0.5)) < 60
    finally:
        default.close()


def test_hopper_features_contain_the_true_reward(hopper):
    # Hopper-v5 reward = x_velocity + 1·[healthy] − 1e-3‖a‖² (the alive bonus only while healthy), so with
    # φ = [x_velocity, a², obs, healthy] it is θ*ᵀφ, θ* = (1, −1e-3 × 3, 0 × 11, 1); also after a fall.
    from iclr25.rl.aihf.experiment import _hopper_features, _hopper_return

    hopper.reset(60, seed=0)
    hopper.improve(None, 1)
    segs = hopper.rollouts(2, seed=2, action_noise=0.5)
    theta_star = np.r_[1.0, np.full(3, -1e-3), np.zeros(11), 1.0]
    for (obs, acts), ret in zip(segs, hopper.last_true_returns, strict=True):
        phi = _hopper_features()(obs, acts)
        assert phi.shape == (60, 16) and (phi[:, -1] == 0).any()
        np.testing.assert_allclose((phi @ theta_star).sum(), ret, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(_hopper_return(obs, acts), ret, rtol=1e-9, atol=1e-9)
        np.testing.assert_array_equal(phi[:, 4:15], obs[:, : hopper.obs_dim])


def test_rlhf_pipeline_refuses_demonstrations_outside_the_box(ars):
    # The pipeline used to behaviour-clone them (least squares takes any action) without a word.
    from iclr25.rl.aihf import PreferenceDataset, RLHFPipeline

    obs, acts = np.zeros((10, ars.obs_dim + 1)), np.zeros((10, ars.act_dim))
    acts[3, 2] = 1.5
    D = TrajectoryDataset.from_rollouts([(obs, acts)])
    seg = (obs, np.zeros_like(acts))
    P = PreferenceDataset([seg], [seg], [1.0])
    pipe = RLHFPipeline(LinearReward(lambda o, a: o, ars.obs_dim + 1), ars, kl_to_sft=0.0, rl_steps=0)
    with pytest.raises(ValueError, match="TrajectoryDataset: action at index 3 lies outside"):
        pipe.fit(D, P)


# --- argument checks and edge cases ------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"horizon": 0}, ValueError, "ARS: horizon must be >= 1, got 0"),
        ({"horizon": 10.5}, TypeError, "ARS: horizon must be an int, got float 10.5"),
        ({"n_dirs": 0, "top": 1}, ValueError, "ARS: n_dirs must be >= 1, got 0"),
        ({"top": 0}, ValueError, "ARS: top must be >= 1, got 0"),
        ({"n_dirs": 4.0, "top": 2}, TypeError, "ARS: n_dirs must be an int"),
        ({"n_dirs": 3, "top": 4}, ValueError, "ARS: top must be <= n_dirs, got top=4, n_dirs=3"),
        ({"step": 0.0}, ValueError, "ARS: step must be a finite float > 0, got 0.0"),
        ({"step": float("inf")}, ValueError, "ARS: step must be a finite float > 0, got inf"),
        ({"noise": float("nan")}, ValueError, "ARS: noise must be a finite float > 0, got nan"),
        ({"gamma": float("nan")}, ValueError, r"ARS: gamma must be in \[0, 1\], got nan"),
        ({"gamma": 1.5}, ValueError, r"ARS: gamma must be in \[0, 1\], got 1.5"),
    ],
)
def test_constructor_names_a_bad_argument(kwargs, exc, match):
    # a fractional horizon used to be truncated and a NaN gamma made every score NaN, so ARS never stepped
    with pytest.raises(exc, match=match):
        ARS("HalfCheetah-v5", **kwargs)


def test_reset_refuses_another_horizon(ars):
    with pytest.raises(ValueError, match="ARS: horizon 7 != the optimizer's rollout horizon 10"):
        ars.reset(7)


def test_a_constant_reward_gives_no_step_but_updates_the_statistics(ars):
    # With every perturbed return equal, σ_R = 0: the update direction carries no information, so M stays put.
    ars.reset(10, seed=0)
    steps0 = ars.env_steps
    ars.improve(LinearReward(lambda o, a: o, ars.obs_dim + 1), 2)  # θ = 0: every return is 0
    assert not ars.M.any()
    assert ars.env_steps - steps0 == 2 * 2 * ars.n_dirs * 10  # HalfCheetah never terminates
    assert (ars.std != 1.0).any()  # the observation statistics still learnt from the rollouts


def test_kl_anchor_penalizes_the_squared_distance_to_the_reference_actions(ars):
    rng = np.random.default_rng(3)
    ref = LinearPolicy(
        0.3 * rng.normal(size=(ars.act_dim, ars.obs_dim)),
        rng.normal(size=ars.obs_dim),
        rng.uniform(0.5, 2.0, size=ars.obs_dim),
        ars.low,
        ars.high,
    )
    ars.reset(10, seed=0, ref=ref, temperature=0.25)
    obs = rng.normal(size=(6, ars.obs_dim + 1))  # the extra column is the recorded x_velocity
    acts = rng.uniform(-1.0, 1.0, size=(6, ars.act_dim))
    # a_ref(s) = clip(M (s − μ) / σ, −1, 1) on the environment observation alone
    ref_acts = np.clip(((obs[:, : ars.obs_dim] - ref.mean) / ref.std) @ ref.M.T, -1.0, 1.0)
    expected = 2.0 - 0.25 * ((acts - ref_acts) ** 2).sum()
    assert ars._score((obs, acts), 2.0, None) == pytest.approx(expected, rel=1e-12)
    ars.reset(10, seed=0, ref=ref)  # no temperature: no anchor
    assert ars._score((obs, acts), 2.0, None) == 2.0


def test_preferences_only_fit_uses_the_rollout_horizon(ars):
    # Preference segments shorter than the rollouts: the policy side keeps the optimizer's own horizon.
    rng = np.random.default_rng(4)

    def seg():
        return rng.normal(size=(7, ars.obs_dim + 1)), rng.uniform(-1.0, 1.0, size=(7, ars.act_dim))

    a, b = [seg(), seg(), seg()], [seg(), seg(), seg()]
    y = np.array([1.0, 0.0, 0.5])
    P = PreferenceDataset(a, b, y)

    def feats(o, _):
        return np.asarray(o)[:, :2]

    steps0 = ars.env_steps
    est = AIHF.rlhf(LinearReward(feats, 2), ars, reward_lr=0.5, l2=0.0, policy_steps_per_iter=1)
    est.fit(None, P, iters=1)
    # one reward step from θ = 0, where σ(0) = 1/2: θ_1 = α·mean_k (y_k − 1/2)(Φ(a_k) − Φ(b_k)), γ = 1
    dphi = np.stack([sa[0][:, :2].sum(0) - sb[0][:, :2].sum(0) for sa, sb in zip(a, b, strict=True)])
    np.testing.assert_allclose(est.reward_.theta.detach().numpy(), 0.5 * (y - 0.5) @ dphi / 3, rtol=1e-12)
    # the deferred policy step ran 2·n_dirs rollouts of the full horizon 10, not of the segments' 7
    assert ars.env_steps - steps0 == 2 * ars.n_dirs * 10


def test_rlhf_pipeline_without_the_sft_start_starts_at_zero_but_keeps_the_anchor(ars):
    # init_from_sft=False was ignored whenever kl_to_sft > 0: ARS started from the SFT policy it anchors to.
    rng = np.random.default_rng(5)
    obs = rng.normal(size=(10, ars.obs_dim + 1))
    acts = rng.uniform(-0.5, 0.5, size=(10, ars.act_dim))
    D = TrajectoryDataset.from_rollouts([(obs, acts)])
    P = PreferenceDataset([(obs, acts)], [(obs, np.zeros_like(acts))], [1.0])
    for init in (True, False):
        pipe = RLHFPipeline(
            LinearReward(lambda o, a: o, ars.obs_dim + 1), ars, kl_to_sft=0.5, rl_steps=0, init_from_sft=init
        ).fit(D, P)
        expected_start = pipe.sft_.M if init else np.zeros_like(pipe.sft_.M)
        np.testing.assert_array_equal(ars.start_policy.M, expected_start)
        np.testing.assert_array_equal(pipe.policy_.M, expected_start)  # rl_steps=0 keeps the start
        # either way the RL stage is anchored to the SFT policy with weight 0.5
        expected = -0.5 * ((acts - pipe.sft_.act(obs)) ** 2).sum()
        assert ars._score((obs, acts), 0.0, None) == pytest.approx(expected, rel=1e-12)


def test_seeded_rollouts_leave_the_training_stream_alone(ars):
    # rollouts(seed=...) used to reseed the optimizer's own generator, so a seeded evaluation inside an AIHF
    # callback changed every later perturbation (SoftVI's seeded rollouts never did).
    D = TrajectoryDataset.from_rollouts([(np.zeros((10, ars.obs_dim + 1)), np.zeros((10, ars.act_dim)))])

    def fit(callback):
        est = AIHF(LinearReward(lambda o, a: o, ars.obs_dim + 1), ars, reward_lr=0.01, policy_steps_per_iter=1)
        est.fit(D, None, iters=2, callback=callback)
        return est.reward_.theta.detach().clone(), ars.M.copy()

    evals = []

    def evaluate(k, est):
        evals.append(est.policy_optimizer.rollouts(1, seed=123)[0][0])

    theta0, M0 = fit(None)
    theta1, M1 = fit(evaluate)
    assert torch.equal(theta1, theta0)
    np.testing.assert_array_equal(M1, M0)
    # the seeded evaluation itself is reproducible: both start from the zero policy, so k = 0 gives one trajectory
    ars.reset(10, seed=0)
    np.testing.assert_array_equal(ars.rollouts(1, seed=123)[0][0], evals[0])


def test_the_policy_copy_does_not_share_the_action_bounds(ars):
    # policy is "a copy", but low/high were the environment's action_space arrays: editing them moved the clip
    ars.reset(10, seed=0)
    low = ars.env.action_space.low.copy()
    pol = ars.policy
    pol.low[:] = -0.5
    pol.high[:] = 0.5
    np.testing.assert_array_equal(ars.env.action_space.low, low)
    np.testing.assert_array_equal(ars.low, low)
    np.testing.assert_array_equal(ars.policy.high, ars.env.action_space.high)
