"""WLS / InverseWLS against independent compositions, folding, and the orthogonality penalty."""

import pytest
import torch
import torch.nn.functional as F

from iclr25.compress.auxt import OLP, WLS, InverseWLS, ortho_loss


def _haar_conv_weight(c: int, dtype) -> torch.Tensor:
    # Independent construction: 4 filters written out, grouped conv with subband-major output order.
    ll = [[1, 1], [1, 1]]
    lh = [[1, -1], [1, -1]]
    hl = [[1, 1], [-1, -1]]
    hh = [[1, -1], [-1, 1]]
    f = torch.tensor([ll, lh, hl, hh], dtype=dtype) / 2
    w = torch.zeros(4 * c, c, 2, 2, dtype=dtype)
    for k in range(4):
        for ch in range(c):
            w[k * c + ch, ch] = f[k]
    return w


def _randomize(m, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.3)


@pytest.mark.parametrize("cin,cout", [(3, 8), (4, 4), (6, 5)])
def test_wls_equals_conv_composition_and_fold(cin, cout):
    wls = WLS(cin, cout).double()
    _randomize(wls, 0)
    x = torch.randn(2, cin, 8, 6, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    # Independent: Haar as 2×2 stride-2 conv, then scaling, then a 1×1 conv.
    z = F.conv2d(x, _haar_conv_weight(cin, torch.float64), stride=2)
    z = z * wls.log_scale.exp()[None, :, None, None]
    ref = F.conv2d(z, wls.olp.weight[:, :, None, None], wls.olp.bias)
    torch.testing.assert_close(wls(x), ref, atol=1e-5, rtol=0)
    torch.testing.assert_close(wls.fold()(x), ref, atol=1e-5, rtol=0)
    wls.folded = True
    torch.testing.assert_close(wls(x), ref, atol=1e-5, rtol=0)


def test_folded_training_path_has_same_gradients():
    torch.manual_seed(0)
    a, b = WLS(3, 6).double(), WLS(3, 6, folded=True).double()
    b.load_state_dict(a.state_dict())
    x = torch.randn(2, 3, 4, 4, dtype=torch.float64)
    a(x).pow(2).sum().backward()
    b(x).pow(2).sum().backward()
    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        torch.testing.assert_close(pa.grad, pb.grad)


@pytest.mark.parametrize("cin,cout", [(8, 3), (5, 4)])
def test_inverse_wls_folded_matches_unfolded(cin, cout):
    inv = InverseWLS(cin, cout).double()
    _randomize(inv, 3)
    x = torch.randn(2, cin, 3, 5, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    y = inv(x)
    assert y.shape == (2, cout, 6, 10)
    inv.folded = True
    torch.testing.assert_close(inv(x), y, atol=1e-10, rtol=0)


def test_iwls_after_wls_is_identity_for_orthogonal_square_projection():
    c = 3
    wls, inv = WLS(c, 4 * c).double(), InverseWLS(4 * c, c).double()
    q, _ = torch.linalg.qr(torch.randn(4 * c, 4 * c, generator=torch.Generator().manual_seed(5), dtype=torch.float64))
    s = torch.linspace(-0.5, 0.7, 4 * c, dtype=torch.float64)
    with torch.no_grad():
        wls.olp.weight.copy_(q)
        wls.olp.bias.zero_()
        inv.olp.weight.copy_(q.T)
        inv.olp.bias.zero_()
        wls.log_scale.copy_(s)
        inv.log_scale.copy_(s)
    x = torch.randn(2, c, 8, 8, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    torch.testing.assert_close(inv(wls(x)), x, atol=1e-5, rtol=0)


def test_scale_init_matches_subbands():
    w = WLS(2, 4)
    assert w.log_scale.tolist() == [0.5] * 6 + [0.0] * 2
    assert InverseWLS(4, 3).log_scale.tolist() == [0.5] * 9 + [0.0] * 3


@pytest.mark.parametrize("shape", [(4, 4), (3, 7), (7, 3)])
def test_ortho_loss_zero_for_semi_orthogonal(shape):
    g = torch.Generator().manual_seed(7)
    q, _ = torch.linalg.qr(torch.randn(max(shape), min(shape), generator=g, dtype=torch.float64))
    w = q if shape[0] >= shape[1] else q.T
    assert w.shape == shape
    assert float(ortho_loss(w)) < 1e-20
    assert float(ortho_loss(2 * w)) > 1.0  # (4 - 1)² on the diagonal


def test_ortho_loss_closed_form_and_identity_size():
    w = torch.tensor([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0]])  # out < in: W Wᵀ = diag(1, 4), I is 2×2
    assert float(ortho_loss(w)) == pytest.approx(9 / 4)
    assert float(ortho_loss(w.T)) == pytest.approx(9 / 4)


def test_ortho_gradient_orthogonalizes_random_matrix():
    torch.manual_seed(0)
    olp = OLP(12, 5)
    opt = torch.optim.Adam([olp.weight], lr=1e-2)
    for _ in range(500):
        opt.zero_grad()
        olp.ortho_loss().backward()
        opt.step()
    w = olp.weight.detach()
    assert torch.linalg.matrix_norm(w @ w.T - torch.eye(5)) < 1e-3


def test_bad_construction_raises():
    with pytest.raises(ValueError, match="in_channels"):
        WLS(0, 3)
    with pytest.raises(ValueError, match="haar"):
        WLS(3, 3, wavelet="db2")
    with pytest.raises(ValueError, match="scale_init"):
        WLS(3, 3, scale_init=(0.5, 0.5))
    with pytest.raises(ValueError, match=r"\(B, 3, H, W\)"):
        WLS(3, 4)(torch.zeros(1, 2, 4, 4))
    for folded in (False, True):
        with pytest.raises(ValueError, match="even"):
            WLS(3, 4, folded=folded)(torch.zeros(1, 3, 4, 5))


def test_ortho_loss_rejects_bad_weights():
    """A list raised ValueError and an integer matrix a RuntimeError from inside torch's mean()."""
    with pytest.raises(TypeError, match=r"weight must be a floating-point torch\.Tensor, got list"):
        ortho_loss([[1.0, 0.0], [0.0, 1.0]])
    with pytest.raises(TypeError, match=r"weight must be a floating-point torch\.Tensor, got dtype torch\.int64"):
        ortho_loss(torch.eye(3, dtype=torch.int64))
    with pytest.raises(ValueError, match=r"weight must be a 2-D \(out, in\) tensor, got shape \(2, 3, 3\)"):
        ortho_loss(torch.zeros(2, 3, 3))


def test_reprs_show_sizes_and_folding():
    assert repr(OLP(3, 4)) == "OLP(3, 4)"
    assert repr(WLS(3, 4, folded=True)).startswith("WLS(\n  3, 4, folded=True\n  (olp): OLP(12, 4)")
    assert repr(InverseWLS(4, 3)).startswith("InverseWLS(\n  4, 3, folded=False\n  (olp): OLP(4, 12)")
