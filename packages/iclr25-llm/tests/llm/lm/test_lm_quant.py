import itertools

import pytest
import torch

from iclr25.llm.lm.quant import MinMaxQuantizer, fake_quant_per_token, gptq, rtn


def _problem(seed, rows=8, cols=8, n=32):
    g = torch.Generator().manual_seed(seed)
    W = torch.randn(rows, cols, generator=g, dtype=torch.float64)
    # correlated inputs make error compensation matter
    X = torch.randn(n, cols, generator=g, dtype=torch.float64) @ torch.randn(
        cols, cols, generator=g, dtype=torch.float64
    )
    H = 2 * X.T @ X / n
    return W, H


def _err(W, Q, H):
    D = W - Q
    return float(torch.trace(D @ H @ D.T))


def test_rtn_on_grid_and_error_bound():
    W, _ = _problem(0)
    for bits in (2, 3, 4):
        Q = rtn(W, bits)
        qz = MinMaxQuantizer(bits)
        scale, zero = qz.find_params(W)
        levels = Q / scale + zero
        torch.testing.assert_close(levels, levels.round(), atol=1e-9, rtol=0)
        assert int(levels.unique().numel()) <= 2**bits * W.shape[0]
        # round-to-nearest: at most half a step from the original, except values clipped... none here
        assert bool(((Q - W).abs() <= scale / 2 + 1e-12).all())
    Qg = rtn(W, 3, group_size=4)
    # each group of columns has its own grid: it is RTN of that block alone
    assert torch.equal(Qg[:, :4], rtn(W[:, :4], 3)) and torch.equal(Qg[:, 4:], rtn(W[:, 4:], 3))
    assert not torch.equal(Qg, rtn(W, 3))
    with pytest.raises(ValueError, match="group_size"):
        rtn(W, 3, group_size=3)
    with pytest.raises(ValueError, match="bits"):
        rtn(W, 0)


def test_gptq_with_identity_hessian_equals_rtn():
    W, _ = _problem(1, rows=8, cols=16)
    eye = torch.eye(16, dtype=torch.float64)
    for bits, sym in [(3, False), (4, True), (2, False)]:
        torch.testing.assert_close(
            gptq(W, eye, MinMaxQuantizer(bits, sym)), rtn(W, bits, symmetric=sym), atol=0, rtol=0
        )
    torch.testing.assert_close(gptq(W, eye, 3, group_size=4), rtn(W, 3, group_size=4), atol=0, rtol=0)
    # act_order permutes the columns; with H = I nothing is propagated and static groups come
    # from the original weights, so the result is still RTN
    for gs in (None, 4):
        torch.testing.assert_close(
            gptq(W, eye, 3, act_order=True, group_size=gs), rtn(W, 3, group_size=gs), atol=0, rtol=0
        )


def test_gptq_act_order_static_groups_stay_on_their_grids():
    W, H = _problem(5, rows=6, cols=8)
    Q = gptq(W, H, 3, act_order=True, group_size=4)
    qz = MinMaxQuantizer(3)
    for j in (0, 4):
        scale, zero = qz.find_params(W[:, j : j + 4])  # grid fixed from the original weights
        levels = Q[:, j : j + 4] / scale + zero
        torch.testing.assert_close(levels, levels.round(), atol=1e-9, rtol=0)
        assert bool((levels.round() >= 0).all() and (levels.round() <= qz.maxq).all())
    assert not torch.equal(Q, rtn(W, 3, group_size=4))  # errors were propagated


def _obq_reference(W, H, bits, percdamp=0.01):
    """Brute-force GPTQ: after fixing each column, re-solve the rest by a dense least-squares update."""
    cols = W.shape[1]
    H = H + percdamp * torch.diag(H).mean() * torch.eye(cols, dtype=H.dtype)
    qz = MinMaxQuantizer(bits)
    params = qz.find_params(W)
    cur = W.clone()
    Q = torch.zeros_like(W)
    for i in range(cols):
        Q[:, i : i + 1] = qz.quantize(cur[:, i : i + 1], *params).double()
        F_, R = list(range(i + 1)), list(range(i + 1, cols))
        if R:
            delta = W[:, F_] - Q[:, F_]  # minimise (W - W') H (W - W')ᵀ over W'_R
            cur[:, R] = W[:, R] + delta @ H[F_][:, R] @ torch.linalg.inv(H[R][:, R])
    return Q


