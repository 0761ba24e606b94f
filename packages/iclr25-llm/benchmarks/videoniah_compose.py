"""VideoNIAH generation throughput: numpy vs torch compositor, and VNBench scoring time.

Composes ``--haystacks`` needle videos (default 100 haystacks of 1,800 frames at 224x224, the
issue's setting) with :func:`insert_needle` and :func:`edit_needle`, once on numpy arrays and once
on torch tensors resident on ``--device`` (the torch compositor: the same functions given a
tensor), in one run and on the same plan, and prints the output frames/s of each and their ratio.
Every ``--check-every``-th composed video is compared with the numpy one byte for byte (the script
fails on any difference). Per haystack the plan is what a VNBench-like sample mix does to one
video: 4 spliced needles (text cards and pictures, ``--needle-frames`` frames each), 4 subtitles in
the lower third and 1-8 sprites at random places.

Haystacks are synthesised once into a pool of ``--pool`` videos (numpy, timed separately) and
cycled; on a GPU the pool is uploaded once and the torch figures are for device-resident videos.
The per-video host->device and device->host copies are timed on the checked videos and reported
as an end-to-end ratio too.

Then it times :func:`circular_accuracy` on ``--scoring`` predictions (2,500 questions x 4 tries with
free-form replies; issue target < 1 s).

    python benchmarks/videoniah_compose.py --device cuda                 # issue setting, target >= 10x
    python benchmarks/videoniah_compose.py --device cpu --haystacks 4 --frames 300 --threads 1  # smoke
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from iclr25.core.bench import time_call
from iclr25.llm.bench.videoniah import (
    NeedleGallery,
    circular_accuracy,
    edit_needle,
    insert_needle,
    place_spans,
    sprite,
    synthetic_haystack,
)

_WORDS = ("CAT", "SUN", "KEY", "MAP", "BOX", "JAR", "PEN", "CUP")


def _assets(size: int, seed: int) -> dict[str, list[np.ndarray]]:
    return {
        "insert": list(NeedleGallery.text_cards(_WORDS, (size, size)).items.values())
        + list(NeedleGallery.pictures((size, size), n=8, seed=seed).items.values()),
        "subtitle": list(NeedleGallery.subtitles(_WORDS, frame_width=size).items.values()),
        "sprite": [sprite(s, c, max(5, size // 8)) for s, c in (("disk", "red"), ("ring", "cyan"), ("cross", "green"))],
    }


def _plan(T: int, size: int, L: int, assets: dict[str, list[np.ndarray]], rng: np.random.Generator) -> list[tuple]:
    """One haystack's operations: ("insert", asset, start, L) / ("edit", asset, start, L, (y, x))."""
    ops: list[tuple] = []
    n_ins = 4
    for s in place_spans(T + n_ins * L, [L] * n_ins, rng, margin=1):  # increasing: earlier spans stay put
        ops.append(("insert", ("insert", int(rng.integers(len(assets["insert"])))), s, L))
    T2 = T + n_ins * L
    sub0 = assets["subtitle"][0]
    sy, sx = max(0, int(size * 5 / 6) - sub0.shape[0] // 2), (size - sub0.shape[1]) // 2
    sy = min(sy, size - sub0.shape[0])
    for s in place_spans(T2, [L] * 4, rng, margin=1):
        ops.append(("edit", ("subtitle", int(rng.integers(len(assets["subtitle"])))), s, L, (sy, sx)))
    c = int(rng.integers(1, 9))
    k = int(rng.integers(len(assets["sprite"])))
    ss = assets["sprite"][k].shape[0]
    for s in place_spans(T2, [L] * c, rng, margin=1):
        pos = (int(rng.integers(0, size - ss + 1)), int(rng.integers(0, size - ss + 1)))
        ops.append(("edit", ("sprite", k), s, L, pos))
    return ops


def _compose(video, ops: list[tuple], assets) -> object:
    """Apply a plan; ``assets`` maps (kind, i) to a numpy array or a device tensor."""
    out = video
    copied = False
    for op in ops:
        if op[0] == "insert":
            out, _ = insert_needle(out, assets[op[1]], op[2], op[3])
            copied = True  # a splice returns a new video, edits may then write into it
        else:
            out, _ = edit_needle(out, assets[op[1]], op[2], op[3], op[4], inplace=copied)
            copied = True
    return out


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _scoring_records(n: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    preds = ["A", "B", "C", "D", "B. because", "The answer is C", "A or B", "", None, "(D)", "Answer: B", "D."]
    types = ["ret_insert1", "ret_insert2", "ret_edit1", "ord_insert1", "ord_insert2", "ord_edit1", "cnt_insert1"]
    recs = []
    for i in range(n // 4):
        t, ans = types[i % len(types)], int(rng.integers(4))
        for k in range(4):
            gt = (ans - k) % 4
            pred = "ABCD"[gt] if rng.random() < 0.5 else preds[int(rng.integers(len(preds)))]
            recs.append({"question_id": f"{i}_{t}_{k}", "type": t, "pred": pred, "gt": "ABCD"[gt], "try": k})
    return recs


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--haystacks", type=int, default=100)
    p.add_argument("--frames", type=int, default=1800)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--needle-frames", type=int, default=30, help="L: frames per needle (1 s at 30 fps)")
    p.add_argument("--pool", type=int, default=2, help="distinct synthetic haystacks, cycled")
    p.add_argument("--numpy-haystacks", type=int, default=None, help="time numpy on the first N only (default all)")
    p.add_argument("--check-every", type=int, default=1, help="compare every n-th video with numpy")
    p.add_argument("--scoring", type=int, default=10_000, help="predictions to score (0: skip)")
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    device = torch.device(a.device)
    n_np = a.haystacks if a.numpy_haystacks is None else min(a.numpy_haystacks, a.haystacks)

    t0 = time.perf_counter()
    pool = [synthetic_haystack(a.frames, (a.size, a.size), fps=30.0, seed=a.seed + i) for i in range(a.pool)]
    t_syn = time.perf_counter() - t0
    raw = _assets(a.size, a.seed)
    np_assets = {(k, i): v for k, vs in raw.items() for i, v in enumerate(vs)}
    dev_assets = {key: torch.from_numpy(v).to(device) for key, v in np_assets.items()}
    rng = np.random.default_rng(a.seed)
    plans = [_plan(a.frames, a.size, a.needle_frames, raw, rng) for _ in range(a.haystacks)]
    t0 = time.perf_counter()
    dev_pool = [torch.from_numpy(h).to(device) for h in pool]
    _sync(device)
    t_up = (time.perf_counter() - t0) / a.pool
    print(
        f"VideoNIAH compose: {a.haystacks} haystacks x {a.frames} frames at {a.size}x{a.size}, "
        f"L={a.needle_frames}, device={device}"
    )
    print(f"  haystack synthesis (numpy, not in the ratio): {a.pool * a.frames / t_syn:,.0f} frames/s")

    # warm-up: first-touch page faults (numpy), CUDA context and allocator (torch)
    _compose(pool[0], plans[0], np_assets)
    _compose(dev_pool[0], plans[0], dev_assets)
    _sync(device)

    t_np = t_dev = t_xfer = 0.0
    f_np = f_dev = 0
    n_checked = 0
    t_np_checked = t_dev_checked = 0.0
    for j, ops in enumerate(plans):
        hay, dhay = pool[j % a.pool], dev_pool[j % a.pool]
        check = j % a.check_every == 0 and j < n_np
        ref = None
        if j < n_np:
            t0 = time.perf_counter()
            ref = _compose(hay, ops, np_assets)
            dt = time.perf_counter() - t0
            t_np += dt
            f_np += ref.shape[0]
        _sync(device)
        t0 = time.perf_counter()
        out = _compose(dhay, ops, dev_assets)
        _sync(device)
        dt_dev = time.perf_counter() - t0
        t_dev += dt_dev
        f_dev += out.shape[0]
        if check:
            t0 = time.perf_counter()
            h2d = torch.from_numpy(hay).to(device)
            _sync(device)
            back = out.cpu().numpy()
            t_xfer += time.perf_counter() - t0
            del h2d
            if not np.array_equal(back, ref):
                bad = int((back != ref).any(axis=(1, 2, 3)).sum())
                raise SystemExit(f"MISMATCH: haystack {j}: {bad} frames differ between torch ({device}) and numpy")
            n_checked += 1
            t_np_checked += dt
            t_dev_checked += dt_dev
        del out, ref

    fps_np, fps_dev = f_np / t_np, f_dev / t_dev
    ratio = fps_dev / fps_np
    print(f"  numpy  compose: {fps_np:12,.0f} frames/s  ({n_np} videos, {t_np:.2f} s)")
    print(f"  torch  compose: {fps_dev:12,.0f} frames/s  ({a.haystacks} videos, {t_dev:.2f} s, device-resident)")
    print(f"  equality with numpy: bit-exact uint8 on {n_checked} of {n_np} videos")
    if device.type == "cuda":
        verdict = "met" if ratio >= 10 else "NOT met"
        print(f"  ratio torch-cuda / numpy: {ratio:.1f}x (target >= 10x: {verdict})")
    else:
        print(f"  ratio torch-{device.type} / numpy: {ratio:.2f}x (report only; the 10x target is for CUDA)")
    if n_checked:
        e2e = t_np_checked / (t_dev_checked + t_xfer)
        print(
            f"  end to end incl. host->device and device->host copy of each video: {e2e:.1f}x "
            f"(upload of one pool video {t_up * 1e3:.0f} ms)"
        )

    if a.scoring:
        recs = _scoring_records(a.scoring, a.seed)
        med = time_call(lambda: circular_accuracy(recs), warmup=1, repeats=5).median
        print(f"  scoring {len(recs):,} predictions (official mode): {med * 1e3:.1f} ms median of 5 (target < 1 s)")
        t0 = time.perf_counter()
        circular_accuracy(recs, "strict")
        print(f"  scoring {len(recs):,} predictions (strict mode): {(time.perf_counter() - t0) * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
