"""Acceptance item 7: the quick reproduction runs and its results document fits the card."""

import pytest
import torch


@pytest.mark.repro
def test_quick_reproduction_fits_the_card(tmp_path):
    from iclr25.neuro.barrel_cortex.experiment import experiment

    doc = experiment.execute(quick=True, device=torch.device("cpu"), seed=0, out=tmp_path)
    assert [row["id"] for row in doc["claims"]] == [c.id for c in experiment.card.claims]
    rows = {row["id"]: row for row in doc["claims"]}
    for cid in ("rsnn_accuracy", "selective_fraction"):
        assert isinstance(rows[cid]["holds"], bool)
    # the issue gates --quick on accuracy and selectivity only; deprivation is a full-run gate
    assert rows["deprivation_graceful"]["holds"] is None
    assert isinstance(rows["deprivation_graceful"]["ours"], float)
    # the quick run trains (seed 0 measured 0.51 test accuracy); accuracy is only checked to leave
    # chance (1/3). Selectivity pools train and test sweeps as RSNN_bfd's ANOVA() does: with 55
    # sweeps per class the untrained scale-0.1 network is already selective (measured 0.903 trained
    # vs 0.900 untrained on 2026-12-01), so the 2x gate is reported, not asserted here
    assert rows["rsnn_accuracy"]["ours"] > 0.4
    # whatever the figures, the verdicts apply the quick gates (acceptance item 7)
    acc, sel = rows["rsnn_accuracy"], rows["selective_fraction"]
    assert acc["holds"] == (acc["ours"] > 0.45)
    assert sel["holds"] == (sel["ours"] >= 2 * sel["baseline"])
    assert [r["selectivity_trials"] for r in doc["extra"]["by_seed"]] == [3 * (40 + 15)]
    for cid in ("rsnn_vs_conventional", "biological_firing"):
        assert rows[cid]["holds"] is None
    assert 0 <= rows["rsnn_accuracy"]["ours"] <= 1 and 0 <= rows["selective_fraction"]["baseline"] <= 1
    assert doc["extra"]["config"]["scale"] == 0.1 and doc["extra"]["seeds"] == [0]
    assert (tmp_path / "barrel_cortex_runs.json").exists()
