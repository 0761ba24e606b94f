"""Registered reproduction: validate VideoNIAH and the VNBench protocol with observers of known behaviour.

No video LLM runs offline on a 2-core CPU, so the paper's model scores are printed report-only.
What is measured, in one run:

1. a sampling-limited observer (:class:`FrameMatchSolver`) served with ``serve_openai`` on
   127.0.0.1 and queried over HTTP by ``OpenAIChatModel`` (frames travel as PNG images) on
   ``ret_insert1`` (T=120 frames incl. the needle, L=4) for K in {8, 16, 30}: its circular accuracy
   must agree with the exact ``hit_probability(120, 4, K)`` within 3 standard errors and increase
   with K (the paper's "more frames help retrieval");
2. the same observer at K=16 on ``cnt_insert1`` (below its retrieval accuracy: "counting is
   hardest") and on retrieval at T in {60, 120, 240} (decreasing: "longer haystacks are harder");
3. on a 9-type VNBench-like benchmark: an oracle (100%), a hashed random letter guesser (about
   (1/4)^4) and a constant "A" guesser (exactly 0) through the same scorer.

``--quick`` uses 64x64 frames, 40 samples per HTTP setting and the length sweep and counting in
process; the full run uses 300 samples per K, everything over HTTP.
"""

from __future__ import annotations

import itertools
import logging
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from iclr25.core.experiments import Experiment, Measurement, Outcome
from iclr25.core.io import save_json

from ..chat import OfflineChatModel, OpenAIChatModel, TransportConfig, letter_guesser, serve_openai
from .scoring import VNBenchEval
from .solvers import FrameMatchSolver, constant, hit_probability, oracle
from .tasks import build_vnbench_like, default_galleries, make_counting, make_retrieval
from .video import synthetic_haystack

logger = logging.getLogger(__name__)

L_NEEDLE = 4
T_MAIN = 120
KS = (8, 16, 30)
T_SWEEP = (60, 120, 240)
# VNBench main table (approximate, read from the paper's figures): report-only
PAPER = {"proprietary_overall": "~65% (Gemini 1.5 Pro, GPT-4o)", "open_source_overall": "often < 30%"}


def _haystacks(T: int, size: tuple[int, int], n: int, seed: int) -> list[np.ndarray]:
    return [synthetic_haystack(T, size, source="texture", seed=seed * 1000 + i) for i in range(n)]


def _retrieval_set(T_total: int, n: int, size, gal, seed: int, pool: int = 20) -> list:
    hays = _haystacks(T_total - L_NEEDLE, size, min(pool, n), seed + T_total)
    return [
        make_retrieval(hays[i % len(hays)], gal, kind="insert1", needle_frames=L_NEEDLE, seed=seed * 100003 + i)
        for i in range(n)
    ]


def _counting_set(T_hay: int, n: int, size, gal, seed: int, pool: int = 20) -> list:
    hays = _haystacks(T_hay, size, min(pool, n), seed + 7)
    return [
        make_counting(hays[i % len(hays)], gal, kind="insert1", needle_frames=L_NEEDLE, seed=seed * 7919 + i)
        for i in range(n)
    ]


