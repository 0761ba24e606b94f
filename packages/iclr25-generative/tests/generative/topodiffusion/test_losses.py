"""TopoCountLoss / TopoMatchLoss semantics, gradients at critical pixels, invariances, bad input."""

import numpy as np
import pytest
import torch

from iclr25.generative.topodiffusion import (
    TopoCountLoss,
    TopoMatchLoss,
    count_accuracy,
    critical_values,
    disk_masks,
    holed_masks,
    superlevel_persistence,
)


def _blobs(centres, size=16, peak=(1.0, 1.0, 1.0)):
    yy, xx = torch.meshgrid(torch.arange(size), torch.arange(size), indexing="ij")
    img = torch.full((size, size), -1.0)
    for (cy, cx), p in zip(centres, peak, strict=False):
        img = torch.maximum(img, -1 + (p + 1) * torch.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / 3.0))
    return img


def test_zero_for_clean_masks_with_exactly_c_components():
    masks, counts = disk_masks(12, seed=0)
    x = masks * 2 - 1
    loss = TopoCountLoss()(x, counts)
    assert torch.equal(loss, torch.zeros(12))
    # a requested count above the number of structures leaves nothing to preserve or remove
    assert torch.equal(TopoCountLoss()(x, counts + 1), torch.zeros(12))
    assert (TopoCountLoss()(x, counts - 1) > 0).all()  # one real component too many
    extra = x.clone()
    for i in range(12):
        free = (torch.nn.functional.max_pool2d(masks[i], 5, 1, 2)[0] == 0).nonzero()
        r, c = free[0].tolist()
        extra[i, 0, r, c] = -0.5  # a tiny, faint extra blob
    assert (TopoCountLoss()(extra, counts) > 0).all()


def _loss_one_by_one(x, counts, dims, preserve):
    # the definition, image by image: P = the c most persistent dots of each requested dimension
    out = []
    for i in range(x.shape[0]):
        total = x.new_zeros(())
        for j, dim in enumerate(dims):
            b, d = critical_values(x[i, 0], superlevel_persistence(x[i, 0], dim=dim))
            c = int(counts[i, j])
            keep = (
                ((1 - b[:c]) ** 2 + (d[:c] + 1) ** 2).sum() if preserve == "bounded" else -((b[:c] - d[:c]) ** 2).sum()
            )
            total = total + keep + ((b[c:] - d[c:]) ** 2).sum()
        out.append(total)
    return torch.stack(out)


@pytest.mark.parametrize("dims", [(0,), (1,), (0, 1)])
@pytest.mark.parametrize("preserve", ["bounded", "paper"])
def test_batched_loss_equals_the_per_image_definition(dims, preserve):
    g = torch.Generator().manual_seed(3)
    # clamping makes many pixels exactly +-1: ties in values and in persistence
    # 24 images: the batched (lockstep) persistence path
    x0 = (torch.randn(24, 1, 12, 12, generator=g) * 1.5).clamp(-1, 1)
    counts = torch.randint(0, 4, (24, len(dims)), generator=g)
    a = x0.clone().requires_grad_(True)
    b = x0.clone().requires_grad_(True)
    la = TopoCountLoss(dims, preserve=preserve)(a, counts)
    lb = _loss_one_by_one(b, counts, dims, preserve)
    # same terms, summed in another order in float32: relative error <= (number of dots) * eps
    tol = 144 * torch.finfo(torch.float32).eps
    torch.testing.assert_close(la, lb, rtol=tol, atol=tol)
    la.sum().backward()
    lb.sum().backward()
    torch.testing.assert_close(a.grad, b.grad, rtol=tol, atol=tol)


def test_paper_form_rewards_persistence():
    x = _blobs([(4, 4), (11, 11)])[None, None]
    paper = TopoCountLoss(preserve="paper")(x, torch.tensor([2]))
    assert paper.item() < 0  # -(b - d)^2 summed over the two kept dots


