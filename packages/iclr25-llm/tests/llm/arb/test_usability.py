"""Everyday workflows: transposed (Conv1D) weights, saving packed layers, devices, input validation."""

import io

import pytest
import torch
from torch import nn

from iclr25.llm.arb import (
    ARBConfig,
    ARBQuantizer,
    BinarizedLinear,
    PackedBinaryLinear,
    billm_quantize_model,
    pack_groups,
    pbllm_quantize,
    pbllm_quantize_model,
)
from iclr25.llm.arb.minilm import binarize_encoder

SMALL = ARBConfig(max_salient_cols=6, split_quantiles=(0.2, 0.8, 5), iters=2, x_iters=2)


def _layer(seed, cfg=SMALL, n=32, K=64):
    g = torch.Generator().manual_seed(seed)
    lin = nn.Linear(K, n)
    with torch.no_grad():
        lin.weight.copy_(torch.randn(n, K, generator=g))
    return BinarizedLinear.from_result(lin, ARBQuantizer(cfg).quantize(lin.weight))


def test_pbllm_accepts_a_transposed_weight():
    # GPT-2's Conv1D hands the quantizer W.t(), a non-contiguous view
    g = torch.Generator().manual_seed(0)
    W = torch.randn(48, 200, generator=g)
    a, b = pbllm_quantize(W), pbllm_quantize(W.t().contiguous().t())
    torch.testing.assert_close(b.W_hat, a.W_hat)
    assert b.bits == a.bits


def test_pbllm_model_on_gpt2():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=64, n_embd=32, n_layer=2, n_head=4, n_positions=32)
    model = transformers.GPT2LMHeadModel(cfg).eval()
    g = torch.Generator().manual_seed(0)
    calib = [torch.randint(0, 64, (2, 16), generator=g)]
    qmodel, rep = pbllm_quantize_model(model, calib)
    assert len(rep.layer_errors) == 8
    assert torch.isfinite(qmodel(calib[0]).logits).all()


def test_pbllm_bad_arguments_name_the_argument():
    W = torch.randn(8, 16)
    for kw, match in [
        ({"blocksize": -1}, "blocksize"),  # was: an all-zero W_hat, 0 bits, no error
        ({"blocksize": 0}, "blocksize"),
        ({"percdamp": -1.0}, "percdamp"),
        ({"H": torch.full((16, 16), float("nan"))}, "H contains NaN"),
    ]:
        with pytest.raises(ValueError, match=match):
            pbllm_quantize(W, **kw)
    with pytest.raises(TypeError, match="H must be"):
        pbllm_quantize(W, [[1.0]])


def test_from_result_rejects_results_it_cannot_represent():
    lin = nn.Linear(64, 32)
    with pytest.raises(ValueError, match="no binarized blocks"):  # was: a silently all-zero layer
        BinarizedLinear.from_result(lin, pbllm_quantize(lin.weight))
    res = ARBQuantizer(SMALL).quantize(torch.randn(32, 128))
    with pytest.raises(ValueError, match=r"shape \(32, 128\)"):  # was: columns 64.. silently zero
        BinarizedLinear.from_result(nn.Linear(256, 32), res)
    with pytest.raises(TypeError, match="linear must be"):
        BinarizedLinear.from_result(None, res)


def test_packed_linear_state_dict_round_trip():
    cfg = ARBConfig(max_salient_cols=0, split_quantiles=(0.2, 0.8, 5), iters=2)
    a, b = _layer(0, cfg).to_packed(), _layer(1, cfg).to_packed()
    x = torch.randn(3, 64)
    assert not torch.equal(a(x), b(x))
    buf = io.BytesIO()
    torch.save(nn.Sequential(a).state_dict(), buf)  # was: an empty state_dict
    buf.seek(0)
    sd = torch.load(buf, weights_only=True)
    assert {"0.signs", "0.alpha", "0.mu", "0.bias"} <= set(sd)
    fresh = nn.Sequential(b)
    fresh.load_state_dict(sd)
    assert torch.equal(fresh(x), a(x))
    # a layer with another layout refuses the checkpoint and stays as it was
    c = _layer(2).to_packed()
    before = c(x)
    with pytest.raises(RuntimeError, match=r"size mismatch for 0\.signs2"):
        nn.Sequential(c).load_state_dict(sd)
    assert torch.equal(c(x), before)


def test_pack_bits_follows_the_layer_device():
    layer = _layer(0).to("meta")  # groups stay where they were computed
    packed = layer.pack_bits()
    assert {str(t.device) for t in packed.tensors().values()} == {"meta"}
    assert layer.to_packed().packed.device == torch.device("meta")


def test_packed_linear_checks_its_inputs():
    layer = _layer(0)
    pl = layer.to_packed()
    for rows in (3, 40):  # 40 rows take the dequantize path
        with pytest.raises(ValueError, match=r"x must be \(batch, 64\)"):
            pl(torch.randn(rows, 63))
        assert pl(torch.randn(rows, 64)).shape == (rows, 32)
    with pytest.raises(TypeError, match="packed must be a PackedBinaryWeight"):
        PackedBinaryLinear(layer)
    with pytest.raises(ValueError, match="backend must be"):
        PackedBinaryLinear(layer.pack_bits(), backend="cuda")
    with pytest.raises(ValueError, match="groups is empty"):
        pack_groups(64, 32, [])


def test_config_and_pipeline_arguments_are_checked_up_front():
    with pytest.raises(ValueError, match="split_quantiles"):
        ARBConfig(split_quantiles=(0.1, 0.9))
    model = nn.Linear(4, 4)
    with pytest.raises(TypeError, match="config must be an ARBConfig"):
        billm_quantize_model(model, [torch.zeros(1, 4, dtype=torch.long)], {"method": "arb"})
    with pytest.raises(TypeError, match="calib_batches must be"):
        billm_quantize_model(model, None)
    with pytest.raises(TypeError, match="config must be an ARBConfig"):
        binarize_encoder(model, None, ["a line"], None)


def test_load_state_dict_keeps_groups_only_while_they_match_the_weight():
    a, b = _layer(0), _layer(1)
    x = torch.randn(3, 64, generator=torch.Generator().manual_seed(9))
    b.load_state_dict(a.state_dict())
    torch.testing.assert_close(b(x), a(x), rtol=0, atol=0)  # the loaded weight is what b computes
    assert b.groups is None and "groups=stale" in repr(b)
    for pack in (b.pack, b.pack_bits, b.to_packed):
        with pytest.raises(ValueError, match="no longer matches its binarized groups"):
            pack()  # it would have packed layer 1's bits beside layer 0's weight
    same = _layer(0)
    same.load_state_dict(a.state_dict())  # same groups: the bits stay usable
    assert same.groups is not None
    assert torch.equal(BinarizedLinear.from_packed(same.pack()).weight, BinarizedLinear.from_packed(a.pack()).weight)
    half_a, half_same = _layer(0).half(), _layer(0).half()
    half_same.load_state_dict(half_a.state_dict())  # compared in the weight's own dtype
    assert half_same.groups is not None
