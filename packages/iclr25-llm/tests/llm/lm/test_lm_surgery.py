import pytest
import torch
from torch import nn

from iclr25.llm.lm.model import TinyLlama, TinyLlamaConfig
from iclr25.llm.lm.quant import gptq
from iclr25.llm.lm.surgery import (
    as_linear_weight,
    capture_inputs,
    decoder_layers,
    hessians,
    iter_linears,
    replace_linears,
    sequential_ptq,
)

PROJ = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}


def _tiny():
    torch.manual_seed(0)
    return TinyLlama(TinyLlamaConfig(d_model=32, n_layers=2, n_heads=4)).eval()


def _hf_models():
    tr = pytest.importorskip("transformers")
    torch.manual_seed(0)
    llama = tr.LlamaForCausalLM(
        tr.LlamaConfig(
            vocab_size=64,
            hidden_size=32,
            intermediate_size=48,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
        )
    ).eval()
    gpt2 = tr.GPT2LMHeadModel(tr.GPT2Config(vocab_size=64, n_embd=32, n_layer=2, n_head=4, n_positions=64)).eval()
    return llama, gpt2


def _opt():
    tr = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = tr.OPTConfig(
        vocab_size=64, hidden_size=32, ffn_dim=48, num_hidden_layers=2, num_attention_heads=4,
        max_position_embeddings=64, word_embed_proj_dim=32,
    )  # fmt: skip
    return tr.OPTForCausalLM(cfg).eval()


def _family(name):
    if name == "tiny":
        return _tiny(), 256
    if name == "opt":
        return _opt(), 64
    llama, gpt2 = _hf_models()
    return (llama if name == "llama" else gpt2), 64


def test_iter_linears_on_tinyllama():
    m = _tiny()
    names = [n for n, _ in iter_linears(m)]
    assert len(names) == 7 * 2 and "lm_head" not in names
    assert {n.rsplit(".", 1)[1] for n in names} == PROJ
    assert [n for n, _ in iter_linears(m, exclude=None)][-1] == "lm_head"
    assert len(list(iter_linears(m, include=["q_proj", "k_proj"]))) == 4


def test_replace_linears_on_hf_models():
    llama, gpt2 = _hf_models()
    x = torch.randint(0, 64, (2, 12))
    for model, per_layer in [(llama, 7), (gpt2, 4), (_opt(), 6)]:
        with torch.no_grad():
            before = model(x).logits
        found = dict(iter_linears(model))
        assert len(found) == per_layer * 2 and not any("lm_head" in n for n in found)
        replaced = replace_linears(model, lambda name, m: m)
        assert list(replaced) == list(found)
        with torch.no_grad():
            assert torch.equal(model(x).logits, before)
    # GPT-2 Conv1D stores (in, out): as_linear_weight gives (out, in) and computes the same map
    name, conv = next(iter(iter_linears(gpt2)))
    w = as_linear_weight(conv)
    assert w.shape == (conv.nf, conv.weight.shape[0])
    h = torch.randn(3, conv.weight.shape[0])
    torch.testing.assert_close(conv(h), h @ w.T + conv.bias)
    assert name.endswith("attn.c_attn")


@pytest.mark.parametrize("family", ["tiny", "llama", "gpt2", "opt"])
def test_replace_linears_installs_new_modules(family):
    model, vocab = _family(family)
    x = torch.randint(0, vocab, (2, 12), generator=torch.Generator().manual_seed(0))
    head = model.get_submodule("lm_head")
    with torch.no_grad():
        before = model(x).logits

    def to_linear(name, lin):  # a fresh nn.Linear computing the same map (Conv1D transposed)
        w = as_linear_weight(lin)
        new = nn.Linear(w.shape[1], w.shape[0], bias=lin.bias is not None)
        with torch.no_grad():
            new.weight.copy_(w)
            if lin.bias is not None:
                new.bias.copy_(lin.bias)
        return new

    old = dict(iter_linears(model))
    new = replace_linears(model, to_linear)
    assert list(new) == list(old)
    for name, mod in new.items():
        assert model.get_submodule(name) is mod and mod is not old[name]
    assert model.get_submodule("lm_head") is head
    with torch.no_grad():
        after = model(x).logits
    if family == "gpt2":  # Conv1D's addmm and F.linear may round differently
        torch.testing.assert_close(after, before)
    else:
        assert torch.equal(after, before)
    # the installed modules are the ones the forward pass uses: zeroing them all changes the logits
    replace_linears(model, lambda name, lin: _Zero(lin))
    with torch.no_grad():
        assert not torch.allclose(model(x).logits, before)


