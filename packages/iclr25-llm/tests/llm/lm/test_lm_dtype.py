"""A float64 TinyLlama (or float64 inputs) computes in float64; bf16/fp16 are upcast to fp32 only."""

import math

import torch

from iclr25.llm.lm import (
    TinyLlama,
    TinyLlamaConfig,
    fake_quant_per_token,
    hessians,
    lm_batches,
    log_probs,
    perplexity,
    train_lm,
)
from iclr25.llm.lm.model import RMSNorm, rope_cos_sin


def _model64(seed=0):
    torch.manual_seed(seed)
    return TinyLlama(TinyLlamaConfig.preset("pico", vocab_size=32, max_seq_len=64)).double().eval()


def test_rmsnorm_keeps_float64():
    x = torch.randn(3, 16, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    norm = RMSNorm(16).double()
    exact = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
    torch.testing.assert_close(norm(x), exact, rtol=1e-14, atol=1e-14)


def test_rope_tables_in_float64_are_exact():
    pos = torch.arange(0, 1000, 37)
    cos, sin = rope_cos_sin(pos, 8, 1e4, torch.float64)
    inv = torch.tensor([1e4 ** (-i / 8) for i in range(0, 8, 2)], dtype=torch.float64)
    ang = pos.double()[:, None] * inv.repeat(2)[None, :]
    torch.testing.assert_close(cos, ang.cos(), rtol=0, atol=1e-12)
    torch.testing.assert_close(sin, ang.sin(), rtol=0, atol=1e-12)
    assert rope_cos_sin(pos, 8, 1e4, torch.bfloat16)[0].dtype == torch.bfloat16


def test_log_probs_and_perplexity_of_a_float64_model_are_float64():
    m = _model64()
    ids = torch.randint(0, 32, (2, 9), generator=torch.Generator().manual_seed(1))
    tok, full = log_probs(m, ids)
    assert tok.dtype == full.dtype == torch.float64
    with torch.no_grad():
        exact = torch.log_softmax(m(ids).logits[:, :-1], -1)
    torch.testing.assert_close(full, exact, rtol=0, atol=1e-13)
    stream = torch.randint(0, 32, (40,), generator=torch.Generator().manual_seed(2))
    got = perplexity(m, stream, seq_len=39)
    with torch.no_grad():
        nll = torch.nn.functional.cross_entropy(m(stream[None, :-1]).logits[0], stream[1:])
    assert math.isclose(math.log(got["ppl"]), float(nll), rel_tol=1e-13)


def test_fake_quant_per_token_keeps_float64():
    x = torch.randn(4, 16, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    scale = x.abs().amax(-1, keepdim=True) / 7
    torch.testing.assert_close(fake_quant_per_token(x, 4), torch.round(x / scale).clamp(-8, 7) * scale, rtol=0, atol=0)


def test_hessians_of_a_float64_model_are_float64():
    m = _model64()
    ids = torch.randint(0, 32, (2, 9), generator=torch.Generator().manual_seed(4))
    name = "model.layers.0.self_attn.q_proj"
    H = hessians(m, [name], [ids])[name]
    assert H.dtype == torch.float64
    with torch.no_grad():
        h = m.model.layers[0].input_layernorm(m.model.embed_tokens(ids)).reshape(-1, 32)
    torch.testing.assert_close(H, 2.0 / h.shape[0] * h.t() @ h, rtol=1e-13, atol=1e-13)


def test_train_lm_loss_of_a_float64_model_is_float64():
    m = _model64()
    stream = torch.randint(0, 32, (400,), generator=torch.Generator().manual_seed(5))
    seen = []
    h = m.register_forward_hook(lambda _m, _a, out: seen.append(out.logits.detach().clone()))
    hist = train_lm(m, stream, steps=1, batch_size=2, seq_len=16, seed=0, log_every=0)
    h.remove()
    # train_lm draws its batches from lm_batches with Generator(seed): replay the first one
    _, y = next(lm_batches(stream, 2, 16, generator=torch.Generator().manual_seed(0)))
    exact = torch.nn.functional.cross_entropy(seen[0].reshape(-1, 32), y.reshape(-1))
    assert math.isclose(hist["loss"][0], float(exact), rel_tol=1e-13)
