"""AIHF benchmark: batched tabular soft value iteration, and ARS environment steps per second.

Soft VI sweeps for ``--batch`` reward hypotheses on the 5×5 gridworld: numpy (the baseline) vs the torch
reference and, on CUDA, the fused logsumexp-Bellman Triton kernel, each timed in this one run and printed as
ratios over numpy. The issue's gate (Triton on CUDA >= 10x numpy at 256 hypotheses) needs a GPU: on a CPU-only
machine only the numpy and torch-CPU figures are measured, and the Triton row says it was skipped.

Then the MuJoCo environment steps per second of the ARS optimizer (CPU-bound; no gate).

    python benchmarks/aihf_bench.py --batch 256 --iters 300 [--device cuda] [--ars-iters 2]
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from iclr25.core.bench import time_call
from iclr25.rl.aihf import ARS, batched_soft_vi, tabular


def numpy_soft_vi(P: np.ndarray, r: np.ndarray, gamma: float, temp: float, iters: int) -> np.ndarray:
    B, S, A = r.shape
    Pf = P.reshape(S * A, S)
    V = np.zeros((B, S))
    for _ in range(iters):
        z = (r + gamma * (V @ Pf.T).reshape(B, S, A)) / temp
        m = z.max(2, keepdims=True)
        V = temp * (m[..., 0] + np.log(np.exp(z - m).sum(2)))
    return V


def timed(fn, repeats: int, device: torch.device | None = None) -> float:
    """Mean seconds per call over ``repeats`` calls after one warm-up call."""
    return time_call(fn, device=device, warmup=1, repeats=1, number=repeats).median


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--iters", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--ars-iters", type=int, default=2)
    args = ap.parse_args()

    gw = tabular.GridWorld()
    r = np.random.default_rng(0).normal(size=(args.batch, gw.n_states, gw.n_actions))
    t_np = timed(lambda: numpy_soft_vi(gw.P, r, 0.9, 1.0, args.iters), args.repeats)
    V_np = numpy_soft_vi(gw.P, r, 0.9, 1.0, args.iters)
    dev = torch.device(args.device)
    P_t, r_t = torch.as_tensor(gw.P, device=dev), torch.as_tensor(r, device=dev)
    print(f"batched soft VI: B={args.batch}, S=25, A=5, {args.iters} backups; numpy {t_np * 1e3:.1f} ms")
    for backend in ("reference", "triton"):
        try:
            V = batched_soft_vi(P_t, r_t, 0.9, 1.0, args.iters, backend=backend)
        except Exception as exc:
            print(f"  {backend:9s} on {dev.type}: skipped ({exc})")
            continue
        t = timed(lambda b=backend: batched_soft_vi(P_t, r_t, 0.9, 1.0, args.iters, backend=b), args.repeats, dev)
        err = float(np.abs(V.cpu().numpy() - V_np).max())
        print(f"  {backend:9s} on {dev.type}: {t * 1e3:.2f} ms, {t_np / t:.1f}x numpy, max |ΔV| {err:.1e}")

    if args.ars_iters:
        ars = ARS("HalfCheetah-v5", horizon=200, seed=0)
        ars.improve(None, args.ars_iters)
        print(f"ARS HalfCheetah-v5: {ars.env_steps / ars.env_seconds:.0f} env steps/s ({ars.env_steps} steps)")
        ars.close()


if __name__ == "__main__":
    main()
