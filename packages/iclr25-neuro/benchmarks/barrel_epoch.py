"""Barrel-cortex RSNN epoch benchmark: fused Triton steps vs the torch step, and the vectorized step vs a
per-population Python loop.

Training epochs (forward + backward + Adam) of `BarrelCortexRSNN` over the same random sweeps:

- vectorized vs loop (any device): the synchronous torch step (one masked matrix product per time
  step, ``backend="reference"``) against ``update="sequential"``, which loops over the 13
  populations inside every step as the official RSNN_bfd script does (issue target >= 5x).
- fused vs plain torch (CUDA only): ``backend="triton"`` (the trainable fused spike-driven step of
  `iclr25.neuro.barrel_cortex.kernels` for the cortex, the multi-step ALIF kernel of
  `iclr25.neuro.spiking` for the thalamus) against ``backend="reference"``, both synchronous:
  seconds per epoch and peak GPU memory of each (issue target >= 2x). One untimed warm-up batch per
  configuration first (8 time steps: Triton compiles and tunes on first use). A second fused row
  computes ``s @ W`` with cuBLAS instead of inside the spike-driven kernel (same backward).
- inference (CUDA only): one no-grad pass, fused vs torch, and whether the first batch's spikes
  are identical (they can differ where ``v - B`` is within float rounding of 0, and a flipped spike
  then propagates through the recurrence).

All ratios are measured in this one run. GPU: ``python benchmarks/barrel_epoch.py --device cuda``
(full scale: N = 4218, T = 550, batch 128, 256 sweeps = 2 batches); on CPU run small sizes, e.g.
``--scale 0.05 --steps 20 --batch 8 --sweeps 16`` (the fused rows are skipped there).
"""

from __future__ import annotations

import argparse
import functools
import time

import torch

from iclr25.neuro.barrel_cortex import BarrelCortexRSNN, kernels


def _data(args: argparse.Namespace) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    x = (torch.rand(args.sweeps, 2, args.steps, 93, generator=gen) < 0.1).float()
    y = torch.randint(0, 3, (args.sweeps,), generator=gen)
    return x, y


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def train_epoch(backend: str, update: str, args: argparse.Namespace, device: torch.device) -> tuple[float, int]:
    """Seconds for one training epoch and its peak allocated GPU bytes (0 on CPU)."""
    model = BarrelCortexRSNN(scale=args.scale, update=update, seed=0, backend=backend).to(device)
    opt = torch.optim.Adam(model.param_groups(0.008))
    x, y = _data(args)
    batches = [
        (x[i : i + args.batch].to(device), y[i : i + args.batch].to(device)) for i in range(0, len(x), args.batch)
    ]

    # untimed warm-up on 8 time steps: compiles (and tunes) the kernels, which depend on batch and N only
    warm = (batches[0][0][:, :, : min(8, args.steps)], batches[0][1])
    for i, (xb, yb) in enumerate([warm, *batches]):
        if i == 1:
            _sync(device)
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(device)
            start = time.perf_counter()
        loss = model.loss(model(xb), yb)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    _sync(device)
    seconds = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else 0
    del model, opt, batches
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return seconds, peak


def inference_seconds(backend: str, args: argparse.Namespace, device: torch.device) -> tuple[float, torch.Tensor]:
    model = BarrelCortexRSNN(scale=args.scale, seed=0, backend=backend).to(device)
    x = _data(args)[0].to(device)
    with torch.no_grad():
        _, first = model(x[: args.batch], record=True)  # warm-up (compiles the kernel); spikes to compare
        _sync(device)
        start = time.perf_counter()
        for i in range(0, args.sweeps, args.batch):
            model(x[i : i + args.batch])
        _sync(device)
    return time.perf_counter() - start, first


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--steps", type=int, default=550, help="time steps T (110 frames x dt = 5)")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--sweeps", type=int, default=256, help="training sweeps in the epoch")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--skip-loop", action="store_true", help="skip the per-population loop (slowest row)")
    args = parser.parse_args()
    device = torch.device(args.device)
    torch.backends.cuda.matmul.allow_tf32 = False  # both backends in full fp32 (the kernel's dot is ieee fp32)
    print(f"device={device} scale={args.scale} T={args.steps} batch={args.batch} sweeps={args.sweeps}")
    vec, vec_mem = train_epoch("reference", "synchronous", args, device)
    mem = f"  peak {vec_mem / 2**30:6.2f} GiB" if device.type == "cuda" else ""
    print(f"training, torch vectorized step:   {vec:8.2f} s/epoch{mem}")
    if not args.skip_loop:
        loop, _ = train_epoch("reference", "sequential", args, device)
        print(f"training, per-population loop:     {loop:8.2f} s/epoch")
        print(f"ratio loop/vectorized:             {loop / vec:8.2f}x  (training; target >= 5x)")
    if device.type != "cuda":
        print("fused Triton steps: not measured (needs CUDA)")
        return
    fused, fused_mem = train_epoch("triton", "synchronous", args, device)
    print(f"training, fused Triton steps:      {fused:8.2f} s/epoch  peak {fused_mem / 2**30:6.2f} GiB")
    print(f"ratio torch/fused:                 {vec / fused:8.2f}x  (training; target >= 2x)")
    print(f"peak memory ratio torch/fused:     {vec_mem / max(fused_mem, 1):8.2f}x")
    # the same fused ALIF steps and backward, with s @ W by cuBLAS instead of the spike-driven kernel
    # product (the network always uses the default; the module attribute is what it imports)
    spike_driven = kernels.recurrent_alif_triton
    kernels.recurrent_alif_triton = functools.partial(spike_driven, product="dense")
    try:
        dense, dense_mem = train_epoch("triton", "synchronous", args, device)
    finally:
        kernels.recurrent_alif_triton = spike_driven
    print(f"training, fused ALIF + cuBLAS s@W: {dense:8.2f} s/epoch  peak {dense_mem / 2**30:6.2f} GiB")
    print(f"ratio torch/(fused, dense s@W):    {vec / dense:8.2f}x")
    torch_s, spikes_torch = inference_seconds("reference", args, device)
    fused_s, spikes_fused = inference_seconds("triton", args, device)
    same = float((spikes_torch == spikes_fused).float().mean())
    print(f"inference, torch step:             {torch_s:8.3f} s/epoch")
    print(f"inference, fused step:             {fused_s:8.3f} s/epoch")
    print(f"ratio torch/fused:                 {torch_s / fused_s:8.2f}x  (inference)")
    print(f"spikes identical (first batch, fraction of entries): {same:.6f}")


if __name__ == "__main__":
    main()