class _Zero(nn.Module):
    def __init__(self, lin):
        super().__init__()
        self.out = as_linear_weight(lin).shape[0]

    def forward(self, x):
        return x.new_zeros(*x.shape[:-1], self.out)


def test_replace_linears_is_atomic_on_error():
    m = _tiny()
    original = dict(iter_linears(m))
    calls = []

    def factory(name, lin):
        calls.append(name)
        if len(calls) == 3:
            raise RuntimeError("boom")
        return nn.Identity()

    with pytest.raises(RuntimeError, match="boom"):
        replace_linears(m, factory)
    assert dict(iter_linears(m)) == original
    with pytest.raises(TypeError, match=r"nn\.Module"):
        replace_linears(m, lambda n, lin: 3)


def test_capture_inputs_and_hessians():
    m = _tiny()
    g = torch.Generator().manual_seed(0)
    batches = [torch.randint(0, 256, (2, 10), generator=g) for _ in range(3)]
    name = "model.layers.1.mlp.down_proj"
    X = capture_inputs(m, [name], batches)[name]
    assert X.shape == (60, m.config.ffn_hidden)
    assert capture_inputs(m, [name], batches, max_rows=25)[name].shape == (25, m.config.ffn_hidden)
    H = hessians(m, [name], batches)[name]
    torch.testing.assert_close(H, 2 * X.T @ X / 60, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="not found"):
        hessians(m, ["nope"], batches)


def _gptq_block(i, block, run, bits=4):
    names = [n for n, _ in iter_linears(block)]
    hs = {}
    handles = []
    for n, lin in iter_linears(block):

        def hook(_m, args, n=n):
            x = args[0].detach().reshape(-1, args[0].shape[-1]).float()
            hs[n] = hs.get(n, 0) + 2 * x.T @ x
            hs[n + "#"] = hs.get(n + "#", 0) + x.shape[0]

        handles.append(lin.register_forward_pre_hook(hook))
    run()
    for h in handles:
        h.remove()
    for n, lin in iter_linears(block):
        lin.weight.data = gptq(as_linear_weight(lin), hs[n] / hs[n + "#"], bits).to(lin.weight.dtype)
    return names


@pytest.mark.parametrize("family", ["tiny", "llama", "gpt2", "opt"])
def test_sequential_ptq_calibrates_on_quantized_predecessors(family):
    # quantize_layer halves block i's weights, then records run(): block i must be fed the outputs
    # of the already-modified blocks < i, i.e. equal the fully modified model's block-i outputs
    model, vocab = _family(family)
    g = torch.Generator().manual_seed(3)
    calib = [torch.randint(0, vocab, (2, 12), generator=g) for _ in range(3)]
    recorded = {}

    def halve_then_record(i, block, run):
        for _, lin in iter_linears(block):
            lin.weight.data.mul_(0.5)
        recorded[i] = run()
        return i

    assert sequential_ptq(model, halve_then_record, calib) == [0, 1]
    hooked = {0: [], 1: []}
    blocks = decoder_layers(model)
    handles = [
        b.register_forward_hook(lambda _m, _a, out, i=i: hooked[i].append(out[0] if isinstance(out, tuple) else out))
        for i, b in enumerate(blocks)
    ]
    with torch.no_grad():
        for c in calib:
            model(c)
    for h in handles:
        h.remove()
    for i in (0, 1):
        for got, want in zip(recorded[i], hooked[i], strict=True):
            torch.testing.assert_close(got, want, atol=0, rtol=0)


@pytest.mark.parametrize("family", ["tiny", "llama", "gpt2"])
def test_sequential_ptq_walks_blocks_in_order(family):
    if family == "tiny":
        model, vocab = _tiny(), 256
    else:
        llama, gpt2 = _hf_models()
        model, vocab = (llama, 64) if family == "llama" else (gpt2, 64)
    g = torch.Generator().manual_seed(1)
    calib = [torch.randint(0, vocab, (2, 16), generator=g) for _ in range(4)]
    x = torch.randint(0, vocab, (2, 16), generator=g)
    with torch.no_grad():
        before = model(x).logits
    if family == "gpt2":  # GPTQ on Conv1D needs the transposed view written back
        seen = sequential_ptq(model, lambda i, block, run: (run(), i)[1], calib)
        assert seen == [0, 1]
        return
    seen = sequential_ptq(model, _gptq_block, calib)
    assert len(seen) == 2 and len(seen[0]) == 7
    with torch.no_grad():
        after = model(x).logits
    assert not torch.equal(before, after)
    # 4-bit GPTQ keeps the model close: predictions mostly unchanged
    assert (before.argmax(-1) == after.argmax(-1)).float().mean() > 0.5


