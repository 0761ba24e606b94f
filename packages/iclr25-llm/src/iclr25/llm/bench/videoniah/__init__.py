"""VideoNIAH: synthetic needle-in-a-video-haystack benchmarks and the VNBench scorer.

Zhao et al., "Needle In A Video Haystack: A Scalable Synthetic Evaluator for Video MLLMs",
ICLR 2025, https://arxiv.org/abs/2406.09367 (official code: https://github.com/joez17/VideoNIAH).

Unrelated "needles" are inserted into (``insert_needle``: spliced/replaced frames) or overlaid on
(``edit_needle``: alpha-blended text or sprites) any haystack video, and multiple-choice questions
are generated from the needles alone, so the answer is exact and the video length is free::

    haystack (T,H,W,3) ──► insert / edit needles ──► VideoSample(frames, question, 4 options, meta)
        retrieval: which needle?   ordering: which order?   counting: how many?
    VNBenchEval: K frames ──► ChatModel × 4 rotated tries ──► official letter parser ──► 4/4 rule
        ──► per-type accuracy ──► overall = mean over the 9 sub-tasks

Both needle operations also accept the video as a ``torch.uint8`` tensor on any device (a GPU
compositor, bit-identical to the numpy path).

``FrameMatchSolver`` and ``hit_probability`` give a sampling-limited observer with an exact
analytical score, to validate the benchmark and the scorer end to end.
"""

from .needles import NeedleGallery, edit_needle, insert_needle, render_text, sprite
from .scoring import (
    VNBenchEval,
    VNBenchResult,
    circular_accuracy,
    format_prompt,
    judge_records,
    load_vnbench,
    parse_letter,
    rotate,
)
from .solvers import FrameMatchSolver, constant, hit_probability, oracle
from .tasks import (
    TYPES,
    VideoSample,
    build_vnbench_like,
    default_galleries,
    make_counting,
    make_ordering,
    make_retrieval,
    place_spans,
)
from .video import VideoDecodeError, check_frames, load_video, sample_frames, sample_indices, synthetic_haystack

__all__ = [
    "TYPES",
    "FrameMatchSolver",
    "NeedleGallery",
    "VNBenchEval",
    "VNBenchResult",
    "VideoDecodeError",
    "VideoSample",
    "build_vnbench_like",
    "check_frames",
    "circular_accuracy",
    "constant",
    "default_galleries",
    "edit_needle",
    "format_prompt",
    "hit_probability",
    "insert_needle",
    "judge_records",
    "load_video",
    "load_vnbench",
    "make_counting",
    "make_ordering",
    "make_retrieval",
    "oracle",
    "parse_letter",
    "place_spans",
    "render_text",
    "rotate",
    "sample_frames",
    "sample_indices",
    "sprite",
    "synthetic_haystack",
]
