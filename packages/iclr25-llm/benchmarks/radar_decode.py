"""Per-step decode latency: Radar attention vs ``F.scaled_dot_product_attention`` over the full cache.

Measures one decoding query (batch 1, ``--heads`` heads of dim ``--head-dim``) at each context
length, with the torch path of :mod:`iclr25.llm.radar` (index search + gather attention), and
prints the scored-segment and attended-token counts next to the latency ratio. The issue's GPU
targets (≥ 2× at 32k, growing with t, on an H200-class device) cannot be measured on a CPU-only
machine; run with ``--device cuda --lengths 8192 32768 131072`` where one is available. The
official implementation's torch path is not vendored, so it is not compared here.

Example (CPU, small sizes)::

    python benchmarks/radar_decode.py --lengths 2048 8192 --repeats 5
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F

from iclr25.llm.radar import RadarConfig, RadarIndex, radar_attention


def _time(fn, repeats: int, device: torch.device) -> float:
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(repeats):
        fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) / repeats


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lengths", type=int, nargs="+", default=[2048, 8192])
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--target-tokens", type=int, default=512)
    p.add_argument("--recent-window", type=int, default=64)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    cfg = RadarConfig(target_tokens=a.target_tokens, recent_window=a.recent_window)
    print(f"{'t':>8} {'sdpa ms':>9} {'radar ms':>9} {'speed-up':>9} {'scored':>7} {'attended':>9}")
    for t in a.lengths:
        k = torch.randn(1, a.heads, t, a.head_dim, device=dev)
        v = torch.randn_like(k)
        q = torch.randn(1, a.heads, 1, a.head_dim, device=dev)
        idx = RadarIndex(cfg, a.head_dim).add(k)
        sel = idx.search(q)
        _, valid = sel.gather_index()
        full = _time(lambda q=q, k=k, v=v: F.scaled_dot_product_attention(q, k, v), a.repeats, dev)
        rad = _time(lambda q=q, k=k, v=v, idx=idx: radar_attention(q, k, v, idx), a.repeats, dev)
        n_att = int(valid[0, 0, 0].sum())
        print(f"{t:>8} {full * 1e3:>9.3f} {rad * 1e3:>9.3f} {full / rad:>8.2f}x {sel.scored:>7} {n_att:>9}")


if __name__ == "__main__":
    main()
