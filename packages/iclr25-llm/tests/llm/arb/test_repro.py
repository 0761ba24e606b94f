"""The registered quick reproduction runs and its results document fits the card."""

import pytest

from iclr25.core.testing import run_quick_reproduction


@pytest.mark.repro
def test_quick_reproduction_fits_card(tmp_path):
    doc = run_quick_reproduction("arb", tmp_path)
    held = {row["id"]: row["holds"] for row in doc["claims"]}
    assert set(held) >= {"refined_error_below_billm", "arbx_output_error", "perplexity_below_billm"}
    # a perplexity gate that only full runs decide (printed in quick runs)
    assert held["perplexity_below_billm"] is None
    assert {"fp", "billm", "arb", "arb_x", "arb_rc", "pbllm"} <= set(doc["extra"]["methods"])
    assert (tmp_path / "results_methods.json").exists()
