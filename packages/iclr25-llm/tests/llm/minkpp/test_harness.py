"""Word tokenizer, passage sampling and member injection."""

import numpy as np
import pytest
import torch

from iclr25.llm.lm import TinyLlama, TinyLlamaConfig
from iclr25.llm.minkpp import WordTokenizer, inject_members, loss_scores, sample_passages


def _pico40() -> TinyLlama:
    """The tiny 40-token model the injection tests train."""
    return TinyLlama(TinyLlamaConfig.preset("pico", vocab_size=40, max_seq_len=32))


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
    model = _pico40()
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


def test_word_tokenizer_argument_checks_and_repr():
    with pytest.raises(TypeError, match="texts must hold str; got int"):
        WordTokenizer.train(["to be", 3], vocab_size=5)
    tok = WordTokenizer.train(["to be, or not to be"], vocab_size=5, lowercase=True)
    with pytest.raises(TypeError, match="text must be a str; got list"):
        tok.tokenize(["to", "be"])
    with pytest.raises(TypeError, match="text must be a str"):
        tok.encode(b"to be")
    assert repr(tok) == "WordTokenizer(vocab_size=5, lowercase=True)"


def test_word_tokenizer_refuses_a_str_vocab_and_non_str_tokens():
    # WordTokenizer("abc") built the vocabulary a, b, c (one id per letter) without a word.
    with pytest.raises(TypeError, match="vocab must be a sequence of str"):
        WordTokenizer("abc")
    # an int token can never match a regex piece: every id of it was dead, and decode failed on it
    with pytest.raises(TypeError, match="vocab must hold str tokens; got int"):
        WordTokenizer(["to", 7])


def test_word_tokenizer_train_accepts_numpy_int_vocab_size():
    # np.int64(5) was refused with "vocab_size must be an int >= 2; got 5".
    texts = ["to be, or not to be"]
    tok = WordTokenizer.train(texts, vocab_size=np.int64(5))
    assert tok.itos == ["<unk>", "be", "to", ",", "not"]  # counts 2, 2, then ties alphabetically
    with pytest.raises(ValueError, match="vocab_size"):
        WordTokenizer.train(texts, vocab_size=True)
    with pytest.raises(ValueError, match="vocab_size"):
        WordTokenizer.train(texts, vocab_size=4.0)


def test_sample_passages_argument_checks():
    docs = [torch.arange(40)]
    for length in (1, 0, 2.5, "4", True):
        with pytest.raises(ValueError, match="length must be an int >= 2"):
            sample_passages(docs, 2, length)
    for n in (0, -1, 1.0, False):
        with pytest.raises(ValueError, match="n must be a positive int"):
            sample_passages(docs, n, 4)
    with pytest.raises(TypeError, match="docs must hold 1-D token tensors; got a list"):
        sample_passages([list(range(40))], 2, 4)  # was a ValueError
    with pytest.raises(ValueError, match=r"docs must hold 1-D token tensors; got shape \(4, 10\)"):
        sample_passages({"a": torch.arange(40).reshape(4, 10)}, 2, 4)
    # exactly enough windows: 40 tokens give 10 of length 4, so n = 10 is every window once
    p = sample_passages(docs, 10, 4, seed=3)
    assert sorted(int(r[0]) for r in p) == list(range(0, 40, 4))


def test_inject_members_argument_checks():
    torch.manual_seed(0)
    model = _pico40()
    g = torch.Generator().manual_seed(0)
    stream = torch.randint(0, 40, (200,), generator=g)
    members = torch.randint(0, 40, (4, 8), generator=g)
    with pytest.raises(TypeError, match=r"model must be an nn\.Module"):
        inject_members(lambda ids: ids, members, stream, 1)
    with pytest.raises(TypeError, match="member_ids must be an"):
        inject_members(model, members.tolist(), stream, 1)  # was a ValueError
    with pytest.raises(ValueError, match=r"member_ids must be an .* got shape \(32,\)"):
        inject_members(model, members.reshape(-1), stream, 1)
    with pytest.raises(ValueError, match=r"member_ids must be an .* got shape \(4, 1\)"):
        inject_members(model, members[:, :1], stream, 1)
    with pytest.raises(ValueError, match="members_per_step must be >= 1; got 0"):
        inject_members(model, members, stream, 1, members_per_step=0)
    with pytest.raises(ValueError, match="members_per_step must be a non-negative int"):
        inject_members(model, members, stream, 1, members_per_step=-1)


