"""Radar's Triton kernels against the torch reference (interpreter on CPU, real kernels on CUDA)."""

import pytest
import torch

from iclr25.core.triton import BackendUnavailableError, triton_available
from iclr25.llm.radar import RadarConfig, RadarIndex, Selection, masked_attention, radar_attention
from iclr25.llm.radar.attention import GATHER_ATTENTION
from iclr25.llm.radar.index import SEGMENT_SCORES
from iclr25.llm.radar.reference import gqa_segment_scores

pytestmark = pytest.mark.skipif(not triton_available(), reason="triton is not installed")

# fp32 throughout; both sides sum O(D) or O(L) positive terms, so they agree to a few ulps of
# float32 (~1e-6 relative); 1e-4 leaves room for different summation orders and exp rounding.
TOL = {"atol": 1e-4, "rtol": 1e-4}


def _cache(t=200, d=16, hkv=2, rep=2, nq=1, seed=0, device="cpu", dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    k = torch.randn(2, hkv, t, d, generator=g)
    v = torch.randn(2, hkv, t, d, generator=g)
    q = torch.randn(2, hkv * rep, nq, d, generator=g)
    return (x.to(device=device, dtype=dtype) for x in (q, k, v))


def _check_scores(device, d=16, projection_dim=None, dtype=torch.float32):
    q, k, _ = _cache(d=d, device=device, dtype=dtype)
    idx = RadarIndex(RadarConfig(target_tokens=24, recent_window=8, projection_dim=projection_dim), d).add(k.float())
    got = SEGMENT_SCORES(q, idx.omega, idx.summaries, d, backend="triton")
    want = gqa_segment_scores(q, idx.omega, idx.summaries, d)
    assert got.shape == (2, 4, 1, idx.n_seg) and got.dtype == torch.float32
    torch.testing.assert_close(got, want, **TOL)


def _check_attention(device, dtype=torch.float32, num_splits=None):
    from iclr25.llm.radar.kernels import gather_attention_triton

    q, k, v = _cache(nq=2, device=device, dtype=dtype)
    b, hkv, t, _ = k.shape
    c, sink_end, tail_start = 7, 2, 180
    # segment 0 overlaps the sinks and segment 25 (175..181) the tail: those positions must count once
    segs = torch.tensor([[0, 25, 10], [3, 4, 20]], device=device).expand(b, hkv, 2, 3)
    sel = Selection(segs, c, sink_end, tail_start, t, 28)
    keep = torch.ones(b, 1, 1, t, dtype=torch.bool, device=device)
    keep[1, ..., :30] = False  # left padding of the second sequence
    keep_full = keep.expand(b, hkv, 2, t)
    # fp16 outputs: both sides round the same fp32 value, so they differ by at most one fp16 ulp
    tol = TOL if dtype == torch.float32 else {"atol": 1e-3, "rtol": 1e-3}
    for mask in (None, keep_full):
        want = GATHER_ATTENTION(q, k, v, sel, mask, backend="reference")
        got = gather_attention_triton(q, k, v, segs, c, sink_end, tail_start, mask, num_splits=num_splits)
        assert got.dtype == q.dtype
        torch.testing.assert_close(got.float(), want.float(), **tol)
    dense = masked_attention(q, k, v, sel.mask() & keep_full)  # the dense definition, too
    got = radar_attention(q, k, v, sel, key_mask=keep, backend="triton")
    torch.testing.assert_close(got.float(), dense.float(), **tol)


# -- kernel 1: segment scoring --------------------------------------------------------------------
@pytest.mark.triton
def test_segment_scores_match_reference_interpreter():
    _check_scores("cpu")
    # head_dim and D off the power-of-two block sizes (masked tails in both loops)
    _check_scores("cpu", d=12, projection_dim=40)


@pytest.mark.triton
def test_segment_scores_fp16_queries_interpreter():
    q, k, _ = _cache()
    idx = RadarIndex(RadarConfig(target_tokens=24, recent_window=8), 16).add(k)
    qh = (q * 8).half()  # large logits: the kernel's max-shift must keep exp finite
    got = SEGMENT_SCORES(qh, idx.omega, idx.summaries, 16, backend="triton")
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got, gqa_segment_scores(qh, idx.omega, idx.summaries, 16), **TOL)