@pytest.mark.parametrize("preserve", ["bounded", "paper"])
def test_one_step_lowers_the_extra_blob(preserve):
    g = torch.Generator().manual_seed(0)
    img = _blobs([(4, 4), (4, 11), (11, 8)], peak=(0.9, 0.8, 0.3)) + 0.02 * torch.randn(16, 16, generator=g)
    img = img.clamp(-1, 1)[None, None].requires_grad_(True)
    loss = TopoCountLoss(preserve=preserve)(img, torch.tensor([2]))
    loss.sum().backward()
    new = img.detach() - 0.05 * img.grad
    peak = lambda z: z[0, 0, 9:14, 6:11].max().item()  # noqa: E731
    assert peak(new) < peak(img.detach())
    assert new[0, 0, 2:7, 2:7].max() >= img.detach()[0, 0, 2:7, 2:7].max()  # kept blobs do not shrink


@pytest.mark.parametrize("preserve", ["bounded", "paper"])
def test_descent_on_either_form_fixes_the_wrong_counts(preserve):
    # projected gradient descent on the pixels of noisy masks: both forms share their minimisers on
    # [-1, 1] (c dots at (1, -1), the rest on the diagonal), which have exactly c components at 0
    masks, counts = disk_masks(32, size=12, counts=(1, 2, 3), radius=(1.0, 2.0), seed=0)
    g = torch.Generator().manual_seed(0)
    x = (0.6 * (masks * 2 - 1) + 0.6 * torch.randn(masks.shape, generator=g)).clamp(-1, 1)
    loss = TopoCountLoss(preserve=preserve)
    start = count_accuracy(x, counts)["accuracy"]
    for _ in range(40):
        x.requires_grad_(True)
        (grad,) = torch.autograd.grad(loss(x, counts).sum(), x)
        x = (x.detach() - 0.25 * grad).clamp(-1, 1)
    assert start < 0.5 and count_accuracy(x, counts)["accuracy"] == 1.0


@pytest.mark.parametrize("dims", [(0,), (1,), (0, 1)])
@pytest.mark.parametrize("preserve", ["bounded", "paper"])
def test_gradient_only_at_critical_pixels(dims, preserve):
    g = torch.Generator().manual_seed(len(dims) + len(preserve))
    x = (torch.rand(3, 1, 12, 12, generator=g) * 1.8 - 0.9).requires_grad_(True)
    counts = torch.tensor([[1, 2], [2, 0], [3, 1]])[:, : len(dims)]
    TopoCountLoss(dims, preserve=preserve)(x, counts).sum().backward()
    for i in range(3):
        crit = torch.zeros(12, 12, dtype=torch.bool)
        for dim in dims:
            d = superlevel_persistence(x[i, 0].detach(), dim=dim)
            crit[d.birth_idx[:, 0], d.birth_idx[:, 1]] = True
            nd = d.death_idx[~d.essential]
            crit[nd[:, 0], nd[:, 1]] = True
        assert torch.equal(x.grad[i, 0] != 0, crit)


def test_invariant_to_rotations_and_flips():
    g = torch.Generator().manual_seed(3)
    x = torch.rand(4, 1, 12, 12, generator=g) * 2 - 1
    masks, _ = disk_masks(4, size=12, radius=(1.0, 2.0), seed=1)
    x = torch.cat([x, masks * 2 - 1 + 0.0])
    counts = torch.tensor([1, 2, 3, 4, 1, 2, 3, 4])
    for dims in ((0,), (1,)):
        loss = TopoCountLoss(dims)
        ref = loss(x, counts)
        for t in (lambda z: z.rot90(1, (2, 3)), lambda z: z.rot90(2, (2, 3)), lambda z: z.flip(3), lambda z: z.flip(2)):
            assert torch.allclose(loss(t(x), counts), ref, atol=1e-12, rtol=1e-6)


