"""float64 inputs and models are scored in float64 (bf16/fp16 are upcast to fp32, never fp64 to fp32)."""

import torch
from torch import nn

from iclr25.llm.minkpp import inject_members, token_stats


def test_float64_logits_give_float64_statistics():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 5, 37, generator=g, dtype=torch.float64) * 3
    targets = torch.randint(0, 37, (2, 5), generator=g)
    ell, mu, sigma = token_stats(logits, targets, backend="auto")
    logp = torch.log_softmax(logits, -1)
    p = logp.exp()
    mu_ref = (p * logp).sum(-1)
    var_ref = (p * (logp - mu_ref[..., None]) ** 2).sum(-1)
    assert ell.dtype == mu.dtype == sigma.dtype == torch.float64
    torch.testing.assert_close(ell, logp.gather(-1, targets[..., None])[..., 0], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(mu, mu_ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(sigma, var_ref.sqrt(), rtol=1e-12, atol=1e-12)


def test_half_logits_are_still_accumulated_in_float32():
    logits = torch.randn(3, 11, generator=torch.Generator().manual_seed(1)).bfloat16()
    out = token_stats(logits, torch.zeros(3, dtype=torch.long), backend="reference")
    assert all(x.dtype == torch.float32 for x in out)


class _Bigram(nn.Module):
    def __init__(self, vocab: int) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, vocab)

    def forward(self, ids):
        return self.emb(ids) * 7.3


def test_inject_members_trains_a_float64_model_with_a_float64_loss():
    torch.manual_seed(0)
    model = _Bigram(13).double()
    g = torch.Generator().manual_seed(2)
    members = torch.randint(0, 13, (4, 6), generator=g)
    stream = torch.randint(0, 13, (200,), generator=g)
    w0 = model.emb.weight.detach().clone()
    hist = inject_members(model, members, stream, 1, members_per_step=4, general_per_step=2, seed=3)
    # replay the first step's batch (same generator draws as inject_members) on the initial weights
    g = torch.Generator().manual_seed(3)
    order = torch.randperm(4, generator=g)
    starts = torch.randint(0, 200 - 6 + 1, (2,), generator=g)
    batch = torch.cat([stream[starts[:, None] + torch.arange(6)], members[order]])
    logits = nn.functional.embedding(batch[:, :-1], w0) * 7.3
    exact = nn.functional.cross_entropy(logits.reshape(-1, 13), batch[:, 1:].reshape(-1))
    assert abs(hist["loss"][0] - float(exact)) <= 1e-13 * abs(float(exact))
