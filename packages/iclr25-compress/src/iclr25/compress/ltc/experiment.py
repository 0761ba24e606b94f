"""Small-scale reproduction: NTC (Z⁸) vs LTC (E8) on an i.i.d. N(0, 1) source, n = 8.

Both models get identical transforms (MLP 8→64→64→8 with Softplus; linear maps in ``--quick``),
the identical density family (per-channel 3-component Gaussian mixture), the joint MC estimator, STE, Adam 3e-3 with
cosine decay, batch 256, λ = 6 and the same number of steps and seed. Evaluation on fresh vectors
with N = 1024 MC samples. Metric: gap to the Gaussian ``D(R)`` at the achieved rate,
``10·log10(D / 2^{−2R})`` dB. The full run also reports D4×2, A2×4 and one Block-LTC point
(E8 blocks of 8 scalar realizations with LeakyReLU MLPs, as in the official BlockLTC, vs one-shot
scalar NTC).
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path

import torch

from iclr25.core.device import cpu_threads
from iclr25.core.experiments import Experiment, Measurement, Outcome
from iclr25.core.io import save_json
from iclr25.core.progress import progress
from iclr25.core.seed import seed_everything

from .lattices import lattice
from .models import LTC, BlockLTC, rate_distortion_loss
from .theory import rd_gap_db

log = logging.getLogger(__name__)

LMBDA = 6.0  # λ, ≈ 1.7 bit/dim at n = 8


def _train(model, steps: int, sample, device, seed: int, lr: float = 3e-3, batch: int = 256) -> float:
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    g = torch.Generator(device="cpu").manual_seed(seed)
    model.train()
    loss = float("nan")
    for _ in progress(range(steps), desc="train", total=steps):
        x = sample(batch, g).to(device)
        out = rate_distortion_loss(model(x), x, LMBDA)
        opt.zero_grad(set_to_none=True)
        out["loss"].backward()
        opt.step()
        sched.step()
        loss = float(out["loss"].detach())
    model.eval()
    return loss


def _gauss(shape):
    def sample(batch: int, g: torch.Generator) -> torch.Tensor:
        return torch.randn(batch, *shape, generator=g)

    return sample


def _run_model(model, steps, shape, n_eval, n_mc, device, seed, lr) -> dict:
    t0 = time.perf_counter()
    _train(model, steps, _gauss(shape), device, seed, lr=lr)
    g = torch.Generator(device="cpu").manual_seed(seed + 10_000)
    x = torch.randn(n_eval, *shape, generator=g).to(device)
    ev = model.evaluate(x, n_samples=n_mc, generator=torch.Generator(device=device).manual_seed(seed))
    ev["gap_db"] = rd_gap_db(ev["mse"], ev["bpd"])
    ev["seconds"] = round(time.perf_counter() - t0, 1)
    return ev


def run(quick: bool, device, seed: int, out: Path) -> Outcome:
    """Train NTC (Z⁸) and LTC (E8) with the same budget and compare their gaps to R(D)."""
    seed_everything(seed)
    device = torch.device(device)
    # These models are tiny: intra-op threading costs ~10x more than it saves (measured 0.06 s
    # vs 0.51 s per training step on 2 cores).
    with cpu_threads(1, device):
        return _run(quick, device, seed, out)


def _run(quick: bool, device: torch.device, seed: int, out: Path) -> Outcome:
    cfg = {
        "n": 8,
        "lambda": LMBDA,
        "steps": 400 if quick else 2000,
        "transform": "linear" if quick else "mlp",
        "hidden": 64,
        "density": "mixture",
        "mc_train": 16 if quick else 32,
        "mc_eval": 1024,
        "n_eval": 2000 if quick else 4000,
        "batch": 256,
        "lr": 1e-2 if quick else 3e-3,
        "bltc_activation": "leaky_relu",
    }
    results: dict[str, dict] = {}

    def one(name: str, lat: str):
        torch.manual_seed(seed)  # identical initialization of the transforms for every lattice
        model = LTC(
            8,
            lattice(lat),
            hidden=cfg["hidden"],
            density=cfg["density"],
            n_samples=cfg["mc_train"],
            transform=cfg["transform"],
        ).to(device)
        results[name] = _run_model(model, cfg["steps"], (8,), cfg["n_eval"], cfg["mc_eval"], device, seed, cfg["lr"])
        log.info("%s: %s", name, results[name])

    one("ntc_Z8", "Z8")
    one("ltc_E8", "E8")
    if not quick:
        one("ltc_D4x2", "D4^2")
        one("ltc_A2x4", "A2^4")
        # Block point: LeakyReLU transforms (official BlockLTC; Softplus stacks start every block
        # in one lattice cell and collapse to zero rate). The one-shot baseline keeps Softplus: it
        # is the stronger scalar coder here (1.63 dB vs 2.28 dB with LeakyReLU, seed 0, 2000 steps),
        # and the claim is against the best one-shot coder.
        torch.manual_seed(seed)
        bltc = BlockLTC(
            1,
            1,
            "E8",
            hidden=cfg["hidden"],
            density=cfg["density"],
            n_samples=cfg["mc_train"],
            activation=cfg["bltc_activation"],
        ).to(device)
        results["bltc_E8_scalar"] = _run_model(
            bltc, cfg["steps"], (8, 1), cfg["n_eval"] // 8 * 8, cfg["mc_eval"], device, seed, cfg["lr"]
        )
        torch.manual_seed(seed)
        one_shot = LTC(
            1,
            lattice("Z", dim=1),
            hidden=cfg["hidden"],
            density=cfg["density"],
            n_samples=cfg["mc_train"],
        )
        results["ntc_scalar"] = _run_model(
            one_shot.to(device), cfg["steps"], (1,), cfg["n_eval"], cfg["mc_eval"], device, seed, cfg["lr"]
        )

    gz, ge = results["ntc_Z8"]["gap_db"], results["ltc_E8"]["gap_db"]
    min_gain = 0.3 if quick else 0.4
    claims = {
        "ntc_gap_db": Measurement(ours=round(gz, 3), holds=1.2 <= gz <= 1.9, note="gate: 1.2 <= gap <= 1.9 dB"),
        "ltc_gap_db": Measurement(ours=round(ge, 3), baseline=round(gz, 3), holds=ge <= 1.15, note="gate: <= 1.15 dB"),
        "ltc_gain_db": Measurement(
            ours=round(gz - ge, 3), holds=gz - ge >= min_gain, note=f"gate: gap(Z8) - gap(E8) >= {min_gain} dB"
        ),
    }
    if not quick:
        ladder = " / ".join(f"{results[k]['gap_db']:.2f}" for k in ("ltc_A2x4", "ltc_D4x2", "ltc_E8"))
        claims["lattice_ladder"] = Measurement(ours=ladder + " dB", baseline=f"{gz:.2f} dB (Z8)")
        b = results["bltc_E8_scalar"]
        # A model that collapsed to (near) zero rate sits at D = σ², where every coder's gap is ~0:
        # say so rather than let a tiny gap read as coding gain.
        note = "collapsed to ~0 rate: not a coding-gain measurement" if b["bpd"] < 0.05 else ""
        claims["bltc_coding_gain"] = Measurement(
            ours=round(b["gap_db"], 3), baseline=round(results["ntc_scalar"]["gap_db"], 3), note=note
        )
    extra = {"config": cfg, "models": {k: {kk: _r(vv) for kk, vv in v.items()} for k, v in results.items()}}
    save_json(out / "results_models.json", extra)
    return Outcome(claims=claims, extra=extra)


def _r(v):
    return round(v, 4) if isinstance(v, float) and math.isfinite(v) else v


experiment = Experiment("ltc", run)
