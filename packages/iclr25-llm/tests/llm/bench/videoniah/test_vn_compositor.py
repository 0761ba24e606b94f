"""The torch compositor (tensor inputs to insert_needle / edit_needle) against the numpy path, bit for bit."""

import numpy as np
import pytest
import torch

from iclr25.llm.bench.videoniah import NeedleGallery, edit_needle, insert_needle, sprite, synthetic_haystack


def _hay(T=12, h=20, w=24, seed=0):
    return synthetic_haystack(T, (h, w), source="noise", seed=seed)


def _t(a, device="cpu"):
    return torch.from_numpy(np.ascontiguousarray(a)).to(device)


@pytest.mark.parametrize("mode", ["insert", "replace"])
@pytest.mark.parametrize(("start", "nh", "nw", "clip"), [(0, 20, 24, False), (5, 9, 13, False), (8, 20, 24, True)])
def test_insert_tensor_equals_numpy(mode, start, nh, nw, clip):
    rng = np.random.default_rng(start + nh)
    hay = _hay()
    L = 3
    shape = (L, nh, nw, 3) if clip else (nh, nw, 3)
    needle = rng.integers(0, 256, shape, dtype=np.uint8)
    ref, meta_ref = insert_needle(hay, needle, start, L, mode=mode)
    out, meta = insert_needle(_t(hay), _t(needle), start, L, mode=mode)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.uint8
    np.testing.assert_array_equal(out.numpy(), ref)
    assert meta == meta_ref
    # a numpy needle is moved to the frames' device
    out2, _ = insert_needle(_t(hay), needle, start, L, mode=mode)
    np.testing.assert_array_equal(out2.numpy(), ref)


def test_insert_tensor_does_not_touch_input():
    hay = _hay()
    th = _t(hay)
    insert_needle(th, np.zeros((20, 24, 3), np.uint8), 2, 3, mode="replace")
    np.testing.assert_array_equal(th.numpy(), hay)


def test_edit_half_ties_round_to_even_like_numpy():
    # alpha = 0.5 on an opaque box makes every pixel an exact .5 tie when frame and overlay differ
    # by an odd amount: round-half-up (floor(x + 0.5)) would give 101 here, half-to-even gives 100
    hay = np.full((2, 6, 6, 3), 100, np.uint8)
    ov = np.full((4, 4, 3), 101, np.uint8)
    ref, _ = edit_needle(hay, ov, 0, 2, (1, 1), alpha=0.5)
    out, _ = edit_needle(_t(hay), _t(ov), 0, 2, (1, 1), alpha=0.5)
    assert (ref[:, 1:5, 1:5] == 100).all()
    np.testing.assert_array_equal(out.numpy(), ref)


@pytest.mark.parametrize("seed", range(3))
def test_edit_tensor_equals_numpy_on_random_blends(seed):
    rng = np.random.default_rng(seed)
    hay = synthetic_haystack(10, (32, 40), source="texture", seed=seed)
    th = _t(hay)
    ref, out = hay.copy(), th.clone()
    for _ in range(12):
        h, w = int(rng.integers(1, 20)), int(rng.integers(1, 30))
        ch = int(rng.choice([3, 4]))
        ov = rng.integers(0, 256, (h, w, ch), dtype=np.uint8)
        if ch == 4:  # soft alpha everywhere: every mask level 0..255 is exercised
            ov[..., 3] = rng.integers(0, 256, (h, w))
        alpha = float(rng.choice([1.0, 0.5, 0.3, rng.random()]))
        L = int(rng.integers(1, 5))
        start = int(rng.integers(0, 10 - L + 1))
        pos = (int(rng.integers(0, 32 - h + 1)), int(rng.integers(0, 40 - w + 1)))
        ref, m_ref = edit_needle(ref, ov, start, L, pos, alpha=alpha)
        out, m = edit_needle(out, _t(ov), start, L, pos, alpha=alpha)
        assert m == m_ref
    np.testing.assert_array_equal(out.numpy(), ref)
    assert (ref != hay).mean() > 0.05  # the edits did change a good part of the video
    np.testing.assert_array_equal(th.numpy(), hay)  # inplace=False leaves the input alone


