import itertools

import numpy as np
import pytest

from iclr25.rl.efg_pg import (
    TabularPolicy,
    best_response_value,
    exploitability,
    games,
    policy_value,
    q_values,
    regularized_gap,
    traj_q_estimate,
)
from iclr25.rl.efg_pg.games import _KuhnState, _LeducState

from ._brute import brute_values

KUHN = games.kuhn_poker()


@pytest.mark.parametrize("tau", [0.0, 0.1])
@pytest.mark.parametrize("seed", range(10))
def test_q_values_match_brute_force_kuhn(seed, tau):
    pol = TabularPolicy.random(KUHN, seed=seed).probs
    cf, r, own = q_values(KUHN, pol, tau)
    bcf, br, bown, root = brute_values(_KuhnState(), KUHN, pol, tau)
    for (i, j), v in bcf.items():
        assert abs(cf[i, j] - v) < 1e-10
    assert np.abs(cf * ~KUHN.mask).max() == 0
    for i in range(KUHN.num_infosets):
        assert abs(r[i] - br[i]) < 1e-12 and abs(own[i] - bown[i]) < 1e-12
    assert abs(policy_value(KUHN, pol, tau) - root) < 1e-12


@pytest.mark.parametrize("tau", [0.0, 0.1])
def test_q_values_match_brute_force_leduc(tau):
    g = games.leduc_poker()
    pol = TabularPolicy.random(g, seed=11).probs
    cf, r, _own = q_values(g, pol, tau)
    bcf, br, _, root = brute_values(_LeducState(False), g, pol, tau)
    err = max(abs(cf[i, j] - v) for (i, j), v in bcf.items())
    assert err < 1e-10
    assert max(abs(r[i] - v) for i, v in br.items()) < 1e-12
    assert abs(policy_value(g, pol, tau) - root) < 1e-10


def _pure_profiles(game, player):
    rows = np.flatnonzero(game.infoset_player == player)
    for choice in itertools.product(*[range(game.num_actions[i]) for i in rows]):
        out = np.zeros(game.mask.shape)
        out[rows, choice] = 1.0
        yield rows, out


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("player", [0, 1])
def test_best_response_equals_max_over_pure_strategies(seed, player):
    pol = TabularPolicy.random(KUHN, seed=seed).probs
    best = -np.inf
    for rows, pure in _pure_profiles(KUHN, player):
        prof = pol.copy()
        prof[rows] = pure[rows]
        v = policy_value(KUHN, prof)
        best = max(best, v if player == 0 else -v)
    assert abs(best_response_value(KUHN, pol, player) - best) < 1e-12


@pytest.mark.parametrize("seed", range(5))
def test_soft_best_response_dominates_and_gap_nonnegative(seed):
    tau = 0.1
    pol = TabularPolicy.random(KUHN, seed=seed).probs
    assert exploitability(KUHN, pol) >= 0
    assert regularized_gap(KUHN, pol, tau) >= -1e-12
    rng = np.random.default_rng(seed)
    for player in (0, 1):
        brv = best_response_value(KUHN, pol, player, tau)
        rows = KUHN.infoset_player == player
        for _ in range(20):
            other = TabularPolicy.random(KUHN, seed=int(rng.integers(1 << 30))).probs
            prof = np.where(rows[:, None], other, pol)
            v = policy_value(KUHN, prof, tau)
            assert brv >= (v if player == 0 else -v) - 1e-12


def test_traj_q_estimator_within_three_standard_errors():
    """Acceptance 2: 2e5 sampled trajectories vs the exact pi_p(I) * cf(I, a)."""
    tau = 0.1
    pol = TabularPolicy.random(KUHN, seed=5).probs
    cf, _, own = q_values(KUHN, pol, tau)
    exact = own[:, None] * cf
    est, se = traj_q_estimate(KUHN, pol, 200_000, tau=tau, seed=0)
    z = np.abs(est - exact)[KUHN.mask] / se[KUHN.mask]
    assert np.all(se[KUHN.mask] > 0)
    assert z.max() < 3.0, z.max()
    # A wrong estimator (no importance weight) would be far off.
    assert np.abs(est - exact).max() < 0.05


def test_float32_promoted_and_input_untouched():
    pol = TabularPolicy.random(KUHN, seed=1).probs
    p32 = pol.astype(np.float32)
    p32 = p32 / p32.sum(1, keepdims=True)
    before = p32.copy()
    e32 = exploitability(KUHN, p32)
    assert np.array_equal(p32, before)
    assert abs(e32 - exploitability(KUHN, p32.astype(np.float64))) == 0.0


def test_torch_input_gives_same_values():
    torch = pytest.importorskip("torch")
    pol = TabularPolicy.random(KUHN, seed=2).probs
    a = q_values(KUHN, pol, 0.1)
    b = q_values(KUHN, torch.as_tensor(pol), 0.1)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_allclose(x, y, atol=1e-14)
    assert abs(exploitability(KUHN, torch.as_tensor(pol)) - exploitability(KUHN, pol)) < 1e-14


@pytest.mark.parametrize(
    "bad, match",
    [
        (np.ones((12, 3)) / 3, "shape"),
        (np.full((12, 2), np.nan), "finite"),
        (np.tile([1.5, -0.5], (12, 1)), "non-negative"),
        (np.tile([0.7, 0.7], (12, 1)), "sum to 1"),
    ],
)
def test_bad_policies_raise(bad, match):
    with pytest.raises(ValueError, match=match):
        exploitability(KUHN, bad)


def test_mass_on_illegal_action_raises():
    g = games.leduc_poker()
    bad = TabularPolicy.uniform(g).probs.copy()
    row = int(np.flatnonzero(g.num_actions == 2)[0])
    bad[row] = [0.5, 0.25, 0.25]
    with pytest.raises(ValueError, match="illegal"):
        exploitability(g, bad)


def test_bad_tau_and_player():
    pol = TabularPolicy.uniform(KUHN)
    with pytest.raises(ValueError, match="tau"):
        q_values(KUHN, pol, -0.1)
    with pytest.raises(ValueError, match="player"):
        best_response_value(KUHN, pol, 2)
    with pytest.raises(ValueError, match="regularizer"):
        regularized_gap(KUHN, pol, 0.1, regularizer="l3")
