"""Everyday-use regressions: float64 networks, argument checks, bf16 samples, diagram equality, generators."""

import signal

import numpy as np
import pytest
import torch
from scipy import ndimage

from iclr25.generative.diffusion.nn import UNet2D
from iclr25.generative.diffusion.schedules import VPSchedule
from iclr25.generative.topodiffusion import (
    TopoCountLoss,
    TopoDiffusionTrainer,
    TopoMatchLoss,
    betti_numbers,
    count_accuracy,
    disk_masks,
    holed_masks,
    superlevel_persistence,
)


def _trainer(**kw):
    torch.manual_seed(0)
    unet = UNet2D(1, 1, ch=8, ch_mult=(1, 2), num_classes=4, sample_size=8)
    return TopoDiffusionTrainer(unet, VPSchedule("cosine", T=1000), max_count=3, **kw)


def test_float64_network_fits_and_samples_in_float64():
    masks, counts = disk_masks(8, size=8, counts=(1, 2), radius=(1.0, 1.5), seed=0)
    tr = _trainer(t_max_frac=1.0)
    ref = tr.sample(torch.tensor([1, 2]), steps=3, generator=torch.Generator().manual_seed(0))
    tr.unet.double()
    x = tr.sample(torch.tensor([1, 2]), steps=3, generator=torch.Generator().manual_seed(0))
    assert x.dtype == torch.float64
    # the same weights and noise in float64 give the float32 samples to rounding
    torch.testing.assert_close(x.float(), ref, atol=1e-4, rtol=1e-4)
    h = tr.fit(masks, counts, steps=2, batch_size=4)
    assert len(h["loss"]) == 2 and all(np.isfinite(h["loss"]))


def test_fit_names_bad_batch_size_and_nan_masks():
    tr = _trainer()
    masks, counts = disk_masks(4, size=8, counts=(1,), radius=(1.0, 1.5), seed=0)
    for bad in (0, -1, 2.0):
        with pytest.raises(ValueError, match="batch_size"):
            tr.fit(masks, counts, steps=1, batch_size=bad)
    with pytest.raises(ValueError, match=r"masks must lie in \[0, 1\]"):
        tr.fit(masks * float("nan"), counts, steps=1, batch_size=2)


@pytest.mark.parametrize("gamma", [0.0, -1.0])
def test_min_snr_gamma_must_be_positive(gamma):
    # gamma <= 0 zeroed or flipped the sign of the topology term without a word
    with pytest.raises(ValueError, match="min_snr_gamma"):
        _trainer(min_snr_gamma=gamma)


def _alarm(*_):
    raise TimeoutError("disk_masks did not return within 60 s")


def test_disk_masks_raise_when_the_discs_cannot_fit():
    # two discs of radius 1 with a 1.5 px gap never fit a 5x5 canvas: this restarted forever
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(60)
    try:
        with pytest.raises(RuntimeError, match="could not place 2 discs"):
            disk_masks(1, size=5, counts=(2,), radius=(1.0, 1.0))
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.mark.parametrize("gen", [disk_masks, holed_masks])
def test_generators_take_counts_as_tensor_or_array(gen):
    ref = gen(6, counts=(1, 2), seed=3)
    for counts in (torch.tensor([1, 2]), np.array([1, 2])):
        got = gen(6, counts=counts, seed=3)
        assert torch.equal(got[0], ref[0]) and torch.equal(got[1], ref[1])
    for bad in ((1.5,), 2, (), torch.tensor([[1, 2]]), (float("inf"),)):
        with pytest.raises(ValueError, match="counts"):
            gen(2, counts=bad)


def test_betti_numbers_and_count_accuracy_take_bfloat16_samples():
    masks, counts = disk_masks(6, size=16, counts=(1, 2, 3), seed=0)
    x = (masks * 2 - 1).bfloat16()
    assert torch.equal(betti_numbers(x), betti_numbers(x.float()))
    assert count_accuracy(x, counts)["accuracy"] == 1.0


def test_diagrams_compare_by_value():
    img = np.random.default_rng(0).random((6, 6))
    a, b = superlevel_persistence(img), superlevel_persistence(img.copy())
    assert a == b
    assert a != superlevel_persistence(img, dim=1)
    assert a != superlevel_persistence(img + 1)
    assert a != "not a diagram"


def test_losses_name_x0_hat_for_infinite_values():
    x = torch.zeros(2, 1, 6, 6)
    x[0, 0, 2, 2] = float("inf")
    with pytest.raises(ValueError, match="x0_hat must be finite"):
        TopoCountLoss()(x, torch.tensor([1, 1]))
    with pytest.raises(ValueError, match="x0_hat must be finite"):
        TopoMatchLoss()(x, torch.zeros(2, 1, 6, 6))


