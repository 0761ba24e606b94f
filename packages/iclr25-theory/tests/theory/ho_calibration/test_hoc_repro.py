"""The registered quick reproduction runs and its results document fits the card."""

import pytest

from iclr25.core.experiments import registry


@pytest.mark.repro
def test_quick_reproduction_fits_card(tmp_path):
    assert "ho_calibration" in registry.slugs()
    exp = registry.get("ho_calibration")
    doc = exp.execute(quick=True, device="cpu", seed=0, out=tmp_path)
    card_ids = [c.id for c in exp.card.claims]
    assert [row["id"] for row in doc["claims"]] == card_ids
    for row, claim in zip(doc["claims"], exp.card.claims, strict=True):
        if claim.gated:
            assert isinstance(row["holds"], bool), row
        assert row["ours"] is not None
    assert set(doc["extra"]["au_error_by_k"]) == {"1", "2", "10"}
    assert (tmp_path / "ho_calibration_errors.json").exists()
