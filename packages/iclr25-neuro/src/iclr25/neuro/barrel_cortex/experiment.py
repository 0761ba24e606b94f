"""Small-scale reproduction of the barrel-cortex RSNN (``iclr25 reproduce barrel_cortex``).

Data: the offline whisker simulator, 80 train / 30 test sweeps per class (quick: 40 / 15), sweep 0,
dt = 1 (T = 110), conversion centres from the training set. Model: `BarrelCortexRSNN` at scale 0.25
(1,055 neurons; quick: 0.1, 421 neurons), synchronous update, official readout, Adam 0.008 with the
official per-group rates, batch 16, 8 epochs (quick: 2), seeds ``seed, seed+1`` (quick: one), the two
seeds trained in two processes. Same run: vanilla RNN and LSTM (hidden 128) on the same spikes, and
the untrained RSNN (same seed) for selectivity and firing rates. Selectivity pools the training and
test sweeps of each class, as RSNN_bfd's ``ANOVA()`` does (both networks see the same trials).
Deprivation over k ∈ {0,1,2,4,8} (3 draws per k > 0) on the first seed's model.
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import multiprocessing as mp
import statistics
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from iclr25.core.experiments import Experiment, Measurement, Outcome
from iclr25.core.io import save_json
from iclr25.core.seed import seed_everything

from .analysis import evaluate, firing_statistics, selectivity_anova, train_barrel, whisker_deprivation_curve
from .network import BarrelCortexRSNN
from .whiskers import make_whisker_dataset, to_spikes

logger = logging.getLogger(__name__)

FULL = {"train": 80, "test": 30, "scale": 0.25, "epochs": 8, "seeds": 2, "baseline_epochs": 30}
QUICK = {"train": 40, "test": 15, "scale": 0.1, "epochs": 2, "seeds": 1, "baseline_epochs": 10}
KS = (0, 1, 2, 4, 8)
DRAWS = 3
BATCH = 16
# Gates from the issue (acceptance items 6 and 7).
ACC_FULL, ACC_QUICK = 0.60, 0.45
SEL_MIN, SEL_RATIO_FULL, SEL_RATIO_QUICK = 0.5, 5.0, 2.0
RHO_MAX = -0.6


def _data(cfg: dict[str, Any], seed: int) -> dict[str, Any]:
    f_tr, t_tr, y_tr = make_whisker_dataset(cfg["train"], seed=seed)
    f_te, t_te, y_te = make_whisker_dataset(cfg["test"], seed=seed + 10_000)
    x_tr, meta = to_spikes(f_tr, t_tr, dt=1, generator=seed)
    x_te, _ = to_spikes(f_te, t_te, dt=1, c_f=meta["c_f"], c_t=meta["c_t"], generator=seed + 1)
    return {"x_tr": x_tr[:, :, 0], "y_tr": y_tr, "x_te": x_te[:, :, 0], "y_te": y_te, "f_te": f_te, "t_te": t_te,
            "meta": meta}  # fmt: skip


def _selectivity_trials(data: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """The sweeps the ANOVA runs on: RSNN_bfd's ``ANOVA()`` concatenates each class's training and
    test data (the spike trains the network was trained and tested on), so we pool both splits."""
    return np.concatenate([data["x_tr"], data["x_te"]]), np.concatenate([data["y_tr"], data["y_te"]])


def _rsnn_seed(cfg: dict[str, Any], data: dict[str, Any], seed: int, deprivation: bool) -> dict[str, Any]:
    torch.set_num_threads(1)  # one process per seed on the 2-core budget
    seed_everything(seed)
    model = BarrelCortexRSNN(scale=cfg["scale"], seed=seed)
    x_sel, y_sel = _selectivity_trials(data)
    untrained = selectivity_anova(model, x_sel, y_sel)
    untrained_fire = firing_statistics(model, data["x_te"])
    hist = train_barrel(model, data["x_tr"], data["y_tr"], epochs=cfg["epochs"], batch_size=BATCH, seed=seed)
    trained = selectivity_anova(model, x_sel, y_sel)
    out = {
        "seed": seed,
        "acc": evaluate(model, data["x_te"], data["y_te"]),
        "train_loss": hist["loss"],
        "selective": trained["fraction"],
        "selective_untrained": untrained["fraction"],
        "selectivity_trials": len(y_sel),
    }
    # diagnostics, not gated: how many neurons fire at all, the selective share among them (the
    # gated fraction keeps RSNN_bfd's denominator, every cortical neuron), and how many selective
    # neurons prefer each class. All of them preferring one class means a network-wide gain
    # difference, not per-neuron tuning: e.g. the untrained scale-0.1 network answers a sweep with
    # either silence or one burst in which most neurons spike about once, more often for the class
    # with the most input spikes (box), which the ANOVA on sweep-summed counts calls selective.
    for tag, sel in (("", trained), ("_untrained", untrained)):
        n_active = int(sel["active"].sum())
        out[f"active{tag}"] = n_active / len(sel["active"])
        out[f"selective_of_active{tag}"] = int(sel["selective"].sum()) / max(n_active, 1)
        pref = sel["preferred"][sel["selective"]]
        out[f"selective_by_class{tag}"] = torch.bincount(pref, minlength=sel["ternary"].shape[1]).tolist()
    fire = firing_statistics(model, data["x_te"])
    for tag, st in (("", fire), ("_untrained", untrained_fire)):
        out.update({f"rate_E{tag}": st["rate_E"], f"rate_I{tag}": st["rate_I"], f"cv_binary{tag}": st["cv_binary"]})
    out["rates"] = fire["rates"]
    if deprivation:
        m = data["meta"]
        curve = whisker_deprivation_curve(
            model, data["f_te"], data["t_te"], data["y_te"], ks=KS, draws=DRAWS, seed=seed, c_f=m["c_f"], c_t=m["c_t"]
        )
        out["deprivation"] = {"ks": curve["ks"], "accuracy": curve["accuracy"], "spearman": curve["spearman"]}
    return out


class _SeqClassifier(nn.Module):
    def __init__(self, cell: str, n_in: int = 186, hidden: int = 128, n_classes: int = 3) -> None:
        super().__init__()
        self.rnn = (nn.LSTM if cell == "lstm" else nn.RNN)(n_in, hidden, batch_first=True)
        self.head = nn.Linear(hidden, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x [B, 2, T, 93]
        seq = x.permute(0, 2, 1, 3).reshape(x.shape[0], x.shape[2], -1)
        return self.head(self.rnn(seq)[0][:, -1])


def _baseline(cell: str, data: dict[str, Any], epochs: int, seed: int) -> float:
    seed_everything(seed)
    model = _SeqClassifier(cell)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = torch.from_numpy(data["x_tr"]), torch.from_numpy(data["y_tr"])
    gen = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        for idx in torch.randperm(len(y), generator=gen).split(BATCH):
            loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    with torch.no_grad():
        pred = model(torch.from_numpy(data["x_te"])).argmax(1)
    return float((pred == torch.from_numpy(data["y_te"])).float().mean())


def run(quick: bool, device: torch.device, seed: int, out: Path) -> Outcome:
    """Train RSNNs (and RNN/LSTM baselines) on simulated whisker sweeps and check the card's claims."""
    cfg = QUICK if quick else FULL
    data = _data(cfg, seed)
    seeds = [seed + k for k in range(cfg["seeds"])]
    threads = torch.get_num_threads()
    try:
        if len(seeds) == 1:
            runs = [_rsnn_seed(cfg, data, seeds[0], True)]
        else:
            # spawn: a forked torch process can deadlock in its thread pool
            with cf.ProcessPoolExecutor(len(seeds), mp_context=mp.get_context("spawn")) as pool:
                futs = [pool.submit(_rsnn_seed, cfg, data, s, k == 0) for k, s in enumerate(seeds)]
                runs = [f.result() for f in futs]
        torch.set_num_threads(1)
        base = {
            c: statistics.fmean(_baseline(c, data, cfg["baseline_epochs"], s) for s in seeds) for c in ("rnn", "lstm")
        }
    finally:
        torch.set_num_threads(threads)
    keys = ("acc", "selective", "selective_untrained", "rate_E", "rate_I", "rate_E_untrained", "rate_I_untrained",
            "active", "active_untrained")  # fmt: skip
    mean = {k: statistics.fmean(r[k] for r in runs) for k in keys}
    dep = runs[0]["deprivation"]
    acc_gate = ACC_QUICK if quick else ACC_FULL
    ratio = SEL_RATIO_QUICK if quick else SEL_RATIO_FULL
    sel_ratio = mean["selective"] / max(mean["selective_untrained"], 1e-12)
    sel_holds = sel_ratio >= ratio and (quick or mean["selective"] >= SEL_MIN)
    acc_holds = mean["acc"] > acc_gate if quick else mean["acc"] >= acc_gate
    rho = dep["spearman"]
    dep_holds = dep["accuracy"][-1] <= dep["accuracy"][0] and rho == rho and rho <= RHO_MAX
    conventional = statistics.fmean(base.values())
    claims = {
        "rsnn_accuracy": Measurement(
            ours=round(mean["acc"], 4),
            baseline=round(1 / 3, 4),
            holds=bool(acc_holds),
            note=f"mean test accuracy over seeds {seeds}; baseline = chance; holds when "
            + (f"> {acc_gate}" if quick else f">= {acc_gate}"),
        ),
        "rsnn_vs_conventional": Measurement(
            ours=round(100 * (mean["acc"] - conventional), 2),
            baseline=round(100 * conventional, 2),
            note=f"RSNN minus mean(RNN {base['rnn']:.3f}, LSTM {base['lstm']:.3f}) accuracy in points; baseline = "
            "their mean accuracy [%]; report only: on this simulator the LSTM is far stronger than the small "
            "RSNN, so the paper's +8.6 is not expected at this scale",
        ),
        "deprivation_graceful": Measurement(
            ours=round(rho, 4),
            baseline=None,
            # the issue gates --quick on accuracy and selectivity only: deprivation is reported there
            holds=None if quick else bool(dep_holds),
            note=f"Spearman rho over k={list(dep['ks'])} (acc {[round(a, 3) for a in dep['accuracy']]}, "
            f"{DRAWS} draws per k, seed {seeds[0]}); holds when acc(8) <= acc(0) and rho <= {RHO_MAX}"
            + (" (gated in full runs only)" if quick else ""),
        ),
        "selective_fraction": Measurement(
            ours=round(mean["selective"], 4),
            baseline=round(mean["selective_untrained"], 4),
            holds=bool(sel_holds),
            note=f"ANOVA p < 0.001 on train+test spikes (RSNN_bfd pools both), all cortical neurons; baseline = "
            f"untrained RSNN (same seed, same trials); active (fired at all) {mean['active']:.3f} vs "
            f"{mean['active_untrained']:.3f} untrained; selective neurons per preferred class "
            f"{runs[0]['selective_by_class']} vs {runs[0]['selective_by_class_untrained']} untrained "
            f"(seed {seeds[0]}); holds when ours >= {ratio}x baseline" + ("" if quick else f" and ours >= {SEL_MIN}"),
        ),
        "biological_firing": Measurement(
            ours=round(mean["rate_I"] - mean["rate_E"], 5),
            baseline=round(mean["rate_I_untrained"] - mean["rate_E_untrained"], 5),
            note=f"rate_I - rate_E [spikes/step], trained (E {mean['rate_E']:.4f}, I {mean['rate_I']:.4f}) vs "
            f"untrained (E {mean['rate_E_untrained']:.4f}, I {mean['rate_I_untrained']:.4f}); report only",
        ),
    }
    extra = {
        "data": "offline whisker-sweep simulator (iclr25.neuro.barrel_cortex.WhiskerSweepSimulator), sweep 0, dt=1",
        "config": cfg,
        "update": "synchronous",
        "readout": "official",
        "seeds": seeds,
        "baselines": base,
        "conversion": data["meta"],
        "deprivation": dep,
        "by_seed": [{k: v for k, v in r.items() if k != "deprivation"} for r in runs],
    }
    save_json(out / "barrel_cortex_runs.json", extra)
    return Outcome(claims=claims, extra=extra)


experiment = Experiment("barrel_cortex", run)
