"""Union-find persistence against brute-force labelling, hand-made diagrams and optional libraries."""

import sys

import numpy as np
import pytest
import torch
from scipy import ndimage

from iclr25.generative.topodiffusion import (
    TopoCountLoss,
    annulus_masks,
    betti_numbers,
    persistence,
    superlevel_persistence,
    superlevel_persistence_batch,
)

S4 = ndimage.generate_binary_structure(2, 1)
S8 = ndimage.generate_binary_structure(2, 2)


def _structure(conn):
    return S4 if conn == 4 else S8


def _alive(dgm, t):
    # a dot (b, d) is alive in {x >= t} when b >= t > d; the essential dot never dies
    return int(((dgm.birth >= t) & ((dgm.death < t) | dgm.essential)).sum())


def _holes(mask, conn):
    dual = S8 if conn == 4 else S4
    return ndimage.label(np.pad(~mask, 1, constant_values=True), structure=dual)[1] - 1


@pytest.mark.parametrize("conn", [4, 8])
def test_binary_dots_equal_scipy_label_count(conn):
    rng = np.random.default_rng(0)
    for _ in range(200):
        m = rng.random((16, 16)) < rng.uniform(0.2, 0.7)
        m[rng.integers(16), rng.integers(16)] = True
        d = superlevel_persistence(m.astype(float), dim=0, connectivity=conn)
        assert int((d.persistence > 0.5).sum()) == ndimage.label(m, structure=_structure(conn))[1]


@pytest.mark.parametrize("conn", [4, 8])
@pytest.mark.parametrize("dim", [0, 1])
def test_every_superlevel_set_has_the_diagrams_betti_number(conn, dim):
    # the persistence diagram must reproduce beta_dim of {x >= t} at every level t
    rng = np.random.default_rng(1 + conn + dim)
    for _ in range(30):
        img = rng.random((10, 12))
        d = superlevel_persistence(img, dim=dim, connectivity=conn)
        vals = np.sort(np.unique(img))
        for t in np.concatenate([vals, (vals[1:] + vals[:-1]) / 2]):
            m = img >= t
            want = ndimage.label(m, structure=_structure(conn))[1] if dim == 0 else _holes(m, conn)
            assert _alive(d, t) == want, (t, dim, conn)


def test_hand_made_diagrams():
    d = superlevel_persistence(np.array([[3.0, 1.0, 2.0]]))
    assert d.birth.tolist() == [3.0, 2.0] and d.death.tolist() == [1.0, 1.0]
    assert d.essential.tolist() == [True, False]
    assert d.birth_idx.tolist() == [[0, 0], [0, 2]] and d.death_idx.tolist() == [[0, 1], [0, 1]]
    # a ring of value 2 around a centre of 0.5 on a background of 1: one hole born at 2, filled at 0.5
    img = np.ones((5, 5))
    img[1:4, 1:4] = 2.0
    img[2, 2] = 0.5
    h = superlevel_persistence(img, dim=1)
    assert len(h) == 1 and h.birth[0] == 2.0 and h.death[0] == 0.5 and h.death_idx.tolist() == [[2, 2]]
    # 4-connected, the diagonal pair is two components; 8-connected, one
    diag = np.array([[1.0, 0.0], [0.0, 1.0]])
    assert len(superlevel_persistence(diag, connectivity=4)) == 2
    assert len(superlevel_persistence(diag, connectivity=8)) == 1


def test_ties_in_persistence_are_ordered_by_birth():
    # two finite dots of persistence 1: the one born higher comes first, whatever the merge order
    d = superlevel_persistence(np.array([[1.0, 0.0, 2.0, 0.5, 1.5]]))
    assert d.birth.tolist() == [2.0, 1.5, 1.0] and d.birth_idx[:, 1].tolist() == [2, 4, 0]
    # equal births too (a binary mask): raster order of the birth pixel
    m = np.zeros((5, 5))
    m[4, 4] = m[0, 3] = m[2, 0] = 1.0
    d = superlevel_persistence(m)
    assert [tuple(p) for p in d.birth_idx] == [(0, 3), (2, 0), (4, 4)] and d.essential.tolist() == [True, False, False]


