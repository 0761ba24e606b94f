"""Radar KV caches: one for the toolkit's TinyLlama and one for Hugging Face LLaMA/Mistral models.

Both keep every cached key/value (nothing is evicted); prefill uses full attention and each
single-token decoding step attends exactly to the tokens its layer's :class:`RadarIndex` selects.
"""

from __future__ import annotations

import logging
import weakref

import torch

from iclr25.llm.lm.model import KVCache, TinyLlama, default_attention

from .attention import radar_attention
from .config import RadarConfig
from .index import RadarIndex, Selection

__all__ = ["RadarCache", "hf_radar_cache", "radar_attention_fn", "use_radar"]

log = logging.getLogger(__name__)
_HF_EXTRA = "pip install 'iclr25-llm[transformers]'"


class _Layers:
    """Per-layer indices sharing one projection Ω (the official code shares it across layers)."""

    def __init__(self, cfg: RadarConfig, n_layers: int, n_kv_heads: int, head_dim: int) -> None:
        if not isinstance(cfg, RadarConfig):
            raise TypeError(f"cfg must be a RadarConfig; got {type(cfg).__name__}")
        for name, v in (("n_layers", n_layers), ("n_kv_heads", n_kv_heads), ("head_dim", head_dim)):
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive int; got {v!r}")
        self.cfg, self.n_layers, self.n_kv_heads, self.head_dim = cfg, n_layers, n_kv_heads, head_dim
        first = RadarIndex(cfg, head_dim)
        self.indices = [first] + [RadarIndex(cfg, head_dim, omega=first.omega) for _ in range(n_layers - 1)]
        self.selections: dict[int, Selection] = {}

    def add_keys(self, layer: int, k: torch.Tensor) -> RadarIndex:
        if not 0 <= layer < self.n_layers:
            raise ValueError(f"layer must be in [0, {self.n_layers}); got {layer}")
        if k.shape[1] != self.n_kv_heads or k.shape[-1] != self.head_dim:
            raise ValueError(
                f"keys must have {self.n_kv_heads} KV heads of dim {self.head_dim}; got shape {tuple(k.shape)}"
            )
        return self.indices[layer].add(k)

    def select_batch(self, indices: torch.Tensor) -> None:
        for idx in self.indices:
            idx.select_batch(indices)
        self.selections.clear()

    def truncate(self, lengths: list[int]) -> None:
        for idx, n in zip(self.indices, lengths, strict=True):
            idx.truncate(n)
        self.selections.clear()

    def attend(
        self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        sel = self.indices[layer].search(q, backend=self.cfg.backend)
        self.selections[layer] = sel
        return radar_attention(q, k, v, sel, key_mask=key_mask, backend=self.cfg.backend)


class RadarCache(KVCache):
    """Radar KV cache for :class:`~iclr25.llm.lm.TinyLlama` (a drop-in for its ``KVCache``).

    Parameters
    ----------
    cfg : RadarConfig
    n_layers, n_kv_heads, head_dim : int
        Shape of the model's cache.

    Notes
    -----
    Call :func:`use_radar` on the model once so its attention consults the cache's indices;
    without it the cache behaves as a plain ``KVCache``.

    Examples
    --------
    >>> from iclr25.llm.lm import TinyLlama, TinyLlamaConfig
    >>> model = use_radar(TinyLlama(TinyLlamaConfig.preset("pico")))
    >>> cache = RadarCache(RadarConfig(target_tokens=8, recent_window=4), 1, 2, 16)
    >>> _ = model(torch.zeros(1, 40, dtype=torch.long), past_key_values=cache)
    >>> model(torch.zeros(1, 1, dtype=torch.long), past_key_values=cache).logits.shape
    torch.Size([1, 1, 256])
    """

    def __init__(self, cfg: RadarConfig, n_layers: int, n_kv_heads: int, head_dim: int) -> None:
        super().__init__()
        self.radar = _Layers(cfg, n_layers, n_kv_heads, head_dim)

    @property
    def cfg(self) -> RadarConfig:
        """The configuration."""
        return self.radar.cfg

    @property
    def indices(self) -> list[RadarIndex]:
        """One :class:`RadarIndex` per layer."""
        return self.radar.indices

    @property
    def selections(self) -> dict[int, Selection]:
        """The last decoding step's selection per layer."""
        return self.radar.selections

    @classmethod
    def for_model(cls, cfg: RadarConfig, model: TinyLlama) -> RadarCache:
        """A cache shaped for ``model`` (TinyLlama)."""
        c = model.config
        return cls(cfg, c.n_layers, c.n_kv_heads, c.head_dim)

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Index the new keys, store the values and return the full ``(k, v)`` of the layer."""
        idx = self.radar.add_keys(layer, k)
        vv = v if layer not in self._v else torch.cat([self._v[layer], v], dim=2)
        self._k[layer], self._v[layer] = idx.keys, vv
        return idx.keys, vv


def radar_attention_fn(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cache: KVCache | None, layer_idx: int
) -> torch.Tensor:
    """TinyLlama attention backend: exact prefill, Radar attention for single-token decoding.

    Same signature as :func:`iclr25.llm.lm.model.default_attention`; with a cache that is not a
    :class:`RadarCache` it is exactly ``default_attention``.
    """
    if not isinstance(cache, RadarCache):
        return default_attention(q, k, v, cache, layer_idx)
    prefix = cache.radar.indices[layer_idx].t
    kf, vf = cache.append(layer_idx, k, v)
    if q.shape[2] == 1 and prefix > 0:
        return cache.radar.attend(layer_idx, q, kf, vf)
    return default_attention(q, kf, vf, None, layer_idx)


def use_radar(model: TinyLlama) -> TinyLlama:
    """Route every attention layer of a TinyLlama through :func:`radar_attention_fn` (in place).

    Returns
    -------
    TinyLlama
        ``model``; with a plain ``KVCache`` (or none) its outputs are unchanged.
    """
    if not isinstance(model, TinyLlama):
        raise TypeError(f"model must be a TinyLlama; got {type(model).__name__}")
    for layer in model.layers:
        layer.self_attn.attention_fn = radar_attention_fn
    return model


# -- Hugging Face ---------------------------------------------------------------------------------
_ACTIVE: weakref.ref | None = None  # the RadarCache whose update() ran last (same forward pass)
_HF_CLASS = None


def _dead() -> None:
    return None


def _key_padding_mask(attention_mask: torch.Tensor | None, t: int) -> torch.Tensor | None:
    """The decoding step's (B, 1, 1, t) bool "may attend" mask from the SDPA-format mask, or None.

    ``generate`` builds a mask whenever the prompt holds padding (any ``pad_token_id`` in the
    input ids counts): SDPA honours it, so Radar's exact attention has to as well.
    """
    if attention_mask is None:
        return None
    m = attention_mask[..., -1:, :t]  # the (only) decoding query's row
    if m.dtype != torch.bool:  # additive float mask: 0 where allowed, a large negative value where not
        m = m > torch.finfo(m.dtype).min / 2
    if m.dim() == 2:
        m = m[:, None, None]
    return None if bool(m.all()) else m[:, :1]


def _hf_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """``transformers`` attention function "radar": Radar on single-token decoding, SDPA otherwise."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    cache = _ACTIVE() if _ACTIVE is not None else None
    layer = getattr(module, "layer_idx", None)
    # ``key`` must be what this cache's update() returned for the layer: a later forward with
    # another cache (or none) leaves _ACTIVE pointing at this one, and must not use its index
    if (
        cache is not None
        and query.shape[2] == 1
        and layer is not None
        and cache._radar_returned.get(layer, _dead)() is key
        and cache.radar.indices[layer].t == key.shape[2]
    ):
        if scaling is not None and abs(scaling * query.shape[-1] ** 0.5 - 1.0) > 1e-6:
            raise ValueError(f"radar attention assumes scaling 1/sqrt(head_dim); got {scaling}")
        key_mask = _key_padding_mask(attention_mask, key.shape[2])
        out = cache.radar.attend(layer, query, key, value, key_mask=key_mask)
        return out.transpose(1, 2).contiguous(), None
    return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)


