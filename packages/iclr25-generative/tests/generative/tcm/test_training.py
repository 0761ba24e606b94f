"""The two-stage drivers: ``train_tcm`` wiring, the continued Delta_t counter and failure handling."""

import copy

import numpy as np
import pytest
import torch
from torch import nn

from iclr25.generative.diffusion.nn import MLPDenoiserNet
from iclr25.generative.diffusion.precond import EDMPrecond
from iclr25.generative.tcm import (
    ConsistencyTrainingLoss,
    ECTSchedule,
    TCMConfig,
    TruncatedCM,
    TruncatedConsistencyLoss,
    train_consistency,
    train_tcm,
    train_truncated,
)


def _net() -> nn.Module:
    return EDMPrecond(MLPDenoiserNet(2, hidden=16, depth=1, emb_dim=8))


def _data() -> torch.Tensor:
    return 0.5 * torch.randn(64, 2, generator=torch.Generator().manual_seed(0))


def _same(a: nn.Module, b: nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def _record_steps(monkeypatch, cls) -> list[int]:
    seen: list[int] = []
    forward = cls.forward

    def spy(self, model, x0, step, *args, **kwargs):
        seen.append(step)
        return forward(self, model, x0, step, *args, **kwargs)

    monkeypatch.setattr(cls, "forward", spy)
    return seen


def test_train_tcm_wiring_and_continued_counter(monkeypatch):
    s1 = _record_steps(monkeypatch, ConsistencyTrainingLoss)
    s2 = _record_steps(monkeypatch, TruncatedConsistencyLoss)
    cfg = TCMConfig(batch_size=16)
    stage1, tcm = train_tcm(_net, _data(), 3, 2, t_prime=1.0, seed=0, config=cfg)
    # the Delta_t stage counter is not reset at stage 2: it continues from stage 1's last step
    assert s1 == [0, 1, 2] and s2 == [3, 4]
    assert isinstance(tcm, TruncatedCM) and tcm.t_prime == 1.0
    assert tcm.teacher is stage1 and not any(p.requires_grad for p in stage1.parameters())
    assert all(p.requires_grad for p in tcm.student.parameters())
    assert not _same(tcm.student, stage1)  # stage 2 moved the student away from its initialisation
    # same seed -> same models; with no stage-2 steps the student is exactly the stage-1 model
    stage1_b, tcm_b = train_tcm(_net, _data(), 3, 0, t_prime=1.0, seed=0, config=cfg)
    assert _same(stage1_b, stage1) and _same(tcm_b.student, stage1)


def test_train_tcm_pretrains_before_stage1_when_configured():
    torch.manual_seed(0)
    init = _net()  # train_tcm seeds torch with ``seed`` before calling the factory
    stage1, tcm = train_tcm(_net, _data(), 0, 0, seed=0, config=TCMConfig(pretrain_steps=2, batch_size=16))
    assert not _same(stage1, init) and _same(tcm.student, stage1)
    stage1_none, _ = train_tcm(_net, _data(), 0, 0, seed=0, config=TCMConfig(batch_size=16))
    assert _same(stage1_none, init)


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"stage1_steps": -1}, ValueError, "stage1_steps"),
        ({"stage2_steps": 1.5}, ValueError, "stage2_steps"),
        ({"t_prime": 0.001}, ValueError, "t_prime"),
        ({"t_prime": 80.0}, ValueError, "t_prime"),
        ({"data": torch.tensor([[0.0, float("nan")]])}, ValueError, "finite"),
        ({"data": torch.zeros(4, 2, dtype=torch.long)}, TypeError, "floating"),
        # used to be iterated row by row and fail with "x0 expects a torch.Tensor", an argument never passed
        ({"data": np.zeros((64, 2), np.float32)}, TypeError, r"data expects.*torch\.from_numpy"),
    ],
)
def test_train_tcm_bad_input(kwargs, exc, match):
    args = {"net_factory": _net, "data": _data(), "stage1_steps": 1, "stage2_steps": 1, **kwargs}
    with pytest.raises(exc, match=match):
        train_tcm(**args)


class NaNAfter(nn.Module):
    """Affine denoiser whose grad-tracked (online) pass turns NaN from its ``k``-th call on."""

    def __init__(self, k: int) -> None:
        super().__init__()
        self.a, self.k, self.calls = nn.Parameter(torch.tensor(1.0)), k, 0

    def forward(self, x, t, **_):
        if torch.is_grad_enabled():
            self.calls += 1
        return self.a * x * (float("nan") if self.calls > self.k else 1.0)


@pytest.mark.parametrize("stage", [1, 2])
def test_non_finite_loss_reports_step_and_leaves_model_untouched(stage):
    sched = ECTSchedule(double_every=1)
    if stage == 1:
        model = NaNAfter(2)
        run = lambda: train_consistency(model, _data(), 5, ConsistencyTrainingLoss(sched), start_step=7, batch_size=8)  # noqa: E731
    else:
        model = TruncatedCM(NaNAfter(2), NaNAfter(99).requires_grad_(False), 1.0)
        run = lambda: train_truncated(model, _data(), 5, TruncatedConsistencyLoss(sched), start_step=7, batch_size=8)  # noqa: E731
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(FloatingPointError, match=r"at step 2\b.*global step offset 7"):
        run()
    after = model.state_dict()
    assert all(torch.equal(after[k], v) for k, v in before.items())


def test_train_truncated_rejects_a_plain_model():
    torch.manual_seed(0)
    with pytest.raises(TypeError, match="tcm must be a TruncatedCM, got EDMPrecond"):
        train_truncated(_net(), _data(), 1, TruncatedConsistencyLoss(ECTSchedule()), batch_size=8)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_numpy_data_hint_converts_to_the_model_dtype(dtype):
    """The hint used to be a bare torch.from_numpy(data): numpy's float64 then crashed a float32 network."""
    torch.manual_seed(0)
    model, sched = _net().to(dtype), ECTSchedule(double_every=1)
    arr = np.random.default_rng(0).normal(size=(64, 2))  # numpy's default float64
    with pytest.raises(TypeError, match=rf"torch\.from_numpy\(data\)\.to\({dtype}\)"):
        train_consistency(model, arr, 1, ConsistencyTrainingLoss(sched), batch_size=8)
    tcm = TruncatedCM(_net().to(dtype), _net().to(dtype).requires_grad_(False), 1.0)
    with pytest.raises(TypeError, match=rf"\.to\({dtype}\)"):
        train_truncated(tcm, arr, 1, TruncatedConsistencyLoss(sched), batch_size=8)
    before = copy.deepcopy(model)
    train_consistency(model, torch.from_numpy(arr).to(dtype), 1, ConsistencyTrainingLoss(sched), batch_size=8)
    assert not _same(before, model)  # the suggested conversion trains
