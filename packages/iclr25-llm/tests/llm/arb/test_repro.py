"""The registered quick reproduction runs and its results document fits the card."""

import pytest

from iclr25.core.experiments import registry


@pytest.mark.repro
def test_quick_reproduction_fits_card(tmp_path):
    assert "arb" in registry.slugs()
    exp = registry.get("arb")
    doc = exp.execute(quick=True, device="cpu", seed=0, out=tmp_path)
    assert [row["id"] for row in doc["claims"]] == [c.id for c in exp.card.claims]
    for row, claim in zip(doc["claims"], exp.card.claims, strict=True):
        if claim.gated:
            assert isinstance(row["holds"], bool), row
            assert row["ours"] is not None
        else:
            assert row["holds"] is None
    assert {"fp", "billm", "arb", "arb_x", "arb_rc", "pbllm"} <= set(doc["extra"]["methods"])
    assert (tmp_path / "results_methods.json").exists()
