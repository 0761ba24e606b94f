import pytest

from iclr25.core.cards import discover_cards


@pytest.mark.repro
def test_quick_reproduction_fits_card(tmp_path):
    from iclr25.rl.aihf.experiment import experiment

    doc = experiment.execute(quick=True, device="cpu", seed=0, out=tmp_path)
    card = discover_cards()["aihf"]
    assert [c["id"] for c in doc["claims"]] == [c.id for c in card.claims]
    rows = {c["id"]: c for c in doc["claims"]}
    for claim in card.claims:
        assert isinstance(rows[claim.id]["holds"], bool) == claim.gated
    grid = doc["extra"]["gridworld"]
    assert set(grid) == {"20/5", "20/20", "2/200"}
    for g in grid.values():
        assert 0.0 <= g["aihf_acc"] <= 1.0 and g["aihf_return"] <= 1.0 + 1e-9
    assert (tmp_path / "aihf_results.json").exists()
