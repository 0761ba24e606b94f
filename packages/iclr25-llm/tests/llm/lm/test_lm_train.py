import itertools
import math

import pytest
import torch

from iclr25.llm.lm.data import CorpusUnavailable, ToyGrammar, shakespeare, split_documents
from iclr25.llm.lm.eval import perplexity
from iclr25.llm.lm.model import TinyLlama, TinyLlamaConfig
from iclr25.llm.lm.tokenizers import ByteTokenizer
from iclr25.llm.lm.train import lr_multiplier, train_lm


def _stream(n=4000, seed=0):
    return ByteTokenizer().encode(ToyGrammar(0).sample(n // 40, seed))[:n]


def _pico(seed=0):
    torch.manual_seed(seed)
    return TinyLlama(TinyLlamaConfig.preset("pico"))


def test_schedule_shape():
    lrs = [lr_multiplier(s, 100, 10, "cosine", 0.1) for s in range(100)]
    assert lrs[0] == pytest.approx(0.1) and lrs[9] == pytest.approx(1.0)
    assert lrs[10] == pytest.approx(1.0) and lrs[-1] == pytest.approx(0.1)
    assert all(a >= b for a, b in itertools.pairwise(lrs[10:]))
    assert lr_multiplier(50, 100, 0, "constant") == 1.0
    assert lr_multiplier(99, 100, 0, "linear", 0.0) == pytest.approx(0.0)


def test_training_is_deterministic_and_learns():
    tokens = _stream()
    a, b = _pico(), _pico()
    ha = train_lm(a, tokens, steps=20, batch_size=4, seq_len=32, seed=0)
    hb = train_lm(b, tokens, steps=20, batch_size=4, seq_len=32, seed=0)
    assert ha["loss"] == hb["loss"]
    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(pa, pb)
    assert ha["loss"][-1] < ha["loss"][0] and ha["loss"][0] == pytest.approx(math.log(256), abs=0.1)
    assert ha["tokens"] == 20 * 4 * 32 and ha["threads"] == 1


def test_hooks_can_change_peak_lr_and_weight_decay():
    seen = []

    def hook(step, total, opt):
        if step == 5:
            for g in opt.param_groups:
                g["peak_lr"] = 1e-4
                g["weight_decay"] = 0.0
        seen.append((step, total))

    h = train_lm(_pico(), _stream(), steps=10, batch_size=2, seq_len=16, warmup=0, schedule="constant", hooks=[hook])
    assert seen[-1] == (9, 10)
    assert h["lr"][:5] == [3e-3] * 5 and h["lr"][6:] == [1e-4] * 4


def test_bad_input():
    m = _pico()
    with pytest.raises(ValueError, match="seq_len \\+ 1"):
        train_lm(m, torch.arange(10), steps=1, seq_len=16)
    with pytest.raises(ValueError, match="max id 255"):
        train_lm(m, torch.full((100,), 300), steps=1, seq_len=16)
    with pytest.raises(ValueError, match="schedule"):
        train_lm(m, _stream(), steps=1, seq_len=16, schedule="step")
    with pytest.raises(ValueError, match="max id 255"):  # non-integer ids
        train_lm(m, torch.rand(100), steps=1, seq_len=16)
    with pytest.raises(ValueError, match="at least seq_len"):  # empty corpus
        train_lm(m, torch.zeros(0, dtype=torch.long), steps=1, seq_len=16)
    before = [p.clone() for p in m.parameters()]
    with pytest.raises(ValueError, match="steps"):
        train_lm(m, _stream(), steps=0, seq_len=16)
    assert all(torch.equal(a, b) for a, b in zip(before, m.parameters(), strict=True))


@pytest.mark.parametrize(("warmup", "n_warm"), [(0.25, 5), (3, 3)])
def test_train_lm_follows_the_warmup_cosine_schedule(warmup, n_warm):
    # linear warmup lr·(s+1)/W, then lr·(m + (1-m)·(1 + cos(π·j/(T-W-1)))/2) for j = s - W,
    # ending exactly at m·lr on the last step
    steps, lr, m = 20, 2e-3, 0.2
    h = train_lm(_pico(), _stream(), steps=steps, batch_size=1, seq_len=8, lr=lr, warmup=warmup, min_lr_ratio=m)
    expected = [lr * (s + 1) / n_warm for s in range(n_warm)] + [
        lr * (m + (1 - m) * 0.5 * (1 + math.cos(math.pi * j / (steps - n_warm - 1)))) for j in range(steps - n_warm)
    ]
    assert h["lr"] == pytest.approx(expected, rel=1e-12)
    assert h["lr"][-1] == pytest.approx(m * lr, rel=1e-12)


def _smoke(preset: str, steps: int) -> tuple[float, float, str]:
    """Train a preset on held-out-by-play Shakespeare (ToyGrammar if unavailable); return val and unigram bits/byte."""
    tok = ByteTokenizer()
    try:
        train_docs, val_docs = split_documents(shakespeare(), 0.1, seed=0)
        train_text, val_text, source = "\n".join(train_docs.values()), "\n".join(val_docs.values()), "shakespeare"
    except CorpusUnavailable:
        g = ToyGrammar(0)
        train_text, val_text, source = g.sample(20_000, 0), g.sample(2_000, 1), "toygrammar"
    train_ids, val_ids = tok.encode(train_text), tok.encode(val_text)
    torch.manual_seed(0)
    model = TinyLlama(TinyLlamaConfig.preset(preset))
    train_lm(model, train_ids, steps=steps, batch_size=16, seq_len=128, seed=0)
    bpb = perplexity(model, val_ids, seq_len=128, max_windows=512)["bits_per_byte"]
    # the baseline: the training-set unigram (add-one smoothed) on the same held-out targets
    p = torch.bincount(train_ids, minlength=256).double() + 1
    p = p / p.sum()
    scored = val_ids[1 : 1 + 512 * 128]
    unigram = float(-p.log2()[scored].mean())
    return bpb, unigram, source


@pytest.mark.repro
def test_smoke_reproduction_pico_300_steps():
    bpb, unigram, source = _smoke("pico", 300)
    assert bpb < 3.5, f"pico held-out bits/byte {bpb:.3f} on {source} (unigram {unigram:.3f})"
    assert bpb < unigram


@pytest.mark.slow
def test_nano_600_steps():
    bpb, unigram, source = _smoke("nano", 600)
    assert bpb < 2.9, f"nano held-out bits/byte {bpb:.3f} on {source} (unigram {unigram:.3f})"


def test_lr_multiplier_rejects_an_unknown_schedule():
    with pytest.raises(ValueError, match="schedule must be one of"):
        lr_multiplier(5, 10, 0, "cosin")  # silently decayed linearly before
