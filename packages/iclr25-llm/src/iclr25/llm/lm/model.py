"""TinyLlama: a LLaMA-style decoder small enough to train on a 2-core CPU, with HF-LLaMA module names.

::

    input_ids ─► model.embed_tokens ─► [ model.layers[i]:
                     x += self_attn(input_layernorm(x))      (RoPE, GQA, causal, KV cache)
                     x += mlp(post_attention_layernorm(x)) ] (SwiGLU)
               ─► model.norm ─► lm_head ─► logits

Every parameter name equals the one in ``transformers.LlamaForCausalLM``, so the state dicts
convert one-to-one (:meth:`TinyLlama.to_hf` / :meth:`TinyLlama.from_hf`) and routines written
for HF models (``replace_linears``, ``sequential_ptq``) run unchanged on both.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from iclr25.core.device import compute_dtype

from .tokenizers import check_ids

__all__ = [
    "PRESETS",
    "Attention",
    "CausalLMOutput",
    "DecoderLayer",
    "KVCache",
    "RMSNorm",
    "SwiGLU",
    "TinyLlama",
    "TinyLlamaConfig",
    "apply_rope",
    "default_attention",
    "rope_cos_sin",
]

PRESETS: dict[str, dict[str, int]] = {
    "pico": {"d_model": 32, "n_layers": 1, "n_heads": 2},  # ~30k params, draft-model size
    "nano": {"d_model": 64, "n_layers": 2, "n_heads": 4},  # ~133k params
    "micro": {"d_model": 128, "n_layers": 4, "n_heads": 4},  # ~0.87M params
}

_HF_EXTRA = "pip install 'iclr25-llm[transformers]'"


@dataclass
class TinyLlamaConfig:
    """Shape of a :class:`TinyLlama`.

    Attributes
    ----------
    vocab_size : int
        Number of token ids (256 for :class:`~iclr25.llm.lm.tokenizers.ByteTokenizer`).
    d_model : int
        Hidden size.
    n_layers : int
        Number of decoder blocks.
    n_heads : int
        Query heads; ``d_model`` must be divisible by it.
    n_kv_heads : int or None
        Key/value heads (grouped-query attention); None means ``n_heads``.
    ffn_hidden : int or None
        SwiGLU hidden size; None means ``8/3 · d_model`` rounded up to a multiple of 16.
    max_seq_len : int
        Longest sequence (prompt plus cache) the model accepts.
    rope_theta : float
        RoPE base θ.
    norm_eps : float
        RMSNorm ε.
    tie_embeddings : bool
        Share ``lm_head.weight`` with ``model.embed_tokens.weight``.
    init_std : float
        Standard deviation of the normal initialisation of every weight matrix.
    """

    vocab_size: int = 256
    d_model: int = 128
    n_layers: int = 4
    n_heads: int = 4
    n_kv_heads: int | None = None
    ffn_hidden: int | None = None
    max_seq_len: int = 1024
    rope_theta: float = 1e4
    norm_eps: float = 1e-6
    tie_embeddings: bool = False
    init_std: float = 0.02

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "n_layers", "n_heads", "max_seq_len"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive int; got {v!r}")
        if self.n_kv_heads is None:
            self.n_kv_heads = self.n_heads
        if self.ffn_hidden is None:
            self.ffn_hidden = 16 * math.ceil(8 * self.d_model / 3 / 16)
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} must be divisible by n_heads={self.n_heads}")
        if (self.d_model // self.n_heads) % 2:
            raise ValueError(f"head dim d_model/n_heads={self.d_model // self.n_heads} must be even for RoPE")
        if not isinstance(self.n_kv_heads, int) or self.n_kv_heads < 1 or self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_kv_heads must divide n_heads={self.n_heads}; got {self.n_kv_heads!r}")
        if not isinstance(self.ffn_hidden, int) or self.ffn_hidden < 1:
            raise ValueError(f"ffn_hidden must be a positive int or None; got {self.ffn_hidden!r}")
        # NaN fails every comparison below, so it is rejected too
        if not (isinstance(self.rope_theta, numbers.Real) and 0 < self.rope_theta < math.inf):
            raise ValueError(f"rope_theta must be a finite number > 0; got {self.rope_theta!r}")
        if not (isinstance(self.norm_eps, numbers.Real) and 0 <= self.norm_eps < math.inf):
            raise ValueError(f"norm_eps must be a finite number >= 0; got {self.norm_eps!r}")
        if not (isinstance(self.init_std, numbers.Real) and 0 <= self.init_std < math.inf):
            raise ValueError(f"init_std must be a finite number >= 0; got {self.init_std!r}")

    @property
    def head_dim(self) -> int:
        """``d_model // n_heads``."""
        return self.d_model // self.n_heads

    @classmethod
    def preset(cls, name: str, **overrides) -> TinyLlamaConfig:
        """A named size: ``"pico"`` (d=32, L=1, h=2), ``"nano"`` (d=64, L=2, h=4), ``"micro"`` (d=128, L=4, h=4).

        Keyword ``overrides`` replace any field (e.g. ``vocab_size=512`` for a BPE vocabulary).
        """
        if name not in PRESETS:
            raise ValueError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
        return cls(**{**PRESETS[name], **overrides})


