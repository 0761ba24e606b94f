"""The registered quick reproduction runs and its results document fits the card.

Marked slow as well: on the shared 2-core test machine the quick run (two 400-step trainings)
takes several minutes.
"""

import pytest

from iclr25.core.experiments import registry


@pytest.mark.repro
@pytest.mark.slow
def test_quick_reproduction_fits_card(tmp_path):
    assert "topodiffusion" in registry.slugs()
    exp = registry.get("topodiffusion")
    doc = exp.execute(quick=True, device="cpu", seed=0, out=tmp_path)
    assert [row["id"] for row in doc["claims"]] == [c.id for c in exp.card.claims]
    for row, claim in zip(doc["claims"], exp.card.claims, strict=True):
        if claim.gated:
            assert isinstance(row["holds"], bool), row
            assert row["ours"] is not None and row["baseline"] is not None
        else:
            assert row["holds"] is None
    assert (tmp_path / "topodiffusion_runs.json").exists()
    assert set(doc["extra"]["runs"][0]) == {"tdn", "adm_t"}
