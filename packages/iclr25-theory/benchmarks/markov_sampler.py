"""Benchmark for iclr25.theory.markov_transformer: sampler backends and the vmapped training sweep.

Prints ratios measured in one run:

1. Markov sampler on pre-drawn uniforms ``(B, L)``: torch loop (``reference``, the spec) vs the
   loop-free torch ``scan`` vs the Triton kernel (when it can run), with a check that all outputs are
   identical. Issue target: Triton >= 20x the torch loop at B=4096, L=1024 on a GPU.
2. Training sweep: R runs (p, q, seed) as one ``vmap``-ed model (``train_sweep``) vs R sequential
   ``train_markov`` calls with the same budget. Issue target: >= 10x wall clock for R=64 on a GPU.
   Both paths are warmed up first. To stay within ~30 s on a GPU only ``--seq-runs`` (default 16)
   of the R sequential runs are timed and the time is scaled by R / seq-runs (the runs are
   independent and equally expensive; ``--seq-runs 0`` times all R). Also prints time per step per
   run and how much of a sweep step is spent drawing data; the official script
   (``Bond1995/Markov``) is not installed here, so the per-run comparison with it is not measured.

GPU figures cannot be measured on the CPU development machine; run there with
``--device cuda --batch 4096 --length 1024 --runs 64``. On CPU use small sizes, e.g.::

    python benchmarks/markov_sampler.py --batch 256 --length 256 --runs 8 --iters 20 --sweep-length 16

On CPU the Triton column needs ``TRITON_INTERPRET=1`` (the interpreter: correctness only, slow).
"""

from __future__ import annotations

import argparse
import time

import torch

from iclr25.core.bench import time_call
from iclr25.core.triton import triton_reasons
from iclr25.theory.markov_transformer import (
    BinaryMarkovChain,
    MarkovTransformer,
    MarkovTransformerConfig,
    markov_sample,
    train_markov,
    train_sweep,
)
from iclr25.theory.markov_transformer.training import _SweepSampler


def _timed(fn, repeat: int, device: torch.device) -> tuple[float, torch.Tensor]:
    """Mean seconds per call over ``repeat`` calls after one warm-up call (Triton compilation), and
    the output of the last call."""
    out = [None]

    def call() -> None:
        out[0] = fn()

    return time_call(call, device=device, warmup=1, repeats=1, number=repeat).median, out[0]


