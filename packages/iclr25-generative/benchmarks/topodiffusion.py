"""TopoDiffusionNet benchmark: training-step overhead of the topology loss, persistence throughput.

Prints, measured in one run:
- training steps/s with lambda > 0 vs lambda = 0 (same UNet, batch, image size) and their ratio;
- union-find persistence images/s (per image and batched), dimensions 0 and 1, and, when cripser
  is installed (extra ``iclr25-generative[topo]``), cripser's images/s through the same
  ``superlevel_persistence`` call and the ratio cripser / union-find (target <= 5x at 64x64).

The training-overhead target (<= 1.5x at 64x64, batch 64, persistence in a CPU thread pool
overlapped with the GPU step) needs a GPU; the persistence ratio is a CPU figure and is measured
anywhere. On a CPU, keep the training part small, e.g.::

    python packages/iclr25-generative/benchmarks/topodiffusion.py --device cpu --batch 8 --steps 2
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


def images_per_second(backend: str, size: int, n: int, dim: int) -> float:
    rng = np.random.default_rng(0)
    imgs = [rng.random((size, size)) for _ in range(n)]
    superlevel_persistence(imgs[0], dim=dim, backend=backend)  # warm-up: imports, cached grid edges
    t0 = time.perf_counter()
    for im in imgs:
        superlevel_persistence(im, dim=dim, backend=backend)
    return n / (time.perf_counter() - t0)


def batch_images_per_second(size: int, n: int, dim: int) -> float:
    imgs = np.random.default_rng(0).random((n, size, size))
    superlevel_persistence_batch(imgs[:2], dim=dim)  # warm-up
    t0 = time.perf_counter()
    superlevel_persistence_batch(imgs, dim=dim)
    return n / (time.perf_counter() - t0)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--images", type=int, default=100)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = p.parse_args()
    base = steps_per_second(0.0, a.size, a.batch, a.steps, a.device)
    topo = steps_per_second(0.05, a.size, a.batch, a.steps, a.device)
    print(
        f"train steps/s at {a.size}x{a.size}, batch {a.batch}, {a.device}: lambda=0 {base:.2f}, lambda=0.05 {topo:.2f}"
    )
    print(f"topology-loss overhead: {base / topo:.2f}x (target <= 1.5x on GPU; t < T/2 halves the images)")
    for dim in (0, 1):
        uf = images_per_second("unionfind", a.size, a.images, dim)
        ufb = batch_images_per_second(a.size, a.images, dim)
        line = f"persistence dim {dim}, {a.size}x{a.size}: union-find {uf:.0f} images/s, batch of {a.images} {ufb:.0f}"
        try:
            cr = images_per_second("cripser", a.size, a.images, dim)
            line += f"; cripser {cr:.0f} images/s, cripser / union-find = {cr / max(uf, ufb):.2f}x (target <= 5x)"
        except ImportError as e:
            line += f"; cripser not measured: {e}"
        print(line)


if __name__ == "__main__":
    main()
