"""Preconditioning identities and losses (acceptance items 3 and 4)."""

import math

import pytest
import torch

from iclr25.generative.diffusion import losses, precond, schedules

MU, S = 0.3, 0.5


def gauss(x, sigma, **_):
    sig = torch.as_tensor(sigma, dtype=x.dtype).reshape(-1, *([1] * (x.dim() - 1)))
    return MU + S**2 / (S**2 + sig**2) * (x - MU)


class RandomNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x, c_noise, **_):
        return torch.tanh(self.lin(x)) + c_noise[:, None]


def test_edm_coefficient_identities():
    s = torch.logspace(-3, 2, 50, dtype=torch.float64)
    _c_skip, c_out, c_in, c_noise = precond.edm_coefficients(s, 0.5)
    assert torch.allclose(c_in**2 * (s**2 + 0.25), torch.ones_like(s), rtol=1e-14)
    # unit-variance training target (Karras et al. 2022, App. B.6): c_skip^2 sd^2 + c_out^2 ... identities
    assert torch.allclose(c_out**2, (s**2 * 0.25) / (s**2 + 0.25))
    assert torch.allclose(c_noise, s.log() / 4)
    c_skip0, *_ = precond.edm_coefficients(torch.tensor([1e-30], dtype=torch.float64), 0.5)
    assert float(c_skip0) == 1.0


def test_edm_precond_formula():
    torch.manual_seed(0)
    net = RandomNet()
    d = precond.EDMPrecond(net, 0.5)
    x, s = torch.randn(4, 3), torch.tensor([0.01, 0.5, 2.0, 80.0])
    c_skip, c_out, c_in, c_noise = precond.edm_coefficients(s, 0.5)
    expect = c_skip[:, None] * x + c_out[:, None] * net(c_in[:, None] * x, c_noise)
    assert torch.allclose(d(x, s), expect)


def test_consistency_boundary_is_exact():
    torch.manual_seed(0)
    f = precond.ConsistencyPrecond(RandomNet(), 0.5, 0.002)
    x = torch.randn(16, 3)
    assert torch.equal(f(x, 0.002), x)
    assert not torch.equal(f(x, 0.5), x)
    g = precond.ConsistencyPrecond(RandomNet(), 0.5, 0.002, edm_style=True)
    assert (g(x, 0.002) - x).abs().max() < 0.01  # only approximately a boundary condition


def test_eps_vp_round_trip():
    sched = schedules.VPSchedule("cosine", 1000)
    eps_net = precond.EpsFromDenoiser(gauss, sched)
    d = precond.EpsVPDenoiser(eps_net, sched)
    x = torch.randn(64, 2, dtype=torch.float64) * 3
    for sigma in (0.05, 0.3, 1.0, 7.0, 40.0):
        assert float((d(x, sigma) - gauss(x, sigma)).abs().max()) < 1e-5
    # and on the integer grid of the schedule, without interpolation
    t = torch.full((64,), 321)
    x_vp = torch.randn(64, 2, dtype=torch.float64)
    s = float(sched.sigmas[321])
    eps_true = (x_vp * math.sqrt(1 + s**2) - gauss(x_vp * math.sqrt(1 + s**2), s)) / s
    assert torch.allclose(eps_net(x_vp, t), eps_true, atol=1e-10)


def test_v_denoiser_round_trip():
    sched = schedules.VPSchedule("linear", 1000)
    eps_net = precond.EpsFromDenoiser(gauss, sched)

    def v_net(x_vp, t):
        s = sched.sigma(t).to(x_vp.dtype)[:, None]
        a, b = 1 / (1 + s**2).sqrt(), s / (1 + s**2).sqrt()
        eps = eps_net(x_vp, t)
        x0 = (x_vp - b * eps) / a
        return a * eps - b * x0

    d = precond.VDenoiser(v_net, sched)
    x = torch.randn(32, 2, dtype=torch.float64)
    for sigma in (0.1, 1.0, 10.0):
        assert float((d(x, sigma) - gauss(x, sigma)).abs().max()) < 1e-5


def test_cfg_combines_and_batches():
    calls = []

    def den(x, sigma, context=None):
        calls.append(x.shape[0])
        return x * 0 + context.mean(dim=(1, 2))[:, None]

    c = torch.ones(3, 4, 5)
    out = precond.CFGDenoiser(den, 3.0)(torch.zeros(3, 2), 1.0, context=c)
    assert calls == [6]  # one batched call
    assert torch.allclose(out, torch.full((3, 2), 3.0))  # 0 + 3 (1 - 0)
    with pytest.raises(ValueError, match="context"):
        precond.CFGDenoiser(den, 3.0)(torch.zeros(3, 2), 1.0, context=torch.ones(2, 4, 5))