def test_bad_input_and_edge_cases():
    loss = TopoCountLoss()
    with pytest.raises(ValueError, match="NaN"):
        loss(torch.full((1, 1, 4, 4), float("nan")), torch.tensor([1]))
    with pytest.raises(ValueError, match=">= 0"):
        loss(torch.zeros(1, 1, 4, 4), torch.tensor([-1]))
    with pytest.raises(ValueError, match="one channel"):
        loss(torch.zeros(1, 2, 4, 4), torch.tensor([1]))
    with pytest.raises(ValueError, match="counts"):
        loss(torch.zeros(2, 1, 4, 4), torch.tensor([1]))
    with pytest.raises(TypeError, match="integer"):
        loss(torch.zeros(1, 1, 4, 4), torch.tensor([1.0]))
    with pytest.raises(ValueError, match="dims"):
        TopoCountLoss(dims=(2,))
    with pytest.raises(ValueError, match="preserve"):
        TopoCountLoss(preserve="log")
    assert loss(torch.zeros(0, 1, 4, 4), torch.zeros(0, dtype=torch.long)).shape == (0,)
    const = torch.full((1, 1, 4, 4), 0.5, requires_grad=True)
    v = loss(const, torch.tensor([1]))
    assert torch.isfinite(v).all() and abs(v.item() - 0.25) < 1e-12  # (1 - 0.5)^2, essential death -1
    v.sum().backward()
    # the same through the batched (lockstep) persistence of >= 32 images; with c = 0 the one dot is
    # pushed to the diagonal: (0.5 - (-1))^2
    consts = torch.full((32, 1, 4, 4), 0.5)
    assert torch.equal(loss(consts, torch.ones(32, dtype=torch.long)), torch.full((32,), 0.25))
    assert torch.equal(loss(consts, torch.zeros(32, dtype=torch.long)), torch.full((32,), 2.25))
    with pytest.raises(TypeError, match="x0_hat"):
        loss(np.zeros((1, 1, 4, 4)), torch.tensor([1]))
    with pytest.raises(ValueError, match="x0_hat"):
        loss(torch.zeros(1, 1, 1, 4, 4), torch.tensor([1]))
    with pytest.raises(TypeError, match="floating"):
        loss(torch.zeros(1, 1, 4, 4, dtype=torch.long), torch.tensor([1]))
    with pytest.raises(ValueError, match="connectivity"):
        TopoCountLoss(connectivity=6)


def test_match_loss():
    masks, _ = disk_masks(3, seed=2)
    x0 = masks * 2 - 1
    m = TopoMatchLoss(dims=(0, 1))
    assert torch.allclose(m(x0, x0), torch.zeros(3))
    g = torch.Generator().manual_seed(0)
    pred = (x0 + 0.5 * torch.randn(x0.shape, generator=g)).clamp(-1, 1).requires_grad_(True)
    v = m(pred, x0)
    assert (v > 0).all()
    v.sum().backward()
    assert torch.isfinite(pred.grad).all() and pred.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="same shape"):
        m(pred, x0[:2])
    with pytest.raises(ValueError, match="NaN"):
        m(torch.full_like(x0, float("nan")), x0)
    with pytest.raises(ValueError, match="dims"):
        TopoMatchLoss(dims=(0, 0))
    assert m(x0[:0], x0[:0]).shape == (0,)


def test_match_loss_checks_connectivity():
    with pytest.raises(ValueError, match="connectivity must be 4 or 8, got 6"):
        TopoMatchLoss(connectivity=6)
    # 8-connected, the diagonal pair is one component: the prediction matches a one-component
    # target exactly (loss 0); 4-connected it is two, and the extra dot (birth 1, death -1) is
    # pushed to the diagonal at cost (1 - (-1))^2 = 4
    diag = torch.tensor([[1.0, -1.0], [-1.0, 1.0]])[None, None]
    one = torch.tensor([[1.0, 1.0], [-1.0, -1.0]])[None, None]
    assert TopoMatchLoss(connectivity=8)(diag, one).tolist() == [0.0]
    assert TopoMatchLoss(connectivity=4)(diag, one).tolist() == [4.0]


