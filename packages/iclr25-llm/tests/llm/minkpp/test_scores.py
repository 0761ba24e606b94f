"""Token statistics and scores against float64 brute force, hand values and invariants."""

import functools
import math

import pytest
import torch

from iclr25.llm.lm import TinyLlama, TinyLlamaConfig
from iclr25.llm.minkpp import (
    SIGMA_FLOOR,
    loss_scores,
    min_k_mean,
    mink_pp_scores,
    mink_scores,
    score_all,
    token_stats,
    zlib_scores,
)


def _brute(logits, targets):
    z = logits.double()
    out = []
    for row, t in zip(z.reshape(-1, z.shape[-1]), targets.reshape(-1), strict=True):
        p = [math.exp(v) for v in (row - row.max()).tolist()]
        zs = sum(p)
        p = [v / zs for v in p]
        lp = [math.log(v) for v in p]
        mu = sum(a * b for a, b in zip(p, lp, strict=True))
        var = sum(a * (b - mu) ** 2 for a, b in zip(p, lp, strict=True))
        out.append((lp[int(t)], mu, math.sqrt(var)))
    return torch.tensor(out, dtype=torch.float64).reshape(*targets.shape, 3)


def _model(vocab=50, seed=0):
    torch.manual_seed(seed)
    return TinyLlama(TinyLlamaConfig.preset("pico", vocab_size=vocab, max_seq_len=64)).eval()


def test_token_stats_equal_float64_brute_force():
    g = torch.Generator().manual_seed(0)
    logits = 3 * torch.randn(3, 5, 40, generator=g)
    targets = torch.randint(0, 40, (3, 5), generator=g)
    ell, mu, sigma = token_stats(logits, targets, backend="reference")
    ref = _brute(logits, targets)
    # fp32 log-softmax of O(10) logits: errors of a few ulp of 10, i.e. ~1e-6.
    for got, i in ((ell, 0), (mu, 1), (sigma, 2)):
        torch.testing.assert_close(got.double(), ref[..., i], atol=1e-5, rtol=1e-5)


def test_half_precision_logits_are_accumulated_in_float32():
    # bf16 logits are exact in float64, so the brute force on the same values is the target; a
    # log-softmax in bf16 itself would be off by ~2^-8 relative (about 1e-2 here), fp32 by ~1e-6.
    g = torch.Generator().manual_seed(5)
    logits = (3 * torch.randn(2, 6, 40, generator=g)).bfloat16()
    targets = torch.randint(0, 40, (2, 6), generator=g)
    ref = _brute(logits.double(), targets)
    for backend in ("auto", "reference"):
        got = token_stats(logits, targets, backend=backend)
        for x, i in zip(got, range(3), strict=True):
            assert x.dtype == torch.float32
            torch.testing.assert_close(x.double(), ref[..., i], atol=1e-5, rtol=1e-5)


def test_scores_invariant_to_constant_logit_shift():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(2, 7, 30, generator=g)
    targets = torch.randint(0, 30, (2, 7), generator=g)
    a = token_stats(logits, targets, backend="reference")
    b = token_stats(logits + 5.0, targets, backend="reference")
    for x, y in zip(a, b, strict=True):
        torch.testing.assert_close(x, y, atol=1e-5, rtol=1e-5)
    s_a = (a[0] - a[1]) / a[2]
    s_b = (b[0] - b[1]) / b[2]
    torch.testing.assert_close(s_a, s_b, atol=1e-4, rtol=1e-4)


def test_model_scores_invariant_to_lm_head_bias_shift():
    # Adding a constant to every logit of a real model leaves every score unchanged.
    model = _model()
    ids = torch.randint(0, 50, (3, 9), generator=torch.Generator().manual_seed(2))
    before = score_all(model, ids, methods=("loss", "mink", "mink++"), ks=(0.2, 1.0))

    class Shifted(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, x):
            return self.m(x).logits + 3.0

    after = score_all(Shifted(model), ids, methods=("loss", "mink", "mink++"), ks=(0.2, 1.0))
    for k in before:
        torch.testing.assert_close(before[k], after[k], atol=1e-4, rtol=1e-4)


