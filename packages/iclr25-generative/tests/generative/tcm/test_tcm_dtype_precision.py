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


class _TimeOnly(torch.nn.Module):
    """f(x, t) = a x + t with a = 0: its outputs t and r are exact in float16, so d is known exactly."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Parameter(torch.tensor(0.0))

    def forward(self, x, t, **_):
        return self.a * x + t[:, None]


def test_stage1_loss_float16_small_t_is_the_weighted_distance_not_inf():
    """At t ~ eps the weight 1/Delta_t (~1e5) exceeds float16's 65504: it used to be cast to inf first,
    giving inf (or NaN where d rounded to 0) instead of the O(1) product w d."""
    sched = ECTSchedule(q=2, double_every=1)
    x0 = torch.zeros(5, 3, dtype=torch.float16)
    t32 = torch.tensor([0.0021, 0.0025, 0.1, 1.0, 80.0])
    got = ConsistencyTrainingLoss(sched)(
        _TimeOnly().half(), x0, LATE, generator=torch.Generator().manual_seed(0), t=t32
    )
    assert got.dtype == torch.float16
    r32 = sched.r(t32, LATE)
    assert float((1 / (t32 - r32)).max()) > 65504  # the case that overflowed
    # the network sees t and r in float16; its outputs differ by exactly t16 - r16 in each of the 3 dims
    t16, r16 = t32.half().double(), r32.half().double()
    c = 1e-8  # the loss's default pseudo-Huber constant
    want = (torch.sqrt(3 * (t16 - r16) ** 2 + c * c) - c) / (t32 - r32).double()
    # float16 output rounding (2^-11 relative) dominates the float32 steps (t32 - r32 is exact)
    torch.testing.assert_close(got.double(), want, rtol=2**-10, atol=0)
