"""Acceptance 3: the firing function is exactly 0/1 and its gradient is each closed-form surrogate."""

import math

import numpy as np
import pytest
import torch

from iclr25.neuro.spiking import SURROGATES, Surrogate, spike


def closed_form(name: str, x: np.ndarray, **p: float) -> np.ndarray:
    """σ'(x) written out independently of the library, in float64."""
    if name == "gaussian":
        w, g = p.get("width", 0.5), p.get("scale", 0.5)
        return g * np.exp(-(x**2) / (2 * w**2)) / (np.sqrt(2 * np.pi) * w)
    if name == "atan":
        a = p.get("alpha", 2.0)
        return a / 2 / (1 + (np.pi / 2 * a * x) ** 2)
    if name == "sigmoid":
        k = p.get("k", 4.0)
        sig = 1 / (1 + np.exp(-k * x))
        return k * sig * (1 - sig)
    if name == "triangle":
        w, g = p.get("width", 1.0), p.get("scale", 1.0)
        return g * np.maximum(0.0, 1 - np.abs(x) / w) / w
    w = p.get("width", math.inf)
    return (np.abs(x) <= w).astype(np.float64)


CASES = [(name, {}) for name in SURROGATES] + [
    ("gaussian", {"width": 0.3, "scale": 1.0}),
    ("atan", {"alpha": 4.0}),
    ("sigmoid", {"k": 10.0}),
    ("triangle", {"width": 0.5, "scale": 2.0}),
    ("ste", {"width": 0.5}),
]


@pytest.mark.parametrize(("name", "params"), CASES)
def test_gradient_equals_closed_form(name, params):
    gen = torch.Generator().manual_seed(3)
    x = (torch.randn(2000, generator=gen, dtype=torch.float64) * 1.5).requires_grad_()
    s = spike(x, name, **params)
    (grad,) = torch.autograd.grad(s.sum(), x)
    np.testing.assert_allclose(grad.numpy(), closed_form(name, x.detach().numpy(), **params), rtol=0, atol=1e-6)
    # weighted upstream gradient is multiplied through
    w = torch.randn(2000, generator=gen, dtype=torch.float64)
    (grad_w,) = torch.autograd.grad((spike(x, name, **params) * w).sum(), x)
    np.testing.assert_allclose(grad_w.numpy(), w.numpy() * grad.numpy(), rtol=0, atol=1e-12)


def test_gaussian_defaults_are_rsnn_bfd():
    # peak of γ·N(0, w²) with w = γ = 0.5: 0.5 / (sqrt(2π)·0.5) ≈ 0.399
    x = torch.zeros(1, requires_grad=True)
    (g,) = torch.autograd.grad(spike(x).sum(), x)
    assert abs(g.item() - 1 / math.sqrt(2 * math.pi)) < 1e-7


@pytest.mark.parametrize("name", list(SURROGATES))
def test_forward_is_exactly_binary_with_explicit_boundary(name):
    x = torch.tensor([-2.0, -1e-7, 0.0, 1e-7, 3.0])
    assert torch.equal(spike(x, name), torch.tensor([0.0, 0.0, 0.0, 1.0, 1.0]))  # strict: x = 0 → 0
    assert torch.equal(spike(x, name, inclusive=True), torch.tensor([0.0, 0.0, 1.0, 1.0, 1.0]))
    assert spike(x.double(), name).dtype == torch.float64


def test_surrogate_is_per_call_not_global():
    x = torch.tensor([0.3], requires_grad=True)
    (a,) = torch.autograd.grad(spike(x, "atan").sum(), x)
    (b,) = torch.autograd.grad(spike(x, "triangle").sum(), x)
    (c,) = torch.autograd.grad(spike(x, "atan").sum(), x)
    assert a.item() != b.item() and a.item() == c.item()


def test_bad_surrogate_arguments():
    with pytest.raises(ValueError, match="surrogate must be one of"):
        spike(torch.zeros(2), "relu")
    with pytest.raises(ValueError, match="takes parameters"):
        Surrogate.make("atan", width=1.0)
    with pytest.raises(ValueError, match="must be > 0"):
        Surrogate.make("gaussian", width=0.0)
    with pytest.raises(TypeError, match="floating-point"):
        spike(torch.zeros(2, dtype=torch.int64))
