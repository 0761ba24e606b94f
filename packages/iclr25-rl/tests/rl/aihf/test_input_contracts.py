"""Input contracts found missing in review: each test fails on the code before its fix."""

import numpy as np
import pytest
import torch

from iclr25.rl.aihf import (
    AIHF,
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


# the `data` fixture (gridworld, demonstrations, preferences) lives in conftest.py


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_synthetic_preferences_refuse_a_non_finite_true_return(bad):
    # σ(NaN) compared False with every draw, so every pair holding the segment was labelled silently.
    segs = [(np.array([k]), np.array([0])) for k in range(4)]
    with pytest.raises(ValueError, match=rf"finite values, got {bad} for segment 2"):
        synthetic_preferences(segs, lambda s: bad if s[0][0] == 2 else 0.0, temperature=1.0, n_pairs=50)


def test_rlhf_pipeline_refuses_actions_outside_the_action_space(data):
    # AIHF.fit checked them, the pipeline trained on them (state-only features never look at the action).
    gw, D, _ = data
    ok, bad = (np.array([0, 1]), np.array([0, 4])), (np.array([0, 1]), np.array([0, 5]))
    P = PreferenceDataset([ok, ok], [ok, bad], np.array([1.0, 0.0]))
    with pytest.raises(ValueError, match=r"PreferenceDataset pair 1: actions must be integers in \[0, 5\)"):
        RLHFPipeline(LinearReward(gw.features, 6), tabular.SoftVI(env=gw)).fit(D, P)


@pytest.mark.parametrize(
    ("make", "exc", "match"),
    [
        (lambda r, o: AIHF(r, o, policy_steps_per_iter=2.5), TypeError, "policy_steps_per_iter must be an int"),
        (lambda r, o: AIHF(r, o, n_policy_rollouts=4.0), TypeError, "n_policy_rollouts must be an int"),
        (lambda r, o: AIHF(r, o, n_policy_rollouts=0), ValueError, "n_policy_rollouts must be >= 1, got 0"),
        (lambda r, o: RLHFPipeline(r, o, rl_steps=2.5), TypeError, "rl_steps must be an int"),
    ],
)
def test_step_counts_must_be_integers(data, make, exc, match):
    # int() truncated 2.5 policy steps to 2 without a word
    gw = data[0]
    with pytest.raises(exc, match=match):
        make(LinearReward(gw.features, 6), tabular.SoftVI(env=gw))


def test_fit_names_a_non_integer_iters(data):
    gw, D, P = data
    with pytest.raises(TypeError, match=r"AIHF\.fit: iters must be an int, got float 2\.5"):
        AIHF(LinearReward(gw.features, 6), tabular.SoftVI(env=gw)).fit(D, P, iters=2.5)


def test_fit_does_not_reseed_the_callers_torch_stream(data):
    # fit called torch.manual_seed(seed): whatever the caller had seeded, the next draw was the same.
    gw, D, P = data
    torch.manual_seed(123)
    expected = torch.rand(4)
    torch.manual_seed(123)
    AIHF(LinearReward(gw.features, 6), tabular.SoftVI(env=gw)).fit(D, P, iters=2)
    assert torch.equal(torch.rand(4), expected)


def test_fit_is_still_seeded_for_stochastic_reward_models(data):
    gw, D, P = data
    enc = np.eye(25)

    class Noisy(MLPReward):
        def forward(self, obs, acts):
            out = super().forward(enc[np.asarray(obs, int)], np.zeros((len(obs), 0)))
            return out + 0.01 * torch.randn(len(obs), dtype=out.dtype)

    thetas = []
    for draw in (1, 2):
        torch.manual_seed(0)
        rew = Noisy(25, 0, hidden=(4,))
        torch.manual_seed(draw)  # a different caller stream must not change the fit
        AIHF(rew, tabular.SoftVI(env=gw), reward_lr=0.1, seed=5).fit(D, P, iters=3)
        thetas.append(torch.cat([p.detach().reshape(-1) for p in rew.parameters()]))
    assert torch.equal(*thetas)


def test_soft_value_iteration_refuses_zero_or_fractional_iters(data):
    gw = data[0]
    r = np.zeros((25, 5))
    with pytest.raises(ValueError, match="iters must be >= 1, got 0"):  # used to run one backup
        tabular.soft_value_iteration(gw.P, r, GAMMA, 1.0, iters=0)
    with pytest.raises(TypeError, match="iters must be an int"):
        tabular.soft_value_iteration(gw.P, r, GAMMA, 1.0, iters=2.5)


def test_soft_value_iteration_follows_the_device_of_r(data):
    # The meta device stands in for CUDA: the numpy P, V = 0 and ref used to be created on the CPU.
    gw = data[0]
    r = torch.zeros(25, 5, device="meta")
    for ref in (None, np.full((25, 5), 0.2)):
        Q, V, pi = tabular.soft_value_iteration(gw.P, r, GAMMA, 1.0, iters=3, ref=ref)
        assert Q.device == V.device == pi.device == r.device
        assert Q.dtype == V.dtype == pi.dtype == torch.float64


def test_mlp_reward_follows_its_device(data):
    # After .to(device) the module used to build its inputs on the CPU (meta stands in for CUDA).
    D = data[1]
    torch.manual_seed(0)
    rew = MLPReward(1, 1, hidden=(4,)).to("meta")
    obs, acts = np.arange(6.0), np.zeros(6, np.int64)
    assert rew(obs, acts).device.type == "meta"
    returns = rew.prepare(D.episodes(), GAMMA)()
    assert returns.shape == (len(D),) and returns.device.type == "meta"


def test_mlp_reward_keeps_the_graph_of_tensor_inputs():
    # np.asarray refused tensors that require grad, so d r / d obs could not be taken.
    torch.manual_seed(0)
    rew = MLPReward(3, 2, hidden=(5,))
    obs = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    acts = torch.randn(4, 2, dtype=torch.float64)
    (g,) = torch.autograd.grad(rew(obs, acts).sum(), obs)
    x = torch.cat([obs.detach(), acts], 1).requires_grad_(True)
    (g_ref,) = torch.autograd.grad(rew.net(x).sum(), x)
    torch.testing.assert_close(g, g_ref[:, :3], rtol=0, atol=0)
    # numpy and tensor inputs give the same rewards
    torch.testing.assert_close(rew(obs.detach().numpy(), acts.numpy()), rew(obs, acts).detach(), rtol=0, atol=0)


def test_from_rollouts_accepts_the_bool_actions_a_segment_accepts(data):
    gw = data[0]
    seg = (np.array([0, 1, 2]), np.array([True, False, True]))
    PreferenceDataset([seg], [seg], [1.0])  # accepted here ...
    D = TrajectoryDataset.from_rollouts([seg, seg])  # ... and used to raise TypeError here
    assert len(D) == 2 and D.acts.dtype == bool
    est = AIHF(LinearReward(gw.features, 6), tabular.SoftVI(env=gw)).fit(D, None, iters=2)
    assert len(est.history_) == 2


def test_soft_vi_policy_is_a_copy(data):
    """As ARS.policy: editing the estimator's policy_ must not move the optimizer's current policy."""
    gw, D, P = data[:3]
    opt = tabular.SoftVI(env=gw)
    est = AIHF(LinearReward(gw.features, 6), opt).fit(D, P, iters=2)
    before = opt.policy
    est.policy_[:] = 0.0
    np.testing.assert_array_equal(opt.policy, before)
    fresh = tabular.SoftVI(env=gw)
    fresh.reset(H, ref=np.full((25, 5), 0.2))
    fresh.policy[:] = 0.0
    assert (fresh.policy == 0.2).all()


@pytest.mark.parametrize(
    ("make", "exc", "match"),
    [
        (lambda: LinearReward(lambda o, a: o, 2.5), TypeError, "LinearReward: dim must be an int, got float 2.5"),
        (lambda: LinearReward(lambda o, a: o, "3"), TypeError, "LinearReward: dim must be an int, got str"),
        (lambda: MLPReward(2.5, 1), TypeError, "MLPReward: obs_dim must be an int, got float 2.5"),
        (lambda: MLPReward(2, 1.0), TypeError, "MLPReward: act_dim must be an int, got float 1.0"),
    ],
)
def test_reward_dimensions_must_be_integers(make, exc, match):
    # int() truncated dim=2.5 to 2 and obs_dim=2.5 to a 2-wide input layer without a word
    with pytest.raises(exc, match=match):
        make()


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"lr": -0.1}, ValueError, "fit_bradley_terry: lr must be > 0, got -0.1"),
        ({"l2": -1e-3}, ValueError, "fit_bradley_terry: l2 must be >= 0, got -0.001"),
        ({"gamma": float("nan")}, ValueError, r"fit_bradley_terry: gamma must be in \[0, 1\], got nan"),
        ({"max_iter": 2.5}, TypeError, "fit_bradley_terry: max_iter must be an int"),
        ({"reward": "linear"}, TypeError, "fit_bradley_terry: reward must be a RewardModel, got str"),
        ({"prefs": []}, TypeError, "fit_bradley_terry: prefs must be a PreferenceDataset, got list"),
    ],
)
def test_fit_bradley_terry_names_a_bad_argument(data, kwargs, exc, match):
    # A negative lr descended the likelihood and a NaN gamma gave a NaN reward, both silently.
    gw, _, P = data
    args = {"reward": LinearReward(gw.features, 6), "prefs": P, "gamma": GAMMA} | kwargs
    with pytest.raises(exc, match=match):
        fit_bradley_terry(**args)


