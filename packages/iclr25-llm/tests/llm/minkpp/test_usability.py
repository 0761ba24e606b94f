"""Everyday workflows beyond TinyLlama/HF: plain logits modules, numpy arguments, input validation."""

import numpy as np
import pytest
import torch

from iclr25.llm.lm import ByteTokenizer, TinyLlama, TinyLlamaConfig
from iclr25.llm.minkpp import (
    WordTokenizer,
    evaluate_mia,
    inject_members,
    min_k_mean,
    mink_pp_scores,
    sample_passages,
    score_all,
    token_stats,
    zlib_scores,
)


class _Bigram(torch.nn.Module):
    """A causal LM in the documented minimal form: ``forward(ids) -> logits``, no attention_mask."""

    def __init__(self, vocab=256):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, vocab)

    def forward(self, ids):
        return self.emb(ids)


def _padded(seqs):
    ids = torch.zeros(len(seqs), max(len(s) for s in seqs), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = s
        mask[i, : len(s)] = 1
    return ids, mask


def test_padded_batch_on_plain_logits_module_equals_singles():
    # A module whose forward takes only the ids used to get forward(input_ids=..., attention_mask=...)
    # as soon as a batch was padded (TypeError), so evaluate_mia failed on texts of unequal length.
    torch.manual_seed(0)
    model = _Bigram()
    g = torch.Generator().manual_seed(0)
    seqs = [torch.randint(0, 256, (n,), generator=g) for n in (7, 4, 5)]
    ids, mask = _padded(seqs)
    batch = score_all(model, ids, mask, methods=("loss", "mink", "mink++"), ks=(0.2, 0.5))
    for i, s in enumerate(seqs):
        single = score_all(model, s[None], methods=("loss", "mink", "mink++"), ks=(0.2, 0.5))
        for k in single:
            torch.testing.assert_close(batch[k][i : i + 1], single[k], atol=1e-6, rtol=1e-6)
    texts, labels = ["to be or not", "that is", "whether tis nobler", "in"], [1, 0, 1, 0]
    res = evaluate_mia(model, ByteTokenizer(), texts, labels, batch_size=4, n_bootstrap=0)
    one = evaluate_mia(model, ByteTokenizer(), texts, labels, batch_size=1, n_bootstrap=0)
    for name in res.scores:
        np.testing.assert_allclose(res.scores[name], one.scores[name], rtol=1e-6, atol=1e-7)

    class Wrapped(torch.nn.Module):  # a thin wrapper around TinyLlama, e.g. to post-process logits
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, x):
            return self.inner(x).logits

    tiny = TinyLlama(TinyLlamaConfig.preset("pico", vocab_size=256, max_seq_len=64))
    torch.testing.assert_close(mink_pp_scores(Wrapped(tiny), ids, mask), mink_pp_scores(tiny, ids, mask))


def test_model_without_parameters_is_scored_on_the_ids_device():
    # next(model.parameters()) raised a bare StopIteration for a parameter-free module.
    class Fixed(torch.nn.Module):
        def forward(self, ids):
            return torch.nn.functional.one_hot(ids, 8).float() * 2.0

    ids = torch.tensor([[1, 2, 3, 4], [5, 6, 7, 0]])
    out = score_all(Fixed(), ids, methods=("loss", "mink++"), ks=(0.5,))
    assert all(torch.isfinite(v).all() for v in out.values())


def test_scoring_restores_every_submodule_training_flag():
    torch.manual_seed(0)
    model = TinyLlama(TinyLlamaConfig.preset("pico", vocab_size=256, max_seq_len=64))
    model.train()
    model.model.layers[0].eval()  # e.g. a frozen block inside a model being fine-tuned
    before = {name: m.training for name, m in model.named_modules()}
    mink_pp_scores(model, torch.randint(0, 256, (2, 6)))
    assert {name: m.training for name, m in model.named_modules()} == before


def test_numpy_scalar_k_is_accepted():
    # np.float32 is not a float subclass; it was refused with "k must be a fraction in (0, 1]; got 0.5".
    torch.manual_seed(0)
    model = TinyLlama(TinyLlamaConfig.preset("pico", vocab_size=256, max_seq_len=64))
    ids = torch.randint(0, 256, (2, 9))
    want = mink_pp_scores(model, ids, k=0.5)
    torch.testing.assert_close(mink_pp_scores(model, ids, k=np.float32(0.5)), want)
    out = score_all(model, ids, methods=("mink++",), ks=np.array([0.5], dtype=np.float32))
    torch.testing.assert_close(out["mink++@0.5"], want)


