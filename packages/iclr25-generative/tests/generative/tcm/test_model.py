import warnings

import pytest
import torch
from torch import nn

from iclr25.generative.tcm import TruncatedCM, consistency_sample


class Lin(nn.Module):
    def __init__(self, a: float) -> None:
        super().__init__()
        self.a = nn.Parameter(torch.tensor(a))

    def forward(self, x, t, **_):
        return self.a * x + t[:, None]


def _pair():
    teacher = Lin(2.0).requires_grad_(False)
    return TruncatedCM(Lin(3.0), teacher, t_prime=1.0), teacher


def test_routing_is_exact_and_teacher_gets_no_grad():
    tcm, teacher = _pair()
    x = torch.randn(6, 2, generator=torch.Generator().manual_seed(0))
    t = torch.tensor([0.5, 1.0, 2.0, 0.999, 80.0, 0.002])
    out = tcm(x, t)
    stud = t >= 1.0
    torch.testing.assert_close(out[stud], tcm.student(x, t)[stud], rtol=0, atol=0)
    torch.testing.assert_close(out[~stud], teacher(x, t)[~stud], rtol=0, atol=0)
    assert stud.tolist() == [False, True, True, False, True, False]  # t = t' is a student sample
    out.sum().backward()
    assert tcm.student.a.grad is not None and teacher.a.grad is None
    # all-teacher batch carries no graph at all
    assert not tcm(x, torch.full((6,), 0.5)).requires_grad


def test_teacher_frozen_with_warning_and_kept_in_eval():
    teacher = nn.Sequential(nn.Dropout(0.5))
    with pytest.warns(UserWarning, match="freezing"):
        TruncatedCM(Lin(1.0), Lin(2.0), 1.0)
    tcm = TruncatedCM(Lin(1.0), teacher.requires_grad_(False), 1.0)
    tcm.train()
    assert tcm.student.training and not tcm.teacher.training
    with pytest.raises(ValueError, match="t_prime"):
        TruncatedCM(Lin(1.0), teacher, t_prime=-1.0)


def test_sample_warns_below_t_prime():
    tcm, _ = _pair()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x = consistency_sample(tcm, (5, 2), (80.0, 1.0), generator=torch.Generator().manual_seed(0))
    assert x.shape == (5, 2)
    with pytest.warns(UserWarning, match="teacher"):
        consistency_sample(tcm, (5, 2), (80.0, 0.5), generator=torch.Generator().manual_seed(0))
    # one step is f(T z, T) with the student
    z = torch.randn(5, 2, generator=torch.Generator().manual_seed(3))
    x1 = consistency_sample(tcm, (5, 2), (80.0,), generator=torch.Generator().manual_seed(3))
    torch.testing.assert_close(x1, 3.0 * 80 * z + 80.0)
