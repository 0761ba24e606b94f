"""Everyday workflows of a diffusers user: argument checks that name the argument."""

import pytest
import torch

from iclr25.generative.diffusion import data, losses, metrics, nn, precond, samplers, schedules, training


def test_ddpm_sample_zero_steps_is_an_error_not_all_steps():
    sch = schedules.VPSchedule(T=10)
    calls = []

    def eps_net(x, t):
        calls.append(t)
        return torch.zeros_like(x)

    with pytest.raises(ValueError, match="steps must be an int"):
        samplers.ddpm_sample(eps_net, sch, torch.randn(3, 2), steps=0)
    assert not calls
    samplers.ddpm_sample(eps_net, sch, torch.randn(3, 2))  # None still means all T steps
    assert len(calls) == 10


def test_ssim_rejects_batches_of_different_size():
    x, y = torch.rand(2, 1, 8, 8), torch.rand(3, 1, 8, 8)
    with pytest.raises(ValueError, match="x and y must have the same shape"):
        metrics.ssim(x, y)  # used to compare x with y[:2] and drop y[2] silently
    assert metrics.ssim(x, y[:2]).shape == (2,)


def test_unet_class_labels_out_of_range_name_the_argument():
    net = nn.UNet2D(1, 1, ch=16, ch_mult=(1, 2), num_classes=3)
    x, t = torch.randn(2, 1, 8, 8), torch.zeros(2)
    for bad in ([0, 4], [-1, 0]):
        with pytest.raises(ValueError, match=r"class_labels must be in \[0, 3\]"):
            net(x, t, class_labels=torch.tensor(bad))
    assert net(x, t, class_labels=torch.tensor([0, 3])).shape == x.shape  # 3 = the null class
    video = nn.VideoUNet(1, 1, ch=16, ch_mult=(1, 2), num_classes=3)
    with pytest.raises(ValueError, match=r"class_labels must be in \[0, 3\]"):
        video(torch.randn(2, 1, 2, 8, 8), t, class_labels=torch.tensor([0, 9]))


def test_video_unet_batch_errors_report_the_callers_batch():
    net = nn.VideoUNet(1, 1, ch=16, ch_mult=(1, 2), context_dim=8, num_classes=3)
    x, t = torch.randn(2, 1, 3, 8, 8), torch.zeros(2)
    with pytest.raises(ValueError, match=r"context batch must match x batch 2, got shape \(3, 4, 8\)"):
        net(x, t, context=torch.zeros(3, 4, 8))
    with pytest.raises(ValueError, match=r"class_labels batch must match x batch 2, got shape \(3,\)"):
        net(x, t, class_labels=torch.tensor([0, 1, 2]))


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: schedules.VPSchedule(beta_end=1.5), "beta_start and beta_end must be in"),
        (lambda: schedules.VPSchedule(beta_start=-1e-4), "beta_start and beta_end must be in"),
        (
            lambda: losses.ddpm_eps_loss(
                lambda x, t: x, torch.randn(4, 2), schedules.VPSchedule(T=10), min_snr_gamma=0.0
            ),
            "min_snr_gamma must be > 0",
        ),
        (lambda: training.EMA(torch.nn.Linear(2, 2), gamma=-1.0), "gamma must be > -1"),
        (lambda: nn.groupnorm_film_silu(torch.randn(2, 4, 3, 3), 0), "num_groups must be an int >= 1"),
        (lambda: data.digit_prompt(-1), r"label must be a digit in \[0, 9\]"),
        (
            lambda: training.train(
                precond.EDMPrecond(nn.MLPDenoiserNet(2)),
                lambda m, b, g: losses.edm_loss(m, b, generator=g),
                torch.randn(8, 2),
                1,
                batch_size=0,
            ),
            "batch_size must be an int >= 1",
        ),
    ],
    ids=["beta_end", "beta_start", "min_snr_gamma", "ema_gamma", "num_groups", "digit_prompt", "batch_size"],
)
def test_bad_arguments_are_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_defaults_and_valid_edges_unchanged():
    assert data.digit_prompt(0) == "a handwritten digit zero" and data.digit_prompt(9).endswith("nine")
    torch.testing.assert_close(schedules.VPSchedule().betas[[0, -1]], torch.tensor([1e-4, 0.02], dtype=torch.float64))
    ema = training.EMA(torch.nn.Linear(2, 2), gamma=0.0)
    ema.steps = 2
    assert ema.beta() == 0.5


def _ema_run(ema: training.EMA, model: torch.nn.Module, steps: range) -> None:
    for k in steps:
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(k)))
        ema.update(model)


@pytest.mark.parametrize("gamma", [None, 6.94])
def test_ema_state_round_trip_resumes_the_same_average(tmp_path, gamma):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    straight = training.EMA(model, decay=0.9, gamma=gamma)
    _ema_run(straight, model, range(8))
    # the same run, interrupted after 5 updates and resumed from a saved state
    torch.manual_seed(0)
    model2 = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    first = training.EMA(model2, decay=0.9, gamma=gamma)
    _ema_run(first, model2, range(5))
    torch.save(first.state_dict(), tmp_path / "ema.pt")
    resumed = training.EMA(model2)  # built with defaults: the state brings decay, gamma and steps
    resumed.load_state_dict(torch.load(tmp_path / "ema.pt", weights_only=True))
    assert (resumed.steps, resumed.decay, resumed.gamma) == (5, 0.9, gamma)
    _ema_run(resumed, model2, range(5, 8))
    for (name, a), b in zip(straight.model.state_dict().items(), resumed.model.state_dict().values(), strict=True):
        assert torch.equal(a, b), name


def test_ema_refuses_a_model_whose_parameters_changed_and_bad_states():
    model = torch.nn.Sequential(torch.nn.Linear(3, 4))
    ema = training.EMA(model)
    model.append(torch.nn.Linear(4, 2))  # e.g. adapters injected after the EMA was made
    with pytest.raises(ValueError, match="differ from the ones the EMA was created with"):
        ema.update(model)  # pairing by position would have averaged the wrong weights
    with pytest.raises(ValueError, match=r"state must be a dict from EMA.state_dict\(\)"):
        ema.load_state_dict({"model": {}})
    with pytest.raises(ValueError, match=r"state\['steps'\] must be an int"):
        ema.load_state_dict({**ema.state_dict(), "steps": -1})
