"""Scores work on tiny random Hugging Face causal LMs (no download), padded batches included."""

import pytest
import torch

from iclr25.llm.minkpp import mink_pp_scores, score_all

transformers = pytest.importorskip("transformers")


def _gpt2():
    cfg = transformers.GPT2Config(vocab_size=64, n_positions=32, n_embd=32, n_layer=1, n_head=2)
    return transformers.GPT2LMHeadModel(cfg).eval()


def _llama():
    cfg = transformers.LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=32,
    )
    return transformers.LlamaForCausalLM(cfg).eval()


@pytest.mark.parametrize("make", [_gpt2, _llama], ids=["gpt2", "llama"])
def test_hf_models_padded_batch_equals_singles(make):
    torch.manual_seed(0)
    model = make()
    g = torch.Generator().manual_seed(1)
    seqs = [torch.randint(0, 64, (n,), generator=g) for n in (10, 5)]
    ids = torch.zeros(2, 10, dtype=torch.long)
    mask = torch.zeros(2, 10, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = s
        mask[i, : len(s)] = 1
    batch = score_all(model, ids, mask, methods=("loss", "mink", "mink++"), ks=(0.2, 0.5))
    for i, s in enumerate(seqs):
        single = score_all(model, s[None], methods=("loss", "mink", "mink++"), ks=(0.2, 0.5))
        for k in single:
            torch.testing.assert_close(batch[k][i : i + 1], single[k], atol=1e-4, rtol=1e-4)
    # By hand from the model's own logits.
    logits = model(seqs[0][None]).logits[0, :-1].double()
    logp = logits.log_softmax(-1)
    p = logp.exp()
    mu = (p * logp).sum(-1)
    sigma = (p * (logp - mu[:, None]) ** 2).sum(-1).sqrt()
    s_t = (logp.gather(-1, seqs[0][1:, None]).squeeze(-1) - mu) / sigma
    want = s_t.sort().values[: int(0.2 * 9)].mean()
    got = mink_pp_scores(model, seqs[0][None], k=0.2)
    assert got.item() == pytest.approx(want.item(), abs=1e-4)
