"""Everyday workflows of a CompressAI user: saving, dtypes, short messages, argument validation."""

import io
import pickle

import numpy as np
import pytest
import torch

from iclr25.compress.ltc import (
    LTC,
    NTC,
    BlockLTC,
    FactorizedDensity,
    LatticeCodec,
    LatticeEntropyModel,
    MixtureDensity,
    VoronoiCode,
    lattice,
    rate_distortion_loss,
)


def _a2_codec(**kwargs) -> LatticeCodec:
    return LatticeCodec(lattice("A2"), MixtureDensity(2), n_samples=64, **kwargs).fit()


# ----------------------------------------------------------------------------------- models
def test_evaluate_validates_x_like_forward():
    """A (B, k, d_in) batch used to run, normalizing the rate and MSE by k instead of d_in."""
    model = LTC(8, "E8", hidden=8, density="mixture", n_samples=4)
    for bad in (torch.randn(10, 4, 8), torch.randn(8), torch.randn(5, 4)):
        with pytest.raises(ValueError, match=r"x must be a \(batch, 8\) tensor"):
            model.evaluate(bad, n_samples=8)


def test_rate_distortion_loss_rejects_a_broadcasting_x():
    """x of another shape than x_hat used to broadcast: wrong MSE and wrong bits per dimension."""
    torch.manual_seed(0)
    out = LTC(2, "A2", hidden=4, density="mixture", n_samples=4)(torch.randn(3, 2))
    with pytest.raises(ValueError, match=r"x must have the shape of out\['x_hat'\] \(3, 2\), got \(3, 1\)"):
        rate_distortion_loss(out, torch.randn(3, 1), 1.0)


def test_block_ltc_validates_sizes_and_gives_each_coordinate_its_own_density():
    with pytest.raises(ValueError, match="d_latent must be a positive int, got 0"):
        BlockLTC(2, 0, "A2", hidden=4)
    with pytest.raises(ValueError, match="d_in must be a positive int, got 0"):
        BlockLTC(0, 1, "A2", hidden=4)
    dens = MixtureDensity(2)
    model = BlockLTC(1, 3, "A2", hidden=4, density=dens, n_samples=4)
    ds = [em.density for em in model.entropy_models]
    assert ds[0] is dens and len({id(d) for d in ds}) == 3  # not one density shared by all coordinates
    assert all(torch.equal(d.loc, dens.loc) for d in ds)
    with torch.no_grad():
        ds[1].loc.add_(1.0)
    assert not torch.equal(ds[0].loc, ds[1].loc)


def test_whole_model_pickles_and_reloads_with_the_same_outputs():
    """The lattices' decoders are closures; pickling a model used to fail (torch.save(model))."""
    torch.manual_seed(0)
    model = NTC(4, 3, hidden=8, density="mixture", n_samples=4)
    buf = io.BytesIO()
    torch.save(model, buf)
    buf.seek(0)
    back = torch.load(buf, weights_only=False)
    assert back.quantizer.lattice is back.entropy_model.lattice
    x = torch.randn(6, 4)
    torch.manual_seed(1)
    a = model(x)
    torch.manual_seed(1)
    b = back(x)
    assert all(torch.equal(a[k], b[k]) for k in a)
    for name, kw in (("E8", {}), ("A2^4", {}), ("D4*", {}), ("A3", {}), ("Z", {"dim": 1})):
        lat = lattice(name, **kw)
        lat2 = pickle.loads(pickle.dumps(lat))
        y = 3 * torch.randn(50, lat.dim)
        assert lat2.name == lat.name and torch.equal(lat2.G, lat.G) and torch.equal(lat2.quantize(y), lat.quantize(y))


# ----------------------------------------------------------------------------------- entropy model
def test_n_samples_overrides_are_validated():
    """n_samples=0 used to fail with 'math domain error', 2.5 was truncated to 2."""
    em = LatticeEntropyModel("A2", MixtureDensity(2), n_samples=8)
    y = lattice("A2").quantize(torch.randn(4, 2))
    for bad in (0, -1, 2.5):
        with pytest.raises(ValueError, match="n_samples must be a positive int"):
            em.log_likelihood(y, n_samples=bad)
    with pytest.raises(ValueError, match="n_samples must be a positive int"):
        LTC(2, "A2", hidden=4, density="mixture").evaluate(torch.randn(5, 2), n_samples=0)
    assert em.log_likelihood(y, n_samples=16.0).shape == (4,)


