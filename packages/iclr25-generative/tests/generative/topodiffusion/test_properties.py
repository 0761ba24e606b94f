"""Mathematical properties of the superlevel persistence and the count loss, checked against the theory.

Each property is derived from persistent homology (or from the loss's definition on an image whose
diagram is known in closed form), not from the module's own output:

- the rank function (persistent Betti numbers) of the diagram equals a brute-force count with
  ``scipy.ndimage.label`` for every pair of levels s >= t; it determines the diagram uniquely, so it
  also checks the pairing (elder rule), which the per-level Betti numbers alone do not;
- bottleneck stability (Cohen-Steiner, Edelsbrunner, Harer 2007): ``||x - y||_inf <= eps`` moves the
  diagram by at most eps in the bottleneck distance, the essential dot included;
- equivariance: a symmetry of the pixel grid moves the critical pixels with it, a strictly increasing
  map of the intensities maps every (birth, death) through it, with the same critical pixels;
- the count loss on an image of isolated peaks and pits on a plateau, whose diagram is known by hand,
  equals its closed form, value and gradient.
"""

import itertools

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import ndimage
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import maximum_bipartite_matching

from iclr25.generative.topodiffusion import TopoCountLoss, superlevel_persistence
from iclr25.generative.topodiffusion.losses import _match

S4 = ndimage.generate_binary_structure(2, 1)
S8 = ndimage.generate_binary_structure(2, 2)
EPS64 = np.finfo(np.float64).eps


def _fg(conn):
    return S4 if conn == 4 else S8


def _bg(conn):
    # holes of a 4-connected foreground are 8-connected background components, and vice versa
    return S8 if conn == 4 else S4


def _rank_brute_force(img, s, t, dim, conn):
    """rank of H_dim({x >= s}) -> H_dim({x >= t}) for s >= t, by labelling (no persistence code).

    dim 0: the components of {x >= t} that contain a pixel of {x >= s}.
    dim 1: by Alexander duality, the rank of the dual map H~0({x < t}) -> H~0({x < s}) of the padded
    complements: components of the padded {x < s} that contain a pixel of the padded {x < t}, minus
    the unbounded one (the frame, in both).
    """
    if dim == 0:
        lab, _ = ndimage.label(img >= t, structure=_fg(conn))
        return len(np.setdiff1d(np.unique(lab[img >= s]), [0]))
    big = np.pad(img < s, 1, constant_values=True)
    small = np.pad(img < t, 1, constant_values=True)
    lab, _ = ndimage.label(big, structure=_bg(conn))
    return len(np.unique(lab[small])) - 1


def _rank_from_diagram(dgm, s, t):
    # a dot (b, d) is a class already present in {x >= s} (b >= s) that is still alive in {x >= t}
    # (it dies below t, d < t, or never)
    return int(((dgm.birth >= s) & (dgm.essential | (dgm.death < t))).sum())


@st.composite
def _images(draw, max_side=7, levels=None, distinct=False):
    h = draw(st.integers(1, max_side))
    w = draw(st.integers(1, max_side))
    if distinct:  # a grid of step 1e-6: distinct values stay distinct under the monotone maps below
        vals = st.integers(-(10**6), 10**6).map(lambda i: i / 10**6)
    elif levels is None:
        vals = st.floats(-1.0, 1.0, allow_nan=False, allow_subnormal=False)
    else:
        vals = st.integers(0, levels - 1).map(float)  # few levels: many ties, flat plateaus
    cells = draw(st.lists(vals, min_size=h * w, max_size=h * w, unique=distinct))
    return np.array(cells, dtype=np.float64).reshape(h, w)


@pytest.mark.parametrize("conn", [4, 8])
@pytest.mark.parametrize("dim", [0, 1])
@settings(max_examples=60, deadline=None, derandomize=True)
@given(img=st.one_of(_images(levels=3), _images(levels=6), _images()))
def test_rank_function_equals_brute_force(img, dim, conn):
    # The persistent Betti numbers beta^{s,t} (s >= t) determine a diagram uniquely (inclusion-
    # exclusion over the levels), so this checks the whole multiset of (birth, death), not just the
    # Betti number of each superlevel set.
    dgm = superlevel_persistence(img, dim=dim, connectivity=conn)
    if dim == 0:
        # the whole image is the last superlevel set: one component, born at the global maximum, that
        # lives down to the last level of the filtration, the global minimum
        assert dgm.essential.sum() == 1
        assert dgm.birth[dgm.essential][0] == img.max() and dgm.death[dgm.essential][0] == img.min()
    levels = np.unique(img)
    for s, t in itertools.combinations_with_replacement(levels[::-1], 2):
        assert _rank_from_diagram(dgm, s, t) == _rank_brute_force(img, s, t, dim, conn), (s, t)