def run(quick: bool, device: Any, seed: int, out: Path) -> Outcome:
    t0 = time.perf_counter()
    size = (64, 64) if quick else (96, 96)
    n_k = 40 if quick else 300
    n_t = 40 if quick else 300
    n_c = 40 if quick else 200
    per_type = 10 if quick else 40
    gal = default_galleries(size, seed=seed)
    solver = OfflineChatModel(
        FrameMatchSolver([gal["text"], gal["image"]]), name="frame-match", modalities=("text", "image", "video")
    )
    extra: dict[str, Any] = {"size": list(size), "L": L_NEEDLE, "quick": quick}

    ret_sets = {T_MAIN: _retrieval_set(T_MAIN, n_k, size, gal["text"], seed)}
    cnt = _counting_set(T_MAIN - 20, n_c, size, gal["text"], seed)  # c*L needle frames are added
    for T in T_SWEEP:
        if T not in ret_sets:
            ret_sets[T] = _retrieval_set(T, n_t, size, gal["text"], seed)
    extra["gen_s"] = time.perf_counter() - t0

    acc_k: dict[int, float] = {}
    acc_t: dict[int, float] = {}
    transport = TransportConfig(max_concurrency=2, max_retries=2)
    with serve_openai(solver) as handle:
        for K in KS:
            client = OpenAIChatModel(handle.base_url, "frame-match", max_video_frames=K, transport=transport)
            acc_k[K] = VNBenchEval(ret_sets[T_MAIN], frames=K, media="video").run(client).overall
        client16 = OpenAIChatModel(handle.base_url, "frame-match", max_video_frames=16, transport=transport)
        # quick mode keeps the length sweep and counting in process (same observer, no transport) for time
        m16 = solver if quick else client16
        for T in T_SWEEP:
            acc_t[T] = acc_k[16] if T == T_MAIN else VNBenchEval(ret_sets[T], frames=16).run(m16).overall
        acc_cnt = VNBenchEval(cnt, frames=16).run(m16).overall
        extra["http_requests"] = handle.request_count
    extra["transport"] = {"K_sweep": "http", "T_sweep_and_counting": "in-process" if quick else "http"}

    z = {}
    for K in KS:
        p = hit_probability(T_MAIN, L_NEEDLE, K)
        se = math.sqrt(max(p * (1 - p), 1e-12) / n_k)
        z[K] = (acc_k[K] - p) / se
    extra["retrieval_vs_K"] = {
        str(K): {"acc": acc_k[K], "hit_probability": hit_probability(T_MAIN, L_NEEDLE, K), "z": z[K]} for K in KS
    }
    extra["retrieval_vs_T_K16"] = {
        str(T): {"acc": acc_t[T], "hit_probability": hit_probability(T, L_NEEDLE, 16)} for T in T_SWEEP
    }
    extra["counting_K16"] = acc_cnt
    extra["n"] = {"per_K": n_k, "per_T": n_t, "counting": n_c, "bench_per_type": per_type}

    # the 9-type benchmark through the same scorer: oracle, random and constant guessers
    hays = _haystacks(60, size, 6, seed + 99)
    bench = build_vnbench_like(hays, per_type=per_type, galleries=gal, needle_frames=2, seed=seed)
    ev = VNBenchEval(bench, frames=16)
    res_oracle = ev.run(oracle(bench, 16))
    res_rand = ev.run(OfflineChatModel(letter_guesser(seed), name="random", modalities=("text", "image", "video")))
    res_const = ev.run(constant("A"))
    res_fm = ev.run(solver)
    extra["bench"] = {
        "oracle": res_oracle.overall,
        "random": res_rand.overall,
        "random_per_try": res_rand.per_try,
        "constant_A": res_const.overall,
        "frame_match_per_type": res_fm.per_type,
        "frame_match_families": res_fm.families,
        "frame_match_overall": res_fm.overall,
    }
    extra["paper"] = PAPER
    extra["wall_s"] = time.perf_counter() - t0
    save_json(Path(out) / "results_videoniah.json", extra)
    logger.info("videoniah: %s", extra)

    fmt = lambda d: "/".join(f"{d[k]:.3f}" for k in sorted(d))  # noqa: E731
    incr_k = all(acc_k[a] < acc_k[b] for a, b in itertools.pairwise(KS))
    decr_t = all(acc_t[a] > acc_t[b] for a, b in itertools.pairwise(T_SWEEP))
    max_z = max(abs(v) for v in z.values())
    claims = {
        "retrieval_matches_hit_probability": Measurement(
            ours=round(max_z, 3),
            baseline=None,
            holds=max_z <= 3.0,
            note="max |z| over K=8/16/30 of (acc - hit_probability)/SE; acc "
            + fmt(acc_k)
            + " vs exact "
            + "/".join(f"{hit_probability(T_MAIN, L_NEEDLE, K):.3f}" for K in KS),
        ),
        "more_frames_help_retrieval": Measurement(
            ours=fmt(acc_k), baseline=None, holds=incr_k, note="circular retrieval accuracy at K=8/16/30, T=120"
        ),
        "counting_hardest": Measurement(
            ours=round(acc_cnt, 4),
            baseline=round(acc_k[16], 4),
            holds=acc_cnt < acc_k[16],
            note="frame-match observer at K=16: counting (ours) vs retrieval (baseline)",
        ),
        "longer_haystack_harder": Measurement(
            ours=fmt(acc_t), baseline=None, holds=decr_t, note="retrieval accuracy at K=16 for T=60/120/240"
        ),
        "random_guesser_chance": Measurement(
            ours=round(res_rand.overall, 4),
            baseline=round(res_const.overall, 4),
            holds=res_rand.overall <= 0.03 and res_const.overall == 0.0,
            note="hashed random letter guesser overall (ours) and constant-A (baseline) on the 9-type bench",
        ),
        "oracle_perfect": Measurement(
            ours=res_oracle.overall, baseline=None, holds=res_oracle.overall == 1.0, note="metadata oracle overall"
        ),
        "proprietary_lead": Measurement(
            ours=round(res_fm.overall, 4),
            baseline=None,
            holds=None,
            note="no video LLM runs offline; ours = frame-match observer overall on the 9-type bench (K=16)",
        ),
    }
    return Outcome(claims=claims, extra=extra)


experiment = Experiment("videoniah", run)
