"""Per-step decode latency: Radar attention vs ``F.scaled_dot_product_attention`` over the full cache.

Measures one decoding query (batch 1, ``--heads`` query heads sharing ``--kv-heads`` KV heads of
dim ``--head-dim``) at each context length: SDPA over the whole cache, Radar's torch path (index
search + gather attention, ``backend="reference"``) and, on CUDA, its Triton path (fused segment
scoring + flash-decoding gather attention, ``backend="triton"``). It prints the scored-segment and
attended-token counts next to the latency ratios, all measured in the same run. The issue's GPU
target is Radar ≥ 2× faster than SDPA at 32k, growing with t. The official implementation's torch
path is not vendored, so it is not compared here.

Examples::

    python benchmarks/radar_decode.py --lengths 2048 8192 --repeats 5            # CPU, torch path
    python benchmarks/radar_decode.py --device cuda --dtype bfloat16 --lengths 8192 32768 131072
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from iclr25.core.bench import time_call
from iclr25.llm.radar import RadarConfig, RadarIndex, radar_attention


def _time(fn, repeats: int, device: torch.device) -> float:
    """Mean seconds per call over ``repeats`` calls (synchronised on CUDA), after two warm-up calls."""
    return time_call(fn, device=device, warmup=2, repeats=1, number=repeats).median


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lengths", type=int, nargs="+", default=[2048, 8192])
    p.add_argument("--heads", type=int, default=32, help="query heads")
    p.add_argument("--kv-heads", type=int, default=8, help="KV heads (GQA groups)")
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--target-tokens", type=int, default=512)
    p.add_argument("--recent-window", type=int, default=64)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    if a.heads % a.kv_heads:
        p.error(f"--heads must be a multiple of --kv-heads; got {a.heads} and {a.kv_heads}")
    torch.set_num_threads(a.threads)
    dev, dtype = torch.device(a.device), getattr(torch, a.dtype)
    use_triton = dev.type == "cuda"
    cfg = RadarConfig(target_tokens=a.target_tokens, recent_window=a.recent_window)
    print(f"device={dev} dtype={a.dtype} heads={a.heads}/{a.kv_heads} head_dim={a.head_dim}")
    head = f"{'t':>8} {'sdpa ms':>9} {'torch ms':>9} {'x sdpa':>7}"
    if use_triton:
        head += f" {'triton ms':>10} {'x sdpa':>7} {'x torch':>8}"
    print(head + f" {'scored':>7} {'attended':>9}")
    for t in a.lengths:
        g = torch.Generator().manual_seed(t)
        k = torch.randn(1, a.kv_heads, t, a.head_dim, generator=g).to(dev, dtype)
        v = torch.randn(1, a.kv_heads, t, a.head_dim, generator=g).to(dev, dtype)
        q = torch.randn(1, a.heads, 1, a.head_dim, generator=g).to(dev, dtype)
        idx = RadarIndex(cfg, a.head_dim).add(k)
        sel = idx.search(q, backend="reference")
        _, valid = sel.gather_index()
        with torch.inference_mode():
            full = _time(lambda q=q, k=k, v=v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True), a.repeats, dev)
            ref = _time(lambda q=q, k=k, v=v, i=idx: radar_attention(q, k, v, i, backend="reference"), a.repeats, dev)
            row = f"{t:>8} {full * 1e3:>9.3f} {ref * 1e3:>9.3f} {full / ref:>6.2f}x"
            if use_triton:
                tri = _time(lambda q=q, k=k, v=v, i=idx: radar_attention(q, k, v, i, backend="triton"), a.repeats, dev)
                row += f" {tri * 1e3:>10.3f} {full / tri:>6.2f}x {ref / tri:>7.2f}x"
        n_att = int(valid[0, 0, 0].sum())
        print(row + f" {sel.scored:>7} {n_att:>9}")
        del k, v, idx


if __name__ == "__main__":
    main()
