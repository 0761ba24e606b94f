import numpy as np
import pytest

from iclr25.rl.aihf import AIHF, ARS, LinearReward, TrajectoryDataset


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
    ars.reset(10, seed=1)
    ars.rollouts(2, seed=2)
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
