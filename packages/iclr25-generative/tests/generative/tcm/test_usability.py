"""Everyday-use checks: dtype handling, argument validation with clear messages, silent misuse."""

import copy

import numpy as np
import pytest
import torch

from iclr25.generative.diffusion.nn import MLPDenoiserNet
from iclr25.generative.diffusion.precond import EDMPrecond
from iclr25.generative.tcm import (
    ConsistencyTrainingLoss,
    ECTSchedule,
    TruncatedCM,
    TruncatedConsistencyLoss,
    consistency_sample,
    pseudo_huber,
    sample_truncated_log_student_t,
    sample_truncated_lognormal,
    train_consistency,
    train_tcm,
    train_truncated,
)


def _net() -> EDMPrecond:
    return EDMPrecond(MLPDenoiserNet(2, hidden=8, depth=1, emb_dim=8))


def _tcm() -> TruncatedCM:
    torch.manual_seed(0)
    net = _net()
    return TruncatedCM(copy.deepcopy(net), copy.deepcopy(net).requires_grad_(False), 1.0)


def test_sample_follows_the_model_dtype():
    """After ``tcm.double()`` the sampler's noise must be float64 too (it used to crash in a matmul)."""
    tcm32 = _tcm()
    tcm64 = copy.deepcopy(tcm32).double()
    x64 = consistency_sample(tcm64, (4, 2), (80.0, 1.0), generator=torch.Generator().manual_seed(0))
    assert x64.dtype == torch.float64
    x32 = consistency_sample(tcm32, (4, 2), (80.0, 1.0), generator=torch.Generator().manual_seed(0))
    assert x32.dtype == torch.float32
    torch.testing.assert_close(x64.float(), x32, rtol=1e-4, atol=1e-4)
    # an explicit dtype still wins
    assert consistency_sample(tcm64, (4, 2), dtype=torch.float64).dtype == torch.float64


def test_sample_names_bad_shape_and_sigmas():
    tcm = _tcm()
    with pytest.raises(TypeError, match="sigmas"):
        consistency_sample(tcm, (3, 2), 80.0)
    with pytest.raises(TypeError, match="shape"):
        consistency_sample(tcm, 5)
    assert consistency_sample(tcm, (np.int64(3), 2)).shape == (3, 2)


def test_pseudo_huber_rejects_mismatched_shapes_and_negative_c():
    # used to broadcast silently: (3, 2) vs (3, 1) gave sqrt(2) per row instead of an error
    with pytest.raises(ValueError, match="same shape"):
        pseudo_huber(torch.zeros(3, 2), torch.ones(3, 1))
    with pytest.raises(ValueError, match="same shape"):
        pseudo_huber(torch.zeros(1, 2), torch.ones(3, 2))
    with pytest.raises(ValueError, match="c must be >= 0"):
        pseudo_huber(torch.zeros(3, 2), torch.zeros(3, 2), -1.0)  # used to return 2, not 0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"t_min": 10.0, "t_max": 1.0}, "t_min"),  # used to return t_max for every sample
        ({"t_min": 0.0}, "t_min"),  # used to fail with "math domain error"
        ({"n": -1}, "n must"),
        ({"n": 2.5}, "n must"),
    ],
)
def test_truncated_samplers_validate_arguments(kwargs, match):
    ln = {"n": 5, "mean": 0.0, "std": 1.0, "t_min": 0.1, "t_max": 80.0, **kwargs}
    st = {"n": 5, "df": 0.01, "loc": 0.0, "scale": 0.2, "t_min": 0.1, "t_max": 80.0, **kwargs}
    with pytest.raises(ValueError, match=match):
        sample_truncated_lognormal(**ln)
    with pytest.raises(ValueError, match=match):
        sample_truncated_log_student_t(**st)


