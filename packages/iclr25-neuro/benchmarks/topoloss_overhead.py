"""TopoLoss training-step overhead on a GPT-2-small-shaped MLP stack (issue 10, Performance).

Model: ``--layers`` residual blocks ``x + c_proj(gelu(c_fc(ln(x))))`` with ``c_fc: d → 4d`` stored
in GPT-2's ``Conv1D`` layout (weight ``(in, out)``), AdamW, a regression loss on random tokens.
TopoLoss (f = 4, τ = 1) on every ``c_fc``. One run measures, with the same model and batch:

* the plain step (no TopoLoss), the step with the batched TopoLoss and with the per-layer path;
* overhead = (step with TopoLoss − plain step) / step with TopoLoss, and the speed-up of the
  batched over the per-layer TopoLoss (forward + backward of the regulariser alone);
* the official ``topoloss`` package on the same model when it is installed (its layer type check
  only accepts ``nn.Linear``/``nn.Conv2d``, so it gets an ``nn.Linear`` twin of the stack).

Targets (GPU, GPT-2 small: ``--d 768 --tokens 8192 --device cuda``): overhead < 5 % of the step
and batched ≥ 2× faster than per-layer. GPU figures cannot be measured on the project's CPU
machines; the CPU defaults are small so that the script finishes in about a minute there, and
CPU ratios say little about a GPU (the step is compute-bound on CPU, launch-bound on GPU).

    python benchmarks/topoloss_overhead.py                      # CPU, d = 192
    python benchmarks/topoloss_overhead.py --d 768 --tokens 8192 --device cuda
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F
from torch import nn

from iclr25.core.bench import time_call
from iclr25.neuro.topoloss import TopoLoss


class Conv1D(nn.Module):
    """GPT-2's layout: weight (in, out), y = x @ W + b (detected by TopoLoss by class name)."""

    def __init__(self, nf: int, nx: int) -> None:
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.randn(nx, nf) * 0.02)
        self.bias = nn.Parameter(torch.zeros(nf))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight).view(*x.shape[:-1], self.nf)


class Block(nn.Module):
    def __init__(self, d: int, linear: bool) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.c_fc = nn.Linear(d, 4 * d) if linear else Conv1D(4 * d, d)
        self.c_proj = nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.c_proj(F.gelu(self.c_fc(self.ln(x))))


def make_model(layers: int, d: int, linear: bool, device: torch.device) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(*[Block(d, linear) for _ in range(layers)]).to(device)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def time_steps(model: nn.Module, reg, x: torch.Tensor, steps: int, warmup: int = 2) -> float:
    """Median seconds per training step (forward, backward, AdamW) with regulariser ``reg(model)``."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step() -> None:
        loss = model(x).pow(2).mean()
        if reg is not None:
            loss = loss + reg(model)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return time_call(step, device=x.device, warmup=warmup, repeats=steps).median


def time_reg(model: nn.Module, reg, steps: int, device: torch.device, warmup: int = 2) -> float:
    """Median seconds of the regulariser alone (forward + backward)."""
    times = []
    for i in range(warmup + steps):
        model.zero_grad(set_to_none=True)
        sync(device)
        t0 = time.perf_counter()
        reg(model).backward()
        sync(device)
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--d", type=int, default=192, help="model width (GPT-2 small: 768)")
    parser.add_argument("--tokens", type=int, default=1024, help="tokens per step (batch × sequence)")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--factor", type=float, default=4.0)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=0, help="torch threads on CPU (0: leave as is)")
    args = parser.parse_args()
    device = torch.device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    x = torch.randn(args.tokens, args.d, device=device)
    model = make_model(args.layers, args.d, linear=False, device=device)
    batched = TopoLoss.from_pattern(model, r"c_fc$", factor=args.factor, tau=1.0, batched=True)
    single = TopoLoss.from_pattern(model, r"c_fc$", factor=args.factor, tau=1.0, batched=False)

    plain = time_steps(model, None, x, args.steps)
    with_batched = time_steps(model, batched, x, args.steps)
    with_single = time_steps(model, single, x, args.steps)
    reg_batched = time_reg(model, batched, args.steps, device)
    reg_single = time_reg(model, single, args.steps, device)
    hw = batched.sheets(model)[batched.layers[0].key].shape
    print(f"{args.layers} x c_fc {args.d}->{4 * args.d} (sheet {tuple(hw)}), {args.tokens} tokens, {device}")
    print(f"plain step                  {plain * 1e3:9.2f} ms")
    over_b, over_s = (with_batched - plain) / with_batched, (with_single - plain) / with_single
    print(f"step + batched TopoLoss     {with_batched * 1e3:9.2f} ms   overhead {over_b:7.2%}")
    print(f"step + per-layer TopoLoss   {with_single * 1e3:9.2f} ms   overhead {over_s:7.2%}")
    print(
        f"TopoLoss fwd+bwd: batched {reg_batched * 1e3:.2f} ms, per-layer {reg_single * 1e3:.2f} ms, "
        f"batched speed-up {reg_single / reg_batched:.2f}x"
    )
    try:
        from topoloss import LaplacianPyramid
        from topoloss import TopoLoss as OfficialTopoLoss
    except ImportError:
        print("official topoloss package: not installed (pip install topoloss), not measured")
        return
    twin = make_model(args.layers, args.d, linear=True, device=device)
    official = OfficialTopoLoss(
        losses=[
            LaplacianPyramid(layer_name=f"{i}.c_fc", factor_h=args.factor, factor_w=args.factor, scale=1.0)
            for i in range(args.layers)
        ]
    )

    def official_reg(m: nn.Module) -> torch.Tensor:
        return official.compute(model=m, reduce_mean=True)

    plain_twin = time_steps(twin, None, x, args.steps)
    with_official = time_steps(twin, official_reg, x, args.steps)
    reg_official = time_reg(twin, official_reg, args.steps, device)
    print(
        f"official (nn.Linear twin)   {with_official * 1e3:9.2f} ms   overhead "
        f"{(with_official - plain_twin) / with_official:7.2%}; fwd+bwd {reg_official * 1e3:.2f} ms, "
        f"ours batched is {reg_official / reg_batched:.2f}x faster"
    )


if __name__ == "__main__":
    main()
