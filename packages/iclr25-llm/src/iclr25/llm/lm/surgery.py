"""Model surgery and calibration that work unchanged on TinyLlama and Hugging Face causal LMs.

Linear layers are found by type (``nn.Linear`` and GPT-2's ``Conv1D``, recognised by name so
``transformers`` is never imported), named by their qualified module path, and replaced in
place. Calibration statistics come from forward pre-hooks, and :func:`sequential_ptq` walks the
decoder blocks in order so block *i* is calibrated on the outputs of the already-quantized
blocks before it (the GPTQ protocol).
"""

from __future__ import annotations

import contextlib
import fnmatch
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import torch
from torch import nn

from iclr25.core.device import compute_dtype
from iclr25.core.modes import eval_mode

__all__ = [
    "as_linear_weight",
    "capture_inputs",
    "decoder_layers",
    "hessians",
    "is_linear",
    "iter_linears",
    "replace_linears",
    "sequential_ptq",
]


def is_linear(module: nn.Module) -> bool:
    """True for ``nn.Linear`` and for HF ``Conv1D`` (GPT-2's transposed linear)."""
    if isinstance(module, nn.Linear):
        return True
    return type(module).__name__ == "Conv1D" and hasattr(module, "nf") and getattr(module, "weight", None) is not None


def as_linear_weight(module: nn.Module) -> torch.Tensor:
    """The weight as ``(out_features, in_features)``: ``Conv1D`` stores ``(in, out)`` and is transposed."""
    if isinstance(module, nn.Linear):
        return module.weight
    if is_linear(module):
        return module.weight.t()
    raise TypeError(f"expected nn.Linear or Conv1D; got {type(module).__name__}")


def _matches(name: str, patterns: Iterable[str]) -> bool:
    # a bare pattern ("q_proj", "lm_head") matches as the last path component(s) too
    return any(fnmatch.fnmatchcase(name, p) or fnmatch.fnmatchcase(name, "*." + p) for p in patterns)


def _patterns(arg, name: str) -> tuple[str, ...] | None:
    if arg is None:
        return None
    if isinstance(arg, str):
        return (arg,)
    arg = tuple(arg)
    if not all(isinstance(p, str) for p in arg):
        raise TypeError(f"{name} must be a string or a sequence of strings (fnmatch patterns); got {arg!r}")
    return arg


def iter_linears(
    model: nn.Module, include: Sequence[str] | str | None = None, exclude: Sequence[str] | str | None = ("lm_head",)
) -> Iterator[tuple[str, nn.Module]]:
    """Yield ``(qualified_name, module)`` for every linear layer, in module order.

    Parameters
    ----------
    model : nn.Module
    include : patterns, optional
        Keep only names matching one of these ``fnmatch`` patterns (a bare name such as
        ``"q_proj"`` matches the last path component).
    exclude : patterns, optional
        Skip matching names; by default the LM head, which every method here keeps in high precision.
    """
    inc, exc = _patterns(include, "include"), _patterns(exclude, "exclude") or ()
    seen: set[int] = set()
    for name, m in model.named_modules():
        if not is_linear(m) or id(m) in seen:
            continue
        if inc is not None and not _matches(name, inc):
            continue
        if _matches(name, exc):
            continue
        seen.add(id(m))
        yield name, m


def replace_linears(
    model: nn.Module,
    factory: Callable[[str, nn.Module], nn.Module],
    include: Sequence[str] | str | None = None,
    exclude: Sequence[str] | str | None = ("lm_head",),
) -> dict[str, nn.Module]:
    """Replace linear layers in place with ``factory(name, linear)``; return ``{name: new_module}``.

    All replacements are built before any is installed, so an exception from ``factory`` leaves
    the model untouched.
    """
    if not callable(factory):
        raise TypeError(f"factory must be callable (name, linear) -> nn.Module; got {type(factory).__name__}")
    targets = list(iter_linears(model, include, exclude))
    new: dict[str, nn.Module] = {}
    for name, m in targets:
        out = factory(name, m)
        if not isinstance(out, nn.Module):
            raise TypeError(f"factory returned {type(out).__name__} for {name}; expected an nn.Module")
        new[name] = out
    for name, out in new.items():
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, out)
    return new


def _first_tensor(batch) -> torch.Tensor:
    if isinstance(batch, torch.Tensor):
        return batch
    if isinstance(batch, dict):
        return batch["input_ids"]
    if isinstance(batch, tuple | list) and batch and isinstance(batch[0], torch.Tensor):
        return batch[0]
    raise TypeError(
        f"calibration batches must be tensors, (inputs, targets) pairs or dicts; got {type(batch).__name__}"
    )


def _device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


def _run(model: nn.Module, batch) -> None:
    ids = _first_tensor(batch).to(_device(model))
    model(ids, use_cache=False)


def _run_hooked(model: nn.Module, mods: dict[str, nn.Module], hook_for, batches: Iterable) -> None:
    """Run ``batches`` through ``model`` in eval mode with ``hook_for(name)`` as each module's
    forward pre-hook; hooks are removed and the training flag restored even on error."""
    handles = [m.register_forward_pre_hook(hook_for(n)) for n, m in mods.items()]
    try:
        with eval_mode(model), torch.no_grad():
            for b in batches:
                _run(model, b)
    finally:
        for h in handles:
            h.remove()


def _resolve(model: nn.Module, names: Sequence[str]) -> dict[str, nn.Module]:
    if isinstance(names, str):
        names = [names]
    mods = dict(model.named_modules())
    missing = [n for n in names if n not in mods]
    if missing:
        raise ValueError(f"names not found in the model: {missing}")
    return {n: mods[n] for n in names}


