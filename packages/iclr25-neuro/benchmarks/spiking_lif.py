"""Multi-step LIF forward+backward: fused Triton kernel vs the torch time loop (and snnTorch ``Leaky``).

Usage::

    python benchmarks/spiking_lif.py --device cuda              # T=64, B=32, N=4096 (the issue's setting)
    python benchmarks/spiking_lif.py --device cpu --N 256       # the torch loop (and snnTorch) only

Prints the median time per forward+backward of each path and the ratios measured in this run. The
Triton kernel needs CUDA (target: >= 5x over the torch loop); on CPU it would run in Triton's
interpreter, so it is skipped there unless ``--interpret`` is given (tiny sizes only). GPU figures
cannot be measured on the development machine (no GPU); run this on one. snnTorch is not a
dependency: its row appears when it is installed.
"""

from __future__ import annotations

import argparse
import os


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--T", type=int, default=64)
    parser.add_argument("--B", type=int, default=32)
    parser.add_argument("--N", type=int, default=4096)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (1 avoids contention)")
    parser.add_argument("--interpret", action="store_true", help="run the Triton kernel in the CPU interpreter")
    args = parser.parse_args()
    if args.interpret:
        os.environ["TRITON_INTERPRET"] = "1"  # before the kernels module is imported

    import torch

    from iclr25.core.bench import time_call
    from iclr25.neuro.spiking import LIFState, lif_multistep

    device = torch.device(args.device)
    if device.type == "cpu":
        torch.set_num_threads(args.threads)
    gen = torch.Generator(device=device).manual_seed(0)
    x = torch.randn(args.T, args.B, args.N, generator=gen, device=device) * 0.7 + 0.3
    tau = 10.0

    def ours(backend: str):
        def step() -> None:
            xs = x.detach().requires_grad_()
            s, st = lif_multistep(
                xs, LIFState(torch.zeros_like(x[0])), tau_m=tau, input_scale="none", backend=backend, validate=False
            )
            (s.sum() + st.v.sum()).backward()

        return step

    def timeit(fn) -> float:
        # one warm-up call compiles the kernel
        return time_call(fn, device=device, warmup=1, repeats=args.repeats).median

    rows = {"torch loop (reference)": timeit(ours("reference"))}
    if device.type == "cuda" or args.interpret:
        rows["triton fused kernel"] = timeit(ours("triton"))
    try:
        import snntorch as snn

        alpha = float(torch.exp(torch.tensor(-1.0 / tau)))
        leaky = snn.Leaky(beta=alpha, threshold=1.0, reset_mechanism="subtract").to(device)

        def snn_step() -> None:
            xs = x.detach().requires_grad_()
            mem = torch.zeros_like(x[0])
            total = 0.0
            for k in range(args.T):
                spk, mem = leaky(xs[k], mem)
                total = total + spk.sum()
            (total + mem.sum()).backward()

        rows["snnTorch Leaky (python loop)"] = timeit(snn_step)
    except ImportError:
        pass

    base = rows["torch loop (reference)"]
    print(f"multi-step LIF fwd+bwd, T={args.T} B={args.B} N={args.N}, device={device}, median of {args.repeats}")
    for name, sec in rows.items():
        print(f"  {name:<30} {sec * 1e3:9.2f} ms   torch-loop/this = {base / sec:6.2f}x")
    if "triton fused kernel" in rows and device.type == "cuda":
        ratio = base / rows["triton fused kernel"]
        print(f"triton speed-up over the torch loop: {ratio:.2f}x (target >= 5x): {'met' if ratio >= 5 else 'NOT met'}")


if __name__ == "__main__":
    main()