def test_ks_must_be_a_sequence_of_fractions():
    torch.manual_seed(0)
    model = TinyLlama(TinyLlamaConfig.preset("pico", vocab_size=256, max_seq_len=64))
    ids = torch.randint(0, 256, (2, 6))
    with pytest.raises(ValueError, match="ks must be a sequence"):
        score_all(model, ids, methods=("mink++",), ks=0.2)  # was TypeError: 'float' object is not iterable
    with pytest.raises(ValueError, match="ks must be a sequence"):
        evaluate_mia(model, ByteTokenizer(), ["abc", "defg"], [1, 0], ks=0.2, n_bootstrap=0)
    with pytest.raises(ValueError, match="ks must hold at least one"):
        score_all(model, ids, methods=("mink++",), ks=())  # was: an empty dict
    assert set(score_all(model, ids, methods=("loss",), ks=())) == {"loss"}


def test_a_single_str_is_not_taken_for_a_list_of_texts():
    # "ab" has len 2 = batch, so each character used to be scored as the text of one row.
    torch.manual_seed(0)
    model = TinyLlama(TinyLlamaConfig.preset("pico", vocab_size=256, max_seq_len=64))
    ids = torch.randint(0, 256, (2, 6))
    with pytest.raises(ValueError, match="texts must be a sequence of str"):
        zlib_scores(model, ids, "ab")
    with pytest.raises(ValueError, match="texts must be a sequence of str"):
        score_all(model, ids, texts="ab")
    with pytest.raises(ValueError, match="texts must be a sequence of str"):
        evaluate_mia(model, ByteTokenizer(), "ab", [1, 0], n_bootstrap=0)


def test_min_k_mean_validates_values_and_valid():
    with pytest.raises(ValueError, match=r"values must be a \(batch, T\) float tensor"):
        min_k_mean(torch.tensor([3.0, 1.0, 2.0]), None, 0.5)  # was TypeError: 'int' object is not iterable
    with pytest.raises(ValueError, match="valid must be None or a bool tensor"):
        min_k_mean(torch.tensor([[3.0, 1.0, 2.0]]), torch.tensor([[1, 1, 0]]), 0.5)
    with pytest.raises(ValueError, match="valid must be None or a bool tensor"):
        min_k_mean(torch.tensor([[3.0, 1.0, 2.0]]), torch.tensor([[True, True]]), 0.5)


def test_all_minus_inf_logit_row_raises():
    # softmax over a row of -inf is 0/0: ell and sigma came back NaN without an error.
    logits = torch.zeros(2, 3)
    logits[1] = -float("inf")
    with pytest.raises(FloatingPointError, match="all -inf"):
        token_stats(logits, torch.tensor([0, 1]))


def test_word_tokenizer_rejects_a_single_str_and_bad_ids():
    # train("to be ...") iterated the characters and built a vocabulary of letters.
    with pytest.raises(TypeError, match="texts must be an iterable of str"):
        WordTokenizer.train("to be or not to be", vocab_size=5)
    tok = WordTokenizer.train(["to be, or not to be"], vocab_size=5)
    with pytest.raises(ValueError, match=r"ids must lie in \[0, 5\)"):
        tok.decode([-1])  # was the last vocabulary word, silently
    with pytest.raises(ValueError, match=r"ids must lie in \[0, 5\)"):
        tok.decode(torch.tensor([1, 5]))


def test_harness_accepts_numpy_ints_and_rejects_float_member_ids():
    g = torch.Generator().manual_seed(0)
    docs = [torch.randint(0, 50, (100,), generator=g)]
    p = sample_passages(docs, np.int64(3), np.int64(8), seed=1)  # was "n must be a positive int; got 3"
    assert torch.equal(p, sample_passages(docs, 3, 8, seed=1))
    torch.manual_seed(0)
    model = TinyLlama(TinyLlamaConfig.preset("pico", vocab_size=50, max_seq_len=64))
    with pytest.raises(TypeError, match="member_ids must be an integer"):
        inject_members(model, p.float() + 0.5, docs[0], 1)  # was silently truncated to ids


def test_finiteness_check_allocates_no_vocabulary_sized_temporary(monkeypatch):
    # The NaN/+inf check ran isnan(logits) and isposinf(logits), each writing a (..., V) bool tensor:
    # on the fused-kernel path that was the largest allocation of the call (256 MiB at B = 4,
    # T = 2048, V = 32k), the materialisation the kernel exists to avoid. A stand-in for the kernel
    # isolates the wrapper's own allocations; the row maximum needs only (...)-sized ones.
    from torch.profiler import ProfilerActivity, profile

    from iclr25.llm.minkpp import scores

    def fused(logits, targets, backend="auto"):
        out = torch.zeros(logits.shape[:-1])
        return out, out, out + 1.0

    monkeypatch.setattr(scores, "TOKEN_STATS", fused)
    logits = torch.randn(4, 16, 4096)
    targets = torch.zeros(4, 16, dtype=torch.long)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        token_stats(logits, targets)
    biggest = max(e.cpu_memory_usage for e in prof.events())
    assert biggest < logits.numel() // 16, biggest  # a (..., V) bool tensor is numel bytes
    for bad in (float("nan"), float("inf")):
        z = logits.clone()
        z[2, 5, 4000] = bad
        with pytest.raises(FloatingPointError, match="NaN or \\+inf"):
            token_stats(z, targets)
        with pytest.raises(FloatingPointError, match="NaN or \\+inf"):
            token_stats(z.bfloat16(), targets)


