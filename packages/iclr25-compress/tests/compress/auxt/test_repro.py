"""The registered quick reproduction runs and its results document fits the card."""

import pytest

from iclr25.core.experiments import registry


@pytest.mark.repro
def test_quick_reproduction_fits_card(tmp_path):
    assert "auxt" in registry.slugs()
    exp = registry.get("auxt")
    doc = exp.execute(quick=True, device="cpu", seed=0, out=tmp_path)
    assert [row["id"] for row in doc["claims"]] == [c.id for c in exp.card.claims]
    for row, claim in zip(doc["claims"], exp.card.claims, strict=True):
        if claim.gated:
            assert isinstance(row["holds"], bool), row
            assert row["ours"] is not None
        else:
            assert row["holds"] is None
    runs = doc["extra"]["runs"]
    assert set(runs) == {"base_seed0_lam0.013", "auxt_seed0_lam0.013"}
    assert all(len(r["curve"]) == 10 for r in runs.values())
    assert (tmp_path / "results_runs.json").exists()
