"""Samplers against the closed-form Gaussian case (acceptance items 1, 2, 5)."""

import itertools
import math

import pytest
import torch

from iclr25.generative.diffusion import precond, samplers, schedules

N = 20_000
MU, S = 0.3, 0.5  # data N(MU, S^2)


def gaussian_denoiser(mu: float = MU, s: float = S):
    """Optimal denoiser of N(mu, s^2 I): D*(x; sigma) = mu + s^2 / (s^2 + sigma^2) (x - mu)."""

    def d(x, sigma, **_):
        sig = torch.as_tensor(sigma, dtype=x.dtype).reshape(-1, *([1] * (x.dim() - 1)))
        return mu + s**2 / (s**2 + sig**2) * (x - mu)

    return d


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    # elementwise ops on 20 000 scalars: thread start-up dominates on a 2-core machine
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture
def gauss():
    return gaussian_denoiser()


def _check_moments(x):
    # sampling error of the mean is S/sqrt(N) = 0.007 S and of the std 0.5 %: the 0.02 S / 2 %
    # tolerances leave room for the discretisation error only
    assert abs(float(x.mean()) - MU) < 0.02 * S, float(x.mean())
    assert abs(float(x.std()) / S - 1) < 0.02, float(x.std())


def _noise(seed=0):
    # standardised noise (exact zero mean, unit std): the moment checks then measure the sampler's
    # discretisation error rather than the Monte-Carlo error of the initial draw (std 0.7 % of S)
    z = torch.randn(N, 1, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return (z - z.mean()) / z.std()


def _edm_heun_gain(n: int) -> float:
    # EDM Algorithm 1 (S_churn = 0) written out independently on the exact Gaussian ODE
    # dy/dsigma = y sigma / (S^2 + sigma^2), y = x - MU: Heun on every step, Euler on the last to 0,
    # on the EDM grid sigma_i = (80^(1/7) + i/(n-1) (0.002^(1/7) - 80^(1/7)))^7
    sig = [(80.0 ** (1 / 7) + i / (n - 1) * (0.002 ** (1 / 7) - 80.0 ** (1 / 7))) ** 7 for i in range(n)] + [0.0]
    y = 1.0
    for cur, nxt in itertools.pairwise(sig):
        d = y * cur / (S**2 + cur**2)
        y_next = y + (nxt - cur) * d
        if nxt > 0:
            y_next = y + (nxt - cur) * 0.5 * (d + y_next * nxt / (S**2 + nxt**2))
        y = y_next
    return y


def test_heun_18_steps_gaussian(gauss):
    # Our sampler is EDM's Algorithm 1 step for step: it equals the independent recursion above to
    # rounding. That recursion maps x_T to MU + 1.0553 * S/sqrt(S^2 + 80^2) (x_T - MU): with 18 steps
    # the EDM grid's own discretisation error inflates the std by 5.5 % on this Gaussian (coarse
    # steps, ratio ~0.55, where sigma ~ S), so the 2 % at 18 steps cannot hold for a faithful
    # EDM Heun. We check the exact value at 18 steps and the 2 % bound at 36 steps (measured 1.2 %).
    x_T = 80.0 * _noise()
    x = samplers.heun_sample(gauss, x_T, schedules.karras_sigmas(18, dtype=torch.float64))
    gain = _edm_heun_gain(18)
    assert abs(gain - 1.0553 * S / (S**2 + 80.0**2) ** 0.5) < 1e-4 * S / 80
    assert torch.allclose(x, MU + gain * (x_T - MU), rtol=0, atol=1e-10)
    assert abs(float(x.mean()) - MU) < 0.02 * S
    _check_moments(samplers.heun_sample(gauss, 80.0 * _noise(), schedules.karras_sigmas(36, dtype=torch.float64)))


def test_heun_is_second_order_euler_first_order(gauss):
    def err(sampler, n):
        x = sampler(gauss, 80.0 * _noise()[:2000], schedules.karras_sigmas(n, dtype=torch.float64))
        exact = MU + S / (S**2 + 80.0**2) ** 0.5 * (80.0 * _noise()[:2000] - MU)  # exact PF-ODE map
        return float((x - exact).abs().max())

    r_heun = err(samplers.heun_sample, 18) / err(samplers.heun_sample, 36)
    r_euler = err(samplers.euler_sample, 40) / err(samplers.euler_sample, 80)
    assert r_heun > 3.5, r_heun  # ~4 for a 2nd-order method
    assert 1.6 < r_euler < 2.6, r_euler  # ~2 for a 1st-order method


def test_heun_with_churn_gaussian(gauss):
    sig = schedules.karras_sigmas(60, dtype=torch.float64)
    x = samplers.heun_sample(gauss, 80.0 * _noise(), sig, S_churn=10, generator=torch.Generator().manual_seed(1))
    _check_moments(x)


def test_euler_200_steps_gaussian(gauss):
    sig = schedules.karras_sigmas(200, dtype=torch.float64)
    _check_moments(samplers.euler_sample(gauss, 80.0 * _noise(), sig))


def test_wrong_sampler_fails_moment_check(gauss):
    # a sign error in the ODE direction is caught by the same check (the test can fail)
    def bad(x, sigma, **_):
        return 2 * x - gauss(x, sigma)

    sig = schedules.karras_sigmas(18, dtype=torch.float64)
    with pytest.raises(AssertionError):
        _check_moments(samplers.euler_sample(bad, 80.0 * _noise(), sig))


@pytest.fixture(scope="module")
def eps_net():
    sched = schedules.VPSchedule("linear", 1000)
    return sched, precond.EpsFromDenoiser(gaussian_denoiser(), sched)


def test_ddim_eta0_gaussian(eps_net):
    sched, eps = eps_net
    # DDIM is Euler in (x / sqrt(ab), sigma): 1 000 steps bring its std error to ~1.4 %
    _check_moments(samplers.ddim_sample(eps, sched, _noise(), steps=1000, eta=0.0))


def test_ddpm_ancestral_gaussian(eps_net):
    sched, eps = eps_net
    _check_moments(samplers.ddpm_sample(eps, sched, _noise(), generator=torch.Generator().manual_seed(2)))


@pytest.mark.slow
def test_ddim_eta1_gaussian(eps_net):
    sched, eps = eps_net
    x = samplers.ddim_sample(eps, sched, _noise(), steps=1000, eta=1.0, generator=torch.Generator().manual_seed(3))
    _check_moments(x)


def test_ddim_eta0_draws_no_noise(eps_net):
    sched, eps = eps_net
    g = torch.Generator().manual_seed(5)
    state = g.get_state()
    samplers.ddim_sample(eps, sched, _noise()[:10], steps=10, eta=0.0, generator=g)
    assert torch.equal(g.get_state(), state)


def test_ddim_invert_then_sample_reconstructs(eps_net):
    sched, eps = eps_net
    x0 = MU + S * torch.randn(2000, 1, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    # the plain inversion (eps taken at the current sample, as diffusers / null-text inversion do)
    # is only approximately invertible: measured max error 0.057 at 100 steps; 3 fixed-point
    # refinements per step make it exact to 5e-6
    x_T = samplers.ddim_invert(eps, sched, x0, steps=100, fixed_point_iters=3)
    rec = samplers.ddim_sample(eps, sched, x_T, steps=100, eta=0.0)
    err = float((rec - x0).abs().max())
    assert err < 1e-3, err
    naive = samplers.ddim_sample(eps, sched, samplers.ddim_invert(eps, sched, x0, steps=100), steps=100)
    assert float((naive - x0).abs().max()) < 0.1


def test_ddim_invert_fixed_point_is_tighter(eps_net):
    sched, eps = eps_net
    x0 = MU + S * torch.randn(500, 1, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    errs = []
    for k in (0, 3):
        x_T = samplers.ddim_invert(eps, sched, x0, steps=20, fixed_point_iters=k)
        errs.append(float((samplers.ddim_sample(eps, sched, x_T, steps=20) - x0).abs().max()))
    assert errs[1] < errs[0]
    with pytest.raises(ValueError, match="fixed_point_iters"):
        samplers.ddim_invert(eps, sched, x0, steps=20, fixed_point_iters=-1)


def test_ddim_invert_calls_the_network_once_per_step_plus_refinements(eps_net):
    sched, eps = eps_net
    calls = []

    def counting(x, t, **kw):
        calls.append(int(t[0]))
        return eps(x, t, **kw)

    for k in (0, 2):
        calls.clear()
        samplers.ddim_invert(counting, sched, torch.zeros(3, 1, dtype=torch.float64), steps=10, fixed_point_iters=k)
        assert len(calls) == 10 * (1 + k)


def test_consistency_sample_with_exact_consistency_function():
    # for N(MU, S^2) the PF-ODE solution map is f(x, sigma) = MU + S / sqrt(S^2 + sigma^2) (x - MU)
    def f(x, sigma, **_):
        sig = sigma.reshape(-1, 1)
        return MU + S / (S**2 + sig**2).sqrt() * (x - MU)

    g = torch.Generator().manual_seed(0)
    # 10 N samples: the re-noising draws are not standardised, so shrink their Monte-Carlo error
    x1 = samplers.consistency_sample(f, (10 * N, 1), sigmas=(80.0,), generator=g, dtype=torch.float64)
    _check_moments(x1)
    x3 = samplers.consistency_sample(f, (10 * N, 1), sigmas=(80.0, 2.0, 0.5), generator=g, dtype=torch.float64)
    _check_moments(x3)


def test_callback_can_replace_x(gauss):
    seen = []

    def cb(i, x, sigma, x0):
        seen.append((i, sigma))
        return torch.zeros_like(x) if i == 16 else None

    sig = schedules.karras_sigmas(18)
    out = samplers.heun_sample(gauss, 80 * torch.randn(4, 1), sig, callback=cb)
    assert [i for i, _ in seen] == list(range(18)) and seen[-1][1] == 0.0
    # after the forced zero at step 16 the last Euler step to sigma=0 gives D*(0; sigma_min)
    sm = float(sig[-2])
    assert torch.allclose(out, torch.full_like(out, MU + S**2 / (S**2 + sm**2) * (0 - MU)), atol=1e-6)


def test_karras_sigmas_properties():
    for n in (2, 5, 18, 100):
        s = schedules.karras_sigmas(n, 0.002, 80.0, 7.0, dtype=torch.float64)
        assert s.shape == (n + 1,)
        assert float(s[0]) == 80.0 and float(s[-2]) == 0.002 and float(s[-1]) == 0.0
        assert bool((s[1:] < s[:-1]).all())
    # closed form at i = 1 of n = 3
    s = schedules.karras_sigmas(3, 0.002, 80.0, 7.0, dtype=torch.float64)
    expect = (80 ** (1 / 7) + 0.5 * (0.002 ** (1 / 7) - 80 ** (1 / 7))) ** 7
    assert math.isclose(float(s[1]), expect, rel_tol=1e-12)
    ll = schedules.loglinear_sigmas(5, 0.01, 10.0, dtype=torch.float64)
    assert torch.allclose(ll[1:-1] / ll[:-2], torch.full((4,), (0.01 / 10) ** 0.25, dtype=torch.float64))


def test_vp_schedule_sigma_roundtrip():
    for kind in ("linear", "cosine"):
        sch = schedules.VPSchedule(kind, 1000)
        ab = sch.alphas_cumprod
        assert bool((ab[1:] < ab[:-1]).all()) and 0 < float(ab[-1]) < float(ab[0]) < 1
        t = torch.tensor([0.0, 3.0, 10.5, 500.25, 998.0])
        assert torch.allclose(sch.t_from_sigma(sch.sigma(t)).double(), t.double(), atol=1e-3)
    lin = schedules.VPSchedule("linear")
    assert math.isclose(float(lin.betas[0]), 1e-4) and math.isclose(float(lin.betas[-1]), 0.02)
    assert torch.allclose(lin.sigma(7), ((1 - lin.alphas_cumprod[7]) / lin.alphas_cumprod[7]).sqrt())


def test_bad_inputs(gauss):
    sig = schedules.karras_sigmas(4)
    with pytest.raises(ValueError, match="x_T"):
        samplers.heun_sample(gauss, torch.tensor([[float("nan")]]), sig)
    with pytest.raises(TypeError, match="floating point"):
        samplers.euler_sample(gauss, torch.zeros(2, 1, dtype=torch.long), sig)
    with pytest.raises(ValueError, match="decreasing"):
        samplers.euler_sample(gauss, torch.zeros(2, 1), [1.0, 2.0, 0.0])
    with pytest.raises(ValueError, match="sigma_min"):
        schedules.karras_sigmas(5, 0.0, 80.0)
    with pytest.raises(ValueError, match="sigmas"):
        samplers.consistency_sample(gauss, (2, 1), sigmas=(0.001,))
    assert samplers.heun_sample(gauss, torch.zeros(0, 3), sig).shape == (0, 3)
