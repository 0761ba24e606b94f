"""AuxT benchmark: training step time, time to reach the baseline's loss, coding time.

Measures in one run and prints ratios for a CompressAI ``MeanScaleHyperprior`` (mbt2018-mean):

1. Training step time of base, AuxT (unfolded) and AuxT (folded: each shortcut one stride-2
   conv), as overhead percentages over the base model (target: folded ≤ 10 %).
2. Wall-clock to reach the base model's loss after ``--steps`` steps (target ≥ 1.5× faster with
   AuxT), with the same seed and synthetic batches (random smooth images: a stand-in for crops).
3. ``compress`` / ``decompress`` time of the trained models (target: within 5 %).

The issue's figures (N = 128, M = 192, batch 8, 256×256, 2k steps) are GPU figures and cannot be
measured on this CPU-only machine; on CPU use small sizes via the flags. The official TCM+AuxT
forward-time comparison needs the official code, which is not vendored here: not reported.

Usage::

    python benchmarks/auxt_step.py --N 32 --M 48 --size 64 --batch 4 --steps 40   # CPU, ~1 min
    python benchmarks/auxt_step.py --device cuda                                   # GPU defaults
"""

from __future__ import annotations

import argparse
import time
import warnings

import torch
import torch.nn.functional as F

from iclr25.compress.auxt import attach_auxt, rd_loss_with_ortho

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from compressai.models import MeanScaleHyperprior


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def _batch(g: torch.Generator, b: int, s: int, device: torch.device) -> torch.Tensor:
    # Smooth random images (upsampled noise), so the codec has structure to learn.
    x = torch.rand(b, 3, s // 8, s // 8, generator=g)
    return F.interpolate(x, size=(s, s), mode="bicubic", align_corners=False).clamp(0, 1).to(device)


def _make(args, aux: str, device: torch.device):
    torch.manual_seed(0)
    net = MeanScaleHyperprior(args.N, args.M)
    if aux != "base":
        net = attach_auxt(net, folded=aux == "folded")
    return net.to(device)


def _train(net, args, device) -> tuple[list[float], list[float]]:
    opt = torch.optim.Adam([p for n, p in net.named_parameters() if not n.endswith(".quantiles")], lr=1e-4)
    g = torch.Generator().manual_seed(0)
    losses, stamps, t0 = [], [], time.perf_counter()
    for _ in range(args.steps):
        x = _batch(g, args.batch, args.size, device)
        loss = rd_loss_with_ortho(net(x), x, 0.013, net)["loss"]
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        _sync(device)
        losses.append(float(loss.detach()))
        stamps.append(time.perf_counter() - t0)
    return losses, stamps


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--N", type=int, default=128)
    p.add_argument("--M", type=int, default=192)
    p.add_argument("--size", type=int, default=256)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=2000)
    args = p.parse_args()
    device = torch.device(args.device)
    res = {}
    for kind in ("base", "unfolded", "folded"):
        net = _make(args, kind, device)
        losses, stamps = _train(net, args, device)
        warm = max(len(stamps) // 10, 1)  # skip the first steps (allocator / cuDNN warm-up)
        step = (stamps[-1] - stamps[warm - 1]) / (len(stamps) - warm)
        res[kind] = {"net": net, "losses": losses, "stamps": stamps, "step": step}
    target = sum(res["base"]["losses"][-10:]) / len(res["base"]["losses"][-10:])
    print(f"step time base {res['base']['step'] * 1e3:.1f} ms")
    for kind in ("unfolded", "folded"):
        r = res[kind]
        print(
            f"  AuxT {kind:<8} {r['step'] * 1e3:.1f} ms  overhead {100 * (r['step'] / res['base']['step'] - 1):+.1f} %"
        )
        # Smoothed over 10 steps so one lucky batch does not count as reaching the target.
        sm = [
            sum(r["losses"][max(0, i - 9) : i + 1]) / len(r["losses"][max(0, i - 9) : i + 1])
            for i in range(len(r["losses"]))
        ]
        hit = next((i for i, v in enumerate(sm) if v <= target), None)
        if hit is None:
            print(f"  AuxT {kind:<8} did not reach the base model's final loss {target:.3f}")
        else:
            speed = res["base"]["stamps"][-1] / r["stamps"][hit]
            print(f"  AuxT {kind:<8} reaches base final loss {target:.3f}: {speed:.2f}x faster (wall-clock)")
    x = _batch(torch.Generator().manual_seed(1), 1, args.size, device)
    times = {}
    for kind in ("base", "folded"):
        net = res[kind]["net"].eval()
        net.update(force=True)
        with torch.no_grad():
            enc = net.compress(x)
            t0 = time.perf_counter()
            enc = net.compress(x)
            t1 = time.perf_counter()
            net.decompress(enc["strings"], enc["shape"])
            t2 = time.perf_counter()
        times[kind] = (t1 - t0, t2 - t1)
    for i, what in enumerate(("compress", "decompress")):
        tb, ta = times["base"][i], times["folded"][i]
        print(f"{what}: base {tb * 1e3:.1f} ms, AuxT {ta * 1e3:.1f} ms, ratio {ta / tb:.3f}")


if __name__ == "__main__":
    main()
