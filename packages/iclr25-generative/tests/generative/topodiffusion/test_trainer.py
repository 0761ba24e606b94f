"""TopoDiffusionTrainer: training step, bad counts, sampling shapes; count_accuracy."""

import math

import numpy as np
import pytest
import torch

from iclr25.generative.diffusion.nn import UNet2D
from iclr25.generative.diffusion.schedules import VPSchedule
from iclr25.generative.topodiffusion import TopoCountLoss, TopoDiffusionTrainer, count_accuracy, disk_masks


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
    with pytest.raises(ValueError, match="t_max_frac"):
        _trainer(t_max_frac=0.0)
    with pytest.raises(ValueError, match="max_count"):
        TopoDiffusionTrainer(UNet2D(1, 1, ch=8, ch_mult=(1,), num_classes=2), VPSchedule("cosine"), max_count=0)
    with pytest.raises(ValueError, match="counts"):
        tr.fit(masks, counts[:2], steps=1)  # one count per mask
    with pytest.raises(ValueError, match="N = 0"):
        tr.fit(masks[:0], counts[:0], steps=1)
    with pytest.raises(TypeError, match="integer"):
        tr.sample(torch.tensor([1.0]))
    # the per-step loss is public too: a count outside [0, max_count] must not reach the embedding
    x0 = masks * 2 - 1
    for bad in (counts + 3, -counts):
        with pytest.raises(ValueError, match=r"\[0, 3\]"):
            tr.loss(x0, bad)


def test_count_accuracy():
    masks, counts = disk_masks(40, seed=0)
    acc = count_accuracy(masks * 2 - 1, counts)
    assert acc["accuracy"] == 1.0 and acc["mae"] == 0.0 and set(acc["per_count"]) == set(counts.tolist())
    wrong = count_accuracy(masks * 2 - 1, counts + 1)
    assert wrong["accuracy"] == 0.0 and wrong["mae"] == 1.0
    with pytest.raises(ValueError, match="entries"):
        count_accuracy(masks, counts[:3])
    with pytest.raises(ValueError, match="dim"):
        count_accuracy(masks, counts, dim=2)


def test_count_accuracy_hits_against_brute_force():
    # every third request is off by one: hits, per-count accuracy and MAE against a plain loop
    masks, counts = disk_masks(60, seed=5)
    req = counts.clone()
    req[::3] += 1
    acc = count_accuracy(masks * 2 - 1, req)
    for c in set(req.tolist()):
        idx = [i for i in range(60) if req[i] == c]
        hits = sum(int(counts[i]) == c for i in idx)
        assert acc["hits"][c] == hits and acc["totals"][c] == len(idx) and acc["per_count"][c] == hits / len(idx)
    assert acc["accuracy"] == 40 / 60
    assert acc["mae"] == pytest.approx(20 / 60, rel=torch.finfo(torch.float32).eps)  # an exact sum, one rounding
    assert acc["betti"] == counts.tolist()
    # the evaluation labels 4-connected components by default: a diagonal pair is two of them
    diag = torch.tensor([[1.0, -1.0], [-1.0, 1.0]])[None, None]
    assert count_accuracy(diag, [2])["accuracy"] == 1.0
    assert count_accuracy(diag, [1], connectivity=8)["accuracy"] == 1.0


class _LinearEps(torch.nn.Module):
    """eps_theta(x_t) = s * x_t: a known network, so the loss can be written out by hand; records labels."""

    def __init__(self):
        super().__init__()
        self.s = torch.nn.Parameter(torch.tensor(0.5))
        self.labels = []

    def forward(self, x, t, class_labels=None):
        self.labels.append(class_labels.clone())
        return self.s * x


@pytest.mark.parametrize("gamma", [None, 5.0])
def test_loss_is_simple_plus_lambda_topo_below_half_t(gamma):
    # L = ||eps - eps_theta||^2 + lam * w(t) * 1[t < T/2] * L_top(clamp(x0_hat, -1, 1), c), per image
    sched = VPSchedule("cosine", T=1000)
    net = _LinearEps()
    tr = TopoDiffusionTrainer(net, sched, max_count=5, min_snr_gamma=gamma)  # lam 0.05, t_max_frac 0.5
    masks, counts = disk_masks(48, size=12, counts=(1, 2, 3), radius=(1.0, 2.0), seed=3)
    x0 = masks * 2 - 1
    got = tr.loss(x0, counts, torch.Generator().manual_seed(0))
    assert torch.equal(net.labels[-1], counts)  # conditioned on the requested count
    # the same draws, in the trainer's order: t, then eps
    g = torch.Generator().manual_seed(0)
    t = torch.randint(0, 1000, (48,), generator=g)
    eps = torch.randn(x0.shape, generator=g)
    ab = sched.alphas_cumprod[t].float().view(-1, 1, 1, 1)
    x_t = ab.sqrt() * x0 + (1 - ab).sqrt() * eps
    eps_hat = 0.5 * x_t
    simple = (eps_hat - eps).pow(2).mean((1, 2, 3))
    x0_hat = ((x_t - (1 - ab).sqrt() * eps_hat) / ab.sqrt()).clamp(-1, 1)
    topo = TopoCountLoss()(x0_hat, counts)
    snr = ab.flatten() / (1 - ab.flatten())
    w = torch.ones(48) if gamma is None else snr.clamp(max=gamma) / snr
    low = t < 500
    assert low.any() and (~low).any() and (topo[low] > 0).any()  # both branches are exercised
    want = simple + 0.05 * w * low * topo
    # identical float32 operations up to summation order: relative error <= (pixels per image) * eps
    tol = 144 * torch.finfo(torch.float32).eps
    torch.testing.assert_close(got, want, rtol=tol, atol=tol)
    assert tr.history["topo"][-1] == pytest.approx(float((w * topo)[low].mean()), rel=tol)


