"""Property tests derived from the mathematics of Min-K%++ and its metrics (hypothesis, derandomised).

Each property follows from the definitions alone (paper Eq. 3-4, the official ``run.py`` count and
the ROC's definition as a rank statistic), not from the code's own output. Float64 inputs keep
the round-off bounds tight: a sum of ``n`` terms of magnitude at most ``M`` is off by at most about
``n · eps · M`` (``eps`` = 2.2e-16), and dividing by ``sigma`` scales that by ``1 / sigma``.
"""

import itertools
import math

import numpy as np
import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from iclr25.llm.minkpp import mia_metrics, min_k_mean, roc_curve, score_all, token_stats

EPS = torch.finfo(torch.float64).eps
PROPS = settings(derandomize=True, deadline=None, max_examples=100)


def _roundoff(n_terms: int, magnitude: float, sigma: float = 1.0) -> float:
    # a generous constant (16) over the n·eps·M bound of a float64 sum, divided by sigma when the
    # quantity is a standardised score
    return 16 * n_terms * EPS * max(magnitude, 1.0) / sigma


# ---------------------------------------------------------------------------------------------
# token statistics: s(z) = (log p(z) − mu) / sigma is the standardisation of log p(Z), Z ~ p
# ---------------------------------------------------------------------------------------------


@PROPS
@given(
    vals=st.lists(st.floats(-8, 8, allow_nan=False, width=64), min_size=2, max_size=40),
    n_masked=st.integers(0, 4),
    shift=st.floats(-50, 50, allow_nan=False, width=64),
    seed=st.integers(0, 2**16),
)
def test_token_score_is_the_standardisation_of_log_p_under_p(vals, n_masked, shift, seed):
    # With p = softmax(z), mu = E_p[log p] and sigma² = Var_p[log p], the token score s(z) is the
    # z-score of the random variable log p(Z), Z ~ p. Hence, exactly:
    #   Σ_z p(z) = 1, log p(a) − log p(b) = z_a − z_b (softmax), Σ_z p(z) s(z) = 0,
    #   Σ_z p(z) s(z)² = 1, and (Cauchy-Schwarz on the other tokens) s(z)² ≤ (1 − p(z)) / p(z),
    # so the most likely token has s ≥ 0 and the least likely s ≤ 0. Masked (−inf) logits carry no
    # mass and change nothing; relabelling the vocabulary permutes ell and leaves mu, sigma alone.
    z = torch.tensor(vals + [-math.inf] * n_masked, dtype=torch.float64) + shift
    perm = torch.randperm(len(z), generator=torch.Generator().manual_seed(seed))
    z = z[perm]
    V = len(z)
    fin = torch.isfinite(z)
    ell, mu, sigma = token_stats(z.expand(V, V), torch.arange(V))
    sd = float(sigma[0])
    assume(sd > 0.05)  # away from the 1e-6 floor (a nearly uniform row)
    M = float(z[fin].abs().max()) + math.log(V)
    tol, tol_s = _roundoff(V, M), _roundoff(V, M, sd)
    # one distribution in every row, whichever token is the target
    assert float((mu - mu[0]).abs().max()) <= tol and float((sigma - sigma[0]).abs().max()) <= tol

    assert torch.all(ell[~fin] == -math.inf)
    p = ell[fin].exp()
    assert abs(float(p.sum()) - 1.0) <= tol
    torch.testing.assert_close(ell[fin] - ell[fin][0], z[fin] - z[fin][0], atol=tol, rtol=0)

    s = (ell[fin] - mu[0]) / sd
    assert abs(float((p * s).sum())) <= tol_s
    assert abs(float((p * s * s).sum()) - 1.0) <= tol_s
    # two-level rows attain the bound: compare with the errors of s (tol_s) and of p (relative tol)
    assert bool((s.square() <= (1 - p) / p * (1 + 2 * tol) + 2 * s.abs() * tol_s + tol_s**2).all())
    assert float(s[p.argmax()]) >= -tol_s and float(s[p.argmin()]) <= tol_s

    # relabel the vocabulary (token i becomes token relabel[i]): ell follows its token, mu and
    # sigma are functions of the multiset of probabilities and do not move
    relabel = torch.randperm(V, generator=torch.Generator().manual_seed(seed + 1))
    ell2, mu2, sigma2 = token_stats(z[relabel].expand(V, V), torch.arange(V))
    torch.testing.assert_close(ell2, ell[relabel], atol=tol, rtol=0)
    torch.testing.assert_close(mu2, mu, atol=tol, rtol=0)
    torch.testing.assert_close(sigma2, sigma, atol=tol, rtol=0)