def _betti_by_labelling(m):
    # components 4-connected; holes = 8-connected complement components that miss the padding frame
    s4, s8 = ndimage.generate_binary_structure(2, 1), ndimage.generate_binary_structure(2, 2)
    return [ndimage.label(m, structure=s4)[1], ndimage.label(np.pad(~m, 1, constant_values=True), structure=s8)[1] - 1]


@pytest.mark.parametrize("gen", [disk_masks, holed_masks])
def test_generators_check_n(gen):
    with pytest.raises(ValueError, match="n must be an int >= 0"):
        gen(-1)
    # a float or bool n is a wrong type, not a wrong value (it raised ValueError)
    for bad in (1.5, True, "2"):
        with pytest.raises(TypeError, match="n must be an int"):
            gen(bad)
    # numpy integers are ints (e.g. n = np.sum(keep)): refused before
    got, ref = gen(np.int64(3), seed=1), gen(3, seed=1)
    assert torch.equal(got[0], ref[0]) and torch.equal(got[1], ref[1])
    assert gen(0)[0].shape == (0, 1, 16, 16)


def test_disk_masks_check_radius_and_gap():
    # radius: >= 1, ordered, and the largest disc (plus a pixel each side) must fit the canvas
    for radius, size in (((0.5, 1.0), 16), ((2.0, 1.0), 16), ((1.0, 7.5), 16), ((float("nan"), 2.0), 16)):
        with pytest.raises(ValueError, match="radius must satisfy"):
            disk_masks(2, size=size, radius=radius)
    # at the bound 2 * 7 + 2 = 16 a disc of radius up to 7 still fits
    masks, counts = disk_masks(4, size=16, counts=(1,), radius=(6.5, 7.0), seed=0)
    assert counts.tolist() == [1, 1, 1, 1]
    assert all(_betti_by_labelling(m[0].numpy() > 0.5) == [1, 0] for m in masks)
    with pytest.raises(ValueError, match="gap must be > sqrt"):
        disk_masks(2, gap=1.4)
    # NaN failed `gap <= sqrt(2)`, so a single-disc request returned masks with an unchecked gap
    with pytest.raises(ValueError, match="gap must be > sqrt"):
        disk_masks(2, counts=(1,), gap=float("nan"))


def test_holed_masks_check_hole_radius_and_wall():
    for bad in ((0.5, 1.0), (1.6, 1.0), (float("nan"), 1.2)):
        with pytest.raises(ValueError, match="hole_radius must satisfy"):
            holed_masks(2, hole_radius=bad)
    # NaN failed `wall <= sqrt(2)`: a hole-free request returned masks without a word
    with pytest.raises(ValueError, match="wall must be > sqrt"):
        holed_masks(2, counts=(0,), wall=float("nan"))


def test_holed_masks_skip_holes_that_leave_no_wall_to_the_rim():
    # the disc radius is at most 0.46 * 16 = 7.36 px, so a wall of 8 px leaves no room for any hole
    # (radius >= 1): every candidate is skipped and the request fails with the count that does not fit
    with pytest.raises(RuntimeError, match="could not place 1 holes on a 16x16 canvas"):
        holed_masks(1, counts=(1,), wall=8.0, seed=0)
    # zero holes need no room: a plain disc, one component and no hole
    masks, counts = holed_masks(3, counts=(0,), wall=8.0, seed=0)
    assert counts.tolist() == [0, 0, 0]
    assert all(_betti_by_labelling(m[0].numpy() > 0.5) == [1, 0] for m in masks)
    # hole radii up to 6 px: candidates with r >= disc radius - wall (>= 4.26 px) are skipped, the
    # others placed; every mask must still be one component with exactly the requested holes
    masks, counts = holed_masks(12, counts=(1, 2), hole_radius=(1.0, 6.0), seed=0)
    assert set(counts.tolist()) == {1, 2}
    for m, c in zip(masks, counts.tolist(), strict=True):
        assert _betti_by_labelling(m[0].numpy() > 0.5) == [1, c]


def test_holed_masks_take_a_numpy_integer_size():
    # disk_masks takes np.int64(16); holed_masks refused it as "size must be an int >= 12, got 16"
    got, ref = holed_masks(4, size=np.int64(16), seed=2), holed_masks(4, size=16, seed=2)
    assert torch.equal(got[0], ref[0]) and torch.equal(got[1], ref[1])
    for bad in (True, 16.0, np.int64(11)):
        with pytest.raises(ValueError, match="size must be an int >= 12"):
            holed_masks(2, size=bad)
