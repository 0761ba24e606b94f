"""Everyday-use checks: saving/reloading, argument validation with clear messages, edge inputs."""

import io

import numpy as np
import pytest
import torch

from iclr25.rl.aihf import (
    AIHF,
    LinearReward,
    MLPReward,
    PreferenceDataset,
    RLHFPipeline,
    TrajectoryDataset,
    batched_soft_vi,
    tabular,
)

GAMMA, H = 0.9, 30


# the `data` fixture (gridworld, demonstrations, preferences) lives in conftest.py


def test_fitted_reward_survives_a_weights_only_state_dict_round_trip(data):
    gw, D, P = data
    est = AIHF(LinearReward(gw.features, 6), tabular.SoftVI(env=gw)).fit(D, P, iters=20)
    buf = io.BytesIO()
    torch.save(est.reward_.state_dict(), buf)
    buf.seek(0)
    fresh = LinearReward(gw.features, 6)
    fresh.load_state_dict(torch.load(buf, weights_only=True))
    assert torch.equal(fresh.theta, est.reward_.theta)
    torch.manual_seed(0)
    mlp = MLPReward(3, 2, hidden=(4,))
    buf = io.BytesIO()
    torch.save(mlp.state_dict(), buf)
    buf.seek(0)
    fresh_mlp = MLPReward(3, 2, hidden=(4,))
    fresh_mlp.load_state_dict(torch.load(buf, weights_only=True))
    o, a = np.random.default_rng(1).normal(size=(5, 3)), np.random.default_rng(2).normal(size=(5, 2))
    assert torch.equal(fresh_mlp(o, a), mlp(o, a))


def test_batched_soft_vi_dtype_and_device_mismatch_names_the_arguments(data):
    gw = data[0]
    P = torch.as_tensor(gw.P)  # float64, as every numpy-built MDP
    with pytest.raises(ValueError, match=r"r must have P's dtype and device.*torch\.float64.*torch\.float32"):
        batched_soft_vi(P, torch.zeros(2, 25, 5), GAMMA, 1.0, 3)
    with pytest.raises(TypeError, match="floating-point"):
        batched_soft_vi(P, torch.zeros(2, 25, 5, dtype=torch.long), GAMMA, 1.0, 3)
    # converting as the message says works, for one problem and many
    for B in (1, 4):
        r = torch.zeros(B, 25, 5)
        assert batched_soft_vi(P.to(r), r, GAMMA, 1.0, 3).shape == (B, 25)


def test_zero_policy_steps_keep_the_current_policy(data):
    gw, D, P = data
    opt = tabular.SoftVI(env=gw).reset(H)
    opt.improve(LinearReward(gw.features, 6), 0)
    np.testing.assert_array_equal(opt.policy, np.full((25, 5), 0.2))
    # the pipeline's RL stage with no steps leaves the SFT policy it anchors to
    pipe = RLHFPipeline(LinearReward(gw.features, 6), tabular.SoftVI(env=gw), rl_steps=0).fit(D, P)
    np.testing.assert_array_equal(pipe.policy_, pipe.sft_)


def test_rlhf_pipeline_zero_kl_is_refused_for_the_tabular_optimizer(data):
    # SoftVI has no anchor-free KL-RL: kl_to_sft=0 used to anchor at the optimizer's temperature, i.e. give the
    # same policy as kl_to_sft=1.
    gw = data[0]
    with pytest.raises(ValueError, match=r"kl_to_sft=0 .* ARS only"):
        RLHFPipeline(LinearReward(gw.features, 6), tabular.SoftVI(env=gw), kl_to_sft=0.0)


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"kl_to_sft": float("nan")}, ValueError, "kl_to_sft must be >= 0"),
        ({"l2": -1.0}, ValueError, "l2 must be >= 0"),
        ({"rl_steps": -1}, ValueError, "rl_steps must be >= 0"),
        ({"reward": "linear"}, TypeError, "reward must be a RewardModel"),
    ],
)
def test_rlhf_pipeline_bad_arguments(data, kwargs, exc, match):
    gw = data[0]
    args = {"reward": LinearReward(gw.features, 6), "policy_optimizer": tabular.SoftVI(env=gw)} | kwargs
    with pytest.raises(exc, match=match):
        RLHFPipeline(**args)


def test_rlhf_pipeline_fit_names_a_wrong_dataset(data):
    gw, D, P = data
    pipe = RLHFPipeline(LinearReward(gw.features, 6), tabular.SoftVI(env=gw))
    with pytest.raises(TypeError, match="P must be a PreferenceDataset, got NoneType"):
        pipe.fit(D, None)
    with pytest.raises(TypeError, match="D must be a TrajectoryDataset"):
        pipe.fit(D.episodes(), P)


def test_numpy_scalar_weights_are_accepted(data):
    gw, D, P = data
    ref = AIHF(LinearReward(gw.features, 6), tabular.SoftVI(env=gw), w_demo=1, w_pref=0.5).fit(D, P, iters=5)
    est = AIHF(LinearReward(gw.features, 6), tabular.SoftVI(env=gw), w_demo=np.int64(1), w_pref=np.float32(0.5))
    est.fit(D, P, iters=5)
    assert est.weights_ == ref.weights_ == (1.0, 0.5)
    assert torch.equal(est.reward_.theta, ref.reward_.theta)
    with pytest.raises(ValueError, match="l2 must be >= 0"):
        AIHF(LinearReward(gw.features, 6), tabular.SoftVI(env=gw), l2=float("nan"))


@pytest.mark.parametrize("bad", [-1, 25, 2.5])
def test_state_ids_outside_the_grid_are_named(data, bad):
    # -1 used to index the last state silently (and 2.5 state 2)
    gw = data[0]
    obs = np.zeros(H)
    obs[4] = bad
    D = TrajectoryDataset.from_rollouts([(obs, np.zeros(H, np.int64))])
    with pytest.raises(ValueError, match=r"obs must be integer state ids in \[0, 25\)"):
        AIHF(LinearReward(gw.features, 6), tabular.SoftVI(env=gw)).fit(D, None, iters=1)
    with pytest.raises(ValueError, match=r"TrajectoryDataset: obs must be integer state ids"):
        tabular.SoftVI(env=gw).behavior_clone(D)


def test_gridworld_rollouts_check_the_policy(data):
    gw = data[0]
    with pytest.raises(ValueError, match=r"policy must be an \(S, A\) = \(25, 5\) array, got \(25,\)"):
        gw.rollouts(np.zeros(25, np.int64), 2, 3)
    with pytest.raises(ValueError, match="probability distributions"):
        gw.rollouts(np.full((25, 5), 0.1), 2, 3)
    # a torch policy of the right shape is fine and samples as its numpy twin
    pi = np.full((25, 5), 0.2)
    for (o1, a1), (o2, a2) in zip(gw.rollouts(torch.as_tensor(pi), 3, 4, 7), gw.rollouts(pi, 3, 4, 7), strict=True):
        np.testing.assert_array_equal(o1, o2)
        np.testing.assert_array_equal(a1, a2)


def test_non_numeric_preference_segments_are_named():
    good = (np.array([0, 1]), np.array([0, 0]))
    with pytest.raises(TypeError, match=r"PreferenceDataset.seg_a: obs of segment 0 must be numeric"):
        PreferenceDataset([(np.array(["a", "b"]), np.array([0, 0]))], [good], [1.0])