class KVCache:
    """Per-layer key/value cache for incremental decoding.

    Keys and values are stored post-RoPE with shape ``(batch, n_kv_heads, seq, head_dim)``.
    """

    def __init__(self) -> None:
        self._k: dict[int, torch.Tensor] = {}
        self._v: dict[int, torch.Tensor] = {}

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append new ``k, v`` (``(batch, heads, new, head_dim)``) and return the full cached pair."""
        if layer in self._k:
            k = torch.cat([self._k[layer], k], dim=2)
            v = torch.cat([self._v[layer], v], dim=2)
        self._k[layer], self._v[layer] = k, v
        return k, v

    def get(self, layer: int) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Cached ``(k, v)`` of a layer, or None before its first append."""
        return (self._k[layer], self._v[layer]) if layer in self._k else None

    @property
    def seq_len(self) -> int:
        """Number of cached positions (of the first layer; 0 when empty)."""
        return int(next(iter(self._k.values())).shape[2]) if self._k else 0

    def __len__(self) -> int:
        return self.seq_len


@dataclass
class CausalLMOutput:
    """What :meth:`TinyLlama.forward` returns (attribute names follow ``transformers``).

    Attributes
    ----------
    logits : (batch, seq, vocab) tensor
    past_key_values : KVCache or None
    """

    logits: torch.Tensor
    past_key_values: KVCache | None = None


class RMSNorm(nn.Module):
    """RMSNorm with a learnable gain, computed in fp32 as in HF LLaMA (fp64 inputs stay fp64)."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        h = x.to(compute_dtype(dtype))
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(dtype)


def rope_cos_sin(
    positions: torch.Tensor, head_dim: int, theta: float, dtype: torch.dtype = torch.float32
) -> tuple[torch.Tensor, torch.Tensor]:
    """RoPE tables for integer ``positions`` ``(seq,)``: ``cos, sin`` of shape ``(seq, head_dim)``.

    Frequencies ``θ^(-2i/d)`` are duplicated across the two halves (the rotate-half convention of
    HF LLaMA, not the interleaved one of the original paper's code). Computed in fp32, or in fp64
    for ``dtype=float64``: fp32 angles are off by ~1e-4 rad at position 1000, far above fp64 noise.
    """
    work = compute_dtype(dtype)
    inv_freq = 1.0 / (
        theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64, device=positions.device).to(work) / head_dim)
    )
    freqs = positions.to(work)[:, None] * inv_freq[None, :]
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate ``x`` ``(batch, heads, seq, head_dim)`` by the tables of :func:`rope_cos_sin`."""
    return x * cos + _rotate_half(x) * sin


def default_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cache: KVCache | None, layer_idx: int
) -> torch.Tensor:
    """Causal softmax attention through ``F.scaled_dot_product_attention`` (flash kernels on CUDA).

    Parameters
    ----------
    q : (batch, n_heads, new, head_dim) tensor
        Queries of the new positions (RoPE applied).
    k, v : (batch, n_kv_heads, new, head_dim) tensors
        Keys/values of the new positions; appended to ``cache`` when one is given.
    cache : KVCache or None
    layer_idx : int

    Returns
    -------
    (batch, n_heads, new, head_dim) tensor
    """
    if cache is not None:
        k, v = cache.append(layer_idx, k, v)
    n_rep = q.shape[1] // k.shape[1]
    if n_rep > 1:
        k = k.repeat_interleave(n_rep, dim=1)
        v = v.repeat_interleave(n_rep, dim=1)
    t_q, t_k = q.shape[2], k.shape[2]
    if t_q == t_k:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    if t_q == 1:  # one new token sees the whole cache
        return F.scaled_dot_product_attention(q, k, v)
    # new queries sit at the end of the key sequence: bottom-right aligned causal mask
    mask = torch.ones(t_q, t_k, dtype=torch.bool, device=q.device).tril(diagonal=t_k - t_q)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


AttentionFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, "KVCache | None", int], torch.Tensor]


class Attention(nn.Module):
    """Multi-head (grouped-query) self-attention with RoPE; ``attention_fn`` is swappable.

    Replace ``self_attn.attention_fn`` with any callable of :func:`default_attention`'s signature
    to change how attention is computed (e.g. approximate long-context attention).
    """

    def __init__(self, cfg: TinyLlamaConfig, layer_idx: int) -> None:
        super().__init__()
        d, hd = cfg.d_model, cfg.head_dim
        self.n_heads, self.n_kv_heads, self.head_dim = cfg.n_heads, cfg.n_kv_heads, hd
        self.layer_idx = layer_idx
        self.q_proj = nn.Linear(d, cfg.n_heads * hd, bias=False)
        self.k_proj = nn.Linear(d, cfg.n_kv_heads * hd, bias=False)
        self.v_proj = nn.Linear(d, cfg.n_kv_heads * hd, bias=False)
        self.o_proj = nn.Linear(cfg.n_heads * hd, d, bias=False)
        self.attention_fn: AttentionFn = default_attention

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, cache: KVCache | None = None
    ) -> torch.Tensor:
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.n_kv_heads, self.head_dim).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        out = self.attention_fn(q, k, v, cache, self.layer_idx)
        return self.o_proj(out.transpose(1, 2).reshape(b, t, self.n_heads * self.head_dim))


