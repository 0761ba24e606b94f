"""The registered quick reproduction runs and its results document fits the card."""

import pytest

from iclr25.core.cards import discover_cards
from iclr25.core.experiments import registry


@pytest.mark.repro
@pytest.mark.slow
def test_quick_reproduction_fits_card(tmp_path):
    experiment = registry.get("markov_transformer")
    doc = experiment.execute(quick=True, device="cpu", seed=0, out=tmp_path)
    card = discover_cards()["markov_transformer"]
    assert [row["id"] for row in doc["claims"]] == [c.id for c in card.claims]
    for row, claim in zip(doc["claims"], card.claims, strict=True):
        assert (row["holds"] is not None) == claim.gated
        assert isinstance(row["ours"], float)
    assert "no LayerNorm" in doc["extra"]["architecture"]
    assert (tmp_path / "markov_transformer_losses.json").exists()
