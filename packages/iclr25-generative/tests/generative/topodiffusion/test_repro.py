"""The registered quick reproduction runs and its results document fits the card.

Marked slow as well: on the shared 2-core test machine the quick run (two 400-step trainings)
takes several minutes.
"""

import pytest

from iclr25.core.testing import run_quick_reproduction


@pytest.mark.repro
@pytest.mark.slow
def test_quick_reproduction_fits_card(tmp_path):
    doc = run_quick_reproduction("topodiffusion", tmp_path, need_baseline=True)
    assert (tmp_path / "topodiffusion_runs.json").exists()
    assert set(doc["extra"]["runs"][0]) == {"tdn", "adm_t"}
