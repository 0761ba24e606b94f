"""The registered quick reproduction runs and its results document fits the card (about 60 s)."""

import pytest

from iclr25.core.testing import run_quick_reproduction


@pytest.mark.repro
@pytest.mark.slow
def test_quick_reproduction_fits_card(tmp_path):
    run_quick_reproduction("tcm", tmp_path, need_baseline=True)
    assert (tmp_path / "tcm_runs.json").exists()  # execute() returns the results document; the CLI writes it
