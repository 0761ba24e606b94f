"""The registered quick reproduction runs and its results fit the card."""

import pytest
import torch

from iclr25.core.cards import discover_cards


@pytest.mark.repro
def test_quick_reproduction(tmp_path):
    from iclr25.theory.lambda_balanced.experiment import experiment

    doc = experiment.execute(quick=True, device=torch.device("cpu"), seed=0, out=tmp_path)
    card = discover_cards()["lambda_balanced"]
    assert [c["id"] for c in doc["claims"]] == [c.id for c in card.claims]
    by_id = {c["id"]: c for c in doc["claims"]}
    for claim in card.claims:
        assert (by_id[claim.id]["holds"] is None) == (not claim.gated)
    # the machinery (not the sweep's thresholds) must hold at any seed
    assert by_id["exact_matches_gd"]["holds"] is True
    assert by_id["long_horizon"]["holds"] is True
    means = doc["extra"]["kernel_distance_mean"]
    assert len(means) == 5 and means[0] > means[-1]
