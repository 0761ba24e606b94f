"""Barrel-cortex RSNN epoch benchmark: vectorized step vs a per-population Python loop.

Measures one training epoch (forward + backward + Adam) of `BarrelCortexRSNN` with the vectorized
synchronous step (one masked matrix product per time step) against ``update="sequential"``, which
loops over the 13 populations inside every step as the official RSNN_bfd script does, and prints
the ratio measured in this one run.

The issue's targets are GPU figures at full scale (N = 4218, T = 550, batch 128, ~240 sweeps): a
fused spike-driven Triton step kernel ≥ 2× plain torch and ≥ 5× the per-population loop, plus the
faithful training run (scale 1, dt = 5, 30 epochs) next to RNN/LSTM/CNN. No fused kernel exists yet
and no GPU was available when this was written, so none of those figures is measured here; on CPU
run small sizes, e.g. ``python benchmarks/barrel_epoch.py --scale 0.05 --steps 20 --batch 8 --sweeps 16``.
"""

from __future__ import annotations

import argparse
import time

import torch

from iclr25.neuro.barrel_cortex import BarrelCortexRSNN


def epoch_seconds(update: str, args: argparse.Namespace, device: torch.device) -> float:
    model = BarrelCortexRSNN(scale=args.scale, update=update, seed=0).to(device)
    opt = torch.optim.Adam(model.param_groups(0.008))
    gen = torch.Generator().manual_seed(0)
    x = (torch.rand(args.sweeps, 2, args.steps, 93, generator=gen) < 0.1).float()
    y = torch.randint(0, 3, (args.sweeps,), generator=gen)
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for i in range(0, args.sweeps, args.batch):
        loss = model.loss(model(x[i : i + args.batch].to(device)), y[i : i + args.batch].to(device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--steps", type=int, default=550, help="time steps T (110 frames x dt)")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--sweeps", type=int, default=240, help="training sweeps in the epoch")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    device = torch.device(args.device)
    vec = epoch_seconds("synchronous", args, device)
    loop = epoch_seconds("sequential", args, device)
    print(f"device={device} scale={args.scale} T={args.steps} batch={args.batch} sweeps={args.sweeps}")
    print(f"vectorized step:      {vec:8.2f} s/epoch")
    print(f"per-population loop:  {loop:8.2f} s/epoch")
    print(f"ratio loop/vectorized: {loop / vec:.2f}x  (fused Triton kernel: not implemented, not measured)")


if __name__ == "__main__":
    main()
