import math

import pytest
import torch
from torch import nn

from iclr25.generative.diffusion.precond import edm_coefficients
from iclr25.generative.tcm import (
    ConsistencyTrainingLoss,
    ECTSchedule,
    TruncatedCM,
    TruncatedConsistencyLoss,
    pseudo_huber,
    train_truncated,
)


class Affine(nn.Module):
    """f(x, t) = a x + b t (deterministic, easy to compute by hand)."""

    def __init__(self, a: float, b: float) -> None:
        super().__init__()
        self.a, self.b = nn.Parameter(torch.tensor(a)), nn.Parameter(torch.tensor(b))

    def forward(self, x, t, **_):
        return self.a * x + self.b * t[:, None]


def test_pseudo_huber_closed_form():
    a, b = torch.tensor([[3.0, 4.0], [0.0, 0.0]]), torch.zeros(2, 2)
    torch.testing.assert_close(pseudo_huber(a, b, 1e-8), torch.tensor([5.0, 0.0]))
    torch.testing.assert_close(pseudo_huber(a, b, 1.0), torch.tensor([math.sqrt(26) - 1, 0.0]))


def test_stage1_loss_hand_computation():
    sched = ECTSchedule(double_every=1)
    loss = ConsistencyTrainingLoss(sched)
    f = Affine(0.7, 0.1).double()
    x0 = torch.randn(5, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    t = torch.tensor([0.002, 0.1, 1.0, 10.0, 80.0], dtype=torch.float64)
    got = loss(f, x0, step=3, generator=torch.Generator().manual_seed(1), t=t)
    n = torch.randn(5, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    ratio = 1 - 1 / 16
    r = (t * (1 - (1 - ratio) * (1 + 8 * torch.sigmoid(-t)))).clamp_min(1e-6)
    d = ((0.7 * (x0 + t[:, None] * n) + 0.1 * t[:, None]) - (0.7 * (x0 + r[:, None] * n) + 0.1 * r[:, None])).norm(
        dim=1
    )
    d = (d**2 + 1e-16).sqrt() - 1e-8  # pseudo-Huber with c = 1e-8
    torch.testing.assert_close(got, d / (t - r))
    w = ConsistencyTrainingLoss(sched, weighting="cout_sq")(f, x0, 3, generator=torch.Generator().manual_seed(1), t=t)
    torch.testing.assert_close(w, d / edm_coefficients(t, 0.5)[1] ** 2)


def test_dropout_mask_shared_between_online_and_target_pass():
    class DropOnly(nn.Module):  # output depends only on the dropout mask
        def __init__(self) -> None:
            super().__init__()
            self.drop, self.w = nn.Dropout(0.5), nn.Parameter(torch.ones(()))

        def forward(self, x, t, **_):
            return self.w * self.drop(torch.ones_like(x))

    m = DropOnly().train()
    torch.manual_seed(0)
    x0 = torch.randn(64, 8)
    out = ConsistencyTrainingLoss(ECTSchedule())(m, x0, 0)
    assert float(out.detach().abs().max()) < 1e-6  # identical masks -> zero distance


def test_stage2_loss_bookkeeping_and_boundary_routing():
    sched = ECTSchedule(double_every=1)
    student, teacher = Affine(0.7, 0.1), Affine(0.5, -0.2).requires_grad_(False)
    tcm = TruncatedCM(student, teacher, t_prime=1.0)
    loss = TruncatedConsistencyLoss(sched, t_prime=1.0, w_boundary=0.1)
    x0 = torch.randn(4, 2, generator=torch.Generator().manual_seed(0))
    t = torch.tensor([1.0, 1.0, 3.0, 50.0])
    bnd = torch.tensor([True, True, False, False])
    out = loss(tcm, x0, step=20, generator=torch.Generator().manual_seed(5), t=t, boundary=bnd)
    n = torch.randn(4, 2, generator=torch.Generator().manual_seed(5))
    r = sched.r(t, 20)
    on = 0.7 * (x0 + t[:, None] * n) + 0.1 * t[:, None]  # all online passes use the student
    tgt_s = 0.7 * (x0 + r[:, None] * n) + 0.1 * r[:, None]
    tgt_t = 0.5 * (x0 + r[:, None] * n) - 0.2 * r[:, None]
    tgt = torch.where((r < 1.0)[:, None], tgt_t, tgt_s)
    assert bool((r[:2] < 1).all()) and bool((r[2:] > 1).all())  # boundary targets come from the teacher
    per = (on - tgt).norm(dim=1) / (t - r)
    torch.testing.assert_close(out["per_sample"], per)
    torch.testing.assert_close(out["L_B"], per[:2].mean())
    torch.testing.assert_close(out["L_C"], per[2:].mean())
    torch.testing.assert_close(out["loss"], per[2:].mean() + 0.1 * per[:2].mean())
    out["loss"].backward()
    assert student.a.grad is not None and teacher.a.grad is None


def test_boundary_fraction_and_range():
    loss = TruncatedConsistencyLoss(ECTSchedule(), t_prime=1.0, boundary_prob=0.25)
    t, b = loss.sample_t(400, torch.Generator().manual_seed(0))
    assert int(b.sum()) == 100 and bool((t[b] == 1.0).all())
    assert bool((t >= 1.0).all()) and bool((t <= 80.0).all())


class LinearCM(nn.Module):
    """Linear-in-x consistency function f = g(t) x with g from EDM precond and a cubic in ln t."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.zeros(4, dtype=torch.float64))

    def g(self, t: torch.Tensor) -> torch.Tensor:
        c_skip, c_out, c_in, _ = edm_coefficients(t, 0.5)
        u = t.log() / math.log(80)  # in [0, 1] on [t', T]: keeps the cubic well conditioned
        h = self.w[0] + self.w[1] * u + self.w[2] * u**2 + self.w[3] * u**3
        return c_skip + c_out * c_in * h

    def forward(self, x, t, **_):
        return self.g(t)[:, None] * x


class ExactGaussianCM(nn.Module):
    def __init__(self, s: float) -> None:
        super().__init__()
        self.s = s

    def forward(self, x, t, **_):
        return self.s * x / (self.s**2 + t[:, None] ** 2).sqrt()


def test_gaussian_exactness_stage2_recovers_true_consistency_function():
    # x0 ~ N(0, s^2 I): the PF-ODE maps x_t to s x_t / sqrt(s^2 + t^2) (closed form)
    torch.manual_seed(0)
    s, dim = 1.0, 16
    sched = ECTSchedule(double_every=1)  # global step 20: ratio at its 0.999 cap, Delta_t small
    tcm = TruncatedCM(LinearCM(), ExactGaussianCM(s), t_prime=1.0)
    loss = TruncatedConsistencyLoss(sched, t_prime=1.0)

    def data(g):
        return s * torch.randn(256, dim, generator=g, dtype=torch.float64)

    train_truncated(tcm, data, 400, loss, start_step=20, lr=1e-1, grad_clip=None)
    t = torch.logspace(0, math.log10(80), 50, dtype=torch.float64)
    with torch.no_grad():
        g = tcm.student.g(t)
    exact = s / (s**2 + t**2).sqrt()
    rel = ((g - exact) / exact).abs()
    assert float(rel.max()) < 0.03, rel.max()


def test_bad_inputs():
    sched = ECTSchedule()
    with pytest.raises(ValueError, match="t_prime"):
        TruncatedConsistencyLoss(sched, t_prime=0.001)
    with pytest.raises(ValueError, match="t_prime"):
        TruncatedConsistencyLoss(sched, t_prime=80.0)
    with pytest.raises(ValueError, match="boundary_prob"):
        TruncatedConsistencyLoss(sched, boundary_prob=1.0)
    with pytest.raises(ValueError, match="weighting"):
        ConsistencyTrainingLoss(sched, weighting="x")
    x0 = torch.zeros(4, 2)
    x0[0, 0] = float("nan")
    with pytest.raises(ValueError, match="x0"):
        ConsistencyTrainingLoss(sched)(Affine(1.0, 0.0), x0, 0)


def test_non_finite_loss_stops_with_step_and_leaves_model_untouched():
    class Bad(Affine):
        def forward(self, x, t, **_):
            return super().forward(x, t) * float("nan")

    tcm = TruncatedCM(Bad(1.0, 0.0), Affine(1.0, 0.0).requires_grad_(False), 1.0)
    before = {k: v.clone() for k, v in tcm.state_dict().items()}
    with pytest.raises(FloatingPointError, match="step 0"):
        train_truncated(tcm, torch.randn(32, 2), 3, TruncatedConsistencyLoss(ECTSchedule()), batch_size=8)
    for k, v in tcm.state_dict().items():
        assert torch.equal(v, before[k])
