"""Benchmark: many exact λ-balanced trajectories at once (batched float64 eigh/cholesky) vs a loop.

Issue target: 10,000 trajectories × 200 time points, batched on a GPU vs a CPU loop of single
trajectories, >= 20× faster with max deviation <= 1e-9, plus the time of a plain NumPy loop of the
same stepped formula. GPU figures cannot be measured on the CPU-only development machine: run

    python benchmarks/lambda_balanced_batch.py --device cuda                       # full size
    python benchmarks/lambda_balanced_batch.py --device cpu --batch 64 --loop 16   # CPU smoke run

The loop is timed on ``--loop`` trajectories and scaled to ``--batch``; deviations are measured on
those trajectories. Ratios are printed from one run.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from iclr25.theory.lambda_balanced import exact_trajectory, io_correlation, lambda_balanced_init, whiten


def _numpy_trajectory(W1, W2, syx, lam, times, max_step=4.0):
    """Plain NumPy version of the stepped Riccati solution (one trajectory), the reference loop."""
    n_in, n_out = W1.shape[1], W2.shape[0]
    F = np.block([[-lam / 2 * np.eye(n_in), syx.T], [syx, lam / 2 * np.eye(n_out)]])
    w, O = np.linalg.eigh(F)
    Q, prev, out = np.vstack([W1.T, W2]), 0.0, []
    for t in times:
        delta = t - prev
        if delta > 0:
            n = max(1, int(np.ceil(np.abs(w).max() * delta / max_step)))
            d = delta / n
            E = (O * np.exp(w * d)) @ O.T
            x = 2 * w * d
            G = (O * (d * np.where(x == 0, 1.0, np.expm1(x) / np.where(x == 0, 1.0, x)))) @ O.T
            for _ in range(n):
                C = np.linalg.cholesky(np.eye(Q.shape[1]) + Q.T @ G @ Q)
                Q = np.linalg.solve(C, (E @ Q).T).T
        prev = t
        out.append(Q @ Q.T)
    return np.stack(out)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--times", type=int, default=200)
    ap.add_argument("--loop", type=int, default=50, help="trajectories timed in the loops (scaled to --batch)")
    ap.add_argument("--t-end", type=float, default=60.0)
    args = ap.parse_args()
    device = torch.device(args.device)
    gen = torch.Generator().manual_seed(0)
    n_in, n_hidden, n_out = 5, 3, 3
    X = whiten(torch.randn(n_in, 20, generator=gen, dtype=torch.float64))
    syx = io_correlation(X, torch.randn(n_out, n_in, generator=gen, dtype=torch.float64) @ X)
    lams = torch.linspace(0.0, 20.0, args.batch, dtype=torch.float64)
    pairs = [lambda_balanced_init(float(l), n_in, n_hidden, n_out, 1e-3, generator=gen) for l in lams]
    W1 = torch.stack([p[0] for p in pairs])
    W2 = torch.stack([p[1] for p in pairs])
    times = torch.linspace(0.0, args.t_end, args.times, dtype=torch.float64)

    Wd1, Wd2, sd, ld = W1.to(device), W2.to(device), syx.to(device), lams.to(device)
    exact_trajectory(Wd1[:2], Wd2[:2], sd, ld[:2], times[:3])  # warm-up (CUDA context, kernels)
    _sync(device)
    t0 = time.perf_counter()
    batched = exact_trajectory(Wd1, Wd2, sd, ld, times)["qqt"]
    _sync(device)
    t_batch = time.perf_counter() - t0

    idx = torch.linspace(0, args.batch - 1, min(args.loop, args.batch)).long().tolist()
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    loop = [exact_trajectory(W1[i], W2[i], syx, float(lams[i]), times)["qqt"] for i in idx]
    t_loop = (time.perf_counter() - t0) * args.batch / len(idx)
    t0 = time.perf_counter()
    ref = [_numpy_trajectory(W1[i].numpy(), W2[i].numpy(), syx.numpy(), float(lams[i]), times.numpy()) for i in idx]
    t_np = (time.perf_counter() - t0) * args.batch / len(idx)

    b = batched[idx].cpu()
    dev_loop = max(float((b[k] - loop[k]).abs().max()) for k in range(len(idx)))
    dev_np = max(float((b[k] - torch.from_numpy(ref[k])).abs().max()) for k in range(len(idx)))
    print(f"{args.batch} trajectories x {args.times} times on {device}")
    print(f"batched {device}: {t_batch:.3f} s")
    print(
        f"torch CPU loop (scaled from {len(idx)}): {t_loop:.3f} s  ratio {t_loop / t_batch:.1f}x  "
        f"max dev {dev_loop:.2e}"
    )
    print(f"NumPy loop (scaled from {len(idx)}): {t_np:.3f} s  ratio {t_np / t_batch:.1f}x  max dev {dev_np:.2e}")


if __name__ == "__main__":
    main()
