import numpy as np
import pytest

pyspiel = pytest.importorskip("pyspiel")

from iclr25.rl.efg_pg import TabularPolicy, exploitability, games  # noqa: E402


def _to_openspiel(game, os_game, probs):
    from open_spiel.python import policy as os_policy

    pol = os_policy.TabularPolicy(os_game)
    for i, key in enumerate(game.infoset_keys):
        row = pol.policy_for_key(key)
        row[:] = 0.0
        for j, a in enumerate(game.infoset_actions[i]):
            row[a] = probs[i, j]
    return pol


@pytest.mark.parametrize("name", ["kuhn_poker", "leduc_poker"])
def test_exploitability_matches_openspiel_acceptance_8(name):
    from open_spiel.python.algorithms import exploitability as os_expl

    os_game = pyspiel.load_game(name)
    game = games.from_openspiel(os_game)
    builtin = games.kuhn_poker() if name == "kuhn_poker" else games.leduc_poker()
    assert game.num_infosets == builtin.num_infosets
    for seed in range(20):
        probs = TabularPolicy.random(game, seed=seed).probs
        want = os_expl.exploitability(os_game, _to_openspiel(game, os_game, probs))
        assert abs(exploitability(game, probs) - want) < 1e-9


def test_openspiel_rejects_non_two_player_zero_sum():
    with pytest.raises(ValueError, match="two-player"):
        games.from_openspiel(pyspiel.load_game("kuhn_poker", {"players": 3}))
    with pytest.raises(ValueError, match="zero-sum"):
        games.from_openspiel(pyspiel.load_game("matrix_pd"))


def test_pyspiel_game_passed_directly_gets_a_conversion_hint():
    from iclr25.rl.efg_pg import QFR

    with pytest.raises(TypeError, match="from_openspiel"):
        QFR(pyspiel.load_game("kuhn_poker"))
    with pytest.raises(TypeError, match="from_openspiel"):
        exploitability(pyspiel.load_game("kuhn_poker"), np.ones((12, 2)) / 2)


def test_simultaneous_game_rejected_with_turn_based_hint():
    with pytest.raises(ValueError, match="convert_to_turn_based"):
        games.from_openspiel(pyspiel.load_game("matrix_rps"))
    game = games.from_openspiel(pyspiel.convert_to_turn_based(pyspiel.load_game("matrix_rps")))
    assert game.num_infosets == 2


def test_export_to_openspiel_policy_via_action_probabilities():
    from open_spiel.python import policy as os_policy
    from open_spiel.python.algorithms import exploitability as os_expl

    os_game = pyspiel.load_game("kuhn_poker")
    game = games.from_openspiel(os_game)
    pol = TabularPolicy.random(game, seed=3)
    exported = os_policy.tabular_policy_from_callable(os_game, pol.action_probabilities)
    assert abs(os_expl.exploitability(os_game, exported) - exploitability(game, pol)) < 1e-12
