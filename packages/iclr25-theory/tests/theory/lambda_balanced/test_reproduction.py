"""The registered quick reproduction runs and its results fit the card."""

import pytest
import torch

from iclr25.core.cards import discover_cards


@pytest.mark.repro
def test_quick_reproduction(tmp_path):
    from iclr25.theory.lambda_balanced.experiment import experiment

    doc = experiment.execute(quick=True, device=torch.device("cpu"), seed=0, out=tmp_path)
    card = discover_cards()["lambda_balanced"]
    assert [c["id"] for c in doc["claims"]] == [c.id for c in card.claims]
    by_id = {c["id"]: c for c in doc["claims"]}
    for claim in card.claims:
        assert (by_id[claim.id]["holds"] is None) == (not claim.gated)
    # the machinery (not the sweep's thresholds) must hold at any seed
    assert by_id["exact_matches_gd"]["holds"] is True
    assert by_id["long_horizon"]["holds"] is True
    means = doc["extra"]["kernel_distance_mean"]
    assert len(means) == 5 and means[0] > means[-1]


@pytest.mark.parametrize("lam", [0.0, 2.0])
def test_sweep_init_is_a_balanced_gaussian_product(lam):
    # The sweep starts from sigma^2 G2 G1 (Gaussian layers, re-split to be lambda-balanced): the
    # product must be exactly that matrix and the balance exactly lambda I.
    from iclr25.theory.lambda_balanced.experiment import N_HIDDEN, SCALE, _product_init

    gen = torch.Generator().manual_seed(3)
    W1, W2 = _product_init(lam, 5, 3, gen, torch.device("cpu"))
    gen = torch.Generator().manual_seed(3)
    G1 = torch.randn(N_HIDDEN, 5, generator=gen, dtype=torch.float64)
    G2 = torch.randn(3, N_HIDDEN, generator=gen, dtype=torch.float64)
    product = SCALE * (G2 @ G1)
    assert torch.allclose(W2 @ W1, product, rtol=0, atol=1e-15)
    balance = W2.T @ W2 - W1 @ W1.T - lam * torch.eye(N_HIDDEN, dtype=torch.float64)
    assert float(balance.abs().max()) <= 1e-12
    s = torch.linalg.svdvals(product)
    assert float(s[0] / s[-1]) > 1.5  # a Gaussian product's spectrum, not all equal to SCALE
