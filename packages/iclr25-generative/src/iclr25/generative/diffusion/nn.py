"""Networks of the diffusion core: UNet2D (optional cross-attention), VideoUNet, toy MLP, LoRA, AE.

UNet2D dataflow (DDPM/ADM layout, small)::

    x ─conv_in─► [ResBlock (+SpatialTransformer)] x num_res_blocks ─down─► ... ─► mid ─► ...
                 ◄──────────── skip connections (concat) ──────────────── up (nearest + conv)
    emb = MLP(sinusoidal(t or c_noise)) (+ class embedding) ─► FiLM (scale, shift) in every ResBlock

Attention layers follow diffusers' naming (``to_q``, ``to_k``, ``to_v``, ``to_out.0``) and its
processor interface: :meth:`UNet2D.set_attn_processor` swaps the function that computes attention
(e.g. to store maps or wrap key/value projections), :attr:`UNet2D.attn_processors` lists them keyed
by module path.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from iclr25.core.device import compute_dtype
from iclr25.core.triton import Backend, BackendOp

from ._checks import check_batch, check_finite, check_float
from .reference import groupnorm_film_silu_reference

__all__ = [
    "Attention",
    "AttnProcessor",
    "LoRALinear",
    "MLPDenoiserNet",
    "ResBlock",
    "SpatialTransformer",
    "StoreAttnProcessor",
    "TemporalAttention",
    "TinyAutoencoder",
    "UNet2D",
    "VideoUNet",
    "groupnorm_film_silu",
    "inject_lora",
    "lora_parameters",
    "timestep_embedding",
]


def _gn_affine_dtype_error(x, weight, bias) -> str | None:
    """torch.nn.GroupNorm's rule for its affine: x's dtype, or float32 for float16/bfloat16 x."""
    # F.group_norm refuses anything else ("mixed dtype") while the kernel would silently read it as
    # float32, so the result would depend on the backend; both now refuse with this message
    given = {t.dtype for t in (weight, bias) if t is not None}
    ok = {x.dtype} | ({torch.float32} if x.dtype in (torch.float16, torch.bfloat16) else set())
    if given and (len(given) > 1 or not given <= ok):
        names = " / ".join(f"{n} {t.dtype}" for n, t in (("weight", weight), ("bias", bias)) if t is not None)
        want = " or ".join(str(d) for d in sorted(ok, key=str))
        return f"weight/bias dtype must be {want} (one dtype for both) for x dtype {x.dtype}, got {names}"
    return None


def _gn_supports(x, num_groups, weight, bias, scale, shift, eps=1e-5) -> list[str]:
    reasons = []
    if (msg := _gn_affine_dtype_error(x, weight, bias)) is not None:
        reasons.append(msg)
    if x.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        reasons.append(f"x dtype must be float32/float16/bfloat16, got {x.dtype}")
    if (scale is None) != (shift is None) or (weight is None) != (bias is None):
        reasons.append("scale/shift and weight/bias must be given in pairs")
    # the kernel reads weight/bias as (C,) vectors (no bounds or shape check of its own), and writes y
    # in x's dtype where the reference promotes it with scale/shift's dtype
    C = x.shape[1] if x.dim() >= 2 else None
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != (C,):
            reasons.append(f"{name} must have shape ({C},), got {tuple(t.shape)}")
    for name, t in (("scale", scale), ("shift", shift)):
        if t is not None and torch.promote_types(x.dtype, t.dtype) != x.dtype:
            reasons.append(f"{name} dtype {t.dtype} would promote the result beyond x dtype {x.dtype}")
    from .kernels import MAX_CHANNELS_PER_GROUP

    if x.dim() >= 2 and num_groups and x.shape[1] // num_groups > MAX_CHANNELS_PER_GROUP:
        reasons.append(f"channels per group must be <= {MAX_CHANNELS_PER_GROUP}, got {x.shape[1] // num_groups}")
    return reasons


def _gn_triton(*args, **kwargs):
    from .kernels import groupnorm_film_silu_triton

    return groupnorm_film_silu_triton(*args, **kwargs)


_GN_OP = BackendOp(
    "groupnorm_film_silu",
    [
        Backend("triton", _gn_triton, supports=_gn_supports, uses_triton=True),
        Backend("reference", groupnorm_film_silu_reference),
    ],
)


def groupnorm_film_silu(
    x: torch.Tensor,
    num_groups: int,
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    scale: torch.Tensor | None = None,
    shift: torch.Tensor | None = None,
    eps: float = 1e-5,
    backend: str = "auto",
) -> torch.Tensor:
    """SiLU(GroupNorm(x) * (1 + scale) + shift), the ResBlock pre-activation.

    Parameters
    ----------
    x: (B, C, *spatial) float tensor; ``num_groups`` must divide C.
    weight, bias: (C,) GroupNorm affine or None, in x's dtype (or float32 for float16/bfloat16 x,
        as torch.nn.GroupNorm allows); other dtypes raise TypeError on every backend.
    scale, shift: (B, C) FiLM terms or None.
    backend: ``"auto"`` (Triton on CUDA, else torch), ``"reference"`` or ``"triton"``.

    Returns
    -------
    Tensor with x's shape.
    """
    check_float("x", x, min_dim=2)
    if not isinstance(num_groups, numbers.Integral) or num_groups < 1:
        raise ValueError(f"num_groups must be an int >= 1, got {num_groups!r}")
    if x.shape[1] % num_groups:
        raise ValueError(f"num_groups must divide channels: C={x.shape[1]}, num_groups={num_groups}")
    for name, t, shp in (("scale", scale, x.shape[:2]), ("shift", shift, x.shape[:2])):
        if t is not None and t.shape != shp:
            raise ValueError(f"{name} must have shape {tuple(shp)}, got {tuple(t.shape)}")
    if (msg := _gn_affine_dtype_error(x, weight, bias)) is not None:
        raise TypeError(msg)
    return _GN_OP(x, num_groups, weight, bias, scale, shift, eps, backend=backend)


def timestep_embedding(t: torch.Tensor, dim: int, max_period: float = 10000.0) -> torch.Tensor:
    """Sinusoidal features of a (B,) float or integer tensor (c_noise or t), returns (B, dim).

    Computed in float64 for float64 ``t``, else in float32 (also for float16/bfloat16 ``t``).
    """
    half = dim // 2
    # a .double() model must not see its noise level rounded to float32; half precision would not
    # resolve the phases of large t, so it is lifted to float32 like integer t
    dt = compute_dtype(t)
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, device=t.device, dtype=dt) / half)
    args = t.to(dt)[:, None] * freqs[None]
    emb = torch.cat([torch.cos(args), torch.sin(args)], dim=1)
    return F.pad(emb, (0, dim % 2))


def _groups(ch: int) -> int:
    for g in (32, 16, 8, 4, 2, 1):
        if (ch % g == 0 and ch // g >= 2) or g == 1:
            return g
    return 1


class AttnProcessor:
    """Default attention: ``softmax(q k^T / sqrt(d)) v`` through ``scaled_dot_product_attention``."""

    def __call__(
        self,
        attn: Attention,
        hidden_states: torch.Tensor,
        context: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        ctx = hidden_states if context is None else context
        q, k, v = attn.to_q(hidden_states), attn.to_k(ctx), attn.to_v(ctx)
        q, k, v = (attn.split_heads(t) for t in (q, k, v))
        m = None if mask is None else mask[:, None, None, :].to(torch.bool)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=m)
        return attn.to_out(attn.merge_heads(out))


class StoreAttnProcessor(AttnProcessor):
    """Explicit-softmax attention that keeps the last maps in ``self.maps`` ((B, heads, Nq, Nk)).

    Numerically equivalent to :class:`AttnProcessor`; used to inspect cross-attention maps.
    """

    def __init__(self) -> None:
        self.maps: torch.Tensor | None = None

    def __call__(self, attn, hidden_states, context=None, mask=None):
        ctx = hidden_states if context is None else context
        q, k, v = (attn.split_heads(t) for t in (attn.to_q(hidden_states), attn.to_k(ctx), attn.to_v(ctx)))
        logits = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        if mask is not None:
            logits = logits.masked_fill(~mask[:, None, None, :].to(torch.bool), float("-inf"))
        p = logits.softmax(-1)
        self.maps = p.detach()
        return attn.to_out(attn.merge_heads(p @ v))


class Attention(nn.Module):
    """Multi-head (self- or cross-) attention with diffusers-style names and a swappable processor.

    Parameters
    ----------
    query_dim: feature size of the queries.
    context_dim: feature size of keys/values (``None``: self-attention).
    heads, dim_head: number and width of heads.
    """

    def __init__(self, query_dim: int, context_dim: int | None = None, heads: int = 4, dim_head: int = 32) -> None:
        super().__init__()
        inner = heads * dim_head
        self.heads, self.is_cross = heads, context_dim is not None
        self.to_q = nn.Linear(query_dim, inner, bias=False)
        self.to_k = nn.Linear(context_dim or query_dim, inner, bias=False)
        self.to_v = nn.Linear(context_dim or query_dim, inner, bias=False)
        self.to_out = nn.Sequential(nn.Linear(inner, query_dim), nn.Dropout(0.0))
        self.processor: Callable[..., torch.Tensor] = AttnProcessor()

    def split_heads(self, t: torch.Tensor) -> torch.Tensor:
        b, n, d = t.shape
        return t.reshape(b, n, self.heads, d // self.heads).transpose(1, 2)

    def merge_heads(self, t: torch.Tensor) -> torch.Tensor:
        b, h, n, d = t.shape
        return t.transpose(1, 2).reshape(b, n, h * d)

    def forward(
        self, hidden_states: torch.Tensor, context: torch.Tensor | None = None, mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """hidden_states: (B, N, query_dim); context: (B, L, context_dim); mask: (B, L) bool (True = keep)."""
        return self.processor(self, hidden_states, context, mask)


class GEGLU(nn.Module):
    """Gated GELU feed-forward input projection (Shazeer 2020), as in LDM's transformer blocks."""

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.proj = nn.Linear(dim, hidden * 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, gate = self.proj(x).chunk(2, dim=-1)
        return a * F.gelu(gate)


class BasicTransformerBlock(nn.Module):
    """LayerNorm -> self-attn -> LayerNorm -> cross-attn (if context_dim) -> LayerNorm -> GEGLU MLP."""

    def __init__(self, dim: int, heads: int, dim_head: int, context_dim: int | None) -> None:
        super().__init__()
        self.norm1, self.attn1 = nn.LayerNorm(dim), Attention(dim, None, heads, dim_head)
        self.attn2 = Attention(dim, context_dim, heads, dim_head) if context_dim else None
        self.norm2 = nn.LayerNorm(dim) if context_dim else None
        self.norm3 = nn.LayerNorm(dim)
        self.ff = nn.Sequential(GEGLU(dim, 4 * dim), nn.Linear(4 * dim, dim))

    def forward(self, x, context=None, context_mask=None):
        x = x + self.attn1(self.norm1(x))
        if self.attn2 is not None and context is not None:
            x = x + self.attn2(self.norm2(x), context, context_mask)
        return x + self.ff(self.norm3(x))


class SpatialTransformer(nn.Module):
    """GroupNorm -> 1x1 proj_in -> transformer block over H*W tokens -> 1x1 proj_out, residual.

    Parameters
    ----------
    ch: channels of the feature map (B, ch, H, W).
    context_dim: enables cross-attention to a (B, L, context_dim) context.
    """

    def __init__(self, ch: int, heads: int = 4, dim_head: int | None = None, context_dim: int | None = None) -> None:
        super().__init__()
        dim_head = dim_head or max(ch // heads, 8)
        self.norm = nn.GroupNorm(_groups(ch), ch)
        self.proj_in = nn.Conv2d(ch, ch, 1)
        self.transformer_blocks = nn.ModuleList([BasicTransformerBlock(ch, heads, dim_head, context_dim)])
        self.proj_out = nn.Conv2d(ch, ch, 1)

    def forward(self, x, context=None, context_mask=None):
        b, c, h, w = x.shape
        t = self.proj_in(self.norm(x)).flatten(2).transpose(1, 2)
        for blk in self.transformer_blocks:
            t = blk(t, context, context_mask)
        return x + self.proj_out(t.transpose(1, 2).reshape(b, c, h, w))


class ResBlock(nn.Module):
    """GroupNorm -> SiLU -> Conv3x3 -> [GroupNorm, FiLM(emb), SiLU] -> Dropout -> Conv3x3, + 1x1 skip.

    The bracket is one fused op (:func:`groupnorm_film_silu`), and so is the first GroupNorm -> SiLU
    (the same op without FiLM); ``film=False`` adds the projected embedding to the features instead
    (DDPM style).
    """

    def __init__(self, cin: int, cout: int, emb_dim: int, dropout: float = 0.0, film: bool = True) -> None:
        super().__init__()
        self.film = film
        self.norm1 = nn.GroupNorm(_groups(cin), cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.emb_proj = nn.Linear(emb_dim, 2 * cout if film else cout)
        self.norm2 = nn.GroupNorm(_groups(cout), cout)
        self.dropout = nn.Dropout(dropout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()
        self.backend = "auto"

    def forward(self, x: torch.Tensor, emb: torch.Tensor) -> torch.Tensor:
        n = self.norm1
        # the first pre-activation is the same op without FiLM: fused too, so both run on one backend
        h = self.conv1(groupnorm_film_silu(x, n.num_groups, n.weight, n.bias, eps=n.eps, backend=self.backend))
        e = self.emb_proj(F.silu(emb))
        if self.film:
            scale, shift = e.chunk(2, dim=1)
        else:
            h = h + e[:, :, None, None]
            scale = shift = None
        n = self.norm2
        h = groupnorm_film_silu(h, n.num_groups, n.weight, n.bias, scale, shift, n.eps, backend=self.backend)
        return self.skip(x) + self.conv2(self.dropout(h))


class UNet2D(nn.Module):
    """Small DDPM/ADM-style UNet with optional self-/cross-attention and class conditioning.

    Parameters
    ----------
    in_ch, out_ch: input/output channels.
    ch: base width (multiple of 8 so GroupNorm groups divide it).
    ch_mult: width multiplier per resolution level; the input size must be divisible by
        ``2 ** (len(ch_mult) - 1)``.
    num_res_blocks: ResBlocks per level on the way down.
    attn_resolutions: feature-map sizes (pixels) that get a self-attention SpatialTransformer.
    dropout: ResBlock dropout.
    num_classes: enables ``class_labels`` (B,) int; label ``num_classes`` is the null class for CFG.
    context_dim: enables cross-attention at ``cross_attn_resolutions`` (all levels if empty).
    cross_attn_resolutions: feature-map sizes with cross-attention.
    emb_dim: embedding width (default 4 ch).
    film: FiLM scale-shift conditioning (else additive).
    heads: attention heads.
    sample_size: input size; when given, attention modules are built only at the levels whose
        feature size is listed (otherwise at every level, used where the run-time size matches).

    Forward: ``net(x, t, class_labels=None, context=None, context_mask=None)`` with x (B, in_ch, H, W)
    float, t (B,) float c_noise or integer timestep; returns (B, out_ch, H, W).
    """

    def __init__(
        self,
        in_ch: int,
        out_ch: int,
        ch: int = 32,
        ch_mult: Sequence[int] = (1, 2, 2),
        num_res_blocks: int = 1,
        attn_resolutions: Iterable[int] = (),
        dropout: float = 0.0,
        num_classes: int | None = None,
        context_dim: int | None = None,
        cross_attn_resolutions: Iterable[int] = (),
        emb_dim: int | None = None,
        film: bool = True,
        heads: int = 4,
        sample_size: int | None = None,
    ) -> None:
        super().__init__()
        self.sample_size = sample_size
        if ch % 8:
            raise ValueError(f"ch must be a multiple of 8 (GroupNorm groups), got {ch}")
        if not ch_mult or num_res_blocks < 1:
            raise ValueError(f"need a non-empty ch_mult and num_res_blocks >= 1, got {ch_mult}, {num_res_blocks}")
        self.in_ch, self.out_ch, self.ch_mult = in_ch, out_ch, tuple(ch_mult)
        self.num_classes, self.context_dim = num_classes, context_dim
        self.attn_res, self.cross_res = set(attn_resolutions), set(cross_attn_resolutions)
        emb_dim = emb_dim or 4 * ch
        self.ch = ch
        self.emb = nn.Sequential(nn.Linear(ch, emb_dim), nn.SiLU(), nn.Linear(emb_dim, emb_dim))
        self.class_emb = nn.Embedding(num_classes + 1, emb_dim) if num_classes else None
        self.conv_in = nn.Conv2d(in_ch, ch, 3, padding=1)
        self.block_channels: dict[str, int] = {}
        # Attention is placed by *level*; the level's pixel size is only known at forward time, so
        # each level gets attention modules for every level and uses them where its size matches.
        self.down = nn.ModuleList()
        self.downsample = nn.ModuleList()
        chans, cur = [ch], ch
        for lvl, m in enumerate(ch_mult):
            for j in range(num_res_blocks):
                self.down.append(self._block(cur, ch * m, emb_dim, dropout, film, heads, f"down.{lvl}.{j}", lvl))
                cur = ch * m
                chans.append(cur)
            if lvl < len(ch_mult) - 1:
                self.downsample.append(nn.Conv2d(cur, cur, 3, stride=2, padding=1))
                chans.append(cur)
        self.mid = nn.ModuleList(
            [self._block(cur, cur, emb_dim, dropout, film, heads, f"mid.{j}", len(ch_mult) - 1) for j in range(2)]
        )
        self.up = nn.ModuleList()
        self.upsample = nn.ModuleList()
        for lvl, m in reversed(list(enumerate(ch_mult))):
            for j in range(num_res_blocks + 1):
                self.up.append(
                    self._block(cur + chans.pop(), ch * m, emb_dim, dropout, film, heads, f"up.{lvl}.{j}", lvl)
                )
                cur = ch * m
            if lvl > 0:
                self.upsample.append(nn.Conv2d(cur, cur, 3, padding=1))
        self.norm_out = nn.GroupNorm(_groups(cur), cur)
        self.conv_out = nn.Conv2d(cur, out_ch, 3, padding=1)
        self.num_res_blocks = num_res_blocks
        self.backend = "auto"

    def _block(self, cin, cout, emb_dim, dropout, film, heads, key, lvl) -> nn.ModuleDict:
        self.block_channels[key] = cout
        size = None if self.sample_size is None else self.sample_size // 2**lvl
        d = nn.ModuleDict({"res": ResBlock(cin, cout, emb_dim, dropout, film)})
        if self.attn_res and (size is None or size in self.attn_res):
            d["attn"] = SpatialTransformer(cout, heads)
        if self.context_dim and (size is None or not self.cross_res or size in self.cross_res):
            d["xattn"] = SpatialTransformer(cout, heads, context_dim=self.context_dim)
        return d

    # -- attention processors --------------------------------------------------------------
    @property
    def attn_processors(self) -> dict[str, Callable[..., torch.Tensor]]:
        """Processors of every :class:`Attention`, keyed ``"<module path>.processor"``."""
        return {f"{n}.processor": m.processor for n, m in self.named_modules() if isinstance(m, Attention)}

    def set_attn_processor(
        self, processor: Callable[..., torch.Tensor] | dict[str, Callable[..., torch.Tensor]]
    ) -> None:
        """Set one processor for every attention layer, or a dict keyed as :attr:`attn_processors`."""
        keys = self.attn_processors
        if isinstance(processor, dict):
            unknown = set(processor) - set(keys)
            if unknown or len(processor) != len(keys):
                raise ValueError(
                    f"processor dict must have exactly the keys of attn_processors; bad: {sorted(unknown)}"
                )
        for n, m in self.named_modules():
            if isinstance(m, Attention):
                m.processor = processor[f"{n}.processor"] if isinstance(processor, dict) else processor

    def set_backend(self, backend: str) -> None:
        """Backend of the fused ResBlock pre-activation: ``"auto"``, ``"reference"`` or ``"triton"``."""
        for m in self.modules():
            if isinstance(m, (ResBlock, UNet2D)):
                m.backend = backend

    # -- forward ----------------------------------------------------------------------------
    def _mix(self, h: torch.Tensor, key: str) -> torch.Tensor:
        """Hook after every block (VideoUNet inserts temporal attention here)."""
        return h

    def _run(self, blk: nn.ModuleDict, key: str, h, emb, context, context_mask) -> torch.Tensor:
        h = blk["res"](h, emb)
        if "attn" in blk and h.shape[-1] in self.attn_res:
            h = blk["attn"](h)
        if "xattn" in blk and context is not None and (not self.cross_res or h.shape[-1] in self.cross_res):
            h = blk["xattn"](h, context, context_mask)
        return self._mix(h, key)

    def _embed(self, x, t, class_labels):
        if not isinstance(t, torch.Tensor):
            t = torch.tensor(t, device=x.device)
        t = t.to(x.device)
        if t.dim() == 0:
            t = t.expand(x.shape[0])
        if t.shape != (x.shape[0],):
            raise ValueError(f"t must be a scalar or have shape ({x.shape[0]},), got {tuple(t.shape)}")
        if t.is_floating_point():
            check_finite("t", t)
        emb = self.emb(timestep_embedding(t, self.ch).to(x.dtype))
        if self.class_emb is not None:
            if class_labels is None:
                class_labels = torch.full((x.shape[0],), self.num_classes, device=x.device, dtype=torch.long)
            check_batch("class_labels", class_labels, x.shape[0])
            labels = class_labels.long()
            # an out-of-range index fails deep in nn.Embedding (a device-side assert on CUDA)
            if bool(((labels < 0) | (labels > self.num_classes)).any()):
                raise ValueError(
                    f"class_labels must be in [0, {self.num_classes}] ({self.num_classes} = null class), "
                    f"got values in [{int(labels.min())}, {int(labels.max())}]"
                )
            emb = emb + self.class_emb(labels)
        return emb

    def _check(self, x: torch.Tensor, context, context_mask, ndim: int = 4) -> None:
        check_float("x", x)
        if x.dim() != ndim or x.shape[1] != self.in_ch:
            raise ValueError(f"x must have shape (B, {self.in_ch}, ...) with {ndim} dims, got {tuple(x.shape)}")
        check_finite("x", x)
        f = 2 ** (len(self.ch_mult) - 1)
        if x.shape[-1] % f or x.shape[-2] % f:
            raise ValueError(f"x spatial size must be divisible by {f}, got {tuple(x.shape[-2:])}")
        if context is not None:
            check_batch("context", context, x.shape[0])
            if self.context_dim and (context.dim() != 3 or context.shape[-1] != self.context_dim):
                raise ValueError(f"context must have shape (B, L, {self.context_dim}), got {tuple(context.shape)}")
        if context_mask is not None and context is not None and context_mask.shape != context.shape[:2]:
            raise ValueError(
                f"context_mask must have shape {tuple(context.shape[:2])}, got {tuple(context_mask.shape)}"
            )

    def forward(
        self,
        x: torch.Tensor,
        t: torch.Tensor | float,
        class_labels: torch.Tensor | None = None,
        context: torch.Tensor | None = None,
        context_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        self._check(x, context, context_mask)
        if x.shape[0] == 0:
            return x.new_zeros((0, self.out_ch, *x.shape[2:]))
        return self._forward(x, t, class_labels, context, context_mask)

    def _forward(self, x, t, class_labels, context, context_mask):
        if not self.context_dim:
            context = context_mask = None  # an unconditional net ignores context (CFG wrappers stay generic)
        emb = self._embed(x, t, class_labels)
        h = self.conv_in(x)
        hs = [h]
        blocks = iter(self.down)
        for lvl in range(len(self.ch_mult)):
            for j in range(self.num_res_blocks):
                h = self._run(next(blocks), f"down.{lvl}.{j}", h, emb, context, context_mask)
                hs.append(h)
            if lvl < len(self.ch_mult) - 1:
                h = self.downsample[lvl](h)
                hs.append(h)
        for j, blk in enumerate(self.mid):
            h = self._run(blk, f"mid.{j}", h, emb, context, context_mask)
        blocks, ups = iter(self.up), iter(self.upsample)
        for lvl in reversed(range(len(self.ch_mult))):
            for j in range(self.num_res_blocks + 1):
                h = self._run(next(blocks), f"up.{lvl}.{j}", torch.cat([h, hs.pop()], 1), emb, context, context_mask)
            if lvl > 0:
                h = next(ups)(F.interpolate(h, scale_factor=2.0, mode="nearest"))
        n = self.norm_out
        return self.conv_out(groupnorm_film_silu(h, n.num_groups, n.weight, n.bias, eps=n.eps, backend=self.backend))


class TemporalAttention(nn.Module):
    """Self-attention over the frame axis at every spatial location (factorised space-time).

    Parameters
    ----------
    ch: channels.
    heads: attention heads.
    max_frames: size of the learned frame-position table (``pos="learned"``); ``"sinusoidal"`` has no
        limit.
    zero_init: zero the output projection so the block starts as the identity (VideoLDM practice).

    Forward: x (B*F, C, H, W), frames F -> same shape.
    """

    def __init__(
        self, ch: int, heads: int = 4, max_frames: int = 32, pos: str = "learned", zero_init: bool = False
    ) -> None:
        super().__init__()
        if pos not in ("learned", "sinusoidal"):
            raise ValueError(f"pos must be 'learned' or 'sinusoidal', got {pos!r}")
        self.pos, self.max_frames, self.ch = pos, max_frames, ch
        self.norm = nn.GroupNorm(_groups(ch), ch)
        self.pos_emb = nn.Parameter(torch.randn(max_frames, ch) * 0.02) if pos == "learned" else None
        self.attn = Attention(ch, None, heads, max(ch // heads, 8))
        if zero_init:
            nn.init.zeros_(self.attn.to_out[0].weight)
            nn.init.zeros_(self.attn.to_out[0].bias)

    def forward(self, x: torch.Tensor, frames: int) -> torch.Tensor:
        bf, c, h, w = x.shape
        if bf % frames:
            raise ValueError(f"batch*frames {bf} is not divisible by frames={frames}")
        if self.pos == "learned" and frames > self.max_frames:
            raise ValueError(f"frames must be <= max_frames={self.max_frames}, got {frames}")
        b = bf // frames
        t = self.norm(x).reshape(b, frames, c, h * w).permute(0, 3, 1, 2).reshape(b * h * w, frames, c)
        if self.pos_emb is not None:
            pe = self.pos_emb[:frames]
        else:
            pe = timestep_embedding(torch.arange(frames, device=x.device), c).to(x.dtype)
        out = self.attn(t + pe[None])
        out = out.reshape(b, h * w, frames, c).permute(0, 2, 3, 1).reshape(bf, c, h, w)
        return x + out


class VideoUNet(UNet2D):
    """UNet2D applied per frame with a :class:`TemporalAttention` after every spatial block.

    Same arguments as :class:`UNet2D` plus ``max_frames``/``temporal_pos``. Forward:
    ``net(x, t, ...)`` with x (B, C, F, H, W), t (B,) and context (B, L, D) shared by all frames;
    returns (B, out_ch, F, H, W).
    """

    def __init__(self, *args: Any, max_frames: int = 32, temporal_pos: str = "learned", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.temporal = nn.ModuleDict(
            {
                k.replace(".", "_"): TemporalAttention(c, max_frames=max_frames, pos=temporal_pos)
                for k, c in self.block_channels.items()
            }
        )
        self._frames = 1

    def _mix(self, h: torch.Tensor, key: str) -> torch.Tensor:
        return self.temporal[key.replace(".", "_")](h, self._frames)

    def forward(self, x, t, class_labels=None, context=None, context_mask=None):
        check_float("x", x)
        if x.dim() != 5:
            raise ValueError(f"x must have shape (B, C, F, H, W), got {tuple(x.shape)}")
        b, c, f, h, w = x.shape
        # batch checks before the per-frame repeat, so the message shows the caller's batch sizes
        check_batch("context", context, b)
        if self.class_emb is not None:  # an unconditional net ignores class_labels, as UNet2D does
            check_batch("class_labels", class_labels, b)
        flat = x.permute(0, 2, 1, 3, 4).reshape(b * f, c, h, w)
        rep = lambda v: None if v is None else v.repeat_interleave(f, 0)  # noqa: E731
        self._check(flat, rep(context), rep(context_mask))
        if b == 0:
            return x.new_zeros((0, self.out_ch, f, h, w))
        t = torch.as_tensor(t, device=x.device)
        t = t.expand(b) if t.dim() == 0 else t
        if t.shape != (b,):
            raise ValueError(f"t must be a scalar or have shape ({b},), got {tuple(t.shape)}")
        self._frames = f
        out = self._forward(flat, rep(t), rep(class_labels), rep(context), rep(context_mask))
        return out.reshape(b, f, self.out_ch, h, w).permute(0, 2, 1, 3, 4)


class MLPDenoiserNet(nn.Module):
    """MLP raw network for 2-D toys: F(x_in, c_noise) = MLP([x_in, sinusoidal(c_noise)]).

    Parameters
    ----------
    dim: data dimension; hidden: width; depth: hidden layers; emb_dim: noise-feature width.

    Forward: x (B, dim), c_noise (B,) -> (B, dim). Wrap with :class:`EDMPrecond` to get a denoiser.
    """

    def __init__(self, dim: int, hidden: int = 128, depth: int = 3, emb_dim: int = 32) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        d = dim + emb_dim
        for _ in range(depth):
            layers += [nn.Linear(d, hidden), nn.SiLU()]
            d = hidden
        layers.append(nn.Linear(d, dim))
        self.net, self.emb_dim, self.dim = nn.Sequential(*layers), emb_dim, dim

    def forward(self, x: torch.Tensor, c_noise: torch.Tensor, **_: Any) -> torch.Tensor:
        check_float("x", x)
        if x.dim() != 2 or x.shape[1] != self.dim:
            raise ValueError(f"x must have shape (B, {self.dim}), got {tuple(x.shape)}")
        c = torch.as_tensor(c_noise, device=x.device, dtype=x.dtype).expand(x.shape[0])
        # c_noise = ln(sigma)/4 spans a few units: scale up so the sinusoid frequencies resolve it
        return self.net(torch.cat([x, timestep_embedding(100 * c, self.emb_dim).to(x.dtype)], 1))


class TinyAutoencoder(nn.Module):
    """Deterministic convolutional autoencoder (optionally a KL-regularised VAE) for latent diffusion.

    Parameters
    ----------
    in_ch: image channels; latent_ch: latent channels.
    down: number of stride-2 stages (spatial factor ``2 ** down``).
    ch: width; kl: predict a diagonal Gaussian and add a KL term (LDM's KL-f autoencoder).

    ``encode(x)`` -> (B, latent_ch, H/2^down, W/2^down) (the mean when ``kl``), ``decode(z)`` -> image,
    ``loss(x)`` -> (B,) reconstruction MSE (+ ``kl_weight`` KL). :meth:`fit_scale_factor` sets
    ``scale_factor = 1 / std(latents)`` as LDM does; diffusion models work on ``scale_factor * z``.
    """

    def __init__(
        self, in_ch: int, latent_ch: int, down: int = 2, ch: int = 32, kl: bool = False, kl_weight: float = 1e-6
    ) -> None:
        super().__init__()
        enc: list[nn.Module] = [nn.Conv2d(in_ch, ch, 3, padding=1), nn.SiLU()]
        for _ in range(down):
            enc += [nn.Conv2d(ch, ch, 3, stride=2, padding=1), nn.SiLU(), nn.Conv2d(ch, ch, 3, padding=1), nn.SiLU()]
        enc.append(nn.Conv2d(ch, latent_ch * (2 if kl else 1), 1))
        dec: list[nn.Module] = [nn.Conv2d(latent_ch, ch, 3, padding=1), nn.SiLU()]
        for _ in range(down):
            dec += [nn.Upsample(scale_factor=2.0, mode="nearest"), nn.Conv2d(ch, ch, 3, padding=1), nn.SiLU()]
        dec.append(nn.Conv2d(ch, in_ch, 3, padding=1))
        self.encoder, self.decoder = nn.Sequential(*enc), nn.Sequential(*dec)
        self.kl, self.kl_weight, self.down, self.latent_ch = kl, kl_weight, down, latent_ch
        self.register_buffer("scale_factor", torch.tensor(1.0))

    def _moments(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        check_float("x", x)
        h = self.encoder(x)
        if not self.kl:
            return h, None
        mean, logvar = h.chunk(2, dim=1)
        return mean, logvar.clamp(-30, 20)

    def encode(self, x: torch.Tensor, sample: bool = False, generator: torch.Generator | None = None) -> torch.Tensor:
        """x: (B, in_ch, H, W) -> unscaled latents (B, latent_ch, H/2^down, W/2^down)."""
        mean, logvar = self._moments(x)
        if sample and logvar is not None:
            noise = torch.randn(mean.shape, generator=generator, device=mean.device, dtype=mean.dtype)
            return mean + (0.5 * logvar).exp() * noise
        return mean

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """z: unscaled latents -> (B, in_ch, H, W)."""
        check_float("z", z)
        return self.decoder(z)

    def loss(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """(B,) reconstruction MSE plus ``kl_weight`` times the KL to N(0, I) when ``kl``."""
        mean, logvar = self._moments(x)
        z = mean
        if logvar is not None:
            z = mean + (0.5 * logvar).exp() * torch.randn(
                mean.shape, generator=generator, device=x.device, dtype=mean.dtype
            )
        rec = (self.decoder(z) - x).pow(2).flatten(1).mean(1)
        if logvar is None:
            return rec
        kl = 0.5 * (mean.pow(2) + logvar.exp() - 1 - logvar).flatten(1).sum(1)
        return rec + self.kl_weight * kl

    @torch.no_grad()
    def fit_scale_factor(self, x: torch.Tensor) -> float:
        """Set and return ``scale_factor = 1 / std(encode(x))`` (LDM's latent rescaling)."""
        std = float(self.encode(x).std())
        self.scale_factor.fill_(1.0 / max(std, 1e-8))
        return float(self.scale_factor)


class LoRALinear(nn.Module):
    """Low-rank adapter around a frozen ``nn.Linear``: y = W x + b + (alpha / r) B A x.

    ``lora_A`` (r, in) is Kaiming-initialised and ``lora_B`` (out, r) zero-initialised, so a new
    adapter is a no-op (Hu et al. 2022); names follow PEFT. :meth:`merge` folds the update into
    the base weight (keeping a copy so :meth:`unmerge` restores it bit-exactly). A merged layer's
    state dict holds the merged base weight next to the adapters (what a deployment exports): load
    it into a plain ``nn.Linear`` or a merged layer; an unmerged LoRA layer would add ``B A`` twice.

    Parameters
    ----------
    base: the wrapped linear layer; its parameters are frozen.
    rank: r >= 1; alpha: scaling numerator (scaling = alpha / r); dropout: on the adapter input.
    """

    def __init__(self, base: nn.Linear, rank: int = 4, alpha: float = 1.0, dropout: float = 0.0) -> None:
        super().__init__()
        if not isinstance(base, nn.Linear):
            raise TypeError(f"base must be an nn.Linear, got {type(base).__name__}")
        if not isinstance(rank, int) or rank < 1:
            raise ValueError(f"rank must be an int >= 1, got {rank!r}")
        self.base, self.rank, self.alpha = base, rank, float(alpha)
        self.scaling = self.alpha / rank
        for p in base.parameters():
            p.requires_grad_(False)
        w = base.weight
        self.lora_A = nn.Linear(base.in_features, rank, bias=False, device=w.device, dtype=w.dtype)
        self.lora_B = nn.Linear(rank, base.out_features, bias=False, device=w.device, dtype=w.dtype)
        nn.init.kaiming_uniform_(self.lora_A.weight, a=math.sqrt(5))
        nn.init.zeros_(self.lora_B.weight)
        self.lora_dropout = nn.Dropout(dropout)
        self.merged = False
        self._orig: torch.Tensor | None = None

    def delta_weight(self) -> torch.Tensor:
        """(out, in) update (alpha / r) B A."""
        return self.scaling * (self.lora_B.weight @ self.lora_A.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.base(x)
        if self.merged:
            return y
        return y + self.scaling * self.lora_B(self.lora_A(self.lora_dropout(x)))

    @torch.no_grad()
    def merge(self) -> None:
        """Fold the adapter into ``base.weight`` (idempotent)."""
        if not self.merged:
            self._orig = self.base.weight.detach().clone()
            self.base.weight.add_(self.delta_weight())
            self.merged = True

    @torch.no_grad()
    def unmerge(self) -> None:
        """Restore the exact pre-merge base weight."""
        if self.merged:
            assert self._orig is not None
            self.base.weight.copy_(self._orig)
            self._orig, self.merged = None, False


def inject_lora(
    module: nn.Module, target_names: Sequence[str], rank: int = 4, alpha: float = 1.0, dropout: float = 0.0
) -> list[str]:
    """Replace every ``nn.Linear`` whose path ends with one of ``target_names`` by a :class:`LoRALinear`.

    Parameters
    ----------
    module: model to modify in place.
    target_names: path suffixes, e.g. ``("to_q", "to_k", "to_v", "to_out.0")``.

    Returns
    -------
    The paths that were wrapped (a ValueError if none matched).
    """
    if isinstance(target_names, str):
        target_names = [target_names]
    hits = [
        n
        for n, m in module.named_modules()
        if isinstance(m, nn.Linear) and any(n == t or n.endswith("." + t) for t in target_names)
    ]
    if not hits:
        raise ValueError(f"target_names {list(target_names)} matched no nn.Linear in {type(module).__name__}")
    for n in hits:
        parent_name, _, child = n.rpartition(".")
        parent = module.get_submodule(parent_name) if parent_name else module
        setattr(parent, child, LoRALinear(getattr(parent, child), rank, alpha, dropout))
    return hits


def lora_parameters(module: nn.Module) -> list[nn.Parameter]:
    """The trainable adapter parameters (``lora_A``/``lora_B``) of every LoRALinear in ``module``."""
    return [p for n, p in module.named_parameters() if "lora_A" in n or "lora_B" in n]