@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("conn", [4, 8])
def test_batched_union_find_equals_per_image(dim, conn):
    # every field equal, including critical pixels and order, on floats, heavy ties and binary masks
    rng = np.random.default_rng(11 + dim + conn)
    for trial in range(12):
        h, w = (int(v) for v in rng.integers(1, 13, 2))
        imgs = rng.random((32, h, w))  # >= 32 images of <= 24x24 pixels: the public call takes the lockstep path
        if trial % 3 == 1:
            imgs = imgs.round(1)
        elif trial % 3 == 2:
            imgs = (imgs < 0.5).astype(float)
        batch = superlevel_persistence_batch(torch.from_numpy(imgs)[:, None], dim=dim, connectivity=conn)
        lockstep = persistence._unionfind_batch(imgs, dim, conn)
        assert len(batch) == len(lockstep) == 32
        for img, got, got_ls in zip(imgs, batch, lockstep, strict=True):
            want = superlevel_persistence(img, dim=dim, connectivity=conn)
            for f in ("birth", "death", "birth_idx", "death_idx", "essential"):
                assert np.array_equal(getattr(got, f), getattr(want, f)), (trial, f)
                assert np.array_equal(getattr(got_ls, f), getattr(want, f)), (trial, f)


@pytest.mark.parametrize("conn", [4, 8])
def test_spanning_tree_union_find_equals_reference(conn):
    # the MST-based union-find against the plain pixel-by-pixel one: the same dots, the essential last
    rng = np.random.default_rng(5 + conn)
    for trial in range(150):
        img = rng.random(tuple(int(v) for v in rng.integers(1, 21, 2)))
        if trial % 3 == 1:
            img = img.round(1)  # heavy ties
        elif trial % 3 == 2:
            img = (img < 0.5).astype(float)
        fast = persistence._uf_superlevel0(img, conn)
        ref = persistence._uf_superlevel0_reference(img, conn)
        assert sorted(zip(*fast, strict=True)) == sorted(zip(*ref, strict=True)), trial
        assert [col[-1] for col in fast] == [col[-1] for col in ref]


def test_batch_bad_input_and_empty():
    assert superlevel_persistence_batch(np.zeros((0, 4, 4))) == []
    with pytest.raises(ValueError, match="imgs"):
        superlevel_persistence_batch(np.zeros((4, 4)))
    with pytest.raises(ValueError, match="imgs"):
        superlevel_persistence_batch(np.zeros((2, 3, 4, 4)))
    with pytest.raises(ValueError, match="finite"):
        superlevel_persistence_batch(np.array([[[0.0, np.nan]]]))
    with pytest.raises(ValueError, match="dim"):
        superlevel_persistence_batch(np.zeros((1, 3, 3)), dim=2)
    with pytest.raises(TypeError, match="imgs"):
        superlevel_persistence_batch([[[0.0]]])


def test_batch_refuses_images_without_pixels():
    for shape in ((2, 0, 3), (2, 3, 0), (2, 1, 0, 3)):
        with pytest.raises(ValueError, match="imgs must have at least one pixel"):
            superlevel_persistence_batch(np.zeros(shape))


def _ring(size, cy, cx, r_out, r_in):
    yy, xx = np.mgrid[:size, :size]
    d2 = (yy - cy) ** 2 + (xx - cx) ** 2
    return (d2 <= r_out**2) & (d2 > r_in**2)


def test_holes_of_annuli_figure_eights_and_rings():
    shapes = []
    for m in annulus_masks(10, size=24, seed=3)[:, 0].numpy() > 0.5:
        shapes.append((m, 1))
    eight = _ring(24, 12, 7, 5, 2.5) | _ring(24, 12, 16, 5, 2.5)
    shapes.append((eight, 2))
    three = _ring(32, 8, 8, 5, 2.5) | _ring(32, 8, 22, 5, 2.5) | _ring(32, 22, 15, 6, 3)
    shapes.append((three, 3))
    nested = _ring(32, 16, 16, 14, 11) | _ring(32, 16, 16, 8, 5)
    shapes.append((nested, 2))
    for m, want in shapes:
        for conn in (4, 8):
            d = superlevel_persistence(m * 2.0 - 1, dim=1, connectivity=conn)
            got = int((d.persistence > 1.0).sum())
            assert got == _holes(m, conn)
            assert int(betti_numbers(torch.from_numpy(m).float()[None, None], 0.5, conn)[0, 1]) == got
        assert int((superlevel_persistence(m * 2.0 - 1, dim=1).persistence > 1).sum()) == want


