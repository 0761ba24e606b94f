"""Rule-based question generation: retrieval, ordering and counting samples from needles alone.

Every sample keeps full metadata (needle names, spans, positions, the haystack length) so a
question's answer can be audited against the frames. All randomness comes from one
``numpy.random.Generator(seed)``.

Sub-task types (9, as in VNBench): ``ret_insert1, ret_insert2, ret_edit1, ord_insert1, ord_insert2,
ord_edit1, cnt_insert1, cnt_edit1, cnt_edit2`` (see :mod:`.needles` for the assets of each kind).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .needles import NeedleGallery, edit_needle, insert_needle
from .video import check_frames

__all__ = [
    "TYPES",
    "VideoSample",
    "build_vnbench_like",
    "default_galleries",
    "make_counting",
    "make_ordering",
    "make_retrieval",
    "place_spans",
]

TYPES: tuple[str, ...] = (
    "ret_insert1",
    "ret_insert2",
    "ret_edit1",
    "ord_insert1",
    "ord_insert2",
    "ord_edit1",
    "cnt_insert1",
    "cnt_edit1",
    "cnt_edit2",
)
FAMILIES = {"ret": "retrieval", "ord": "ordering", "cnt": "counting"}

_NOUN = {"text": "text card", "image": "picture", "subtitle": "subtitle", "sprite": "shape"}


@dataclass
class VideoSample:
    """One multiple-choice video question.

    Attributes
    ----------
    frames : (T, H, W, 3) uint8 video, or None when the video lives at ``video_path`` (loaded lazily).
    question : the question text (without options).
    options : the 4 option strings in the order of try 0.
    answer : index of the correct option in ``options``.
    type : sub-task type, e.g. ``"ret_insert1"``.
    sample_id : identifier (the official ``question_id`` without the ``_<try>`` suffix).
    fps : frame rate of ``frames``.
    meta : audit metadata (needles, spans, positions, haystack length, seed).
    video_path : path of the video for samples loaded from the published annotations.
    """

    frames: np.ndarray | None
    question: str
    options: list[str]
    answer: int
    type: str
    sample_id: str = ""
    fps: float = 1.0
    meta: dict[str, Any] = field(default_factory=dict)
    video_path: str | None = None

    def __post_init__(self) -> None:
        if len(self.options) != 4 or len(set(self.options)) != 4:
            raise ValueError(f"options must be 4 distinct strings, got {self.options!r}")
        if not isinstance(self.answer, (int, np.integer)) or not 0 <= int(self.answer) < 4:
            raise ValueError(f"answer must be an option index in [0, 3], got {self.answer!r}")

    @property
    def gt(self) -> str:
        """The correct option's text."""
        return self.options[self.answer]

    @property
    def family(self) -> str:
        return FAMILIES.get(self.type.split("_")[0], self.type)

    def video(self) -> np.ndarray:
        """The frames (loads ``video_path`` when ``frames`` is None)."""
        if self.frames is not None:
            return self.frames
        if self.video_path is None:
            raise ValueError(f"sample {self.sample_id!r} has neither frames nor a video_path")
        from .video import load_video

        return load_video(self.video_path)


def place_spans(T: int, lengths: Sequence[int], rng: np.random.Generator, *, margin: int = 0) -> list[int]:
    """Uniformly random non-overlapping spans in a T-frame timeline, in increasing order.

    Every composition of the free frames into gaps is equally likely (stars and bars), so for one
    span the start is uniform over ``0 .. T-L``.

    Parameters
    ----------
    T : timeline length.
    lengths : span lengths, in temporal order.
    margin : minimum number of free frames between consecutive spans.

    Returns
    -------
    starts : list of int, ``starts[i] + lengths[i] + margin <= starts[i+1]``.
    """
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator (np.random.default_rng(seed)), got {type(rng).__name__}")
    if not isinstance(margin, (int, np.integer)) or margin < 0:
        raise ValueError(f"margin must be an int >= 0 (free frames between spans), got {margin!r}")
    if any(L < 0 for L in lengths):
        raise ValueError(f"lengths must be >= 0, got {list(lengths)!r}")
    n = len(lengths)
    if n == 0:
        return []
    free = int(T) - int(sum(lengths)) - margin * (n - 1)
    if free < 0:
        raise ValueError(
            f"{n} needles of total length {sum(lengths)} with margin {margin} need at least "
            f"{sum(lengths) + margin * (n - 1)} frames, the video has T={T}"
        )
    cuts = np.sort(rng.choice(free + n, size=n, replace=False)) - np.arange(n)
    starts, off = [], 0
    for i, L in enumerate(lengths):
        starts.append(int(cuts[i]) + off)
        off += int(L) + margin
    return starts


