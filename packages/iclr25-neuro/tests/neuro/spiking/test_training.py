"""Acceptance 7: gradients flow through the surrogate: a 2-layer LIF net learns rate-coded XOR."""

import time

import torch
from torch import nn

from iclr25.neuro.spiking import LIF, bernoulli_encode

X = torch.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
Y = torch.tensor([0, 1, 1, 0])


def train_xor(seed: int, surrogate: str = "atan", max_steps: int = 300, T: int = 20):
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    fc1, fc2 = nn.Linear(2, 32), nn.Linear(32, 2)
    lif1 = LIF(tau_m=5.0, input_scale="none", surrogate=surrogate)
    lif2 = LIF(tau_m=5.0, input_scale="none", surrogate=surrogate)
    opt = torch.optim.Adam([*fc1.parameters(), *fc2.parameters()], lr=0.02)

    def counts(xb):
        rates = (0.1 + 0.8 * xb).expand(T, *xb.shape).contiguous()  # bit 0 → 10 %, bit 1 → 90 % firing
        lif1.reset()
        lif2.reset()
        return lif2(fc2(lif1(fc1(bernoulli_encode(rates, generator=gen))))).sum(0)

    def accuracy():
        with torch.no_grad():
            return (counts(X.repeat(64, 1)).argmax(1) == Y.repeat(64)).float().mean().item()

    for step in range(1, max_steps + 1):
        loss = nn.functional.cross_entropy(counts(X.repeat(8, 1)), Y.repeat(8))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 25 == 0 and accuracy() == 1.0:
            return step, 1.0
    return max_steps, accuracy()


def test_two_layer_lif_learns_rate_coded_xor():
    torch.set_num_threads(1)
    start = time.process_time()
    step, acc = train_xor(seed=0)
    elapsed = time.process_time() - start
    assert acc == 1.0, f"accuracy {acc} after {step} Adam steps"
    assert step <= 300 and elapsed < 10.0


def test_xor_fails_when_the_surrogate_path_is_cut():
    # a zero-width straight-through surrogate passes no gradient: the net cannot learn
    from iclr25.neuro.spiking import Surrogate

    cut = Surrogate("ste", (("width", 0.0),))  # built directly: make() rejects width 0 on purpose
    _, acc = train_xor(seed=0, surrogate=cut, max_steps=25)
    assert acc < 1.0
