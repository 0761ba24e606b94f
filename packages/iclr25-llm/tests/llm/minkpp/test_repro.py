"""The registered quick reproduction runs and its results document fits the card."""

import pytest

from iclr25.core.experiments import registry


@pytest.mark.repro
def test_quick_reproduction_fits_card(tmp_path):
    assert "minkpp" in registry.slugs()
    exp = registry.get("minkpp")
    doc = exp.execute(quick=True, device="cpu", seed=0, out=tmp_path)
    assert [row["id"] for row in doc["claims"]] == [c.id for c in exp.card.claims]
    for row, claim in zip(doc["claims"], exp.card.claims, strict=True):
        if claim.gated:
            assert isinstance(row["holds"], bool), row
            assert row["ours"] is not None and row["baseline"] is not None
        else:
            assert row["holds"] is None
    aurocs = doc["extra"]["auroc_mean_over_splits"]["E4"]
    assert set(aurocs) == {"loss", "zlib", "mink@0.2", "mink++@0.2", "mink@0.5", "mink++@0.5"}
    assert all(0.0 <= v <= 1.0 for v in aurocs.values())
    assert (tmp_path / "minkpp_auroc.json").exists()
