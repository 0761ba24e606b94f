"""Everyday workflows with user-provided assets and malformed input (usability audit)."""

import numpy as np
import pytest

from iclr25.llm.bench.videoniah import (
    FrameMatchSolver,
    NeedleGallery,
    VideoDecodeError,
    VideoSample,
    build_vnbench_like,
    circular_accuracy,
    default_galleries,
    edit_needle,
    load_video,
    load_vnbench,
    make_counting,
    make_ordering,
    make_retrieval,
    place_spans,
    sprite,
    synthetic_haystack,
)

SIZE = (32, 32)
GAL = default_galleries(SIZE)


def _hay(T=30, seed=0, size=SIZE):
    return synthetic_haystack(T, size, seed=seed)


def test_make_functions_reject_unknown_mode():
    # a typo used to fall through to mode="replace" silently
    with pytest.raises(ValueError, match=r"mode must be 'insert' or 'replace'.*'Insert'"):
        make_retrieval(_hay(), GAL["text"], needle_frames=2, mode="Insert")
    with pytest.raises(ValueError, match="mode must be"):
        make_ordering(_hay(), GAL["image"], kind="insert2", needle_frames=2, mode="splice")
    with pytest.raises(ValueError, match="mode must be"):
        make_counting(_hay(), GAL["text"], kind="insert1", needle_frames=1, mode="foo")


@pytest.mark.parametrize("kind", ["edit1", "edit2"])
@pytest.mark.parametrize("shape", [(3, 10), (10, 3)])
def test_counting_accepts_non_square_sprite(kind, shape):
    # the docstring allows an RGBA sprite (h, w, 4); a wide one used to get an h x h box and fail in edit_needle
    spr = np.zeros((*shape, 4), np.uint8)
    spr[..., 0], spr[..., 3] = 255, 255
    for seed in range(4):
        s = make_counting(_hay(40), spr, kind=kind, needle_frames=1, count_range=(2, 6), seed=seed)
        assert len(s.meta["needles"]) == s.meta["count"] and s.gt == str(s.meta["count"])
        boxes = [(n["span"][0], *n["box"]) for n in s.meta["needles"]]
        for _, y, x, h, w in boxes:
            assert (h, w) == shape and 0 <= y <= SIZE[0] - h and 0 <= x <= SIZE[1] - w
        for i, (t, y, x, h, w) in enumerate(boxes):  # copies in the same frames never touch
            for t2, y2, x2, _, _ in boxes[:i]:
                assert t != t2 or abs(y - y2) > h or abs(x - x2) > w


def test_build_with_only_the_galleries_the_types_need():
    imgs = {f"photo{i}": np.full((*SIZE, 3), 30 * i, np.uint8) for i in range(5)}
    mine = {"image": NeedleGallery.from_images(imgs)}
    bench = build_vnbench_like([_hay()], 2, types=["ret_insert2", "ord_insert2"], galleries=mine, needle_frames=1)
    assert [s.type for s in bench] == ["ret_insert2"] * 2 + ["ord_insert2"] * 2
    assert all(o in imgs for s in bench for o in s.gt.split(", "))
    with pytest.raises(ValueError, match=r"galleries lacks \['sprite', 'text'\]"):
        build_vnbench_like([_hay()], 1, types=["ret_insert2", "cnt_edit1", "cnt_insert1"], galleries=mine)


def test_build_validates_haystacks_and_per_type():
    with pytest.raises(ValueError, match=r"same frame size.*haystacks\[1\] is \(24, 24\)"):
        build_vnbench_like([_hay(), _hay(size=(24, 24))], 1, galleries=GAL, needle_frames=1)
    for bad in (-1, 1.5):
        with pytest.raises(ValueError, match="per_type must be an int >= 0"):
            build_vnbench_like([_hay()], bad, galleries=GAL)
    with pytest.raises(ValueError, match="types must be a list"):
        build_vnbench_like([_hay()], 1, types="ret_insert1", galleries=GAL)


def test_place_spans_rejects_negative_margin_and_non_generator():
    # a negative margin used to return overlapping spans
    with pytest.raises(ValueError, match="margin must be an int >= 0"):
        place_spans(10, [3, 3], np.random.default_rng(0), margin=-2)
    with pytest.raises(ValueError, match="margin"):
        make_ordering(_hay(), GAL["text"], needle_frames=3, margin=-2)
    with pytest.raises(ValueError, match="lengths"):
        place_spans(10, [3, -2], np.random.default_rng(0))
    with pytest.raises(TypeError, match=r"rng must be a numpy\.random\.Generator"):
        place_spans(10, [3], 0)


