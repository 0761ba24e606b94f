"""Consistency losses in bfloat16: the shrinking Delta_t must not round to 0 (inf weight, NaN loss)."""

import copy

import torch

from iclr25.generative.diffusion.nn import MLPDenoiserNet
from iclr25.generative.diffusion.precond import EDMPrecond
from iclr25.generative.tcm import ConsistencyTrainingLoss, ECTSchedule, TruncatedCM, TruncatedConsistencyLoss

# stage 20 with double_every=1: ratio at its 0.999 cap, Delta_t ~ 0.1% of t, below bfloat16's spacing
LATE = 20


def _net() -> EDMPrecond:
    torch.manual_seed(0)
    return EDMPrecond(MLPDenoiserNet(2, hidden=16, depth=2, emb_dim=8)).to(torch.bfloat16)


def test_stage1_loss_finite_in_bf16_late_stage():
    net = _net()
    x0 = torch.randn(64, 2, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
    loss = ConsistencyTrainingLoss(ECTSchedule(q=2, double_every=1))
    out = loss(net, x0, LATE, generator=torch.Generator().manual_seed(0))
    assert out.dtype == torch.bfloat16
    assert bool(torch.isfinite(out).all())


def test_stage2_loss_finite_in_bf16_late_stage():
    net = _net()
    tcm = TruncatedCM(copy.deepcopy(net), copy.deepcopy(net).requires_grad_(False), 1.0)
    x0 = torch.randn(64, 2, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
    loss = TruncatedConsistencyLoss(ECTSchedule(q=2, double_every=1), 1.0)
    out = loss(tcm, x0, LATE, generator=torch.Generator().manual_seed(0))
    assert out["per_sample"].dtype == torch.bfloat16
    assert bool(torch.isfinite(out["per_sample"]).all()) and bool(torch.isfinite(out["loss"]))


def test_stage1_loss_float32_unchanged_dtype():
    torch.manual_seed(0)
    net = EDMPrecond(MLPDenoiserNet(2, hidden=16, depth=2, emb_dim=8))
    x0 = torch.randn(8, 2, generator=torch.Generator().manual_seed(1))
    out = ConsistencyTrainingLoss(ECTSchedule(q=2, double_every=1))(net, x0, LATE, generator=torch.Generator())
    assert out.dtype == torch.float32
    out64 = ConsistencyTrainingLoss(ECTSchedule(q=2, double_every=1))(
        net.double(), x0.double(), LATE, generator=torch.Generator()
    )
    assert out64.dtype == torch.float64
