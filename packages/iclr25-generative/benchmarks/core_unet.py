"""UNet2D forward+backward: fused Triton GroupNorm+FiLM+SiLU vs plain torch (and diffusers if installed).

    python benchmarks/core_unet.py                      # GPU setting: ch=128, 64x64, batch 64
    python benchmarks/core_unet.py --size 16 --batch 4 --ch 32 --device cpu --iters 3

Prints time per iteration for each variant and the ratios measured in this one run. The Triton
path needs CUDA (on CPU only the torch path runs; the interpreter is far too slow to time). GPU
figures cannot be measured on the project's CPU machines; the issue expects >= 1.2x on the
ResBlock path. The diffusers ``UNet2DModel`` comparison runs only when diffusers is installed
(it is not a dependency).
"""

from __future__ import annotations

import argparse
import time

import torch

from iclr25.core.triton import triton_reasons
from iclr25.generative.diffusion.nn import UNet2D


def bench(net, x, t, iters: int, warmup: int = 2) -> float:
    for i in range(warmup + iters):
        if i == warmup:
            if x.is_cuda:
                torch.cuda.synchronize()
            t0 = time.perf_counter()
        out = net(x, t)
        out = out.sample if hasattr(out, "sample") else out
        out.square().mean().backward()
    if x.is_cuda:
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) / iters


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--ch", type=int, default=128)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = p.parse_args()
    dev = torch.device(a.device)
    torch.manual_seed(0)
    net = UNet2D(3, 3, ch=a.ch, ch_mult=(1, 2, 2, 2), num_res_blocks=2, attn_resolutions=(a.size // 4,)).to(dev)
    x = torch.randn(a.batch, 3, a.size, a.size, device=dev)
    t = torch.rand(a.batch, device=dev)
    net.set_backend("reference")
    t_ref = bench(net, x, t, a.iters)
    print(f"torch reference : {1e3 * t_ref:8.2f} ms/iter")
    reasons = triton_reasons(x, allow_interpreter=False)
    if not reasons:
        net.set_backend("triton")
        t_tri = bench(net, x, t, a.iters)
        print(f"fused triton    : {1e3 * t_tri:8.2f} ms/iter   speed-up {t_ref / t_tri:.2f}x")
    else:
        print("fused triton    : skipped (" + "; ".join(reasons) + ")")
    try:
        from diffusers import UNet2DModel
    except ImportError:
        print("diffusers       : skipped (not installed)")
        return
    ref = UNet2DModel(
        sample_size=a.size, in_channels=3, out_channels=3, block_out_channels=(a.ch, 2 * a.ch, 2 * a.ch, 2 * a.ch),
        layers_per_block=2,
    ).to(dev)  # fmt: skip
    t_d = bench(lambda xx, tt: ref(xx, tt), x, t * 1000, a.iters)
    print(f"diffusers UNet  : {1e3 * t_d:8.2f} ms/iter   ours(torch)/diffusers {t_d / t_ref:.2f}x")


if __name__ == "__main__":
    main()