def bench_sampler(batch: int, length: int, device: torch.device, repeat: int) -> None:
    u = torch.rand(batch, length, device=device, generator=torch.Generator(device=device).manual_seed(0))
    p, q, init_one = 0.8, 0.6, 0.5
    t_ref, ref = _timed(lambda: markov_sample(u, p, q, init_one, backend="reference"), repeat, device)
    t_scan, scan = _timed(lambda: markov_sample(u, p, q, init_one, backend="scan"), repeat, device)
    print(f"sampler B={batch} L={length} on {device}")
    print(f"  reference (torch loop): {t_ref * 1e3:9.2f} ms")
    same = torch.equal(scan, ref)
    print(f"  scan (loop-free torch): {t_scan * 1e3:9.2f} ms   speed-up x{t_ref / t_scan:.1f}   identical={same}")
    reasons = triton_reasons(u)
    if reasons:
        print(f"  triton: not run ({'; '.join(reasons)})")
        return
    t_tri, tri = _timed(lambda: markov_sample(u, p, q, init_one, backend="triton"), repeat, device)
    same = torch.equal(tri, ref)
    print(f"  triton:                 {t_tri * 1e3:9.2f} ms   speed-up x{t_ref / t_tri:.1f}   identical={same}")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def bench_sweep(runs: int, seq_runs: int, iters: int, length: int, device: torch.device) -> None:
    grid = [(p, q) for p in (0.2, 0.5, 0.8, 0.9) for q in (0.2, 0.5, 0.8, 0.9)]
    chains = [BinaryMarkovChain(*grid[r % len(grid)]) for r in range(runs)]
    seeds = [r // len(grid) for r in range(runs)]
    cfg = MarkovTransformerConfig(d_model=8, max_len=length)

    def models(n: int) -> list[MarkovTransformer]:
        out = []
        for s in seeds[:n]:
            torch.manual_seed(s)
            out.append(MarkovTransformer(cfg).to(device))
        return out

    # Warm both paths first (CUDA context, cuBLAS handles, lazily loaded kernels, vmap set-up) so
    # that neither timing carries one-off start-up costs.
    train_sweep(models(runs), chains, seeds, iters=3, length=length)
    train_markov(models(1)[0], chains[0], iters=3, length=length, seed=seeds[0])

    sweep_models, seq_models = models(runs), models(seq_runs)  # built outside the timed regions
    _sync(device)
    start = time.perf_counter()
    swept = train_sweep(sweep_models, chains, seeds, iters=iters, length=length)
    _sync(device)
    t_sweep = time.perf_counter() - start

    _sync(device)
    start = time.perf_counter()
    seq = [
        train_markov(m, c, iters=iters, length=length, seed=s)
        for m, c, s in zip(seq_models, chains, seeds, strict=False)
    ]
    _sync(device)
    t_seq_measured = time.perf_counter() - start
    # Sequential runs are independent and cost the same, so R runs take R/seq_runs times as long.
    t_seq = t_seq_measured * runs / seq_runs

    # Where a sweep step goes: drawing the (R, B, N+1) batch vs the rest (forward, backward, AdamW).
    draw = _SweepSampler(chains, [torch.Generator(device=device).manual_seed(s) for s in seeds], 16, length + 1)
    t_draw = time_call(draw, device=device, warmup=1, repeats=1, number=iters).median

    diff = max(abs(a["test_loss"] - b["test_loss"]) for a, b in zip(swept, seq, strict=False))
    per_step_seq = t_seq / (runs * iters)
    per_step_sweep = t_sweep / (runs * iters)
    print(f"sweep: {runs} runs x {iters} steps, batch 16, N={length}, d=8 on {device}")
    scaled = "" if seq_runs == runs else f", measured {seq_runs} runs ({t_seq_measured:.2f} s) x {runs / seq_runs:g}"
    print(f"  sequential train_markov: {t_seq:8.2f} s  ({t_seq / runs:.3f} s/run{scaled})")
    print(
        f"  vmapped train_sweep:     {t_sweep:8.2f} s  ({t_sweep / runs:.3f} s/run)   speed-up x{t_seq / t_sweep:.1f}"
    )
    print(
        f"  time per step per run (incl. final test): sequential {per_step_seq * 1e3:.3f} ms, "
        f"sweep {per_step_sweep * 1e3:.4f} ms "
        f"(one sweep step {t_sweep / iters * 1e3:.2f} ms, of which drawing the batch {t_draw * 1e3:.2f} ms)"
    )
    print(f"  max |test loss difference| sweep vs sequential (first {len(seq)} runs): {diff:.2e}")
    print("  official training script (Bond1995/Markov): not installed here, per-run comparison not measured")


def profile_sweep(runs: int, length: int, device: torch.device) -> None:
    from torch.profiler import ProfilerActivity, profile

    chains = [BinaryMarkovChain(0.2 + 0.6 * (r % 4) / 3, 0.8) for r in range(runs)]
    cfg = MarkovTransformerConfig(d_model=8, max_len=length)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        train_sweep(
            [MarkovTransformer(cfg).to(device) for _ in chains], chains, list(range(runs)), iters=5, length=length
        )
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--length", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--iters", type=int, default=100)
    parser.add_argument(
        "--seq-runs", type=int, default=16, help="sequential runs actually timed (scaled to --runs); 0: all of them"
    )
    parser.add_argument("--sweep-length", type=int, default=128)
    parser.add_argument("--profile", action="store_true", help="also print a torch.profiler table of 5 sweep steps")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (1 is fastest for tiny models)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    bench_sampler(args.batch, args.length, device, args.repeat)
    seq_runs = args.runs if args.seq_runs <= 0 else min(args.seq_runs, args.runs)
    bench_sweep(args.runs, seq_runs, args.iters, args.sweep_length, device)
    if args.profile:
        profile_sweep(args.runs, args.sweep_length, device)


if __name__ == "__main__":
    main()
