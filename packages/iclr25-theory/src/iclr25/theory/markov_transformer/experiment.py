"""Registered reproduction: ``iclr25 reproduce markov_transformer [--quick]``.

Theory model (binary embedding ``x e + pos``, one causal softmax head, ReLU feed-forward, scalar
head, no LayerNorm), d = 8, N = 128, batch 16, AdamW lr 2e-3 with the official schedule.
Full: 600 steps, 3 seeds, tolerance 0.01 nats; quick: 300 steps, 1 seed, tolerance 0.02 nats.
Runs of one architecture train together under ``vmap`` (:func:`train_sweep`), which gives each
run exactly the data and initialisation a separate :func:`train_markov` call would.

Gated: tied p=q=0.8 and tied p=0.5, q=0.8 end at H(pi); untied p=q=0.8 and tied p=q=0.2 end at
the entropy rate — each measured against the unigram predictor's or the true chain's loss on the same
test tokens, which removes the test set's sampling noise (about ±0.005 nats at 256 x 128 tokens; the
notes print the plain |test loss - H(pi)| and |test loss - rate| as well); the exact Hessian at
theta_pi (d=2, N=5) has no negative eigenvalue when tied with p+q>1 and a negative one when untied.
Report-only: a 2-layer theory model and the official LayerNorm architecture (two-token tied head,
GELU, pre-LN), which the paper reports reach the bigram.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch

from iclr25.core.device import cpu_threads
from iclr25.core.experiments import Experiment, Measurement, Outcome
from iclr25.core.io import save_json

from .chain import BinaryMarkovChain
from .landscape import landscape_probe, predicted_curvatures, unigram_point
from .model import MarkovTransformer, MarkovTransformerConfig
from .training import train_sweep

log = logging.getLogger(__name__)

ARCHITECTURE = (
    "theory model: u_n = x_n e + pos_n, one causal softmax head, residual ReLU FF (4d), logit <a, z_n> + b, "
    "no LayerNorm, d=8, N=128, batch 16, AdamW lr 2e-3 betas (0.9, 0.95) wd 1e-3, 2% warmup + cosine"
)
OFFICIAL_LN = "official architecture: two-token tied wte/lm_head (head bias untied), GELU 4d MLP, pre-LN + final LN"


def _sweep(
    cfg: MarkovTransformerConfig, chains: list[BinaryMarkovChain], seeds: list[int], iters: int, device: torch.device
) -> list[dict[str, float]]:
    """Per run: final test loss and the chain's / unigram predictor's losses on the same test tokens."""
    models = []
    for s in seeds:
        torch.manual_seed(s)
        models.append(MarkovTransformer(cfg).to(device))
    runs = train_sweep(models, chains, seeds, iters=iters, batch=16, length=cfg.max_len)
    keys = ("test_loss", "test_chain_loss", "test_unigram_loss")
    return [{k: r[k] for k in keys} for r in runs]


def _losses(runs: list[dict[str, float]]) -> list[float]:
    return [r["test_loss"] for r in runs]


def _gap(runs: list[dict[str, float]], reference: str) -> float:
    """Worst |model - reference predictor| on the same test tokens: the population gap without test noise."""
    return max(abs(r["test_loss"] - r[reference]) for r in runs)


def _gap_note(runs: list[dict[str, float]], reference: str, value: float, name: str) -> str:
    raw = _worst_gap(_losses(runs), value)
    noise = ", ".join(f"{r[reference] - value:+.4f}" for r in runs)
    return f"worst |test loss - {name}| {raw:.4f}, of which the test set's own deviation per seed is {noise}"


def _worst_gap(losses: list[float], reference: float) -> float:
    return max(abs(v - reference) for v in losses)


def _min_eigenvalue(tied: bool, chain: BinaryMarkovChain) -> tuple[float, list[float]]:
    cfg = MarkovTransformerConfig(d_model=2, max_len=5, weight_tying=tied)
    model = MarkovTransformer(cfg).double()
    model.load_state_dict(unigram_point(cfg, chain))
    eig = landscape_probe(model, chain, 5)["eigenvalues"]
    return float(eig[0]), [round(float(v), 6) for v in eig if abs(float(v)) > 1e-8]


def run(quick: bool, device: torch.device, seed: int, out: Path) -> Outcome:
    """Train the four gated settings plus the report-only deeper / LayerNorm models; probe the Hessian."""
    iters = 300 if quick else 600
    seeds = [seed] if quick else [seed, seed + 1, seed + 2]
    tol = 0.02 if quick else 0.01
    # Tiny models: one thread avoids contention that made a step several times slower on 2 cores.
    with cpu_threads(1, device):
        high, asym, low = BinaryMarkovChain(0.8, 0.8), BinaryMarkovChain(0.5, 0.8), BinaryMarkovChain(0.2, 0.2)
        base = MarkovTransformerConfig(d_model=8, max_len=128)
        k = len(seeds)

        tied = _sweep(base, [high] * k + [asym] * k + [low] * k, seeds * 3, iters, device)
        tied_high, tied_asym, tied_low = tied[:k], tied[k : 2 * k], tied[2 * k :]
        untied_cfg = MarkovTransformerConfig(d_model=8, max_len=128, weight_tying=False)
        untied = _sweep(untied_cfg, [high] * k + [asym] * k, seeds * 2, iters, device)
        untied_high, untied_asym = untied[:k], untied[k:]

        report_seeds = seeds[:1] if quick else seeds
        two_layer = _sweep(
            MarkovTransformerConfig(d_model=8, max_len=128, n_layers=2),
            [high] * len(report_seeds),
            report_seeds,
            iters,
            device,
        )
        ln_cfg = dict(d_model=8, max_len=128, layer_norm=True, vocab="two_token", activation="gelu")
        ln_one = _sweep(MarkovTransformerConfig(**ln_cfg), [high] * len(report_seeds), report_seeds, iters, device)
        ln_two = (
            []
            if quick
            else _sweep(
                MarkovTransformerConfig(n_layers=2, **ln_cfg), [high] * len(report_seeds), report_seeds, iters, device
            )
        )

        min_tied, spec_tied = _min_eigenvalue(True, high)
        min_untied, spec_untied = _min_eigenvalue(False, high)

    h_high, r_high = high.unigram_entropy(), high.entropy_rate()
    h_asym, r_low = asym.unigram_entropy(), low.entropy_rate()
    pred = predicted_curvatures(high)

    def excess(runs: list[dict[str, float]], reference: str) -> float:
        """Mean signed gap to a reference predictor on the same test tokens (baselines)."""
        return sum(r["test_loss"] - r[reference] for r in runs) / len(runs)

    # Gates compare the model with the reference predictor (unigram / true chain) on the same test tokens:
    # 256 x 128 test tokens put about ±0.005 nats of sampling noise on the test set's own entropy, so
    # |test loss - rate| can exceed 0.01 even for a model that equals the chain (the note prints both).
    uni, chn = "test_unigram_loss", "test_chain_loss"
    base_uni = "baseline: untied, mean loss - unigram loss on the same tokens"
    base_rate = "baseline: tied p=q=0.8, mean loss - chain loss on the same tokens"
    claims = {
        "tied_stuck_unigram": Measurement(
            ours=_gap(tied_high, uni),
            baseline=excess(untied_high, uni),
            holds=_gap(tied_high, uni) <= tol,
            note=f"p=q=0.8, {k} seed(s), tol {tol}; {_gap_note(tied_high, uni, h_high, 'H(pi)')}; {base_uni}",
        ),
        "tied_stuck_unigram_asym": Measurement(
            ours=_gap(tied_asym, uni),
            baseline=excess(untied_asym, uni),
            holds=_gap(tied_asym, uni) <= tol,
            note=f"p=0.5, q=0.8, tol {tol}; {_gap_note(tied_asym, uni, h_asym, 'H(pi)')}; {base_uni}",
        ),
        "untied_reaches_bigram": Measurement(
            ours=_gap(untied_high, chn),
            baseline=excess(tied_high, chn),
            holds=_gap(untied_high, chn) <= tol,
            note=f"p=q=0.8, tol {tol}; {_gap_note(untied_high, chn, r_high, 'rate')}; {base_rate}",
        ),
        "low_switching_reaches_bigram": Measurement(
            ours=_gap(tied_low, chn),
            baseline=excess(tied_high, chn),
            holds=_gap(tied_low, chn) <= tol,
            note=f"tied p=q=0.2, tol {tol}; {_gap_note(tied_low, chn, r_low, 'rate')}; {base_rate}",
        ),
        "unigram_hessian": Measurement(
            ours=min_tied,
            baseline=min_untied,
            holds=min_tied >= -1e-8 and min_untied < -1e-6,
            note=(
                f"exact Hessian at theta_pi, d=2, N=5, p=q=0.8; tied spectrum {spec_tied}, untied {spec_untied}; "
                f"predicted 2pq(p+q-1)/(p+q)^2={pred['tied_e']:.5f}, +-c={pred['untied_c']:.5f}"
            ),
        ),
        "deeper_reaches_bigram": Measurement(
            ours=excess(two_layer, chn),
            baseline=excess(tied_high, chn),
            note="2-layer tied theory model (no LN), p=q=0.8, mean loss - chain loss on the test tokens; base: 1 layer",
        ),
        "layernorm_reaches_bigram": Measurement(
            ours=excess(ln_one, chn),
            baseline=excess(tied_high, chn),
            note=f"{OFFICIAL_LN}, 1 layer, p=q=0.8, mean loss - chain loss on the test tokens; baseline: tied model",
        ),
    }
    extra: dict[str, Any] = {
        "architecture": ARCHITECTURE,
        "report_only_architecture": OFFICIAL_LN,
        "iters": iters,
        "seeds": seeds,
        "tolerance": tol,
        "references": {
            "p=q=0.8": {"unigram_entropy": h_high, "entropy_rate": r_high},
            "p=0.5,q=0.8": {"unigram_entropy": h_asym, "entropy_rate": asym.entropy_rate()},
            "p=q=0.2": {"unigram_entropy": low.unigram_entropy(), "entropy_rate": r_low},
        },
        "test_losses": {
            "tied p=q=0.8": _losses(tied_high),
            "tied p=0.5,q=0.8": _losses(tied_asym),
            "tied p=q=0.2": _losses(tied_low),
            "untied p=q=0.8": _losses(untied_high),
            "untied p=0.5,q=0.8": _losses(untied_asym),
            "2-layer tied p=q=0.8 (no LN)": _losses(two_layer),
            "official LN 1-layer p=q=0.8": _losses(ln_one),
            "official LN 2-layer p=q=0.8": _losses(ln_two),
        },
        "reference_losses_on_test_tokens": {
            name: [{"chain": r[chn], "unigram": r[uni]} for r in runs]
            for name, runs in (
                ("tied p=q=0.8", tied_high),
                ("tied p=0.5,q=0.8", tied_asym),
                ("tied p=q=0.2", tied_low),
                ("untied p=q=0.8", untied_high),
                ("untied p=0.5,q=0.8", untied_asym),
            )
        },
        "hessian_spectrum_nonzero": {"tied p=q=0.8": spec_tied, "untied p=q=0.8": spec_untied},
    }
    out.mkdir(parents=True, exist_ok=True)
    save_json(out / "markov_transformer_losses.json", extra)
    log.info("markov_transformer: %s", extra["test_losses"])
    return Outcome(claims=claims, extra=extra)


experiment = Experiment("markov_transformer", run)
