"""TopoDiffusionTrainer.loss in half precision: the small-t noise term must not be rounded away."""

import pytest
import torch

from iclr25.generative.diffusion.schedules import VPSchedule
from iclr25.generative.topodiffusion import TopoDiffusionTrainer


class _Probe(torch.nn.Module):
    num_classes = 8

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(()))
        self.seen: dict[str, torch.Tensor] = {}

    def forward(self, x, t, class_labels=None):
        self.seen["x_t"], self.seen["t"] = x, t
        return x * self.w.to(x.dtype)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_trainer_loss_keeps_noise_at_small_t(dtype):
    net = _Probe().to(dtype)
    tr = TopoDiffusionTrainer(net, VPSchedule("linear", T=10), max_count=3, lam=0.0)
    x0 = torch.zeros(64, 1, 4, 4, dtype=dtype)
    out = tr.loss(x0, torch.zeros(64, dtype=torch.long), generator=torch.Generator().manual_seed(0))
    small = net.seen["t"] == 0  # ab(0) = 1 - 1e-4: 1 - ab is 0 in float16/bfloat16
    assert bool(small.any())
    assert net.seen["x_t"].dtype == dtype and out.dtype == dtype
    assert bool((net.seen["x_t"][small] != 0).all())


def test_trainer_loss_min_snr_bf16_dtype():
    net = _Probe().to(torch.bfloat16)
    tr = TopoDiffusionTrainer(net, VPSchedule("linear", T=10), max_count=3, lam=0.05, t_max_frac=1.0, min_snr_gamma=5.0)
    x0 = -torch.ones(8, 1, 4, 4, dtype=torch.bfloat16)
    out = tr.loss(x0, torch.ones(8, dtype=torch.long), generator=torch.Generator().manual_seed(0))
    assert out.dtype == torch.bfloat16 and bool(torch.isfinite(out).all())