@pytest.mark.parametrize(("backend", "conn"), [("cripser", 4), ("gudhi", 4), ("gudhi", 8)])
def test_count_loss_is_the_same_with_every_backend(backend, conn):
    # distinct pixel values make every critical pixel unique, so each backend must give the same
    # dots at the same pixels: equal losses and equal gradients, up to float64 summation order
    pytest.importorskip(backend, reason=f"{backend} not installed (extra iclr25-generative[topo])")
    g = torch.Generator().manual_seed(7)
    x = torch.rand(6, 1, 12, 12, generator=g, dtype=torch.float64) * 2 - 1
    counts = torch.randint(0, 4, (6, 2), generator=g)
    a, b = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    la = TopoCountLoss((0, 1), connectivity=conn)(a, counts)
    lb = TopoCountLoss((0, 1), backend=backend, connectivity=conn)(b, counts)
    tol = 144 * torch.finfo(torch.float64).eps
    torch.testing.assert_close(la, lb, rtol=tol, atol=tol)
    la.sum().backward()
    lb.sum().backward()
    torch.testing.assert_close(a.grad, b.grad, rtol=tol, atol=tol)


def test_disk_masks_have_the_stated_count():
    from iclr25.generative.topodiffusion import betti_numbers

    masks, counts = disk_masks(300, seed=4)
    assert torch.equal(betti_numbers(masks, 0.5)[:, 0], counts)
    assert torch.equal(betti_numbers(masks, 0.5, connectivity=8)[:, 0], counts)
    assert set(counts.tolist()) == {1, 2, 3, 4, 5}
    assert np.array_equal(disk_masks(300, seed=4)[0].numpy(), masks.numpy())


def test_holed_masks_have_the_stated_number_of_holes():
    from iclr25.generative.topodiffusion import betti_numbers

    masks, counts = holed_masks(40, counts=(1, 2, 3, 4), seed=0)
    assert masks.shape == (40, 1, 16, 16) and set(counts.tolist()) <= {1, 2, 3, 4}
    for conn in (4, 8):
        betti = betti_numbers(masks, threshold=0.5, connectivity=conn)
        assert torch.equal(betti[:, 0], torch.ones(40, dtype=torch.long))
        assert torch.equal(betti[:, 1], counts)
    # the loss asking for the true number of holes is zero on a clean mask, one fewer is not
    x = masks * 2 - 1
    assert torch.equal(TopoCountLoss(dims=(1,))(x, counts), torch.zeros(40))
    assert (TopoCountLoss(dims=(1,))(x, counts - 1) > 0).all()
    with pytest.raises(ValueError, match="size"):
        holed_masks(2, size=8)
    with pytest.raises(ValueError, match="wall"):
        holed_masks(2, wall=1.0)


def test_matching_cost_equals_gudhi_wasserstein():
    # the loss's exact partial matching has the optimal W2 cost that gudhi (with POT) computes
    wasserstein = pytest.importorskip("gudhi.wasserstein", reason="gudhi/POT not installed (extra [topo])")
    pytest.importorskip("ot", reason="POT not installed (extra iclr25-generative[topo])")
    from iclr25.generative.topodiffusion.losses import _match

    rng = np.random.default_rng(3)
    for trial in range(40):
        a, b = rng.random((2, 12, 12)) * 2 - 1
        dim = trial % 2
        da, db = (superlevel_persistence(x, dim=dim) for x in (a, b))
        pb, pd = da.birth, np.where(da.essential, -1.0, da.death)
        gb, gd = db.birth, np.where(db.essential, -1.0, db.death)
        tgt = _match(pb, pd, gb, gd)
        hit = tgt >= 0
        unmatched_g = np.setdiff1d(np.arange(len(gb)), tgt[hit])
        cost = (
            ((pb[hit] - gb[tgt[hit]]) ** 2 + (pd[hit] - gd[tgt[hit]]) ** 2).sum()
            + ((pb[~hit] - pd[~hit]) ** 2).sum() / 2
            + ((gb[unmatched_g] - gd[unmatched_g]) ** 2).sum() / 2
        )
        # gudhi reads (birth, death) rows of a sublevel diagram; negating keeps every distance
        want = wasserstein.wasserstein_distance(np.stack([-pb, -pd], 1), np.stack([-gb, -gd], 1), order=2, internal_p=2)
        assert cost == pytest.approx(want**2, rel=1e-9, abs=1e-12), trial
