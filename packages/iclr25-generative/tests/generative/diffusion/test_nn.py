"""Networks: UNet2D / VideoUNet (item 6), LoRA (item 7), fused GroupNorm+FiLM+SiLU kernel."""

import pytest
import torch

from iclr25.generative.diffusion import nn
from iclr25.generative.diffusion.reference import groupnorm_film_silu_reference


@pytest.mark.parametrize("px", [8, 16, 32])
def test_unet_shape_preserved(px):
    torch.manual_seed(0)
    net = nn.UNet2D(3, 3, ch=16, attn_resolutions=(px // 2,))
    x = torch.randn(2, 3, px, px)
    assert net(x, torch.tensor([0.1, -0.3])).shape == x.shape
    assert net(x, torch.tensor([5, 900])).shape == x.shape  # integer DDPM timesteps too


def test_video_unet_shape_and_temporal_mixing():
    torch.manual_seed(0)
    net = nn.VideoUNet(1, 1, ch=16, ch_mult=(1, 2), context_dim=8)
    x = torch.randn(2, 1, 3, 8, 8)
    out = net(x, torch.zeros(2), context=torch.randn(2, 4, 8))
    assert out.shape == x.shape
    # temporal attention mixes frames: changing frame 0 changes frame 2's output
    x2 = x.clone()
    x2[:, :, 0] += 1
    out2 = net(x2, torch.zeros(2), context=torch.zeros(2, 4, 8))
    out1 = net(x, torch.zeros(2), context=torch.zeros(2, 4, 8))
    assert (out2[:, :, 2] - out1[:, :, 2]).abs().max() > 1e-4


def test_context_changes_output_only_with_context_dim():
    torch.manual_seed(0)
    x, t = torch.randn(2, 1, 8, 8), torch.zeros(2)
    c1, c2 = torch.randn(2, 5, 8), torch.randn(2, 5, 8)
    plain = nn.UNet2D(1, 1, ch=16)
    assert torch.equal(plain(x, t, context=c1), plain(x, t, context=c2))
    cond = nn.UNet2D(1, 1, ch=16, context_dim=8)
    assert (cond(x, t, context=c1) - cond(x, t, context=c2)).abs().max() > 1e-4
    # masked-out context tokens have no influence
    mask = torch.tensor([[True, True, False, False, False]] * 2)
    c3 = c1.clone()
    c3[:, 2:] = 100.0
    assert torch.allclose(
        cond(x, t, context=c1, context_mask=mask), cond(x, t, context=c3, context_mask=mask), atol=1e-6
    )


def test_equivalent_attention_processor_keeps_outputs():
    torch.manual_seed(0)
    # float64: the comparison then measures the processors, not float32 summation order
    net = nn.UNet2D(1, 1, ch=16, attn_resolutions=(4,), context_dim=8).double()
    x, t, c = torch.randn(2, 1, 8, 8).double(), torch.zeros(2).double(), torch.randn(2, 5, 8).double()
    ref = net(x, t, context=c)
    procs = net.attn_processors
    assert procs and all(k.endswith(".processor") for k in procs)
    assert any(".attn2.processor" in k for k in procs)
    store = nn.StoreAttnProcessor()
    net.set_attn_processor(store)
    assert (net(x, t, context=c) - ref).abs().max() < 1e-6
    assert store.maps is not None and torch.allclose(store.maps.sum(-1), torch.ones((), dtype=torch.float64))
    with pytest.raises(ValueError, match="keys"):
        net.set_attn_processor({"nope.processor": store})


def test_gradients_reach_every_parameter():
    torch.manual_seed(0)
    for net, x in (
        (
            nn.UNet2D(1, 1, ch=16, attn_resolutions=(4,), num_classes=3, context_dim=8, sample_size=8),
            torch.randn(2, 1, 8, 8),
        ),
        (nn.VideoUNet(1, 1, ch=16, ch_mult=(1, 2), context_dim=8), torch.randn(2, 1, 2, 8, 8)),
    ):
        out = net(x, torch.tensor([0.2, -0.4]), class_labels=torch.tensor([0, 2]), context=torch.randn(2, 3, 8))
        out.square().sum().backward()
        missing = [n for n, p in net.named_parameters() if p.grad is None or p.grad.abs().sum() == 0]
        # the class table's unused rows get zero gradient by construction
        missing = [n for n in missing if n != "class_emb.weight"]
        assert not missing, missing
        assert net.class_emb is None or net.class_emb.weight.grad[[0, 2]].abs().sum() > 0


def test_unet_bad_input():
    net = nn.UNet2D(1, 1, ch=16, context_dim=8)
    with pytest.raises(TypeError, match="floating point"):
        net(torch.zeros(2, 1, 8, 8, dtype=torch.uint8), torch.zeros(2))
    with pytest.raises(ValueError, match="context batch"):
        net(torch.zeros(2, 1, 8, 8), torch.zeros(2), context=torch.zeros(3, 4, 8))
    with pytest.raises(ValueError, match="x must be finite"):
        net(torch.full((1, 1, 8, 8), float("nan")), torch.zeros(1))
    with pytest.raises(ValueError, match="divisible"):
        net(torch.zeros(1, 1, 6, 6), torch.zeros(1))
    assert net(torch.zeros(0, 1, 8, 8), torch.zeros(0)).shape == (0, 1, 8, 8)
    with pytest.raises(ValueError, match="multiple of 8"):
        nn.UNet2D(1, 1, ch=12)


def test_lora_zero_init_merge_unmerge_and_scaling():
    torch.manual_seed(0)
    net = nn.UNet2D(1, 1, ch=16, context_dim=8)
    x, t, c = torch.randn(2, 1, 8, 8), torch.zeros(2), torch.randn(2, 3, 8)
    ref = net(x, t, context=c)
    hits = nn.inject_lora(net, ["to_k", "to_v"], rank=2, alpha=4.0)
    assert hits and all(h.endswith(("to_k", "to_v")) for h in hits)
    assert torch.equal(net(x, t, context=c), ref)  # B = 0: exact no-op
    lora = net.get_submodule(hits[0])
    assert lora.scaling == 2.0
    with torch.no_grad():
        lora.lora_B.weight.normal_()
    w0 = lora.base.weight.detach().clone()
    y = torch.randn(5, lora.base.in_features)
    expect = y @ (w0 + 2.0 * lora.lora_B.weight @ lora.lora_A.weight).T
    assert torch.allclose(lora(y), expect, atol=1e-5)
    lora.merge()
    assert torch.allclose(lora(y), expect, atol=1e-5)
    lora.unmerge()
    assert torch.equal(lora.base.weight, w0)  # bit-exact restore
    params = nn.lora_parameters(net)
    assert len(params) == 2 * len(hits) and all(p.requires_grad for p in params)
    assert not lora.base.weight.requires_grad
    with pytest.raises(ValueError, match="matched no"):
        nn.inject_lora(net, ["does_not_exist"])


def test_mlp_and_autoencoder():
    torch.manual_seed(0)
    mlp = nn.MLPDenoiserNet(2)
    assert mlp(torch.randn(5, 2), torch.randn(5)).shape == (5, 2)
    ae = nn.TinyAutoencoder(1, 4, down=2, kl=True)
    x = torch.randn(3, 1, 16, 16)
    z = ae.encode(x)
    assert z.shape == (3, 4, 4, 4) and ae.decode(z).shape == x.shape
    assert ae.loss(x).shape == (3,)
    sf = ae.fit_scale_factor(x)
    with torch.no_grad():
        assert abs(sf * float(ae.encode(x).std()) - 1) < 1e-5


@pytest.mark.parametrize("shape,groups", [((2, 32, 8, 8), 8), ((3, 12, 5, 7), 3), ((1, 6, 4, 4), 6)])
def test_groupnorm_film_silu_reference_matches_modules(shape, groups):
    torch.manual_seed(0)
    x = torch.randn(shape)
    gn = torch.nn.GroupNorm(groups, shape[1])
    with torch.no_grad():
        gn.weight.normal_()
        gn.bias.normal_()
    sc, sh = torch.randn(shape[:2]), torch.randn(shape[:2])
    expect = torch.nn.functional.silu(gn(x) * (1 + sc[:, :, None, None]) + sh[:, :, None, None])
    out = nn.groupnorm_film_silu(x, groups, gn.weight, gn.bias, sc, sh, backend="reference")
    assert torch.allclose(out, expect, atol=1e-6)


@pytest.mark.triton
@pytest.mark.parametrize(
    "shape,groups,film", [((2, 32, 8, 8), 8, True), ((2, 12, 3, 5), 3, True), ((1, 6, 4, 4), 2, False)]
)
def test_groupnorm_film_silu_triton_matches_reference(shape, groups, film):
    g = torch.Generator().manual_seed(0)
    x = 2 * torch.randn(shape, generator=g) + 0.5
    w, b = torch.randn(shape[1], generator=g), torch.randn(shape[1], generator=g)
    sc = torch.randn(shape[:2], generator=g) if film else None
    sh = torch.randn(shape[:2], generator=g) if film else None
    ref = groupnorm_film_silu_reference(x, groups, w, b, sc, sh)
    out = nn.groupnorm_film_silu(x, groups, w, b, sc, sh, backend="triton")
    assert torch.allclose(out, ref, atol=1e-5, rtol=0)


def _gn_case(shape, groups, affine, film, chunked, offset=0.0, seed=1):
    g = torch.Generator().manual_seed(seed)
    B, C = shape[:2]
    x = (2 * torch.randn(shape, generator=g, dtype=torch.float32) + offset).requires_grad_()
    w = torch.randn(C, generator=g).requires_grad_() if affine else None
    b = torch.randn(C, generator=g).requires_grad_() if affine else None
    e = torch.randn(B, 2 * C, generator=g).requires_grad_() if film else None
    leaves = [t for t in (x, w, b, e) if t is not None]
    return x, w, b, e, leaves, torch.randn(shape, generator=g)


def _film(e, C, chunked):
    if e is None:
        return None, None
    # ResBlocks pass chunk() views (row stride 2C); the kernel must read them without a copy bug
    return e.chunk(2, dim=1) if chunked else (e[:, :C].contiguous(), e[:, C:].contiguous())


@pytest.mark.triton
@pytest.mark.parametrize(
    "shape,groups,affine,film,chunked,offset",
    [
        ((2, 8, 4, 4), 4, True, True, True, 0.0),  # the ResBlock case
        ((2, 12, 3, 5), 4, True, True, False, 0.0),  # 3 channels per group (padded tile), odd HW
        ((1, 6, 4, 4), 2, True, False, False, 0.0),  # GroupNorm + SiLU only (first pre-activation)
        ((2, 6, 3, 3), 3, False, True, True, 0.0),  # FiLM without GroupNorm affine
        ((2, 4, 2, 3), 1, False, False, False, 100.0),  # mean >> spread: shifted statistics
        ((1, 64, 12, 12), 2, True, True, True, 0.0),  # 32 channels per group: HW in 2 tiles, partial tail
    ],
)
def test_groupnorm_film_silu_triton_gradients(shape, groups, affine, film, chunked, offset):
    # Forward and backward are separate fused kernels (backward from the saved mean/rstd): every
    # gradient (x, GroupNorm weight/bias, FiLM scale/shift) must match torch autograd of the spec.
    x, w, b, e, leaves, dy = _gn_case(shape, groups, affine, film, chunked, offset)
    sc, sh = _film(e, shape[1], chunked)
    out = nn.groupnorm_film_silu(x, groups, w, b, sc, sh, backend="triton")
    grads = torch.autograd.grad(out, leaves, dy)
    ref = groupnorm_film_silu_reference(x, groups, w, b, sc, sh)
    ref_grads = torch.autograd.grad(ref, leaves, dy)
    # float32 throughout; |values| ~ 1 except the 100-offset input, whose own rounding is 100 * 6e-8
    assert torch.allclose(out, ref, atol=1e-5 * (1 + offset / 10), rtol=0)
    for a, r in zip(grads, ref_grads, strict=True):
        # parameter gradients are sums of B*HW terms of size ~1: float32 summation-order error ~1e-6
        assert torch.allclose(a, r, atol=1e-5, rtol=1e-5), float((a - r).abs().max())


@pytest.mark.triton
def test_resblock_triton_matches_reference():
    torch.manual_seed(0)
    blk = nn.ResBlock(8, 16, 12)
    x, emb = torch.randn(2, 8, 4, 4), torch.randn(2, 12)
    outs = []
    for be in ("reference", "triton"):
        blk.backend = be
        blk.zero_grad()
        y = blk(x, emb)
        y.square().sum().backward()
        outs.append((y.detach(), [p.grad.clone() for p in blk.parameters()]))
    assert torch.allclose(outs[0][0], outs[1][0], atol=1e-5)
    for a, r in zip(outs[0][1], outs[1][1], strict=True):
        assert torch.allclose(a, r, atol=1e-4, rtol=1e-5), float((a - r).abs().max())


def test_resblock_matches_module_composition():
    # the fused calls are exactly GroupNorm -> SiLU -> conv and GroupNorm -> FiLM -> SiLU -> conv
    torch.manual_seed(0)
    blk = nn.ResBlock(8, 16, 12)
    x, emb = torch.randn(2, 8, 4, 4), torch.randn(2, 12)
    h = blk.conv1(torch.nn.functional.silu(blk.norm1(x)))
    sc, sh = blk.emb_proj(torch.nn.functional.silu(emb)).chunk(2, dim=1)
    h = torch.nn.functional.silu(blk.norm2(h) * (1 + sc[:, :, None, None]) + sh[:, :, None, None])
    expect = blk.skip(x) + blk.conv2(h)
    assert torch.allclose(blk(x, emb), expect, atol=1e-6)


def test_groupnorm_film_silu_gradcheck():
    g = torch.Generator().manual_seed(2)
    args = [
        torch.randn(s, generator=g, dtype=torch.float64, requires_grad=True)
        for s in ((2, 4, 3, 3), (4,), (4,), (2, 4), (2, 4))
    ]
    assert torch.autograd.gradcheck(lambda *a: groupnorm_film_silu_reference(a[0], 2, *a[1:]), args)


@pytest.mark.triton
def test_groupnorm_film_silu_triton_refuses_huge_groups():
    from iclr25.core.triton import BackendUnavailableError

    x = torch.zeros(1, 2048, 1, 1)  # 2048 channels in one group: over the kernel's register tile
    with pytest.raises(BackendUnavailableError, match="channels per group"):
        nn.groupnorm_film_silu(x, 1, backend="triton")
    assert nn.groupnorm_film_silu(x, 1).shape == x.shape  # auto falls back to torch


@pytest.mark.triton
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_groupnorm_film_silu_triton_half_precision(dtype):
    # the backend accepts float16/bfloat16 (auto picks it on CUDA): the kernel reads half inputs,
    # works in float32 and rounds each stored result once, so it must match the float32 spec on the
    # same inputs to one unit in the last place of the output dtype (eps |ref|, whichever rounding
    # mode the conversion uses) plus the float32 accumulation error (sums of <= 32 O(1) terms, < 1e-4)
    g = torch.Generator().manual_seed(0)
    B, C, groups = 2, 12, 4
    shape = (B, C, 3, 5)
    x = (2 * torch.randn(shape, generator=g)).to(dtype).requires_grad_()
    w = torch.randn(C, generator=g).to(dtype).requires_grad_()
    b = torch.randn(C, generator=g).to(dtype).requires_grad_()
    e = torch.randn(B, 2 * C, generator=g).to(dtype).requires_grad_()
    dy = torch.randn(shape, generator=g).to(dtype)
    sc, sh = e.chunk(2, dim=1)
    out = nn.groupnorm_film_silu(x, groups, w, b, sc, sh, backend="triton")
    grads = torch.autograd.grad(out, [x, w, b, e], dy)
    ref_leaves = [t.detach().float().requires_grad_() for t in (x, w, b, e)]
    rsc, rsh = ref_leaves[3].chunk(2, dim=1)
    ref = groupnorm_film_silu_reference(ref_leaves[0], groups, ref_leaves[1], ref_leaves[2], rsc, rsh)
    ref_grads = torch.autograd.grad(ref, ref_leaves, dy.float())
    eps = torch.finfo(dtype).eps
    for got, want in zip((out, *grads), (ref, *ref_grads), strict=True):
        assert got.dtype == dtype
        err = (got.float() - want.detach()).abs()
        assert bool((err <= eps * want.detach().abs() + 1e-4).all()), float(err.max())


@pytest.mark.triton
def test_groupnorm_film_silu_triton_empty_batch():
    x, w, b, e, leaves, dy = _gn_case((0, 8, 4, 4), 4, True, True, True)
    sc, sh = _film(e, 8, True)
    out = nn.groupnorm_film_silu(x, 4, w, b, sc, sh, backend="triton")
    assert out.shape == x.shape
    grads = torch.autograd.grad(out, leaves, dy)
    ref_grads = torch.autograd.grad(groupnorm_film_silu_reference(x, 4, w, b, sc, sh), leaves, dy)
    for a, r in zip(grads, ref_grads, strict=True):
        assert a.shape == r.shape and torch.equal(a, r)  # no sample: every gradient is zero


def test_groupnorm_film_silu_validates_input():
    x = torch.zeros(2, 6, 4, 4)
    with pytest.raises(ValueError, match="num_groups must divide"):
        nn.groupnorm_film_silu(x, 4)
    with pytest.raises(ValueError, match="scale must have shape"):
        nn.groupnorm_film_silu(x, 3, scale=torch.zeros(2, 3), shift=torch.zeros(2, 6))
    with pytest.raises(TypeError, match="floating point"):
        nn.groupnorm_film_silu(x.long(), 3)


@pytest.mark.triton
def test_groupnorm_film_silu_triton_refusals_name_the_reason():
    from iclr25.core.triton import BackendUnavailableError

    x = torch.randn(2, 6, 4, 4, dtype=torch.float64)
    with pytest.raises(BackendUnavailableError, match="dtype"):
        nn.groupnorm_film_silu(x, 3, backend="triton")
    with pytest.raises(BackendUnavailableError, match="pairs"):
        nn.groupnorm_film_silu(x.float(), 3, scale=torch.zeros(2, 6), backend="triton")
    ref = groupnorm_film_silu_reference(x, 3, None, None, None, None)
    assert torch.equal(nn.groupnorm_film_silu(x, 3), ref)  # auto runs the reference


def test_store_processor_respects_context_mask():
    torch.manual_seed(0)
    net = nn.UNet2D(1, 1, ch=16, context_dim=8).double()
    x, t, c = torch.randn(2, 1, 8, 8).double(), torch.zeros(2).double(), torch.randn(2, 5, 8).double()
    mask = torch.tensor([[True, True, False, False, False], [True] * 5])
    ref = net(x, t, context=c, context_mask=mask)
    stores = {k: nn.StoreAttnProcessor() for k in net.attn_processors}
    net.set_attn_processor(stores)
    assert (net(x, t, context=c, context_mask=mask) - ref).abs().max() < 1e-6
    cross = [p.maps for k, p in stores.items() if ".attn2." in k]
    assert cross and all(m.shape[-1] == 5 for m in cross)
    for m in cross:  # masked keys get exactly zero attention; rows still sum to one
        assert torch.equal(m[0, ..., 2:], torch.zeros_like(m[0, ..., 2:])) and bool((m[1, ..., 2:] > 0).all())
        assert torch.allclose(m.sum(-1), torch.ones((), dtype=torch.float64))


def test_resblock_additive_embedding_matches_module_composition():
    # film=False: the projected embedding is added after the first conv (DDPM style), no scale-shift
    torch.manual_seed(0)
    blk = nn.ResBlock(8, 16, 12, film=False)
    x, emb = torch.randn(2, 8, 4, 4), torch.randn(2, 12)
    silu = torch.nn.functional.silu
    h = blk.conv1(silu(blk.norm1(x))) + blk.emb_proj(silu(emb))[:, :, None, None]
    expect = blk.skip(x) + blk.conv2(silu(blk.norm2(h)))
    assert torch.allclose(blk(x, emb), expect, atol=1e-6)
    assert nn.UNet2D(1, 1, ch=16, film=False)(torch.randn(2, 1, 8, 8), torch.zeros(2)).shape == (2, 1, 8, 8)


def test_unet_default_class_label_is_the_null_class():
    # label num_classes is the null class (CFG's unconditional pass); omitting class_labels uses it
    torch.manual_seed(0)
    net = nn.UNet2D(1, 1, ch=16, num_classes=3)
    x, t = torch.randn(2, 1, 8, 8), torch.zeros(2)
    assert torch.equal(net(x, t), net(x, t, class_labels=torch.full((2,), 3)))
    assert (net(x, t) - net(x, t, class_labels=torch.zeros(2, dtype=torch.long))).abs().max() > 1e-4
    with pytest.raises(ValueError, match="class_labels batch"):
        net(x, t, class_labels=torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match="t must be a scalar"):
        net(x, torch.zeros(3))


@pytest.mark.parametrize("px", [16, 32])
def test_video_unet_shape_preserved(px):
    torch.manual_seed(0)
    net = nn.VideoUNet(1, 1, ch=16, ch_mult=(1, 2), attn_resolutions=(px // 2,))
    x = torch.randn(1, 1, 2, px, px)
    assert net(x, torch.tensor([0.3])).shape == x.shape


def test_video_unet_context_only_with_context_dim_and_bad_input():
    torch.manual_seed(0)
    x, t = torch.randn(2, 1, 3, 8, 8), torch.zeros(2)
    c1, c2 = torch.randn(2, 4, 8), torch.randn(2, 4, 8)
    plain = nn.VideoUNet(1, 1, ch=16, ch_mult=(1, 2))
    assert torch.equal(plain(x, t, context=c1), plain(x, t, context=c2))
    cond = nn.VideoUNet(1, 1, ch=16, ch_mult=(1, 2), context_dim=8)
    assert (cond(x, t, context=c1) - cond(x, t, context=c2)).abs().max() > 1e-4
    with pytest.raises(ValueError, match=r"\(B, C, F, H, W\)"):
        cond(torch.zeros(2, 1, 8, 8), t)
    with pytest.raises(ValueError, match="context batch"):
        cond(x, t, context=torch.zeros(3, 4, 8))
    with pytest.raises(TypeError, match="floating point"):
        cond(x.long(), t)
    with pytest.raises(ValueError, match="t must be a scalar"):
        cond(x, torch.zeros(3))
    assert cond(x[:0], t[:0], context=c1[:0]).shape == (0, 1, 3, 8, 8)  # empty batch
    with pytest.raises(ValueError, match="max_frames"):
        nn.VideoUNet(1, 1, ch=16, ch_mult=(1, 2), max_frames=2)(x, t)
    sinus = nn.VideoUNet(1, 1, ch=16, ch_mult=(1, 2), max_frames=2, temporal_pos="sinusoidal")
    assert sinus(x, t).shape == x.shape  # sinusoidal frame positions have no length limit


def test_temporal_attention_positions_and_zero_init():
    # attention over frames is permutation-equivariant; the frame position embedding is what breaks it
    torch.manual_seed(0)
    f, perm = 4, [2, 0, 3, 1]
    x = torch.randn(2 * f, 8, 2, 2)

    def permute(v):
        return v.reshape(2, f, 8, 2, 2)[:, perm].reshape(2 * f, 8, 2, 2)

    for pos in ("learned", "sinusoidal"):
        ta = nn.TemporalAttention(8, heads=2, pos=pos)
        assert (ta(permute(x), f) - permute(ta(x, f))).abs().max() > 1e-4
    ta = nn.TemporalAttention(8, heads=2, pos="learned")
    with torch.no_grad():
        ta.pos_emb.zero_()
    assert torch.allclose(ta(permute(x), f), permute(ta(x, f)), atol=1e-6)
    assert torch.equal(nn.TemporalAttention(8, heads=2, zero_init=True)(x, f), x)  # starts as the identity
    with pytest.raises(ValueError, match="divisible"):
        ta(x, 3)
    with pytest.raises(ValueError, match="pos"):
        nn.TemporalAttention(8, pos="rotary")


@pytest.mark.triton
@pytest.mark.parametrize("layout", ["strided_channels", "mixed_row_strides"])
def test_groupnorm_film_silu_triton_film_layouts(layout):
    # the kernel reads scale/shift by (row stride, unit channel stride): a view with a non-unit channel
    # stride is copied, and scale/shift with different row strides are both made contiguous
    x, w, b, e, leaves, dy = _gn_case((2, 8, 3, 3), 4, True, True, True)
    if layout == "strided_channels":
        sc, sh = e[:, 0::2], e[:, 1::2]
    else:
        sc, sh = e[:, :8], e[:, 8:].contiguous()
    out = nn.groupnorm_film_silu(x, 4, w, b, sc, sh, backend="triton")
    ref = groupnorm_film_silu_reference(x, 4, w, b, sc, sh)
    assert torch.allclose(out, ref, atol=1e-5, rtol=0)
    for a, r in zip(torch.autograd.grad(out, leaves, dy), torch.autograd.grad(ref, leaves, dy), strict=True):
        assert torch.allclose(a, r, atol=1e-5, rtol=1e-5), float((a - r).abs().max())


@pytest.mark.triton
def test_groupnorm_film_silu_triton_refuses_what_it_cannot_compute_like_the_spec():
    # the kernel indexes weight/bias as (C,) vectors and writes y in x's dtype: a wrong-sized affine
    # (which the spec rejects) or a FiLM dtype that promotes the spec's result must not run silently
    from iclr25.core.triton import BackendUnavailableError

    x = torch.randn(2, 8, 3, 3)
    with pytest.raises(BackendUnavailableError, match=r"weight must have shape \(8,\), got \(4,\)"):
        nn.groupnorm_film_silu(x, 4, torch.ones(4), torch.zeros(4), backend="triton")
    with pytest.raises(BackendUnavailableError, match=r"bias must have shape \(8,\), got \(8, 1\)"):
        nn.groupnorm_film_silu(x, 4, torch.ones(8), torch.zeros(8, 1), backend="triton")
    sc, sh = torch.randn(2, 8), torch.randn(2, 8)
    with pytest.raises(BackendUnavailableError, match=r"scale dtype torch\.float32 would promote"):
        nn.groupnorm_film_silu(x.half(), 4, None, None, sc, sh, backend="triton")
    out = nn.groupnorm_film_silu(x.half(), 4, None, None, sc, sh)  # auto: the spec, float32 result
    assert torch.equal(out, groupnorm_film_silu_reference(x.half(), 4, None, None, sc, sh))
    assert out.dtype == torch.float32


@pytest.mark.triton
def test_groupnorm_film_silu_triton_takes_numpy_scalars():
    # the public op accepts any Integral num_groups (and the spec any real eps); the launch needs Python scalars
    np = pytest.importorskip("numpy")
    x = torch.randn(2, 8, 3, 3)
    out = nn.groupnorm_film_silu(x, np.int64(4), eps=np.float32(1e-3), backend="triton")
    assert torch.allclose(out, groupnorm_film_silu_reference(x, 4, None, None, None, None, 1e-3), atol=1e-5, rtol=0)


@pytest.mark.triton
def test_groupnorm_film_silu_triton_refuses_double_backward():
    # the fused backward's gradients carry no graph: with create_graph=True a gradient penalty through
    # them would silently be a constant, so the backward must refuse instead
    x, w, b, e, leaves, dy = _gn_case((2, 8, 3, 3), 4, True, True, True)
    sc, sh = _film(e, 8, True)
    out = nn.groupnorm_film_silu(x, 4, w, b, sc, sh, backend="triton")
    with pytest.raises(RuntimeError, match="create_graph"):
        torch.autograd.grad(out, leaves, dy, create_graph=True)
    ref = nn.groupnorm_film_silu(x, 4, w, b, sc, sh, backend="reference")
    (gx,) = torch.autograd.grad(ref, x, dy, create_graph=True)
    assert gx.requires_grad  # the spec is twice differentiable


@pytest.mark.triton
def test_unet_triton_backend_matches_reference():
    # set_backend switches every fused pre-activation (ResBlocks and norm_out) of the whole UNet;
    # one level keeps the interpreter run short (each new shape is a new interpreted launch)
    torch.manual_seed(0)
    net = nn.UNet2D(1, 1, ch=16, ch_mult=(1,))
    x, t = torch.randn(1, 1, 4, 4), torch.tensor([0.1])
    runs = []
    for be in ("reference", "triton"):
        net.set_backend(be)
        assert {m.backend for m in net.modules() if isinstance(m, (nn.ResBlock, nn.UNet2D))} == {be}
        net.zero_grad()
        y = net(x, t)
        y.square().sum().backward()
        runs.append((y.detach(), [p.grad.clone() for p in net.parameters()]))
    assert torch.allclose(runs[0][0], runs[1][0], atol=1e-5)
    for a, r in zip(runs[0][1], runs[1][1], strict=True):
        assert torch.allclose(a, r, atol=1e-4, rtol=1e-4), float((a - r).abs().max())


def test_deterministic_autoencoder_and_kl_term():
    torch.manual_seed(0)
    x = torch.randn(3, 1, 8, 8)
    ae = nn.TinyAutoencoder(1, 2, down=1)
    z = ae.encode(x)
    assert z.shape == (3, 2, 4, 4) and torch.equal(ae.encode(x, sample=True), z)  # no noise without kl
    assert torch.allclose(ae.loss(x), (ae.decode(z) - x).pow(2).flatten(1).mean(1))
    vae = nn.TinyAutoencoder(1, 2, down=1, kl=True, kl_weight=0.5)
    mean, logvar = vae.encoder(x).chunk(2, dim=1)
    kl = 0.5 * (mean.pow(2) + logvar.exp() - 1 - logvar).flatten(1).sum(1)  # KL(N(m, e^lv) || N(0, 1))
    with torch.no_grad():
        full = vae.loss(x, generator=torch.Generator().manual_seed(1))
        vae.kl_weight = 0.0
        rec = vae.loss(x, generator=torch.Generator().manual_seed(1))
    assert torch.allclose(full - rec, 0.5 * kl.detach(), rtol=1e-5)
    s1 = vae.encode(x, sample=True, generator=torch.Generator().manual_seed(2))
    assert torch.equal(s1, vae.encode(x, sample=True, generator=torch.Generator().manual_seed(2)))
    assert not torch.equal(s1, vae.encode(x))
    with pytest.raises(TypeError, match="floating point"):
        ae.decode(z.long())


def test_lora_and_unet_argument_checks():
    with pytest.raises(TypeError, match=r"nn\.Linear"):
        nn.LoRALinear(torch.nn.Conv2d(1, 1, 1))
    with pytest.raises(ValueError, match="rank"):
        nn.LoRALinear(torch.nn.Linear(2, 2), rank=0)
    net = nn.UNet2D(1, 1, ch=16, context_dim=8)
    hits = nn.inject_lora(net, "to_q")  # a single name is accepted as well as a list
    assert hits and all(h.endswith(".to_q") and isinstance(net.get_submodule(h), nn.LoRALinear) for h in hits)
    x, t = torch.zeros(2, 1, 8, 8), 0.5  # a Python-number t is broadcast over the batch
    assert net(x, t).shape == x.shape
    with pytest.raises(ValueError, match="context must have shape"):
        net(x, torch.zeros(2), context=torch.zeros(2, 4, 5))
    with pytest.raises(ValueError, match="context_mask must have shape"):
        net(x, torch.zeros(2), context=torch.zeros(2, 4, 8), context_mask=torch.ones(2, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="x must have shape"):
        net(torch.zeros(2, 3, 8, 8), torch.zeros(2))
    with pytest.raises(ValueError, match="t must be finite"):
        net(x, torch.tensor([0.0, float("nan")]))
    with pytest.raises(ValueError, match="ch_mult"):
        nn.UNet2D(1, 1, ch=16, ch_mult=())
    with pytest.raises(ValueError, match=r"x must have shape \(B, 2\)"):
        nn.MLPDenoiserNet(2)(torch.zeros(4, 3), torch.zeros(4))


@pytest.mark.triton
def test_groupnorm_film_silu_affine_dtype_is_checked_on_every_backend():
    # F.group_norm (the reference, like torch.nn.GroupNorm) refuses a float64 affine for float32 x
    # ("mixed dtype") while the kernel read it as float32 and returned a result: the backends
    # disagreed. The kernel's support check now refuses it too, and the op names the arguments.
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 6, 4, 4, generator=g)
    w, b = torch.randn(6, generator=g, dtype=torch.float64), torch.randn(6, generator=g, dtype=torch.float64)
    assert any("weight/bias dtype" in r for r in nn._gn_supports(x, 3, w, b, None, None))
    with pytest.raises(RuntimeError, match="mixed dtype"):
        nn._GN_OP(x, 3, w, b, None, None, 1e-5, backend="auto")  # routed to the reference
    for backend in ("auto", "reference", "triton"):
        with pytest.raises(TypeError, match=r"weight/bias dtype must be torch.float32 .*weight torch.float64"):
            nn.groupnorm_film_silu(x, 3, w, b, backend=backend)
    with pytest.raises(TypeError, match="one dtype for both"):
        nn.groupnorm_film_silu(x.bfloat16(), 3, w.bfloat16(), b.float(), backend="triton")
    # what torch.nn.GroupNorm accepts still runs on both: x's dtype, or float32 for half x
    for xd, wd in ((torch.float32, torch.float32), (torch.bfloat16, torch.float32), (torch.bfloat16, torch.bfloat16)):
        xs, ws, bs = x.to(xd), w.to(wd), b.to(wd)
        assert not nn._gn_supports(xs, 3, ws, bs, None, None)
        ref = nn.groupnorm_film_silu(xs, 3, ws, bs, backend="reference")
        out = nn.groupnorm_film_silu(xs, 3, ws, bs, backend="triton")
        assert out.dtype == ref.dtype == xd
        assert torch.allclose(out.float(), ref.float(), atol=2 * torch.finfo(xd).eps * 8, rtol=0)
