"""Binarizers: closed forms, monotone refinement, brute-force minimisers, bad input."""

import itertools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from iclr25.llm.arb import binarize, nearest_pair, output_error


def heavy(seed, n=64, m=96, df=3.0):
    g = torch.Generator().manual_seed(seed)
    t = torch.distributions.StudentT(torch.tensor(df))
    torch.manual_seed(seed)
    return t.sample((n, m)) * torch.exp(0.5 * torch.randn(m, generator=g))


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), order=st.sampled_from([1, 2]), df=st.floats(2.0, 10.0))
def test_arb_trace_non_increasing_and_below_plain(seed, order, df):
    W = heavy(seed, 32, 48, df).double()
    plain = binarize(W, method="plain", order=order)
    res = binarize(W, method="arb", order=order, iters=15)
    tr = res.error_trace
    assert tr[0] == pytest.approx(plain.error_trace[0], rel=1e-12)
    assert all(b <= a * (1 + 1e-10) for a, b in itertools.pairwise(tr))
    assert float(((W - res.W_hat) ** 2).sum()) == pytest.approx(tr[-1], rel=1e-9)
    assert tr[-1] <= plain.error_trace[0] * (1 + 1e-12)


def test_plain_is_billm_formula():
    W = heavy(0)
    res = binarize(W, method="plain", order=1)
    mu = W.mean(1, keepdim=True)
    alpha = (W - mu).abs().mean(1, keepdim=True)
    B = torch.where(W - mu >= 0, 1.0, -1.0)
    torch.testing.assert_close(res.W_hat, alpha * B + mu, rtol=0, atol=1e-6)
    # order 2 = binarize the residual the same way (BiLLM's high-order residual)
    res2 = binarize(W, method="plain", order=2)
    R = W - (alpha * B + mu)
    mu2 = R.mean(1, keepdim=True)
    a2 = (R - mu2).abs().mean(1, keepdim=True)
    torch.testing.assert_close(
        res2.W_hat, alpha * B + mu + a2 * torch.where(R - mu2 >= 0, 1.0, -1.0) + mu2, atol=1e-5, rtol=0
    )


def test_sign_zero_is_plus_one():
    W = torch.zeros(3, 4)
    res = binarize(W, method="arb")
    assert set(res.params["B"].unique().tolist()) == {1.0}


def test_alpha_update_is_least_squares():
    # one iteration: μ, then α = LS fit to W − μ given the previous (plain) B, then B
    W = heavy(1, 8, 20).double()
    mask = torch.rand(8, 20, generator=torch.Generator().manual_seed(0)) > 0.3
    res = binarize(W, mask=mask, method="arb", iters=1)
    p = res.params
    for i in range(8):
        idx = mask[i]
        w = W[i, idx]
        b = torch.where(w - w.mean() >= 0, 1.0, -1.0).double()[:, None]
        target = (W[i, idx] - p["mu"][0, i])[:, None]
        sol = torch.linalg.lstsq(b, target).solution
        assert float(sol) == pytest.approx(float(p["alpha"][0, i]), abs=1e-12)


def test_arb_rc_beats_plain_on_column_scaled_matrix():
    g = torch.Generator().manual_seed(0)
    r = torch.exp(0.5 * torch.randn(256, 1, generator=g))
    c = torch.exp(0.5 * torch.randn(1, 512, generator=g))
    W = r * torch.randn(256, 512, generator=g) * c
    plain = binarize(W, method="plain").error_trace[-1]
    rc = binarize(W, method="arb_rc").error_trace
    assert all(b <= a * (1 + 1e-6) for a, b in itertools.pairwise(rc))
    assert rc[-1] <= 0.9 * plain


def aniso(seed, m, n_tok=400):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n_tok, m, generator=g, dtype=torch.float64) * torch.logspace(-1, 0.5, m, dtype=torch.float64)
    X = X @ (torch.eye(m, dtype=torch.float64) + torch.randn(m, m, generator=g, dtype=torch.float64) / m**0.5)
    return X.t() @ X / n_tok


