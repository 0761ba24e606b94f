"""Min-K%++ token statistics: fused Triton kernel vs the plain-torch path (materialised log-probs).

Measures, in one run on the same random logits ``(B, T, V)``, the throughput (tokens/s) and the
peak extra memory of :func:`iclr25.llm.minkpp.token_stats` with ``backend="triton"`` (one
streaming pass over the vocabulary) and ``backend="reference"`` (log-softmax, probabilities and
products materialised as ``(B, T, V)`` float32 tensors), and prints the ratios.

Target of the issue (GPU, V = 32k, T = 2048): >= 1.5x faster and >= 3x less memory. Those GPU
figures cannot be measured on a CPU-only machine; on CPU only the reference path runs (the Triton
interpreter is a correctness tool, not a performance one), so the script reports its figures only.

    python benchmarks/minkpp_score.py --device cuda --batch 4 --seq 2048 --vocab 32000
    python benchmarks/minkpp_score.py --device cpu --batch 2 --seq 128 --vocab 4000   # report only
"""

from __future__ import annotations

import argparse

import torch

from iclr25.core.bench import time_call
from iclr25.llm.minkpp import token_stats


def _measure(fn, device, repeats: int) -> tuple[float, float]:
    """Mean seconds per call over ``repeats`` calls after one warm-up call, and the peak memory of
    those calls above the resting level, in MiB (CUDA allocator only, else nan: torch CPU
    allocations are invisible to tracemalloc)."""
    t = time_call(fn, device=device, warmup=1, repeats=1, number=repeats, memory=True)
    return t.median, float("nan") if t.peak_mib is None else t.peak_mib


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16", "float16"])
    p.add_argument("--repeats", type=int, default=5)
    a = p.parse_args()
    device = torch.device(a.device)
    if device.type == "cpu":
        a.dtype = "float32"
    g = torch.Generator(device="cpu").manual_seed(0)
    logits = (3 * torch.randn(a.batch, a.seq, a.vocab, generator=g)).to(device=device, dtype=getattr(torch, a.dtype))
    targets = torch.randint(0, a.vocab, (a.batch, a.seq), generator=g).to(device)
    tokens = a.batch * a.seq
    rows = {}
    backends = ["reference"] + (["triton"] if device.type == "cuda" else [])
    for b in backends:
        fn = lambda b=b: token_stats(logits, targets, backend=b)  # noqa: E731
        sec, peak = _measure(fn, device, a.repeats)
        rows[b] = (tokens / sec, peak)
        print(f"{b:<10} {rows[b][0]:14,.0f} tokens/s   peak extra {rows[b][1]:10.1f} MiB")
    if "triton" in rows:
        speed = rows["triton"][0] / rows["reference"][0]
        mem = rows["reference"][1] / max(rows["triton"][1], 1e-9)
        print(f"speed-up {speed:.2f}x (target >= 1.5x)   memory {mem:.1f}x less (target >= 3x)")
    else:
        print("CPU: reference path only (report only; the fused kernel's figures need a CUDA GPU)")


if __name__ == "__main__":
    main()
