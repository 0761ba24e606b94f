"""The registered quick reproduction runs and its results document fits the card."""

import pytest

from iclr25.core.testing import run_quick_reproduction


@pytest.mark.repro
def test_quick_reproduction_fits_card(tmp_path):
    doc = run_quick_reproduction("ltc", tmp_path)
    assert set(doc["extra"]["models"]) == {"ntc_Z8", "ltc_E8"}
    assert (tmp_path / "results_models.json").exists()
