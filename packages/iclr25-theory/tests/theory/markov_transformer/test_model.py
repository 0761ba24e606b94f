"""MarkovTransformer: weight tying, shapes, causality, bad input."""

import pytest
import torch

from iclr25.theory.markov_transformer import MarkovTransformer, MarkovTransformerConfig


@pytest.mark.parametrize("vocab", ["binary", "two_token"])
def test_tied_model_shares_one_parameter(vocab):
    tied = MarkovTransformer(MarkovTransformerConfig(weight_tying=True, vocab=vocab))
    assert tied.head_vector is tied.embedding_vector and tied.tied
    names = [n for n, _ in tied.named_parameters()]
    assert "embedding_vector" in names and "head_vector" not in names
    with torch.no_grad():
        tied.embedding_vector.add_(1.0)  # one storage: the head sees it
    assert torch.equal(tied.head_vector, tied.embedding_vector)
    untied = MarkovTransformer(MarkovTransformerConfig(weight_tying=False, vocab=vocab))
    assert untied.head_vector is not untied.embedding_vector and not untied.tied
    names = [n for n, _ in untied.named_parameters()]
    assert "embedding_vector" in names and "head_vector" in names
    assert untied.head_vector.data_ptr() != untied.embedding_vector.data_ptr()
    n_tied = sum(p.numel() for p in tied.parameters())
    n_untied = sum(p.numel() for p in untied.parameters())
    assert n_untied - n_tied == tied.embedding_vector.numel()


@pytest.mark.parametrize(
    "kw",
    [{}, {"layer_norm": True}, {"vocab": "two_token", "activation": "gelu", "layer_norm": True, "n_layers": 2}],
)
def test_forward_shape_and_causality(kw):
    torch.manual_seed(0)
    model = MarkovTransformer(MarkovTransformerConfig(d_model=4, max_len=16, init_std=0.5, n_heads=2, **kw)).double()
    x = torch.randint(0, 2, (3, 10), generator=torch.Generator().manual_seed(1))
    out = model(x)
    assert out.shape == (3, 10) and out.dtype == torch.float64
    y = x.clone()
    y[:, 6:] = 1 - y[:, 6:]  # changing the future must not change earlier logits
    assert torch.allclose(model(y)[:, :6], out[:, :6], atol=1e-12)
    assert not torch.allclose(model(y)[:, 6:], out[:, 6:])


def test_two_token_logit_is_the_log_odds_difference():
    torch.manual_seed(0)
    model = MarkovTransformer(MarkovTransformerConfig(d_model=4, vocab="two_token", init_std=0.3)).double()
    x = torch.randint(0, 2, (2, 5))
    logits = model(x)
    # Cross-entropy over the two rows equals BCE on the difference of the two head logits.
    with torch.no_grad():
        model.head_bias.copy_(torch.tensor([0.4, -0.2]))
    shifted = model(x)
    assert torch.allclose(shifted - logits, torch.full_like(logits, -0.6), atol=1e-12)


def test_bad_input_raises_before_compute():
    model = MarkovTransformer(MarkovTransformerConfig(max_len=8))
    x = torch.tensor([[0, 1, 2, 0]])
    before = x.clone()
    with pytest.raises(ValueError, match="only tokens 0 and 1, found 2"):
        model(x)
    assert torch.equal(x, before)
    with pytest.raises(ValueError, match="max_len is 8"):
        model(torch.zeros(1, 9, dtype=torch.long))
    with pytest.raises(TypeError, match="integer"):
        model(torch.zeros(1, 4))
    with pytest.raises(ValueError, match=r"shape \(B, L\)"):
        model(torch.zeros(4, dtype=torch.long))


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"d_model": 0}, "d_model"),
        ({"d_model": 6, "n_heads": 4}, "n_heads must divide"),
        ({"activation": "tanh"}, "activation"),
        ({"vocab": "bytes"}, "vocab"),
        ({"d_model": 1, "layer_norm": True}, "layer_norm"),
    ],
)
def test_bad_config(kw, match):
    with pytest.raises(ValueError, match=match):
        MarkovTransformerConfig(**kw)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int16, torch.int8, torch.uint8])
@pytest.mark.parametrize("vocab", ["binary", "two_token"])
def test_any_integer_token_dtype_gives_the_long_logits(vocab, dtype):
    # validate_input accepts every integer dtype; uint8 used to act as a boolean mask on wte.
    torch.manual_seed(0)
    model = MarkovTransformer(MarkovTransformerConfig(d_model=4, max_len=8, vocab=vocab))
    x = torch.tensor([[0, 1, 1, 0, 1], [1, 1, 0, 0, 0]])
    assert torch.equal(model(x.to(dtype)), model(x))


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"layer_norm": "no"}, "layer_norm must be a bool"),
        ({"weight_tying": 1}, "weight_tying must be a bool"),
    ],
)
def test_bad_config_flags_are_not_truthy(kw, match):
    with pytest.raises(TypeError, match=match):
        MarkovTransformerConfig(**kw)


def test_infinite_init_std_rejected():
    with pytest.raises(ValueError, match="init_std must be a finite"):
        MarkovTransformerConfig(init_std=float("inf"))