def test_sample_method_is_validated_at_construction():
    with pytest.raises(ValueError, match="sample_method must be one of"):
        LatticeEntropyModel("A2", MixtureDensity(2), sample_method="sobel")
    with pytest.raises(ValueError, match="n_samples must be even for sample_method='antithetic'"):
        LatticeEntropyModel("A2", MixtureDensity(2), n_samples=255, sample_method="antithetic")
    with pytest.raises(TypeError, match="lat must be a Lattice or a name"):
        LatticeEntropyModel(3, MixtureDensity(2))


def test_likelihood_bound_zero_disables_the_bound_as_in_compressai():
    """likelihood_bound=0 used to raise 'math domain error' in forward."""
    em = LatticeEntropyModel("A2", MixtureDensity(2), n_samples=16, likelihood_bound=0.0)
    y = torch.tensor([[40.0, 0.0]])  # far in the tail: P < 1e-9
    torch.manual_seed(0)
    lik = em(y)
    torch.manual_seed(0)
    ref = torch.exp(em.log_likelihood(y))
    assert torch.equal(lik, ref) and float(lik.detach()) < 1e-9


def test_factorized_density_promotes_mixed_dtypes():
    dens = FactorizedDensity(2).double()
    assert dens.log_prob(torch.randn(3, 2)).dtype == torch.float64


# ----------------------------------------------------------------------------------- codec
def test_codec_pads_short_messages_and_round_trips_them(monkeypatch):
    """CompressAI's encoder overruns its buffer for < 3 symbols (heap corruption or segfault)."""
    import compressai.ans

    codec = _a2_codec()
    lengths = []

    class Recorder:
        def encode_with_indexes(self, sym, *args):
            lengths.append(len(sym))
            return b""

    with monkeypatch.context() as m:
        m.setattr(compressai.ans, "RansEncoder", Recorder)
        for count in (0, 1, 2, 3):
            codec.compress(lattice("A2").quantize(torch.randn(count, 2)))
    assert lengths == [3, 3, 3, 3]
    for count in (0, 1, 2):
        pts = lattice("A2").quantize(torch.randn(count, 2))
        assert torch.equal(codec.decompress(codec.compress(pts), count), pts)
    assert codec.estimated_bits(torch.zeros(0, 2)) == 0.0


def test_codec_decompress_validates_its_arguments():
    codec = _a2_codec()
    with pytest.raises(ValueError, match="data must be a bitstream"):
        codec.decompress(b"", 1)  # used to read past the end of the buffer
    with pytest.raises(ValueError, match="count must be a non-negative int"):
        codec.decompress(codec.compress(torch.zeros(3, 2)), -1)


def test_codec_precision_and_table_size_are_checked():
    """precision > 16 gave streams that silently decoded to other points; an overfull table a garbage CDF."""
    with pytest.raises(ValueError, match="precision must be an int in"):
        LatticeCodec(lattice("A2"), MixtureDensity(2), precision=17)
    with pytest.raises(ValueError, match=r"more than the 2\*\*precision - 1 = 255"):
        _a2_codec(precision=8)  # ~300 points


def test_codec_codes_off_lattice_latents_as_their_nearest_point():
    """compress(y) used to round the basis coefficients: a lattice point, but not the nearest one."""
    lat = lattice("A2")
    codec = _a2_codec()
    y = torch.randn(200, 2, generator=torch.Generator().manual_seed(0))
    assert torch.equal(codec.decompress(codec.compress(y), 200), lat.quantize(y))


def test_codec_accepts_a_name_and_a_float64_density():
    codec = LatticeCodec("A2", FactorizedDensity(2, init_scale=1.0).double(), n_samples=16).fit()
    pts = lattice("A2").quantize(0.5 * torch.randn(20, 2))
    assert torch.equal(codec.decompress(codec.compress(pts), 20), pts)


# ----------------------------------------------------------------------------------- Voronoi code
def test_voronoi_code_validation():
    with pytest.raises(TypeError, match="lat must be a Lattice or a name"):
        VoronoiCode(4, 4)
    code = VoronoiCode("E8", q=np.int64(4))
    assert code.q == 4
    m = code.encode(torch.randn(3, 8))
    with pytest.raises(ValueError, match="m must have last dimension 8"):
        code.decode(m[:, :4])


def test_codec_of_a_float64_density_tabulates_in_float64():
    """The table's probabilities were computed at float32-rounded points with float32 samples."""
    lat = lattice("A2")
    torch.manual_seed(0)
    model = LatticeEntropyModel(lat, MixtureDensity(2)).double()
    codec = LatticeCodec(lat, model, n_samples=64, seed=3).fit()
    pts = lat.points(codec.coords_table, dtype=torch.float64)
    with torch.no_grad():
        p = model.log_likelihood(pts, n_samples=64, generator=torch.Generator().manual_seed(3)).exp()
    np.testing.assert_allclose(codec.pmf, (p / p.sum()).numpy(), rtol=1e-12)