@PROPS
@given(
    V=st.integers(2, 60),
    m_frac=st.floats(0, 1, width=64),
    q=st.floats(0.02, 0.98, width=64),
    n_masked=st.integers(0, 3),
    shift=st.floats(-30, 30, allow_nan=False, width=64),
    seed=st.integers(0, 2**16),
)
def test_two_level_distribution_closed_form(V, m_frac, q, n_masked, shift, seed):
    # m tokens share mass q (log-prob a = log(q/m)), the other V − m share 1 − q (b = log((1−q)/(V−m))).
    # log p(Z) is then a two-point variable, so with L = a − b:
    #   mu = q a + (1 − q) b,  sigma = sqrt(q (1 − q)) |L|,
    #   s(group A) = sign(L) sqrt((1 − q)/q),  s(group B) = −sign(L) sqrt(q/(1 − q)),
    # whatever V and m are (the Cantelli bound of the previous test, attained).
    m = min(V - 1, 1 + int(m_frac * (V - 1)))
    a, b = math.log(q / m), math.log((1 - q) / (V - m))
    L = a - b
    assume(abs(L) > 0.05)  # sigma well above the 1e-6 floor
    z = torch.tensor([a] * m + [b] * (V - m) + [-math.inf] * n_masked, dtype=torch.float64) + shift
    group_a = torch.tensor([True] * m + [False] * (V - m + n_masked))
    perm = torch.randperm(len(z), generator=torch.Generator().manual_seed(seed))
    z, group_a = z[perm], group_a[perm]
    fin = torch.isfinite(z)
    n = len(z)
    ell, mu, sigma = token_stats(z.expand(n, n), torch.arange(n))

    mu_true = q * a + (1 - q) * b
    sigma_true = math.sqrt(q * (1 - q)) * abs(L)
    M = abs(shift) + abs(a) + abs(b) + math.log(n)
    tol = _roundoff(n, M)
    assert float((mu - mu_true).abs().max()) <= tol
    assert float((sigma - sigma_true).abs().max()) <= tol
    s = (ell - mu) / sigma
    tol_s = _roundoff(n, M, sigma_true)
    want_a = math.copysign(math.sqrt((1 - q) / q), L)
    want_b = -math.copysign(math.sqrt(q / (1 - q)), L)
    assert float((s[group_a] - want_a).abs().max()) <= tol_s
    assert float((s[fin & ~group_a] - want_b).abs().max()) <= tol_s
    assert torch.all(s[~fin] == -math.inf)  # masked tokens: log p = −inf, the lowest possible score


# ---------------------------------------------------------------------------------------------
# Min-K% aggregation: mean of the max(1, ⌊k·n⌋) smallest valid entries (official run.py count)
# ---------------------------------------------------------------------------------------------


@st.composite
def _rows(draw):
    T = draw(st.integers(1, 12))
    B = draw(st.integers(1, 3))
    vals = draw(st.lists(st.floats(-100, 100, allow_nan=False, width=64), min_size=B * T, max_size=B * T))
    valid = draw(st.lists(st.booleans(), min_size=B * T, max_size=B * T))
    values = torch.tensor(vals, dtype=torch.float64).reshape(B, T)
    valid = torch.tensor(valid).reshape(B, T)
    valid[:, 0] |= ~valid.any(-1)  # at least one valid position per row
    return values, valid


@PROPS
@given(
    rows=_rows(),
    ks=st.lists(st.floats(0.01, 1.0, width=64), min_size=1, max_size=4),
    junk=st.sampled_from([0.0, -1e30, 1e30, math.inf, -math.inf]),
)
def test_min_k_mean_is_the_mean_of_the_smallest_and_monotone_in_k(rows, ks, junk):
    # Brute force from the definition; plus the theorems it implies: the mean of the j smallest
    # values is non-decreasing in j (each added value is ≥ all kept ones), so Min-K% is
    # non-decreasing in k and lies between the row minimum (k → 0) and the row mean (k = 1).
    # Entries at invalid (padded) positions, whatever they hold, cannot matter, and the order of the
    # positions cannot either.
    values, valid = rows
    B, T = values.shape
    tol = _roundoff(T, float(values.abs().max()))
    ks = sorted({*ks, 0.1, 0.2, 0.5, 1.0})
    outs = []
    for k in ks:
        got = min_k_mean(values, valid, k)
        junked = min_k_mean(values.masked_fill(~valid, junk), valid, k)
        perm = torch.randperm(T, generator=torch.Generator().manual_seed(len(outs)))
        shuffled = min_k_mean(values[:, perm], valid[:, perm], k)
        for i in range(B):
            row = sorted(values[i][valid[i]].tolist())
            j = max(1, int(k * len(row)))
            want = sum(row[:j]) / j
            assert abs(float(got[i]) - want) <= tol
            assert row[0] - tol <= float(got[i]) <= sum(row) / len(row) + tol
        assert float((junked - got).abs().max()) <= tol
        assert float((shuffled - got).abs().max()) <= tol
        outs.append(got)
    for lo, hi in itertools.pairwise(outs):
        assert bool((lo <= hi + tol).all())


# ---------------------------------------------------------------------------------------------
# Metrics: the ROC (hence AUROC, FPR@95%TPR, TPR@5%FPR) is a rank statistic
# ---------------------------------------------------------------------------------------------


@st.composite
def _labelled(draw):
    n = draw(st.integers(2, 40))
    s = draw(st.lists(st.integers(0, 6), min_size=n, max_size=n))  # a small range: many ties
    y = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    y[0], y[1] = 0, 1
    return np.array(s, dtype=np.float64), np.array(y)


