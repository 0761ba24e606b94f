"""Everyday-use checks: batched/float32/NumPy inputs and argument-naming errors at the boundary."""

import warnings

import numpy as np
import pytest
import torch

from iclr25.theory.lambda_balanced import (
    exact_trajectory,
    io_correlation,
    lambda_balanced_init,
    ntk,
    riccati_matrix,
    simulate_gd,
    split_qqt,
    whiten,
)


@pytest.fixture()
def task():
    gen = torch.Generator().manual_seed(40)
    X = whiten(torch.randn(5, 20, generator=gen, dtype=torch.float64))
    Y = torch.randn(3, 5, generator=gen, dtype=torch.float64) @ X
    W1, W2 = lambda_balanced_init(1.0, 5, 3, 3, scale=0.1, generator=gen)
    return X, Y, io_correlation(X, Y), W1, W2


def test_riccati_matrix_batched_sigma_with_a_shared_float_lambda(task):
    *_, syx, _W1, _W2 = task
    batch = torch.stack([syx, 2 * syx])
    ref = torch.stack([riccati_matrix(syx, 1.5), riccati_matrix(2 * syx, 1.5)])
    assert torch.equal(riccati_matrix(batch, 1.5), ref)  # was: "shape '[2, 1]' is invalid for input of size 1"
    assert torch.equal(riccati_matrix(batch, torch.tensor(1.5)), ref)
    with pytest.raises(ValueError, match=r"lam must be a float or a tensor of shape \(2,\)"):
        riccati_matrix(batch, torch.ones(3))
    with pytest.raises(ValueError, match="sigma_yx must have at least 2 dimensions"):
        riccati_matrix(syx[0], 1.0)


def test_float32_readouts_with_float64_inputs(task):
    X, Y, syx, W1, W2 = task
    tr = exact_trajectory(W1.float(), W2.float(), syx, 1.0, [0.0, 2.0])
    assert tr["W1tW1"].dtype == torch.float32
    K = ntk(tr["W1tW1"][-1], tr["W2W2t"][-1], X)  # was: "expected m1 and m2 to have the same dtype"
    assert K.dtype == torch.float64
    assert torch.equal(K, ntk(tr["W1tW1"][-1].double(), tr["W2W2t"][-1].double(), X))
    assert torch.equal(io_correlation(X.float(), Y), io_correlation(X.float().double(), Y))


def test_simulate_gd_names_mismatched_arguments(task):
    X, Y, _syx, W1, W2 = task
    with pytest.raises(TypeError, match="W1, W2, X and Y must share one dtype"):
        simulate_gd(W1.float(), W2.float(), X, Y, 0.01, 2)
    with pytest.raises(ValueError, match=r"got W1 \(1, 3, 5\)"):
        simulate_gd(W1[None], W2, X, Y, 0.01, 2)


def test_numpy_scalars_work_like_python_scalars(task):
    X, Y, syx, W1, W2 = task
    a = lambda_balanced_init(1, 5, 3, 3, generator=torch.Generator().manual_seed(1))
    b = lambda_balanced_init(np.int64(1), np.int64(5), np.int64(3), 3, generator=torch.Generator().manual_seed(1))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    ref = exact_trajectory(W1, W2, syx, 0.5 + 0.5, [0.0, 1.0], 2.0)["qqt"]
    got = exact_trajectory(W1, W2, syx, np.float32(1.0), np.array([0.0, 1.0]), np.float64(2.0))["qqt"]
    assert torch.equal(ref, got)
    gd = simulate_gd(W1, W2, X, Y, 0.01, np.int64(4), record_every=np.int64(2))
    assert torch.equal(gd["W1"], simulate_gd(W1, W2, X, Y, 0.01, 4, record_every=2)["W1"])


def test_bad_arguments_are_named(task):
    X, Y, syx, W1, W2 = task
    with pytest.raises(TypeError, match="times must be a 1-D tensor or sequence"):
        exact_trajectory(W1, W2, syx, 1.0, 2.0)
    with pytest.raises(ValueError, match=r"n_in must be an int with 1 <= n_in < Ni\+No = 8"):
        split_qqt(torch.zeros(8, 8), 20)
    with pytest.raises(TypeError, match=r"generator must be a torch\.Generator"):
        lambda_balanced_init(0.0, 5, 3, 3, generator=0)
    with pytest.raises(ValueError, match="batch shapes of W1tW1"):
        ntk(torch.eye(5).expand(2, 5, 5), torch.eye(3).expand(3, 3, 3), X.float())
    with pytest.raises(TypeError, match="tol must be a real number"):
        io_correlation(X, Y, tol="1e-6")


def test_lambda_tensor_with_grad_does_not_warn(task):
    *_, syx, W1, W2 = task
    lam = torch.tensor(1.0, dtype=torch.float64, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = exact_trajectory(W1, W2, syx, lam, [1.0])
    assert torch.equal(out["qqt"], exact_trajectory(W1, W2, syx, 1.0, [1.0])["qqt"])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_simulate_gd_time_is_on_the_weights_device(task):
    X, Y, _syx, W1, W2 = task
    out = simulate_gd(W1.cuda(), W2.cuda(), X.cuda(), Y.cuda(), 0.01, 3)
    assert {v.device.type for v in out.values()} == {"cuda"}
