import numpy as np
import pytest

from iclr25.llm.bench.videoniah import NeedleGallery, edit_needle, insert_needle, sprite, synthetic_haystack


def _hay(T=10, h=24, w=24, seed=0):
    return synthetic_haystack(T, (h, w), source="noise", seed=seed)


@pytest.mark.parametrize("start", [0, 3, 10])
def test_insert_splices_and_shifts(start):
    hay = _hay()
    needle = np.random.default_rng(1).integers(0, 256, (24, 24, 3), dtype=np.uint8)
    out, meta = insert_needle(hay, needle, start, 4, mode="insert")
    assert out.shape == (14, 24, 24, 3)
    np.testing.assert_array_equal(out[:start], hay[:start])
    np.testing.assert_array_equal(out[start + 4 :], hay[start:])
    for t in range(start, start + 4):
        np.testing.assert_array_equal(out[t], needle)
    assert meta["span"] == [start, start + 4] and meta["shift"] == 4


def test_replace_keeps_length_and_small_needle_is_centered():
    hay = _hay()
    needle = np.full((8, 10, 3), 7, np.uint8)
    out, meta = insert_needle(hay, needle, 2, 3, mode="replace")
    assert out.shape == hay.shape and meta["shift"] == 0
    np.testing.assert_array_equal(out[:2], hay[:2])
    np.testing.assert_array_equal(out[5:], hay[5:])
    assert (out[2:5, 8:16, 7:17] == 7).all() and (out[2:5, :8] == 0).all()


def test_edit_changes_only_box_and_span_and_alpha1_equals_sprite():
    hay = synthetic_haystack(12, (32, 32), source="texture", seed=3)
    spr = sprite("disk", "red", 9)
    out, meta = edit_needle(hay, spr, 4, 3, (5, 20), alpha=1.0)
    diff = (out != hay).any(axis=3)
    box = np.zeros_like(diff)
    box[4:7, 5:14, 20:29] = True
    assert not diff[~box].any()
    assert diff[box].any()
    m = spr[..., 3] > 0
    for t in range(4, 7):
        np.testing.assert_array_equal(out[t, 5:14, 20:29][m], spr[..., :3][m])
        np.testing.assert_array_equal(out[t, 5:14, 20:29][~m], hay[t, 5:14, 20:29][~m])
    assert meta["box"] == [5, 20, 9, 9] and meta["span"] == [4, 7]


def test_edit_alpha_blend_formula():
    hay = np.full((3, 8, 8, 3), 100, np.uint8)
    ov = np.full((4, 4, 3), 200, np.uint8)
    out, _ = edit_needle(hay, ov, 0, 3, (0, 0), alpha=0.25)
    assert (out[:, :4, :4] == 125).all() and (out[:, 4:] == 100).all()


def test_bad_inputs():
    hay = _hay()
    with pytest.raises(ValueError, match="larger than the frame"):
        insert_needle(hay, np.zeros((30, 24, 3), np.uint8), 0, 2)
    with pytest.raises(ValueError, match=r"\[0, 10\]"):
        insert_needle(hay, np.zeros((24, 24, 3), np.uint8), 11, 2)
    with pytest.raises(ValueError, match=r"\[0, 8\]"):
        insert_needle(hay, np.zeros((24, 24, 3), np.uint8), 9, 2, mode="replace")
    with pytest.raises(ValueError, match="uint8"):
        insert_needle(hay.astype(np.float32), np.zeros((24, 24, 3), np.uint8), 0, 2)
    with pytest.raises(ValueError, match="NaN"):
        insert_needle(np.full((4, 8, 8, 3), np.nan), np.zeros((8, 8, 3), np.uint8), 0, 1)
    with pytest.raises(ValueError, match="T >= 2"):
        insert_needle(hay[:1], np.zeros((24, 24, 3), np.uint8), 0, 1)
    with pytest.raises(ValueError, match="pos"):
        edit_needle(hay, sprite("disk", "red", 9), 0, 2, (20, 0))
    with pytest.raises(ValueError, match="larger than the frame"):
        edit_needle(hay, np.zeros((30, 4, 3), np.uint8), 0, 2, (0, 0))
    with pytest.raises(ValueError, match="start"):
        edit_needle(hay, sprite("disk", "red", 5), 9, 2, (0, 0))


def test_galleries_are_distinct():
    g = NeedleGallery.text_cards(["CAT", "SUN", "KEY"], (24, 24))
    a, b = g["CAT"].astype(float), g["SUN"].astype(float)
    assert ((a - b) ** 2).mean() > 200
    p = NeedleGallery.pictures((24, 24))
    assert len(p) == 48 and "red disk" in p.names
    with pytest.raises(ValueError, match="unsupported"):
        NeedleGallery.text_cards(["caté"], (24, 24))
