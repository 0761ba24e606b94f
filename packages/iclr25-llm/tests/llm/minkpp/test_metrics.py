"""AUROC/FPR95/TPR05 against sklearn and a hand-computed ROC; evaluate_mia end to end."""

from statistics import NormalDist

import numpy as np
import pytest
import torch

from iclr25.llm.lm import ByteTokenizer, TinyLlama, TinyLlamaConfig
from iclr25.llm.minkpp import MIAResult, evaluate_mia, mia_metrics, roc_curve
from iclr25.llm.minkpp.metrics import _bootstrap

TEXTS = ("to be or not", "that is the question", "whether tis", "nobler in the mind", "to suffer", "the slings")


def _pico() -> TinyLlama:
    """A tiny byte-level model (one shared size for every evaluate_mia test)."""
    return TinyLlama(TinyLlamaConfig.preset("pico", vocab_size=256, max_seq_len=64))


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


def test_fpr95_tpr05_read_the_exact_operating_points():
    # 20 members, 20 non-members: FPR steps of exactly 0.05 and a TPR of exactly 0.95 occur, so a
    # strict "FPR < 5 %" or "TPR > 95 %" (or a dropped collinear point) reads a different point.
    # Descending scores: P×5 N P×5 N P×9 N×3 P N×15. ROC: (0, .25) (.05, .25) (.05, .5) (.1, .5)
    # (.1, .95) (.25, .95) (.25, 1) (1, 1).
    y = np.array([1] * 5 + [0] + [1] * 5 + [0] + [1] * 9 + [0] * 3 + [1] + [0] * 15)
    s = np.arange(len(y), 0, -1).astype(float)
    m = mia_metrics(s, y)
    assert m["tpr05"] == 0.5  # last point with FPR <= .05; "< .05" gives .25
    assert m["fpr95"] == 0.1  # first point with TPR >= .95; "> .95" gives .25
    # non-members ranked below 5, 10, 19, 19, 19 and 15 × 20 members
    assert m["auroc"] == pytest.approx((5 + 10 + 3 * 19 + 15 * 20) / 400, abs=1e-12)
    # Ties: 10 members, 20 non-members; P×4, then two tied (N, P) pairs, P×4, N×18. The tied pairs
    # give collinear points (0, .4) (.05, .5) (.1, .6); sklearn's default curve drops the middle one
    # and would read TPR@5%FPR = .4.
    y = np.array([1] * 4 + [0, 1, 0, 1] + [1] * 4 + [0] * 18)
    s = np.array([12.0, 11, 10, 9, 8, 8, 7, 7, 6, 5, 4, 3] + [2.0] * 18)
    m = mia_metrics(s, y)
    assert m["tpr05"] == 0.5
    assert m["fpr95"] == 0.1


@pytest.mark.parametrize("level", [0.95, 0.8])
def test_bootstrap_interval_width_matches_exact_bootstrap_variance(level):
    # AUROC is the two-sample U-statistic (1/mn) Σ psi(x_i, y_j), psi = 1[x > y] + ½ 1[x = y]. Under
    # stratified resampling (m members, n non-members, with replacement) its variance is exactly
    #   (Var psi + (n − 1) Var_i psi(x_i, ·) + (m − 1) Var_j psi(·, y_j)) / (mn)
    # (empirical variances, ddof 0). The percentile interval of a near-normal statistic spans
    # 2 z sd; the Monte Carlo error of that width from B replicates is what the tolerance allows.
    rng = np.random.default_rng(0)
    m = n = 100
    x, y = rng.normal(1.0, 1.0, m), rng.normal(0.0, 1.0, n)
    psi = (x[:, None] > y[None]) + 0.5 * (x[:, None] == y[None])
    sd = np.sqrt((psi.var() + (n - 1) * psi.mean(1).var() + (m - 1) * psi.mean(0).var()) / (m * n))
    B = 2000
    ci = _bootstrap(np.r_[x, y], np.r_[np.ones(m, int), np.zeros(n, int)], B, np.random.default_rng(1), level)
    lo, hi = ci["auroc_ci"]
    assert lo < psi.mean() < hi
    z, q = NormalDist().inv_cdf((1 + level) / 2), (1 - level) / 2
    # Relative standard error of the width: sqrt(2 q(1−q)/B) / (phi(z) · 2z), each end a sample quantile.
    mc_rel = np.sqrt(2 * q * (1 - q) / B) / NormalDist().pdf(z) / (2 * z)
    assert (hi - lo) == pytest.approx(2 * z * sd, rel=4 * mc_rel)
    assert set(ci) == {"auroc_ci", "fpr95_ci", "tpr05_ci"}


@pytest.mark.parametrize(
    ("labels", "match"), [([1, 1, 1, 1], "both classes"), ([0, 1, 2, 1], "binary"), ([0, 1, 0], "equal length")]
)
def test_bad_labels_raise(labels, match):
    with pytest.raises(ValueError, match=match):
        mia_metrics([0.1, 0.2, 0.3, 0.4], labels)


