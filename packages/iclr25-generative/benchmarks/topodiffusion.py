"""TopoDiffusionNet benchmark: training-step overhead of the topology loss, persistence throughput.

Prints, measured in one run:
- training steps/s with lambda > 0 vs lambda = 0 (same UNet, batch, image size) and their ratio;
- union-find persistence images/s (per image and batched) and, when cripser is installed, the
  ratio to cripser.

The issue's targets (overhead <= 1.5x at 64x64, batch 64 on a GPU with persistence overlapped in a
CPU thread pool; union-find within 5x of cripser at 64x64) need a GPU and the ``topo`` extra; on a
CPU this script measures the same ratios at small sizes, e.g.::

    python packages/iclr25-generative/benchmarks/topodiffusion.py --size 16 --batch 32 --steps 5
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from iclr25.generative.diffusion.nn import UNet2D
from iclr25.generative.diffusion.schedules import VPSchedule
from iclr25.generative.topodiffusion import (
    TopoDiffusionTrainer,
    disk_masks,
    superlevel_persistence,
    superlevel_persistence_batch,
)


def steps_per_second(lam: float, size: int, batch: int, steps: int, device: str) -> float:
    torch.manual_seed(0)
    masks, counts = disk_masks(256, size=size, seed=0)
    unet = UNet2D(1, 1, ch=16, ch_mult=(1, 2), num_classes=6, sample_size=size).to(device)
    tr = TopoDiffusionTrainer(unet, VPSchedule("cosine"), max_count=5, lam=lam)
    tr.fit(masks, counts, steps=1, batch_size=batch)  # warm-up
    t0 = time.perf_counter()
    tr.fit(masks, counts, steps=steps, batch_size=batch)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return steps / (time.perf_counter() - t0)


def images_per_second(backend: str, size: int, n: int) -> float:
    rng = np.random.default_rng(0)
    imgs = [rng.random((size, size)) for _ in range(n)]
    t0 = time.perf_counter()
    for im in imgs:
        superlevel_persistence(im, dim=0, backend=backend)
    return n / (time.perf_counter() - t0)


def batch_images_per_second(size: int, n: int) -> float:
    imgs = np.random.default_rng(0).random((n, size, size))
    t0 = time.perf_counter()
    superlevel_persistence_batch(imgs, dim=0)
    return n / (time.perf_counter() - t0)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--images", type=int, default=50)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = p.parse_args()
    base = steps_per_second(0.0, a.size, a.batch, a.steps, a.device)
    topo = steps_per_second(0.05, a.size, a.batch, a.steps, a.device)
    print(
        f"train steps/s at {a.size}x{a.size}, batch {a.batch}, {a.device}: lambda=0 {base:.2f}, lambda=0.05 {topo:.2f}"
    )
    print(f"topology-loss overhead: {base / topo:.2f}x (target <= 1.5x on GPU; t < T/2 halves the images)")
    uf = images_per_second("unionfind", a.size, a.images)
    print(f"union-find persistence {a.size}x{a.size}: {uf:.1f} images/s")
    ufb = batch_images_per_second(a.size, a.images)
    print(f"batched union-find (lockstep over {a.images} images): {ufb:.1f} images/s, {ufb / uf:.2f}x per-image")
    try:
        cr = images_per_second("cripser", a.size, a.images)
        print(f"cripser: {cr:.1f} images/s; cripser / union-find = {cr / uf:.2f}x (target <= 5x)")
    except ImportError as e:
        print(f"cripser not measured: {e}")


if __name__ == "__main__":
    main()