def test_sequential_ptq_feeds_quantized_outputs_forward():
    m = _tiny()
    calib = [torch.randint(0, 256, (1, 8), generator=torch.Generator().manual_seed(2))]
    recorded = []

    def zero_then_record(i, block, run):
        recorded.append(run()[0].clone())
        if i == 0:  # make block 0 the identity map on the residual stream
            for _, lin in iter_linears(block):
                lin.weight.data.zero_()

    sequential_ptq(m, zero_then_record, calib)
    # block 1 must see block 0's *modified* output: the embeddings themselves
    emb = m.model.embed_tokens(calib[0])
    out1_expected = m.model.layers[1](emb, *_rope(m, 8))
    torch.testing.assert_close(recorded[1], out1_expected)


def _rope(m, t):
    from iclr25.llm.lm.model import rope_cos_sin

    return rope_cos_sin(torch.arange(t), m.config.head_dim, m.config.rope_theta)


class _KwBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, *, hidden_states, scale):
        return (torch.tanh(self.proj(hidden_states)) * scale,)


class _KwModel(nn.Module):
    """Calls its blocks with keyword arguments only, as some HF decoders do."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(16, 8)
        self.layers = nn.ModuleList([_KwBlock(), _KwBlock()])

    def forward(self, ids, use_cache=False):
        h = self.embed(ids)
        for block in self.layers:
            h = block(hidden_states=h, scale=2.0)[0]
        return h


def test_sequential_ptq_with_keyword_only_blocks():
    torch.manual_seed(0)
    model = _KwModel()
    calib = [torch.randint(0, 16, (2, 5), generator=torch.Generator().manual_seed(1))]
    recorded = []

    def halve_then_record(i, block, run):
        block.proj.weight.data.mul_(0.5)
        recorded.append(run()[0])

    sequential_ptq(model, halve_then_record, calib)
    with torch.no_grad():
        h0 = model.layers[0](hidden_states=model.embed(calib[0]), scale=2.0)[0]
        h1 = model.layers[1](hidden_states=h0, scale=2.0)[0]
    torch.testing.assert_close(recorded[0], h0, atol=0, rtol=0)
    torch.testing.assert_close(recorded[1], h1, atol=0, rtol=0)


def test_calibration_bad_input_is_rejected():
    m = _tiny()
    with pytest.raises(ValueError, match="calib_batches is empty"):
        sequential_ptq(m, lambda i, block, run: None, [])
    with pytest.raises(ValueError, match="no inputs reached"):
        hessians(m, ["model.layers.0.mlp.down_proj"], [])
    with pytest.raises(TypeError, match="decoder blocks of Sequential"):
        decoder_layers(nn.Sequential(nn.Linear(2, 2)))
    with pytest.raises(TypeError, match="include"):
        list(iter_linears(m, include=[3]))
    with pytest.raises(TypeError, match="factory must be callable"):
        replace_linears(m, None)
    with pytest.raises(TypeError, match="calibration batches"):
        capture_inputs(m, ["lm_head"], [3])


def test_calibration_passes_give_each_submodule_its_own_mode_back():
    # a model being fine-tuned with a frozen (eval) embedding: model.train(was) after calibration
    # used to switch the embedding back to train mode
    m = _tiny().train()
    m.model.embed_tokens.eval()
    before = [mod.training for mod in m.modules()]
    batches = [torch.randint(0, 256, (1, 6), generator=torch.Generator().manual_seed(3))]
    capture_inputs(m, ["model.layers.0.mlp.down_proj"], batches)
    assert [mod.training for mod in m.modules()] == before
    seen = []
    sequential_ptq(m, lambda i, block, run: seen.append(block.training), batches)
    assert seen == [False] * len(decoder_layers(m))  # calibrated in eval mode
    assert [mod.training for mod in m.modules()] == before