def test_precond_bad_inputs():
    d = precond.EDMPrecond(RandomNet())
    with pytest.raises(ValueError, match="sigma"):
        d(torch.zeros(2, 3), torch.tensor([1.0, float("nan")]))
    with pytest.raises(ValueError, match="sigma must be > 0"):
        d(torch.zeros(2, 3), 0.0)
    with pytest.raises(ValueError, match="x must be finite"):
        d(torch.tensor([[float("inf"), 0, 0]]), 1.0)
    with pytest.raises(TypeError, match="floating point"):
        d(torch.zeros(2, 3, dtype=torch.int64), 1.0)
    with pytest.raises(ValueError, match="shape"):
        d(torch.zeros(2, 3), torch.ones(3))
    assert d(torch.zeros(0, 3), 1.0).shape == (0, 3)


class LinearGaussDenoiser(torch.nn.Module):
    """D(x; s) = m + v / (v + s^2) (x - m): the family that holds the optimum (m = MU, v = S^2)."""

    def __init__(self):
        super().__init__()
        self.m = torch.nn.Parameter(torch.zeros(2))
        self.log_v = torch.nn.Parameter(torch.zeros(2))

    def forward(self, x, sigma):
        v = self.log_v.exp()
        return self.m + v / (v + sigma[:, None] ** 2) * (x - self.m)


def test_edm_loss_recovers_optimal_denoiser():
    torch.manual_seed(0)
    n_threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: threading only adds overhead
    mu, s = torch.tensor([1.0, -0.5]), torch.tensor([0.3, 0.8])
    model = LinearGaussDenoiser()
    # 800 steps of 1 024 samples (the note's 2 000 x 512 took twice as long for the same fit: the loop
    # is Python-bound, not size-bound); measured errors 0.7 % (mean) and 0.2 % (variance) vs 5 %
    opt = torch.optim.Adam(model.parameters(), lr=5e-2)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, 800)  # decay removes the SGD noise floor
    g = torch.Generator().manual_seed(1)
    for _step in range(800):
        x0 = mu + s * torch.randn(1024, 2, generator=g)
        loss = losses.edm_loss(model, x0, generator=g).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    torch.set_num_threads(n_threads)
    assert torch.allclose(model.m.detach(), mu, rtol=0.05)
    assert torch.allclose(model.log_v.exp().detach(), s**2, rtol=0.05)
    # the denoiser coefficient v / (v + sigma^2) matches s^2 / (s^2 + sigma^2) within 5 % everywhere
    sig = torch.logspace(-2, 1, 20)[:, None]
    v = model.log_v.exp().detach()
    assert torch.allclose(v / (v + sig**2), s**2 / (s**2 + sig**2), rtol=0.05)


def test_edm_loss_value_closed_form():
    # identity denoiser: loss = lambda(sigma) * mean(n^2); reproduce the draws with the same seed
    x0 = torch.zeros(5, 4)
    loss = losses.edm_loss(lambda x, s: x, x0, generator=torch.Generator().manual_seed(3))
    g = torch.Generator().manual_seed(3)
    sigma = (torch.randn(5, generator=g) * 1.2 - 1.2).exp()
    n = torch.randn(5, 4, generator=g) * sigma[:, None]
    lam = (sigma**2 + 0.25) / (sigma * 0.5) ** 2
    assert torch.allclose(loss, lam * n.pow(2).mean(1))


def test_ddpm_eps_loss_and_min_snr():
    sched = schedules.VPSchedule("linear", 100)
    x0 = torch.randn(8, 3)
    perfect = {}

    def eps_net(x_t, t):
        ab = sched.alphas_cumprod[t].float()[:, None]
        perfect["eps"] = (x_t - ab.sqrt() * x0) / (1 - ab).sqrt()
        return perfect["eps"]

    loss, x0_hat = losses.ddpm_eps_loss(eps_net, x0, sched, generator=torch.Generator().manual_seed(0))
    assert loss.shape == (8,) and float(loss.max()) < 1e-8
    assert torch.allclose(x0_hat, x0, atol=1e-4)
    zero = lambda x, t: torch.zeros_like(x)  # noqa: E731
    l1, _ = losses.ddpm_eps_loss(zero, x0, sched, generator=torch.Generator().manual_seed(0))
    l5, _ = losses.ddpm_eps_loss(zero, x0, sched, min_snr_gamma=5.0, generator=torch.Generator().manual_seed(0))
    g = torch.Generator().manual_seed(0)
    t = torch.randint(0, 100, (8,), generator=g)
    ab = sched.alphas_cumprod[t].float()
    snr = ab / (1 - ab)
    assert torch.allclose(l5, l1 * snr.clamp(max=5.0) / snr)