@pytest.mark.parametrize("seed", range(3))
def test_gptq_matches_dense_reference(seed):
    W, H = _problem(seed)
    Q = gptq(W, H, 3, blocksize=3)  # a small block exercises the lazy batch updates
    torch.testing.assert_close(Q, _obq_reference(W, H, 3), atol=1e-8, rtol=0)


def test_gptq_layer_error_not_above_rtn_on_8x8_problems():
    # GPTQ is greedy: it is not below RTN on every single problem (measured: on 93.5% of 200
    # seeded 3-bit 8x8 problems), but across problems it must be clearly better and rarely worse
    ours, base = [], []
    for seed in range(50):
        W, H = _problem(seed)
        ours.append(_err(W, gptq(W, H, 3), H))
        base.append(_err(W, rtn(W, 3), H))
    wins = sum(o <= b + 1e-12 for o, b in zip(ours, base, strict=True))
    assert wins >= 45, f"GPTQ <= RTN on only {wins}/50 problems"
    assert sum(ours) < 0.8 * sum(base)


def test_gptq_not_worse_than_exhaustive_bound():
    # on a 1x4 problem with a 2-bit grid the exhaustive optimum lower-bounds GPTQ and RTN
    W, H = _problem(7, rows=1, cols=4)
    qz = MinMaxQuantizer(2)
    scale, zero = qz.find_params(W)
    grid = [scale * (q - zero) for q in range(4)]
    best = min(
        _err(W, torch.tensor([[float(g[0, 0]) for g in combo]], dtype=torch.float64), H)
        for combo in itertools.product(grid, repeat=4)
    )
    e_gptq, e_rtn = _err(W, gptq(W, H, 2, percdamp=0.0), H), _err(W, rtn(W, 2), H)
    assert best <= e_gptq + 1e-9 and e_gptq <= e_rtn + 1e-9


def test_gptq_act_order_and_dead_columns():
    W, H = _problem(3, cols=8)
    H[2, :] = 0
    H[:, 2] = 0
    Q = gptq(W, H, 4, act_order=True)
    assert torch.all(Q[:, 2] == 0)
    assert _err(W, Q, H) <= _err(W, rtn(W, 4), H) + 1e-9
    with pytest.raises(ValueError, match=r"\(8, 8\)"):
        gptq(W, torch.eye(4), 3)


def test_fake_quant_per_token():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 5, 16, generator=g)
    for bits in (4, 8):
        q = fake_quant_per_token(x, bits)
        scale = x.abs().amax(-1, keepdim=True) / (2 ** (bits - 1) - 1)
        assert bool(((q - x).abs() <= scale / 2 + 1e-6).all())
        levels = q / scale
        torch.testing.assert_close(levels, levels.round(), atol=1e-4, rtol=0)
    for bits in (1, 3):
        qa = fake_quant_per_token(x, bits, symmetric=False)
        lo, hi = x.amin(-1, keepdim=True), x.amax(-1, keepdim=True)
        scale = (hi - lo) / (2**bits - 1)
        zero = torch.round(-lo / scale)
        levels = qa / scale + zero
        torch.testing.assert_close(levels, levels.round(), atol=1e-4, rtol=0)
        assert bool((levels.round() >= 0).all() and (levels.round() <= 2**bits - 1).all())
        # float32 rounding of x / scale and back costs a few ulps of max |x| on top of half a step
        ulps = 8 * torch.finfo(x.dtype).eps * x.abs().amax()
        assert bool(((qa - x).abs() <= scale / 2 + ulps).all())
    assert fake_quant_per_token(x.bfloat16(), 4).dtype == torch.bfloat16
    # straight-through rounding: d(sum q)/dx = 1 for every element that is not its token's
    # max |x| (the scale depends on x only through that element; nothing clips below the max)
    xr = x.clone().requires_grad_(True)
    fake_quant_per_token(xr, 8).sum().backward()
    not_max = xr.abs() < xr.abs().amax(-1, keepdim=True)
    torch.testing.assert_close(xr.grad[not_max], torch.ones(int(not_max.sum())), atol=1e-6, rtol=0)
    assert torch.isfinite(xr.grad).all()
