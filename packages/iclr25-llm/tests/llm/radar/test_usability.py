"""Radar from a transformers user's side: cache life cycle in generate, input checks."""

from __future__ import annotations

import pytest
import torch

from iclr25.llm.lm import TinyLlama, TinyLlamaConfig
from iclr25.llm.lm._kv_compat import cache_kwarg
from iclr25.llm.radar import RadarConfig, RadarIndex, attention_recall, radar_attention

torch.set_num_threads(1)


def _hf(seed=0):
    torch.manual_seed(seed)
    tiny = TinyLlama(TinyLlamaConfig.preset("nano", vocab_size=64, n_kv_heads=2, init_std=0.2))
    return tiny.to_hf().eval()


def test_hf_radar_cache_does_not_leak_into_a_later_plain_cache():
    transformers = pytest.importorskip("transformers")
    from iclr25.llm.radar import hf_radar_cache

    hf = _hf()
    ids = torch.randint(1, 64, (2, 40))
    kw = dict(max_new_tokens=32, do_sample=False, output_scores=True, return_dict_in_generate=True, pad_token_id=0)
    name = cache_kwarg(hf)
    with torch.no_grad():
        ref = hf.generate(ids, **{name: transformers.DynamicCache()}, **kw)  # SDPA
        radar = hf_radar_cache(RadarConfig(target_tokens=4, recent_window=2), hf)
        hf.generate(ids, **{name: radar}, **kw)
        # the model still runs the "radar" attention function, but with a plain cache: SDPA exactly,
        # even at the step whose key length equals the (still alive) Radar cache's
        again = hf.generate(ids, **{name: transformers.DynamicCache()}, **kw)
    assert torch.equal(again.sequences, ref.sequences)
    assert torch.allclose(torch.stack(again.scores), torch.stack(ref.scores), atol=1e-5)


def test_hf_radar_cache_follows_beam_search_crop_and_reset():
    pytest.importorskip("transformers")
    from iclr25.llm.radar import hf_radar_cache

    hf = _hf()
    ids = torch.randint(1, 64, (2, 40))
    cache = hf_radar_cache(RadarConfig(target_tokens=4, recent_window=2), hf)
    with torch.no_grad():
        hf.generate(ids, **{cache_kwarg(hf): cache}, max_new_tokens=12, num_beams=3, do_sample=False, pad_token_id=0)

    def in_sync():
        return all(torch.equal(cache.radar.indices[i].keys, cache.layers[i].keys) for i in range(cache.radar.n_layers))

    assert cache.radar.indices[0].keys.shape[0] == 6 and in_sync()  # beams reordered with the cache
    cache.crop(-5)  # assisted decoding rolls rejected tokens back (negative: remove 5, every version)
    assert cache.radar.indices[0].t == cache.get_seq_length() and in_sync()
    cache.reset()
    assert [i.t for i in cache.radar.indices] == [0, 0]


def test_index_select_batch_and_truncate_are_exact():
    cfg = RadarConfig(target_tokens=8, recent_window=4)
    k = torch.randn(3, 2, 90, 16, generator=torch.Generator().manual_seed(0))
    idx = RadarIndex(cfg, 16).add(k[:, :, :50]).add(k[:, :, 50:])
    rows = torch.tensor([2, 0, 0])
    want = RadarIndex(cfg, 16).add(k[rows, :, :50]).add(k[rows, :, 50:])
    idx.select_batch(rows)
    assert torch.equal(idx.keys, want.keys) and torch.equal(idx.summaries, want.summaries)
    c, n_seg, summ = idx.c, idx.n_seg, idx.summaries
    idx.truncate(41)
    assert idx.t == 41 and idx.n_seg == min(n_seg, 41 // c) and idx.n_seg * idx.c <= 41
    assert torch.equal(idx.summaries, summ[:, :, : idx.n_seg])
    idx.search(torch.randn(3, 4, 1, 16))  # still searchable
    assert idx.truncate(0).t == 0 and idx.add(torch.randn(1, 2, 5, 16)).t == 5  # empty: any batch again


def test_radar_attention_rejects_a_selection_for_other_rows():
    cfg = RadarConfig(target_tokens=8, recent_window=4)
    k, v = torch.randn(2, 2, 60, 16), torch.randn(2, 2, 60, 16)
    q = torch.randn(2, 4, 1, 16)
    sel = RadarIndex(cfg, 16).add(k[:1]).search(q[:1])  # batch row 0 only
    with pytest.raises(ValueError, match="Selection"):
        radar_attention(q, k, v, sel)  # would silently attend row 0's keys for row 1
    with pytest.raises(TypeError, match="index"):
        radar_attention(q, k, v, "radar")
    with pytest.raises(ValueError, match="k and v"):
        radar_attention(q, k, v[:, :, :59], RadarIndex(cfg, 16).add(k))
    with pytest.raises(ValueError, match=r"q \(batch, heads\)"):
        attention_recall(q, k[:1], sel)  # would silently broadcast row 0's keys
    with pytest.raises(ValueError, match="selected"):
        attention_recall(q, k, torch.ones(2, 3, 1, 60, dtype=torch.bool))


def test_bad_seed_omega_and_model_are_named():
    with pytest.raises(ValueError, match="seed"):
        RadarConfig(seed="0")
    with pytest.raises(ValueError, match="omega"):
        RadarIndex(RadarConfig(projection_dim=4), 2, omega=[[1.0] * 4] * 2)
    pytest.importorskip("transformers")
    from iclr25.llm.radar import hf_radar_cache

    with pytest.raises(TypeError, match="PreTrainedModel"):
        hf_radar_cache(RadarConfig(), TinyLlama(TinyLlamaConfig.preset("pico")))
    hf = _hf()
    before = hf.config._attn_implementation
    with pytest.raises(TypeError, match="cfg"):
        hf_radar_cache(None, hf)
    assert hf.config._attn_implementation == before  # not switched to "radar" on a bad call


def test_radar_attention_values_of_another_head_dim():
    # _check_qkv lets v have its own head_dim (as masked_attention does); the gather path crashed on it
    g = torch.Generator().manual_seed(3)
    k, v, q = torch.randn(2, 2, 70, 16, generator=g), torch.randn(2, 2, 70, 8, generator=g), torch.randn(2, 4, 1, 16)
    idx = RadarIndex(RadarConfig(target_tokens=8, recent_window=4), 16).add(k)
    sel = idx.search(q)
    keep = torch.ones(2, 1, 1, 70, dtype=torch.bool)
    keep[1, ..., :9] = False
    got = radar_attention(q, k, v, sel, key_mask=keep)
    assert got.shape == (2, 4, 1, 8)
    assert torch.allclose(got, radar_attention(q, k, v, sel, key_mask=keep, backend="mask"), atol=1e-6)
    empty = RadarIndex(RadarConfig(), 16)
    assert radar_attention(q, k[:, :, :0], v[:, :, :0], empty).shape == (2, 4, 1, 8)
