"""Smoke check of the whole core (acceptance item 9): train an 8x8 digits prior, compare digits-FD."""

import logging
import time

import pytest
import torch

from iclr25.generative.diffusion import data, losses, metrics, nn, precond, samplers, schedules, training

log = logging.getLogger(__name__)


def _sample(den, n, seed):
    g = torch.Generator().manual_seed(seed)
    sig = schedules.karras_sigmas(18)
    return samplers.heun_sample(den, sig[0] * torch.randn(n, 1, 8, 8, generator=g), sig).clamp(-1, 1)


@pytest.mark.repro
@pytest.mark.slow  # ~minutes on a loaded 2-core machine; see the report for the figures
def test_digits_prior_beats_gaussian_fit():
    t0 = time.perf_counter()
    torch.manual_seed(0)
    train = data.digits(8, "train").images
    ref = data.digits(8, "test").images
    feat = metrics.digits_feature_net()
    assert feat.test_accuracy >= 0.95

    den = precond.EDMPrecond(nn.UNet2D(1, 1, ch=32), sigma_data=0.5)
    untrained = _sample(den, 300, 1)
    ema = training.EMA(den, decay=0.995)
    hist = training.train(
        den, lambda m, x, g: losses.edm_loss(m, x, generator=g), train, steps=1500, lr=2e-3, batch_size=64, ema=ema,
        warmup=100,
    )  # fmt: skip
    x = _sample(ema.model, 300, 1)

    flat = train.flatten(1).double()
    mean, cov = flat.mean(0), torch.cov(flat.T)
    gauss = torch.distributions.MultivariateNormal(mean, cov + 1e-6 * torch.eye(64)).sample((300,))
    gauss = gauss.float().reshape(-1, 1, 8, 8).clamp(-1, 1)

    fd_model = metrics.digits_fd(x, ref, feat)
    fd_gauss = metrics.digits_fd(gauss, ref, feat)
    fd_untrained = metrics.digits_fd(untrained, ref, feat)
    fd_data = metrics.digits_fd(train[:300], ref, feat)
    msg = (
        f"digits-FD: model {fd_model:.2f}, gaussian fit {fd_gauss:.2f}, untrained {fd_untrained:.2f}, "
        f"train data {fd_data:.2f}; ratio gauss/model {fd_gauss / fd_model:.2f}; final loss "
        f"{sum(hist['loss'][-100:]) / 100:.4f}; {time.perf_counter() - t0:.1f} s"
    )
    log.warning(msg)
    print(msg)
    assert fd_gauss / fd_model >= 3.0, msg
    assert fd_untrained > 3 * fd_gauss, msg