def test_right_padded_batch_equals_single_sequences():
    model = _model()
    g = torch.Generator().manual_seed(3)
    seqs = [torch.randint(0, 50, (n,), generator=g) for n in (9, 4, 6)]
    ids = torch.zeros(3, 9, dtype=torch.long)
    mask = torch.zeros(3, 9, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = s
        mask[i, : len(s)] = 1
    ids[1, 4:] = 7  # padding content must not matter
    batch = score_all(model, ids, mask, methods=("loss", "mink", "mink++"), ks=(0.2, 0.5))
    for i, s in enumerate(seqs):
        single = score_all(model, s[None], methods=("loss", "mink", "mink++"), ks=(0.2, 0.5))
        for k in single:
            torch.testing.assert_close(batch[k][i : i + 1], single[k], atol=1e-5, rtol=1e-5)


def test_k1_mink_equals_loss_and_minkpp_equals_mean_score():
    model = _model()
    ids = torch.randint(0, 50, (4, 11), generator=torch.Generator().manual_seed(4))
    torch.testing.assert_close(mink_scores(model, ids, k=1.0), loss_scores(model, ids), atol=1e-6, rtol=1e-6)
    ell, mu, sigma = token_stats(model(ids).logits[:, :-1].detach(), ids[:, 1:])
    torch.testing.assert_close(mink_pp_scores(model, ids, k=1.0), ((ell - mu) / sigma).mean(-1), atol=1e-5, rtol=1e-5)


class _Fixed(torch.nn.Module):
    """A 3-token 'model' whose next-token distribution is a fixed table indexed by the current token."""

    def __init__(self, probs):
        super().__init__()
        self.logits = torch.nn.Parameter(torch.tensor(probs).log(), requires_grad=False)

    def forward(self, ids):
        return self.logits[ids]


def test_hand_computed_scores_on_three_token_model():
    probs = [[0.5, 0.25, 0.25], [0.7, 0.2, 0.1], [1 / 3, 1 / 3, 1 / 3]]
    model = _Fixed(probs)
    ids = torch.tensor([[0, 1, 0, 2]])  # predictions: p(1|0)=.25, p(0|1)=.7, p(2|0)=.25

    def stats(p):
        mu = sum(q * math.log(q) for q in p)
        return mu, math.sqrt(sum(q * (math.log(q) - mu) ** 2 for q in p))

    ells = [math.log(0.25), math.log(0.7), math.log(0.25)]
    rows = [probs[0], probs[1], probs[0]]
    s = [(e - stats(p)[0]) / stats(p)[1] for e, p in zip(ells, rows, strict=True)]
    # n - 1 = 3 predictions: k = 0.5 keeps floor(1.5) = 1, k = 0.7 keeps 2.
    assert loss_scores(model, ids).item() == pytest.approx(sum(ells) / 3, abs=1e-6)
    assert mink_scores(model, ids, k=0.5).item() == pytest.approx(min(ells), abs=1e-6)
    assert mink_scores(model, ids, k=0.7).item() == pytest.approx(sum(sorted(ells)[:2]) / 2, abs=1e-6)
    assert mink_pp_scores(model, ids, k=0.5).item() == pytest.approx(min(s), abs=1e-5)
    assert mink_pp_scores(model, ids, k=1.0).item() == pytest.approx(sum(s) / 3, abs=1e-5)
    # s_t is invariant per row: the (0.5, .25, .25) row gives (log .25 − mu)/sigma = -1 exactly.
    assert s[0] == pytest.approx(-1.0)
    text = "abc abc"
    import zlib

    assert zlib_scores(model, ids, [text]).item() == pytest.approx(sum(ells) / 3 / len(zlib.compress(b"abc abc")))


def test_min_k_mean_picks_lowest_not_highest():
    v = torch.tensor([[5.0, -1.0, 3.0, -4.0, 0.0]])
    assert min_k_mean(v, None, 0.4).item() == pytest.approx(-2.5)
    valid = torch.tensor([[True, True, True, False, False]])
    assert min_k_mean(v, valid, 0.2).item() == pytest.approx(-1.0)  # floor(0.6) -> at least one


def test_degenerate_distribution_uses_sigma_floor():
    logits = torch.tensor([[[0.0, 0.0, 0.0, 0.0], [50.0, -50.0, -50.0, -50.0], [0.0, -float("inf"), 1.0, 2.0]]])
    targets = torch.tensor([[2, 0, 1]])
    ell, mu, sigma = token_stats(logits, targets)
    assert (sigma >= SIGMA_FLOOR).all()
    # Uniform row: sigma = 0; one-hot row: sigma ~ sqrt(3 e^-100) · 100 ~ 1e-20. Both sit exactly on
    # the floor (a floor on sigma², or none, would not).
    assert bool((sigma[0, :2] == torch.tensor(SIGMA_FLOOR, dtype=torch.float32)).all())
    s = (ell - mu) / sigma
    assert torch.isfinite(ell[:, :2]).all() and torch.isfinite(s[:, :2]).all()
    assert torch.isfinite(mu).all() and torch.isfinite(sigma).all()


def test_degenerate_model_distributions_give_finite_scores():
    # Token 0 is always followed by 0 (p = 1: logits 0, -inf, -inf), token 1 by a uniform draw:
    # every prediction has sigma = 0 and goes through the floor; no score may be NaN or inf.
    model = _Fixed([[1.0, 0.0, 0.0], [1 / 3, 1 / 3, 1 / 3], [1 / 3, 1 / 3, 1 / 3]])
    ids = torch.tensor([[1, 0, 0, 0, 0], [2, 1, 2, 0, 0]])
    out = score_all(model, ids, texts=["a", "b"], ks=(0.2, 0.5, 1.0))
    for name, v in out.items():
        assert torch.isfinite(v).all(), name
    # Each s_t is 0 up to the rounding of mu (a few ulp of log 3) over the floor.
    ulps = 8 * torch.finfo(torch.float32).eps * math.log(3)
    assert out["mink++@1"].abs().max().item() <= ulps / SIGMA_FLOOR


@pytest.mark.parametrize("k", [0.0, -0.1, 1.5, float("nan"), True])
def test_bad_k_raises(k):
    with pytest.raises(ValueError, match="k must"):
        mink_pp_scores(_model(), torch.zeros(1, 4, dtype=torch.long), k=k)


@pytest.mark.parametrize("k", [0.0, 1.5, float("nan")])
@pytest.mark.parametrize("fn", ["mink_scores", "score_all", "min_k_mean"])
def test_bad_k_raises_everywhere(fn, k):
    model, ids = _model(), torch.zeros(1, 4, dtype=torch.long)
    call = {
        "mink_scores": lambda: mink_scores(model, ids, k=k),
        "score_all": lambda: score_all(model, ids, methods=("mink++",), ks=(0.2, k)),
        "min_k_mean": lambda: min_k_mean(torch.zeros(1, 3), None, k),
    }[fn]
    with pytest.raises(ValueError, match="k must"):
        call()


def test_single_token_and_empty_raise():
    model = _model()
    with pytest.raises(ValueError, match="at least 2 tokens"):
        mink_pp_scores(model, torch.zeros(1, 0, dtype=torch.long))
    with pytest.raises(ValueError, match="at least 2 tokens"):
        loss_scores(model, torch.zeros(2, 5, dtype=torch.long), torch.tensor([[1, 1, 0, 0, 0], [0, 0, 0, 0, 0]]))
    with pytest.raises(ValueError, match="at least 2 tokens"):
        mink_pp_scores(model, torch.zeros(1, 1, dtype=torch.long))
    with pytest.raises(ValueError, match="at least 2 tokens"):
        mink_pp_scores(model, torch.zeros(2, 4, dtype=torch.long), torch.tensor([[1, 1, 1, 1], [1, 0, 0, 0]]))
    with pytest.raises(ValueError, match="right-padded"):
        mink_pp_scores(model, torch.zeros(1, 4, dtype=torch.long), torch.tensor([[0, 1, 1, 1]]))


def test_nan_logits_raise_floating_point_error():
    logits = torch.zeros(1, 3, 5)
    logits[0, 1, 2] = float("nan")
    with pytest.raises(FloatingPointError):
        token_stats(logits, torch.zeros(1, 3, dtype=torch.long))


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_nan_logits_from_a_model_raise_floating_point_error(bad):
    class Broken(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(()))

        def forward(self, ids):
            logits = torch.zeros(*ids.shape, 5)
            logits[0, 1, 3] = bad
            return logits

    with pytest.raises(FloatingPointError):
        mink_pp_scores(Broken(), torch.zeros(1, 4, dtype=torch.long))


def test_shape_mismatch_raises():
    with pytest.raises(ValueError, match="targets must have shape"):
        token_stats(torch.zeros(2, 3, 5), torch.zeros(2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="targets must lie in"):
        token_stats(torch.zeros(2, 3, 5), torch.full((2, 3), 5))


def test_bad_batch_arguments_raise():
    model, ids = _model(), torch.zeros(2, 4, dtype=torch.long)
    with pytest.raises(ValueError, match="attention_mask must have"):
        mink_pp_scores(model, ids, torch.ones(2, 3, dtype=torch.long))  # never broadcast
    with pytest.raises(ValueError, match="only 0 and 1"):
        mink_pp_scores(model, ids, torch.full((2, 4), 2))
    with pytest.raises(TypeError, match="integer"):
        mink_pp_scores(model, ids.float())
    with pytest.raises(ValueError, match="one entry per row"):
        zlib_scores(model, ids, ["only one"])
    with pytest.raises(ValueError, match="needs texts"):
        score_all(model, ids, methods=("zlib",))


def _official_run_py_scores(model, ids, ratios):
    """The official ``run.py`` loop, one unpadded sequence at a time, in float64 with numpy sorting:
    positions 2…n, ``sigma = sqrt(E[log p²] − mu²)`` (no floor), ``int(len · ratio)`` kept."""
    import numpy as np

    out = {f"mink@{r:g}": [] for r in ratios} | {f"mink++@{r:g}": [] for r in ratios} | {"loss": []}
    for x in ids:
        with torch.no_grad():
            logits = model(x[None]).logits[0, :-1].double()
        lp = torch.log_softmax(logits, -1)
        p = lp.exp()
        tl = lp.gather(-1, x[1:, None]).squeeze(-1)
        mu = (p * lp).sum(-1)
        s = (tl - mu) / ((p * lp.square()).sum(-1) - mu.square()).sqrt()
        out["loss"].append(tl.mean().item())
        for r in ratios:
            n_keep = int(len(tl) * r)
            out[f"mink@{r:g}"].append(float(np.mean(np.sort(tl.numpy())[:n_keep])))
            out[f"mink++@{r:g}"].append(float(np.mean(np.sort(s.numpy())[:n_keep])))
    return {k: torch.tensor(v, dtype=torch.float64) for k, v in out.items()}


@pytest.mark.parametrize("n_tokens", [11, 32, 41])
def test_scores_match_official_run_py_over_k_sweep(n_tokens):
    # 32 is the reproduction's passage length (31 scored positions: k = 0.5 keeps 15, k = 0.2 keeps 6);
    # 11 and 41 give k·(n−1) on or next to an integer, where a ceil/round or an n-instead-of-(n−1)
    # count would pick a different number of tokens.
    model = _model(vocab=60, seed=3)
    ids = torch.randint(0, 60, (5, n_tokens), generator=torch.Generator().manual_seed(n_tokens))
    ratios = [round(0.1 * i, 1) for i in range(1, 11)]
    ours = score_all(model, ids, methods=("loss", "mink", "mink++"), ks=ratios, backend="reference")
    ref = _official_run_py_scores(model, ids, ratios)
    for name, v in ref.items():
        torch.testing.assert_close(ours[name].double(), v, atol=2e-5, rtol=1e-5, msg=name)


def test_token_stats_argument_types_and_shapes():
    # A wrong type is a TypeError; a float tensor without a vocabulary axis is a bad value.
    targets = torch.zeros(2, dtype=torch.long)
    with pytest.raises(TypeError, match="logits must be a floating"):
        token_stats([[0.0, 1.0], [1.0, 0.0]], targets)
    with pytest.raises(TypeError, match="logits must be a floating"):
        token_stats(torch.zeros(2, 3, dtype=torch.long), targets)
    with pytest.raises(ValueError, match="logits must be a floating"):
        token_stats(torch.tensor(1.0), torch.tensor(0))  # was a TypeError
    with pytest.raises(TypeError, match="targets must be an integer"):
        token_stats(torch.zeros(2, 3), [0, 1])
    with pytest.raises(TypeError, match="targets must be an integer"):
        token_stats(torch.zeros(2, 3), torch.zeros(2))
    with pytest.raises(TypeError, match="targets must be an integer"):
        token_stats(torch.zeros(2, 3), torch.zeros(2, dtype=torch.bool))
    with pytest.raises(TypeError, match="targets must be an integer"):
        token_stats(torch.zeros(2, 3), torch.zeros(2, dtype=torch.complex64))  # was a RuntimeError from min()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_token_stats_of_no_positions_are_empty(dtype):
    # (batch, 0, V): nothing to score, so three empty (batch, 0) results in the documented dtype.
    ell, mu, sigma = token_stats(torch.zeros(3, 0, 7, dtype=dtype), torch.zeros(3, 0, dtype=torch.long))
    want = torch.float64 if dtype == torch.float64 else torch.float32
    for x in (ell, mu, sigma):
        assert x.shape == (3, 0) and x.dtype == want


def test_min_k_mean_row_without_valid_position_names_valid():
    v = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    valid = torch.tensor([[True, False], [False, False]])
    with pytest.raises(ValueError, match="valid must mark at least one position in every row; row 1"):
        min_k_mean(v, valid, 0.5)


def test_batch_argument_types_and_shapes():
    model = _model()
    with pytest.raises(TypeError, match="input_ids must be a"):
        mink_pp_scores(model, [[1, 2, 3]])  # was a ValueError
    with pytest.raises(ValueError, match="input_ids must be a"):
        mink_pp_scores(model, torch.zeros(4, dtype=torch.long))
    with pytest.raises(ValueError, match="input_ids must hold at least one sequence"):
        mink_pp_scores(model, torch.zeros(0, 4, dtype=torch.long))
    with pytest.raises(TypeError, match="attention_mask must be None or"):
        mink_pp_scores(model, torch.zeros(1, 4, dtype=torch.long), [[1, 1, 1, 0]])  # was a ValueError
    with pytest.raises(TypeError, match=r"model must be an nn\.Module"):
        mink_pp_scores(lambda ids: torch.zeros(*ids.shape, 50), torch.zeros(1, 4, dtype=torch.long))


def test_method_and_text_arguments():
    model, ids = _model(), torch.zeros(2, 4, dtype=torch.long)
    with pytest.raises(ValueError, match="methods must be a non-empty sequence"):
        score_all(model, ids, methods="loss")
    with pytest.raises(ValueError, match="methods must be a non-empty sequence"):
        score_all(model, ids, methods=())
    with pytest.raises(ValueError, match="ks must be a sequence"):
        score_all(model, ids, methods=("mink",), ks="0.2")
    with pytest.raises(TypeError, match="texts must be strings"):
        zlib_scores(model, ids, ["ab", b"cd"])
    with pytest.raises(TypeError, match="texts must be strings"):
        score_all(model, ids, texts=["ab", 3], methods=("zlib",))
    with pytest.raises(TypeError, match="methods must be a non-empty sequence"):
        score_all(model, ids, methods=5)


def test_methods_given_as_a_generator_are_all_scored():
    # a generator is consumed by the name check; the scores must still cover every method it named
    model, ids = _model(), torch.zeros(2, 4, dtype=torch.long)
    out = score_all(model, ids, methods=(m for m in ("loss", "mink")), ks=(0.5,))
    assert set(out) == set(score_all(model, ids, methods=("loss", "mink"), ks=(0.5,))) != set()


class _TableLookup(torch.nn.Module):
    """A bigram 'model' whose forward is a builtin (no inspectable signature, no attention_mask)."""

    def __init__(self, table):
        super().__init__()
        self.register_buffer("table", table)
        self.forward = functools.partial(torch.embedding, self.table)


def test_model_with_uninspectable_forward_is_scored_without_a_mask():
    # inspect.signature raises on a builtin forward: the scorer must fall back to the unmasked call
    # (passing attention_mask= would be a TypeError), which is exact for right padding.
    g = torch.Generator().manual_seed(6)
    V = 9
    table = 2 * torch.randn(V, V, generator=g)
    model = _TableLookup(table)
    seqs = [torch.randint(0, V, (n,), generator=g) for n in (7, 3, 5)]
    ids = torch.zeros(3, 7, dtype=torch.long)
    mask = torch.zeros(3, 7, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = s
        mask[i, : len(s)] = 1
    out = score_all(model, ids, mask, methods=("loss", "mink++"), ks=(1.0,))
    for i, s in enumerate(seqs):
        ells, zs = [], []
        for a, b in zip(s[:-1].tolist(), s[1:].tolist(), strict=True):
            row = table[a].double().tolist()
            top = max(row)
            lse = top + math.log(sum(math.exp(v - top) for v in row))
            lp = [v - lse for v in row]
            mu = sum(math.exp(q) * q for q in lp)
            sd = math.sqrt(sum(math.exp(q) * (q - mu) ** 2 for q in lp))
            ells.append(lp[b])
            zs.append((lp[b] - mu) / sd)
        # fp32 log-softmax of O(10) logits errs by a few ulp of 10 (~1e-6); every sigma of this table
        # is above 0.6, so dividing by it keeps s_t's error of that order
        assert out["loss"][i].item() == pytest.approx(sum(ells) / len(ells), abs=1e-5)
        assert out["mink++@1"][i].item() == pytest.approx(sum(zs) / len(zs), abs=1e-5)
