import pytest

from iclr25.core.testing import run_quick_reproduction


@pytest.mark.repro
def test_quick_reproduction_fits_card(tmp_path):
    doc = run_quick_reproduction("videoniah", tmp_path)
    assert doc["extra"]["http_requests"] >= 3 * 40 * 4
    assert (tmp_path / "results_videoniah.json").exists()
