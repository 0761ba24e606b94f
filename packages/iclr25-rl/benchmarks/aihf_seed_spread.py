"""AIHF HalfCheetah seed spread: how far three seeds can be trusted (a study, not a speed benchmark).

Runs the reproduction's HalfCheetah comparison (:func:`iclr25.rl.aihf.experiment.mujoco_seed`: ARS expert,
10 demonstrations, 10 BT pairs, RLHF = BT reward + 120 ARS iterations, AIHF = 60 x (2 ARS iterations +
a reward step), both from the zero policy) on ``--seeds`` seeds and prints per-seed returns, the mean
AIHF − RLHF difference with its standard error, and the installed MuJoCo / Gymnasium versions: ARS amplifies
the tiny numerical differences between MuJoCo releases into different trajectories, so the same seed gives
different returns on different releases.

    python benchmarks/aihf_seed_spread.py --seeds 0-9 [--jobs 2] [--json spread.json]
"""

from __future__ import annotations

import argparse
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from iclr25.core.experiments import versions
from iclr25.core.io import save_json


def _one(seed: int) -> dict[str, float]:
    import torch

    torch.set_num_threads(1)
    from iclr25.rl.aihf.experiment import HALFCHEETAH_EXPERT_ITERS, HALFCHEETAH_HORIZON, mujoco_seed

    return {"seed": seed, **mujoco_seed(seed, HALFCHEETAH_HORIZON, HALFCHEETAH_EXPERT_ITERS)}


def _seeds(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        if not lo.strip().isdigit() or (hi and not hi.strip().isdigit()):
            raise argparse.ArgumentTypeError(f"--seeds: expected e.g. '0-9' or '0,3,5', got {text!r}")
        out.extend(range(int(lo), int(hi) + 1) if hi else [int(lo)])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=_seeds, default=_seeds("0-9"))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", default=None, help="also write the rows and summary here")
    args = ap.parse_args()
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        rows = list(pool.map(_one, args.seeds))
    vers = {d: versions().get(d, "not installed") for d in ("mujoco", "gymnasium")}
    print(f"mujoco {vers['mujoco']}, gymnasium {vers['gymnasium']}")
    print(f"{'seed':>4} {'expert':>8} {'RLHF':>8} {'AIHF':>8}")
    for r in rows:
        print(f"{r['seed']:>4} {r['expert']:8.1f} {r['rlhf']:8.1f} {r['aihf']:8.1f}")
    diff = np.array([r["aihf"] - r["rlhf"] for r in rows])
    ratio = np.array([r["aihf"] for r in rows]).mean() / np.array([r["expert"] for r in rows]).mean()
    se = diff.std(ddof=1) / np.sqrt(len(diff)) if len(diff) > 1 else float("nan")
    summary = {
        "n_seeds": len(rows),
        "mean_aihf_minus_rlhf": float(diff.mean()),
        "se_aihf_minus_rlhf": float(se),
        "aihf_wins": int((diff > 0).sum()),
        "mean_aihf_over_mean_expert": float(ratio),
        "versions": vers,
    }
    print(
        f"AIHF - RLHF: {diff.mean():+.1f} +- {se:.1f} (s.e., {len(diff)} seeds); AIHF wins {summary['aihf_wins']}"
        f"/{len(diff)}; mean AIHF / mean expert {ratio:.2f}"
    )
    if args.json:
        save_json(args.json, {"rows": rows, "summary": summary})


if __name__ == "__main__":
    main()