def test_arb_x_output_error_below_arb():
    W = heavy(2, 64, 96).double()
    S = aniso(0, 96)
    e_arb = float(output_error(W - binarize(W, method="arb").W_hat, S))
    e_x = float(output_error(W - binarize(W, method="arb_x", S=S).W_hat, S))
    assert e_x <= e_arb
    tr = binarize(W, method="arb_x", S=S, order=2).error_trace
    xs = binarize(W, method="arb_x", S=S, order=2).x_start
    assert all(b <= a * (1 + 1e-10) for a, b in zip(tr[xs:], tr[xs + 1 :], strict=False))


@pytest.mark.parametrize("order", [1, 2])
def test_arb_x_closed_form_matches_lbfgs(order):
    W = heavy(3, 4, 8).double()
    S = aniso(1, 8, 50)
    mask = torch.ones(4, 8, dtype=torch.bool)
    mask[0, :3] = False
    # alternating exact coordinate steps converge linearly: run them long enough to sit at the minimiser
    res = binarize(W, mask=mask, method="arb_x", S=S, order=order, iters=3, x_iters=3000)
    B, M = res.params["B"], mask.double()
    mu = torch.zeros(4, dtype=torch.float64, requires_grad=True)
    al = res.params["alpha"].clone().mul(0.5).requires_grad_(True)
    opt = torch.optim.LBFGS([mu, al], lr=1, max_iter=500, tolerance_grad=1e-14, tolerance_change=1e-16)

    def loss():
        opt.zero_grad()
        R = (W - (al[:, :, None] * B).sum(0) - mu[:, None]) * M
        val = output_error(R, S)
        val.backward()
        return val

    opt.step(loss)
    torch.testing.assert_close(res.params["mu"][0], mu.detach(), atol=1e-5, rtol=0)
    torch.testing.assert_close(res.params["alpha"], al.detach(), atol=1e-5, rtol=0)


def test_order2_joint_update_is_exhaustive_search():
    g = torch.Generator().manual_seed(0)
    D = torch.randn(50, 40, generator=g, dtype=torch.float64)
    c1 = torch.randn(50, 1, generator=g, dtype=torch.float64)
    c2 = torch.randn(1, 40, generator=g, dtype=torch.float64) * 2
    B1, B2 = nearest_pair(D, c1, c2)
    best = None
    for s1, s2 in itertools.product([-1.0, 1.0], repeat=2):
        e = (D - (c1 * s1 + c2 * s2)).abs()
        best = e if best is None else torch.minimum(best, e)
    torch.testing.assert_close((D - (c1 * B1 + c2 * B2)).abs(), best, atol=1e-12, rtol=0)


def test_empty_mask_row_gives_zero_scales():
    W = heavy(4, 6, 10)
    mask = torch.ones(6, 10, dtype=torch.bool)
    mask[2] = False
    for meth in ("plain", "arb", "arb_rc"):
        res = binarize(W, mask=mask, method=meth, order=2)
        assert torch.isfinite(res.W_hat).all()
        assert (res.W_hat[2] == 0).all()
        assert (res.params["alpha"][:, 2] == 0).all()
        assert (res.W_hat[~mask] == 0).all()


def test_bad_input():
    W = heavy(5, 4, 6)
    with pytest.raises(ValueError, match="NaN"):
        binarize(W.clone().index_fill_(0, torch.tensor([0]), float("nan")))
    with pytest.raises(ValueError, match="NaN"):
        binarize(W.clone().index_fill_(0, torch.tensor([0]), float("inf")))
    with pytest.raises(TypeError, match="float"):
        binarize(torch.ones(4, 6, dtype=torch.int32))
    with pytest.raises(ValueError, match="iters"):
        binarize(W, iters=-1)
    with pytest.raises(ValueError, match="ARB-X needs calibration"):
        binarize(W, method="arb_x")
    with pytest.raises(ValueError, match="shape"):
        binarize(W, method="arb_x", S=torch.eye(5))
    S = torch.eye(6)
    S[0, 1] = 1.0
    with pytest.raises(ValueError, match="symmetric"):
        binarize(W, method="arb_x", S=S)
    with pytest.raises(ValueError, match="method"):
        binarize(W, method="nope")
