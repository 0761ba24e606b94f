"""A float64 weight is binarized in float64 end to end (bf16/fp16 are upcast to fp32 only)."""

import torch
from torch import nn

from iclr25.llm.arb import ARBConfig, ARBQuantizer, BinarizedLinear, pbllm_quantize

SMALL = ARBConfig(max_salient_cols=6, split_quantiles=(0.2, 0.8, 5), iters=2, x_iters=2)


def _w64(seed=0, n=16, m=64):
    return torch.randn(n, m, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _not_fp32_rounded(t):
    return not torch.equal(t, t.float().double())


def test_arb_quantize_keeps_float64():
    W = _w64()
    res = ARBQuantizer(SMALL).quantize(W)
    assert res.W_hat.dtype == torch.float64 and _not_fp32_rounded(res.W_hat)
    assert all(g.params["alpha"].dtype == torch.float64 for b in res.blocks for g in b.groups)
    exact = float(((W - res.W_hat) ** 2).sum())
    assert abs(res.weight_error - exact) <= 1e-12 * exact


def test_pbllm_quantize_keeps_float64():
    W = _w64(1)
    res = pbllm_quantize(W, blocksize=32)
    assert res.W_hat.dtype == torch.float64 and _not_fp32_rounded(res.W_hat)
    exact = float(((W - res.W_hat) ** 2).sum())
    assert abs(res.weight_error - exact) <= 1e-12 * exact


def test_binarized_linear_of_a_float64_result_keeps_its_weight():
    lin = nn.Linear(64, 16).double()
    with torch.no_grad():
        lin.weight.copy_(_w64(2))
    res = ARBQuantizer(SMALL).quantize(lin.weight)
    layer = BinarizedLinear.from_result(lin, res)
    assert layer.weight.dtype == torch.float64
    torch.testing.assert_close(layer.weight, res.W_hat, rtol=0, atol=1e-15)
    x = torch.randn(3, 64, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    torch.testing.assert_close(layer(x), x @ res.W_hat.t() + lin.bias, rtol=1e-13, atol=1e-13)


def test_float32_layers_are_unchanged():
    W = _w64(4).float()
    layer = BinarizedLinear.from_result(nn.Linear(64, 16), ARBQuantizer(SMALL).quantize(W))
    assert layer.weight.dtype == torch.float32
