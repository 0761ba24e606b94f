"""The registered quick reproduction runs and its results document fits the card."""

import pytest

from iclr25.core.experiments import registry


@pytest.mark.repro
def test_quick_reproduction_fits_card(tmp_path):
    assert "ltc" in registry.slugs()
    exp = registry.get("ltc")
    doc = exp.execute(quick=True, device="cpu", seed=0, out=tmp_path)
    assert [row["id"] for row in doc["claims"]] == [c.id for c in exp.card.claims]
    for row, claim in zip(doc["claims"], exp.card.claims, strict=True):
        if claim.gated:
            assert isinstance(row["holds"], bool), row
            assert row["ours"] is not None
        else:
            assert row["holds"] is None
    assert set(doc["extra"]["models"]) == {"ntc_Z8", "ltc_E8"}
    assert (tmp_path / "results_models.json").exists()
