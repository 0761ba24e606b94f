"""AUROC/FPR95/TPR05 against sklearn and a hand-computed ROC; evaluate_mia end to end."""

import numpy as np
import pytest
import torch

from iclr25.llm.lm import ByteTokenizer, TinyLlama, TinyLlamaConfig
from iclr25.llm.minkpp import MIAResult, evaluate_mia, mia_metrics, roc_curve


def test_auroc_equals_sklearn_with_ties():
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(0)
    for _ in range(20):
        n = int(rng.integers(4, 60))
        y = rng.integers(0, 2, n)
        y[:2] = [0, 1]
        s = rng.integers(0, 6, n).astype(float)  # many ties
        assert mia_metrics(s, y)["auroc"] == pytest.approx(metrics.roc_auc_score(y, s), abs=1e-12)
        fpr, tpr, _ = roc_curve(s, y)
        f2, t2, _ = metrics.roc_curve(y, s, drop_intermediate=False)
        np.testing.assert_allclose(fpr, f2)
        np.testing.assert_allclose(tpr, t2)


def test_fpr95_tpr05_on_hand_roc():
    # Descending scores with labels: 1 1 0 1 1 0 1 0 0 0 (5 members, 5 non-members).
    s = np.arange(10, 0, -1).astype(float)
    y = np.array([1, 1, 0, 1, 1, 0, 1, 0, 0, 0])
    # ROC points after each threshold: TPR = 0 .2 .4 .4 .6 .8 .8 1 1 1 1; FPR = 0 0 0 .2 .2 .2 .4 .4 .6 .8 1
    m = mia_metrics(s, y)
    assert m["fpr95"] == pytest.approx(0.4)  # first TPR >= .95 is at FPR .4
    assert m["tpr05"] == pytest.approx(0.4)  # last FPR <= .05 has TPR .4
    # AUROC = P(member > non-member) = (5 + 5 + 4 + 4 + 3) / 25
    assert m["auroc"] == pytest.approx(21 / 25)


@pytest.mark.parametrize(
    ("labels", "match"), [([1, 1, 1, 1], "both classes"), ([0, 1, 2, 1], "binary"), ([0, 1, 0], "equal length")]
)
def test_bad_labels_raise(labels, match):
    with pytest.raises(ValueError, match=match):
        mia_metrics([0.1, 0.2, 0.3, 0.4], labels)


def test_evaluate_mia_runs_and_matches_metrics():
    torch.manual_seed(0)
    model = TinyLlama(TinyLlamaConfig.preset("pico", vocab_size=256, max_seq_len=64))
    tok = ByteTokenizer()
    texts = ["to be or not", "that is the question", "whether tis", "nobler in the mind", "to suffer", "the slings"]
    labels = [1, 0, 1, 0, 1, 0]
    res = evaluate_mia(model, tok, texts, labels, ks=(0.2, 0.5), batch_size=4, n_bootstrap=50)
    assert isinstance(res, MIAResult)
    assert set(res.metrics) == {"loss", "zlib", "mink@0.2", "mink++@0.2", "mink@0.5", "mink++@0.5"}
    for name, m in res.metrics.items():
        assert m["auroc"] == pytest.approx(mia_metrics(res.scores[name], labels)["auroc"])
        lo, hi = m["auroc_ci"]
        assert 0.0 <= lo <= hi <= 1.0
    assert "mink++@0.2" in res.table()
    with pytest.raises(ValueError, match="at least 2"):
        evaluate_mia(model, tok, ["x", "abc"], [1, 0], n_bootstrap=0)
    with pytest.raises(ValueError, match="at least 2"):
        evaluate_mia(model, tok, ["", "abc"], [1, 0], n_bootstrap=0)
    with pytest.raises(ValueError, match="both classes"):
        evaluate_mia(model, tok, ["ab", "abc"], [1, 1], n_bootstrap=0)
    with pytest.raises(ValueError, match="methods"):
        evaluate_mia(model, tok, ["ab", "abc"], [1, 0], methods=("minkpp",))
