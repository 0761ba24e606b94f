"""dtype/precision: float64 models stay float64; half-precision schedule coefficients are not rounded away."""

import math

import pytest
import torch

from iclr25.generative.diffusion import losses, nn, schedules


def _embedding64(t: torch.Tensor, dim: int) -> torch.Tensor:
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float64) / half)
    a = t.double()[:, None] * freqs[None]
    return torch.cat([a.cos(), a.sin()], 1)


def test_timestep_embedding_keeps_float64():
    t = torch.tensor([1.2345678901234, 777.123456789], dtype=torch.float64)
    e = nn.timestep_embedding(t, 8)
    assert e.dtype == torch.float64
    assert torch.allclose(e, _embedding64(t, 8), rtol=0, atol=1e-12)
    # half precision and integer steps are still embedded in float32
    assert nn.timestep_embedding(t.to(torch.bfloat16), 8).dtype == torch.float32
    assert nn.timestep_embedding(torch.arange(3), 8).dtype == torch.float32


def test_double_mlp_net_resolves_float64_noise_levels():
    torch.manual_seed(0)
    net = nn.MLPDenoiserNet(2, hidden=16, depth=2, emb_dim=8).double()
    x = torch.randn(1, 2, dtype=torch.float64)
    c = torch.tensor([0.25], dtype=torch.float64)
    # c and c (1 + 1e-9) are the same float32 number: a float32 embedding gives identical outputs
    d = net(x, c * (1 + 1e-9)) - net(x, c)
    assert d.dtype == torch.float64
    assert bool((d != 0).any())


def test_tiny_autoencoder_kl_loss_in_bf16_and_float64():
    torch.manual_seed(0)
    for dt in (torch.bfloat16, torch.float64):
        ae = nn.TinyAutoencoder(1, 2, down=1, ch=8, kl=True).to(dt)
        x = torch.rand(2, 1, 8, 8, dtype=dt) * 2 - 1
        out = ae.loss(x, generator=torch.Generator().manual_seed(0))
        assert out.dtype == dt and bool(torch.isfinite(out).all())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_ddpm_eps_loss_keeps_noise_at_small_t_in_half_precision(dtype):
    sch = schedules.VPSchedule("linear", T=10)  # ab(0) = 1 - 1e-4: 1 - ab is 0 in float16/bfloat16
    x0 = torch.zeros(64, 1, 2, 2, dtype=dtype)
    seen = {}

    def eps_net(x_t, t):
        seen["x_t"], seen["t"] = x_t, t
        return torch.zeros_like(x_t)

    losses.ddpm_eps_loss(eps_net, x0, sch, generator=torch.Generator().manual_seed(0))
    small = seen["t"] == 0
    assert bool(small.any())
    assert seen["x_t"].dtype == dtype
    # x0 = 0, so x_t = sqrt(1 - ab) eps must be non-zero
    assert bool((seen["x_t"][small] != 0).all())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_x0_from_eps_half_precision_ab_near_one(dtype):
    ab = torch.tensor([0.99996], dtype=torch.float64)
    x_t = torch.full((1, 4), 0.5, dtype=dtype)
    eps = torch.ones(1, 4, dtype=dtype)
    want = (0.5 - math.sqrt(1 - 0.99996)) / math.sqrt(0.99996)
    got = losses.x0_from_eps(x_t, eps, ab)
    assert got.dtype == dtype
    assert torch.allclose(got.double(), torch.full((1, 4), want, dtype=torch.float64), rtol=1e-2, atol=0)
    back = losses.eps_from_x0(x_t, got, ab)
    assert back.dtype == dtype and bool(torch.isfinite(back).all())