@pytest.mark.triton
def test_search_selects_planted_segments_exactly_interpreter():
    g = torch.Generator().manual_seed(3)
    d, t = 16, 200
    q = torch.randn(1, 4, 1, d, generator=g)
    k = 0.3 * torch.randn(1, 2, t, d, generator=g)
    cfg = RadarConfig(target_tokens=21, recent_window=8, num_sink_tokens=1)
    c = 7  # ⌊√200 / 2⌋
    planted = {0: [5, 11, 17], 1: [2, 9, 22]}
    for h, segs in planted.items():
        u = q[0, 2 * h : 2 * h + 2, 0].sum(0)  # the GQA group's common direction
        for s in segs:
            k[0, h, s * c : (s + 1) * c] += 3.0 * u / u.norm() * d**0.25
    idx = RadarIndex(cfg, d).add(k)
    assert idx.c == c and idx.topk() == 3
    ref = idx.search(q, backend="reference")
    tri = idx.search(q, backend="triton")
    assert torch.equal(tri.segments, ref.segments)
    for h, segs in planted.items():
        assert sorted(tri.segments[0, h, 0].tolist()) == segs
    # and the search + attention of radar_attention(..., backend="triton") run end to end
    v = torch.randn(1, 2, t, d, generator=g)
    torch.testing.assert_close(
        radar_attention(q, k, v, idx, backend="triton"), radar_attention(q, k, v, idx, backend="reference"), **TOL
    )


# -- kernel 2: gather attention -------------------------------------------------------------------
@pytest.mark.triton
def test_gather_attention_matches_reference_interpreter():
    _check_attention("cpu")
    _check_attention("cpu", num_splits=3)  # several splits: the merge of partial softmaxes


@pytest.mark.triton
def test_gather_attention_edge_cases_interpreter():
    from iclr25.llm.radar.kernels import gather_attention_triton

    q, k, v = _cache(t=40)
    b, hkv, t, _ = k.shape
    # no selected segment: sinks + tail only
    none = Selection(torch.zeros(b, hkv, 1, 0, dtype=torch.long), 5, 1, 30, t, 0)
    torch.testing.assert_close(
        radar_attention(q, k, v, none, backend="triton"), radar_attention(q, k, v, none, backend="reference"), **TOL
    )
    # a query whose every candidate is masked gets zeros, not NaN (as the reference)
    sel = Selection(torch.tensor([1, 2]).expand(b, hkv, 1, 2), 5, 1, 30, t, 6)
    keep = torch.ones(b, hkv, 1, t, dtype=torch.bool)
    keep[0] = False
    got = gather_attention_triton(q, k, v, sel.segments, 5, 1, 30, keep)
    assert torch.equal(got[0], torch.zeros_like(got[0])) and torch.isfinite(got).all()
    torch.testing.assert_close(got, GATHER_ATTENTION(q, k, v, sel, keep, backend="reference"), **TOL)


@pytest.mark.triton
def test_gather_attention_half_inputs_interpreter():
    _check_attention("cpu", dtype=torch.float16)


# -- dispatch and refusals --------------------------------------------------------------------------
@pytest.mark.triton
def test_triton_refuses_fp64_and_auto_stays_on_torch():
    q, k, v = _cache(t=40, dtype=torch.float64)
    idx = RadarIndex(RadarConfig(target_tokens=8, recent_window=4), 16).add(k)
    with pytest.raises(BackendUnavailableError, match="float64"):
        SEGMENT_SCORES(q, idx.omega, idx.summaries, 16, backend="triton")
    sel = idx.search(q)
    with pytest.raises(BackendUnavailableError, match="float64"):
        radar_attention(q, k, v, sel, backend="triton")
    # auto never runs the interpreter on CPU tensors: it picks the torch paths
    assert SEGMENT_SCORES.select(q.float(), idx.omega, idx.summaries.float(), 16).name == "reference"
    assert GATHER_ATTENTION.select(q, k, v, sel, None).name == "reference"
    with pytest.raises(ValueError, match="backend"):
        radar_attention(q, k, v, sel, backend="cuda")
    with pytest.raises(ValueError, match="backend"):
        RadarConfig(backend="fast")


