"""Small-scale reproduction: CompressAI ``FactorizedPrior`` with and without AuxT.

Offline data: random crops of scikit-image ``astronaut, coffee, chelsea, rocket,
hubble_deep_field`` and scikit-learn ``china.jpg`` for training; scikit-learn ``flower.jpg`` for
testing, centre-cropped to 384×640 (all of its width, 384 of its 427 rows) in the full run and to
256×256 in ``--quick``, as in the method note's prototype. Both models start from the same seed
(identical base weights), see the same batches, and train with Adam (lr 1e-3, a separate Adam for
the quantiles), grad clip 1.0, batch 8, λ = 0.013, ``L = λ·255²·MSE + bpp (+ 0.1·Σ L_orth for
AuxT)`` with MSE on [0, 1] images. The test RD loss (same units, no ortho term, x̂ unclamped) is
evaluated every 10 % of the budget. Budget deviations from the note's prototype (800 / 600 steps
on 64×64 crops): 200 steps on 48×48 crops, to fit 10 minutes on 2 CPU cores; at the note's
setting this code gives baseline 5.36 vs AuxT 2.40 on seed 0 (note: 4.53 vs 1.69).

Gates: (1) the first evaluation at which AuxT's test loss ≤ the baseline's final loss (mean of
its last two evaluations) comes at ≤ 50 % of the budget on every seed (speed-up ≥ 2×); (2) AuxT's
final loss < the baseline's on every seed. The full run adds λ ∈ {0.0067, 0.025} (seed 0),
reports real-bitstream bpp/PSNR and gates ``bd_rate(base, auxt, "pchip") < 0`` (3); a BD-rate
that the RD curves do not allow (non-monotonic or non-overlapping) counts as not held.
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path

import numpy as np
import torch

from iclr25.core.device import cpu_threads
from iclr25.core.experiments import Experiment, Measurement, Outcome
from iclr25.core.io import save_json
from iclr25.core.progress import progress
from iclr25.core.seed import seed_everything

from ..metrics import bd_rate, rd_point
from .model import attach_auxt, rd_loss_with_ortho

log = logging.getLogger(__name__)

LMBDA = 0.013
N_EVALS = 10


# Test crop (H, W) of flower.jpg (427×640): the method note's full run uses the whole image cut
# to a multiple of 64 rows, its quick check a 256×256 crop. The test crop sets the scale of every
# test loss (the flower's centre is busier than the whole image: about twice the loss).
TEST_CROP = {"full": (384, 640), "quick": (256, 256)}


def _images(quick: bool = False) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Training images (list of ``(3, H, W)``) and the ``(1, 3, h, w)`` test crop of flower.jpg."""
    from skimage import data
    from sklearn.datasets import load_sample_image

    def t(a: np.ndarray) -> torch.Tensor:
        # np.array copies: skimage's bundled arrays are read-only
        return torch.from_numpy(np.array(a[..., :3])).permute(2, 0, 1).float() / 255.0

    train = [t(getattr(data, n)()) for n in ("astronaut", "coffee", "chelsea", "rocket", "hubble_deep_field")]
    train.append(t(load_sample_image("china.jpg")))
    flower = t(load_sample_image("flower.jpg"))
    _, h, w = flower.shape
    ch, cw = TEST_CROP["quick" if quick else "full"]
    top, left = (h - ch) // 2, (w - cw) // 2
    return train, flower[None, :, top : top + ch, left : left + cw]


def _batch(train: list[torch.Tensor], crop: int, batch: int, g: torch.Generator) -> torch.Tensor:
    out = []
    for _ in range(batch):
        img = train[int(torch.randint(len(train), (1,), generator=g))]
        _, h, w = img.shape
        i = int(torch.randint(h - crop + 1, (1,), generator=g))
        j = int(torch.randint(w - crop + 1, (1,), generator=g))
        out.append(img[:, i : i + crop, j : j + crop])
    return torch.stack(out)