def _hf_class():
    global _HF_CLASS
    if _HF_CLASS is not None:
        return _HF_CLASS
    try:
        from transformers import AttentionInterface, DynamicCache
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(f"the Hugging Face Radar cache needs transformers: {_HF_EXTRA} ({e})") from e

    class HFRadarCache(DynamicCache):
        """``transformers.DynamicCache`` that also maintains Radar indices (see :func:`hf_radar_cache`)."""

        def __init__(self, cfg: RadarConfig, n_layers: int, n_kv_heads: int, head_dim: int) -> None:
            super().__init__()
            self.radar = _Layers(cfg, n_layers, n_kv_heads, head_dim)
            self._radar_returned: dict[int, weakref.ref] = {}  # the full keys update() last returned

        def update(self, key_states, value_states, layer_idx, *args, **kwargs):
            global _ACTIVE
            k, v = super().update(key_states, value_states, layer_idx, *args, **kwargs)
            self.radar.add_keys(layer_idx, key_states)
            self._radar_returned[layer_idx] = weakref.ref(k)
            _ACTIVE = weakref.ref(self)
            return k, v

        # generate() rearranges or shortens the cache (beam search, assisted decoding, reuse): the
        # indices follow, so every search runs on the keys the cache really holds
        def reorder_cache(self, beam_idx):
            super().reorder_cache(beam_idx)
            self.radar.select_batch(beam_idx)

        def batch_select_indices(self, indices):
            super().batch_select_indices(indices)
            self.radar.select_batch(indices)

        def batch_repeat_interleave(self, repeats):
            super().batch_repeat_interleave(repeats)
            b = next((i.keys.shape[0] for i in self.radar.indices if i.keys is not None), 0)
            self.radar.select_batch(torch.arange(b).repeat_interleave(repeats))

        def crop(self, *args, **kwargs):
            super().crop(*args, **kwargs)
            self.radar.truncate([self.get_seq_length(i) for i in range(self.radar.n_layers)])

        def reset(self):
            super().reset()
            self.radar.truncate([0] * self.radar.n_layers)

    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register("radar", _hf_attention)
    AttentionMaskInterface.register("radar", sdpa_mask)  # prefill falls back to SDPA: same mask format
    _HF_CLASS = HFRadarCache
    return HFRadarCache