def _check_kind(kind: str, allowed: Sequence[str]) -> None:
    if kind not in allowed:
        raise ValueError(f"kind must be one of {tuple(allowed)}, got {kind!r}")


def _check_mode(mode: str) -> None:
    if mode not in ("insert", "replace"):
        raise ValueError(f"mode must be 'insert' or 'replace', got {mode!r}")


def _needle_len(needle_frames: int | None, fps: float) -> int:
    if isinstance(fps, bool) or not isinstance(fps, (int, float, np.number)) or not (math.isfinite(fps) and fps > 0):
        raise ValueError(f"fps must be a finite number > 0, got {fps!r}")
    L = max(1, round(fps)) if needle_frames is None else needle_frames
    if not isinstance(L, (int, np.integer)) or L < 1:
        raise ValueError(f"needle_frames must be an int >= 1, got {needle_frames!r}")
    return int(L)


def _subtitle_pos(frames: np.ndarray, sub: np.ndarray) -> tuple[int, int]:
    H, W = frames.shape[1:3]
    sh, sw = sub.shape[:2]
    if sh > H or sw > W:
        raise ValueError(f"subtitle of size {(sh, sw)} is larger than the frame {(H, W)}")
    # lower third, horizontally centered
    y = min(H - sh, int(H * 5 / 6) - sh // 2)
    return max(0, y), (W - sw) // 2


def _place(
    haystack: np.ndarray,
    needles: Sequence[np.ndarray],
    L: int,
    op: str,
    rng: np.random.Generator,
    margin: int,
    mode: str = "insert",
) -> tuple[np.ndarray, list[dict]]:
    """Place needles at random non-overlapping spans; spans are in output-video coordinates."""
    T = haystack.shape[0]
    n = len(needles)
    if op == "insert" and mode == "insert":
        starts = place_spans(T + n * L, [L] * n, rng, margin=margin)
        out, metas = haystack, []
        for s, nd in zip(starts, needles, strict=True):  # increasing starts keep earlier spans fixed
            out, m = insert_needle(out, nd, s, L, mode="insert")
            metas.append(m)
        return out, metas
    starts = place_spans(T, [L] * n, rng, margin=margin)
    if op == "insert":
        out, metas = haystack, []
        for s, nd in zip(starts, needles, strict=True):
            out, m = insert_needle(out, nd, s, L, mode="replace")
            metas.append(m)
        return out, metas
    out, metas = haystack.copy(), []
    for s, nd in zip(starts, needles, strict=True):
        out, m = edit_needle(out, nd, s, L, _subtitle_pos(out, nd), inplace=True)
        metas.append(m)
    return out, metas


def _shuffle_options(truth: str, distractors: Sequence[str], rng: np.random.Generator) -> tuple[list[str], int]:
    opts = [truth, *distractors]
    perm = rng.permutation(4)
    shuffled = [opts[i] for i in perm]
    return shuffled, int(np.flatnonzero(perm == 0)[0])


def _gallery_for(kind: str, gallery: NeedleGallery) -> None:
    want = {"insert1": "text", "insert2": "image", "edit1": "subtitle"}[kind]
    if gallery.kind != want:
        raise ValueError(f"kind={kind!r} needs a NeedleGallery of kind {want!r}, got {gallery.kind!r}")


def make_retrieval(
    haystack: np.ndarray,
    gallery: NeedleGallery,
    *,
    kind: str = "insert1",
    needle_frames: int | None = None,
    fps: float = 1.0,
    mode: str = "insert",
    seed: int = 0,
    sample_id: str | None = None,
) -> VideoSample:
    """Retrieval (temporal perception): one needle, 4 options = truth + 3 gallery distractors.

    Parameters
    ----------
    haystack : (T, H, W, 3) uint8.
    gallery : text cards for ``insert1``, pictures for ``insert2``, subtitles for ``edit1`` (>= 4 items).
    kind : ``"insert1" | "insert2" | "edit1"``.
    needle_frames : needle duration L in frames (default: 1 s, ``round(fps)``).
    fps : frame rate of the haystack.
    mode : ``"insert"`` (splice, output has T+L frames) or ``"replace"`` for insert kinds.
    seed : generator seed.

    Returns
    -------
    VideoSample with ``meta["needles"] = [{"name", "span", ...}]`` (spans in output frames).
    """
    check_frames(haystack, "haystack")
    _check_kind(kind, ("insert1", "insert2", "edit1"))
    _check_mode(mode)
    _gallery_for(kind, gallery)
    if len(gallery) < 4:
        raise ValueError(f"gallery needs >= 4 items for 4 options, got {len(gallery)}")
    L = _needle_len(needle_frames, fps)
    rng = np.random.default_rng(seed)
    names = gallery.names
    pick = rng.choice(len(names), size=4, replace=False)
    truth, distract = names[pick[0]], [names[i] for i in pick[1:]]
    op = "edit" if kind == "edit1" else "insert"
    out, metas = _place(haystack, [gallery[truth]], L, op, rng, 0, mode)
    opts, ans = _shuffle_options(truth, distract, rng)
    noun = _NOUN[gallery.kind]
    q = f"Which {noun} appeared in the video?"
    meta = {
        "haystack_T": int(haystack.shape[0]),
        "seed": seed,
        "needles": [{"name": truth, **metas[0]}],
    }
    return VideoSample(out, q, opts, ans, f"ret_{kind}", sample_id or f"{seed}_ret_{kind}", fps, meta)


def make_ordering(
    haystack: np.ndarray,
    gallery: NeedleGallery,
    *,
    k: int = 4,
    kind: str = "insert1",
    needle_frames: int | None = None,
    fps: float = 1.0,
    mode: str = "insert",
    margin: int = 1,
    seed: int = 0,
    sample_id: str | None = None,
) -> VideoSample:
    """Ordering (chronological order): k needles at increasing spans; options are 4 distinct permutations.

    The true order and 3 distinct random permutations of the same k names, each written as
    ``"A, B, C, D"`` (names joined by ", ").
    """
    check_frames(haystack, "haystack")
    _check_kind(kind, ("insert1", "insert2", "edit1"))
    _check_mode(mode)
    _gallery_for(kind, gallery)
    if not isinstance(k, (int, np.integer)) or k < 3:
        raise ValueError(f"k must be an int >= 3 (4 distinct orders need k! >= 4), got {k!r}")
    if len(gallery) < k:
        raise ValueError(f"gallery needs >= k={k} items, got {len(gallery)}")
    L = _needle_len(needle_frames, fps)
    rng = np.random.default_rng(seed)
    names = gallery.names
    chosen = [names[i] for i in rng.choice(len(names), size=k, replace=False)]
    op = "edit" if kind == "edit1" else "insert"
    out, metas = _place(haystack, [gallery[n] for n in chosen], L, op, rng, margin, mode)
    truth = tuple(chosen)
    seen = {truth}
    distract = []
    while len(distract) < 3:
        p = tuple(chosen[i] for i in rng.permutation(k))
        if p not in seen:
            seen.add(p)
            distract.append(", ".join(p))
    opts, ans = _shuffle_options(", ".join(truth), distract, rng)
    noun = _NOUN[gallery.kind]
    listed = ", ".join(sorted(chosen))
    q = f"In what order did these {noun}s appear in the video: {listed}?"
    meta = {
        "haystack_T": int(haystack.shape[0]),
        "seed": seed,
        "needles": [{"name": n, **m} for n, m in zip(chosen, metas, strict=True)],
    }
    return VideoSample(out, q, opts, ans, f"ord_{kind}", sample_id or f"{seed}_ord_{kind}", fps, meta)


def _count_options(c: int, rng: np.random.Generator, lo: int = 1, hi: int = 9) -> tuple[list[str], int]:
    pool = [v for v in range(lo, hi + 1) if v != c]
    distract = [str(pool[i]) for i in rng.choice(len(pool), size=3, replace=False)]
    return _shuffle_options(str(c), distract, rng)


def _random_boxes(H: int, W: int, s: int, n: int, rng: np.random.Generator, gap: int = 1) -> list[tuple[int, int]]:
    """n non-touching s x s boxes (at least ``gap`` free pixels apart) by rejection sampling."""
    if n * (s + gap) ** 2 > H * W // 2 or s > min(H, W):
        raise ValueError(f"{n} sprites of size {s} do not fit without overlap in a {H}x{W} frame")
    boxes: list[tuple[int, int]] = []
    for _ in range(10000):
        if len(boxes) == n:
            break
        y, x = int(rng.integers(0, H - s + 1)), int(rng.integers(0, W - s + 1))
        if all(abs(y - by) >= s + gap or abs(x - bx) >= s + gap for by, bx in boxes):
            boxes.append((y, x))
    if len(boxes) < n:
        raise ValueError(f"could not place {n} non-overlapping sprites of size {s} in a {H}x{W} frame")
    return boxes


def make_counting(
    haystack: np.ndarray,
    needle: NeedleGallery | np.ndarray,
    *,
    count_range: tuple[int, int] = (1, 8),
    kind: str = "edit1",
    needle_frames: int | None = None,
    fps: float = 1.0,
    mode: str = "insert",
    max_per_frame: int = 3,
    margin: int = 1,
    name: str | None = None,
    seed: int = 0,
    sample_id: str | None = None,
) -> VideoSample:
    """Counting (spatio-temporal coherence): one needle appears c times; options c + 3 other counts in 1..9.

    Parameters
    ----------
    haystack : (T, H, W, 3) uint8.
    needle : a gallery (one item is drawn) or one asset: a text card (H, W, 3) for ``insert1``, an
        RGBA sprite (h, w, 4) for ``edit1``/``edit2`` (each copy is placed in its own square box of
        side ``max(h, w)``, so copies never touch).
    count_range : inclusive range of c.
    kind : ``"insert1"`` (c separate card spans), ``"edit1"`` (c spans, one sprite each, at random
        positions) or ``"edit2"`` (c sprites in total, up to ``max_per_frame`` copies at different
        positions inside the same frames).
    margin : free frames between spans, so separate appearances never touch in time.
    """
    check_frames(haystack, "haystack")
    _check_kind(kind, ("insert1", "edit1", "edit2"))
    _check_mode(mode)
    if kind == "edit2" and (not isinstance(max_per_frame, (int, np.integer)) or max_per_frame < 1):
        raise ValueError(f"max_per_frame must be an int >= 1, got {max_per_frame!r}")
    lo, hi = count_range
    if not (1 <= lo <= hi <= 9):
        raise ValueError(f"count_range must satisfy 1 <= lo <= hi <= 9, got {count_range!r}")
    L = _needle_len(needle_frames, fps)
    rng = np.random.default_rng(seed)
    if isinstance(needle, NeedleGallery):
        want = "text" if kind == "insert1" else "sprite"
        if needle.kind != want:
            raise ValueError(f"kind={kind!r} needs a NeedleGallery of kind {want!r}, got {needle.kind!r}")
        name = needle.names[int(rng.integers(len(needle)))]
        asset = needle[name]
    else:
        asset = needle
        name = name or ("card" if kind == "insert1" else "shape")
    c = int(rng.integers(lo, hi + 1))
    T, H, W = haystack.shape[:3]
    noun = "text card" if kind == "insert1" else "shape"
    if kind == "insert1":
        out, metas = _place(haystack, [asset] * c, L, "insert", rng, margin, mode)
        needles = [{"name": name, **m} for m in metas]
    else:
        if not (isinstance(asset, np.ndarray) and asset.ndim == 3 and asset.shape[2] == 4):
            raise ValueError(f"kind={kind!r} needs an RGBA sprite (h, w, 4), got {getattr(asset, 'shape', asset)}")
        if kind == "edit1":
            groups = [1] * c
        else:
            per = min(max_per_frame, c)
            groups = []
            left = c
            while left > 0:
                g = int(rng.integers(1, min(per, left) + 1))
                groups.append(g)
                left -= g
        starts = place_spans(T, [L] * len(groups), rng, margin=margin)
        out = haystack.copy()
        needles = []
        s = max(int(asset.shape[0]), int(asset.shape[1]))  # each copy gets an s x s box (an (h, w) sprite fits)
        for st, g in zip(starts, groups, strict=True):
            for y, x in _random_boxes(H, W, s, g, rng):
                _, m = edit_needle(out, asset, st, L, (y, x), inplace=True)
                needles.append({"name": name, **m})
    opts, ans = _count_options(c, rng)
    q = f'How many times did the {noun} "{name}" appear in the video?'
    if kind == "edit2":
        q = f'How many copies of the {noun} "{name}" appeared in the video in total, counting every copy?'
    meta = {"haystack_T": int(T), "seed": seed, "count": c, "needles": needles}
    return VideoSample(out, q, opts, ans, f"cnt_{kind}", sample_id or f"{seed}_cnt_{kind}", fps, meta)


# the gallery of default_galleries() each sub-task type draws its needles from
_GALLERY_OF = {
    "ret_insert1": "text",
    "ret_insert2": "image",
    "ret_edit1": "subtitle",
    "ord_insert1": "text",
    "ord_insert2": "image",
    "ord_edit1": "subtitle",
    "cnt_insert1": "text",
    "cnt_edit1": "sprite",
    "cnt_edit2": "sprite",
}

_WORDS = (
    "CAT", "SUN", "KEY", "MAP", "BOX", "JAR", "PEN", "CUP", "OWL", "FOX", "ICE", "BEE",
    "AXE", "BUS", "EGG", "HAT", "INK", "KIT", "LOG", "NUT", "RAY", "TOY", "VAN", "ZIP",
)  # fmt: skip


def default_galleries(size: tuple[int, int] = (96, 96), seed: int = 0) -> dict[str, NeedleGallery]:
    """The galleries :func:`build_vnbench_like` uses: text cards, pictures, subtitles, sprites."""
    h, w = size
    return {
        "text": NeedleGallery.text_cards(_WORDS, size),
        "image": NeedleGallery.pictures(size, seed=seed),
        "subtitle": NeedleGallery.subtitles(_WORDS, frame_width=w),
        "sprite": NeedleGallery.sprites(size=max(5, min(h, w) // 8)),
    }


def build_vnbench_like(
    haystacks: Sequence[np.ndarray],
    per_type: int = 10,
    *,
    types: Sequence[str] = TYPES,
    galleries: dict[str, NeedleGallery] | None = None,
    needle_frames: int | None = None,
    fps: float = 1.0,
    seed: int = 0,
) -> list[VideoSample]:
    """A VNBench-style benchmark: ``per_type`` samples of each sub-task type, haystacks cycled.

    Parameters
    ----------
    haystacks : (T, H, W, 3) uint8 videos (all the same H, W).
    per_type : samples per type (VNBench has 150).
    types : sub-task types to build (default all 9).
    galleries : as returned by :func:`default_galleries` (built for the haystack size when None);
        only the keys the ``types`` draw from are needed (``"text"`` for ``*_insert1``, ``"image"``
        for ``*_insert2``, ``"subtitle"`` for ``ret/ord_edit1``, ``"sprite"`` for ``cnt_edit1/2``).

    Returns
    -------
    list of VideoSample, ``len(types) * per_type`` items with ids ``"<i>_<type>"``.

    Raises
    ------
    ValueError : no haystacks, haystacks of different frame sizes, ``per_type`` not an int >= 0, an
        unknown type, or a gallery the types need missing from ``galleries``.
    """
    if not haystacks:
        raise ValueError("haystacks must be a non-empty list of videos")
    for i, hs in enumerate(haystacks):
        check_frames(hs, f"haystacks[{i}]")
        if hs.shape[1:3] != haystacks[0].shape[1:3]:
            raise ValueError(
                f"haystacks must all have the same frame size (H, W); haystacks[0] is "
                f"{tuple(haystacks[0].shape[1:3])}, haystacks[{i}] is {tuple(hs.shape[1:3])}"
            )
    if isinstance(per_type, bool) or not isinstance(per_type, (int, np.integer)) or per_type < 0:
        raise ValueError(f"per_type must be an int >= 0, got {per_type!r}")
    if isinstance(types, str):
        raise ValueError(f"types must be a list of sub-task types such as [{types!r}], got the string {types!r}")
    bad = [t for t in types if t not in TYPES]
    if bad:
        raise ValueError(f"unknown types {bad}; expected a subset of {TYPES}")
    size = haystacks[0].shape[1:3]
    gal = galleries or default_galleries(tuple(size), seed)
    need = {_GALLERY_OF[t] for t in types}
    missing = sorted(need - set(gal))
    if missing:
        raise ValueError(
            f"galleries lacks {missing}, needed by types {list(types)}; expected a dict like default_galleries() "
            "with 'text', 'image', 'subtitle' and 'sprite' (only the ones the types use)"
        )
    kind_gallery = {"insert1": gal.get("text"), "insert2": gal.get("image"), "edit1": gal.get("subtitle")}
    out: list[VideoSample] = []
    ss = np.random.SeedSequence(seed)
    seeds = itertools.count()
    child = ss.generate_state(len(types) * per_type)
    for t in types:
        fam, kind = t.split("_")
        for i in range(per_type):
            j = next(seeds)
            sd = int(child[j])
            hs = haystacks[j % len(haystacks)]
            sid = f"{i}_{t}"
            if fam == "ret":
                s = make_retrieval(
                    hs, kind_gallery[kind], kind=kind, needle_frames=needle_frames, fps=fps, seed=sd, sample_id=sid
                )
            elif fam == "ord":
                s = make_ordering(
                    hs, kind_gallery[kind], kind=kind, needle_frames=needle_frames, fps=fps, seed=sd, sample_id=sid
                )
            else:
                needle = gal["text"] if kind == "insert1" else gal["sprite"]
                s = make_counting(hs, needle, kind=kind, needle_frames=needle_frames, fps=fps, seed=sd, sample_id=sid)
            out.append(s)
    return out
