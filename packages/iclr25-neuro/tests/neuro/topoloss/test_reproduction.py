"""The digits data and the quick reproduction (acceptance item 8)."""

import pytest
import torch

from iclr25.neuro.topoloss.data import load_digits_dataset


def test_digits_are_the_uci_set():
    x, y = load_digits_dataset()
    assert x.shape == (1797, 64) and y.shape == (1797,) and x.dtype == torch.float32
    assert x.min() == 0 and x.max() == 16 and torch.equal(x, x.round())  # 4x4 block counts of a 32x32 bitmap
    assert torch.bincount(y, minlength=10).min() >= 174  # every class present, roughly balanced


@pytest.mark.repro
def test_quick_reproduction_fits_the_card(tmp_path):
    from iclr25.neuro.topoloss.experiment import experiment

    doc = experiment.execute(quick=True, device=torch.device("cpu"), seed=0, out=tmp_path)
    card_ids = [c.id for c in experiment.card.claims]
    assert [row["id"] for row in doc["claims"]] == card_ids
    rows = {row["id"]: row for row in doc["claims"]}
    for cid in ("accuracy_cost_small", "sheet_smoothness", "downsample_robust"):
        assert isinstance(rows[cid]["holds"], bool)
    assert rows["lower_effective_dim"]["holds"] is None
    assert doc["extra"]["epochs"] == 15 and doc["extra"]["seeds"] == [0]
    assert set(doc["extra"]["by_tau"]) == {"0", "5"}
    assert (tmp_path / "topoloss_runs.json").exists()
    # the figures are measured, not constants: smoothness is a fraction, accuracies are in [0, 1]
    assert -1 <= rows["sheet_smoothness"]["baseline"] <= 1
    assert 0 <= rows["downsample_robust"]["ours"] <= 1