def test_word_tokenizer_save_never_leaves_a_half_written_file(tmp_path, monkeypatch):
    # save() opened the target with "w" (truncating it) and then wrote: an error mid-write left an
    # empty or cut JSON where the previous vocabulary had been.
    import json

    from iclr25.llm.minkpp import tokenizer as tokmod

    path = tmp_path / "vocab.json"
    old = WordTokenizer.train(["to be, or not to be"], vocab_size=5)
    old.save(path)
    before = path.read_text()

    def broken_dump(obj, fh):
        fh.write('{"vocab": ["cut')
        raise OSError("disk full")

    monkeypatch.setattr(tokmod.json, "dump", broken_dump)
    with pytest.raises(OSError, match="disk full"):
        WordTokenizer.train(["that is the question"], vocab_size=5).save(path)
    monkeypatch.setattr(tokmod.json, "dump", json.dump)
    assert path.read_text() == before
    assert WordTokenizer.load(path).itos == old.itos
    assert [p.name for p in tmp_path.iterdir()] == ["vocab.json"]  # no temporary left behind


def test_sample_passages_refuses_float_docs():
    # The final .long() truncated float token ids silently (2.7 -> 2), as member_ids once did.
    with pytest.raises(TypeError, match="docs must hold integer"):
        sample_passages([torch.arange(20.0) + 0.7], 2, 4)
    with pytest.raises(TypeError, match="docs must hold integer"):
        sample_passages({"a": torch.arange(20) > 5}, 2, 4)


def test_counts_accept_numpy_ints_and_refuse_bools():
    # batch_size=np.int64(2) was refused with "must be a positive int; got 2"; True was taken as 1
    # (one bootstrap replicate, one exposure) without a word.
    torch.manual_seed(0)
    model = TinyLlama(TinyLlamaConfig.preset("pico", vocab_size=256, max_seq_len=64))
    texts, labels = ["to be or not", "that is", "whether tis", "nobler in"], [1, 0, 1, 0]
    want = evaluate_mia(model, ByteTokenizer(), texts, labels, batch_size=2, n_bootstrap=3)
    got = evaluate_mia(model, ByteTokenizer(), texts, labels, batch_size=np.int64(2), n_bootstrap=np.int32(3))
    assert got.metrics == want.metrics and got.n_bootstrap == 3 and type(got.n_bootstrap) is int
    cut = evaluate_mia(model, ByteTokenizer(), texts, labels, max_length=np.int64(4), n_bootstrap=0)
    ref = evaluate_mia(model, ByteTokenizer(), texts, labels, max_length=4, n_bootstrap=0)
    for name in ref.scores:
        np.testing.assert_array_equal(cut.scores[name], ref.scores[name])
    for kwargs, match in (
        ({"batch_size": True}, "batch_size"),
        ({"n_bootstrap": True}, "n_bootstrap"),
        ({"ci_level": "0.9"}, "ci_level"),
        ({"ci_level": None}, "ci_level"),
    ):
        with pytest.raises(ValueError, match=match):
            evaluate_mia(model, ByteTokenizer(), texts, labels, **kwargs)
    g = torch.Generator().manual_seed(0)
    members, stream = torch.randint(0, 256, (4, 6), generator=g), torch.randint(0, 256, (100,), generator=g)
    hist = inject_members(model, members, stream, np.int64(2), members_per_step=np.int64(4), seed=0)
    assert hist["steps"] == 2
    with pytest.raises(ValueError, match="exposures"):
        inject_members(model, members, stream, True)
    with pytest.raises(ValueError, match="general_per_step"):
        inject_members(model, members, stream, 1, general_per_step=False)


def test_evaluate_mia_checks_label_shape_before_scoring():
    # (n, 1) labels passed every up-front check and were refused by mia_metrics only after every
    # text had been scored (hours for a real LLM on a large set).
    class Counting(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = _Bigram()
            self.calls = 0

        def forward(self, ids):
            self.calls += 1
            return self.inner(ids)

    model = Counting()
    with pytest.raises(ValueError, match="labels must be a 1-D"):
        evaluate_mia(model, ByteTokenizer(), ["ab", "cde", "fg"], [[1], [0], [1]], n_bootstrap=0)
    assert model.calls == 0
    res = evaluate_mia(model, ByteTokenizer(), ["ab", "cde", "fg"], torch.tensor([1, 0, 1]), n_bootstrap=0)
    assert model.calls == 1 and res.labels.tolist() == [1, 0, 1]
