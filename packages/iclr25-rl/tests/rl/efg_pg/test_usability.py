"""Everyday workflows: checkpointing, backend agreement, numpy scalars, clear argument errors."""

import copy
import pickle

import numpy as np
import pytest

from iclr25.rl.efg_pg import (
    QFR,
    CFRPlus,
    TabularPolicy,
    exploitability,
    games,
    policy_value,
    q_values,
    traj_q_estimate,
)
from iclr25.rl.efg_pg.games import _KuhnState

KUHN = games.kuhn_poker()


@pytest.mark.parametrize("array_backend", ["numpy", "torch"])
@pytest.mark.parametrize("feedback", ["q", "sampled"])
def test_qfr_checkpoint_round_trip_resumes_exactly(array_backend, feedback):
    if array_backend == "torch":
        pytest.importorskip("torch")
    kw = {"eta": 0.5, "feedback": feedback, "batch_trajectories": 8, "seed": 3, "array_backend": array_backend}
    straight = QFR(KUHN, **kw)
    straight.run(6, eval_every=3)
    solver = QFR(KUHN, **kw)
    solver.run(3, eval_every=3)
    for restored in (pickle.loads(pickle.dumps(solver)), copy.deepcopy(solver)):
        restored.run(3, eval_every=3)
        assert restored.iteration == straight.iteration
        assert restored.trajectories == straight.trajectories
        np.testing.assert_array_equal(restored.policy.numpy(), straight.policy.numpy())


def test_torch_regularized_values_are_float64_exact():
    """log|A(I)| in the entropy shift was computed in float32 on torch (error ~2e-8 * tau)."""
    torch = pytest.importorskip("torch")
    leduc = games.leduc_poker(suit_isomorphic=True)
    pol = TabularPolicy.random(leduc, seed=2).probs
    for x, y in zip(q_values(leduc, pol, 1.0), q_values(leduc, torch.as_tensor(pol), 1.0), strict=True):
        np.testing.assert_allclose(x, y, rtol=0, atol=1e-13)
    assert abs(policy_value(leduc, pol, 1.0) - policy_value(leduc, torch.as_tensor(pol), 1.0)) < 1e-13
    a = QFR(leduc, eta=0.5, tau=1e-2, gamma=1e-3)
    b = QFR(leduc, eta=0.5, tau=1e-2, gamma=1e-3, array_backend="torch")
    for _ in range(10):
        a.step()
        b.step()
    np.testing.assert_allclose(a.policy.numpy(), b.policy.numpy(), rtol=0, atol=1e-12)


def test_sampled_visits_keep_float64_on_torch():
    """The sampled-mode divisor 1 + eta*tau is built from visits; it was float32 on torch."""
    torch = pytest.importorskip("torch")
    from iclr25.rl.efg_pg.qfr import sample_trajectory_q

    ar = KUHN.arrays(torch.device("cpu"))
    probs = torch.as_tensor(TabularPolicy.uniform(KUHN).probs)
    gen = torch.Generator().manual_seed(0)
    mean, _, visits = sample_trajectory_q(ar, probs, 8, 1e-3, "entropy", gen)
    assert visits.dtype == torch.float64 and mean.dtype == torch.float64


def test_numpy_scalar_arguments_accepted():
    want = QFR(KUHN, eta=0.5, tau=0.01, batch_trajectories=8, feedback="sampled")
    want_log = want.run(4, eval_every=2)
    got = QFR(KUHN, eta=np.float32(0.5), tau=np.float64(0.01), batch_trajectories=np.int64(8), feedback="sampled")
    assert got.run(np.int64(4), eval_every=np.int64(2)) == want_log
    pol = TabularPolicy.random(KUHN, seed=1)
    tau32 = np.float32(0.5)
    np.testing.assert_array_equal(q_values(KUHN, pol, tau32)[0], q_values(KUHN, pol, float(tau32))[0])
    np.testing.assert_array_equal(traj_q_estimate(KUHN, pol, np.int64(20))[0], traj_q_estimate(KUHN, pol, 20)[0])
    assert CFRPlus(KUHN).run(np.int64(3)).probs.shape == (12, 2)


def test_traj_q_estimate_validates_like_q_values():
    pol = TabularPolicy.uniform(KUHN)
    with pytest.raises(ValueError, match="tau"):
        traj_q_estimate(KUHN, pol, 10, tau=float("nan"))
    with pytest.raises(TypeError, match="tau"):
        traj_q_estimate(KUHN, pol, 10, tau="0.1")
    with pytest.raises(TypeError, match="game"):
        traj_q_estimate("kuhn_poker", pol, 10)


def test_random_policy_concentration_errors_name_it():
    for bad in (0.0, -1.0, float("inf")):
        with pytest.raises(ValueError, match="concentration"):
            TabularPolicy.random(KUHN, concentration=bad)
    with pytest.raises(ValueError, match="concentration"):
        TabularPolicy.random(games.leduc_poker(), concentration=1e-9)
    with pytest.raises(TypeError, match="game"):
        TabularPolicy.random("kuhn_poker")
    with pytest.raises(TypeError, match="game"):
        TabularPolicy.uniform("kuhn_poker")
    # Valid draws are unchanged: a Dirichlet(1) row from the same generator.
    g = np.random.default_rng(4).gamma(1.0, size=KUHN.mask.shape)
    np.testing.assert_array_equal(TabularPolicy.random(KUHN, seed=4).probs, g / g.sum(1, keepdims=True))


def test_action_probabilities_accepts_state_and_names_bad_key():
    pol = TabularPolicy.random(KUHN, seed=0)
    state = _KuhnState((2, 0), "p")  # player 1 holding J after a pass: infoset "0p"
    assert pol.action_probabilities(state) == pol.action_probabilities("0p")
    with pytest.raises(ValueError, match="'nope' is not an information-state string"):
        pol.action_probabilities("nope")
    with pytest.raises(TypeError, match="key"):
        KUHN.infoset_index(3)


def test_flag_and_dtype_validation():
    with pytest.raises(TypeError, match="optimistic"):
        QFR(KUHN, optimistic="false")
    with pytest.raises(ValueError, match="eval_every"):
        CFRPlus(KUHN).run(2, eval_every=True)
    with pytest.raises(TypeError, match="real"):
        exploitability(KUHN, TabularPolicy.uniform(KUHN).probs.astype(complex))