def test_truncated_samplers_validate_spread():
    with pytest.raises(ValueError, match="std"):  # negative std used to return t_max silently
        sample_truncated_lognormal(5, 0.0, -1.0, 0.1, 80.0)
    with pytest.raises(ValueError, match="df"):  # df = 0 used to return NaN
        sample_truncated_log_student_t(5, 0.0, 0.0, 0.2, 1.0, 80.0)
    with pytest.raises(ValueError, match="scale"):
        sample_truncated_log_student_t(5, 0.01, 0.0, 0.0, 1.0, 80.0)
    assert sample_truncated_lognormal(0, 0.0, 1.0, 0.1, 80.0).shape == (0,)


def test_loss_overrides_are_validated():
    tcm, x0, sched = _tcm(), torch.randn(5, 2), ECTSchedule()
    with pytest.raises(ValueError, match=r"t must have shape \(5,\)"):
        ConsistencyTrainingLoss(sched)(tcm.student, x0, 0, t=torch.ones(3))
    loss = TruncatedConsistencyLoss(sched)
    with pytest.raises(ValueError, match=r"t must have shape \(5,\)"):
        loss(tcm, x0, 0, t=torch.ones(3))
    with pytest.raises(ValueError, match=r"boundary must have shape \(5,\)"):
        loss(tcm, x0, 0, t=torch.full((5,), 2.0), boundary=torch.ones(3, dtype=torch.bool))
    with pytest.raises(TypeError, match=r"boundary expects dtype torch\.bool"):
        loss(tcm, x0, 0, t=torch.full((5,), 2.0), boundary=torch.tensor([1.0, 0, 0, 0, 0]))
    # a boundary mask without t used to be silently replaced by a random one
    with pytest.raises(ValueError, match="boundary is only used together with t"):
        loss(tcm, x0, 0, boundary=torch.ones(5, dtype=torch.bool))
    out = loss(tcm, x0, 0, t=torch.tensor([1.0, 2.0, 1.0, 3.0, 4.0]))  # boundary defaults to t <= t'
    assert out["boundary"].tolist() == [True, False, True, False, False]


def test_drivers_reject_the_wrong_stage_loss_and_a_module_factory():
    sched, data = ECTSchedule(), torch.randn(32, 2)
    with pytest.raises(TypeError, match=r"loss must be a TruncatedConsistencyLoss.*train_consistency"):
        train_truncated(_tcm(), data, 1, ConsistencyTrainingLoss(sched), batch_size=8)  # was an IndexError
    with pytest.raises(TypeError, match=r"loss must be a ConsistencyTrainingLoss.*train_truncated"):
        train_consistency(_net(), data, 1, TruncatedConsistencyLoss(sched), batch_size=8)
    with pytest.raises(TypeError, match="net_factory"):  # a built model, not a factory
        train_tcm(_net(), data, 1, 1)
    with pytest.raises(TypeError, match="net_factory"):
        train_tcm(lambda: "not a module", data, 1, 1)


def test_schedule_accepts_numpy_steps_and_repr_shows_k():
    s = ECTSchedule(q=2, double_every=10)
    assert s.ratio(np.int64(25)) == s.ratio(25) == 0.875  # used to say "step must be an int, got 25"
    with pytest.raises(ValueError, match="step"):
        s.ratio(2.0)
    assert "k=2.0" in repr(ECTSchedule(k=2.0))


def test_truncated_cm_rejects_infinite_t_prime():
    with pytest.raises(ValueError, match="t_prime"):  # inf routed every sample to the teacher
        TruncatedCM(_net(), _net().requires_grad_(False), float("inf"))


def test_empty_batch_gives_empty_losses():
    """B = 0 used to fail in pseudo_huber's reshape(0, -1) with an unrelated-looking RuntimeError."""
    assert pseudo_huber(torch.zeros(0, 2), torch.zeros(0, 2)).shape == (0,)
    tcm, sched = _tcm(), ECTSchedule()
    assert ConsistencyTrainingLoss(sched)(tcm.student, torch.zeros(0, 2), 0).shape == (0,)
    out = TruncatedConsistencyLoss(sched)(tcm, torch.zeros(0, 2), 0)
    assert out["per_sample"].shape == (0,) and float(out["loss"]) == 0.0
    torch.testing.assert_close(pseudo_huber(torch.tensor([3.0, -1.0]), torch.zeros(2)), torch.tensor([3.0, 1.0]))
