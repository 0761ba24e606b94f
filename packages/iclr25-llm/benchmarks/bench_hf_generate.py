"""HFChatModel throughput (batch 1 vs batch B), cache-hit overhead, HTTP loopback overhead.

GPU (the issue's setting): ``python bench_hf_generate.py --size 100m --prompts 64 --new-tokens 128 --batch 32``
builds a ~100M-parameter LLaMA from config (random weights, no download); batched tokens/s should be
>= 8x batch-1. On CPU the default tiny model is a correctness smoke test: GPU figures cannot be
measured on a CPU-only machine. Prints ratios measured in this one run.
"""

from __future__ import annotations

import argparse
import tempfile
import time

import torch


def build(size: str, device: str):
    import tokenizers
    import transformers

    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2}
    for ch in "abcdefghijklmnopqrstuvwxyz0123456789 ?.,!<>/":
        vocab.setdefault(ch, len(vocab))
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Split("", behavior="isolated")
    tok.decoder = tokenizers.decoders.Fuse()
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>")
    fast.chat_template = (
        "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}</s>{% endfor %}"
        "{% if add_generation_prompt %}<assistant>{% endif %}"
    )
    h, layers, heads = (768, 12, 12) if size == "100m" else (64, 2, 4)
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        vocab_size=max(len(vocab), 32000 if size == "100m" else 0),
        hidden_size=h,
        intermediate_size=4 * h,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=1024,
        pad_token_id=0,
        eos_token_id=None,  # no early stop: every row generates exactly new_tokens
    )
    model = transformers.LlamaForCausalLM(cfg)
    if device.startswith("cuda"):
        model = model.to(torch.bfloat16)
    return model, fast


def main() -> None:
    from iclr25.llm.bench.chat import (
        CachedChatModel,
        GenerationConfig,
        HFChatModel,
        Message,
        OfflineChatModel,
        OpenAIChatModel,
        serve_openai,
    )
    from iclr25.llm.bench.chat.offline import hashed

    ap = argparse.ArgumentParser()
    ap.add_argument("--size", choices=["tiny", "100m"], default="tiny")
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--new-tokens", type=int, default=16)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--device", default="auto")
    args = ap.parse_args()
    torch.set_num_threads(1 if args.device in ("cpu", "auto") and not torch.cuda.is_available() else 8)
    dev = (
        "cuda"
        if args.device == "auto" and torch.cuda.is_available()
        else ("cpu" if args.device == "auto" else args.device)
    )
    model, tok = build(args.size, dev)
    convs = [[Message("user", f"prompt number {i} " + "x" * (i % 7))] for i in range(args.prompts)]
    cfg = GenerationConfig(max_tokens=args.new_tokens)
    tps = {}
    texts = {}
    for b in (1, args.batch):
        hf = HFChatModel(model, tok, device=dev, batch_size=b)
        hf.generate(convs[:2], cfg)  # warm-up
        if dev.startswith("cuda"):
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = hf.generate(convs, cfg)
        if dev.startswith("cuda"):
            torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        n_tok = sum(r[0].usage.completion_tokens for r in out)
        tps[b], texts[b] = n_tok / dt, [r[0].raw["token_ids"] for r in out]
        print(f"batch {b:3d}: {n_tok} tokens in {dt:.2f} s = {tps[b]:.1f} tok/s")
    print(f"batched / batch-1 throughput: {tps[args.batch] / tps[1]:.2f}x (GPU target >= 8x)")
    print(f"batch-1 and batch-{args.batch} greedy tokens identical: {texts[1] == texts[args.batch]}")

    off = OfflineChatModel(hashed(["a", "b", "c"]))
    many = [[Message("user", f"q{i}")] for i in range(200)]
    t0 = time.perf_counter()
    off.generate(many)
    direct = (time.perf_counter() - t0) / len(many)
    with tempfile.TemporaryDirectory() as d:
        c = CachedChatModel(off, f"{d}/c.sqlite")
        c.generate(many)
        t0 = time.perf_counter()
        c.generate(many)
        hit = (time.perf_counter() - t0) / len(many)
    print(f"cache hit: {1e3 * hit:.3f} ms/request (target < 2 ms); direct offline {1e3 * direct:.3f} ms")
    with serve_openai(off) as srv:
        remote = OpenAIChatModel(srv.base_url, "off")
        remote.generate(many[:8])
        t0 = time.perf_counter()
        remote.generate(many)
        http = (time.perf_counter() - t0) / len(many)
    print(f"HTTP loopback: {1e3 * http:.3f} ms/request wall (8 concurrent), {http / max(direct, 1e-9):.0f}x direct")


if __name__ == "__main__":
    main()