@pytest.mark.triton
def test_fp64_omega_keeps_fp32_queries_on_the_kernel():
    # a caller's fp64 Ω is stored unrounded; fp32 queries still score through the fp32 kernel
    q, k, _ = _cache()
    omega = torch.randn(16, 256, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    idx = RadarIndex(RadarConfig(target_tokens=24, recent_window=8), 16, omega=omega).add(k)
    assert idx.omega.dtype == torch.float64 and idx.summaries.dtype == torch.float32
    tri, ref = idx.search(q, backend="triton"), idx.search(q, backend="reference")
    assert torch.equal(tri.segments.sort(-1).values, ref.segments.sort(-1).values)
    # fp64 queries on the same index score in fp64 on the torch path, never in the kernel
    with pytest.raises(BackendUnavailableError, match="float64"):
        idx.search(q.double(), backend="triton")
    assert idx.search(q.double()).segments.shape == ref.segments.shape


@pytest.mark.triton
def test_ops_refuse_inconsistent_shapes_instead_of_reading_out_of_bounds():
    # The exported ops called directly (RadarIndex.search and radar_attention check shapes themselves):
    # the kernels indexed by the shapes they were given and silently read past the tensors.
    q, k, v = _cache(t=60)
    idx = RadarIndex(RadarConfig(target_tokens=8, recent_window=4), 16).add(k)
    om, summ = idx.omega, idx.summaries
    for args in (
        (q, om, summ[:1]),  # summaries of batch 1 (the reference broadcasts them)
        (q[:, :3], om, summ),  # 3 query heads over 2 KV heads
        (q, om[:12], summ),  # omega rows != head_dim
        (q, om, summ[..., :40]),  # summaries' last dim != 2D
    ):
        with pytest.raises(BackendUnavailableError, match="fused scoring kernel takes queries"):
            SEGMENT_SCORES(*args, 16, backend="triton")
    b, hkv, t, _ = k.shape
    segs = torch.tensor([1, 4]).expand(b, hkv, 1, 2)
    sel = Selection(segs, 5, 1, 50, t, 12)
    for args, what in (
        ((q, k[:1], v[:1], sel, None), "one batch"),
        ((q[:, :3], k, v, sel, None), "multiple of k heads"),
        ((q.expand(-1, -1, 3, -1), k, v, sel, None), "selected segments"),  # segments for 1 query, q has 3
        ((q, k, v, Selection(segs, 5, 1, 50, t + 5, 12), None), "tail_start <= t"),
        ((q, k, v, Selection(segs, 5, 1, 70, t, 12), None), "tail_start <= t"),
        ((q, k, v, sel, torch.ones(b, 1, 1, t, dtype=torch.bool)), "key_mask of shape"),
    ):
        with pytest.raises(BackendUnavailableError, match=what):
            GATHER_ATTENTION(*args, backend="triton")
    # consistent inputs still run the kernels
    torch.testing.assert_close(
        SEGMENT_SCORES(q, om, summ, 16, backend="triton"), gqa_segment_scores(q, om, summ, 16), **TOL
    )
    torch.testing.assert_close(
        GATHER_ATTENTION(q, k, v, sel, None, backend="triton"),
        GATHER_ATTENTION(q, k, v, sel, None, backend="reference"),
        **TOL,
    )


@pytest.mark.gpu
def test_kernels_match_reference_cuda():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    _check_scores("cuda")
    _check_scores("cuda", d=12, projection_dim=40)
    _check_attention("cuda")
    _check_attention("cuda", num_splits=3)
    # a longer cache, head_dim 128, GQA 4, bf16 (the decode setting of the benchmark)
    g = torch.Generator().manual_seed(1)
    k = torch.randn(1, 2, 4096, 128, generator=g).cuda()
    v = torch.randn_like(k)
    q = torch.randn(1, 8, 1, 128, generator=g).cuda()
    idx = RadarIndex(RadarConfig(target_tokens=512, recent_window=64), 128).add(k)
    for dt in (torch.float32, torch.bfloat16):
        qq, kk, vv = q.to(dt), k.to(dt), v.to(dt)
        ref = idx.search(qq, backend="reference")
        tri = idx.search(qq, backend="triton")
        raw_t = SEGMENT_SCORES(qq, idx.omega, idx.summaries, 128, backend="triton")
        raw_r = gqa_segment_scores(qq, idx.omega, idx.summaries, 128)
        torch.testing.assert_close(raw_t, raw_r, **TOL)
        if dt == torch.float32:
            assert (tri.segments.sort(-1).values == ref.segments.sort(-1).values).float().mean() > 0.95
        got = radar_attention(qq, kk, vv, ref, backend="triton")
        want = radar_attention(qq, kk, vv, ref, backend="reference")
        tol = TOL if dt == torch.float32 else {"atol": 2e-2, "rtol": 2e-2}
        torch.testing.assert_close(got.float(), want.float(), **tol)
