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
        if claim.gated_in(quick=True):
            assert isinstance(row["holds"], bool), row
            assert row["ours"] is not None
        else:  # report-only, or a perplexity gate that only full runs decide (printed in quick runs)
            assert row["holds"] is None
    held = {row["id"]: row["holds"] for row in doc["claims"]}
    assert set(held) >= {"refined_error_below_billm", "arbx_output_error", "perplexity_below_billm"}
    assert held["perplexity_below_billm"] is None
    assert {"fp", "billm", "arb", "arb_x", "arb_rc", "pbllm"} <= set(doc["extra"]["methods"])
    assert (tmp_path / "results_methods.json").exists()
