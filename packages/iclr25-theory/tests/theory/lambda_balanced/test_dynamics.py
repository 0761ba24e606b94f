"""Exact Riccati solution vs gradient descent, long horizons, conservation, scalar mode (acceptance 2-5)."""

import math

import numpy as np
import pytest
import torch
from scipy.integrate import solve_ivp

from iclr25.theory.lambda_balanced import (
    exact_qqt,
    exact_trajectory,
    io_correlation,
    lambda_balanced_init,
    riccati_matrix,
    simulate_gd,
    split_qqt,
    whiten,
)


def _task(n_in, n_out, seed, P=20):
    gen = torch.Generator().manual_seed(seed)
    X = whiten(torch.randn(n_in, P, generator=gen, dtype=torch.float64))
    T = torch.randn(n_out, n_in, generator=gen, dtype=torch.float64)
    Y = T @ X
    return X, Y, io_correlation(X, Y), gen


def _gd_qqt(W1, W2, X, Y, dt, t):
    steps = round(t / dt)
    out = simulate_gd(W1, W2, X, Y, dt, steps, record_every=steps)
    Q = torch.cat([out["W1"].T, out["W2"]])
    return Q @ Q.T


@pytest.mark.parametrize("lam", [-1.0, 0.0, 1.0, 3.0])
def test_exact_matches_gd_and_error_is_first_order(lam):
    X, Y, syx, gen = _task(5, 3, seed=10)
    W1, W2 = lambda_balanced_init(lam, 5, 3, 3, scale=0.1, generator=gen)
    exact = exact_qqt(W1, W2, syx, lam, 3.0, X=X)
    errs = [
        float(torch.linalg.matrix_norm(_gd_qqt(W1, W2, X, Y, dt, 3.0) - exact) / torch.linalg.matrix_norm(exact))
        for dt in (2e-4, 1e-4)
    ]
    assert errs[1] <= 1e-4
    # Euler's global error is O(dt): halving dt must halve the error if the closed form is the flow.
    assert 1.8 <= errs[0] / errs[1] <= 2.2


@pytest.mark.parametrize("lam,shape", [(0.0, (5, 3, 3)), (1.0, (5, 3, 3)), (3.0, (5, 3, 3)), (-1.0, (3, 3, 5))])
def test_long_horizon_reaches_round_off(lam, shape):
    n_in, n_hidden, n_out = shape
    _X, _, syx, gen = _task(n_in, n_out, seed=11)
    W1, W2 = lambda_balanced_init(lam, n_in, n_hidden, n_out, scale=0.1, generator=gen)
    traj = exact_trajectory(W1, W2, syx, lam, torch.tensor([0.0, 30.0, 100.0]))
    for v in traj.values():
        assert bool(torch.isfinite(v).all())
    assert float(traj["loss"][-1]) <= 1e-20


def test_late_time_loss_decays_at_the_slowest_linearised_rate():
    """At λ = 0 with Ni > rank(Σyx), the error along (u_min, ker Σyx) relaxes at rate s_min.

    Near the fixed point, d(W2W1)/dt = W2W2ᵀE + E W1ᵀW1 with E = Σyx − W2W1; at λ = 0 W1ᵀW1 vanishes on
    ker Σyx, so that block of E decays only through W2W2ᵀ, whose smallest eigenvalue is s_min. The loss
    (quadratic in E) therefore decays as exp(−2 s_min t) once faster modes are gone — an independent,
    long-horizon check of the stepped Riccati solution (the next rate is ≥ 4 s_min, so the correction
    over [60, 100] is below exp(−2 s_min · 60) ≈ 1e-13 relative).
    """
    X, _, syx, gen = _task(5, 3, seed=0)
    s_min = float(torch.linalg.svdvals(syx)[-1])
    W1, W2 = lambda_balanced_init(0.0, 5, 3, 3, scale=1e-3, generator=gen)
    loss = exact_trajectory(W1, W2, syx, 0.0, torch.tensor([60.0, 100.0], dtype=torch.float64), X=X)["loss"]
    assert float(loss[-1]) > 1e-27  # still far above round-off, so the rate is measurable
    rate = math.log(float(loss[0]) / float(loss[1])) / 40.0
    assert rate == pytest.approx(2 * s_min, rel=1e-3)


def test_one_shot_evaluation_breaks_down_where_stepping_does_not():
    _X, _, syx, gen = _task(5, 3, seed=11)
    W1, W2 = lambda_balanced_init(1.0, 5, 3, 3, scale=0.1, generator=gen)
    try:
        loss = float(exact_trajectory(W1, W2, syx, 1.0, [100.0], max_step=math.inf)["loss"][-1])
    except RuntimeError:
        loss = math.nan
    assert not loss <= 1e-20  # the reason for the stepped re-factorisation
    assert float(exact_trajectory(W1, W2, syx, 1.0, [100.0])["loss"][-1]) <= 1e-20