def _bottleneck_at_most(a, b, delta):
    """Is there a matching of the finite dots of a and b (or to the diagonal) with every cost <= delta?

    L_inf costs: |b1 - b2| v |d1 - d2| between dots, (b - d) / 2 from a dot to the diagonal. The usual
    augmented bipartite graph: left = a's dots + b's diagonal copies, right = b's dots + a's copies.
    """
    ab, ad, bb, bd = a.birth, a.death, b.birth, b.death
    n, m = len(ab), len(bb)
    adj = np.zeros((n + m, m + n), dtype=bool)
    adj[:n, :m] = np.maximum(np.abs(ab[:, None] - bb[None]), np.abs(ad[:, None] - bd[None])) <= delta
    adj[np.arange(n), m + np.arange(n)] = (ab - ad) / 2 <= delta  # a's dot to its diagonal projection
    adj[n + np.arange(m), np.arange(m)] = (bb - bd) / 2 <= delta  # b's dot to its diagonal projection
    adj[n:, m:] = True  # diagonal to diagonal, free
    match = maximum_bipartite_matching(csr_matrix(adj), perm_type="column")
    return bool((match >= 0).all())


def _finite(dgm):
    keep = ~dgm.essential
    return type(dgm)(
        dgm.birth[keep], dgm.death[keep], dgm.birth_idx[keep], dgm.death_idx[keep], dgm.essential[keep], dgm.dim
    )


@pytest.mark.parametrize("conn", [4, 8])
@settings(max_examples=80, deadline=None, derandomize=True)
@given(
    img=st.one_of(_images(levels=4), _images()),
    seed=st.integers(0, 2**32 - 1),
    eps=st.sampled_from([1e-3, 0.05, 0.3, 1.0]),
)
def test_bottleneck_stability(img, seed, eps, conn):
    # Stability theorem: d_B(D(x), D(y)) <= ||x - y||_inf, essential dots matched to essential dots
    # (here: birth = max, death = min, each 1-Lipschitz in the sup norm). No tolerance is needed:
    # every cost compared is one rounded subtraction of two pixel values (halved exactly for the
    # diagonal), and rounding is monotone, so true cost <= true ||x - y||_inf survives rounding.
    rng = np.random.default_rng(seed)
    y = img + rng.uniform(-eps, eps, img.shape)
    # half the pixels moved by a quantised step: ties broken in a different order too
    y = np.where(rng.random(img.shape) < 0.5, y, img + eps * rng.integers(-1, 2, img.shape))
    delta = np.abs(y - img).max()
    for dim in (0, 1):
        dx = superlevel_persistence(img, dim=dim, connectivity=conn)
        dy = superlevel_persistence(y, dim=dim, connectivity=conn)
        assert dx.essential.sum() == dy.essential.sum() == (1 if dim == 0 else 0)
        if dim == 0:
            ex, ey = np.flatnonzero(dx.essential)[0], np.flatnonzero(dy.essential)[0]
            assert abs(dx.birth[ex] - dy.birth[ey]) <= delta and abs(dx.death[ex] - dy.death[ey]) <= delta
        assert _bottleneck_at_most(_finite(dx), _finite(dy), delta), (dim, delta)


def _pairs(dgm, shape, transform=None):
    """The dots as a sorted list of (birth pixel, death pixel, essential), pixels mapped by transform."""
    bi, di = dgm.birth_idx, dgm.death_idx
    if transform is not None:
        bi, di = transform(bi, shape), transform(di, shape)
    return sorted(zip(map(tuple, bi.tolist()), map(tuple, di.tolist()), dgm.essential.tolist(), strict=True))


def _values(dgm, f=lambda v: v):
    return sorted(zip(f(dgm.birth).tolist(), f(dgm.death).tolist(), dgm.essential.tolist(), strict=True))


# the eight symmetries of the grid: (image map, where pixel (r, c) of the input lands in the output)
_DIHEDRAL = [
    (lambda a: a, lambda p, s: p),
    (lambda a: a.T, lambda p, s: p[:, ::-1]),
    (lambda a: a[::-1], lambda p, s: np.stack([s[0] - 1 - p[:, 0], p[:, 1]], 1)),
    (lambda a: a[:, ::-1], lambda p, s: np.stack([p[:, 0], s[1] - 1 - p[:, 1]], 1)),
    (lambda a: a[::-1, ::-1], lambda p, s: np.stack([s[0] - 1 - p[:, 0], s[1] - 1 - p[:, 1]], 1)),
    (lambda a: np.rot90(a), lambda p, s: np.stack([s[1] - 1 - p[:, 1], p[:, 0]], 1)),
    (lambda a: np.rot90(a, -1), lambda p, s: np.stack([p[:, 1], s[0] - 1 - p[:, 0]], 1)),
    (lambda a: a[::-1, ::-1].T, lambda p, s: np.stack([s[1] - 1 - p[:, 1], s[0] - 1 - p[:, 0]], 1)),
]