def test_labels_and_sampling_are_conditioned_on_the_counts():
    net = _LinearEps()
    tr = TopoDiffusionTrainer(net, VPSchedule("cosine", T=1000), max_count=3, dims=(0, 1))
    c = torch.tensor([[2, 3], [0, 1], [3, 0]])
    assert tr.labels(c).tolist() == [2 * 4 + 3, 0 * 4 + 1, 3 * 4 + 0]  # c0 * (max_count + 1) + c1
    x = tr.sample(c, steps=4, generator=torch.Generator().manual_seed(0), size=6)
    assert x.shape == (3, 1, 6, 6) and len(net.labels) == 4
    assert all(torch.equal(lab, tr.labels(c)) for lab in net.labels)


def test_sample_checks_size():
    tr = TopoDiffusionTrainer(_LinearEps(), VPSchedule("cosine", T=1000), max_count=3)
    with pytest.raises(ValueError, match=r"size must be given when unet\.sample_size is not set"):
        tr.sample(torch.tensor([1]), steps=2)
    tr = _trainer()  # a UNet with sample_size = 8
    # `size or sample_size` turned an explicit size=0 into 8x8 samples
    for bad in (0, -3):
        with pytest.raises(ValueError, match="size must be >= 1"):
            tr.sample(torch.tensor([1]), steps=2, size=bad)
    for bad in (6.0, True):
        with pytest.raises(TypeError, match="size must be an int"):
            tr.sample(torch.tensor([1]), steps=2, size=bad)
    g = torch.Generator().manual_seed(0)
    assert tr.sample(torch.tensor([1, 2]), steps=2, generator=g, size=np.int64(4)).shape == (2, 1, 4, 4)


def test_loss_without_any_image_below_t_max_is_the_simple_loss():
    # with t_max_frac = 0.01 only t < 10 gets the topology term; none of these 4 draws is below 10,
    # so the loss is L_simple alone and the recorded topology loss is NaN (no image had it)
    sched = VPSchedule("cosine", T=1000)
    tr = TopoDiffusionTrainer(_LinearEps(), sched, max_count=3, lam=1.0, t_max_frac=0.01)
    masks, counts = disk_masks(4, size=8, counts=(1, 2), radius=(1.0, 1.5), seed=0)
    x0 = masks * 2 - 1
    got = tr.loss(x0, counts, torch.Generator().manual_seed(0))
    g = torch.Generator().manual_seed(0)
    t = torch.randint(0, 1000, (4,), generator=g)
    assert (t >= 10).all()
    eps = torch.randn(x0.shape, generator=g)
    ab = sched.alphas_cumprod[t].float().view(-1, 1, 1, 1)
    x_t = ab.sqrt() * x0 + (1 - ab).sqrt() * eps
    want = (0.5 * x_t - eps).pow(2).mean((1, 2, 3))
    # the same float32 operations up to summation order: relative error <= (pixels per image) * eps
    tol = 64 * torch.finfo(torch.float32).eps
    torch.testing.assert_close(got, want, rtol=tol, atol=tol)
    assert math.isnan(tr.history["topo"][-1])
    assert tr.history["simple"][-1] == pytest.approx(float(want.mean()), rel=tol)


def test_count_accuracy_refuses_fractional_counts():
    # 8-connected, the diagonal pair is one component; a request of 1.5 was truncated to 1 and hit
    diag = torch.tensor([[1.0, -1.0], [-1.0, 1.0]])[None, None]
    for bad in ([1.5], torch.tensor([1.5]), [float("nan")], [float("inf")]):
        with pytest.raises(ValueError, match="counts must be whole numbers"):
            count_accuracy(diag, bad, connectivity=8)
    # whole numbers stored as floats are still counts
    assert count_accuracy(diag, [1.0], connectivity=8)["accuracy"] == 1.0
    assert count_accuracy(diag, torch.tensor([2.0]))["hits"] == {2: 1}


def test_sample_restores_each_submodules_train_flag():
    # sampling inside a training loop (a progress check) left the network in eval mode, so the
    # following loss() steps ran without dropout; a submodule the user had put in eval stays there
    torch.manual_seed(0)
    unet = UNet2D(1, 1, ch=8, ch_mult=(1, 2), num_classes=4, sample_size=8, dropout=0.5)
    tr = TopoDiffusionTrainer(unet, VPSchedule("cosine", T=1000), max_count=3)
    unet.train()
    next(m for m in unet.modules() if isinstance(m, torch.nn.Dropout)).eval()
    before = [m.training for m in unet.modules()]
    assert any(before) and not all(before)
    a = tr.sample(torch.tensor([1, 2]), steps=3, generator=torch.Generator().manual_seed(0))
    assert [m.training for m in unet.modules()] == before
    # the sampling itself ran in eval mode: with dropout 0.5 active, the same noise would not give the same masks
    b = tr.sample(torch.tensor([1, 2]), steps=3, generator=torch.Generator().manual_seed(0))
    assert torch.equal(a, b)
    unet.eval()
    tr.sample(torch.tensor([1]), steps=2, generator=torch.Generator().manual_seed(0))
    assert not any(m.training for m in unet.modules())
