"""Model-level 1-bit PTQ: layer-sequential calibration of every linear layer in the decoder blocks.

Works on :class:`~iclr25.llm.lm.TinyLlama` and HF causal LMs (LLaMA, OPT, GPT-2 ``Conv1D``); the
LM head and embeddings are never touched. The input model is left unchanged: a copy is
quantized and returned.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

import torch
from torch import nn

from iclr25.core.device import compute_dtype
from iclr25.llm.lm.surgery import iter_linears, replace_linears, sequential_ptq

from .layer import BinarizedLinear
from .quantizer import ARBConfig, ARBQuantizer, LayerResult, pbllm_quantize

__all__ = ["ARBReport", "arb_quantize_model", "billm_quantize_model", "pbllm_quantize_model"]

log = logging.getLogger(__name__)


@dataclass
class ARBReport:
    """What a model-level binarization did.

    Attributes
    ----------
    method : str
    avg_bits : float
        Bits per weight over all binarized layers, bitmaps and fp16 scales included.
    layer_errors : dict
        ``{name: {"weight": ‖W − Ŵ‖², "output": tr(R S Rᵀ) = ‖(W − Ŵ)Xᵀ‖²/N}}`` against the
        layer's weights and calibration inputs at the time it was binarized.
    layer_bits : dict
        ``{name: bits}``.
    seconds : float
    """

    method: str
    avg_bits: float = 0.0
    layer_errors: dict = field(default_factory=dict)
    layer_bits: dict = field(default_factory=dict)
    seconds: float = 0.0


def _weight(m: nn.Module) -> torch.Tensor:
    return m.weight if isinstance(m, nn.Linear) else m.weight.t()


def _set_weight(m: nn.Module, W: torch.Tensor) -> None:
    with torch.no_grad():
        m.weight.copy_(W if isinstance(m, nn.Linear) else W.t())


def _run_ptq(model: nn.Module, calib_batches: Iterable, quantize_fn, method: str, pack: bool):
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module; got {type(model).__name__}")
    if not isinstance(calib_batches, Iterable):
        raise TypeError(f"calib_batches must be an iterable of token-id batches; got {type(calib_batches).__name__}")
    calib = list(calib_batches)
    if not calib:
        raise ValueError("calib_batches is empty: binarization needs calibration inputs")
    t0 = time.perf_counter()
    qmodel = copy.deepcopy(model)  # the caller's model stays unchanged even if a layer fails
    results: dict[str, LayerResult] = {}
    offsets = {id(m): n for n, m in qmodel.named_modules()}

    def quantize_layer(i: int, block: nn.Module, run):
        lins = list(iter_linears(block))
        sums = {n: None for n, _ in lins}
        counts = dict.fromkeys(sums, 0)

        def hook_for(n):
            def hook(_m, args):
                x = args[0].detach()
                x = x.to(compute_dtype(x)).reshape(-1, x.shape[-1])
                sums[n] = x.t() @ x if sums[n] is None else sums[n] + x.t() @ x
                counts[n] += x.shape[0]

            return hook

        handles = [m.register_forward_pre_hook(hook_for(n)) for n, m in lins]
        try:
            run()
        finally:
            for h in handles:
                h.remove()
        for n, m in lins:
            if not counts[n]:
                raise ValueError(f"no calibration inputs reached {offsets[id(block)]}.{n}")
            H = 2.0 / counts[n] * sums[n]
            res = quantize_fn(_weight(m).detach(), H)
            _set_weight(m, res.W_hat)
            results[f"{offsets[id(block)]}.{n}"] = res
            log.info("%s %s.%s: weight error %.4g", method, offsets[id(block)], n, res.weight_error)

    sequential_ptq(qmodel, quantize_layer, calib)
    if pack:
        mods = dict(qmodel.named_modules())
        replace_linears(qmodel, lambda n, m: BinarizedLinear.from_result(mods[n], results[n]), include=list(results))
    n_w = sum(r.W_hat.numel() for r in results.values())
    report = ARBReport(
        method=method,
        avg_bits=sum(r.bits for r in results.values()) / max(n_w, 1),
        layer_errors={n: {"weight": r.weight_error, "output": r.output_error} for n, r in results.items()},
        layer_bits={n: r.bits for n, r in results.items()},
        seconds=time.perf_counter() - t0,
    )
    return qmodel, report


def arb_quantize_model(
    model: nn.Module, calib_batches: Iterable, config: ARBConfig | None = None, pack: bool = True
) -> tuple[nn.Module, ARBReport]:
    """Binarize every linear layer of the decoder blocks with ARB-LLM.

    Parameters
    ----------
    model : nn.Module
        TinyLlama or a HF causal LM; not modified.
    calib_batches : iterable of (batch, seq) long tensors
        Calibration token ids (paper: 128 × 2048 tokens).
    config : ARBConfig, optional
        ``method`` picks ARB / ARB-X / ARB-RC (``"plain"`` is BiLLM).
    pack : bool
        Replace the linears by :class:`BinarizedLinear` (else keep ``nn.Linear`` with Ŵ).

    Returns
    -------
    (nn.Module, ARBReport)
    """
    cfg = config or ARBConfig()
    q = ARBQuantizer(cfg)
    return _run_ptq(model, calib_batches, q.quantize, cfg.method, pack)


def billm_quantize_model(
    model: nn.Module, calib_batches: Iterable, config: ARBConfig | None = None, pack: bool = True
) -> tuple[nn.Module, ARBReport]:
    """BiLLM baseline: the same partition and feedback as :func:`arb_quantize_model`, plain binarizer."""
    if config is not None and not isinstance(config, ARBConfig):
        raise TypeError(f"config must be an ARBConfig; got {type(config).__name__}")
    cfg = replace(config or ARBConfig(), method="plain")
    return _run_ptq(model, calib_batches, ARBQuantizer(cfg).quantize, "plain", pack)


def pbllm_quantize_model(
    model: nn.Module,
    calib_batches: Iterable,
    salient_frac: float = 0.1,
    salient_bits: int = 8,
    blocksize: int = 128,
    percdamp: float = 0.01,
) -> tuple[nn.Module, ARBReport]:
    """PB-LLM baseline: 10% salient weights at 8 bit, the rest binary, GPTQ feedback (weights in ``nn.Linear``)."""

    def fn(W, H):
        return pbllm_quantize(W, H, salient_frac, salient_bits, blocksize, percdamp)

    return _run_ptq(model, calib_batches, fn, "pbllm", pack=False)
