import numpy as np
import pytest
import torch

from iclr25.rl.aihf import batched_soft_vi, tabular
from iclr25.rl.aihf.reference import batched_soft_vi_reference

GAMMA = 0.9


@pytest.fixture(scope="module")
def gw():
    return tabular.GridWorld(n=5, slip=0.1, n_features=6, seed=0)


def _table(gw, theta):
    return (torch.as_tensor(gw.phi) @ theta)[:, None].expand(gw.n_states, gw.n_actions)


def test_transitions_are_stochastic(gw):
    np.testing.assert_allclose(gw.P.sum(-1), 1.0, atol=1e-12)
    assert gw.P.shape == (25, 5, 25) and gw.phi.shape == (25, 6)


def test_gradient_identity_matches_autograd_through_soft_vi(gw):
    # Acceptance 1: ∇_θ Σ ρ_D log π_θ = (1/β)(Φ_D − Φ_πθ) with infinite-horizon occupancies on both sides.
    rng = np.random.default_rng(0)
    pi_e = tabular.soft_value_iteration(gw.P, _table(gw, torch.as_tensor(rng.normal(size=6))), GAMMA, 1.0, 300)[2]
    rho_d = tabular.occupancy(gw.P, pi_e, gw.mu0, GAMMA)
    for beta in (1.0, 0.5):
        theta = torch.tensor(rng.normal(size=6), requires_grad=True)
        pi = tabular.soft_value_iteration(gw.P, _table(gw, theta), GAMMA, beta, 300)[2]
        (auto,) = torch.autograd.grad((rho_d * torch.log(pi)).sum(), theta)
        rho_p = tabular.occupancy(gw.P, pi.detach(), gw.mu0, GAMMA)
        fm = ((rho_d - rho_p).sum(1)[:, None] * torch.as_tensor(gw.phi)).sum(0) / beta
        assert float((auto - fm).norm() / auto.norm()) < 1e-5


def test_soft_vi_fixed_point(gw):
    r = torch.as_tensor(np.random.default_rng(1).normal(size=(25, 5)))
    _, V, pi = tabular.soft_value_iteration(gw.P, r, GAMMA, 0.7, 250)
    # 0.9^250 ≈ 4e-12 contraction of an O(10) start error
    V2 = 0.7 * torch.logsumexp((r + GAMMA * torch.as_tensor(gw.P) @ V) / 0.7, 1)
    assert float((V2 - V).abs().max()) < 1e-9
    torch.testing.assert_close(pi.sum(1), torch.ones(25, dtype=torch.float64))


def test_finite_horizon_occupancy_mass(gw):
    pi = np.full((25, 5), 0.2)
    rho = tabular.occupancy(gw.P, pi, gw.mu0, GAMMA, horizon=30)
    assert abs(float(rho.sum()) - (1 - GAMMA**30) / (1 - GAMMA)) < 1e-12
    rho_inf = tabular.occupancy(gw.P, pi, gw.mu0, GAMMA)
    assert abs(float(rho_inf.sum()) - 1 / (1 - GAMMA)) < 1e-10


def test_occupancy_matches_monte_carlo(gw):
    pi = tabular.plan(gw, np.random.default_rng(2).normal(size=(25, 5)), GAMMA, 1.0)
    rho = tabular.occupancy(gw.P, pi, gw.mu0, GAMMA, horizon=10).numpy()
    segs = gw.rollouts(pi, 20000, 10, seed=3)
    mc = np.zeros_like(rho)
    for o, a in segs:
        np.add.at(mc, (o, a), GAMMA ** np.arange(10))
    mc /= len(segs)
    # per-cell MC error: std of a discounted count (<= 1/(1-γ)) over sqrt(20000)
    assert np.abs(mc - rho).max() < 4 * 10 / np.sqrt(20000)


def test_batched_reference_matches_single(gw):
    r = torch.as_tensor(np.random.default_rng(4).normal(size=(3, 25, 5)))
    V = batched_soft_vi(torch.as_tensor(gw.P), r, GAMMA, 0.5, 50, backend="reference")
    for b in range(3):
        Vb = tabular.soft_value_iteration(gw.P, r[b], GAMMA, 0.5, 50)[1]
        torch.testing.assert_close(V[b], Vb)


def test_batched_bad_input(gw):
    with pytest.raises(ValueError, match="r must be"):
        batched_soft_vi_reference(torch.as_tensor(gw.P), torch.zeros(2, 25, 4, dtype=torch.float64), 0.9, 1.0, 3)
    with pytest.raises(ValueError, match="gamma"):
        batched_soft_vi_reference(torch.as_tensor(gw.P), torch.zeros(2, 25, 5, dtype=torch.float64), 1.0, 1.0, 3)


