"""Small-scale reproduction: members injected into a word-level ``nano`` TinyLlama on Shakespeare.

Setting (the method note's, measured on CPU): the 37 plays are split by document into 33 training
and 4 held-out plays. A :class:`WordTokenizer` (top-2000 words + ``<unk>``, fitted on the
training plays) feeds a ``nano`` TinyLlama (d = 64, 2 layers) trained 600 steps (300 in
``--quick``) on the training plays. From the held-out plays we cut 2N non-overlapping passages of
32 tokens; a member-split seed picks N members, the other N are non-members. Members are injected
by continued training (:func:`inject_members`: 8 general windows + 8 members per step, each member
seen E times), then Loss, Zlib, Min-K% and Min-K%++ (k = 20 %, 50 %) are evaluated by AUROC on the
same 2N passages. Every method scores the same model and passages: the baselines share the run.

Full: N = 200, E ∈ {2, 4, 8}, member-split seeds {seed, seed + 1} (means compared), plus a
report-only byte-level run (ByteTokenizer, 96-byte passages, E = 4). ``--quick``: N = 100, E = 4,
one split seed.
"""

from __future__ import annotations

import copy
import logging
import time
from pathlib import Path

import numpy as np
import torch

from iclr25.core.device import cpu_threads
from iclr25.core.experiments import Experiment, Measurement, Outcome
from iclr25.core.io import save_json
from iclr25.core.seed import seed_everything
from iclr25.llm.lm import ByteTokenizer, TinyLlama, TinyLlamaConfig, shakespeare, split_documents, train_lm

from .harness import inject_members, sample_passages
from .metrics import mia_metrics
from .scores import score_all
from .tokenizer import WordTokenizer

log = logging.getLogger(__name__)

NON_PLAYS = ("lovers_complaint", "passionate_pilgrim", "phoenix_and_the_turtle", "rape_of_lucrece", "sonnets")
KS = (0.2, 0.5)


def _plays() -> tuple[dict[str, str], dict[str, str]]:
    plays = {t: s for t, s in shakespeare().items() if t not in NON_PLAYS}
    return split_documents(plays, val_frac=0.1, seed=0)


def _base_model(tok, train: dict[str, str], steps: int, seq_len: int, seed: int, device) -> tuple:
    stream = torch.cat([tok.encode(t) for t in train.values()])
    torch.manual_seed(seed)
    cfg = TinyLlamaConfig.preset("nano", vocab_size=tok.vocab_size, max_seq_len=max(seq_len, 128))
    model = TinyLlama(cfg).to(device)
    hist = train_lm(model, stream, steps=steps, batch_size=16, seq_len=seq_len, lr=3e-3, seed=seed, log_every=0)
    return model, stream, hist


@torch.no_grad()
def _val_loss(model, streams, seq_len: int, device) -> float:
    wins = [s[i : i + seq_len + 1] for s in streams for i in range(0, s.numel() - seq_len - 1, seq_len)][:256]
    x = torch.stack(wins).to(device)
    logits = model(x[:, :-1]).logits.float()
    return float(torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1)))


def _mia_run(base, tok, stream, held, n, length, exposures, split_seed, device) -> dict:
    passages = sample_passages(held, 2 * n, length, seed=split_seed)
    g = torch.Generator().manual_seed(split_seed)
    perm = torch.randperm(2 * n, generator=g)
    labels = torch.zeros(2 * n, dtype=torch.long)
    labels[perm[:n]] = 1
    model = copy.deepcopy(base)
    inject_members(model, passages[labels == 1], stream, exposures, seed=split_seed)
    texts = [tok.decode(p) for p in passages]
    scores: dict[str, list] = {}
    for s in range(0, 2 * n, 50):
        out = score_all(model, passages[s : s + 50], texts=texts[s : s + 50], ks=KS)
        for k, v in out.items():
            scores.setdefault(k, []).append(v)
    return {name: round(mia_metrics(torch.cat(v), labels)["auroc"], 4) for name, v in scores.items()}


def run(quick: bool, device, seed: int, out: Path) -> Outcome:
    """Inject members with E exposures, compare Min-K%++ with Loss / Zlib / Min-K% by AUROC."""
    seed_everything(seed)
    device = torch.device(device)
    # nano models: intra-op threading costs more than it saves on 2 cores.
    with cpu_threads(1, device):
        return _run(quick, device, seed, out)