class SwiGLU(nn.Module):
    """``down_proj(silu(gate_proj(x)) * up_proj(x))``."""

    def __init__(self, d: int, hidden: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(d, hidden, bias=False)
        self.up_proj = nn.Linear(d, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, d, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    """Pre-norm block: attention and SwiGLU, each with a residual connection."""

    def __init__(self, cfg: TinyLlamaConfig, layer_idx: int) -> None:
        super().__init__()
        self.self_attn = Attention(cfg, layer_idx)
        self.mlp = SwiGLU(cfg.d_model, cfg.ffn_hidden)
        self.input_layernorm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.d_model, cfg.norm_eps)

    def forward(
        self, hidden_states: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, cache: KVCache | None = None
    ) -> torch.Tensor:
        h = hidden_states + self.self_attn(self.input_layernorm(hidden_states), cos, sin, cache)
        return h + self.mlp(self.post_attention_layernorm(h))


class _Backbone(nn.Module):
    def __init__(self, cfg: TinyLlamaConfig) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.layers = nn.ModuleList(DecoderLayer(cfg, i) for i in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.d_model, cfg.norm_eps)


class TinyLlama(nn.Module):
    """LLaMA-architecture causal LM (RMSNorm, RoPE, GQA, SwiGLU, no biases).

    Parameters
    ----------
    config : TinyLlamaConfig
        Use :meth:`TinyLlamaConfig.preset` for the named sizes.

    Examples
    --------
    >>> model = TinyLlama(TinyLlamaConfig.preset("pico"))
    >>> model(torch.zeros(2, 5, dtype=torch.long)).logits.shape
    torch.Size([2, 5, 256])
    """

    def __init__(self, config: TinyLlamaConfig) -> None:
        super().__init__()
        if not isinstance(config, TinyLlamaConfig):
            raise TypeError(f"config must be a TinyLlamaConfig; got {type(config).__name__}")
        self.config = config
        self.model = _Backbone(config)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.reset_parameters()
        if config.tie_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight

    def reset_parameters(self) -> None:
        """Normal(0, ``init_std``) weights, unit norm gains (the HF LLaMA initialisation)."""
        for m in self.modules():
            if isinstance(m, nn.Linear | nn.Embedding):
                nn.init.normal_(m.weight, 0.0, self.config.init_std)
            elif isinstance(m, RMSNorm):
                nn.init.ones_(m.weight)

    @property
    def layers(self) -> nn.ModuleList:
        """The decoder blocks (``model.layers``)."""
        return self.model.layers

    def num_parameters(self) -> int:
        """Number of distinct parameters (tied weights counted once)."""
        return sum(p.numel() for p in self.parameters())

    def forward(
        self,
        input_ids: torch.Tensor,
        past_key_values: KVCache | None = None,
        use_cache: bool = False,
        position_offset: int | None = None,
        **unused,
    ) -> CausalLMOutput:
        """Logits for every position.

        Parameters
        ----------
        input_ids : (batch, seq) long tensor
            Ids in ``[0, vocab_size)``.
        past_key_values : KVCache, optional
            Cache of earlier positions; new keys/values are appended to it.
        use_cache : bool
            Create a cache when none is given and return it.
        position_offset : int, optional
            Position of ``input_ids[:, 0]``; defaults to the cache length (0 without a cache).
        **unused
            Ignored keyword arguments (``attention_mask`` …) so HF-style call sites work; a mask
            with any zero is rejected since padding is not supported.

        Returns
        -------
        CausalLMOutput
            ``logits`` ``(batch, seq, vocab)`` and ``past_key_values``.
        """
        if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2:
            shape = tuple(input_ids.shape) if isinstance(input_ids, torch.Tensor) else type(input_ids).__name__
            raise ValueError(f"input_ids must be a (batch, seq) integer tensor; got {shape}")
        input_ids = check_ids(input_ids, self.config.vocab_size, "input_ids")
        mask = unused.get("attention_mask")
        if mask is not None and not bool(torch.as_tensor(mask).all()):
            raise ValueError("attention_mask with padding (zeros) is not supported by TinyLlama")
        cache = past_key_values
        if cache is None and use_cache:
            cache = KVCache()
        offset = (cache.seq_len if cache is not None else 0) if position_offset is None else int(position_offset)
        t = input_ids.shape[1]
        if offset + t > self.config.max_seq_len:
            raise ValueError(f"sequence length {offset + t} exceeds max_seq_len={self.config.max_seq_len}")
        h = self.model.embed_tokens(input_ids)
        pos = torch.arange(offset, offset + t, device=input_ids.device)
        cos, sin = rope_cos_sin(pos, self.config.head_dim, self.config.rope_theta, h.dtype)
        for layer in self.model.layers:
            h = layer(h, cos, sin, cache)
        logits = self.lm_head(self.model.norm(h))
        return CausalLMOutput(
            logits=logits, past_key_values=cache if (use_cache or past_key_values is not None) else None
        )

    # -- Hugging Face interop -------------------------------------------------------------------
    def to_hf(self):
        """An equivalent ``transformers.LlamaForCausalLM`` (same weights, device and dtype).

        Requires the optional ``transformers`` dependency (``pip install 'iclr25-llm[transformers]'``).
        """
        LlamaConfig, LlamaForCausalLM = _hf_llama()
        c = self.config
        kwargs = dict(
            vocab_size=c.vocab_size,
            hidden_size=c.d_model,
            intermediate_size=c.ffn_hidden,
            num_hidden_layers=c.n_layers,
            num_attention_heads=c.n_heads,
            num_key_value_heads=c.n_kv_heads,
            max_position_embeddings=c.max_seq_len,
            rms_norm_eps=c.norm_eps,
            tie_word_embeddings=c.tie_embeddings,
            initializer_range=c.init_std,
            hidden_act="silu",
            attention_bias=False,
            mlp_bias=False,
            bos_token_id=None,
            eos_token_id=None,
        )
        # transformers >= 5 moved rope_theta into rope_parameters
        if "rope_parameters" in inspect.signature(LlamaConfig.__init__).parameters:
            kwargs["rope_parameters"] = {"rope_type": "default", "rope_theta": float(c.rope_theta)}
        else:
            kwargs["rope_theta"] = float(c.rope_theta)
        hf = LlamaForCausalLM(LlamaConfig(**kwargs))
        p = next(self.parameters())
        hf.to(device=p.device, dtype=p.dtype)
        missing, unexpected = hf.load_state_dict(self.state_dict(), strict=False)
        missing = [k for k in missing if "rotary_emb" not in k and not (c.tie_embeddings and k == "lm_head.weight")]
        if missing or unexpected:
            raise RuntimeError(f"state dict mismatch converting to HF: missing {missing}, unexpected {unexpected}")
        return hf.eval() if not self.training else hf

    @classmethod
    def from_hf(cls, hf_model) -> TinyLlama:
        """Copy a ``transformers.LlamaForCausalLM`` (plain RoPE, SiLU, no biases) into a TinyLlama.

        Raises
        ------
        TypeError
            For any other architecture (the message names it) or LLaMA variants TinyLlama does not
            implement (biases, RoPE scaling, other activations).
        """
        name = type(hf_model).__name__
        cfg = getattr(hf_model, "config", None)
        if name != "LlamaForCausalLM" or getattr(cfg, "model_type", None) != "llama":
            raise TypeError(
                f"from_hf supports LlamaForCausalLM only; got {name} (model_type={getattr(cfg, 'model_type', None)!r})"
            )
        rope = getattr(cfg, "rope_parameters", None) or getattr(cfg, "rope_scaling", None) or {}
        rope_type = rope.get("rope_type", rope.get("type", "default")) if isinstance(rope, dict) else "default"
        theta = rope.get("rope_theta") if isinstance(rope, dict) else None
        theta = theta if theta is not None else getattr(cfg, "rope_theta", 1e4)
        unsupported = []
        if rope_type != "default":
            unsupported.append(f"rope_type={rope_type!r}")
        if getattr(cfg, "attention_bias", False) or getattr(cfg, "mlp_bias", False):
            unsupported.append("biases")
        if getattr(cfg, "hidden_act", "silu") != "silu":
            unsupported.append(f"hidden_act={cfg.hidden_act!r}")
        head_dim = getattr(cfg, "head_dim", None)
        if head_dim is not None and head_dim != cfg.hidden_size // cfg.num_attention_heads:
            unsupported.append(f"head_dim={head_dim}")
        if unsupported:
            raise TypeError(f"from_hf cannot represent this LlamaForCausalLM variant: {', '.join(unsupported)}")
        config = TinyLlamaConfig(
            vocab_size=cfg.vocab_size,
            d_model=cfg.hidden_size,
            n_layers=cfg.num_hidden_layers,
            n_heads=cfg.num_attention_heads,
            n_kv_heads=cfg.num_key_value_heads or cfg.num_attention_heads,
            ffn_hidden=cfg.intermediate_size,
            max_seq_len=cfg.max_position_embeddings,
            rope_theta=float(theta),
            norm_eps=cfg.rms_norm_eps,
            tie_embeddings=bool(getattr(cfg, "tie_word_embeddings", False)),
            init_std=getattr(cfg, "initializer_range", 0.02),
        )
        model = cls(config)
        p = next(hf_model.parameters())
        model.to(device=p.device, dtype=p.dtype)
        state = {k: v for k, v in hf_model.state_dict().items() if "rotary_emb" not in k}
        if config.tie_embeddings:
            state.pop("lm_head.weight", None)
        model.load_state_dict(state, strict=not config.tie_embeddings)
        return model

    def extra_repr(self) -> str:
        return ", ".join(f"{f.name}={getattr(self.config, f.name)}" for f in dataclasses.fields(self.config)[:5])


def _hf_llama():
    try:
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError as exc:
        raise ImportError(f"TinyLlama.to_hf needs transformers; install it with {_HF_EXTRA}") from exc
    return LlamaConfig, LlamaForCausalLM
