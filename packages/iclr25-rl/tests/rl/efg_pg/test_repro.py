import pytest

from iclr25.core.cards import discover_cards


@pytest.mark.repro
def test_quick_reproduction_fits_card(tmp_path):
    from iclr25.rl.efg_pg.experiment import experiment

    doc = experiment.execute(quick=True, device="cpu", seed=0, out=tmp_path)
    card = discover_cards()["efg_pg"]
    assert [c["id"] for c in doc["claims"]] == [c.id for c in card.claims]
    rows = {c["id"]: c for c in doc["claims"]}
    for claim in card.claims:
        assert isinstance(rows[claim.id]["holds"], bool) == claim.gated
    assert rows["best_iterate_convergence"]["ours"] <= 1e-3
    assert rows["plain_pg_no_convergence"]["ours"] >= 0.1
    assert rows["sampled_feedback"]["ours"] <= 0.15
    assert (tmp_path / "curves.json").exists()
