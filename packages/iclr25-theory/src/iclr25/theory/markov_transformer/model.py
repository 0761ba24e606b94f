"""Transformers on binary sequences: the paper's theory model and the official nanoGPT-style variant.

Theory model (``vocab="binary"``, ``layer_norm=False``), per position n::

    u_n = x_n e + pos_n                                  embedding (x_n in {0, 1})
    y_n = u_n + W_O sum_{i<=n} att_{n,i} W_V u_i         one causal softmax head, scale 1/sqrt(d_head)
    z_n = y_n + W_2 act(W_1 y_n)                         feed-forward with residual
    l_n = <a, z_n> + b                                   log-odds of x_{n+1} = 1;  tying: a is e

``vocab="two_token"`` follows the official code (``Bond1995/Markov``): token vectors ``wte`` (2, d)
tied to a 2-way ``lm_head`` with an untied bias; the returned logit is the log-odds difference
``l_1 - l_0``, for which binary cross-entropy equals the 2-way cross-entropy exactly.
``layer_norm=True`` switches on pre-LN blocks plus a final LN (weight only, no bias, eps 1e-5).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["MarkovTransformer", "MarkovTransformerConfig"]

_LN_EPS = 1e-5


@dataclass
class MarkovTransformerConfig:
    """Architecture switches (defaults: the paper's single-layer theory model at d = 8).

    Attributes
    ----------
    d_model:
        Width d of the residual stream.
    n_layers:
        Number of attention + feed-forward blocks.
    n_heads:
        Attention heads per block; must divide ``d_model``.
    max_len:
        Longest input the learned positions cover.
    weight_tying:
        Share one parameter between input embedding and output head (``a = e``).
    layer_norm:
        Pre-LN blocks and a final LN (official architecture); ``False`` is the theory model.
    ff_mult:
        Feed-forward width as a multiple of ``d_model`` (4 in the paper and official code).
    activation:
        ``"relu"`` (theory model) or ``"gelu"`` (official code).
    vocab:
        ``"binary"``: scalar embedding ``x e`` and scalar head; ``"two_token"``: official 2-row
        embedding and 2-way head with bias.
    init_std:
        Std of the N(0, init_std) initialisation; residual projections use init_std / sqrt(2 n_layers).
    """

    d_model: int = 8
    n_layers: int = 1
    n_heads: int = 1
    max_len: int = 128
    weight_tying: bool = True
    layer_norm: bool = False
    ff_mult: int = 4
    activation: str = "relu"
    vocab: str = "binary"
    init_std: float = 0.02

    def __post_init__(self) -> None:
        for name in ("d_model", "n_layers", "n_heads", "max_len", "ff_mult"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if self.d_model % self.n_heads:
            raise ValueError(f"n_heads must divide d_model, got d_model={self.d_model}, n_heads={self.n_heads}")
        for name in ("weight_tying", "layer_norm"):
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise TypeError(f"{name} must be a bool, got {type(value).__name__} {value!r}")
        if self.activation not in ("relu", "gelu"):
            raise ValueError(f"activation must be 'relu' or 'gelu', got {self.activation!r}")
        if self.vocab not in ("binary", "two_token"):
            raise ValueError(f"vocab must be 'binary' or 'two_token', got {self.vocab!r}")
        if not (isinstance(self.init_std, (int, float)) and 0 <= self.init_std < math.inf):
            raise ValueError(f"init_std must be a finite non-negative float, got {self.init_std!r}")
        if self.layer_norm and self.d_model < 2:
            raise ValueError(f"layer_norm=True needs d_model >= 2 (LN of a scalar is 0), got {self.d_model}")


def _layer_norm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, weight.shape, weight, None, _LN_EPS)


class _Block(nn.Module):
    def __init__(self, cfg: MarkovTransformerConfig) -> None:
        super().__init__()
        d, hidden = cfg.d_model, cfg.ff_mult * cfg.d_model
        self.n_heads = cfg.n_heads
        self.w_q = nn.Linear(d, d, bias=False)
        self.w_k = nn.Linear(d, d, bias=False)
        self.w_v = nn.Linear(d, d, bias=False)
        self.w_o = nn.Linear(d, d, bias=False)
        self.w_1 = nn.Linear(d, hidden, bias=False)
        self.w_2 = nn.Linear(hidden, d, bias=False)
        self.act = nn.ReLU() if cfg.activation == "relu" else nn.GELU()
        if cfg.layer_norm:
            self.ln_1 = nn.Parameter(torch.ones(d))
            self.ln_2 = nn.Parameter(torch.ones(d))
        else:
            self.register_parameter("ln_1", None)
            self.register_parameter("ln_2", None)

    def attention(self, u: torch.Tensor) -> torch.Tensor:
        bsz, length, d = u.shape
        h = self.n_heads

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.view(bsz, length, h, d // h).transpose(1, 2)

        q, k, v = split(self.w_q(u)), split(self.w_k(u)), split(self.w_v(u))
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // h)
        causal = torch.ones(length, length, dtype=torch.bool, device=u.device).tril()
        att = scores.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        return self.w_o((att @ v).transpose(1, 2).reshape(bsz, length, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.ln_1 is None:
            y = x + self.attention(x)
            return y + self.w_2(self.act(self.w_1(y)))
        y = x + self.attention(_layer_norm(x, self.ln_1))
        return y + self.w_2(self.act(self.w_1(_layer_norm(y, self.ln_2))))


class MarkovTransformer(nn.Module):
    """A small causal transformer that predicts the next bit of a binary sequence.

    Parameters
    ----------
    cfg:
        Architecture, see :class:`MarkovTransformerConfig`.

    Attributes
    ----------
    embedding_vector:
        ``(d,)`` e (binary vocab) or ``(2, d)`` ``wte`` (two-token vocab).
    head_vector:
        ``(d,)`` a or ``(2, d)`` ``lm_head`` weight; *the same Parameter object* as
        ``embedding_vector`` when ``weight_tying``.
    head_bias:
        ``()`` b or ``(2,)`` head bias (never tied).
    pos:
        ``(max_len, d)`` learned positions.
    blocks:
        The transformer blocks.
    ln_f:
        ``(d,)`` final LN weight, or ``None`` without LayerNorm.
    """

    def __init__(self, cfg: MarkovTransformerConfig | None = None) -> None:
        super().__init__()
        cfg = MarkovTransformerConfig() if cfg is None else cfg
        if not isinstance(cfg, MarkovTransformerConfig):
            raise TypeError(f"cfg must be a MarkovTransformerConfig, got {type(cfg).__name__}")
        self.cfg = cfg
        d = cfg.d_model
        shape = (d,) if cfg.vocab == "binary" else (2, d)
        self.embedding_vector = nn.Parameter(torch.empty(shape))
        # Tying shares the Parameter itself (not a copy made at init), as in nanoGPT.
        self.head_vector = self.embedding_vector if cfg.weight_tying else nn.Parameter(torch.empty(shape))
        self.head_bias = nn.Parameter(torch.zeros(() if cfg.vocab == "binary" else (2,)))
        self.pos = nn.Parameter(torch.empty(cfg.max_len, d))
        self.blocks = nn.ModuleList(_Block(cfg) for _ in range(cfg.n_layers))
        if cfg.layer_norm:
            self.ln_f = nn.Parameter(torch.ones(d))
        else:
            self.register_parameter("ln_f", None)
        self.reset_parameters()

    @property
    def tied(self) -> bool:
        """True when embedding and head are one Parameter."""
        return self.head_vector is self.embedding_vector

    def reset_parameters(self) -> None:
        """N(0, init_std) everywhere, N(0, init_std / sqrt(2 n_layers)) on residual projections, zero bias."""
        std = self.cfg.init_std
        resid_std = std / math.sqrt(2 * self.cfg.n_layers)
        with torch.no_grad():
            for name, param in self.named_parameters():
                if name.startswith("ln") or ".ln_" in name or name == "head_bias":
                    continue
                param.normal_(0.0, resid_std if name.endswith(("w_o.weight", "w_2.weight")) else std)
            self.head_bias.zero_()

    def validate_input(self, x: torch.Tensor) -> None:
        """Raise ``TypeError``/``ValueError`` unless ``x`` is an integer ``(B, L)`` tensor in {0, 1}, L <= max_len."""
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
        if x.dtype.is_floating_point or x.dtype.is_complex or x.dtype == torch.bool:
            raise TypeError(f"x must be an integer (Long) tensor of tokens, got dtype {x.dtype}")
        if x.dim() != 2 or x.shape[0] < 1 or x.shape[1] < 1:
            raise ValueError(f"x must have shape (B, L) with B, L >= 1, got {tuple(x.shape)}")
        if x.shape[1] > self.cfg.max_len:
            raise ValueError(f"x has length {x.shape[1]} but max_len is {self.cfg.max_len}")
        bad = x[(x != 0) & (x != 1)]
        if bad.numel():
            raise ValueError(f"x must contain only tokens 0 and 1, found {int(bad[0])}")

    def forward(self, x: torch.Tensor, *, check: bool = True) -> torch.Tensor:
        """Log-odds that the next symbol is 1.

        Parameters
        ----------
        x:
            ``(B, L)`` integer tensor with values in {0, 1}, ``L <= max_len``.
        check:
            Validate ``x`` first (see :meth:`validate_input`); callers that already did, e.g. under
            ``torch.func.vmap`` where data-dependent checks cannot run, pass ``False``.

        Returns
        -------
        ``(B, L)`` logits ``l_n``; ``sigmoid(l_n)`` estimates ``P(x_{n+1} = 1 | x_1..x_n)``.
        """
        if check:
            self.validate_input(x)
        length = x.shape[-1]
        emb, head = self.embedding_vector, self.head_vector
        if self.cfg.vocab == "binary":
            h = x.to(emb.dtype)[..., None] * emb + self.pos[:length]
        else:
            h = emb[x.long()] + self.pos[:length]  # int8/int16/uint8 tokens must index rows, not mask
        for block in self.blocks:
            h = block(h)
        if self.ln_f is not None:
            h = _layer_norm(h, self.ln_f)
        if self.cfg.vocab == "binary":
            return h @ head + self.head_bias
        return h @ (head[1] - head[0]) + (self.head_bias[1] - self.head_bias[0])
