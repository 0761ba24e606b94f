"""Training driver: schedule, determinism, vmapped sweep == sequential runs, bad input."""

import math

import pytest
import torch

from iclr25.theory.markov_transformer import (
    BinaryMarkovChain,
    MarkovTransformer,
    MarkovTransformerConfig,
    lr_factor,
    train_markov,
    train_sweep,
)


def test_lr_factor_matches_official_one_cycle():
    # OneCycleLR(pct_start=0.02, cos, div_factor=100, final_div_factor=0.05): lr/100 -> lr -> lr/5.
    iters = 600
    model = torch.nn.Linear(1, 1)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3)
    sched = torch.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=2e-3, total_steps=iters, pct_start=0.02, anneal_strategy="cos", cycle_momentum=False,
        div_factor=1e2, final_div_factor=0.05,
    )  # fmt: skip
    for step in range(iters):
        assert math.isclose(opt.param_groups[0]["lr"], 2e-3 * lr_factor(step, iters), rel_tol=0.05, abs_tol=1e-6)
        opt.step()
        sched.step()


def _models(cfg, seeds):
    out = []
    for s in seeds:
        torch.manual_seed(s)
        out.append(MarkovTransformer(cfg))
    return out


def test_sweep_equals_sequential_runs():
    torch.set_num_threads(1)
    cfg = MarkovTransformerConfig(d_model=4, max_len=16)
    chains, seeds = [BinaryMarkovChain(0.8, 0.8), BinaryMarkovChain(0.2, 0.3)], [0, 1]
    swept = train_sweep(_models(cfg, seeds), chains, seeds, iters=15, length=16, eval_batch=32)
    for model, chain, seed, res in zip(_models(cfg, seeds), chains, seeds, swept, strict=True):
        seq = train_markov(model, chain, iters=15, length=16, seed=seed, eval_batch=32)
        assert abs(seq["test_loss"] - res["test_loss"]) < 1e-5
        assert max(abs(a - b) for a, b in zip(seq["train_loss"], res["train_loss"], strict=True)) < 1e-5


def test_sweep_reports_reference_losses_on_its_own_test_tokens():
    torch.set_num_threads(1)
    cfg = MarkovTransformerConfig(d_model=4, max_len=16)
    chain, seed = BinaryMarkovChain(0.2, 0.3), 5
    (res,) = train_sweep(_models(cfg, [seed]), [chain], [seed], iters=2, length=16, eval_batch=32)
    # The sweep's test set is the run's test stream, the same one train_markov would draw.
    test = chain.sample(32, 17, generator=torch.Generator().manual_seed(seed + 1_000_003)).long()
    prev, nxt = test[:, :-1], test[:, 1:]
    p_one = torch.where(prev == 0, torch.tensor(0.2, dtype=torch.float64), torch.tensor(0.7, dtype=torch.float64))
    chain_nll = -torch.where(nxt == 1, p_one.log(), (1 - p_one).log()).mean()
    pi_one = 0.2 / 0.5
    log_pi = torch.tensor([math.log(1 - pi_one), math.log(pi_one)], dtype=torch.float64)
    unigram_nll = -log_pi[nxt].mean()
    assert res["test_chain_loss"] == pytest.approx(float(chain_nll), abs=1e-12)
    assert res["test_unigram_loss"] == pytest.approx(float(unigram_nll), abs=1e-12)
    # The chain is the Bayes predictor: no model can beat it in expectation, and this one is untrained.
    assert res["test_loss"] > res["test_chain_loss"]


def test_training_is_deterministic_and_learns_bigram_when_untied():
    torch.set_num_threads(1)
    chain = BinaryMarkovChain(0.9, 0.9)  # rate 0.325 vs H(pi) 0.693
    cfg = MarkovTransformerConfig(d_model=4, max_len=16, weight_tying=False)
    runs = [train_markov(m, chain, iters=150, length=16, seed=3, eval_batch=64) for m in _models(cfg, [7, 7])]
    assert runs[0]["test_loss"] == runs[1]["test_loss"]
    assert runs[0]["test_loss"] < chain.unigram_entropy() - 0.03


def test_training_bad_input():
    model = MarkovTransformer(MarkovTransformerConfig(max_len=8))
    chain = BinaryMarkovChain(0.5, 0.5)
    with pytest.raises(ValueError, match="max_len"):
        train_markov(model, chain, length=9)
    with pytest.raises(ValueError, match="length must be >= 2"):
        train_markov(model, chain, length=1)
    with pytest.raises(ValueError, match="iters"):
        train_markov(model, chain, iters=0, length=4)
    with pytest.raises(ValueError, match="one entry per run"):
        train_sweep([model], [chain, chain], [0], length=4)