@pytest.mark.parametrize("conn", [4, 8])
@settings(max_examples=40, deadline=None, derandomize=True)
@given(img=_images(max_side=8, distinct=True), k=st.integers(0, 7), g=st.sampled_from(["affine", "cube", "tanh"]))
def test_equivariance_under_grid_symmetries_and_monotone_maps(img, k, g, conn):
    # Both adjacencies are invariant under the dihedral group of the grid, so the filtration of
    # x o sigma^-1 is the image of that of x: the same dots, critical pixels moved by sigma (unique
    # here: distinct values). A strictly increasing map f of the intensities leaves every superlevel
    # set {f(x) >= f(t)} = {x >= t}, so the dots are (f(b), f(d)) at the same critical pixels.
    # Distinct values make the critical pixels unique, so they can be compared.
    f = {"affine": lambda v: 3.0 * v - 0.25, "cube": lambda v: v**3 + v, "tanh": lambda v: np.tanh(4 * v)}[g]
    fx = f(img)
    assert np.unique(fx).size == img.size  # f strictly increasing and no two values rounded together
    amap, pmap = _DIHEDRAL[k]
    out = np.ascontiguousarray(amap(img))
    # where pixel p of img lands, checked directly: the transform table must agree with the image map
    for r, c in itertools.product(range(img.shape[0]), range(img.shape[1])):
        rr, cc = pmap(np.array([[r, c]]), img.shape)[0]
        assert out[rr, cc] == img[r, c]
    for dim in (0, 1):
        d = superlevel_persistence(img, dim=dim, connectivity=conn)
        ds = superlevel_persistence(out, dim=dim, connectivity=conn)
        assert _pairs(ds, out.shape) == _pairs(d, img.shape, pmap)
        df = superlevel_persistence(fx, dim=dim, connectivity=conn)
        assert _pairs(df, fx.shape) == _pairs(d, img.shape)
        # f is applied to the very float values of the pixels, so equality is exact
        assert _values(df) == _values(d, f)


# sites of the isolated peaks and pits on an 11x11 plateau: Chebyshev distance 3 apart, off the border,
# so no two touch even 8-connected, every pit is enclosed by plateau, and the plateau stays connected
_SITES = [(r, c) for r in (2, 5, 8) for c in (2, 5, 8)]


def _closed_form(m, peaks, pits, dims, counts, preserve):
    """TopoCountLoss of the peaks-and-pits image, from its diagram worked out by hand.

    dim 0: one component per peak, the highest never dies (its death the constant -1 in the loss),
    every other peak h merges into the plateau at level m: dot (h, m). Without peaks the plateau is
    the essential component, born at m. dim 1: a pit v enclosed by plateau is a hole born when the
    plateau appears (m) and filled at v: dot (m, v). Dots are ranked by persistence (essential first).
    """
    total = m.new_zeros(())
    for dim, c in zip(dims, counts, strict=True):
        if dim == 0:
            hs = sorted(peaks, key=lambda h: -h.item())
            dots = [(hs[0] if hs else m, m.new_tensor(-1.0))] + [(h, m) for h in hs[1:]]
        else:
            dots = [(m, v) for v in sorted(pits, key=lambda v: v.item())]
        for i, (b, d) in enumerate(dots):
            if i >= c:
                total = total + (b - d) ** 2
            elif preserve == "bounded":
                total = total + (1 - b) ** 2 + (d + 1) ** 2
            else:
                total = total - (b - d) ** 2
    return total, sum(len(peaks) + 1 if dim == 0 else len(pits) for dim in dims)