@pytest.mark.parametrize("fps", [0, -1.0, float("nan"), float("inf")])
def test_make_rejects_bad_fps(fps):
    with pytest.raises(ValueError, match="fps must be a finite number > 0"):
        make_retrieval(_hay(), GAL["text"], needle_frames=1, fps=fps)


def test_load_video_upper_case_suffix_and_single_image(tmp_path):
    v = _hay(6)
    np.save(tmp_path / "a.npy", v)
    (tmp_path / "a.npy").rename(tmp_path / "CLIP.NPY")
    np.savez(tmp_path / "b.npz", frames=v)
    (tmp_path / "b.npz").rename(tmp_path / "CLIP.NPZ")
    np.testing.assert_array_equal(load_video(tmp_path / "CLIP.NPY"), v)
    np.testing.assert_array_equal(load_video(tmp_path / "CLIP.NPZ"), v)
    np.save(tmp_path / "img.npy", v[0])  # one image, not a video: was read as 32 frames of 32x3
    with pytest.raises(VideoDecodeError, match=r"img\.npy.*one uint8 image of shape \(32, 32, 3\)"):
        load_video(tmp_path / "img.npy")
    gray = v[..., 0]
    np.save(tmp_path / "gray.npy", gray)
    np.testing.assert_array_equal(load_video(tmp_path / "gray.npy"), np.repeat(gray[..., None], 3, axis=3))


@pytest.mark.parametrize("mode", ["official", "strict"])
def test_circular_accuracy_malformed_records(mode):
    ok = {"question_id": "s_0", "type": "ret_insert1", "pred": "A", "gt": "A"}
    with pytest.raises(TypeError, match=r"records\[1\]: pred must be a str or None, got int"):
        circular_accuracy([ok, {**ok, "pred": 1}], mode)
    with pytest.raises(ValueError, match=r"records\[0\] lacks the field\(s\) \['type'\]"):
        circular_accuracy([{"question_id": "s_0", "pred": "A", "gt": "A"}], mode)
    with pytest.raises(ValueError, match=r"records\[0\] lacks the field\(s\) \['gt'\]"):
        circular_accuracy([{"question_id": "s_0", "type": "x", "pred": "A"}], mode)
    with pytest.raises(TypeError, match=r"records\[0\] must be a mapping"):
        circular_accuracy(['{"question_id": "s_0"}'], mode)
    # a judged record does not need a parsable pred, and None preds never need gt (official rule)
    assert circular_accuracy([{**ok, "pred": 1, "gpt_judge": ["1"]}] * 4, mode)["per_try"] == 1.0
    assert circular_accuracy([{"question_id": "s_0", "type": "x", "pred": None}], "official")["vanished"] == 1


def test_load_vnbench_rejects_bad_try(tmp_path):
    np.save(tmp_path / "a.npy", _hay(6))
    rec = {"video": "a.npy", "question": "q?", "options": ["w", "x", "y", "z"], "gt": 0, "type": "ret_insert1"}
    for t in (7, "x", -1):  # try=7 used to rotate the options by 7 and move the answer silently
        (tmp_path / "ann.json").write_text(__import__("json").dumps([{**rec, "try": t}]))
        with pytest.raises(ValueError, match=r"annotation record 0: try must be an int 0..3"):
            load_vnbench(tmp_path / "ann.json", tmp_path)


def test_frame_match_solver_accepts_one_gallery():
    one = FrameMatchSolver(GAL["text"])
    assert one.items.keys() == FrameMatchSolver([GAL["text"]]).items.keys()
    with pytest.raises(TypeError, match="list of NeedleGallery"):
        FrameMatchSolver(GAL)
    with pytest.raises(TypeError, match="NeedleGallery objects, got str"):
        FrameMatchSolver(["text"])


def test_bad_argument_messages():
    with pytest.raises(ValueError, match=r"color must be one of .*'purple'"):
        sprite("disk", "purple", 9)
    with pytest.raises(ValueError, match="RGB triple"):
        sprite("disk", (255, 0), 9)
    with pytest.raises(ValueError, match=r"pos must be the top-left corner \(y, x\)"):
        edit_needle(_hay(), sprite("disk", "red", 5), 0, 2, (1, 2, 3))
    with pytest.raises(ValueError, match="pos must be"):
        edit_needle(_hay(), sprite("disk", "red", 5), 0, 2, None)
    with pytest.raises(ValueError, match="answer must be an option index in \\[0, 3\\], got 'B'"):
        VideoSample(None, "q?", ["a", "b", "c", "d"], "B", "ret_insert1")
    with pytest.raises(ValueError, match="max_per_frame must be an int >= 1"):
        make_counting(_hay(), GAL["sprite"], kind="edit2", needle_frames=1, max_per_frame=0)
