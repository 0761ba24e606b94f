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


def test_ema_of_bfloat16_parameters_moves_and_resumes(tmp_path):
    # with decay 0.999 each step (1 - decay) * offset = 1e-3 is below half a bf16 ulp of weights in
    # [1, 2) (2**-8): an average kept in bf16 never moves, the float32 shadow must
    decay, n, offset = 0.999, 200, 1.0
    g = torch.Generator().manual_seed(0)
    model = torch.nn.Linear(4, 3).to(torch.bfloat16)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(1 + torch.rand(p.shape, generator=g))
    start = [p.detach().float().clone() for p in model.parameters()]
    ema = training.EMA(model, decay=decay)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(offset)  # exact in bf16: values in [2, 3) are spaced 2**-6
    for k in range(n):
        if k == n // 2:  # interrupt and resume half way
            torch.save(ema.state_dict(), tmp_path / "ema.pt")
            ema = training.EMA(model)
            ema.load_state_dict(torch.load(tmp_path / "ema.pt", weights_only=True))
        ema.update(model)
    frac = 1 - decay**n  # ~0.18 of the offset
    bf16_eps = torch.finfo(torch.bfloat16).eps
    for w0, p, pe in zip(start, model.parameters(), ema.model.parameters(), strict=True):
        assert pe.dtype == torch.bfloat16
        want = w0 + frac * (p.float() - w0)
        # one final rounding to bf16 (<= half an ulp, bounded by eps |want|) plus float32 drift of n lerps
        err = (pe.float() - want).abs()
        assert bool((err <= bf16_eps * want.abs() + 1e-4).all()), float(err.max())
        assert bool(((pe.float() - w0) > 0.1).all())  # a bf16 average would still equal w0

    # a state saved without "shadow" (before shadows existed) still loads, restarting from its weights
    state = ema.state_dict()
    assert state["shadow"]["weight"].dtype == torch.float32
    old = {k: v for k, v in state.items() if k != "shadow"}
    again = training.EMA(model)
    again.load_state_dict(old)
    assert all(torch.equal(a, b) for a, b in zip(again.model.parameters(), ema.model.parameters(), strict=True))
    loaded = again.model.weight.detach().float().clone()
    for _ in range(50):  # 50 steps of ~1e-3 each add up to several bf16 ulps: it keeps averaging
        again.update(model)
    assert bool((again.model.weight.float() - loaded > 4 * 2**-7).all())


def test_ema_state_of_float32_model_has_no_shadow():
    assert set(training.EMA(torch.nn.Linear(2, 2)).state_dict()) == {"steps", "decay", "gamma", "model"}