def test_sweep_batches_equal_per_chain_samples():
    # The sweep's data contract: run r's batch at every step is exactly chains[r].sample(...) from
    # a generator seeded like train_markov's, although all runs are drawn as one (R, n, L) tensor.
    from iclr25.theory.markov_transformer.training import _SweepSampler

    chains = [BinaryMarkovChain(0.8, 0.3), BinaryMarkovChain(0.1, 0.9, init="uniform"), BinaryMarkovChain(0.5, 0.5)]
    seeds = [0, 1, 0]
    draw = _SweepSampler(chains, [torch.Generator().manual_seed(s) for s in seeds], 5, 33)
    gens = [torch.Generator().manual_seed(s) for s in seeds]
    for _ in range(3):
        batch = draw()
        assert batch.shape == (3, 5, 33) and batch.dtype == torch.long
        for r, chain in enumerate(chains):
            assert torch.equal(batch[r], chain.sample(5, 33, generator=gens[r], backend="reference"))
    assert not torch.equal(batch[0], batch[2])  # same seed, different chain: different sequences


@pytest.mark.gpu
def test_sweep_on_cuda_draws_the_same_data_and_matches_sequential():
    # On CUDA the per-run uniform_ into a slice of the (R, n, L) buffer must consume each run's
    # Philox stream exactly like torch.rand(n, L) in chain.sample, and the sweep must still equal
    # sequential runs (float32 summation order only).
    from iclr25.theory.markov_transformer.training import _SweepSampler

    dev = torch.device("cuda")
    chains, seeds = [BinaryMarkovChain(0.8, 0.8), BinaryMarkovChain(0.2, 0.3)], [0, 1]
    draw = _SweepSampler(chains, [torch.Generator(device=dev).manual_seed(s) for s in seeds], 16, 65)
    gens = [torch.Generator(device=dev).manual_seed(s) for s in seeds]
    for _ in range(3):
        batch = draw()
        for r, chain in enumerate(chains):
            assert torch.equal(batch[r], chain.sample(16, 65, generator=gens[r]))
    cfg = MarkovTransformerConfig(d_model=4, max_len=16)
    swept = train_sweep([m.to(dev) for m in _models(cfg, seeds)], chains, seeds, iters=15, length=16, eval_batch=32)
    for model, chain, seed, res in zip(_models(cfg, seeds), chains, seeds, swept, strict=True):
        seq = train_markov(model.to(dev), chain, iters=15, length=16, seed=seed, eval_batch=32)
        assert abs(seq["test_loss"] - res["test_loss"]) < 1e-5


def test_tied_sweep_state_loads_into_a_fresh_model():
    torch.set_num_threads(1)
    cfg = MarkovTransformerConfig(d_model=4, max_len=8)
    chain = BinaryMarkovChain(0.8, 0.8)
    (res,) = train_sweep(_models(cfg, [0]), [chain], [0], iters=3, length=8, eval_batch=8)
    fresh = MarkovTransformer(cfg)
    fresh.load_state_dict(res["state"])  # strict: every key of model.state_dict() is there
    assert fresh.tied
    (model,) = _models(cfg, [0])
    train_markov(model, chain, iters=3, length=8, eval_batch=8, seed=0)
    x = chain.sample(4, 8, generator=torch.Generator().manual_seed(1))
    assert torch.allclose(fresh(x), model(x), atol=1e-6)


def test_sweep_rejects_mixed_dtypes_and_non_list_arguments():
    cfg = MarkovTransformerConfig(d_model=4, max_len=8)
    chain = BinaryMarkovChain(0.5, 0.5)
    models = [MarkovTransformer(cfg), MarkovTransformer(cfg).double()]
    with pytest.raises(ValueError, match="share one dtype and device"):
        train_sweep(models, [chain, chain], [0, 1], iters=1, length=4, eval_batch=4)
    with pytest.raises(TypeError, match="chains must be a list"):
        train_sweep(models[:1], chain, [0], iters=1, length=4, eval_batch=4)
    with pytest.raises(TypeError, match="seeds must be a list"):
        train_sweep(models[:1], [chain], 0, iters=1, length=4, eval_batch=4)
    with pytest.raises(TypeError, match=r"seeds\[0\] must be an int"):
        train_sweep(models[:1], [chain], [None], iters=1, length=4, eval_batch=4)


def test_train_markov_validates_seed_warmup_and_eval_every():
    model = MarkovTransformer(MarkovTransformerConfig(max_len=8))
    chain = BinaryMarkovChain(0.5, 0.5)
    kw = {"iters": 2, "length": 4, "eval_batch": 4}
    with pytest.raises(TypeError, match="seed must be an int"):
        train_markov(model, chain, seed=None, **kw)
    with pytest.raises(ValueError, match="warmup must be a float"):
        train_markov(model, chain, warmup=None, **kw)
    for bad in (-1, 1.5, "a"):
        with pytest.raises(ValueError, match="eval_every must be a non-negative int"):
            train_markov(model, chain, eval_every=bad, **kw)
