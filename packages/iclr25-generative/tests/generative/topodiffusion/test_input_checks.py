"""Argument checks found in review: lam, max_count, the loss backend, empty batches, count messages."""

import numpy as np
import pytest
import torch

from iclr25.generative.diffusion.nn import UNet2D
from iclr25.generative.diffusion.schedules import VPSchedule
from iclr25.generative.topodiffusion import TopoCountLoss, TopoDiffusionTrainer, TopoMatchLoss


def _unet():
    torch.manual_seed(0)
    return UNet2D(1, 1, ch=8, ch_mult=(1, 2), num_classes=4, sample_size=8)


@pytest.mark.parametrize("lam", [float("nan"), float("inf")])
def test_lam_must_be_a_finite_number(lam):
    # NaN failed every `lam > 0` test, so the trainer silently ran the lam = 0 (ADM-T) baseline
    with pytest.raises(ValueError, match="lam must be a finite number >= 0"):
        TopoDiffusionTrainer(_unet(), VPSchedule("cosine"), max_count=3, lam=lam)


def test_max_count_takes_numpy_ints_but_not_bool():
    # e.g. max_count=np.max(counts): refused before with "must be an int >= 1, got 3"
    tr = TopoDiffusionTrainer(_unet(), VPSchedule("cosine"), max_count=np.int64(3))
    assert tr.max_count == 3 and type(tr.max_count) is int
    assert tr.labels(torch.tensor([[3]])).tolist() == [3]
    with pytest.raises(ValueError, match="max_count"):
        TopoDiffusionTrainer(_unet(), VPSchedule("cosine"), max_count=True)


def test_count_loss_checks_its_backend_when_built():
    # a typo used to surface only at the first forward (in a trainer: the first step with t < T/2)
    with pytest.raises(ValueError, match="backend must be one of"):
        TopoCountLoss(backend="ripser")
    # cripser has only the 4-connected construction; refused without needing cripser installed
    with pytest.raises(ValueError, match="4-connected"):
        TopoCountLoss(backend="cripser", connectivity=8)


def test_empty_batch_losses_support_backward():
    x = torch.zeros(0, 1, 6, 6, requires_grad=True)
    for loss in (TopoCountLoss((0, 1))(x, torch.zeros(0, 2, dtype=torch.long)), TopoMatchLoss()(x, x.detach())):
        assert loss.shape == (0,) and loss.dtype == x.dtype
        loss.sum().backward()  # raised "element 0 of tensors does not require grad"
        assert x.grad.shape == x.shape and not x.grad.any()
        x.grad = None


def test_sample_names_the_expected_counts_shape():
    tr = TopoDiffusionTrainer(_unet(), VPSchedule("cosine"), max_count=3)
    # the message read "(B,) or (B, 1) with B = None" when no batch size was imposed
    with pytest.raises(ValueError, match=r"counts must be \(B,\) or \(B, 1\), got shape \(\)"):
        tr.sample(torch.tensor(1), steps=2)
    # and the shape the caller passed, not the (B, 1) it is reshaped to
    with pytest.raises(ValueError, match=r"counts must be \(4,\) or \(4, 1\), got shape \(2,\)"):
        tr.loss(torch.zeros(4, 1, 8, 8), torch.tensor([1, 2]))
    with pytest.raises(ValueError, match=r"got shape \(2,\)$"):
        TopoCountLoss()(torch.zeros(4, 1, 8, 8), torch.tensor([1, 2]))
