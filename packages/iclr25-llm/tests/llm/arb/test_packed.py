"""Packed 1-bit format and GEMV: bits round-trip, storage equals the hand count, kernel equals reference."""

import copy
import functools

import pytest
import torch

from iclr25.llm.arb import (
    ARBConfig,
    ARBQuantizer,
    BinarizedLinear,
    PackedBinaryLinear,
    binarize,
    pack_groups,
    packed_gemv,
)
from iclr25.llm.arb.packed import pack_bits, packed_gemv_reference, unpack_bits

# fp16 stores each scale with relative error <= 2^-11; an RC entry multiplies two of them
FP16_REL = 2.0**-10 + 1e-4


@functools.cache
def _cached(n, K, bs, method, seed, bias, cfg):
    g = torch.Generator().manual_seed(seed)
    W = torch.randn(n, K, generator=g) * torch.exp(0.5 * torch.randn(K, generator=g))
    torch.manual_seed(seed)  # the bias init
    lin = torch.nn.Linear(K, n, bias=bias)
    res = ARBQuantizer(ARBConfig(method=method, blocksize=bs, **dict(cfg))).quantize(W)
    return BinarizedLinear.from_result(lin, res), res


def _layer(n=32, K=128, bs=64, method="arb", seed=0, bias=True, **cfg):
    """A quantized layer (cached: the partition search is the slow part on a loaded CPU)."""
    return _cached(n, K, bs, method, seed, bias, tuple(sorted(cfg.items())))


def _abs_terms(layer: BinarizedLinear) -> torch.Tensor:
    """Σ over a group's planes of |α|(|β|) + |μ| per entry: what fp16 rounding of the scales scales."""
    T = torch.zeros(layer.out_features, layer.in_features)
    for start, g in layer.groups:
        p = g.params
        t = sum(
            p["alpha"][k].abs()[:, None] * (p["beta"][k].abs()[None, :] if "beta" in p else 1.0) for k in range(g.order)
        )
        if "mu" in p:
            t = t + p["mu"].abs().sum(0)[:, None]
        T[:, start : start + g.mask.shape[1]] += t * g.mask
    return T


def _fp16_groups(layer: BinarizedLinear) -> BinarizedLinear:
    """The same layer with every scale rounded to fp16 (what the packed format stores)."""
    groups = []
    for start, g in layer.groups:
        g2 = copy.copy(g)
        g2.params = {k: (v if k == "B" else v.half().float()) for k, v in g.params.items()}
        groups.append((start, g2))
    return BinarizedLinear(layer.in_features, layer.out_features, groups, layer.bias)


def test_bits_round_trip():
    g = torch.Generator().manual_seed(0)
    bits = torch.rand(5, 96, generator=g) > 0.5
    bits[:, 31] = True  # the sign bit of an int32 word
    words = pack_bits(bits)
    assert words.dtype == torch.int32 and words.shape == (5, 3)
    assert torch.equal(unpack_bits(words), bits)
    assert torch.equal(unpack_bits(pack_bits(torch.zeros(64, dtype=torch.bool))), torch.zeros(64, dtype=torch.bool))


@pytest.mark.parametrize("method", ["plain", "arb", "arb_rc"])
def test_storage_equals_hand_count(method):
    """Default partition (salient columns, CGB, magnitude split): the stored bits are block_bits'."""
    layer, res = _layer(method=method)
    P = layer.pack_bits()
    assert P.payload_bits == res.bits
    n, K = P.shape
    # and by hand: 2 bit planes + column bitmap + plane 2 on salient columns + fp16 scales
    ks = sum(b.n_salient for b in res.blocks)
    scales = {"plain": 12 * n, "arb": 10 * n, "arb_rc": 6 * n + 6 * P.blocksize}[method] * len(res.blocks)
    assert P.payload_bits == 2 * n * K + K + n * ks + 16 * scales
    assert P.nbytes * 8 == P.payload_bits + 32 * K  # plus the derived s2_index


@pytest.mark.parametrize("method", ["plain", "arb", "arb_rc"])
def test_dequantize_equals_layer_with_fp16_scales(method):
    layer, _ = _layer(method=method)
    P = layer.pack_bits()
    ref = _fp16_groups(layer).weight
    torch.testing.assert_close(P.dequantize(), ref, rtol=1e-6, atol=1e-6 * float(ref.abs().max()))


@pytest.mark.parametrize(
    "cfg", [{"cgb": False}, {"split_quantiles": None}, {"max_salient_cols": 0}], ids=["no_cgb", "no_split", "no_sal"]
)
def test_other_partitions_pack_exactly(cfg):
    layer, res = _layer(n=16, K=64, bs=32, seed=2, **cfg)
    P = layer.pack_bits()
    ref = _fp16_groups(layer).weight
    torch.testing.assert_close(P.dequantize(), ref, rtol=1e-6, atol=1e-6 * float(ref.abs().max()))
    assert P.payload_bits >= res.bits  # missing groups keep their (zero) slots


