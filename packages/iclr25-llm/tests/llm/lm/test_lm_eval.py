import math
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from iclr25.llm.lm._kv_compat import cache_kwarg, returned_cache
from iclr25.llm.lm.eval import (
    choice_accuracy,
    cloze_from_corpus,
    count_bits,
    generate,
    log_probs,
    next_token_accuracy,
    perplexity,
)
from iclr25.llm.lm.model import TinyLlama, TinyLlamaConfig
from iclr25.llm.lm.tokenizers import ByteTokenizer


class Unigram(nn.Module):
    """A "model" whose logits are a fixed distribution at every position."""

    def __init__(self, p: torch.Tensor):
        super().__init__()
        self.logp = nn.Parameter(p.log(), requires_grad=False)

    def forward(self, ids, **_):
        return self.logp.expand(*ids.shape, -1)


def _unigram(v=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    p = torch.rand(v, generator=g, dtype=torch.float64) + 0.1
    return Unigram((p / p.sum()).float()), g


@pytest.mark.parametrize(("seq_len", "stride"), [(16, None), (16, 4), (7, 7), (64, 1)])
def test_perplexity_of_unigram_is_closed_form(seq_len, stride):
    model, g = _unigram()
    tokens = torch.randint(0, 16, (301,), generator=g)
    p = model.logp.detach().double().exp()
    p = p / p.sum()
    counts = torch.bincount(tokens[1:], minlength=16).double()
    exact = float(-(counts * p.log()).sum() / counts.sum())
    r = perplexity(model, tokens, seq_len=seq_len, stride=stride)
    assert r["n_tokens"] == 300
    assert r["nll"] == pytest.approx(exact, abs=1e-6)
    assert r["bits_per_byte"] == pytest.approx(exact / math.log(2), abs=1e-6)
    assert r["ppl"] == pytest.approx(math.exp(exact), rel=1e-6)
    assert perplexity(model, tokens, seq_len, stride, n_bytes=600)["bits_per_byte"] == pytest.approx(
        r["bits_per_byte"] / 2
    )


def test_sliding_window_matches_brute_force():
    torch.manual_seed(0)
    m = TinyLlama(TinyLlamaConfig(d_model=16, n_layers=1, n_heads=2)).eval()
    tokens = torch.randint(0, 256, (50,), generator=torch.Generator().manual_seed(1))
    seq_len, stride = 8, 3
    r = perplexity(m, tokens, seq_len=seq_len, stride=stride)
    # brute force: each target t is predicted from the window the protocol gives it
    total = 0.0
    with torch.no_grad():
        from iclr25.llm.lm.data import eval_windows

        for b, e, k in eval_windows(50, seq_len, stride):
            lp, _ = log_probs(m, tokens[b:e][None])
            for t in range(e - k, e):
                total -= float(lp[0, t - b - 1])
    assert r["nll"] == pytest.approx(total / 49, abs=1e-5)


def test_perplexity_nan_and_bad_input():
    model, _ = _unigram()
    with torch.no_grad():
        model.logp[0] = float("nan")
    with pytest.raises(FloatingPointError):
        perplexity(model, torch.randint(0, 16, (40,)), seq_len=8)
    m = TinyLlama(TinyLlamaConfig(d_model=16, n_layers=1, n_heads=2))
    with pytest.raises(ValueError, match="max id 255"):
        perplexity(m, torch.tensor([1, 2, 300]))
    with pytest.raises(ValueError, match="at least seq_len"):
        perplexity(m, torch.tensor([1]))
    with pytest.raises(ValueError, match="at least seq_len"):
        perplexity(m, torch.tensor([], dtype=torch.long))
    with pytest.raises(ValueError, match="max id 255"):  # non-integer ids
        perplexity(m, torch.tensor([1.0, 2.0, 3.0]))


def test_log_probs_shapes_and_normalisation():
    torch.manual_seed(0)
    m = TinyLlama(TinyLlamaConfig(d_model=16, n_layers=1, n_heads=2))
    x = torch.randint(0, 256, (3, 9))
    tok_lp, full = log_probs(m, x)
    assert tok_lp.shape == (3, 8) and full.shape == (3, 8, 256)
    torch.testing.assert_close(full.exp().sum(-1), torch.ones(3, 8))
    torch.testing.assert_close(tok_lp, full.gather(-1, x[:, 1:, None]).squeeze(-1))


def test_choice_accuracy_with_a_known_model():
    # a unigram that strongly prefers "a": the all-"a" choice always wins
    p = torch.full((256,), 1e-4)
    p[ord("a")] = 1.0
    model = Unigram(p / p.sum())
    items = [("ctx", ["bbb", "aaa", "ccc"], 1), ("x", ["aaaa", "zz"], 0), ("y", ["q", "aa"], 0)]
    r = choice_accuracy(model, ByteTokenizer(), items)
    assert r == {"acc": pytest.approx(2 / 3), "acc_norm": pytest.approx(2 / 3), "n": 3}
    with pytest.raises(ValueError, match="answer"):
        choice_accuracy(model, ByteTokenizer(), [("c", ["a"], 3)])
    with pytest.raises(ValueError, match="empty"):
        choice_accuracy(model, ByteTokenizer(), [])
    with pytest.raises(ValueError, match="context"):
        choice_accuracy(model, ByteTokenizer(), [("", ["a", "b"], 0)])


def test_acc_norm_divides_by_choice_bytes():
    # unigram p(a) = 0.5, p(b) = 0.3: "aaaa" has log-lik 4 ln 0.5 = -2.77 < ln 0.3 = -1.20 ("b"),
    # but per byte ln 0.5 = -0.69 > -1.20, so acc and acc_norm disagree on the first item; on the
    # second ("ab": ln 0.15 vs "bb": ln 0.09, both 2 bytes) they agree
    p = torch.full((256,), 0.2 / 254)
    p[ord("a")], p[ord("b")] = 0.5, 0.3
    items = [("x", ["aaaa", "b"], 0), ("y", ["ab", "bb"], 0)]
    r = choice_accuracy(Unigram(p), ByteTokenizer(), items)
    assert r == {"acc": 0.5, "acc_norm": 1.0, "n": 2}


def test_cloze_items():
    text = "\n".join(f"line number {i:03d} of a fine play, {'x' * (i % 7)}" for i in range(200))
    items = cloze_from_corpus({"p": text}, n=20, n_choices=4, seed=0)
    assert len(items) == 20
    lines = [ln.strip() for ln in text.splitlines()]
    for ctx, choices, k in items:
        assert len(choices) == 4 and len(set(choices)) == 4
        i = lines.index(choices[k])
        assert ctx == "\n".join(lines[i - 2 : i]) + "\n"
        assert all(len(c) // 10 == len(choices[k]) // 10 for c in choices)
    assert cloze_from_corpus({"p": text}, n=20, seed=0) == items
    with pytest.raises(ValueError, match="empty"):
        cloze_from_corpus({}, n=1)


def test_generate_greedy_cache_matches_recompute():
    torch.manual_seed(0)
    m = TinyLlama(TinyLlamaConfig(d_model=32, n_layers=2, n_heads=4)).eval()
    prompt = torch.randint(0, 256, (2, 5))
    a = generate(m, prompt, 12, temperature=0, use_cache=True)
    b = generate(m, prompt, 12, temperature=0, use_cache=False)
    assert a.shape == (2, 17) and torch.equal(a, b) and torch.equal(a[:, :5], prompt)
    s1 = generate(m, prompt[0], 8, top_k=5, generator=torch.Generator().manual_seed(3))
    s2 = generate(m, prompt[0], 8, top_k=5, generator=torch.Generator().manual_seed(3))
    assert s1.shape == (13,) and torch.equal(s1, s2)
    # top_k=1 leaves only the arg-max, so sampling is greedy whatever the generator
    k1 = generate(m, prompt, 12, top_k=1, generator=torch.Generator().manual_seed(5))
    assert torch.equal(k1, a)


def test_generate_bad_input():
    m = TinyLlama(TinyLlamaConfig(d_model=16, n_layers=1, n_heads=2))
    prompt = torch.tensor([1, 2])
    with pytest.raises(ValueError, match="non-empty"):
        generate(m, torch.zeros(0, dtype=torch.long), 3)
    with pytest.raises(ValueError, match="max_new_tokens"):
        generate(m, prompt, -1)
    with pytest.raises(ValueError, match="temperature"):
        generate(m, prompt, 3, temperature=-1.0)
    with pytest.raises(ValueError, match="top_k"):
        generate(m, prompt, 3, top_k=0)
    with pytest.raises(ValueError, match="max id 255"):
        generate(m, torch.tensor([1, 999]), 3)


def test_generate_checks_the_position_limit_before_any_step():
    m = TinyLlama(TinyLlamaConfig(d_model=16, n_layers=1, n_heads=2, max_seq_len=8))
    calls = []
    m.register_forward_hook(lambda *_: calls.append(1))
    prompt = torch.tensor([1, 2, 3])
    assert generate(m, prompt, 6, temperature=0).shape == (9,)  # positions 0..7: the 9th token is never fed
    calls.clear()
    with pytest.raises(ValueError, match=r"needs 9 positions, more than the model's max_seq_len=8"):
        generate(m, prompt, 7, temperature=0)
    assert calls == []  # refused up front, not after 5 steps
    assert generate(m, torch.arange(10), 0).shape == (10,)  # nothing to generate: nothing to check


def test_generate_on_hf_model_matches_tinyllama():
    pytest.importorskip("transformers")
    torch.manual_seed(0)
    m = TinyLlama(TinyLlamaConfig(d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, max_seq_len=64)).eval()
    with torch.no_grad():
        for p in m.parameters():
            if p.dim() == 2:
                p.normal_(0, 0.2)  # peaked logits: greedy choices are not decided by rounding
    hf = m.to_hf()
    prompt = torch.randint(0, 256, (2, 5), generator=torch.Generator().manual_seed(1))
    ours = generate(m, prompt, 10, temperature=0)
    with warnings.catch_warnings():
        # the cache goes in under the name this transformers version takes (no deprecation path)
        warnings.simplefilter("error", FutureWarning)
        assert torch.equal(generate(hf, prompt, 10, temperature=0, use_cache=True), ours)
    assert torch.equal(generate(hf, prompt, 10, temperature=0, use_cache=False), ours)


class _CacheNamedModel(nn.Module):
    """Successor model taking its cache as ``cache=`` (transformers 5.x); counts tokens it was fed."""

    def __init__(self, v: int = 32):
        super().__init__()
        self.v, self.fed = v, 0
        self.anchor = nn.Parameter(torch.zeros(()))  # generate reads the device off a parameter

    def forward(self, ids, cache=None, use_cache=False):
        self.fed += ids.shape[1]
        seen = (0 if cache is None else cache) + ids.shape[1]
        return _Output(logits=F.one_hot((ids + 1) % self.v, self.v).float() * 10, cache=seen)


class _Output(dict):
    """A ModelOutput stand-in: fields by key and by attribute."""

    __getattr__ = dict.__getitem__


def test_generate_passes_the_cache_under_the_models_own_name():
    assert cache_kwarg(TinyLlama(TinyLlamaConfig(d_model=16, n_layers=1, n_heads=2))) == "past_key_values"
    m = _CacheNamedModel()
    assert cache_kwarg(m) == "cache"
    out = generate(m, torch.tensor([[3, 4]]), 5, temperature=0)
    assert out.tolist() == [[3, 4, 5, 6, 7, 8, 9]]
    # prompt once, then one token per step: the cache was taken and returned under "cache"
    assert m.fed == 2 + 4
    assert returned_cache({"cache": 7}) == 7


def test_next_token_accuracy_of_a_perfect_model():
    p = torch.full((256,), 1e-3)
    p[7] = 1.0
    assert next_token_accuracy(Unigram(p / p.sum()), torch.full((50,), 7), seq_len=8) == 1.0


class Successor(nn.Module):
    """Predicts ``id + 1 (mod V)`` after every token."""

    def __init__(self, v: int = 32):
        super().__init__()
        self.config = type("Cfg", (), {"vocab_size": v})()
        self.dummy = nn.Parameter(torch.zeros(()), requires_grad=False)

    def forward(self, ids, **_):
        return F.one_hot((ids + 1) % self.config.vocab_size, self.config.vocab_size).float()


@pytest.mark.parametrize("seq_len", [1, 8, 100])
def test_next_token_accuracy_counts_every_target_once(seq_len):
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 32, (101,), generator=g)
    follow = torch.rand(100, generator=g) < 0.5  # half the targets are the predicted successor
    for t in range(100):
        if follow[t]:
            tokens[t + 1] = (tokens[t] + 1) % 32
    exact = float(((tokens[:-1] + 1) % 32 == tokens[1:]).double().mean())
    assert next_token_accuracy(Successor(), tokens, seq_len=seq_len) == pytest.approx(exact, abs=1e-12)
    with pytest.raises(ValueError, match="max id 31"):
        next_token_accuracy(Successor(), torch.tensor([1, 2, 40]))


def test_count_bits():
    m = TinyLlama(TinyLlamaConfig.preset("pico"))
    n = m.num_parameters()
    assert count_bits(m) == 16 * n
    linear = sum(p.numel() for name, p in m.named_parameters() if "_proj" in name)
    bits = count_bits(m, {"*_proj.weight": 1.58})
    assert bits == pytest.approx(1.58 * linear + 16 * (n - linear))
    assert count_bits(m, lambda name, p: 4.0) == 4 * n


def test_eval_arguments_are_validated_by_name():
    model, g = _unigram()
    tokens = torch.randint(0, 16, (50,), generator=g)
    for bad in (0, -5, float("nan")):  # 0 raised ZeroDivisionError, -5 gave negative bits/byte
        with pytest.raises(ValueError, match="n_bytes"):
            perplexity(model, tokens, seq_len=8, n_bytes=bad)
    for bad in (0, -1):  # 0 raised ZeroDivisionError, -1 silently dropped the last window
        with pytest.raises(ValueError, match="max_windows"):
            next_token_accuracy(model, tokens, seq_len=8, max_windows=bad)
    assert next_token_accuracy(model, tokens, seq_len=8, max_windows=2) == next_token_accuracy(
        model, tokens[:17], seq_len=8
    )
    m = TinyLlama(TinyLlamaConfig(d_model=16, n_layers=1, n_heads=2))
    for bad in (float("nan"), None):  # NaN failed inside torch.multinomial, None with a bare TypeError
        with pytest.raises(ValueError, match="temperature"):
            generate(m, torch.tensor([1, 2]), 2, temperature=bad)
    with pytest.raises(ValueError, match="top_k"):
        generate(m, torch.tensor([1, 2]), 2, top_k=True)
    with pytest.raises(TypeError, match="policy must be a mapping"):
        count_bits(m, [("*", 4)])


def test_choice_accuracy_takes_numpy_answers_and_list_tokenizers():
    np = pytest.importorskip("numpy")
    torch.manual_seed(0)
    m = TinyLlama(TinyLlamaConfig(d_model=16, n_layers=1, n_heads=2)).eval()
    tok = ByteTokenizer()
    items = [("the cat sat on the ", ["mat", "xyzzy"], 0), ("one two ", ["three", "four", "five"], 2)]
    want = choice_accuracy(m, tok, items)
    # dataset answers are often numpy integers: "answer must index into 2 choices; got 1" before
    assert choice_accuracy(m, tok, [(c, ch, np.int64(a)) for c, ch, a in items]) == want

    class ListTokenizer:  # HF-style encode returning a list of ids ('list' has no attribute 'numel' before)
        def encode(self, s):
            return tok.encode(s).tolist()

    assert choice_accuracy(m, ListTokenizer(), items) == want
    with pytest.raises(ValueError, match="answer must be an int"):
        choice_accuracy(m, tok, [("ab", ["c", "d"], 1.0)])


def test_cloze_from_one_text_string():
    text = "".join(f"line number {i} of the only document here\n" for i in range(40))
    # a str was iterated character by character: "texts hold only 0 usable items"
    assert cloze_from_corpus(text, n=5, seed=1) == cloze_from_corpus([text], n=5, seed=1)
    with pytest.raises(ValueError, match="context_lines"):
        cloze_from_corpus([text], n=1, context_lines=-1)


def test_evaluation_gives_each_submodule_its_own_mode_back():
    # model.train(was) after evaluation used to switch a frozen (eval) part of a training model back on
    m = TinyLlama(TinyLlamaConfig(d_model=16, n_layers=2, n_heads=2)).train()
    m.model.layers[0].eval()
    before = [mod.training for mod in m.modules()]
    tokens = torch.randint(0, 256, (40,), generator=torch.Generator().manual_seed(4))
    perplexity(m, tokens, seq_len=8)
    next_token_accuracy(m, tokens, seq_len=8)
    generate(m, tokens[:3], 2)
    assert [mod.training for mod in m.modules()] == before
