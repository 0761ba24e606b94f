"""Radar: random features, exact fallbacks, segment bookkeeping, needle search, complexity, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from iclr25.llm.lm import KVCache, TinyLlama, TinyLlamaConfig
from iclr25.llm.lm._kv_compat import cache_kwarg
from iclr25.llm.radar import (
    RadarCache,
    RadarConfig,
    RadarIndex,
    attention_recall,
    feature_map,
    masked_attention,
    radar_attention,
    use_radar,
)
from iclr25.llm.radar.experiment import fit_exponent, planted_needle, work_curve

torch.set_num_threads(1)


def _full(q, k, v):
    return masked_attention(q, k, v, torch.ones(k.shape[0], k.shape[1], q.shape[2], k.shape[2], dtype=torch.bool))


# -- acceptance 1: random features ----------------------------------------------------------------
@pytest.mark.slow
def test_random_features_unbiased_100k_draws():
    # 100k draws of Ω with D = 16·d features each. Only Ωᵀq̃, Ωᵀk̃ matter and, for Gaussian Ω, they
    # are distributed as ZᵀEᵀx with E an orthonormal basis of span(q, k) and Z ~ N(0, I₂): an exact
    # reduction that makes 10⁸ feature samples affordable.
    g = torch.Generator().manual_seed(0)
    d = 64
    q, k = (
        0.7 * torch.randn(d, generator=g, dtype=torch.float64),
        0.7 * torch.randn(d, generator=g, dtype=torch.float64),
    )
    basis, _ = torch.linalg.qr(torch.stack([q, k], 1))
    qc, kc = basis.T @ q, basis.T @ k
    exact = math.exp(float(q @ k) / math.sqrt(d))
    draws, per = 100_000, 16 * d
    total, chunk = 0.0, 4_000
    for _ in range(draws // chunk):
        z = torch.randn(2, chunk * per, generator=g, dtype=torch.float64)
        total += float(feature_map(qc, z, head_dim=d, shift=0.0) @ feature_map(kc, z, head_dim=d, shift=0.0))
        # feature_map normalises by sqrt(2·chunk·per): the product is already the mean over the chunk
    est = total / (draws // chunk)
    assert abs(est / exact - 1) < 0.03, (est, exact)


def test_random_features_full_dimensional_within_mc_error():
    g = torch.Generator().manual_seed(1)
    d, n_feat = 64, 100_000
    q, k = (
        0.7 * torch.randn(d, generator=g, dtype=torch.float64),
        0.7 * torch.randn(d, generator=g, dtype=torch.float64),
    )
    omega = torch.randn(d, n_feat, generator=g, dtype=torch.float64)
    terms = feature_map(q, omega, shift=0.0) * feature_map(k, omega, shift=0.0) * (2 * n_feat)
    exact = math.exp(float(q @ k) / math.sqrt(d))
    se = float(terms.std()) / math.sqrt(terms.numel())
    assert abs(float(terms.mean()) - exact) < 5 * se


def test_max_shift_keeps_rankings():
    g = torch.Generator().manual_seed(2)
    d = 32
    omega = torch.randn(d, 8 * d, generator=g)
    keys = torch.randn(50, d, generator=g, dtype=torch.float64) * 3
    q = torch.randn(d, generator=g, dtype=torch.float64) * 3
    ref = feature_map(keys, omega.double(), shift=0.0) @ feature_map(q, omega.double(), shift=0.0)
    shifted = feature_map(keys.float(), omega, shift=torch.tensor(40.0)) @ feature_map(q.float(), omega)
    assert torch.equal(ref.argsort(), shifted.double().argsort())


# -- acceptance 2: exact fallbacks ----------------------------------------------------------------
@pytest.mark.parametrize("selector", ["radar", "oracle", "random"])
def test_budget_covers_context_equals_full_attention(selector):
    g = torch.Generator().manual_seed(3)
    k, v = torch.randn(2, 2, 300, 16, generator=g), torch.randn(2, 2, 300, 16, generator=g)
    q = torch.randn(2, 4, 1, 16, generator=g)  # GQA: 2 query heads per KV head
    idx = RadarIndex(RadarConfig(target_tokens=300, recent_window=8, selector=selector), 16).add(k)
    out = radar_attention(q, k, v, idx)
    assert torch.allclose(out, _full(q, k, v), atol=1e-6)


def test_gather_equals_mask_reference_small_budget():
    g = torch.Generator().manual_seed(4)
    k, v = torch.randn(1, 2, 500, 16, generator=g), torch.randn(1, 2, 500, 16, generator=g)
    q = torch.randn(1, 4, 3, 16, generator=g)
    sel = RadarIndex(RadarConfig(target_tokens=20, recent_window=8), 16).add(k).search(q)
    a, b = radar_attention(q, k, v, sel), radar_attention(q, k, v, sel, backend="mask")
    assert torch.allclose(a, b, atol=1e-6)
    assert not torch.allclose(a, _full(q, k, v), atol=1e-3)  # the budget really restricts


def _decode(model, cache, ids, steps):
    out = model(ids, past_key_values=cache)
    logits, nxt = [], out.logits[:, -1:].argmax(-1)
    for _ in range(steps):
        lg = model(nxt, past_key_values=cache).logits
        logits.append(lg)
        nxt = lg[:, -1:].argmax(-1)
    return torch.cat(logits, 1)


def test_tinyllama_radar_cache_equals_kvcache_32_steps():
    torch.manual_seed(0)
    cfg = TinyLlamaConfig.preset("nano", vocab_size=64, n_kv_heads=2)
    model = use_radar(TinyLlama(cfg)).eval()
    ids = torch.randint(0, 64, (2, 40))
    with torch.no_grad():
        ref = _decode(model, KVCache(), ids, 32)
        rc = RadarCache.for_model(RadarConfig(target_tokens=1024, recent_window=4), model)
        got = _decode(model, rc, ids, 32)
        small = RadarCache.for_model(RadarConfig(target_tokens=4, recent_window=2), model)
        restricted = _decode(model, small, ids, 32)
    assert torch.allclose(got, ref, atol=1e-5)
    assert rc.selections[0].scored > 0
    assert not torch.allclose(restricted, ref, atol=1e-5)


@pytest.mark.parametrize("padded", [False, True])
def test_hf_llama_radar_cache_equals_dynamic_cache(padded):
    transformers = pytest.importorskip("transformers")
    from iclr25.llm.radar import hf_radar_cache

    torch.manual_seed(0)
    tiny = TinyLlama(TinyLlamaConfig.preset("nano", vocab_size=64, n_kv_heads=2, init_std=0.2))  # GQA: 4 q / 2 kv
    hf = tiny.to_hf().eval()
    ids = torch.randint(1, 64, (2, 40))
    mask = torch.ones_like(ids)
    if padded:  # left padding: SDPA masks those keys at every step, so Radar's exact attention must too
        ids[1, :7], mask[1, :7] = 0, 0
    kw = dict(
        attention_mask=mask,
        max_new_tokens=32,
        do_sample=False,
        output_scores=True,
        return_dict_in_generate=True,
        pad_token_id=0,
    )
    name = cache_kwarg(hf)  # "cache" on transformers 5.x, "past_key_values" before
    with torch.no_grad():
        ref = hf.generate(ids, **{name: transformers.DynamicCache()}, **kw)
        cache = hf_radar_cache(RadarConfig(target_tokens=1024, recent_window=4), hf)
        got = hf.generate(ids, **{name: cache}, **kw)
        small = hf_radar_cache(RadarConfig(target_tokens=4, recent_window=2), hf)
        restricted = hf.generate(ids, **{name: small}, **kw)
    assert torch.equal(got.sequences, ref.sequences)
    assert torch.allclose(torch.stack(got.scores), torch.stack(ref.scores), atol=1e-4)
    assert cache.radar.selections and cache.radar.selections[1].scored > 0  # the radar path ran
    assert not torch.allclose(torch.stack(restricted.scores), torch.stack(ref.scores), atol=1e-4)


def test_key_mask_excludes_padding():
    g = torch.Generator().manual_seed(8)
    k, v = torch.randn(2, 2, 200, 16, generator=g), torch.randn(2, 2, 200, 16, generator=g)
    q = torch.randn(2, 4, 1, 16, generator=g)
    keep = torch.ones(2, 1, 1, 200, dtype=torch.bool)
    keep[1, ..., :30] = False
    idx = RadarIndex(RadarConfig(target_tokens=200, recent_window=8), 16).add(k)
    out = radar_attention(q, k, v, idx, key_mask=keep)
    want = masked_attention(q, k, v, keep.expand(2, 2, 1, 200))
    assert torch.allclose(out, want, atol=1e-6)
    assert torch.allclose(radar_attention(q, k, v, idx, key_mask=keep, backend="mask"), want, atol=1e-6)
    assert not torch.allclose(out[1], _full(q, k, v)[1], atol=1e-3)  # the mask really removes keys
    with pytest.raises(ValueError, match="key_mask"):
        radar_attention(q, k, v, idx, key_mask=keep.float())


# -- acceptance 3: selections and segment bookkeeping --------------------------------------------
def test_selection_contains_sinks_remainder_recent_and_segments_partition():
    g = torch.Generator().manual_seed(5)
    cfg = RadarConfig(target_tokens=16, recent_window=8, num_sink_tokens=2, projection_dim=16)
    idx = RadarIndex(cfg, 8)
    prev_rebuilds = 0
    for step in range(1, 700):
        idx.add(torch.randn(1, 2, 1 if step > 1 else 30, 8, generator=g))
        t = idx.t
        if idx.rebuilds != prev_rebuilds:  # just rebuilt: c = ⌊√t/a⌋
            assert idx.c == max(1, math.floor(math.sqrt(t) / 2))
            prev_rebuilds = idx.rebuilds
        b = idx.boundaries()
        assert all(e - s == idx.c for s, e in b) and all(b[i][1] == b[i + 1][0] for i in range(len(b) - 1))
        assert (not b or b[0][0] == 0) and 0 <= t - idx.n_seg * idx.c < idx.c  # segments + remainder = prefix
        # O(√t) segments: between rebuilds n_seg <= 2a²c + 1 with c <= √t/a; a rebuild whose floor keeps c
        # leaves t/c <= t/(√t/a - 1) <= 2a√t once t >= 4a² (a = 2 here)
        assert idx.n_seg <= 2 * 2 * math.sqrt(t) + 1
        sel = idx.search(torch.randn(1, 2, 1, 8, generator=g))
        m = sel.mask()
        assert m[..., :2].all() and m[..., max(0, t - 8) :].all() and m[..., idx.n_seg * idx.c :].all()
    assert idx.rebuilds >= 3


# -- acceptance 4: planted needle -----------------------------------------------------------------
@pytest.mark.slow
def test_planted_needle_radar_and_oracle_200_trials():
    res = planted_needle(trials=200, seed=0)
    assert res["radar"] >= 0.85, res
    assert res["oracle"] == 1.0, res


def test_planted_needle_radar_and_oracle():
    res = planted_needle(trials=20, seed=1)
    assert res["radar"] >= 0.85, res
    assert res["oracle"] == 1.0, res


# -- acceptance 5: O(√t) work ---------------------------------------------------------------------
@pytest.mark.parametrize("topk", [None, 4])
def test_work_per_step_exponent(topk):
    ts, work = work_curve(64 * 1024, topk_segments=topk)
    assert fit_exponent(ts, work) <= 0.6


# -- recall, bad input, dtypes --------------------------------------------------------------------
def test_attention_recall_matches_brute_force():
    g = torch.Generator().manual_seed(6)
    q, k = torch.randn(1, 2, 1, 8, generator=g), torch.randn(1, 2, 20, 8, generator=g)
    mask = torch.rand(1, 2, 1, 20, generator=g) > 0.5
    p = np.exp((q @ k.transpose(-1, -2)).numpy() / math.sqrt(8))
    want = (p * mask.numpy()).sum(-1) / p.sum(-1)
    assert np.allclose(attention_recall(q, k, mask).numpy(), want, atol=1e-6)
    full = torch.ones_like(mask)
    assert torch.allclose(attention_recall(q, k, full), torch.ones(1, 2, 1))


@pytest.mark.parametrize(
    "kw", [dict(target_tokens=-1), dict(aspect_ratio=0), dict(aspect_ratio=-1.0), dict(projection_dim=0)]
)
def test_bad_config(kw):
    with pytest.raises(ValueError):
        RadarConfig(**kw)


def test_bad_inputs():
    idx = RadarIndex(RadarConfig(), 16)
    with pytest.raises(ValueError, match="head_dim"):
        idx.add(torch.randn(1, 1, 4, 8))
    idx.add(torch.randn(1, 1, 4, 16))
    with pytest.raises(ValueError, match="head_dim"):
        idx.search(torch.randn(1, 1, 1, 8))
    with pytest.raises(FloatingPointError):
        idx.add(torch.full((1, 1, 1, 16), float("nan")))
    with pytest.raises(FloatingPointError):
        idx.search(torch.full((1, 1, 1, 16), float("nan")))
    with pytest.raises(ValueError, match="selector"):
        RadarConfig(selector="h2o")


def test_empty_and_short_cache_attend_recent_buffer():
    idx = RadarIndex(RadarConfig(recent_window=16, target_tokens=0), 8)
    q = torch.randn(1, 1, 1, 8)
    empty = torch.zeros(1, 1, 0, 8)
    assert torch.equal(radar_attention(q, empty, empty, idx), torch.zeros_like(q))
    k, v = torch.randn(1, 1, 10, 8), torch.randn(1, 1, 10, 8)
    idx.add(k)
    assert torch.allclose(radar_attention(q, k, v, idx), _full(q, k, v), atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_large_norm_keys(dtype):
    g = torch.Generator().manual_seed(7)
    d = 64
    k = torch.randn(1, 1, 256, d, generator=g)
    k = (30 * k / k.norm(dim=-1, keepdim=True)).to(dtype)
    q = (30 * k[:, :, 100:101].float() / 30).to(dtype)  # aligned with key 100
    idx = RadarIndex(RadarConfig(target_tokens=16, recent_window=4, num_sink_tokens=0), d).add(k)
    assert torch.isfinite(idx.summaries).all() and (idx.summaries > 0).any()
    sel = idx.search(q)
    assert sel.mask()[0, 0, 0, 100]


def test_feature_map_differentiable_and_equal_to_buffered_form():
    g = torch.Generator().manual_seed(9)
    x = torch.randn(3, 5, 16, generator=g, requires_grad=True)
    omega = torch.randn(16, 32, generator=g)
    phi = feature_map(x, omega)  # grad path: built with cat
    phi.sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()
    with torch.no_grad():  # buffered in-place path
        assert torch.allclose(feature_map(x, omega), phi.detach(), atol=1e-6)


def test_radar_cache_runs_with_grad_enabled():
    torch.manual_seed(1)
    model = use_radar(TinyLlama(TinyLlamaConfig.preset("pico", vocab_size=32)))
    cache = RadarCache.for_model(RadarConfig(target_tokens=4, recent_window=2), model)
    model(torch.randint(0, 32, (1, 40)), past_key_values=cache)
    out = model(torch.randint(0, 32, (1, 1)), past_key_values=cache).logits
    out.sum().backward()  # gradients flow through the exact attention, not the index
    assert cache.selections[0].scored > 0


# -- float64: computed in max(input dtype, fp32), never rounded to fp32 ---------------------------
def _brute_attention64(q, k, v, allowed):
    """Softmax attention over the allowed positions, one (batch, head, query) row at a time in fp64."""
    b, hq, nq, d = q.shape
    rep = hq // k.shape[1]
    out = torch.zeros(b, hq, nq, v.shape[-1], dtype=torch.float64)
    for i in range(b):
        for h in range(hq):
            for j in range(nq):
                pos = allowed[i, h // rep, j].nonzero().flatten()
                if pos.numel():
                    s = k[i, h // rep, pos].double() @ q[i, h, j].double() / math.sqrt(d)
                    out[i, h, j] = torch.softmax(s, 0) @ v[i, h // rep, pos].double()
    return out


def _cache64(t=300, d=16, seed=10):
    g = torch.Generator().manual_seed(seed)
    k = torch.randn(2, 2, t, d, generator=g, dtype=torch.float64)
    v = torch.randn(2, 2, t, d, generator=g, dtype=torch.float64)
    q = torch.randn(2, 4, 2, d, generator=g, dtype=torch.float64)  # GQA 2, two decoding queries
    return q, k, v


@pytest.mark.parametrize("backend", ["auto", "reference", "mask"])
@pytest.mark.parametrize("selector", ["radar", "oracle", "stream"])
def test_fp64_attention_over_selection_matches_fp64_brute_force(selector, backend):
    q, k, v = _cache64()
    idx = RadarIndex(RadarConfig(target_tokens=24, recent_window=8, selector=selector), 16).add(k)
    sel = idx.search(q)
    assert sel.attended < k.shape[2]  # the budget really restricts
    want = _brute_attention64(q, k, v, sel.mask())
    for index in (sel, idx):  # a precomputed selection, and the index searched inside radar_attention
        out = radar_attention(q, k, v, index, backend=backend)
        assert out.dtype == torch.float64
        torch.testing.assert_close(out, want, atol=1e-12, rtol=0)
    keep = torch.ones(2, 1, 1, k.shape[2], dtype=torch.bool)
    keep[1, ..., :40] = False  # left padding of the second sequence
    out = radar_attention(q, k, v, sel, backend=backend, key_mask=keep)
    assert out.dtype == torch.float64
    torch.testing.assert_close(out, _brute_attention64(q, k, v, sel.mask() & keep), atol=1e-12, rtol=0)


def test_fp64_search_scores_recall_and_omega_stay_fp64():
    from iclr25.llm.radar import feature_logits, gqa_segment_scores, segment_mass

    q, k, _ = _cache64()
    d, c, n_seg = 16, 7, 42
    s = q.unflatten(1, (2, 2)) @ k[:, :, None, : n_seg * c].transpose(-1, -2) / math.sqrt(d)
    w = torch.exp(s - s.amax(-1, keepdim=True)).unflatten(-1, (n_seg, c)).mean(-1).flatten(1, 2)
    mass = segment_mass(q, k.repeat_interleave(2, 1), c, n_seg)  # the oracle's scores
    assert mass.dtype == torch.float64
    torch.testing.assert_close(mass, w, atol=1e-14, rtol=1e-12)
    mask = torch.rand(2, 2, 2, k.shape[2], generator=torch.Generator().manual_seed(11)) > 0.5
    p = torch.softmax(q.unflatten(1, (2, 2)) @ k[:, :, None].transpose(-1, -2) / math.sqrt(d), -1).flatten(1, 2)
    rec = attention_recall(q, k, mask)
    assert rec.dtype == torch.float64
    torch.testing.assert_close(rec, (p * mask.repeat_interleave(2, 1)).sum(-1), atol=1e-13, rtol=0)
    # a float64 Ω given by the caller is used as given, not rounded to fp32
    omega = torch.randn(d, 64, generator=torch.Generator().manual_seed(12), dtype=torch.float64)
    idx = RadarIndex(RadarConfig(projection_dim=64, target_tokens=24, recent_window=8), d, omega=omega).add(k)
    assert idx.omega.dtype == torch.float64 and torch.equal(idx.omega, omega)
    assert idx.summaries.dtype == torch.float64
    logits = feature_logits(k[:, :, : idx.n_seg * idx.c], omega)
    phi = torch.exp(logits - idx.shift) / math.sqrt(logits.shape[-1])
    torch.testing.assert_close(idx.summaries, phi.unflatten(2, (idx.n_seg, idx.c)).mean(3), atol=1e-14, rtol=1e-12)
    raw = gqa_segment_scores(q, idx.omega, idx.summaries, d)
    assert raw.dtype == torch.float64
    phi_q = torch.exp(feature_logits(q, omega, head_dim=d) - feature_logits(q, omega, head_dim=d).amax(-1, True))
    want = phi_q / math.sqrt(128) @ idx.summaries.repeat_interleave(2, 1).transpose(-1, -2)
    torch.testing.assert_close(raw, want, atol=1e-14, rtol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_low_precision_attention_still_computed_in_fp32(dtype):
    q, k, v = (x.to(dtype) for x in _cache64())
    sel = RadarIndex(RadarConfig(target_tokens=24, recent_window=8), 16).add(k).search(q)
    up = [x.float() for x in (q, k, v)]
    for backend in ("reference", "mask"):
        out = radar_attention(q, k, v, sel, backend=backend)
        assert out.dtype == dtype
        # fp32 inputs give exactly the fp32 computation; bf16/fp16 ones are upcast to it, then rounded
        assert torch.equal(out, radar_attention(*up, sel, backend=backend).to(dtype))
    assert attention_recall(q, k, sel).dtype == torch.float32


def test_fp64_tinyllama_radar_cache_equals_kvcache():
    torch.manual_seed(0)
    cfg = TinyLlamaConfig.preset("nano", vocab_size=64, n_kv_heads=2)
    model = use_radar(TinyLlama(cfg)).double().eval()
    ids = torch.randint(0, 64, (2, 40))
    with torch.no_grad():
        ref = _decode(model, KVCache(), ids, 8)
        rc = RadarCache.for_model(RadarConfig(target_tokens=1024, recent_window=4), model)
        got = _decode(model, rc, ids, 8)
    assert got.dtype == torch.float64 and rc.selections[0].scored > 0
    torch.testing.assert_close(got, ref, atol=1e-12, rtol=0)