@pytest.mark.parametrize("lam,shape", [(2.0, (5, 3, 3)), (0.0, (5, 3, 3)), (-1.5, (3, 3, 5)), (0.7, (2, 2, 4))])
def test_trace_conservation(lam, shape):
    n_in, n_hidden, n_out = shape
    _, _, syx, gen = _task(n_in, n_out, seed=12)
    W1, W2 = lambda_balanced_init(lam, n_in, n_hidden, n_out, scale=0.5, generator=gen)
    traj = exact_trajectory(W1, W2, syx, lam, torch.linspace(0, 20, 41, dtype=torch.float64))
    gap = torch.diagonal(traj["W2W2t"], dim1=-2, dim2=-1).sum(-1) - torch.diagonal(traj["W1tW1"], dim1=-2, dim2=-1).sum(
        -1
    )
    assert float((gap - lam * n_hidden).abs().max()) <= 1e-8


def test_riccati_equation_by_finite_differences():
    _, _, syx, gen = _task(4, 3, seed=13)
    lam, t, h = 0.8, 1.3, 1e-4
    W1, W2 = lambda_balanced_init(lam, 4, 3, 3, scale=0.3, generator=gen)
    q = exact_trajectory(W1, W2, syx, lam, torch.tensor([t - h, t, t + h], dtype=torch.float64), tau=2.0)["qqt"]
    deriv = (q[2] - q[0]) / (2 * h)
    F = riccati_matrix(syx, lam)
    rhs = (F @ q[1] + q[1] @ F - q[1] @ q[1]) / 2.0  # τ = 2
    # central differences: O(h²) truncation plus O(eps/h) round-off
    assert float((deriv - rhs).abs().max()) <= 1e-7


@pytest.mark.parametrize("lam", [-2.0, 0.0, 0.5, 3.0])
@pytest.mark.parametrize("s", [1.5, -0.8])
def test_scalar_mode_matches_ode(lam, s):
    tau, a0 = 1.5, 0.01
    target = torch.tensor([[s]], dtype=torch.float64)
    W1, W2 = lambda_balanced_init(lam, 1, 1, 1, scale=a0, target=target, aligned=True)
    times = np.linspace(0.0, 12.0, 25)
    traj = exact_trajectory(W1, W2, target, lam, torch.tensor(times), tau=tau)
    a_exact = traj["W2W1"][:, 0, 0].numpy()
    # aligned: a starts at sign(s)·a0 and obeys τ ȧ = (s − a) sqrt(λ² + 4a²)
    sol = solve_ivp(
        lambda _, a: (s - a) * np.sqrt(lam**2 + 4 * a**2) / tau,
        (0.0, 12.0),
        [math.copysign(a0, s)],
        t_eval=times,
        rtol=1e-12,
        atol=1e-14,
        method="DOP853",
    )
    assert np.abs(a_exact - sol.y[0]).max() <= 1e-8


def test_batched_equals_loop_and_split_blocks():
    _X, _, syx, gen = _task(5, 3, seed=14)
    lams = torch.tensor([0.0, 0.5, 2.0], dtype=torch.float64)
    pairs = [lambda_balanced_init(float(l), 5, 3, 3, scale=0.05, generator=gen) for l in lams]
    W1 = torch.stack([p[0] for p in pairs])
    W2 = torch.stack([p[1] for p in pairs])
    times = torch.tensor([0.0, 1.0, 5.0], dtype=torch.float64)
    batched = exact_trajectory(W1, W2, syx, lams, times)
    assert batched["qqt"].shape == (3, 3, 8, 8)
    for i, lam in enumerate(lams.tolist()):
        single = exact_trajectory(W1[i], W2[i], syx, lam, times)
        assert torch.allclose(batched["qqt"][i], single["qqt"], atol=1e-13)
    # at t = 0 the blocks are the initial readouts
    blocks = split_qqt(batched["qqt"][:, 0], 5)
    assert torch.allclose(blocks["W2W1"], W2 @ W1, atol=1e-15)
    assert torch.allclose(blocks["W1tW1"], W1.mT @ W1, atol=1e-15)
    assert torch.allclose(blocks["W2W2t"], W2 @ W2.mT, atol=1e-15)


def test_float32_inputs_keep_dtype():
    _X, _, syx, gen = _task(5, 3, seed=15)
    W1, W2 = lambda_balanced_init(1.0, 5, 3, 3, scale=0.1, generator=gen, dtype=torch.float32)
    q32 = exact_qqt(W1, W2, syx.float(), 1.0, 2.0)
    q64 = exact_qqt(W1.double(), W2.double(), syx, 1.0, 2.0)
    assert q32.dtype == torch.float32
    assert torch.allclose(q32.double(), q64, atol=1e-5)
