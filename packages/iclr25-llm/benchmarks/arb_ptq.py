"""PTQ time of one linear layer with ARB-LLM: batched torch threshold search vs a per-threshold loop.

The partition search (salient-column count and 81 magnitude thresholds per 128-column block) is
the PTQ bottleneck. ``iclr25.llm.arb.reference.search_errors`` scores all candidates in one
batched torch call; the official code loops over candidates in Python, one binarization each
(reproduced here with :func:`iclr25.llm.arb.binarize`). Prints both times and their ratio,
measured in this run.

The Triton search kernel (target >= 5x over torch on a 4096x4096 layer) needs a GPU: with
``--device cuda`` the Triton backend of :func:`iclr25.llm.arb.threshold_search` is timed too.
The packed 1-bit GEMV has its own benchmark, ``benchmarks/arb_gemv.py``.

Usage::

    python benchmarks/arb_ptq.py --rows 256 --cols 256 --calib 128   # CPU-sized
    python benchmarks/arb_ptq.py --rows 4096 --cols 4096 --device cuda
"""

from __future__ import annotations

import argparse
import time

import torch

from iclr25.core.bench import time_call
from iclr25.llm.arb import binarize, threshold_search
from iclr25.llm.arb.reference import search_errors


def loop_search(W: torch.Tensor, thresholds: torch.Tensor) -> torch.Tensor:
    """The official code's shape: one pair of binarizations per threshold."""
    errs = []
    for p in thresholds.tolist():
        big = W.abs() > p
        r1 = binarize(W, big, "plain", 1, 0).W_hat
        r2 = binarize(W, ~big, "plain", 1, 0).W_hat
        errs.append(((W - r1 - r2) ** 2).sum())
    return torch.stack(errs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=256)
    ap.add_argument("--cols", type=int, default=256)
    ap.add_argument("--calib", type=int, default=128, help="calibration rows (for the Hessian)")
    ap.add_argument("--blocksize", type=int, default=128)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    dev = torch.device(args.device)
    g = torch.Generator().manual_seed(0)
    W = (torch.randn(args.rows, args.cols, generator=g) * torch.exp(0.5 * torch.randn(args.cols, generator=g))).to(dev)
    q = torch.linspace(0.1, 0.9, 81, device=dev)
    t_batched = t_loop = 0.0
    for i1 in range(0, args.cols, args.blocksize):
        Wb = W[:, i1 : i1 + args.blocksize]
        thr = torch.quantile(Wb.abs().float().reshape(-1), q)
        big = Wb.abs()[None] > thr[:, None, None]
        t0 = time.perf_counter()
        e1 = search_errors(Wb, big, ~big, 1, 1)
        t_batched += time.perf_counter() - t0
        t0 = time.perf_counter()
        e2 = loop_search(Wb, thr)
        t_loop += time.perf_counter() - t0
        torch.testing.assert_close(e1, e2, rtol=1e-4, atol=1e-3)
    print(f"layer {args.rows}x{args.cols}, {args.cols // args.blocksize} blocks x 81 thresholds, device {dev}")
    print(f"  batched torch search : {t_batched:.3f} s")
    print(f"  per-threshold loop   : {t_loop:.3f} s")
    print(f"  ratio loop / batched : {t_loop / t_batched:.2f}x")
    if dev.type == "cuda":
        thr = torch.quantile(W[:, : args.blocksize].abs().float().reshape(-1), q)
        base = torch.ones_like(W[:, : args.blocksize], dtype=torch.bool)
        times = {}
        for be in ("reference", "triton"):
            # one warm-up call (Triton compiles), then the mean of 10 calls
            times[be] = time_call(
                lambda be=be: threshold_search(W[:, : args.blocksize], base, thr, backend=be),
                device=dev,
                warmup=1,
                repeats=1,
                number=10,
            ).median
        print(
            f"  one block, torch vs Triton: {times['reference']:.4f} s / {times['triton']:.4f} s = "
            f"{times['reference'] / times['triton']:.2f}x"
        )
    else:
        print("  Triton search kernel : GPU only (not measurable on CPU)")


if __name__ == "__main__":
    main()