def test_evaluate_mia_runs_and_matches_metrics():
    torch.manual_seed(0)
    model = _pico()
    tok = ByteTokenizer()
    texts = list(TEXTS)
    labels = [1, 0, 1, 0, 1, 0]
    res = evaluate_mia(model, tok, texts, labels, ks=(0.2, 0.5), batch_size=4, n_bootstrap=50)
    assert isinstance(res, MIAResult)
    assert set(res.metrics) == {"loss", "zlib", "mink@0.2", "mink++@0.2", "mink@0.5", "mink++@0.5"}
    for name, m in res.metrics.items():
        assert m["auroc"] == pytest.approx(mia_metrics(res.scores[name], labels)["auroc"])
        lo, hi = m["auroc_ci"]
        assert 0.0 <= lo <= hi <= 1.0
    assert "mink++@0.2" in res.table()
    assert res.auroc("mink++@0.2") == res.metrics["mink++@0.2"]["auroc"]
    with pytest.raises(ValueError, match="at least 2"):
        evaluate_mia(model, tok, ["x", "abc"], [1, 0], n_bootstrap=0)
    with pytest.raises(ValueError, match="at least 2"):
        evaluate_mia(model, tok, ["", "abc"], [1, 0], n_bootstrap=0)
    with pytest.raises(ValueError, match="both classes"):
        evaluate_mia(model, tok, ["ab", "abc"], [1, 1], n_bootstrap=0)
    with pytest.raises(ValueError, match="methods"):
        evaluate_mia(model, tok, ["ab", "abc"], [1, 0], methods=("minkpp",))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"labels": [0, 2, 1]}, "binary"),
        ({"labels": [0, 0, 0]}, "both classes"),
        ({"ks": (0.2, 0.0)}, "k must"),
        ({"ks": (1.5,)}, "k must"),
        ({"max_length": -1}, "max_length"),
        ({"max_length": 1}, "max_length"),
    ],
)
def test_evaluate_mia_bad_input_raises(kwargs, match):
    torch.manual_seed(0)
    model = _pico()
    args = {"texts": ["ab", "abc", "cd"], "labels": [0, 1, 1], "n_bootstrap": 0} | kwargs
    texts, labels = args.pop("texts"), args.pop("labels")
    with pytest.raises(ValueError, match=match):
        evaluate_mia(model, ByteTokenizer(), texts, labels, **args)


def test_evaluate_mia_max_length_truncates():
    torch.manual_seed(0)
    model = _pico()
    tok = ByteTokenizer()
    texts, labels = ["to be or not", "that is the"], [1, 0]
    cut = evaluate_mia(model, tok, texts, labels, methods=("loss",), max_length=4, n_bootstrap=0)
    short = evaluate_mia(model, tok, [t[:4] for t in texts], labels, methods=("loss",), n_bootstrap=0)
    np.testing.assert_allclose(cut.scores["loss"], short.scores["loss"], rtol=1e-6)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_scores_are_a_value_error(bad):
    # A bad value of an argument: ValueError (was FloatingPointError), naming the argument.
    with pytest.raises(ValueError, match="scores must be finite"):
        mia_metrics([0.1, bad, 0.3, 0.4], [0, 1, 0, 1])
    with pytest.raises(ValueError, match="scores must be finite"):
        roc_curve(np.array([0.1, bad]), np.array([0, 1]))


def test_evaluate_mia_text_arguments():
    torch.manual_seed(0)
    model = _pico()
    with pytest.raises(ValueError, match="texts and labels must be sequences of equal length; got 3 and 2"):
        evaluate_mia(model, ByteTokenizer(), ["ab", "cd", "ef"], [1, 0], n_bootstrap=0)
    with pytest.raises(TypeError, match="texts must be strings; got bytes"):
        evaluate_mia(model, ByteTokenizer(), ["ab", b"cd"], [1, 0], n_bootstrap=0)


def test_bootstrap_intervals_do_not_depend_on_the_other_methods_or_their_order():
    # One generator was shared by all methods in turn: at the same seed, ks=(0.2, 0.5) and
    # ks=(0.5, 0.2) gave different intervals for the same method, as did asking for one method alone.
    torch.manual_seed(0)
    model = _pico()
    tok = ByteTokenizer()
    texts = list(TEXTS)
    labels = [1, 0, 1, 0, 1, 1]
    a = evaluate_mia(model, tok, texts, labels, ks=(0.2, 0.5), n_bootstrap=40, seed=5)
    b = evaluate_mia(model, tok, texts, labels, ks=(0.5, 0.2), n_bootstrap=40, seed=5)
    alone = evaluate_mia(model, tok, texts, labels, methods=("mink++",), ks=(0.5,), n_bootstrap=40, seed=5)
    assert a.metrics == b.metrics
    assert alone.metrics["mink++@0.5"] == a.metrics["mink++@0.5"]
    # paired: every method is resampled with the indices a fresh generator of the seed draws
    y = np.asarray(labels)
    for name, s in a.scores.items():
        want = _bootstrap(s, y, 40, np.random.default_rng(5), 0.95)
        assert {k: a.metrics[name][k] for k in want} == want


def test_bfloat16_score_tensors_are_accepted():
    # numpy has no bfloat16: np.asarray raised "Got unsupported ScalarType BFloat16".
    g = torch.Generator().manual_seed(0)
    scores = torch.randint(-8, 8, (20,), generator=g) / 4  # quarters in [-2, 2) are exact in bf16
    labels = torch.tensor([0, 1] * 10)
    want = mia_metrics(scores.double(), labels)
    assert mia_metrics(scores.bfloat16(), labels) == want
    for got, ref in zip(roc_curve(scores.bfloat16(), labels), roc_curve(scores.double(), labels), strict=True):
        np.testing.assert_array_equal(got, ref)
