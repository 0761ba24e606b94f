"""Bad input to the exact solution fails with a clear error before computing."""

import pytest
import torch

from iclr25.theory.lambda_balanced import exact_qqt, exact_trajectory, lambda_balanced_init, simulate_gd, whiten


@pytest.fixture()
def setup():
    gen = torch.Generator().manual_seed(30)
    X = whiten(torch.randn(5, 20, generator=gen, dtype=torch.float64))
    syx = torch.randn(3, 5, generator=gen, dtype=torch.float64)
    W1, W2 = lambda_balanced_init(1.0, 5, 3, 3, scale=0.1, generator=gen)
    return X, syx, W1, W2


def test_non_whitened_x_points_to_whiten(setup):
    X, syx, W1, W2 = setup
    with pytest.raises(ValueError, match="whiten"):
        exact_qqt(W1, W2, syx, 1.0, 1.0, X=3.0 * X)


def test_infeasible_or_wrong_lambda(setup):
    _X, syx, W1, W2 = setup
    with pytest.raises(ValueError, match="not λ-balanced"):
        exact_qqt(W1, W2, syx, 2.0, 1.0)
    W1b, W2b = lambda_balanced_init(0.0, 3, 4, 3)
    with pytest.raises(ValueError, match="n_hidden <= n_out"):
        exact_qqt(W1b, W2b, syx[:, :3], 1.0, 1.0)


def test_negative_time_nan_and_half_precision(setup):
    _X, syx, W1, W2 = setup
    with pytest.raises(ValueError, match="t must be"):
        exact_qqt(W1, W2, syx, 1.0, -1.0)
    with pytest.raises(ValueError, match=">= 0"):
        exact_trajectory(W1, W2, syx, 1.0, torch.tensor([0.0, -2.0]))
    with pytest.raises(ValueError, match="non-decreasing"):
        exact_trajectory(W1, W2, syx, 1.0, torch.tensor([2.0, 1.0]))
    bad = W1.clone()
    bad[0, 0] = float("nan")
    with pytest.raises(ValueError, match="W1 contains NaN"):
        exact_qqt(bad, W2, syx, 1.0, 1.0)
    with pytest.raises(TypeError, match="float32 or float64"):
        exact_qqt(W1.half(), W2.half(), syx, 1.0, 1.0)
    with pytest.raises(TypeError, match="sigma_yx must be float32"):
        exact_qqt(W1, W2, syx.half(), 1.0, 1.0)


def test_shape_mismatches(setup):
    X, syx, W1, W2 = setup
    with pytest.raises(ValueError, match="sigma_yx must have shape"):
        exact_qqt(W1, W2, syx.T, 1.0, 1.0)
    with pytest.raises(ValueError, match="W2 must have shape"):
        exact_qqt(W1, W2[:, :2], syx, 1.0, 1.0)
    with pytest.raises(ValueError, match="lam must be a float or a tensor of shape"):
        exact_qqt(W1, W2, syx, torch.ones(2, dtype=torch.float64), 1.0)
    with pytest.raises(ValueError, match="inconsistent shapes"):
        simulate_gd(W1, W2, X[:4], syx @ X, 0.1, 1)
    with pytest.raises(ValueError, match="steps"):
        simulate_gd(W1, W2, X, syx @ X, 0.1, -1)
