"""Word tokenizer, passage sampling and member injection."""

import pytest
import torch

from iclr25.llm.lm import TinyLlama, TinyLlamaConfig
from iclr25.llm.minkpp import WordTokenizer, inject_members, loss_scores, sample_passages


def test_word_tokenizer_top_words_and_unk(tmp_path):
    tok = WordTokenizer.train(["the cat, the dog; the cat's toy."], vocab_size=4)
    assert tok.vocab_size == 4
    assert tok.itos[1] == "the"  # most frequent first
    assert tok.tokenize("The cat's toy!") == ["The", "cat", "'", "s", "toy", "!"]
    ids = tok.encode("the zebra")
    assert ids.tolist()[1] == 0
    assert tok.unk_rate("the zebra") == pytest.approx(0.5)
    tok.save(tmp_path / "v.json")
    assert WordTokenizer.load(tmp_path / "v.json").itos == tok.itos


def test_word_tokenizer_decode_and_bad_vocab():
    tok = WordTokenizer.train(["to be, or not to be"], vocab_size=5)
    ids = tok.encode("to be or not")
    # Vocabulary: be, to (twice each), then "," and "not" (ties broken alphabetically); "or" is <unk>.
    assert tok.decode(ids) == tok.decode(ids.tolist()) == "to be <unk> not"
    assert tok.decode(tok.encode("be, to be")) == "be , to be"  # in-vocabulary pieces round-trip
    with pytest.raises(ValueError, match="distinct"):
        WordTokenizer(["a", "a"])
    with pytest.raises(ValueError, match="vocab_size"):
        WordTokenizer.train(["a"], vocab_size=1)


def test_word_tokenizer_splits_contractions_at_the_apostrophe():
    # The method note's "regex words/punctuation": an apostrophe is a punctuation piece of its own,
    # so contractions and possessives are not whole words (which would add rare, <unk>-bound types).
    tok = WordTokenizer.train(["x"], vocab_size=2)
    assert tok.tokenize("I'll not, o' my word; 'tis 3rd.") == [
        "I", "'", "ll", "not", ",", "o", "'", "my", "word", ";", "'", "tis", "3", "rd", ".",
    ]  # fmt: skip


def test_word_tokenizer_unk_rate_on_held_out_plays_matches_note():
    # Method note, (b) Reproduction: top-2000 vocabulary fitted on the 33 training plays leaves
    # 13.7 % <unk> on the 4 held-out plays. Keeping contractions whole gave 14.8 %.
    from iclr25.llm.lm.data import CorpusUnavailable
    from iclr25.llm.minkpp.experiment import _plays

    try:
        train, held = _plays()
    except CorpusUnavailable as exc:
        pytest.skip(f"Shakespeare corpus unavailable: {exc}")
    assert (len(train), len(held)) == (33, 4)
    tok = WordTokenizer.train(train.values(), vocab_size=2001)
    ids = torch.cat([tok.encode(text) for text in held.values()])
    assert float((ids == 0).float().mean()) == pytest.approx(0.137, abs=0.002)


def test_sample_passages_distinct_windows():
    docs = {"a": torch.arange(100), "b": torch.arange(1000, 1050)}
    p = sample_passages(docs, 10, 10, seed=0)
    assert p.shape == (10, 10)
    assert len({tuple(r.tolist()) for r in p}) == 10
    assert all(int(r[0]) % 10 == 0 for r in p)  # non-overlapping grid
    with pytest.raises(ValueError, match="only 15"):
        sample_passages(docs, 16, 10)


def test_inject_members_raises_member_likelihood():
    torch.manual_seed(0)
    model = TinyLlama(TinyLlamaConfig.preset("pico", vocab_size=40, max_seq_len=32))
    g = torch.Generator().manual_seed(0)
    stream = torch.randint(0, 40, (2000,), generator=g)
    members = torch.randint(0, 40, (8, 12), generator=g)
    others = torch.randint(0, 40, (8, 12), generator=g)
    hist = inject_members(model, members, stream, exposures=8, members_per_step=4, lr=1e-2, seed=0)
    assert hist["steps"] == 16
    assert loss_scores(model, members).mean() > loss_scores(model, others).mean() + 0.1
    with pytest.raises(ValueError, match="exposures"):
        inject_members(model, members, stream, exposures=0)


class _Recorder(torch.nn.Module):
    """Wraps a model and keeps a copy of every batch it is trained on."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        self.batches = []

    def forward(self, ids):
        if self.training:
            self.batches.append(ids.clone())
        return self.inner(ids)


def test_inject_members_counts_exposures_and_mixes_general_windows():
    # The reproduction's protocol: every member seen exactly E times, each step 8 general windows
    # (drawn from the training stream, same length as the passages) followed by 8 members.
    torch.manual_seed(0)
    model = _Recorder(TinyLlama(TinyLlamaConfig.preset("pico", vocab_size=500, max_seq_len=32)))
    stream = torch.arange(400) % 200  # ids < 200: general windows are recognisable
    members = (200 + torch.arange(24 * 6).reshape(24, 6)) % 500  # distinct rows, ids >= 200
    E = 3
    hist = inject_members(model, members, stream, exposures=E, seed=1)
    assert hist["steps"] == 24 * E // 8 == len(model.batches)
    seen = {tuple(m.tolist()): 0 for m in members}
    for b in model.batches:
        assert b.shape == (16, 5)  # inputs are the 6-token windows minus their last token
        assert bool((b[:8] < 200).all()) and bool((b[8:] >= 200).all())
        for row in b[8:]:
            key = next(k for k in seen if list(k[:5]) == row.tolist())
            seen[key] += 1
    assert set(seen.values()) == {E}
