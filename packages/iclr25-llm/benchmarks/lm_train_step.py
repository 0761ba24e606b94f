"""Benchmark: tokens/s of one TinyLlama training step at 1 and 2 threads, and TinyLlama vs HF LLaMA forward.

Prints, from one run: training throughput of the chosen preset (default ``nano``, 16×128-token
batches) at each thread count, and the forward-time ratio ``t(HF LlamaForCausalLM) /
t(TinyLlama)`` for the converted model (>= 0.9 means ours is not slower). Thread counts are
printed with every figure. Needs ``transformers`` for the forward comparison (skipped otherwise).

Only CPU figures can be measured on the 2-core development host; GPU figures (``--device cuda``)
were not measured here.

    python packages/iclr25-llm/benchmarks/lm_train_step.py --preset nano --steps 10
"""

from __future__ import annotations

import argparse

import torch

from iclr25.core.bench import time_call
from iclr25.llm.lm import TinyLlama, TinyLlamaConfig, train_lm


def _time(fn, repeats: int, device: torch.device) -> float:
    """Fastest of ``repeats`` timed calls after one warm-up call."""
    return time_call(fn, device=device, warmup=1, repeats=repeats).min


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="nano")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--steps", type=int, default=10, help="training steps per timing")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    device = torch.device(args.device)
    tokens = torch.randint(0, 256, (200_000,), generator=torch.Generator().manual_seed(0))
    cfg = TinyLlamaConfig.preset(args.preset)
    print(
        f"preset={args.preset} params={TinyLlama(cfg).num_parameters()} "
        f"batch={args.batch_size}x{args.seq_len} device={device}"
    )
    for n in [int(t) for t in args.threads.split(",")]:
        torch.set_num_threads(n)
        torch.manual_seed(0)
        model = TinyLlama(cfg).to(device)

        def step(model=model):
            train_lm(model, tokens, steps=args.steps, batch_size=args.batch_size, seq_len=args.seq_len, log_every=0)

        t = _time(step, args.repeats, device) / args.steps
        print(f"train step  threads={n}: {t * 1e3:8.1f} ms/step  {args.batch_size * args.seq_len / t:10.0f} tokens/s")
    try:
        import transformers  # noqa: F401
    except ImportError:
        print("forward vs HF: skipped (transformers not installed)")
        return
    for n in [int(t) for t in args.threads.split(",")]:
        torch.set_num_threads(n)
        model = TinyLlama(cfg).to(device).eval()
        hf = model.to_hf().eval()
        x = torch.randint(0, cfg.vocab_size, (args.batch_size, args.seq_len), device=device)
        with torch.no_grad():
            t_ours = _time(lambda model=model, x=x: model(x), args.repeats * 3, device)
            t_hf = _time(lambda hf=hf, x=x: hf(x), args.repeats * 3, device)
        print(
            f"forward     threads={n}: ours {t_ours * 1e3:7.2f} ms  HF {t_hf * 1e3:7.2f} ms  "
            f"ratio HF/ours = {t_hf / t_ours:.2f}"
        )


if __name__ == "__main__":
    main()
