"""Benchmark: TCM stage-2 training iterations/s relative to stage-1 consistency training.

Same network (MLP 3x64 on 2-D data, or ``--unet`` for a UNet2D ch 32 on 8x8 digits-sized input),
same batch; prints both rates and the ratio measured in one run. Expected: stage 2 <= 1.3x slower
(the extra teacher pass runs only for samples whose r < t'). ``--sample`` also times 1-step
sampling (images/s) of a TruncatedCM over a CIFAR-sized UNet2D (3x32x32); the issue's comparison
with the official NVlabs sampler is not run here (that code is not a dependency and is not
available offline), so only our rate is printed. GPU figures: ``--device cuda``.

    python benchmarks/tcm.py --steps 50 --batch 512
    python benchmarks/tcm.py --device cuda --unet --sample
"""

from __future__ import annotations

import argparse
import copy
import time

import torch

from iclr25.core.bench import time_call
from iclr25.generative.diffusion.nn import MLPDenoiserNet, UNet2D
from iclr25.generative.diffusion.precond import EDMPrecond
from iclr25.generative.tcm import (
    ConsistencyTrainingLoss,
    ECTSchedule,
    TruncatedCM,
    TruncatedConsistencyLoss,
    consistency_sample,
    train_consistency,
    train_truncated,
)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--unet", action="store_true")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--sample", action="store_true", help="also time 1-step sampling of a 3x32x32 UNet2D")
    ap.add_argument("--sample-batch", type=int, default=64)
    ap.add_argument("--sample-ch", type=int, default=64)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    if a.unet:
        net = EDMPrecond(UNet2D(1, 1, ch=32, ch_mult=(1, 2))).to(dev)
        data = torch.randn(2048, 1, 8, 8, device=dev) * 0.5
    else:
        net = EDMPrecond(MLPDenoiserNet(2, hidden=64, depth=3)).to(dev)
        data = torch.randn(8192, 2, device=dev) * 0.5
    sched = ECTSchedule(double_every=1000)
    start = 6000
    # warm-up: the first iterations pay one-off allocation and dispatch costs
    train_consistency(copy.deepcopy(net), data, 3, ConsistencyTrainingLoss(sched), start, batch_size=a.batch)
    t0 = time.perf_counter()
    train_consistency(copy.deepcopy(net), data, a.steps, ConsistencyTrainingLoss(sched), start, batch_size=a.batch)
    s1 = a.steps / (time.perf_counter() - t0)
    tcm = TruncatedCM(copy.deepcopy(net), copy.deepcopy(net).requires_grad_(False), 1.0)
    # the same warm-up as stage 1, so the teacher's first-call costs are not timed either
    train_truncated(tcm, data, 3, TruncatedConsistencyLoss(sched, 1.0), start, batch_size=a.batch)
    t0 = time.perf_counter()
    train_truncated(tcm, data, a.steps, TruncatedConsistencyLoss(sched, 1.0), start, batch_size=a.batch)
    s2 = a.steps / (time.perf_counter() - t0)
    print(f"stage 1: {s1:.1f} it/s  stage 2: {s2:.1f} it/s  slowdown stage1/stage2 rate: {s1 / s2:.2f}x")
    if a.sample:
        unet = EDMPrecond(UNet2D(3, 3, ch=a.sample_ch, ch_mult=(1, 2, 2), sample_size=32)).to(dev)
        f = TruncatedCM(copy.deepcopy(unet), unet.requires_grad_(False), 1.0)
        shape = (a.sample_batch, 3, 32, 32)
        t = time_call(lambda: consistency_sample(f, shape, (80.0,)), device=dev, warmup=2, repeats=3)
        print(f"1-step sampling, UNet2D ch {a.sample_ch} 3x32x32: {a.sample_batch / t.median:.1f} images/s")


if __name__ == "__main__":
    main()
