"""AuxT RD sweep: real-bitstream RD points of FactorizedPrior with and without AuxT at one budget.

Trains both models at every λ with the reproduction's recipe (same seed, same batches, Adam 1e-3,
grad clip 1.0, w_orth 0.1; offline skimage/sklearn crops, the full run's flower.jpg 384×640 test crop), then
prints bpp / PSNR from real bitstreams and ``bd_rate(base, auxt, "pchip")`` when both curves allow
it (monotonic rates, overlapping PSNR ranges); otherwise it prints why BD-rate is undefined.

This answers "how many steps until the RD curves settle enough for a BD-rate?", which the
10-minute CPU reproduction cannot (see docs/papers/auxt.md).

Usage::

    python benchmarks/auxt_rd_sweep.py --steps 600 --crop 64 --jobs 2          # CPU, ~8 min on 2 cores
    python benchmarks/auxt_rd_sweep.py --steps 20000 --crop 128 --device cuda   # GPU
"""

from __future__ import annotations

import argparse
import json
from concurrent.futures import ProcessPoolExecutor

import torch

from iclr25.compress.auxt import experiment as exp
from iclr25.compress.metrics import rd_point


def _one(args: tuple[float, bool, dict]) -> dict:
    lam, aux, cfg = args
    device = torch.device(cfg["device"])
    if device.type == "cpu":
        torch.set_num_threads(1)  # one process per core
    train, test = exp._images()
    net = exp._make(cfg["N"], cfg["M"], aux, cfg["seed"], device)
    run = exp._train(net, cfg, lam, cfg["seed"], train, test.to(device), device)
    point = rd_point(net, test.to(device))
    return {"lambda": lam, "auxt": aux, "bpp": point["bpp"], "psnr": point["psnr"], "s_per_step": run["s_per_step"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--crop", type=int, default=64)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--N", type=int, default=64)
    ap.add_argument("--M", type=int, default=96)
    ap.add_argument("--lambdas", type=float, nargs="+", default=[0.0067, 0.013, 0.025])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=1, help="parallel processes (CPU)")
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args()
    if a.steps < 1 or a.crop < 16 or a.crop % 16:
        raise ValueError(f"--steps must be >= 1 and --crop a multiple of 16 (>= 16), got {a.steps}, {a.crop}")
    cfg = {"steps": a.steps, "crop": a.crop, "batch": a.batch, "lr": 1e-3, "N": a.N, "M": a.M}
    cfg |= {"seed": a.seed, "device": a.device}
    jobs = [(lam, aux, cfg) for aux in (False, True) for lam in sorted(a.lambdas)]
    if a.jobs > 1:
        with ProcessPoolExecutor(a.jobs) as pool:
            rows = list(pool.map(_one, jobs))
    else:
        rows = [_one(j) for j in jobs]
    for r in rows:
        print(json.dumps(r))
    curve = {m: [r for r in rows if r["auxt"] == m] for m in (False, True)}
    # the reproduction's own gate: BD-rate (pchip, anchor = base) < 0, or why it is undefined
    claim = exp.bd_rate_claim(curve[False], curve[True])
    unit = " %" if isinstance(claim.ours, float) else ""
    print(f"BD-rate (pchip, anchor = base): {claim.ours}{unit}; gate (< 0) holds: {claim.holds}")


if __name__ == "__main__":
    main()