@pytest.mark.parametrize("sd", [0.5, 1.3])
def test_edm_coefficients_closed_form_and_unit_variance_target(sd):
    s = torch.logspace(-3, 2, 50, dtype=torch.float64)
    c_skip, c_out, _, _ = precond.edm_coefficients(s, sd)
    # Karras et al. 2022, App. B.6: for x0 with std sd and x = x0 + s n, the network's training target
    # (x0 - c_skip x) / c_out has unit variance, and c_skip = sd^2 / (s^2 + sd^2) is the c_skip that
    # minimises c_out (the variance's stationary point in c_skip)
    target_var = ((1 - c_skip) ** 2 * sd**2 + c_skip**2 * s**2) / c_out**2
    assert torch.allclose(target_var, torch.ones_like(s), rtol=1e-12)
    assert torch.allclose(c_skip * (s**2 + sd**2), torch.full_like(s, sd**2), rtol=1e-12)
    # Table 1 at s = sd: c_skip = 1/2, c_out = sd / sqrt(2), c_in = 1 / (sd sqrt(2))
    at_sd = precond.edm_coefficients(torch.tensor([sd], dtype=torch.float64), sd)
    for got, want in zip(at_sd, (0.5, sd / math.sqrt(2), 1 / (sd * math.sqrt(2)), math.log(sd) / 4), strict=True):
        assert math.isclose(float(got), want, rel_tol=1e-14)


def test_consistency_precond_coefficients():
    # Song et al. 2023, App. C: c_skip = sd^2 / ((s - smin)^2 + sd^2), c_out = (s - smin) sd / sqrt(s^2 + sd^2),
    # with EDM's c_in and c_noise; edm_style=True is exactly EDMPrecond
    torch.manual_seed(0)
    net = RandomNet().double()
    sd, smin = 0.5, 0.002
    x = torch.randn(4, 3, dtype=torch.float64)
    s = torch.tensor([0.01, 0.5, 2.0, 80.0], dtype=torch.float64)
    c_skip = sd**2 / ((s - smin) ** 2 + sd**2)
    c_out = (s - smin) * sd / (s**2 + sd**2).sqrt()
    c_in = 1 / (s**2 + sd**2).sqrt()
    expect = c_skip[:, None] * x + c_out[:, None] * net(c_in[:, None] * x, s.log() / 4)
    assert torch.allclose(precond.ConsistencyPrecond(net, sd, smin)(x, s), expect, rtol=1e-12, atol=0)
    edm_like = precond.ConsistencyPrecond(net, sd, smin, edm_style=True)
    assert torch.equal(edm_like(x, s), precond.EDMPrecond(net, sd)(x, s))
    with pytest.raises(ValueError, match="sigma_min"):
        precond.ConsistencyPrecond(net, sd, 0.0)
    with pytest.raises(ValueError, match="sigma_data"):
        precond.EDMPrecond(net, 0.0)


def test_cfg_uncond_value_and_shared_conditioning():
    seen = {}

    def den(x, sigma, context=None, class_labels=None, context_mask=None):
        seen.update(labels=class_labels, mask=context_mask, sigma=sigma)
        return x * 0 + context.mean(dim=(1, 2))[:, None] + class_labels[:, None]

    b = 3
    c, u = torch.full((b, 4, 5), 2.0), torch.full((1, 4, 5), -1.0)
    labels, mask = torch.tensor([0.0, 1.0, 2.0]), torch.ones(b, 4, dtype=torch.bool)
    sig = torch.tensor([1.0, 2.0, 3.0])
    cfg = precond.CFGDenoiser(den, 1.5, uncond_value=u)
    out = cfg(torch.zeros(b, 2), sig, context=c, class_labels=labels, context_mask=mask)
    # D_u = -1 + label, D_c = 2 + label: D_u + 1.5 (D_c - D_u) = label + 3.5
    assert torch.allclose(out, (labels + 3.5)[:, None].expand(b, 2))
    # the other per-sample conditioning goes to both halves of the batched call
    assert torch.equal(seen["labels"], torch.cat([labels, labels])) and seen["mask"].shape == (2 * b, 4)
    assert torch.equal(seen["sigma"], torch.cat([sig, sig]))
    with pytest.raises(ValueError, match="uncond_value"):
        precond.CFGDenoiser(den, 1.5, uncond_value=torch.zeros(1, 3, 5))(torch.zeros(b, 2), 1.0, context=c)
    with pytest.raises(ValueError, match="needs the conditioning argument"):
        cfg(torch.zeros(b, 2), 1.0, class_labels=labels)
    with pytest.raises(TypeError, match="context must be a tensor"):
        cfg(torch.zeros(b, 2), 1.0, context=[1, 2, 3])


