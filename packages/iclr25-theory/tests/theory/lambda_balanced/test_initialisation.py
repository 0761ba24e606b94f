"""λ-balanced initialiser: exact balance, requested product spectrum, feasibility rules (acceptance 1)."""

import pytest
import torch
from torch import nn

from iclr25.theory.lambda_balanced import LinearNet2, balanced_singular_values, init_linear_pair_, lambda_balanced_init

SHAPES = [(5, 3, 3), (3, 3, 5)]
LAMS = [-1.0, 0.0, 1.0, 3.0]


def _balance_error(W1, W2, lam):
    eye = torch.eye(W1.shape[0], dtype=W1.dtype)
    return float((W2.T @ W2 - W1 @ W1.T - lam * eye).abs().max())


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("lam", LAMS)
def test_balance_and_spectrum(shape, lam):
    n_in, n_hidden, n_out = shape
    gen = torch.Generator().manual_seed(1)
    s = torch.tensor([2.0, 0.7, 0.05], dtype=torch.float64)
    W1, W2 = lambda_balanced_init(lam, n_in, n_hidden, n_out, generator=gen, singular_values=s)
    assert W1.shape == (n_hidden, n_in) and W2.shape == (n_out, n_hidden)
    assert _balance_error(W1, W2, lam) <= 1e-12
    svals = torch.linalg.svdvals(W2 @ W1)[:3]
    assert torch.allclose(svals, s, atol=1e-12, rtol=0)
    # default: every product singular value equals scale
    W1, W2 = lambda_balanced_init(lam, n_in, n_hidden, n_out, scale=0.1, generator=gen)
    assert _balance_error(W1, W2, lam) <= 1e-12
    assert torch.allclose(torch.linalg.svdvals(W2 @ W1)[:3], torch.full((3,), 0.1, dtype=torch.float64), atol=1e-12)


@pytest.mark.parametrize("lam", [-2.0, 0.0, 2.0])
def test_extra_hidden_units_keep_product(lam):
    # Nh = 4 > k = 3 hidden units: the extra unit carries sqrt(|λ|) on one side only.
    n_in, n_hidden, n_out = (4, 4, 3) if lam <= 0 else (3, 4, 4)
    gen = torch.Generator().manual_seed(2)
    W1, W2 = lambda_balanced_init(lam, n_in, n_hidden, n_out, scale=0.3, generator=gen)
    assert _balance_error(W1, W2, lam) <= 1e-12
    svals = torch.linalg.svdvals(W2 @ W1)
    assert torch.allclose(svals[:3], torch.full((3,), 0.3, dtype=torch.float64), atol=1e-12)
    assert float(svals[3:].abs().max()) <= 1e-12 if svals.numel() > 3 else True


@pytest.mark.parametrize(
    "lam,shape", [(1.0, (3, 5, 3)), (1.0, (5, 4, 3)), (-1.0, (3, 5, 3)), (-0.5, (3, 4, 5)), (2.0, (2, 3, 2))]
)
def test_infeasible_raises(lam, shape):
    with pytest.raises(ValueError, match="n_hidden <="):
        lambda_balanced_init(lam, *shape)


def test_lambda_zero_any_shape():
    W1, W2 = lambda_balanced_init(0.0, 2, 6, 3, scale=0.2, generator=torch.Generator().manual_seed(0))
    assert _balance_error(W1, W2, 0.0) <= 1e-12


def test_aligned_uses_target_singular_vectors():
    gen = torch.Generator().manual_seed(3)
    target = torch.randn(3, 5, generator=gen, dtype=torch.float64)
    W1, W2 = lambda_balanced_init(2.0, 5, 3, 3, scale=0.01, target=target, aligned=True, generator=gen)
    U, _S, Vh = torch.linalg.svd(target, full_matrices=False)
    # aligned start: W2W1 = U (0.01 I) Vᵀ, so Uᵀ (W2W1) V is 0.01 I
    assert torch.allclose(U.T @ (W2 @ W1) @ Vh.T, 0.01 * torch.eye(3, dtype=torch.float64), atol=1e-14)
    with pytest.raises(ValueError, match="needs target"):
        lambda_balanced_init(2.0, 5, 3, 3, aligned=True)
    with pytest.raises(ValueError, match="target must have shape"):
        lambda_balanced_init(2.0, 5, 3, 3, target=target.T, aligned=True)
    with pytest.raises(ValueError, match="only used with aligned"):
        lambda_balanced_init(2.0, 5, 3, 3, target=target)


def test_balanced_singular_values_closed_form_and_large_lambda():
    s = torch.tensor([0.0, 1e-3, 0.5, 4.0], dtype=torch.float64)
    for lam in (-50.0, -1.0, 0.0, 1.0, 50.0):
        s1, s2 = balanced_singular_values(s, lam)
        assert torch.allclose(s1 * s2, s, rtol=1e-14, atol=0)
        assert torch.allclose(s2**2 - s1**2, torch.full_like(s, lam), rtol=1e-13, atol=1e-13)
        root = torch.sqrt(torch.tensor(lam) ** 2 + 4 * s**2)
        assert torch.allclose(s2, torch.sqrt((root + lam) / 2), rtol=1e-6, atol=1e-8)


def test_linear_net2_and_linear_pair():
    gen = torch.Generator().manual_seed(4)
    net = LinearNet2(5, 3, 3, lam=1.5, scale=0.2, generator=gen)
    assert torch.allclose(net.balance(), 1.5 * torch.eye(3, dtype=torch.float64), atol=1e-12)
    x = torch.randn(7, 5, dtype=torch.float64, generator=gen)
    assert torch.allclose(net(x), x @ (net.fc2.weight @ net.fc1.weight).T)
    fc1, fc2 = nn.Linear(5, 3), nn.Linear(3, 3)
    init_linear_pair_(fc1, fc2, lam=-0.5, scale=0.1, generator=gen)
    W1, W2 = fc1.weight.detach().double(), fc2.weight.detach().double()
    assert _balance_error(W1, W2, -0.5) <= 1e-6  # float32 storage
    assert float(fc1.bias.detach().abs().max()) == 0.0 and float(fc2.bias.detach().abs().max()) == 0.0
    with pytest.raises(ValueError, match="in_features"):
        init_linear_pair_(nn.Linear(5, 3), nn.Linear(4, 3), lam=0.0)


def test_bad_arguments():
    with pytest.raises(ValueError, match="n_hidden must be a positive int"):
        lambda_balanced_init(0.0, 3, 0, 3)
    with pytest.raises(ValueError, match="scale"):
        lambda_balanced_init(0.0, 3, 3, 3, scale=-1.0)
    with pytest.raises(TypeError, match="lam"):
        lambda_balanced_init("1", 3, 3, 3)
    with pytest.raises(ValueError, match="lam must be finite"):
        lambda_balanced_init(float("nan"), 3, 3, 3)
    with pytest.raises(ValueError, match="singular_values must have shape"):
        lambda_balanced_init(0.0, 3, 3, 3, singular_values=torch.ones(2, dtype=torch.float64))
    with pytest.raises(TypeError, match="dtype"):
        lambda_balanced_init(0.0, 3, 3, 3, dtype=torch.float16)
