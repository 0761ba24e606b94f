"""Multi-step GIF encoder forward+backward: fused Triton kernel vs the torch time loop.

Usage::

    python benchmarks/spiking_gif.py                                # CUDA: B=2048 rows, N=4096, L=4, S=8
    python benchmarks/spiking_gif.py --drive constant --reset hard  # the other drive / reset
    python benchmarks/spiking_gif.py --device cpu --B 4 --N 37 --interpret   # exercises the kernel on CPU

The workload is SpikeLLM's activation coding: ``GIFNeuron(levels, steps, v_th=per-channel θ,
learn_threshold=True)`` on a ``(B, N)`` activation, then ``decode`` and a backward into both the
activation and θ. Prints the median time per forward+backward of each path and the torch-loop /
Triton ratio measured in this run. The kernel needs CUDA; without it the script says so and exits
cleanly (``--device cpu`` times the torch loop alone, ``--interpret`` adds the kernel in Triton's
CPU interpreter, tiny sizes only: its time says nothing about the GPU).
"""

from __future__ import annotations

import argparse
import os
import sys


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--B", type=int, default=2048, help="rows (tokens) of the activation")
    parser.add_argument("--N", type=int, default=4096, help="channels; θ is per channel")
    parser.add_argument("--levels", type=int, default=4)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--drive", choices=["initial", "constant"], default="initial")
    parser.add_argument("--reset", choices=["soft", "hard"], default="soft")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (1 avoids contention)")
    parser.add_argument("--interpret", action="store_true", help="run the Triton kernel in the CPU interpreter")
    args = parser.parse_args()
    if args.interpret:
        os.environ["TRITON_INTERPRET"] = "1"  # before the kernels module is imported

    import torch

    from iclr25.core.bench import time_call
    from iclr25.neuro.spiking import GIFNeuron

    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("spiking_gif: CUDA is not available here, skipping the Triton vs torch-loop benchmark (it needs a GPU);")
        print("  use --device cpu to time the torch loop, or --device cpu --interpret for a tiny kernel smoke run")
        return 0
    if device.type == "cpu":
        torch.set_num_threads(args.threads)
    gen = torch.Generator(device=device).manual_seed(0)
    x = torch.randn(args.B, args.N, generator=gen, device=device) * 1.5
    theta = torch.rand(args.N, generator=gen, device=device) * 0.5 + 0.25

    def ours(backend: str):
        neuron = GIFNeuron(
            args.levels,
            args.steps,
            v_th=theta,
            reset=args.reset,
            drive=args.drive,
            learn_threshold=True,
            backend=backend,
            validate=False,
        ).to(device)

        def step() -> None:
            xs = x.detach().requires_grad_()
            neuron.decode(neuron(xs)).sum().backward()
            neuron.v_th.grad = None

        return step

    def timeit(fn) -> float:
        # one warm-up call compiles the kernel
        return time_call(fn, device=device, warmup=1, repeats=args.repeats).median

    rows = {"torch loop (reference)": timeit(ours("reference"))}
    if device.type == "cuda" or args.interpret:
        rows["triton fused kernel"] = timeit(ours("triton"))

    base = rows["torch loop (reference)"]
    print(
        f"GIF encode fwd+bwd (x and per-channel θ), B={args.B} N={args.N} levels={args.levels} "
        f"steps={args.steps} drive={args.drive} reset={args.reset}, device={device}, median of {args.repeats}"
    )
    for name, sec in rows.items():
        print(f"  {name:<26} {sec * 1e3:9.2f} ms   torch-loop/this = {base / sec:6.2f}x")
    if "triton fused kernel" in rows:
        ratio = base / rows["triton fused kernel"]
        where = "" if device.type == "cuda" else " (CPU interpreter: not a GPU figure)"
        print(f"triton speed-up over the torch loop: {ratio:.2f}x{where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