def test_inject_members_refuses_an_empty_member_set():
    # (0, L) member_ids ran zero steps and returned {"steps": 0} as if members had been injected.
    torch.manual_seed(0)
    model = _pico40()
    w0 = [p.detach().clone() for p in model.parameters()]
    stream = torch.randint(0, 40, (200,), generator=torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match=r"member_ids must be an \(N >= 1.* got shape \(0, 8\)"):
        inject_members(model, torch.zeros(0, 8, dtype=torch.long), stream, 2)
    assert all(torch.equal(a, b) for a, b in zip(w0, model.parameters(), strict=True))


def test_inject_members_names_train_tokens_in_stream_errors():
    # The shared stream check said "tokens", which is no argument of inject_members.
    torch.manual_seed(0)
    model = _pico40()
    members = torch.randint(0, 40, (4, 8), generator=torch.Generator().manual_seed(0))
    with pytest.raises(TypeError, match=r"^train_tokens: "):
        inject_members(model, members, list(range(100)), 1)
    with pytest.raises(ValueError, match=r"^train_tokens: .*at least seq_len \+ 1 = 9"):
        inject_members(model, members, torch.arange(8), 1)
    with pytest.raises(ValueError, match=r"^train_tokens: "):
        inject_members(model, members, torch.arange(100.0), 1)


def test_inject_members_without_parameters_or_with_a_diverging_loss():
    members = torch.randint(0, 5, (2, 4), generator=torch.Generator().manual_seed(0))
    stream = torch.arange(50) % 5

    class Fixed(torch.nn.Module):
        def forward(self, ids):
            return torch.nn.functional.one_hot(ids, 5).float()

    # next(model.parameters()) raised a bare StopIteration
    with pytest.raises(ValueError, match="model must have parameters to train; Fixed has none"):
        inject_members(Fixed(), members, stream, 1)

    class NaNLogits(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(()))

        def forward(self, ids):
            return self.w * torch.full((*ids.shape, 5), float("nan"))

    model = NaNLogits()
    with pytest.raises(FloatingPointError, match="loss became nan at injection step 0"):
        inject_members(model, members, stream, 1, members_per_step=2, general_per_step=1)
    assert model.w.item() == 1.0  # refused before the optimiser step


def test_word_tokenizer_trains_on_the_texts_of_a_mapping():
    # Iterating {title: text} yields the titles: the vocabulary was the document names.
    docs = {"hamlet": "to be, or not to be", "lear": "nothing will come of nothing"}
    tok = WordTokenizer.train(docs, vocab_size=6)
    assert tok.itos == WordTokenizer.train(list(docs.values()), vocab_size=6).itos
    assert "hamlet" not in tok.stoi and "nothing" in tok.stoi


def test_numpy_int_seeds_are_accepted():
    # torch.Generator.manual_seed(np.int64(1)) raised "TypeError: an integer is required".
    g = torch.Generator().manual_seed(0)
    docs = [torch.randint(0, 40, (120,), generator=g)]
    p = sample_passages(docs, 4, 6, seed=np.int64(1))
    assert torch.equal(p, sample_passages(docs, 4, 6, seed=1))
    losses = []
    for seed in (2, np.int32(2)):
        torch.manual_seed(0)
        model = _pico40()
        losses.append(inject_members(model, p, docs[0], 1, members_per_step=2, general_per_step=2, seed=seed)["loss"])
    assert losses[0] == losses[1]
    for bad in (1.5, "1", None, True):
        with pytest.raises(ValueError, match="seed must be an int"):
            sample_passages(docs, 4, 6, seed=bad)
        with pytest.raises(ValueError, match="seed must be an int"):
            inject_members(model, p, docs[0], 1, seed=bad)
