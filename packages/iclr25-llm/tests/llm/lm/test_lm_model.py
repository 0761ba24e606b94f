import pytest
import torch

from iclr25.llm.lm.model import PRESETS, KVCache, TinyLlama, TinyLlamaConfig


def _model(seed=0, **kw):
    torch.manual_seed(seed)
    cfg = TinyLlamaConfig(**{"d_model": 32, "n_layers": 2, "n_heads": 4, "max_seq_len": 64, **kw})
    m = TinyLlama(cfg).eval()
    # larger weights than the 0.02 init so the test is not dominated by near-uniform logits
    with torch.no_grad():
        for p in m.parameters():
            if p.dim() == 2:
                p.normal_(0, 0.2)
    return m


@pytest.mark.parametrize(("name", "params"), [("pico", 29_792), ("nano", 133_440), ("micro", 869_504)])
def test_presets(name, params):
    assert TinyLlama(TinyLlamaConfig.preset(name)).num_parameters() == params
    with pytest.raises(ValueError, match=r"'micro', 'nano', 'pico'"):
        TinyLlamaConfig.preset("giga")
    assert set(PRESETS) == {"pico", "nano", "micro"}


def test_hf_module_names():
    m = _model()
    names = {n for n, _ in m.named_parameters()}
    for n in [
        "model.embed_tokens.weight",
        "model.layers.0.self_attn.q_proj.weight",
        "model.layers.1.mlp.down_proj.weight",
        "model.layers.0.input_layernorm.weight",
        "model.layers.0.post_attention_layernorm.weight",
        "model.norm.weight",
        "lm_head.weight",
    ]:
        assert n in names


@pytest.mark.parametrize("n_kv_heads", [4, 2])
def test_kv_cache_decoding_equals_full_forward(n_kv_heads):
    m = _model(n_kv_heads=n_kv_heads)
    x = torch.randint(0, 256, (2, 25), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full = m(x).logits
        out = m(x[:, :5], use_cache=True)
        cache = out.past_key_values
        parts = [out.logits]
        for t in range(5, 25):  # 20 single-token steps
            parts.append(m(x[:, t : t + 1], past_key_values=cache).logits)
        # a multi-token chunk after the cache uses the bottom-right causal mask
        c2 = m(x[:, :10], use_cache=True).past_key_values
        chunk = m(x[:, 10:25], past_key_values=c2).logits
    assert isinstance(cache, KVCache) and cache.seq_len == 25
    torch.testing.assert_close(torch.cat(parts, 1), full, atol=1e-5, rtol=0)
    torch.testing.assert_close(chunk, full[:, 10:], atol=1e-5, rtol=0)


def test_causality():
    m = _model()
    g = torch.Generator().manual_seed(2)
    x = torch.randint(0, 256, (1, 20), generator=g)
    with torch.no_grad():
        base = m(x).logits
        for t in [0, 7, 19]:
            y = x.clone()
            y[0, t] = (y[0, t] + 1) % 256
            out = m(y).logits
            assert torch.equal(out[:, :t], base[:, :t])
            assert not torch.equal(out[:, t], base[:, t])


def test_attention_fn_is_pluggable():
    m = _model()
    x = torch.randint(0, 256, (1, 8))
    calls = []
    for layer in m.layers:
        default = layer.self_attn.attention_fn

        def spy(q, k, v, cache, idx, default=default):
            calls.append(idx)
            return default(q, k, v, cache, idx)

        layer.self_attn.attention_fn = spy
    m(x)
    assert calls == [0, 1]


def test_bad_input_is_rejected_before_compute():
    m = _model()
    with pytest.raises(ValueError, match="max id 255"):
        m(torch.tensor([[1, 256]]))
    with pytest.raises(ValueError, match="max id 255"):
        m(torch.tensor([[1.0, 2.0]]))
    with pytest.raises(ValueError, match="batch, seq"):
        m(torch.tensor([1, 2]))
    with pytest.raises(ValueError, match="max_seq_len=64"):
        m(torch.zeros(1, 65, dtype=torch.long))
    with pytest.raises(ValueError, match="n_heads"):
        TinyLlamaConfig(d_model=30, n_heads=4)
    with pytest.raises(ValueError, match="even for RoPE"):
        TinyLlamaConfig(d_model=12, n_heads=4)
    with pytest.raises(ValueError, match="n_kv_heads"):
        TinyLlamaConfig(d_model=32, n_heads=4, n_kv_heads=3)
    with pytest.raises(ValueError, match="padding"):
        m(torch.zeros(1, 4, dtype=torch.long), attention_mask=torch.tensor([[0, 1, 1, 1]]))


def test_hf_roundtrip_is_weight_exact():
    pytest.importorskip("transformers")
    # non-default rope_theta / norm_eps change the logits, so a conversion that drops them fails
    for kw in [{}, {"n_kv_heads": 2}, {"tie_embeddings": True}, {"rope_theta": 100.0, "norm_eps": 0.1}]:
        m = _model(seed=3, **kw)
        x = torch.randint(0, 256, (2, 30), generator=torch.Generator().manual_seed(4))
        hf = m.to_hf()
        assert type(hf).__name__ == "LlamaForCausalLM"
        with torch.no_grad():
            ours, theirs = m(x).logits, hf(x).logits
            back = TinyLlama.from_hf(hf)(x).logits
        torch.testing.assert_close(theirs, ours, atol=1e-5, rtol=0)
        torch.testing.assert_close(back, ours, atol=0, rtol=0)
        assert TinyLlama.from_hf(hf).config == m.config


def test_from_hf_rejects_other_architectures():
    transformers = pytest.importorskip("transformers")
    gpt2 = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=50))
    with pytest.raises(TypeError, match="GPT2LMHeadModel"):
        TinyLlama.from_hf(gpt2)
    biased = transformers.LlamaForCausalLM(
        transformers.LlamaConfig(
            vocab_size=50, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
            attention_bias=True,
        )
    )  # fmt: skip
    with pytest.raises(TypeError, match="biases"):
        TinyLlama.from_hf(biased)


def test_kv_cache_append_and_get():
    cache = KVCache()
    assert cache.get(0) is None and cache.seq_len == 0 and len(cache) == 0
    k1, v1 = torch.randn(2, 3, 4, 8), torch.randn(2, 3, 4, 8)
    k2, v2 = torch.randn(2, 3, 1, 8), torch.randn(2, 3, 1, 8)
    cache.append(0, k1, v1)
    k, v = cache.append(0, k2, v2)
    assert torch.equal(k, torch.cat([k1, k2], 2)) and torch.equal(v, torch.cat([v1, v2], 2))
    got = cache.get(0)
    assert torch.equal(got[0], k) and torch.equal(got[1], v)
    assert cache.get(1) is None and cache.seq_len == 5


@pytest.mark.parametrize(
    ("field", "value"),
    [("ffn_hidden", 0), ("ffn_hidden", -1), ("ffn_hidden", 96.0), ("rope_theta", 0.0), ("rope_theta", float("nan")),
     ("norm_eps", -1e-6), ("init_std", -0.02)],
)  # fmt: skip
def test_config_rejects_bad_fields_by_name(field, value):
    # these crashed deep inside nn.Linear / nn.init, or gave NaN logits (rope_theta=0), naming nothing
    with pytest.raises(ValueError, match=field):
        TinyLlamaConfig(d_model=32, n_layers=1, n_heads=2, **{field: value})
    ok = TinyLlamaConfig(d_model=32, n_layers=1, n_heads=2, ffn_hidden=1, rope_theta=1, norm_eps=0, init_std=0)
    assert ok.ffn_hidden == 1
