"""The registered quick reproduction runs and its results document fits the card."""

import pytest

from iclr25.core.testing import run_quick_reproduction


@pytest.mark.repro
def test_quick_reproduction_fits_card(tmp_path):
    doc = run_quick_reproduction("auxt", tmp_path)
    runs = doc["extra"]["runs"]
    assert set(runs) == {"base_seed0_lam0.013", "auxt_seed0_lam0.013"}
    assert all(len(r["curve"]) == 10 for r in runs.values())
    assert (tmp_path / "results_runs.json").exists()