def hf_radar_cache(cfg: RadarConfig, model) -> object:
    """A Radar cache for a Hugging Face LLaMA/Mistral-style causal LM; switches ``model`` to it.

    Registers the ``"radar"`` attention function with ``transformers.AttentionInterface`` and sets
    ``model``'s attention implementation to it (prefill and multi-token steps use SDPA exactly).

    Parameters
    ----------
    cfg : RadarConfig
    model : transformers.PreTrainedModel
        Decoder whose attention modules expose ``layer_idx`` (LLaMA, Mistral, Qwen2 …).

    Returns
    -------
    HFRadarCache
        A ``transformers.DynamicCache`` subclass; pass it to ``generate`` as ``cache=`` (transformers
        5.x) or ``past_key_values=`` (4.x).
    """
    if not hasattr(model, "set_attn_implementation") or not hasattr(model, "config"):
        raise TypeError(
            f"model must be a transformers PreTrainedModel (for TinyLlama use RadarCache.for_model); "
            f"got {type(model).__name__}"
        )
    cls = _hf_class()
    c = model.config.get_text_config(decoder=True) if hasattr(model.config, "get_text_config") else model.config
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    n_kv = getattr(c, "num_key_value_heads", None) or c.num_attention_heads
    cache = cls(cfg, c.num_hidden_layers, n_kv, head_dim)  # validates cfg before the model is switched
    model.set_attn_implementation("radar")
    return cache
