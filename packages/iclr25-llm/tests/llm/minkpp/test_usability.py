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