def test_precond_rejects_conditioning_batch_mismatch():
    d = precond.EDMPrecond(RandomNet())
    with pytest.raises(ValueError, match="context batch"):
        d(torch.zeros(2, 3), 1.0, context=torch.zeros(3, 4, 5))
    with pytest.raises(ValueError, match="class_labels batch"):
        d(torch.zeros(2, 3), 1.0, class_labels=torch.zeros(3, dtype=torch.long))


def test_eps_vp_denoiser_timesteps_and_bad_sigma():
    sched = schedules.VPSchedule("linear", 1000)
    seen = []

    def eps_net(x_vp, t):
        seen.append(t)
        return torch.zeros_like(x_vp)

    x = torch.randn(2, 3, dtype=torch.float64)
    nearest = precond.EpsVPDenoiser(eps_net, sched, nearest_t=True)
    assert torch.equal(nearest(x, sched.sigmas[[5, 321]]), x)  # eps = 0: D = x
    assert seen[-1].dtype == torch.int64 and seen[-1].tolist() == [5, 321]
    mid = (0.3 * sched.sigmas[10].log() + 0.7 * sched.sigmas[11].log()).exp()
    precond.EpsVPDenoiser(eps_net, sched)(x[:1], mid)
    assert abs(float(seen[-1][0]) - 10.7) < 1e-5  # interpolated in log sigma
    nearest(x[:1], mid)
    assert seen[-1].tolist() == [11]
    for d in (nearest, precond.VDenoiser(eps_net, sched)):
        with pytest.raises(ValueError, match="sigma must be > 0"):
            d(x, 0.0)
        with pytest.raises(ValueError, match="sigma must be finite"):
            d(x, float("nan"))
        assert d(x[:0], 1.0).shape == (0, 3)


def test_losses_bad_input_and_empty_batch():
    den = precond.EDMPrecond(RandomNet())
    sched = schedules.VPSchedule("linear", 100)
    zero = lambda x, t: torch.zeros_like(x)  # noqa: E731
    assert losses.edm_loss(den, torch.zeros(0, 3)).shape == (0,)
    loss, x0_hat = losses.ddpm_eps_loss(zero, torch.zeros(0, 3), sched)
    assert loss.shape == (0,) and x0_hat.shape == (0, 3)
    assert losses.edm_loss(lambda x, s: x, torch.zeros(5)).shape == (5,)  # (B,) data: one value per sample
    for fn in (lambda x: losses.edm_loss(den, x), lambda x: losses.ddpm_eps_loss(zero, x, sched)):
        with pytest.raises(TypeError, match="floating point"):
            fn(torch.zeros(2, 3, dtype=torch.int64))
        with pytest.raises(ValueError, match="x0 must be finite"):
            fn(torch.tensor([[0.0, float("nan"), 0.0]]))


def test_x0_eps_helpers_invert_the_forward_process():
    g = torch.Generator().manual_seed(0)
    x0, eps = torch.randn(4, 3, generator=g, dtype=torch.float64), torch.randn(4, 3, generator=g, dtype=torch.float64)
    ab = torch.tensor([0.9, 0.5, 0.1, 1e-3], dtype=torch.float64)
    x_t = ab.sqrt()[:, None] * x0 + (1 - ab).sqrt()[:, None] * eps
    assert torch.allclose(losses.x0_from_eps(x_t, eps, ab), x0, rtol=0, atol=1e-12)
    assert torch.allclose(losses.eps_from_x0(x_t, x0, ab), eps, rtol=0, atol=1e-12)
    assert torch.allclose(losses.eps_from_x0(x_t[:1], x0[:1], 0.9), eps[:1], rtol=0, atol=1e-12)  # scalar ab
