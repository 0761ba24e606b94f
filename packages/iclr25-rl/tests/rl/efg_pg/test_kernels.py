import numpy as np
import pytest
import torch

from iclr25.rl.efg_pg import games, omd_step
from iclr25.rl.efg_pg.reference import kl_floor_projection, omd_step_reference


def _inputs(seed, n=37, a=3, dtype=torch.float32):
    gen = torch.Generator().manual_seed(seed)
    nact = torch.randint(1, a + 1, (n,), generator=gen)
    mask = torch.arange(a)[None, :] < nact[:, None]
    ref = torch.rand(n, a, generator=gen, dtype=dtype) * mask
    ref = ref / ref.sum(1, keepdim=True)
    ref[0, 0] = 0.0 if nact[0] > 1 else ref[0, 0]  # a zero entry exercises the log floor
    ref = ref / ref.sum(1, keepdim=True)
    g = torch.randn(n, a, generator=gen, dtype=dtype) * 3
    div = 1 + torch.rand(n, generator=gen, dtype=dtype)
    return ref, g, div, mask


def test_kl_floor_projection_is_kl_projection():
    """KKT check: result >= gamma, sums to 1, and equals max(gamma, lam * p) with one lam per row."""
    rng = np.random.default_rng(0)
    mask = np.ones((200, 4), dtype=bool)
    p = rng.dirichlet(np.full(4, 0.3), size=200)
    q = kl_floor_projection(np, p, mask, 0.1)
    np.testing.assert_allclose(q.sum(1), 1.0, atol=1e-12)
    assert q.min() >= 0.1 - 1e-12
    free = q > 0.1 + 1e-12
    lam = (q * free).sum(1) / (p * free).sum(1)
    np.testing.assert_allclose(np.where(free, q, 0), np.where(free, lam[:, None] * p, 0), atol=1e-12)
    assert np.all(np.where(~free, lam[:, None] * p <= 0.1 + 1e-12, True))


def test_entropy_step_closed_form():
    ref, g, div, mask = _inputs(0, dtype=torch.float64)
    out = omd_step_reference(ref, g, div, mask, 0.7, 0.0)
    logits = (torch.log(ref.clamp_min(1e-300)) + 0.7 * g) / div[:, None]
    expect = torch.softmax(logits.masked_fill(~mask, -torch.inf), 1)
    torch.testing.assert_close(out, expect, atol=1e-12, rtol=0)


def test_euclidean_step_is_projection():
    ref, g, div, mask = _inputs(1, dtype=torch.float64)
    out = omd_step_reference(ref, g, div, mask, 0.3, 0.05, regularizer="euclidean")
    torch.testing.assert_close(out.sum(1), torch.ones(out.shape[0], dtype=out.dtype), atol=1e-12, rtol=0)
    assert bool((out[mask] >= 0.05 - 1e-12).all()) and bool((out[~mask] == 0).all())


def test_numpy_and_torch_reference_agree():
    ref, g, div, mask = _inputs(2, dtype=torch.float64)
    a = omd_step_reference(ref, g, div, mask, 0.5, 0.01)
    b = omd_step_reference(ref.numpy(), g.numpy(), div.numpy(), mask.numpy(), 0.5, 0.01)
    np.testing.assert_allclose(a.numpy(), b, atol=1e-14)


@pytest.mark.triton
@pytest.mark.parametrize("gamma", [0.0, 0.2])
def test_triton_step_matches_reference(gamma):
    ref, g, div, mask = _inputs(3)
    want = omd_step(ref, g, div, mask, 0.5, gamma, backend="reference")
    got = omd_step(ref, g, div, mask, 0.5, gamma, backend="triton")
    assert (got - want).abs().max().item() < 1e-6


def test_auto_on_cpu_uses_reference_and_triton_refuses_euclidean():
    ref, g, div, mask = _inputs(4)
    assert omd_step.select(ref, g, div, mask, 0.5, 0.0, backend="auto").name == "reference"
    from iclr25.core.triton import BackendUnavailableError, triton_available

    if triton_available():
        with pytest.raises(BackendUnavailableError, match="entropy"):
            omd_step(ref, g, div, mask, 0.5, 0.0, regularizer="euclidean", backend="triton")


def test_game_mask_is_prefix_form():
    g = games.leduc_poker()
    assert np.array_equal(g.mask, np.arange(3)[None, :] < g.num_actions[:, None])
