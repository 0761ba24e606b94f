"""The registered quick reproduction runs and its results document fits the card."""

import pytest

from iclr25.core.testing import run_quick_reproduction


@pytest.mark.repro
def test_quick_reproduction_fits_card(tmp_path):
    doc = run_quick_reproduction("minkpp", tmp_path, need_baseline=True)
    aurocs = doc["extra"]["auroc_mean_over_splits"]["E4"]
    assert set(aurocs) == {"loss", "zlib", "mink@0.2", "mink++@0.2", "mink@0.5", "mink++@0.5"}
    assert all(0.0 <= v <= 1.0 for v in aurocs.values())
    assert (tmp_path / "minkpp_auroc.json").exists()