@PROPS
@given(data=_labelled(), seed=st.integers(0, 2**16))
def test_roc_metrics_are_rank_statistics(data, seed):
    # AUROC = P(S+ > S−) + ½ P(S+ = S−) (Mann-Whitney), computed here pair by pair. It and the ROC
    # depend only on the ranking with ties: a strictly increasing transform of the scores and a
    # reordering of the samples change no metric; reversing the ranking (−s) or swapping the labels
    # gives 1 − AUROC, and doing both gives AUROC back.
    s, y = data
    pos, neg = s[y == 1], s[y == 0]
    mw = ((pos[:, None] > neg[None]).sum() + 0.5 * (pos[:, None] == neg[None]).sum()) / (len(pos) * len(neg))
    base = mia_metrics(s, y)
    tol = _roundoff(len(s), 1.0)
    assert base["auroc"] == pytest.approx(mw, abs=tol)

    rng = np.random.default_rng(seed)
    levels = np.sort(rng.normal(size=7) * 10.0 ** rng.integers(-3, 4))  # a random increasing map
    assume(np.all(np.diff(levels) > 0))
    for t in (levels[s.astype(int)], np.exp(s) + s**3):
        assert mia_metrics(t, y) == base
    order = rng.permutation(len(s))
    assert mia_metrics(s[order], y[order]) == base
    fpr, tpr, _ = roc_curve(s, y)
    fpr2, tpr2, _ = roc_curve(s[order], y[order])
    np.testing.assert_array_equal(fpr, fpr2)
    np.testing.assert_array_equal(tpr, tpr2)

    assert mia_metrics(-s, y)["auroc"] == pytest.approx(1 - mw, abs=tol)
    assert mia_metrics(s, 1 - y)["auroc"] == pytest.approx(1 - mw, abs=tol)
    assert mia_metrics(-s, 1 - y)["auroc"] == pytest.approx(mw, abs=tol)


# ---------------------------------------------------------------------------------------------
# End to end: the scores are functions of the text's next-token distributions only
# ---------------------------------------------------------------------------------------------


class _Bigram(torch.nn.Module):
    """A float64 bigram LM: logits of the next token = table[current] + offset[current]."""

    def __init__(self, table, offset):
        super().__init__()
        self.register_buffer("table", table)
        self.register_buffer("offset", offset)

    def forward(self, ids):
        return self.table[ids] + self.offset[ids][..., None]


@settings(derandomize=True, deadline=None, max_examples=40)
@given(
    V=st.integers(3, 12),
    lengths=st.lists(st.integers(2, 9), min_size=1, max_size=4),
    seed=st.integers(0, 2**16),
)
def test_scores_invariant_to_relabelling_context_shifts_and_batch_order(V, lengths, seed):
    # Loss, Min-K% and Min-K%++ read each position only through log p(· | context) and the observed
    # token. So, on a right-padded batch: adding any constant that depends on the context to every
    # logit (softmax is shift invariant) changes no score; renaming the tokens by a permutation pi
    # (table'[pi a, pi b] = table[a, b], ids' = pi(ids)) changes no score (token 0 is not special,
    # e.g. not a padding id); and reordering the texts in the batch reorders the scores.
    g = torch.Generator().manual_seed(seed)
    table = 2 * torch.randn(V, V, generator=g, dtype=torch.float64)
    T = max(lengths)
    ids = torch.randint(0, V, (len(lengths), T), generator=g)
    mask = (torch.arange(T) < torch.tensor(lengths)[:, None]).long()
    names = dict(methods=("loss", "mink", "mink++"), ks=(0.2, 0.5, 1.0), backend="reference")
    base = score_all(_Bigram(table, torch.zeros(V, dtype=torch.float64)), ids, mask, **names)
    offset = 50 * torch.randn(V, generator=g, dtype=torch.float64)
    # every next-token row of this table has sigma of order 1; bound the round-off by the smallest
    logp = torch.log_softmax(table, -1)
    sd_min = float((logp.exp() * (logp - (logp.exp() * logp).sum(-1, keepdim=True)) ** 2).sum(-1).sqrt().min())
    tol = _roundoff(V * T, float(table.abs().max() + offset.abs().max()) + math.log(V), sd_min)

    shifted = score_all(_Bigram(table, offset), ids, mask, **names)
    pi = torch.randperm(V, generator=g)
    inv = torch.argsort(pi)
    relabelled = score_all(_Bigram(table[inv][:, inv], torch.zeros(V, dtype=torch.float64)), pi[ids], mask, **names)
    order = torch.randperm(len(lengths), generator=g)
    reordered = score_all(_Bigram(table, torch.zeros(V, dtype=torch.float64)), ids[order], mask[order], **names)
    for name, v in base.items():
        assert torch.isfinite(v).all(), name
        for other, want in ((shifted, v), (relabelled, v), (reordered, v[order])):
            assert float((other[name] - want).abs().max()) <= tol, name