@pytest.mark.parametrize("dim", [0, 1])
def test_critical_pixels_hold_the_values(dim):
    rng = np.random.default_rng(5)
    for _ in range(20):
        img = rng.normal(size=(14, 14))
        img[rng.random((14, 14)) < 0.3] = 0.0  # ties
        for conn in (4, 8):
            d = superlevel_persistence(img, dim=dim, connectivity=conn)
            assert np.all(d.birth >= d.death)
            assert np.array_equal(img[d.birth_idx[:, 0], d.birth_idx[:, 1]], d.birth)
            assert np.array_equal(img[d.death_idx[:, 0], d.death_idx[:, 1]], d.death)
            if dim == 0:
                assert d.essential.sum() == 1 and d.essential[0]


def test_torch_input_and_determinism():
    x = torch.rand(1, 9, 9, generator=torch.Generator().manual_seed(0)).round()
    a = superlevel_persistence(x)
    b = superlevel_persistence(x.numpy()[0])
    for f in ("birth", "death", "birth_idx", "death_idx", "essential"):
        assert np.array_equal(getattr(a, f), getattr(b, f))


def test_bad_input():
    with pytest.raises(ValueError, match="single-channel"):
        superlevel_persistence(torch.zeros(2, 4, 4))
    with pytest.raises(ValueError, match="single-channel"):
        superlevel_persistence(np.zeros(5))
    with pytest.raises(ValueError, match="finite"):
        superlevel_persistence(np.array([[0.0, np.nan]]))
    with pytest.raises(ValueError, match="dim"):
        superlevel_persistence(np.zeros((3, 3)), dim=2)
    with pytest.raises(ValueError, match="connectivity"):
        superlevel_persistence(np.zeros((3, 3)), connectivity=6)
    with pytest.raises(ValueError, match="backend"):
        superlevel_persistence(np.zeros((3, 3)), backend="ripser")
    with pytest.raises(TypeError, match="img"):
        superlevel_persistence([[0.0]])
    with pytest.raises(ValueError, match="at least one pixel"):
        superlevel_persistence(np.zeros((0, 3)))
    # betti_numbers: one channel, at most 4 axes, no NaN
    with pytest.raises(ValueError, match="one channel"):
        betti_numbers(torch.zeros(2, 3, 4, 4))
    with pytest.raises(ValueError, match="shape"):
        betti_numbers(torch.zeros(1, 1, 1, 4, 4))
    with pytest.raises(ValueError, match="NaN"):
        betti_numbers(np.array([[0.0, np.nan]]))
    with pytest.raises(ValueError, match="connectivity"):
        betti_numbers(np.zeros((3, 3)), connectivity=6)
    const = superlevel_persistence(np.full((4, 4), 0.3))
    assert len(const) == 1 and const.essential[0] and len(superlevel_persistence(np.full((4, 4), 0.3), dim=1)) == 0


@pytest.mark.parametrize("backend", ["cripser", "gudhi"])
def test_missing_backend_names_the_extra(backend, monkeypatch):
    # a None entry in sys.modules makes `import <backend>` raise ImportError, so this runs (and can
    # fail) whether or not the extra is installed
    monkeypatch.setitem(sys.modules, backend, None)
    with pytest.raises(ImportError, match=r"iclr25-generative\[topo\]"):
        superlevel_persistence(np.zeros((3, 3)), backend=backend)
    with pytest.raises(ImportError, match=r"iclr25-generative\[topo\]"):
        superlevel_persistence_batch(np.zeros((2, 3, 3)), backend=backend)
    with pytest.raises(ImportError, match=r"iclr25-generative\[topo\]"):
        TopoCountLoss(backend=backend)(torch.zeros(1, 1, 3, 3), torch.tensor([1]))


def _pairs(d):
    return sorted(zip(d.birth.round(9).tolist(), d.death.round(9).tolist(), strict=True))


