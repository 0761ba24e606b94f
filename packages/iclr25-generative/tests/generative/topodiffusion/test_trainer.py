"""TopoDiffusionTrainer: training step, bad counts, sampling shapes; count_accuracy."""

import pytest
import torch

from iclr25.generative.diffusion.nn import UNet2D
from iclr25.generative.diffusion.schedules import VPSchedule
from iclr25.generative.topodiffusion import TopoDiffusionTrainer, count_accuracy, disk_masks


def _trainer(lam=0.05, **kw):
    torch.manual_seed(0)
    unet = UNet2D(1, 1, ch=8, ch_mult=(1, 2), num_classes=4, sample_size=8)
    return TopoDiffusionTrainer(unet, VPSchedule("cosine", T=1000), max_count=3, lam=lam, **kw)


def test_fit_records_topology_loss_only_with_lambda():
    masks, counts = disk_masks(32, size=8, counts=(1, 2), radius=(1.0, 1.5), seed=0)
    tr = _trainer(0.05, t_max_frac=1.0)
    h = tr.fit(masks, counts, steps=3, batch_size=8)
    assert len(h["loss"]) == 3 and all(torch.isfinite(torch.tensor(h["loss"])))
    assert all(v == v and v >= 0 for v in h["topo"])  # t < T for every image: never NaN
    h0 = _trainer(0.0).fit(masks, counts, steps=2, batch_size=8)
    assert all(v != v for v in h0["topo"])
    x = tr.sample(torch.tensor([1, 2, 3]), steps=3, generator=torch.Generator().manual_seed(0))
    assert x.shape == (3, 1, 8, 8) and x.abs().max() <= 1 + 1e-5


def test_topology_term_weights_the_loss():
    masks, counts = disk_masks(8, size=8, counts=(1, 2), radius=(1.0, 1.5), seed=1)
    x0 = masks * 2 - 1
    c = counts[:, None]
    a = _trainer(0.0).loss(x0, c, torch.Generator().manual_seed(0))
    tr = _trainer(1.0, t_max_frac=1.0)
    b = tr.loss(x0, c, torch.Generator().manual_seed(0))
    assert (b >= a - 1e-6).all() and (b > a).any()
    b.mean().backward()


def test_bad_counts_and_masks():
    tr = _trainer()
    masks, counts = disk_masks(4, size=8, counts=(1,), radius=(1.0, 1.5), seed=0)
    with pytest.raises(ValueError, match=r"\[0, 3\]"):
        tr.fit(masks, counts + 3, steps=1)
    with pytest.raises(ValueError, match=r"\[0, 3\]"):
        tr.sample(torch.tensor([-1]))
    with pytest.raises(ValueError, match="masks"):
        tr.fit(masks[:, 0], counts, steps=1)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        tr.fit(masks * 2 - 1, counts, steps=1)
    with pytest.raises(ValueError, match="num_classes"):
        TopoDiffusionTrainer(UNet2D(1, 1, ch=8, ch_mult=(1,), num_classes=2), VPSchedule("cosine"), max_count=3)
    with pytest.raises(ValueError, match="lam"):
        _trainer(-1.0)


def test_count_accuracy():
    masks, counts = disk_masks(40, seed=0)
    acc = count_accuracy(masks * 2 - 1, counts)
    assert acc["accuracy"] == 1.0 and acc["mae"] == 0.0 and set(acc["per_count"]) == set(counts.tolist())
    wrong = count_accuracy(masks * 2 - 1, counts + 1)
    assert wrong["accuracy"] == 0.0 and wrong["mae"] == 1.0
    with pytest.raises(ValueError, match="entries"):
        count_accuracy(masks, counts[:3])
