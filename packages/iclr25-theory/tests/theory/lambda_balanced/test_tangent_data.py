"""NTK against a jacrev Jacobian (acceptance 6), kernel distance and whitening invariants."""

import pytest
import torch

from iclr25.theory.lambda_balanced import io_correlation, kernel_distance, lambda_balanced_init, ntk, whiten


def test_ntk_matches_jacrev():
    gen = torch.Generator().manual_seed(20)
    W1, W2 = lambda_balanced_init(0.7, 3, 2, 2, scale=0.8, generator=gen)
    X = torch.randn(3, 4, generator=gen, dtype=torch.float64)

    def f(w1, w2):
        return (w2 @ w1 @ X).reshape(-1)  # (No·P,), o-major

    J1, J2 = torch.func.jacrev(f, argnums=(0, 1))(W1, W2)
    J = torch.cat([J1.reshape(J1.shape[0], -1), J2.reshape(J2.shape[0], -1)], dim=1)
    K_ref = J @ J.T
    K = ntk(W1.T @ W1, W2 @ W2.T, X)
    assert K.shape == (8, 8)
    assert float((K - K_ref).abs().max()) <= 1e-10


def test_ntk_batched_broadcasts():
    gen = torch.Generator().manual_seed(21)
    X = torch.randn(3, 4, generator=gen, dtype=torch.float64)
    A = torch.randn(2, 3, 3, generator=gen, dtype=torch.float64)
    B = torch.randn(2, 2, 2, generator=gen, dtype=torch.float64)
    K = ntk(A, B, X)
    for i in range(2):
        ref = torch.kron(torch.eye(2, dtype=torch.float64), X.T @ A[i] @ X) + torch.kron(B[i], X.T @ X)
        assert torch.allclose(K[i], ref, atol=1e-12)


def test_kernel_distance_properties():
    gen = torch.Generator().manual_seed(22)
    A = torch.randn(6, 6, generator=gen, dtype=torch.float64)
    Ka = A @ A.T
    assert abs(float(kernel_distance(Ka, 3.0 * Ka))) <= 1e-15  # scale invariant
    I2 = torch.eye(2, dtype=torch.float64)
    E = torch.tensor([[1.0, 0.0], [0.0, 0.0]], dtype=torch.float64)
    # ⟨I, E⟩ = 1, ||I|| = sqrt(2), ||E|| = 1
    assert abs(float(kernel_distance(I2, E)) - (1 - 2**-0.5)) <= 1e-15
    with pytest.raises(ValueError, match="same shape"):
        kernel_distance(Ka, Ka[:5, :5])
    with pytest.raises(ValueError, match="all-zero"):
        kernel_distance(Ka, torch.zeros_like(Ka))


def test_whiten_and_correlation():
    gen = torch.Generator().manual_seed(23)
    X = torch.randn(4, 30, generator=gen, dtype=torch.float64) * torch.tensor([[1.0], [5.0], [0.1], [2.0]]) + 3.0
    for center in (False, True):
        Xw = whiten(X, center=center)
        assert torch.allclose(Xw @ Xw.T / 30, torch.eye(4, dtype=torch.float64), atol=1e-12)
    Y = torch.randn(2, 30, generator=gen, dtype=torch.float64)
    Xw = whiten(X)
    assert torch.allclose(io_correlation(Xw, Y), Y @ Xw.T / 30)
    with pytest.raises(ValueError, match="whiten"):
        io_correlation(X, Y)
    with pytest.raises(ValueError, match="at least as many samples"):
        whiten(X[:, :3])
    with pytest.raises(ValueError, match="singular"):
        whiten(torch.cat([X[:2], X[:2]]))