@pytest.mark.parametrize("conn", [4, 8])
@pytest.mark.parametrize("preserve", ["bounded", "paper"])
@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    m=st.floats(-0.8, 0.8),
    up=st.lists(st.floats(0.05, 1.0), max_size=4, unique=True),
    uv=st.lists(st.floats(0.05, 1.0), max_size=4, unique=True),
    sites=st.permutations(_SITES),
    dims=st.sampled_from([(0,), (1,), (0, 1)]),
    counts=st.tuples(st.integers(0, 5), st.integers(0, 5)),
)
def test_count_loss_closed_form_on_peaks_and_pits(m, up, uv, sites, dims, counts, preserve, conn):
    # L_top = sum_P keep(b, d) + sum_Q (b - d)^2 with P the c most persistent dots; value and gradient
    # w.r.t. every pixel (all plateau pixels share the value m: their gradients sum to dL/dm). Peak
    # heights and pit depths are distinct: with a tie the loss is not differentiable (which of two
    # equal peaks is kept is arbitrary), only its value is defined.
    m_ = torch.tensor(m, dtype=torch.float64, requires_grad=True)
    hs = [torch.tensor(m + (1 - m) * u, dtype=torch.float64, requires_grad=True) for u in up]  # peaks in (m, 1]
    vs = [torch.tensor(m - (m + 1) * u, dtype=torch.float64, requires_grad=True) for u in uv]  # pits in [-1, m)
    cs = [counts[0] if d == 0 else counts[1] for d in dims]
    img = torch.full((11, 11), m, dtype=torch.float64)
    pk, pt = sites[: len(hs)], sites[len(hs) : len(hs) + len(vs)]
    for (r, c), h in zip(pk, hs, strict=True):
        img[r, c] = h.item()
    for (r, c), v in zip(pt, vs, strict=True):
        img[r, c] = v.item()
    x = img[None, None].clone().requires_grad_(True)
    got = TopoCountLoss(dims, preserve=preserve, connectivity=conn)(x, torch.tensor([cs]))
    want, k = _closed_form(m_, hs, vs, dims, cs, preserve)
    # the same k terms summed in another order: each sum is off by <= k eps sum|terms| and every term
    # is at most 8 in size ((1 - b)^2 + (d + 1)^2 and (b - d)^2 with b, d in [-1, 1])
    tol = 2 * k * EPS64 * 8 * k
    assert abs(got.item() - want.item()) <= tol
    got.sum().backward()
    if want.requires_grad:  # not when no dot exists (dims=(1,) without pits): every gradient is 0
        want.backward()
    gx = x.grad[0, 0]
    grad = lambda t: 0.0 if t.grad is None else t.grad.item()  # noqa: E731
    tol_g = 2 * k * EPS64 * 4 * k  # likewise: each term's derivative (2 (1 - b), 2 (b - d), ...) is <= 4
    for (r, c), h in zip(pk, hs, strict=True):
        assert abs(gx[r, c].item() - grad(h)) <= tol_g
    for (r, c), v in zip(pt, vs, strict=True):
        assert abs(gx[r, c].item() - grad(v)) <= tol_g
    plateau = torch.ones(11, 11, dtype=torch.bool)
    for r, c in pk + pt:
        plateau[r, c] = False
    assert abs(gx[plateau].sum().item() - grad(m_)) <= tol_g


def _partial_matching_cost(pb, pd, gb, gd, tgt):
    """W2 partial-matching cost: squared distances of matched dots, squared distance to the diagonal
    ((b - d)^2 / 2) of every unmatched dot of either diagram."""
    hit = tgt >= 0
    free = np.setdiff1d(np.arange(len(gb)), tgt[hit])
    return (
        ((pb[hit] - gb[tgt[hit]]) ** 2 + (pd[hit] - gd[tgt[hit]]) ** 2).sum()
        + ((pb[~hit] - pd[~hit]) ** 2).sum() / 2
        + ((gb[free] - gd[free]) ** 2).sum() / 2
    )


_DOT = st.tuples(st.floats(-1.0, 1.0), st.floats(-1.0, 1.0)).map(lambda p: (max(p), min(p)))


@settings(max_examples=60, deadline=None, derandomize=True)
@given(pred=st.lists(_DOT, max_size=4), target=st.lists(_DOT, max_size=4))
def test_matching_is_the_optimal_partial_matching(pred, target):
    # TopoMatchLoss's matching must minimise the W2 partial-matching cost; on diagrams of <= 4 dots
    # every partial injection pred -> target (at most 209) is enumerated. Runs without gudhi/POT.
    pb, pd = (np.array([p[k] for p in pred], dtype=np.float64).reshape(-1) for k in (0, 1))
    gb, gd = (np.array([p[k] for p in target], dtype=np.float64).reshape(-1) for k in (0, 1))
    tgt = _match(pb, pd, gb, gd)
    assert tgt.shape == (len(pb),) and len(set(tgt[tgt >= 0].tolist())) == int((tgt >= 0).sum())
    best = min(
        _partial_matching_cost(pb, pd, gb, gd, np.array(choice, dtype=np.int64).reshape(-1))
        for choice in itertools.product(range(-1, len(gb)), repeat=len(pb))
        if len({c for c in choice if c >= 0}) == sum(c >= 0 for c in choice)
    )
    # each of the <= 8 terms is <= 8 and a sum of k terms is off by <= k eps sum|terms|, on both sides
    assert abs(_partial_matching_cost(pb, pd, gb, gd, tgt) - best) <= 2 * 8 * EPS64 * 64