def test_a_negative_lr_used_to_descend_the_likelihood(data):
    # the gradient path with lr = -0.1 moved θ against ∇ log-likelihood; now refused, and lr = 0.1 ascends
    gw, _, P = data
    rew = _StateLinear(gw)
    with pytest.raises(ValueError, match="lr must be > 0"):
        fit_bradley_terry(rew, P, GAMMA, max_iter=5, lr=-0.1)
    assert not rew.theta.detach().any()  # refused before any step
    ll = _bt_loglik(gw, P, rew.theta.detach().numpy())
    fit_bradley_terry(rew, P, GAMMA, l2=0.0, max_iter=5, lr=0.1)
    assert _bt_loglik(gw, P, rew.theta.detach().numpy()) > ll


def test_weights_of_the_wrong_type_raise_type_error(data):
    # None used to raise ValueError, as a negative weight does
    gw = data[0]
    with pytest.raises(TypeError, match="AIHF: w_demo must be 'count' or a float >= 0, got NoneType None"):
        AIHF(LinearReward(gw.features, 6), tabular.SoftVI(env=gw), w_demo=None)
    with pytest.raises(TypeError, match="AIHF: w_pref must be 'count' or a float >= 0, got list"):
        AIHF(LinearReward(gw.features, 6), tabular.SoftVI(env=gw), w_pref=[1.0])


class _StateLinear(RewardModel):
    """θᵀφ(s) through the generic (gradient-ascent) path of fit_bradley_terry."""

    def __init__(self, gw):
        super().__init__()
        self.phi = torch.as_tensor(gw.phi)
        self.theta = torch.nn.Parameter(torch.zeros(gw.phi.shape[1], dtype=torch.float64))

    def forward(self, obs, acts):
        return self.phi[np.asarray(obs, int)] @ self.theta


def _bt_loglik(gw, P, theta):
    def ret(seg):
        return GAMMA ** np.arange(len(seg[0])) @ (gw.phi[seg[0]] @ theta)

    d = np.array([ret(a) - ret(b) for a, b in zip(P.seg_a, P.seg_b, strict=True)])
    return float(np.mean(-P.label * np.logaddexp(0, -d) - (1 - P.label) * np.logaddexp(0, d)))
