"""UNet2D forward+backward: fused Triton GroupNorm+FiLM+SiLU vs plain torch (and diffusers if installed).

    python benchmarks/core_unet.py                      # GPU setting: ch=128, 64x64, batch 64
    python benchmarks/core_unet.py --size 16 --batch 4 --ch 32 --device cpu --iters 3

Prints, measured in this one run (plain eager PyTorch, no torch.compile):

1. the isolated op SiLU(GroupNorm(x) (1 + scale) + shift) forward+backward at the UNet's largest
   activation (batch, ch, size, size): time per call and peak memory, fused vs torch, and the
   largest difference of output and gradients between the two (a check of the compiled kernel);
2. one top-level ResBlock (ch -> ch at size x size) forward+backward, both backends;
3. the whole UNet2D training step (forward + backward of a mean-square loss): time and peak memory
   with every ResBlock pre-activation on the torch reference vs the fused kernel;
4. our torch UNet vs diffusers ``UNet2DModel`` of equal width when diffusers is installed (it is
   not a dependency).

The Triton path needs CUDA (on CPU only the torch path runs; the interpreter is far too slow to
time). Each figure is the median of 3 synchronised timings after warm-up (Triton compiles on
the first call), taken with :func:`iclr25.core.bench.time_call`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch

from iclr25.core.bench import time_call
from iclr25.core.triton import triton_reasons
from iclr25.generative.diffusion.nn import ResBlock, UNet2D, groupnorm_film_silu


def timed(step: Callable[[], None], dev: torch.device, iters: int, warmup: int = 3, repeats: int = 3):
    """Median over ``repeats`` of seconds per call, and peak memory in MiB above what was allocated
    before (CUDA only, else nan)."""
    t = time_call(step, device=dev, warmup=warmup, repeats=repeats, number=iters, memory=True)
    return t.median, float("nan") if t.peak_mib is None else t.peak_mib


def op_bench(a: argparse.Namespace, dev: torch.device, backends: list[str]) -> None:
    g = torch.Generator(device=dev).manual_seed(0)
    shape, groups = (a.batch, a.ch, a.size, a.size), 32 if a.ch % 32 == 0 else 8
    x = torch.randn(shape, generator=g, device=dev).requires_grad_()
    w = (1 + 0.1 * torch.randn(a.ch, generator=g, device=dev)).requires_grad_()
    b = (0.1 * torch.randn(a.ch, generator=g, device=dev)).requires_grad_()
    e = (0.3 * torch.randn(a.batch, 2 * a.ch, generator=g, device=dev)).requires_grad_()
    dy = torch.randn(shape, generator=g, device=dev)
    leaves = [x, w, b, e]

    def run(backend: str) -> tuple[torch.Tensor, ...]:
        sc, sh = e.chunk(2, dim=1)  # the FiLM views a ResBlock passes
        y = groupnorm_film_silu(x, groups, w, b, sc, sh, backend=backend)
        return (y, *torch.autograd.grad(y, leaves, dy))

    res = {}
    for be in backends:
        res[be] = timed(lambda be=be: run(be), dev, a.iters * 5)
        print(f"op  {be:9s}: {1e3 * res[be][0]:8.3f} ms/call fwd+bwd   peak {res[be][1]:8.1f} MiB")
    if len(backends) == 2:
        diffs = [float((u - v).detach().abs().max()) for u, v in zip(run("reference"), run("triton"), strict=True)]
        print("op  max |fused - torch| (y, dx, dw, db, dfilm): " + ", ".join(f"{d:.2e}" for d in diffs))
        t_r, t_t = res["reference"][0], res["triton"][0]
        print(f"op  speed-up fused/torch: {t_r / t_t:.2f}x   peak memory ratio torch/fused: "
              f"{res['reference'][1] / res['triton'][1]:.2f}x")  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--ch", type=int, default=128)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = p.parse_args()
    dev = torch.device(a.device)
    torch.manual_seed(0)
    print(f"device {dev}, torch {torch.__version__}, eager (no torch.compile); size {a.size}, batch {a.batch}, "
          f"ch {a.ch}")  # fmt: skip
    x = torch.randn(a.batch, 3, a.size, a.size, device=dev)
    reasons = triton_reasons(x, allow_interpreter=False)
    backends = ["reference"] + ([] if reasons else ["triton"])
    if reasons:
        print("fused triton: skipped (" + "; ".join(reasons) + ")")
    op_bench(a, dev, backends)

    # one ResBlock at the top level (ch -> ch, size x size): its two fused pre-activations plus the
    # two 3x3 convolutions that dominate everything else
    blk = ResBlock(a.ch, a.ch, 4 * a.ch).to(dev)
    hb = torch.randn(a.batch, a.ch, a.size, a.size, device=dev)
    emb = torch.randn(a.batch, 4 * a.ch, device=dev)
    res = {}
    for be in backends:
        blk.backend = be
        res[be] = timed(lambda: blk(hb, emb).square().mean().backward(), dev, a.iters * 2)
        print(f"resblock {be:9s}: {1e3 * res[be][0]:8.3f} ms/call fwd+bwd   peak {res[be][1]:8.1f} MiB")
    if len(backends) == 2:
        print(f"resblock speed-up fused/torch: {res['reference'][0] / res['triton'][0]:.2f}x")

    net = UNet2D(3, 3, ch=a.ch, ch_mult=(1, 2, 2, 2), num_res_blocks=2, attn_resolutions=(a.size // 4,)).to(dev)
    t = torch.rand(a.batch, device=dev)

    def step(model: Callable[..., torch.Tensor], tt: torch.Tensor) -> None:
        out = model(x, tt)
        out = out.sample if hasattr(out, "sample") else out
        out.square().mean().backward()

    res = {}
    for be in backends:
        net.set_backend(be)
        res[be] = timed(lambda: step(net, t), dev, a.iters)
        print(f"unet {be:9s}: {1e3 * res[be][0]:8.2f} ms/step fwd+bwd   peak {res[be][1]:8.1f} MiB")
    if len(backends) == 2:
        t_r, t_t = res["reference"][0], res["triton"][0]
        print(f"unet speed-up fused/torch: {t_r / t_t:.2f}x   peak memory ratio torch/fused: "
              f"{res['reference'][1] / res['triton'][1]:.2f}x")  # fmt: skip
    try:
        from diffusers import UNet2DModel
    except ImportError:
        print("diffusers: skipped (not installed)")
        return
    ref = UNet2DModel(
        sample_size=a.size, in_channels=3, out_channels=3, block_out_channels=(a.ch, 2 * a.ch, 2 * a.ch, 2 * a.ch),
        layers_per_block=2,
    ).to(dev)  # fmt: skip
    t_d, m_d = timed(lambda: step(ref, t * 1000), dev, a.iters)
    print(f"diffusers UNet2DModel: {1e3 * t_d:8.2f} ms/step   peak {m_d:8.1f} MiB   "
          f"ours(torch)/diffusers time {res['reference'][0] / t_d:.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
