"""Decode GEMV of a 1-bit ARB layer: the Triton packed-bit kernel vs fp16 ``torch.matmul`` at batch 1.

Builds a binarized layer with the default ARB partition in every 128-column block (salient
columns at order 2 split by the column-group bitmap, the rest split by magnitude at order 1),
packs it (:meth:`iclr25.llm.arb.BinarizedLinear.pack_bits`), checks the kernel against the torch
reference, and times both GEMVs in this run. Prints the weight bytes each reads and the packed
storage against the hand count of :func:`iclr25.llm.arb.block_bits`.

GPU timing uses ``triton.testing.do_bench`` (CUDA events, median, the L2 cache flushed before
every call: during decoding a layer's weights are not in L2, and the packed 4096×11008 weight
would otherwise fit in an H200's L2 while the fp16 one does not). On CPU the figures are report
only (the reference dequantizes, it is not a fast path).

Usage::

    python benchmarks/arb_gemv.py --rows 512 --cols 1024          # CPU-sized, report only
    python benchmarks/arb_gemv.py --device cuda                    # 4096x11008, target >= 3x
    python benchmarks/arb_gemv.py --device cuda --quantize         # the real ARBQuantizer partition
"""

from __future__ import annotations

import argparse
import time

import torch

from iclr25.core.bench import time_call
from iclr25.llm.arb import ARBConfig, ARBQuantizer, BinarizedLinear, binarize, block_bits
from iclr25.llm.arb.packed import packed_gemv_reference


def synthetic_groups(W: torch.Tensor, blocksize: int, method: str, gen: torch.Generator) -> tuple[list, int]:
    """The default partition's structure without its search (fast at 4096×11008): per block, a
    random number (1…49) of the highest-norm columns is salient; both parts are split at a
    magnitude quantile; every group is binarized with ``method``. Returns (groups, hand-count bits)."""
    n, K = W.shape
    groups, bits = [], 0
    for s in range(0, K, blocksize):
        Wb = W[:, s : s + blocksize]
        m = Wb.shape[1]
        k = int(torch.randint(1, min(49, m - 1) + 1, (1,), generator=gen))
        sal = torch.zeros(m, dtype=torch.bool, device=W.device)
        sal[torch.topk(Wb.norm(dim=0), k).indices] = True
        S = sal[None, :].expand(n, m)
        blk = []
        for part, order in ((S, 2), (~S, 1)):
            p = torch.quantile(Wb.abs()[part].float(), 0.7 if order == 1 else 0.5)
            big = part & (Wb.abs() > p)
            blk += [binarize(Wb, big, method, order, iters=3), binarize(Wb, part & ~big, method, order, iters=3)]
        groups += [(s, g) for g in blk]
        bits += block_bits(n, m, blk, col_bitmap=True, group_bitmap_entries=n * m)
    return groups, bits


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=4096, help="out_features")
    ap.add_argument("--cols", type=int, default=11008, help="in_features")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--blocksize", type=int, default=128)
    ap.add_argument("--method", default="arb", choices=["plain", "arb", "arb_rc"])
    ap.add_argument("--quantize", action="store_true", help="run ARBQuantizer (no calibration) instead")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    dev = torch.device(args.device)
    gen = torch.Generator().manual_seed(0)
    n, K = args.rows, args.cols
    W = (torch.randn(n, K, generator=gen) * torch.exp(0.5 * torch.randn(K, generator=gen))).to(dev) * 0.02
    lin = torch.nn.Linear(K, n, bias=False).to(dev)
    t0 = time.perf_counter()
    if args.quantize:
        res = ARBQuantizer(ARBConfig(method=args.method, blocksize=args.blocksize, gptq=False)).quantize(W)
        layer, hand = BinarizedLinear.from_result(lin, res), res.bits
    else:
        groups, hand = synthetic_groups(W, args.blocksize, args.method, gen)
        layer = BinarizedLinear(K, n, groups)
    P = layer.pack_bits().to(dev)
    t_build = time.perf_counter() - t0
    Wh = layer.weight.to(dev).half()
    fp16_bytes = Wh.numel() * 2
    print(f"layer {n}x{K} ({args.method}, blocksize {args.blocksize}), batch {args.batch}, device {dev}")
    print(f"  built + packed in {t_build:.1f} s")
    print(f"  fp16 weight bytes     : {fp16_bytes:,}")
    print(f"  packed weight bytes   : {P.nbytes:,}  ({8 * P.nbytes / (n * K):.3f} bits/weight)")
    print(
        f"  stored bits / hand    : {P.payload_bits:,} / {hand:,} ({'equal' if P.payload_bits == hand else 'DIFFER'})"
    )
    print(f"  memory ratio fp16/packed: {fp16_bytes / P.nbytes:.2f}x")
    x = torch.randn(args.batch, K, generator=gen).to(dev).half()
    ref = packed_gemv_reference(x, P)
    if dev.type == "cuda":
        import triton
        import triton.testing

        from iclr25.llm.arb.kernels import packed_gemv_triton

        y = packed_gemv_triton(x, P)
        err = float((y - ref).abs().max() / ref.abs().max())
        print(f"  Triton vs reference   : max rel error {err:.2e}")
        t_fp16 = triton.testing.do_bench(lambda: torch.matmul(x, Wh.t()), return_mode="median")
        best = None
        # kernel launch configurations only (rows per program, warps, column slices); results
        # are checked against the reference above for the default one
        for block_n in (4, 8, 16, 32):
            for warps in (2, 4):
                for split in (None, 1):
                    t = triton.testing.do_bench(
                        lambda bn=block_n, w=warps, sk=split: packed_gemv_triton(x, P, bn, w, sk), return_mode="median"
                    )
                    print(f"    packed block_n={block_n:2d} warps={warps} split_k={split or 'auto'}: {1e3 * t:8.1f} us")
                    if best is None or t < best[0]:
                        best = (t, block_n, warps, split)
        t_pk, bn, w, sk = best
        print(f"  fp16 torch.matmul     : {1e3 * t_fp16:.1f} us ({fp16_bytes / t_fp16 / 1e6:.0f} GB/s)")
        cfg = f"block_n={bn}, warps={w}, split_k={sk or 'auto'}"
        print(f"  packed Triton (best: {cfg}): {1e3 * t_pk:.1f} us ({P.nbytes / t_pk / 1e6:.0f} GB/s)")
        print(f"  speed-up fp16 / packed: {t_fp16 / t_pk:.2f}x (target >= 3x)")
    else:
        xf, Wf = x.float(), Wh.float()
        reps = 3
        t_dense = time_call(lambda: xf @ Wf.t(), warmup=0, repeats=1, number=reps).median
        t_ref = time_call(lambda: packed_gemv_reference(x, P), warmup=0, repeats=1, number=reps).median
        print(f"  CPU dense fp32 matmul : {1e3 * t_dense:.2f} ms")
        print(f"  CPU packed reference  : {1e3 * t_ref:.2f} ms (dequantize + matmul; report only)")
        print("  Triton packed GEMV    : GPU only (not measurable on CPU)")


if __name__ == "__main__":
    main()