@pytest.mark.parametrize(("backend", "conn"), [("cripser", 4), ("gudhi", 4), ("gudhi", 8)])
def test_union_find_equals_library(backend, conn):
    pytest.importorskip(backend, reason=f"{backend} not installed (extra iclr25-generative[topo])")
    if backend == "cripser":  # cripser has only the 4-connected construction: it must refuse 8
        with pytest.raises(ValueError, match="4-connected"):
            superlevel_persistence(np.zeros((3, 3)), connectivity=8, backend="cripser")
    rng = np.random.default_rng(7)
    for _ in range(200):
        img = rng.random((16, 16))
        for dim in (0, 1):
            ours = superlevel_persistence(img, dim=dim, connectivity=conn)
            theirs = superlevel_persistence(img, dim=dim, connectivity=conn, backend=backend)
            # the same number of dots (no broadcasting of a 1-dot diagram) and each within 1e-9
            assert len(ours) == len(theirs) and ours.essential.sum() == theirs.essential.sum()
            np.testing.assert_allclose(np.array(_pairs(ours)), np.array(_pairs(theirs)), rtol=0, atol=1e-9)


@pytest.mark.parametrize(("backend", "conn"), [("cripser", 4), ("gudhi", 4), ("gudhi", 8)])
def test_library_critical_pixels_match_union_find(backend, conn):
    # A non-square image: a row/column-major mix-up in a backend's cell numbering cannot hide here.
    pytest.importorskip(backend, reason=f"{backend} not installed (extra iclr25-generative[topo])")
    rng = np.random.default_rng(11)
    for trial in range(50):
        img = rng.random((7, 12))
        img = img.T if trial % 2 else img  # a transposed view: the memory layout must not matter either
        for dim in (0, 1):
            ours = superlevel_persistence(img, dim=dim, connectivity=conn)
            theirs = superlevel_persistence(img, dim=dim, connectivity=conn, backend=backend)
            assert np.array_equal(img[theirs.birth_idx[:, 0], theirs.birth_idx[:, 1]], theirs.birth)
            assert np.array_equal(img[theirs.death_idx[:, 0], theirs.death_idx[:, 1]], theirs.death)
            # distinct pixel values: the critical pixels are unique, so both must name the same ones
            key = lambda d: sorted(map(tuple, np.concatenate([d.birth_idx, d.death_idx], 1).tolist()))  # noqa: E731
            assert key(theirs) == key(ours)


@pytest.mark.parametrize(("backend", "conn"), [("unionfind", 4), ("cripser", 4), ("gudhi", 4), ("gudhi", 8)])
def test_single_peak_has_one_essential_dot_and_no_holes(backend, conn):
    # every superlevel set of an image with one local maximum below is a digital disc or a run of
    # a row: one component, no hole. So dim 0 is the essential dot (max, min) alone and dim 1 is
    # empty; the same for a constant image and a single pixel. The libraries return no finite
    # pair here for the thin images, and cripser used to return one essential dot per pixel of a
    # 1-pixel-wide image (five components for the row below).
    if backend != "unionfind":
        pytest.importorskip(backend, reason=f"{backend} not installed (extra iclr25-generative[topo])")
    yy, xx = np.mgrid[:5, :7]
    row = np.array([[0.0, 1.0, 3.0, 2.0, 1.0]])
    peaks = [(-((yy - 2.0) ** 2 + (xx - 3.0) ** 2), [2, 3]), (row, [0, 2]), (row.T, [2, 0])]
    flat = [np.full((5, 7), 0.25), np.array([[0.7]])]
    for img, top in [*peaks, *((f, None) for f in flat)]:
        d0 = superlevel_persistence(img, dim=0, connectivity=conn, backend=backend)
        assert d0.essential.tolist() == [True], img.shape
        assert d0.birth.tolist() == [img.max()] and d0.death.tolist() == [img.min()]
        assert img[tuple(d0.birth_idx[0])] == img.max() and img[tuple(d0.death_idx[0])] == img.min()
        if top is not None:
            assert d0.birth_idx.tolist() == [top]
        d1 = superlevel_persistence(img, dim=1, connectivity=conn, backend=backend)
        assert len(d1) == 0 and d1.birth_idx.shape == (0, 2)