def _make(n: int, m: int, aux: bool, seed: int, device: torch.device):
    from compressai.models import FactorizedPrior

    torch.manual_seed(seed)  # identical base weights with and without AuxT
    net = FactorizedPrior(n, m)
    if aux:
        net = attach_auxt(net, w_orth=0.1)
    return net.to(device)


@torch.no_grad()
def _test_loss(net, x: torch.Tensor, lmbda: float) -> float:
    net.eval()
    out = rd_loss_with_ortho(net(x), x, lmbda)  # the test RD loss has no ortho term
    net.train()
    return float(out["loss"])


def _train(net, cfg: dict, lmbda: float, seed: int, train, test, device) -> dict:
    main = [p for n, p in net.named_parameters() if not n.endswith(".quantiles")]
    quant = [p for n, p in net.named_parameters() if n.endswith(".quantiles")]
    opt = torch.optim.Adam(main, lr=cfg["lr"])
    aux_opt = torch.optim.Adam(quant, lr=1e-3)
    g = torch.Generator().manual_seed(seed)  # identical batches for both models
    every = max(cfg["steps"] // N_EVALS, 1)
    curve, t0, eval_s = [], time.perf_counter(), 0.0
    net.train()
    for step in progress(range(1, cfg["steps"] + 1), desc="train", total=cfg["steps"]):
        x = _batch(train, cfg["crop"], cfg["batch"], g).to(device)
        loss = rd_loss_with_ortho(net(x), x, lmbda, net)["loss"]
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(main, 1.0)
        opt.step()
        aux_opt.zero_grad(set_to_none=True)
        net.aux_loss().backward()
        aux_opt.step()
        if step % every == 0 and len(curve) < N_EVALS:
            t_eval = time.perf_counter()
            curve.append(round(_test_loss(net, test, lmbda), 4))
            eval_s += time.perf_counter() - t_eval
    total = time.perf_counter() - t0
    return {
        "curve": curve,
        "seconds": round(total, 1),
        # training steps only: the test evaluations run on a larger image and would blur the step overhead
        "s_per_step": (total - eval_s) / cfg["steps"],
    }


def run(quick: bool, device, seed: int, out: Path) -> Outcome:
    """Train FactorizedPrior with and without AuxT on the same budget and compare test RD loss."""
    seed_everything(seed)
    device = torch.device(device)
    # Small convs on 2 cores: one intra-op thread avoids oversubscription (measured faster).
    with cpu_threads(1, device):
        return _run(quick, device, seed, out)


def _summary(base: list[float], aux: list[float]) -> dict:
    target = float(np.mean(base[-2:]))
    hit = next((k + 1 for k, v in enumerate(aux) if v <= target), None)
    return {
        "base_final": round(target, 4),
        "auxt_final": round(float(np.mean(aux[-2:])), 4),
        "fraction_to_target": None if hit is None else hit / len(aux),
    }


def _run(quick: bool, device: torch.device, seed: int, out: Path) -> Outcome:
    cfg = {
        "model": "FactorizedPrior",
        "N": 32 if quick else 64,
        "M": 48 if quick else 96,
        "steps": 150 if quick else 200,
        "crop": 48,
        "batch": 8,
        "lr": 1e-3,
        "lambda": LMBDA,
        "seeds": [seed] if quick else [seed, seed + 1],
        "extra_lambdas": [] if quick else [0.0067, 0.025],
        "test": "flower.jpg {}x{} centre crop".format(*TEST_CROP["quick" if quick else "full"]),
    }
    train, test = _images(quick)
    test = test.to(device)
    runs: dict[str, dict] = {}
    nets = {}
    for s in cfg["seeds"]:
        for aux in (False, True):
            key = f"{'auxt' if aux else 'base'}_seed{s}_lam{LMBDA}"
            net = _make(cfg["N"], cfg["M"], aux, s, device)
            runs[key] = _train(net, cfg, LMBDA, s, train, test, device)
            nets[key] = net
            log.info("%s: %s", key, runs[key])
    for lam in cfg["extra_lambdas"]:
        for aux in (False, True):
            key = f"{'auxt' if aux else 'base'}_seed{seed}_lam{lam}"
            net = _make(cfg["N"], cfg["M"], aux, seed, device)
            runs[key] = _train(net, cfg, lam, seed, train, test, device)
            nets[key] = net

    per_seed = {
        s: _summary(runs[f"base_seed{s}_lam{LMBDA}"]["curve"], runs[f"auxt_seed{s}_lam{LMBDA}"]["curve"])
        for s in cfg["seeds"]
    }
    fracs = [v["fraction_to_target"] for v in per_seed.values()]
    worst = None if any(f is None for f in fracs) else max(fracs)
    speedup = None if worst is None else round(1.0 / worst, 2)
    base_t = np.mean([runs[k]["s_per_step"] for k in runs if k.startswith("base")])
    aux_t = np.mean([runs[k]["s_per_step"] for k in runs if k.startswith("auxt")])
    claims = {
        "convergence_speedup": Measurement(
            ours=speedup if speedup is not None else "target not reached",
            baseline=1.0,
            # the issue gates --quick on the final loss only: the speed-up is reported there
            holds=None if quick else worst is not None and worst <= 0.5,
            note="budget / steps for AuxT to reach the baseline's final test loss (worst seed); gate >= 2x"
            + (" (gated in full runs only)" if quick else ""),
        ),
        "final_loss": Measurement(
            ours=" / ".join(f"{v['auxt_final']:.3f}" for v in per_seed.values()),
            baseline=" / ".join(f"{v['base_final']:.3f}" for v in per_seed.values()),
            holds=all(v["auxt_final"] < v["base_final"] for v in per_seed.values()),
            note="mean of the last two evaluations, one figure per seed; gate: AuxT lower on every seed",
        ),
        "lightweight": Measurement(
            ours=round(100 * (aux_t / base_t - 1), 1),
            note="training-step time (test evaluations excluded), unfolded shortcuts, 1 CPU thread, same batches",
        ),
    }
    rd = {}
    if cfg["extra_lambdas"]:
        for model in ("base", "auxt"):
            pts = []
            for lam in sorted([LMBDA, *cfg["extra_lambdas"]]):
                pts.append(rd_point(nets[f"{model}_seed{seed}_lam{lam}"], test.cpu().to(device)))
            rd[model] = pts
        claims["bd_rate_gain"] = bd_rate_claim(rd["base"], rd["auxt"])
    extra = {
        "config": cfg,
        "runs": {k: {"curve": v["curve"], "seconds": v["seconds"]} for k, v in runs.items()},
        "per_seed": {str(k): v for k, v in per_seed.items()},
        "rd_points": {k: [{kk: _r(vv) for kk, vv in p.items()} for p in v] for k, v in rd.items()},
    }
    save_json(out / "results_runs.json", extra)
    return Outcome(claims=claims, extra=extra)


def bd_rate_claim(base: list[dict], auxt: list[dict]) -> Measurement:
    """The full run's BD-rate gate from real-bitstream RD points (``{"bpp", "psnr"}``, one per λ).

    Holds when ``bd_rate(base, auxt, "pchip") < 0`` (anchor = base). RD curves that admit no
    BD-rate (non-monotonic, or PSNR ranges that do not overlap) count as not held.
    """
    try:
        bd = bd_rate(
            [p["bpp"] for p in base],
            [p["psnr"] for p in base],
            [p["bpp"] for p in auxt],
            [p["psnr"] for p in auxt],
            method="pchip",
        )
    except ValueError as err:
        # Short budgets can leave an RD curve non-monotonic; report that instead of a number.
        return Measurement(
            ours=f"not computable: {err}",
            baseline=0.0,
            holds=False,
            note="gate: BD-rate < 0; undefined for these RD curves, so not held",
        )
    return Measurement(
        ours=round(bd, 2),
        baseline=0.0,
        holds=bool(bd < 0),
        note="real-bitstream, anchor = base, 3 lambdas, equal step budget; gate: BD-rate < 0",
    )


def _r(v):
    return round(v, 4) if isinstance(v, float) and math.isfinite(v) else v


experiment = Experiment("auxt", run)