def test_edit_tensor_inplace_writes_into_input():
    hay = _hay()
    th = _t(hay)
    spr = sprite("disk", "red", 9)
    ref, _ = edit_needle(hay, spr, 2, 3, (4, 5))
    out, _ = edit_needle(th, spr, 2, 3, (4, 5), inplace=True)
    assert out is th
    np.testing.assert_array_equal(th.numpy(), ref)


def test_composed_sample_matches_numpy():
    # the benchmark's workload in miniature: splices, subtitles and sprites in sequence
    hay = synthetic_haystack(30, (48, 48), source="texture", seed=1)
    cards = NeedleGallery.text_cards(["CAT", "SUN"], (48, 48))
    subs = NeedleGallery.subtitles(["KEY"], frame_width=48)
    spr = sprite("ring", "cyan", 7)
    a, b = hay, _t(hay)
    for name, start in (("CAT", 3), ("SUN", 20)):
        a, _ = insert_needle(a, cards[name], start, 2)
        b, _ = insert_needle(b, _t(cards[name]), start, 2)
    for op in ((subs["KEY"], 8, 3, (36, 2), 1.0), (spr, 1, 4, (5, 30), 0.7), (spr, 25, 2, (20, 3), 1.0)):
        a, _ = edit_needle(a, *op[:4], alpha=op[4])
        b, _ = edit_needle(b, _t(op[0]), *op[1:4], alpha=op[4])
    assert a.shape == (34, 48, 48, 3)
    np.testing.assert_array_equal(b.numpy(), a)


def test_tensor_bad_inputs():
    hay = _hay()
    with pytest.raises(ValueError, match="uint8"):
        insert_needle(_t(hay).float(), np.zeros((20, 24, 3), np.uint8), 0, 2)
    with pytest.raises(ValueError, match="NaN"):
        edit_needle(torch.full((4, 8, 8, 3), float("nan")), np.zeros((2, 2, 3), np.uint8), 0, 1, (0, 0))
    with pytest.raises(ValueError, match="T >= 2"):
        insert_needle(_t(hay[:1]), np.zeros((20, 24, 3), np.uint8), 0, 1)
    with pytest.raises(ValueError, match="larger than the frame"):
        insert_needle(_t(hay), torch.zeros((21, 24, 3), dtype=torch.uint8), 0, 2)
    with pytest.raises(ValueError, match="needle must be a uint8"):
        insert_needle(_t(hay), torch.zeros((20, 24, 3)), 0, 2)
    with pytest.raises(ValueError, match="overlay must be uint8"):
        edit_needle(_t(hay), torch.zeros((4, 4, 3)), 0, 2, (0, 0))
    with pytest.raises(ValueError, match="pos"):
        edit_needle(_t(hay), sprite("disk", "red", 9), 0, 2, (15, 0))


@pytest.mark.gpu
def test_cuda_compositor_equals_numpy():
    rng = np.random.default_rng(0)
    hay = synthetic_haystack(16, (40, 40), source="texture", seed=0)
    ov = rng.integers(0, 256, (10, 30, 4), dtype=np.uint8)
    card = rng.integers(0, 256, (30, 30, 3), dtype=np.uint8)
    a, _ = insert_needle(hay, card, 4, 3)
    a, _ = edit_needle(a, ov, 2, 8, (25, 5), alpha=0.37)
    b, _ = insert_needle(_t(hay, "cuda"), card, 4, 3)
    b, _ = edit_needle(b, ov, 2, 8, (25, 5), alpha=0.37)
    assert b.device.type == "cuda"
    np.testing.assert_array_equal(b.cpu().numpy(), a)