@pytest.mark.triton
def test_triton_kernel_matches_reference():
    gw = tabular.GridWorld(n=3, slip=0.2, n_features=2, seed=1)
    P = torch.as_tensor(gw.P)
    r = torch.as_tensor(np.random.default_rng(5).normal(size=(2, 9, 5)))
    ref = batched_soft_vi(P, r, GAMMA, 0.5, 5, backend="reference")
    out = batched_soft_vi(P, r, GAMMA, 0.5, 5, backend="triton")
    assert float((out - ref).abs().max()) < 1e-6


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"n": 1}, ValueError, "GridWorld: n must be >= 2, got 1"),
        ({"n": 3.0}, TypeError, "GridWorld: n must be an int, got float 3.0"),
        ({"slip": 1.5}, ValueError, r"GridWorld: slip must be in \[0, 1\], got 1.5"),
        ({"slip": float("nan")}, ValueError, r"GridWorld: slip must be in \[0, 1\], got nan"),
        ({"n_features": 0}, ValueError, "GridWorld: n_features must be >= 1, got 0"),
        ({"n_features": 2.5}, TypeError, "GridWorld: n_features must be an int, got float 2.5"),
    ],
)
def test_gridworld_names_a_bad_argument(kwargs, exc, match):
    # a float n or n_features used to fail inside NumPy ("'float' object cannot be interpreted as an integer")
    with pytest.raises(exc, match=match):
        tabular.GridWorld(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"gamma": 1.0}, r"soft_value_iteration: gamma must be in \[0, 1\), got 1.0"),
        ({"temp": 0.0}, "soft_value_iteration: temp must be > 0, got 0.0"),
        ({"r": np.zeros((25, 4))}, r"need P \(S, A, S\) and r \(S, A\), got \(25, 5, 25\), \(25, 4\)"),
    ],
)
def test_soft_value_iteration_names_a_bad_argument(gw, kwargs, match):
    args = {"P": gw.P, "r": np.zeros((25, 5)), "gamma": GAMMA, "temp": 1.0} | kwargs
    with pytest.raises(ValueError, match=match):
        tabular.soft_value_iteration(**args)


def test_soft_vi_optimizer_names_a_bad_argument(gw):
    with pytest.raises(ValueError, match=r"SoftVI: gamma must be in \[0, 1\), got 1.0"):
        tabular.SoftVI(gamma=1.0, env=gw)
    with pytest.raises(ValueError, match=r"SoftVI: temperature must be > 0, got -1\.0"):
        tabular.SoftVI(temperature=-1.0, env=gw)
    with pytest.raises(ValueError, match=r"SoftVI: env is None; pass env=GridWorld\(\.\.\.\)"):
        tabular.SoftVI().reset(3)


@pytest.mark.parametrize(
    ("P", "r", "kwargs", "exc", "match"),
    [
        (np.zeros((2, 1, 2)), torch.zeros(1, 2, 1), {}, TypeError, "P and r must be tensors, got ndarray, Tensor"),
        (torch.zeros(2, 1, 3), torch.zeros(1, 2, 1), {}, ValueError, r"P must be \(S, A, S\), got \(2, 1, 3\)"),
        (torch.zeros(2, 1, 2), torch.zeros(1, 2, 1), {"temp": 0.0}, ValueError, "temp must be > 0, got 0.0"),
    ],
)
def test_batched_reference_names_a_bad_argument(P, r, kwargs, exc, match):
    args = {"gamma": GAMMA, "temp": 1.0, "iters": 3} | kwargs
    with pytest.raises(exc, match=rf"batched_soft_vi: {match}"):
        batched_soft_vi_reference(P, r, **args)


def test_soft_value_iteration_takes_a_numpy_warm_start(gw):
    # a numpy V0 used to fail with "'numpy.ndarray' object has no attribute 'to'", though numpy P, r, ref work
    r = np.random.default_rng(2).normal(size=(25, 5))
    _, V_cold, _ = tabular.soft_value_iteration(gw.P, r, GAMMA, 0.7, 20)
    V_np = V_cold.numpy().copy()
    Q, V, pi = tabular.soft_value_iteration(gw.P, r, GAMMA, 0.7, 20, V0=V_np)
    expected = tabular.soft_value_iteration(gw.P, r, GAMMA, 0.7, 20, V0=V_cold)
    for got, want in zip((Q, V, pi), expected, strict=True):
        assert torch.equal(got, want)
    # 20 + 20 warm-started backups are the 40 cold ones
    torch.testing.assert_close(V, tabular.soft_value_iteration(gw.P, r, GAMMA, 0.7, 40)[1], rtol=0, atol=1e-12)
    np.testing.assert_array_equal(V_np, V_cold.numpy())
