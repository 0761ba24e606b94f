"""Partition, bit accounting, GPTQ path, model-level pipelines and the packed layer."""

import pytest
import torch
from torch import nn

from iclr25.llm.arb import (
    ARBConfig,
    ARBQuantizer,
    BinarizedLinear,
    arb_quantize_model,
    billm_quantize_model,
    binarize,
    pbllm_quantize_model,
)


def weights(seed, n=24, m=40):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, m, generator=g) * torch.exp(0.7 * torch.randn(m, generator=g))


def hessian(seed, m, n_tok=200):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n_tok, m, generator=g) * torch.logspace(-1, 0.3, m)
    return 2 * X.t() @ X / n_tok


@pytest.mark.parametrize("cgb", [False, True])
def test_masks_disjoint_cover_and_whole_salient_columns(cgb):
    W = weights(0)
    q = ARBQuantizer(ARBConfig(method="arb", cgb=cgb, max_salient_cols=10, split_quantiles=(0.1, 0.9, 9), iters=2))
    res = q.quantize(W, hessian(0, 40))
    for blk in res.blocks:
        cover = torch.stack([g.mask for g in blk.groups]).sum(0)
        assert (cover == 1).all()  # disjoint and covering
        sal = blk.salient_cols
        assert 1 <= blk.n_salient == int(sal.sum()) <= 9
        for g in blk.groups:
            if g.order == 2:  # salient groups live inside whole salient columns
                assert not g.mask[:, ~sal].any()
            else:
                assert not g.mask[:, sal].any()
        assert len(blk.groups) == (4 if cgb else 3)


def test_avg_bits_hand_count():
    # one 24 x 40 block, k salient columns, magnitude split on both parts (CGB), ARB (one μ per group)
    n, m = 24, 40
    cfg = ARBConfig(method="arb", cgb=True, blocksize=64, max_salient_cols=10, split_quantiles=(0.1, 0.9, 9), iters=1)
    res = ARBQuantizer(cfg).quantize(weights(1, n, m))
    k = res.blocks[0].n_salient
    signs = 2 * n * k + 1 * n * (m - k)
    col_bitmap = m
    group_bitmap = n * m
    scales = 16 * n * (2 * (2 + 1) + 2 * (1 + 1))  # two order-2 groups (α1, α2, μ), two order-1 (α, μ)
    assert res.bits == signs + col_bitmap + group_bitmap + scales
    assert res.avg_bits == pytest.approx(res.bits / (n * m))
    # ARB-RC: α per row and β per column per plane, no μ
    res_rc = ARBQuantizer(ARBConfig(**{**cfg.__dict__, "method": "arb_rc"})).quantize(weights(1, n, m))
    k = res_rc.blocks[0].n_salient
    scales = 16 * (2 * 2 * (n + m) + 2 * 1 * (n + m))
    assert res_rc.bits == 2 * n * k + n * (m - k) + m + n * m + scales


def test_identity_hessian_one_group_equals_plain():
    W = weights(2, 16, 96)
    cfg = ARBConfig(method="plain", max_salient_cols=0, split_quantiles=None, blocksize=32)
    res = ARBQuantizer(cfg).quantize(W, 2 * torch.eye(96))
    ref = torch.cat([binarize(W[:, i : i + 32], method="plain").W_hat for i in range(0, 96, 32)], 1)
    torch.testing.assert_close(res.W_hat, ref, atol=1e-6, rtol=0)
    assert res.bits == 16 * 96 + 3 * 16 * 16 * 2


def test_gptq_feedback_lowers_output_error():
    W, H = weights(3, 32, 64), hessian(3, 64)
    cfg = dict(method="arb", max_salient_cols=8, split_quantiles=(0.1, 0.9, 9), iters=3, blocksize=16)
    on = ARBQuantizer(ARBConfig(**cfg)).quantize(W, H)
    off = ARBQuantizer(ARBConfig(**cfg, gptq=False)).quantize(W, H)
    assert on.output_error < off.output_error