def test_single_result_packs():
    g = torch.Generator().manual_seed(3)
    W = torch.randn(8, 64, generator=g)
    lin = torch.nn.Linear(64, 8, bias=False)
    for order in (1, 2):
        layer = BinarizedLinear.from_result(lin, binarize(W, method="arb", order=order))
        ref = _fp16_groups(layer).weight
        torch.testing.assert_close(layer.pack_bits().dequantize(), ref, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("method", ["plain", "arb", "arb_rc"])
def test_packed_layer_equals_binarized_layer(method):
    layer, _ = _layer(method=method)
    g = torch.Generator().manual_seed(5)
    x = torch.randn(3, 7, layer.in_features, generator=g)  # > 16 rows: the dequantize path
    packed = layer.to_packed(backend="reference")
    assert isinstance(packed, PackedBinaryLinear)
    for xx in (x, x[0, :2]):
        y, y0 = packed(xx), layer(xx)
        bound = FP16_REL * (xx.abs() @ _abs_terms(layer).t()) + 1e-6
        assert y.shape == y0.shape
        assert bool(((y - y0).abs() <= bound).all())


def test_bad_input():
    layer, _ = _layer(n=8, K=64, bs=32)
    P = layer.pack_bits()
    with pytest.raises(ValueError, match="x must be"):
        packed_gemv(torch.randn(2, 63), P)
    with pytest.raises(TypeError, match="x must be a float"):
        packed_gemv(torch.ones(2, 64, dtype=torch.int64), P)
    with pytest.raises(ValueError, match="multiple of 32"):
        pack_groups(48, 8, [(0, binarize(torch.randn(8, 48)))])
    g = binarize(torch.randn(8, 64))
    with pytest.raises(ValueError, match="disjoint"):
        pack_groups(64, 8, [(0, g), (0, g)])
    rc = binarize(torch.randn(8, 32), method="arb_rc")
    with pytest.raises(ValueError, match="mixing"):
        pack_groups(64, 8, [(0, binarize(torch.randn(8, 32))), (32, rc)])


@pytest.mark.triton
@pytest.mark.parametrize("method", ["plain", "arb", "arb_rc"])
def test_gemv_kernel_equals_reference(method):
    """8×128 layer with 64-column blocks (two words per tile), batch 2, bias: the kernel reads the
    bits like the spec."""
    layer, _ = _layer(n=8, K=128, bs=64, method=method, seed=6)
    P = layer.pack_bits()
    x = torch.randn(2, 128, generator=torch.Generator().manual_seed(7))
    y = packed_gemv(x, P, backend="triton")
    ref = packed_gemv_reference(x, P)
    # both sum 128 fp32 products; the order differs
    tol = 128 * 2.0**-23 * float((x.abs() @ P.dequantize().abs().t()).max()) + 1e-6
    torch.testing.assert_close(y, ref, rtol=0, atol=tol)


@pytest.mark.triton
def test_gemv_kernel_odd_rows_two_tiles_no_cgb():
    """Rows not a multiple of 32 (plane-2 words padded), several row tiles, with and without the
    split over columns, a partition without CGB."""
    layer, _ = _layer(n=40, K=64, bs=32, seed=8, bias=False, cgb=False)
    P = layer.pack_bits()
    x = torch.randn(1, 64, generator=torch.Generator().manual_seed(9))
    from iclr25.llm.arb.kernels import packed_gemv_triton

    tol = 64 * 2.0**-23 * float((x.abs() @ P.dequantize().abs().t()).max()) + 1e-6
    ref = packed_gemv_reference(x, P)
    torch.testing.assert_close(packed_gemv(x[0], P, backend="triton"), ref[0], rtol=0, atol=tol)  # split over K
    torch.testing.assert_close(packed_gemv_triton(x, P, block_n=4, split_k=1), ref, rtol=0, atol=tol)  # no split


@pytest.mark.triton
@pytest.mark.parametrize("method", ["plain", "arb_rc"])
def test_gemv_kernel_reads_non_contiguous_packed_tensors(method):
    """A PackedBinaryWeight built from strided tensors (same values, column-major storage): the kernel
    indexed them as dense row-major arrays and returned wrong sums."""
    import dataclasses

    layer, _ = _layer(n=8, K=64, bs=32, method=method, seed=11)
    P = layer.pack_bits()

    def strided(t):
        return t if t is None or t.dim() < 2 else t.transpose(0, 1).contiguous().transpose(0, 1)

    Q = dataclasses.replace(P, **{k: strided(getattr(P, k)) for k in ("signs", "gmap", "alpha", "mu", "beta")})
    assert not Q.signs.is_contiguous() and not Q.alpha.is_contiguous()
    x = torch.randn(2, 64, generator=torch.Generator().manual_seed(12))
    ref = packed_gemv_reference(x, P)
    tol = 64 * 2.0**-23 * float((x.abs() @ P.dequantize().abs().t()).max()) + 1e-6
    torch.testing.assert_close(packed_gemv(x, Q, backend="triton"), ref, rtol=0, atol=tol)


@pytest.mark.triton
def test_gemv_op_refuses_x_of_another_width():
    from iclr25.core.triton import BackendUnavailableError
    from iclr25.llm.arb.packed import PACKED_GEMV

    layer, _ = _layer(n=8, K=64, bs=32)
    P = layer.pack_bits()
    # the op called directly (packed_gemv checks this itself): the kernel read x rows of the wrong width
    for x in (torch.randn(2, 32), torch.randn(64)):
        with pytest.raises(BackendUnavailableError, match=r"x of shape \(batch, 64\)"):
            PACKED_GEMV(x, P, backend="triton")


@pytest.mark.gpu
@pytest.mark.parametrize("method", ["arb", "arb_rc"])
def test_gemv_kernel_cuda(method):
    layer, _ = _layer(n=256, K=1024, method=method, seed=10)
    P = layer.pack_bits().to("cuda")
    x = torch.randn(4, 1024, device="cuda", generator=torch.Generator("cuda").manual_seed(0)).half()
    y = packed_gemv(x, P, backend="triton")
    ref = packed_gemv_reference(x, P)
    tol = 1024 * 2.0**-23 * float((x.float().abs() @ P.dequantize().abs().t()).max()) + 1e-5
    torch.testing.assert_close(y, ref, rtol=0, atol=tol)
