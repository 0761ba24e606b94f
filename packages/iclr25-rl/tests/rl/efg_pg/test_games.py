import numpy as np
import pytest

from iclr25.rl.efg_pg import TabularPolicy, exploitability, games


@pytest.fixture(scope="module")
def leduc():
    return games.leduc_poker()


def test_kuhn_structure():
    g = games.kuhn_poker()
    assert g.num_infosets == 12
    assert int((g.kind == 3).sum()) == 30
    assert sorted(np.bincount(g.infoset_player).tolist()) == [6, 6]
    assert g.max_actions == 2


def test_leduc_structure(leduc):
    assert leduc.num_infosets == 936
    assert games.leduc_poker(suit_isomorphic=True).num_infosets == 288
    assert leduc.max_actions == 3


@pytest.mark.parametrize("name", ["kuhn", "leduc"])
def test_chance_sums_to_one(name, leduc):
    g = games.kuhn_poker() if name == "kuhn" else leduc
    ar = g.arrays()
    chance = np.flatnonzero(g.kind == 2)
    np.testing.assert_allclose(ar["chance_matrix"][chance].sum(1), 1.0, atol=1e-12)
    assert np.all(g.mask.sum(1) == g.num_actions)


def test_uniform_exploitability_acceptance_1(leduc):
    assert abs(exploitability(games.kuhn_poker(), TabularPolicy.uniform(games.kuhn_poker())) - 0.458333) < 5e-7
    assert abs(exploitability(games.kuhn_poker(), TabularPolicy.uniform(games.kuhn_poker())) - 11 / 24) < 1e-12
    assert abs(exploitability(leduc, TabularPolicy.uniform(leduc)) - 2.373611) < 5e-7
    iso = games.leduc_poker(suit_isomorphic=True)
    assert (
        abs(exploitability(iso, TabularPolicy.uniform(iso)) - exploitability(leduc, TabularPolicy.uniform(leduc)))
        < 1e-12
    )


def test_suit_isomorphism_is_lossless(leduc):
    """A random iso policy, lifted to the 936-infoset game, has the same exploitability."""
    iso = games.leduc_poker(suit_isomorphic=True)
    pol = TabularPolicy.random(iso, seed=3).probs
    lifted = np.zeros(leduc.mask.shape)
    for i, key in enumerate(leduc.infoset_keys):
        # keys look like "p0 c3 pub5 cr/c": map cards to ranks
        p, c, pub, seq = key.split(" ", 3)
        c_iso = f"c{int(c[1:]) // 2}"
        pub_iso = "pub" if pub == "pub" else f"pub{int(pub[3:]) // 2}"
        lifted[i] = pol[iso.infoset_index(f"{p} {c_iso} {pub_iso} {seq}")]
    assert abs(exploitability(leduc, lifted) - exploitability(iso, pol)) < 1e-12


def test_bad_game_argument():
    with pytest.raises(TypeError, match="suit_isomorphic"):
        games.leduc_poker(suit_isomorphic=1)
