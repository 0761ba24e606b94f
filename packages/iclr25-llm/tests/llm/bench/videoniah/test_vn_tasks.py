import math
from collections import deque

import numpy as np
import pytest

from iclr25.llm.bench.videoniah import (
    TYPES,
    NeedleGallery,
    build_vnbench_like,
    default_galleries,
    make_counting,
    make_ordering,
    make_retrieval,
    place_spans,
    synthetic_haystack,
)

SIZE = (24, 24)
GAL = default_galleries(SIZE)


def _hay(T=12, seed=0):
    return synthetic_haystack(T, SIZE, source="texture", seed=seed)


def _chi2_sf_df3(x: float) -> float:
    # survival function of chi-square with 3 degrees of freedom (closed form)
    return math.erfc(math.sqrt(x / 2)) + math.sqrt(2 * x / math.pi) * math.exp(-x / 2)


def _components(mask: np.ndarray) -> int:
    """Connected components of a 3-D boolean mask (6-connectivity), by breadth-first search."""
    seen = np.zeros_like(mask)
    n = 0
    for start in zip(*np.nonzero(mask), strict=True):
        if seen[start]:
            continue
        n += 1
        q = deque([start])
        seen[start] = True
        while q:
            p = q.popleft()
            for ax in range(3):
                for d in (-1, 1):
                    r = list(p)
                    r[ax] += d
                    r = tuple(r)
                    if 0 <= r[ax] < mask.shape[ax] and mask[r] and not seen[r]:
                        seen[r] = True
                        q.append(r)
    return n


def test_place_spans_non_overlapping_and_uniform_single():
    rng = np.random.default_rng(0)
    for _ in range(200):
        s = place_spans(30, [3, 2, 4], rng, margin=2)
        assert s[0] >= 0 and s[0] + 3 + 2 <= s[1] and s[1] + 2 + 2 <= s[2] and s[2] + 4 <= 30
    counts = np.bincount([place_spans(8, [3], rng)[0] for _ in range(6000)], minlength=6)
    assert len(counts) == 6 and counts.min() > 850  # uniform over 0..5 (expected 1000 each)
    with pytest.raises(ValueError, match="need at least 11 frames"):
        place_spans(10, [3, 3, 3], rng, margin=1)


@pytest.mark.parametrize("maker", ["ret", "ord", "cnt"])
def test_answer_position_uniform_and_options_distinct(maker):
    hay = _hay()
    pos = []
    for i in range(400):
        if maker == "ret":
            s = make_retrieval(hay, GAL["text"], kind="insert1", needle_frames=1, seed=i)
            assert s.gt == s.meta["needles"][0]["name"]
        elif maker == "ord":
            s = make_ordering(hay, GAL["text"], kind="insert1", needle_frames=1, margin=0, seed=i)
            truth = [n["name"] for n in sorted(s.meta["needles"], key=lambda n: n["start"])]
            assert s.gt == ", ".join(truth)
            perms = [tuple(o.split(", ")) for o in s.options]
            assert all(sorted(p) == sorted(truth) for p in perms) and len(set(perms)) == 4
        else:
            s = make_counting(hay, GAL["sprite"], kind="edit1", needle_frames=1, margin=0, count_range=(1, 4), seed=i)
            assert s.gt == str(s.meta["count"])
        assert len(set(s.options)) == 4 and s.gt in s.options
        pos.append(s.answer)
    obs = np.bincount(pos, minlength=4)
    chi2 = float(((obs - 100.0) ** 2 / 100.0).sum())
    assert _chi2_sf_df3(chi2) > 0.01, obs


def test_insert_metadata_exact():
    hay = _hay(20)
    s = make_ordering(hay, GAL["image"], kind="insert2", needle_frames=2, seed=5)
    assert s.frames.shape[0] == 20 + 4 * 2
    keep = np.ones(s.frames.shape[0], bool)
    for n in s.meta["needles"]:
        a, b = n["span"]
        keep[a:b] = False
        for t in range(a, b):
            np.testing.assert_array_equal(s.frames[t], GAL["image"][n["name"]])
    np.testing.assert_array_equal(s.frames[keep], hay)  # the rest is the haystack, in order


@pytest.mark.parametrize("kind", ["edit1", "edit2"])
def test_counting_edit_equals_connected_components_of_diff(kind):
    hay = synthetic_haystack(30, (32, 32), source="texture", seed=1)
    spr = NeedleGallery.sprites(size=5)
    for seed in range(12):
        s = make_counting(hay, spr, kind=kind, needle_frames=2, count_range=(1, 8), seed=seed)
        mask = (s.frames != hay).any(axis=3)
        assert _components(mask) == s.meta["count"] == int(s.gt)
        assert len(s.meta["needles"]) == s.meta["count"]


def test_counting_insert_equals_runs_of_needle_frames():
    hay = _hay(16)
    for seed in range(10):
        s = make_counting(hay, GAL["text"], kind="insert1", needle_frames=2, seed=seed)
        name = s.meta["needles"][0]["name"]
        is_n = (s.frames == GAL["text"][name]).all(axis=(1, 2, 3))
        runs = int(is_n[0]) + int((is_n[1:] & ~is_n[:-1]).sum())
        assert runs == s.meta["count"] == int(s.gt)


def test_edit_retrieval_only_changes_span():
    hay = _hay(10)
    s = make_retrieval(hay, GAL["subtitle"], kind="edit1", needle_frames=3, seed=2)
    a, b = s.meta["needles"][0]["span"]
    changed = (s.frames != hay).any(axis=(1, 2, 3))
    assert changed[a:b].all() and not changed[:a].any() and not changed[b:].any()


def test_build_vnbench_like_types_and_errors():
    bench = build_vnbench_like([_hay(30, 0), _hay(30, 1)], per_type=2, galleries=GAL, needle_frames=1)
    assert sorted({s.type for s in bench}) == sorted(TYPES) and len(bench) == 18
    assert len({s.sample_id for s in bench}) == 18
    with pytest.raises(ValueError, match="kind"):
        make_retrieval(_hay(), GAL["text"], kind="edit3")
    with pytest.raises(ValueError, match="needs a NeedleGallery of kind 'image'"):
        make_retrieval(_hay(), GAL["text"], kind="insert2")
    with pytest.raises(ValueError, match="need at least"):
        make_ordering(_hay(3), GAL["subtitle"], kind="edit1", needle_frames=2)
