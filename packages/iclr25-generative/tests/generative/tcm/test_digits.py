"""Digits variant wiring at tiny size: both arms start from the one stage-1 checkpoint."""

import math

import pytest
import torch

from iclr25.generative.diffusion.metrics import DigitsFeatureNet
from iclr25.generative.tcm import TruncatedCM, run_digits_variant
from iclr25.generative.tcm.experiment import DIGITS_STEPS, digits_option

TINY = {"batch_size": 4, "ch": 8, "n_samples": 32}


def _feature_net() -> DigitsFeatureNet:
    torch.manual_seed(0)  # untrained but fixed: enough to compare arms, no cached classifier needed
    return DigitsFeatureNet().eval().requires_grad_(False)


def _same(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


@pytest.fixture(scope="module")
def trained():
    torch.manual_seed(0)
    return run_digits_variant((2, 3, 2), seed=0, feature_net=_feature_net(), return_models=True, **TINY)


def test_shapes_and_finite_figures(trained):
    assert set(trained.scores) == {"stage1", "continued_ct", "tcm"}
    for arm in trained.scores.values():
        assert set(arm) == {"fd_1step", "fd_2step"}
        assert all(math.isfinite(v) and v >= -1e-6 for v in arm.values())
    assert math.isfinite(trained.floor)
    assert trained.steps == {"pretrain": 2, "stage1": 3, "extra": 2}
    x = trained.models["tcm"](torch.zeros(5, 1, 8, 8), torch.full((5,), 80.0))
    assert x.shape == (5, 1, 8, 8)
    assert set(trained.to_json()) == {"scores", "floor", "steps", "seconds"}


def test_tcm_teacher_is_the_stage1_checkpoint_and_both_arms_trained(trained):
    m = trained.models
    assert isinstance(m["tcm"], TruncatedCM)
    assert _same(m["tcm"].teacher, m["stage1"])  # frozen teacher == the shared checkpoint
    assert not any(p.requires_grad for p in m["tcm"].teacher.parameters())
    # both arms moved away from the checkpoint with their extra steps
    assert not _same(m["tcm"].student, m["stage1"])
    assert not _same(m["continued_ct"], m["stage1"])


def test_zero_extra_budget_gives_identical_arms():
    """With no extra steps both arms *are* the checkpoint, so every figure must match exactly.

    Fails if an arm starts from another model (fresh init, the other arm's result) or if the arms
    are sampled with different noise.
    """
    torch.manual_seed(0)
    r = run_digits_variant((1, 2, 0), seed=1, feature_net=_feature_net(), return_models=True, **TINY)
    assert _same(r.models["continued_ct"], r.models["stage1"])
    assert _same(r.models["tcm"].student, r.models["stage1"])
    for key in ("fd_1step", "fd_2step"):
        assert r.scores["tcm"][key] == r.scores["continued_ct"][key] == r.scores["stage1"][key]


@pytest.mark.parametrize(
    "kwargs",
    [{"steps": (1, 2)}, {"steps": (1, 0, 1)}, {"steps": (1, 2, -1)}, {"t_prime": 0.001}, {"n_samples": 1}],
)
def test_bad_input(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        run_digits_variant(**{"steps": (1, 1, 1), **kwargs})


def test_digits_option_parsing():
    assert digits_option("") is None and digits_option("0") is None
    assert digits_option("1") == DIGITS_STEPS
    assert digits_option(" 5,6,7 ") == (5, 6, 7)
    for bad in ("yes", "1,2", "1,0,2", "-1,2,3"):
        with pytest.raises(ValueError, match="ICLR25_TCM_DIGITS"):
            digits_option(bad)


@pytest.mark.gpu
def test_runs_on_cuda():
    r = run_digits_variant((2, 2, 2), device="cuda", feature_net=_feature_net(), return_models=True, **TINY)
    assert next(r.models["tcm"].student.parameters()).is_cuda
    assert all(math.isfinite(v) for arm in r.scores.values() for v in arm.values())