def capture_inputs(
    model: nn.Module, names: Sequence[str], batches: Iterable, max_rows: int = 4096
) -> dict[str, torch.Tensor]:
    """Inputs seen by the named modules: ``{name: (rows, in_features) tensor}``, at most ``max_rows`` rows.

    Leading dimensions (batch, sequence) are flattened into rows; later rows are dropped once
    ``max_rows`` is reached, so memory stays bounded.
    """
    mods = _resolve(model, names)
    rows: dict[str, list[torch.Tensor]] = {n: [] for n in mods}
    counts = dict.fromkeys(mods, 0)

    def hook_for(n: str):
        def hook(_m, args):
            if counts[n] >= max_rows:
                return
            x = args[0].detach()
            x = x.reshape(-1, x.shape[-1])[: max_rows - counts[n]]
            rows[n].append(x.cpu())
            counts[n] += x.shape[0]

        return hook

    _run_hooked(model, mods, hook_for, batches)
    return {n: torch.cat(r) if r else torch.empty(0) for n, r in rows.items()}


def hessians(model: nn.Module, names: Sequence[str], batches: Iterable) -> dict[str, torch.Tensor]:
    """GPTQ proxy Hessians ``H = (2/n) Σ x xᵀ`` of each named layer's inputs, accumulated in fp32
    (fp64 for fp64 inputs).

    Returns
    -------
    dict
        ``{name: (in_features, in_features) float32 tensor}`` (float64 for a float64 model) on the
        model's device; ``n`` counts input rows (batch × sequence).
    """
    mods = _resolve(model, names)
    sums: dict[str, torch.Tensor] = {}
    counts = dict.fromkeys(mods, 0)

    def hook_for(n: str):
        def hook(_m, args):
            x = args[0].detach()
            x = x.to(compute_dtype(x)).reshape(-1, x.shape[-1])
            sums[n] = sums[n] + x.t() @ x if n in sums else x.t() @ x
            counts[n] += x.shape[0]

        return hook

    _run_hooked(model, mods, hook_for, batches)
    missing = [n for n in mods if counts[n] == 0]
    if missing:
        raise ValueError(f"no inputs reached {missing}: are batches empty or the names unused in forward?")
    return {n: 2.0 / counts[n] * s for n, s in sums.items()}


def decoder_layers(model: nn.Module) -> nn.ModuleList:
    """The list of decoder blocks: ``model.layers`` (TinyLlama, LLaMA, Mistral …), ``transformer.h``
    (GPT-2) or ``model.decoder.layers`` (OPT)."""
    for path in ("model.layers", "transformer.h", "model.decoder.layers", "gpt_neox.layers", "layers"):
        try:
            mod = model.get_submodule(path)
        except AttributeError:
            continue
        if isinstance(mod, nn.ModuleList):
            return mod
    raise TypeError(
        f"cannot find the decoder blocks of {type(model).__name__} (tried model.layers, transformer.h, ...)"
    )


class _Stop(Exception):
    pass


def sequential_ptq(
    model: nn.Module,
    quantize_layer: Callable[[int, nn.Module, Callable[[], list[torch.Tensor]]], Any],
    calib_batches: Iterable,
) -> list[Any]:
    """Layer-by-layer post-training quantization (the GPTQ / BiLLM / ARB protocol).

    The inputs of block 0 are captured once; then for each block *i*,
    ``quantize_layer(i, block, run)`` is called, where ``run()`` feeds the current calibration
    inputs through ``block`` and returns its outputs (the callback hooks the block's linears,
    calls ``run()`` to collect statistics, and quantizes in place). Afterwards the (now
    quantized) block is run once more and its outputs become the inputs of block *i + 1*.

    Parameters
    ----------
    model : nn.Module
        TinyLlama or a HF causal LM (LLaMA-like, GPT-2, OPT).
    quantize_layer : callable
        ``(layer_index, block, run) -> anything``; its return values are collected.
    calib_batches : iterable
        Token-id tensors ``(batch, seq)`` (or ``(inputs, targets)`` pairs).

    Returns
    -------
    list
        ``quantize_layer``'s return value for each block.
    """
    blocks = decoder_layers(model)
    captured: list[tuple[tuple, dict]] = []

    def catch(_m, args, kwargs):
        captured.append((args, kwargs))
        raise _Stop

    handle = blocks[0].register_forward_pre_hook(catch, with_kwargs=True)
    results = []
    with eval_mode(model):
        try:
            with torch.no_grad():
                for b in calib_batches:
                    with contextlib.suppress(_Stop):
                        _run(model, b)
            handle.remove()
            if not captured:
                raise ValueError("calib_batches is empty")

            def with_hidden(args, kwargs, h):
                # the block's hidden states come positionally (TinyLlama, GPT-2) or by keyword (some HF)
                return ((h, *args[1:]), kwargs) if args else (args, {**kwargs, "hidden_states": h})

            def forward_all(block: nn.Module) -> list[torch.Tensor]:
                outs = []
                with torch.no_grad():
                    for args, kwargs in captured:
                        out = block(*args, **kwargs)
                        outs.append(out[0] if isinstance(out, tuple) else out)
                return outs

            for i, block in enumerate(blocks):
                results.append(quantize_layer(i, block, lambda block=block: forward_all(block)))
                outs = forward_all(block)
                captured = [with_hidden(a, k, h) for (a, k), h in zip(captured, outs, strict=True)]
        finally:
            handle.remove()
    return results