def test_quantizer_bad_input():
    q = ARBQuantizer(ARBConfig(method="arb_x"))
    with pytest.raises(ValueError, match="ARB-X needs calibration"):
        q.quantize(weights(0))
    with pytest.raises(ValueError, match="H must be"):
        ARBQuantizer().quantize(weights(0), torch.eye(3))
    with pytest.raises(ValueError, match="iters"):
        ARBConfig(iters=-1)
    with pytest.raises(ValueError, match="method"):
        ARBConfig(method="x")


def test_packed_layer_round_trip():
    lin = nn.Linear(40, 24)
    with torch.no_grad():
        lin.weight.copy_(weights(4))
    for meth in ("arb", "arb_rc"):
        res = ARBQuantizer(ARBConfig(method=meth, max_salient_cols=6, split_quantiles=(0.2, 0.8, 5), iters=2)).quantize(
            lin.weight
        )
        layer = BinarizedLinear.from_result(lin, res)
        torch.testing.assert_close(layer.weight, res.W_hat)
        packed = layer.pack()
        back = BinarizedLinear.from_packed(packed)
        # scales are fp16: relative error <= 2^-11 per scale, products of two for RC
        torch.testing.assert_close(back.weight, layer.weight, rtol=0, atol=4e-3 * float(layer.weight.abs().max()))
        x = torch.randn(3, 40)
        torch.testing.assert_close(layer(x), x @ res.W_hat.t() + lin.bias, atol=1e-5, rtol=1e-5)
        sign_bytes = sum(d["B"].numel() for d in packed["groups"])
        assert sign_bytes <= sum((g.order * 24 * 40 + 7) // 8 for _, g in layer.groups)


def _tiny_calib(vocab, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, vocab, (2, 16), generator=g) for _ in range(2)]


CFG = ARBConfig(method="arb", max_salient_cols=6, split_quantiles=(0.2, 0.8, 5), iters=2, x_iters=2)


def _hf(kind):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    if kind == "llama":
        cfg = transformers.LlamaConfig(
            vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4
        )
        model = transformers.LlamaForCausalLM(cfg)
    else:
        cfg = transformers.OPTConfig(
            vocab_size=64,
            hidden_size=32,
            ffn_dim=48,
            num_hidden_layers=2,
            num_attention_heads=4,
            word_embed_proj_dim=32,
        )
        model = transformers.OPTForCausalLM(cfg)
    return model.eval()


PIPELINES = {
    "arb": (arb_quantize_model, {"config": CFG}),
    "billm": (billm_quantize_model, {"config": CFG}),
    "pbllm": (pbllm_quantize_model, {}),
}


@pytest.mark.parametrize(
    "kind,pipe",
    [("llama", "arb"), ("opt", "arb")]
    + [pytest.param(k, p, marks=pytest.mark.slow) for k in ("llama", "opt") for p in ("billm", "pbllm")],
)
def test_hf_models_without_touching_lm_head(kind, pipe):
    model = _hf(kind)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    calib = _tiny_calib(64)
    fn, kw = PIPELINES[pipe]
    qmodel, rep = fn(model, calib, **kw)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())  # input model unchanged
    assert torch.equal(qmodel.lm_head.weight, model.lm_head.weight)
    assert "lm_head" not in " ".join(rep.layer_errors)
    assert len(rep.layer_errors) == (14 if kind == "llama" else 12)
    assert torch.isfinite(qmodel(calib[0]).logits).all()
    if pipe != "pbllm":
        assert any(isinstance(m, BinarizedLinear) for m in qmodel.modules())


def test_model_left_unchanged_when_a_layer_fails():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(
        transformers.LlamaConfig(
            vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4
        )
    )
    with torch.no_grad():
        model.model.layers[1].mlp.down_proj.weight[0, 0] = float("nan")
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(ValueError, match="NaN"):
        arb_quantize_model(model, _tiny_calib(64), CFG)
    for k, v in model.state_dict().items():
        assert torch.equal(before[k].nan_to_num(), v.nan_to_num())
    with pytest.raises(ValueError, match="calib_batches is empty"):
        arb_quantize_model(model, [], CFG)