def _run(quick: bool, device: torch.device, seed: int, out: Path) -> Outcome:
    t0 = time.perf_counter()
    cfg = {
        "tokenizer": "word (top-2000 + <unk>)",
        "model": "nano",
        "base_steps": 300 if quick else 600,
        "passage_tokens": 32,
        "n_members": 100 if quick else 200,
        "exposures": [4] if quick else [2, 4, 8],
        "split_seeds": [seed] if quick else [seed, seed + 1],
        "ks": list(KS),
    }
    train, held = _plays()
    tok = WordTokenizer.train(train.values(), vocab_size=2001)
    held_ids = {t: tok.encode(s) for t, s in held.items()}
    cfg["held_out_plays"] = sorted(held)
    cfg["unk_rate_held_out"] = round(float(np.mean([float((v == 0).float().mean()) for v in held_ids.values()])), 4)
    base, stream, hist = _base_model(tok, train, cfg["base_steps"], 64, seed, device)
    cfg["base_train_loss"] = round(float(np.mean(hist["loss"][-20:])), 3)
    cfg["val_loss"] = round(_val_loss(base, list(held_ids.values()), 64, device), 3)
    log.info("base model: val %.3f nats/token, unk %.3f", cfg["val_loss"], cfg["unk_rate_held_out"])

    runs: dict[str, dict] = {}
    for E in cfg["exposures"]:
        for s in cfg["split_seeds"]:
            runs[f"E{E}_s{s}"] = _mia_run(base, tok, stream, held_ids, cfg["n_members"], 32, E, s, device)
            log.info("E=%d split %d: %s", E, s, runs[f"E{E}_s{s}"])
    mean = {
        E: {m: float(np.mean([runs[f"E{E}_s{s}"][m] for s in cfg["split_seeds"]])) for m in runs[f"E{E}_s{seed}"]}
        for E in cfg["exposures"]
    }

    byte_row = None
    if not quick:
        btok = ByteTokenizer()
        bmodel, bstream, _ = _base_model(btok, train, 600, 128, seed, device)
        bheld = {t: btok.encode(s) for t, s in held.items()}
        byte_row = _mia_run(bmodel, btok, bstream, bheld, 200, 96, 4, seed, device)
        log.info("byte-level E=4: %s", byte_row)

    Es = cfg["exposures"]
    gain50 = {E: mean[E]["mink++@0.5"] - mean[E]["mink@0.5"] for E in Es}
    gain50_mean = float(np.mean(list(gain50.values())))
    gated_E = [E for E in Es if E in (4, 8)]
    holds_mink = all(gain50[E] >= 0.02 for E in gated_E) and gain50_mean >= 0.02
    gain_loss = {E: mean[E]["mink++@0.2"] - mean[E]["loss"] for E in Es}
    holds_loss = all(v >= 0.05 for v in gain_loss.values())
    claims = {
        "gain_over_mink": Measurement(
            ours="gain "
            + "/".join(f"{gain50[E]:+.3f}" for E in Es)
            + f" (mean {gain50_mean:+.3f}); Min-K%++ "
            + "/".join(f"{mean[E]['mink++@0.5']:.3f}" for E in Es),
            baseline="Min-K% " + "/".join(f"{mean[E]['mink@0.5']:.3f}" for E in Es),
            holds=holds_mink,
            note=f"AUROC at k=50%, E = {Es}; gate: Min-K%++ >= Min-K% + 0.02 for E in {{4, 8}} and on the mean over E",
        ),
        "gain_over_loss": Measurement(
            ours="Min-K%++ " + "/".join(f"{mean[E]['mink++@0.2']:.3f}" for E in Es),
            baseline="Loss " + "/".join(f"{mean[E]['loss']:.3f}" for E in Es),
            holds=holds_loss,
            note=f"AUROC, Min-K%++ at k=20% vs Loss, E = {Es}; gate: >= Loss + 0.05 for every E",
        ),
        "gain_over_mink_k20": Measurement(
            ours="Min-K%++ " + "/".join(f"{mean[E]['mink++@0.2']:.3f}" for E in Es),
            baseline="Min-K% " + "/".join(f"{mean[E]['mink@0.2']:.3f}" for E in Es),
            note=f"AUROC at the paper's default k=20%, E = {Es} (report only)",
        ),
        "byte_level": Measurement(
            ours=None if byte_row is None else f"Min-K%++ {byte_row['mink++@0.5']:.3f}",
            baseline=None if byte_row is None else f"Min-K% {byte_row['mink@0.5']:.3f}, Loss {byte_row['loss']:.3f}",
            note="byte-level tokens, E=4, 96-byte passages, k=50% (full run only; report only)",
        ),
    }
    extra = {
        "config": cfg,
        "auroc_by_run": runs,
        "auroc_mean_over_splits": {f"E{E}": {k: round(v, 4) for k, v in mean[E].items()} for E in Es},
        "byte_level_E4": byte_row,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    save_json(out / "minkpp_auroc.json", extra)
    return Outcome(claims=claims, extra=extra)


experiment = Experiment("minkpp", run)
