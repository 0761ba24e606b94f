import pytest

from iclr25.core.experiments import registry


@pytest.mark.repro
def test_quick_reproduction_fits_card(tmp_path):
    exp = registry.get("videoniah")
    doc = exp.execute(quick=True, device="cpu", seed=0, out=tmp_path)
    assert [row["id"] for row in doc["claims"]] == [c.id for c in exp.card.claims]
    for row, claim in zip(doc["claims"], exp.card.claims, strict=True):
        assert isinstance(row["holds"], bool) if claim.gated else row["holds"] is None
    assert doc["extra"]["http_requests"] >= 3 * 40 * 4
    assert (tmp_path / "results_videoniah.json").exists()
