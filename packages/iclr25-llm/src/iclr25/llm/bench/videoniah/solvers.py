"""Reference observers with known behaviour, for validating the benchmark and the protocol.

- :func:`hit_probability`: exact probability that a uniform K-frame sample contains at least one
  frame of a needle span of length L placed uniformly in a T-frame video.
- :class:`FrameMatchSolver`: a sampling-limited observer. It sees only the frames it is given,
  compares each with the option needles (mean squared error below a threshold counts as seeing the
  needle) and otherwise answers the first option. On retrieval it is right on all 4 tries exactly
  when a sampled frame falls in the needle span, so its circular accuracy estimates
  ``hit_probability``; counting needs every appearance seen, ordering every needle.
- :func:`oracle`: answers from the ground truth (reads the sample metadata), for a 100% check.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..chat import ImagePart, OfflineChatModel, VideoPart
from ..chat.offline import last_user_text
from .needles import NeedleGallery
from .scoring import LETTERS, rotate
from .tasks import VideoSample
from .video import sample_indices

__all__ = ["FrameMatchSolver", "constant", "hit_probability", "oracle"]

_OPT = re.compile(r"^([ABCD])\. (.*)$", re.M)
_QUOTED = re.compile(r'"([^"]+)"')


def hit_probability(T: int, L: int, K: int) -> float:
    """P(a uniform K-frame sample hits a uniformly placed L-frame span) in a T-frame video, exactly.

    The sampler is ``unique(round(linspace(0, T-1, K)))`` (all frames when K >= T); the span start is
    uniform over ``0 .. T-L``. A sampled index i is hit by the starts ``max(0, i-L+1) .. min(i, T-L)``;
    the answer is the size of the union of these intervals over (T-L+1).
    """
    for nm, v in (("T", T), ("L", L), ("K", K)):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{nm} must be an int >= 1, got {v!r}")
    if L > T:
        raise ValueError(f"L must be <= T, got L={L}, T={T}")
    idx = np.arange(T) if K >= T else sample_indices(int(T), int(K))
    lo = np.maximum(0, idx - L + 1)
    hi = np.minimum(idx, T - L)
    covered, end = 0, -1  # intervals come sorted by lo because idx is increasing
    for a, b in zip(lo.tolist(), hi.tolist(), strict=True):
        if b < a:
            continue
        a = max(a, end + 1)
        if b >= a:
            covered += b - a + 1
            end = b
    return covered / (T - L + 1)


def _frames_of(conversation: Sequence[Any]) -> list[np.ndarray]:
    out: list[np.ndarray] = []
    for m in conversation:
        for p in m.parts:
            if isinstance(p, VideoPart) and isinstance(p.frames, np.ndarray):
                out.extend(p.frames)
            elif isinstance(p, ImagePart):
                out.append(p.array())
    return out


class FrameMatchSolver:
    """A sampling-limited observer answering VNBench insert-type questions by frame matching.

    Parameters
    ----------
    galleries : galleries whose items may appear as full-frame needles (text cards, pictures): a
        list of ``NeedleGallery`` of kind ``"text"`` or ``"image"``, or one such gallery.
    threshold : a frame "shows" a needle when their mean squared error (over pixels and channels,
        uint8 scale) is below this (200 as in the method note).

    Notes
    -----
    Use as a responder: ``OfflineChatModel(FrameMatchSolver(g), modalities=("text", "image", "video"))``.
    Retrieval: the option whose needle best matches a frame under the threshold. Counting: the number
    of runs of consecutive matching frames of the quoted needle. Ordering: the order of first matches,
    when all needles are seen. Anything else (edit overlays, unseen needles): the first option.
    """

    def __init__(self, galleries: Sequence[NeedleGallery], threshold: float = 200.0) -> None:
        if isinstance(galleries, NeedleGallery):
            galleries = [galleries]
        elif isinstance(galleries, Mapping):
            raise TypeError(
                "galleries must be a list of NeedleGallery, e.g. [gal['text'], gal['image']] for "
                "gal = default_galleries(...), got a dict"
            )
        self.items: dict[str, np.ndarray] = {}
        for g in galleries:
            if not isinstance(g, NeedleGallery):
                raise TypeError(f"galleries must hold NeedleGallery objects, got {type(g).__name__}")
            if g.kind not in ("text", "image"):
                raise ValueError(f"FrameMatchSolver matches full-frame needles (text/image), got a {g.kind!r} gallery")
            self.items.update({k: v.astype(np.float32) for k, v in g.items.items()})
        self.threshold = float(threshold)
        self.identity = {"responder": "frame_match", "threshold": self.threshold, "items": sorted(self.items)}

    def _matches(self, frames: list[np.ndarray], name: str) -> np.ndarray:
        ref = self.items.get(name)
        if ref is None or not frames or frames[0].shape != ref.shape:
            return np.zeros(len(frames), dtype=bool)
        f = np.stack(frames).astype(np.float32)
        mse = ((f - ref[None]) ** 2).mean(axis=(1, 2, 3))
        return mse < self.threshold

    def answer(self, frames: list[np.ndarray], prompt: str) -> str:
        """The letter this observer replies for one prompt given its frames."""
        opts = dict(_OPT.findall(prompt))
        if len(opts) != 4:
            return "A"
        question = prompt.split("\nA. ")[0]
        if question.startswith("How many"):
            m = _QUOTED.search(question)
            if not m:
                return "A"
            hit = self._matches(frames, m.group(1))
            runs = int(hit[0]) + int(np.sum(hit[1:] & ~hit[:-1])) if hit.size else 0
            for letter in LETTERS:
                if opts[letter] == str(runs):
                    return letter
            return "A"
        if question.startswith("In what order"):
            names = [n.strip() for n in opts["A"].split(",")]
            first = {}
            for n in names:
                hit = np.flatnonzero(self._matches(frames, n))
                if hit.size == 0:
                    return "A"
                first[n] = hit[0]
            seen = ", ".join(sorted(names, key=lambda n: first[n]))
            for letter in LETTERS:
                if opts[letter] == seen:
                    return letter
            return "A"
        best, best_err = "A", np.inf
        for letter in LETTERS:
            ref = self.items.get(opts[letter])
            if ref is None or not frames or frames[0].shape != ref.shape:
                continue
            f = np.stack(frames).astype(np.float32)
            err = float(((f - ref[None]) ** 2).mean(axis=(1, 2, 3)).min())
            if err < self.threshold and err < best_err:
                best, best_err = letter, err
        return best

    def __call__(self, conversation: Any, config: Any, sample_index: int) -> str:
        return self.answer(_frames_of(conversation), last_user_text(conversation))


def _video_key(frames: list[np.ndarray], prompt: str) -> str:
    h = hashlib.sha256()
    for f in frames:
        h.update(np.ascontiguousarray(f).tobytes())
    h.update(prompt.encode())
    return h.hexdigest()


class _Oracle:
    def __init__(self, samples: Sequence[VideoSample], k: int | None) -> None:
        from .video import sample_frames

        self.table: dict[str, str] = {}
        for s in samples:
            v = s.video()
            sub = v if k is None else sample_frames(v, min(k, v.shape[0]))[0]
            from .scoring import format_prompt

            for t in range(4):
                opts, letter = rotate(s.options, s.answer, t)
                self.table[_video_key(list(sub), format_prompt(s.question, opts))] = letter
        self.identity = {"responder": "oracle", "n": len(self.table)}

    def __call__(self, conversation: Any, config: Any, sample_index: int) -> str:
        return self.table.get(_video_key(_frames_of(conversation), last_user_text(conversation)), "")


def oracle(samples: Sequence[VideoSample], frames: int | None = 16) -> OfflineChatModel:
    """A model that knows every sample's answer (keyed by the sampled frames and the prompt).

    ``frames`` must equal the evaluator's K so the keys match.
    """
    return OfflineChatModel(_Oracle(samples, frames), name="oracle", modalities=("text", "image", "video"))


def constant(letter: str = "A") -> OfflineChatModel:
    """A model that always answers ``letter`` (scores 0 under circular evaluation)."""
    if letter not in LETTERS:
        raise ValueError(f"letter must be one of {LETTERS}, got {letter!r}")

    def reply(conversation: Any, config: Any, sample_index: int) -> str:
        return letter

    reply.identity = {"responder": "constant", "letter": letter}  # type: ignore[attr-defined]
    return OfflineChatModel(reply, name=f"constant-{letter}", modalities=("text", "image", "video"))
