"""The registered quick reproduction runs and its results document fits the card (about 60 s)."""

import pytest

from iclr25.core.experiments import registry


@pytest.mark.repro
@pytest.mark.slow
def test_quick_reproduction_fits_card(tmp_path):
    assert "tcm" in registry.slugs()
    exp = registry.get("tcm")
    doc = exp.execute(quick=True, device="cpu", seed=0, out=tmp_path)
    assert [row["id"] for row in doc["claims"]] == [c.id for c in exp.card.claims]
    for row, claim in zip(doc["claims"], exp.card.claims, strict=True):
        if claim.gated:
            assert isinstance(row["holds"], bool), row
            assert row["ours"] is not None and row["baseline"] is not None
        else:
            assert row["holds"] is None
    assert (tmp_path / "results.json").exists()
