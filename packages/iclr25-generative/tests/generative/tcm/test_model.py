import math
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
    trainable = Lin(2.0)
    with pytest.warns(UserWarning, match="freezing"):
        tcm = TruncatedCM(Lin(1.0), trainable, 1.0)
    assert not any(p.requires_grad for p in trainable.parameters())
    assert all(p.requires_grad for p in tcm.student.parameters())
    with warnings.catch_warnings():  # an already frozen teacher is accepted silently
        warnings.simplefilter("error")
        TruncatedCM(Lin(1.0), Lin(2.0).requires_grad_(False), 1.0)
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


class LabelLin(Lin):
    """f(x, t, label) = a x + t + 10 label: the output shows which label row each sample got."""

    def forward(self, x, t, label=None, **_):
        return super().forward(x, t) + 10.0 * label[:, None]


def test_routing_splits_per_sample_conditioning():
    teacher = LabelLin(2.0).requires_grad_(False)
    tcm = TruncatedCM(LabelLin(3.0), teacher, t_prime=1.0)
    x = torch.randn(5, 2, generator=torch.Generator().manual_seed(1))
    t = torch.tensor([0.5, 2.0, 0.1, 1.0, 30.0])
    label = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0])
    out = tcm(x, t, label=label)
    a = torch.where(t >= 1.0, 3.0, 2.0)[:, None]
    torch.testing.assert_close(out, a * x + t[:, None] + 10.0 * label[:, None])


def test_two_step_sampling_closed_form_student_and_teacher():
    """x1 = f(T z1, T); x = f(x1 + sqrt(t_mid^2 - eps^2) z2, t_mid) with the student iff t_mid >= t'."""
    tcm, _ = _pair()  # student a = 3, teacher a = 2, both f = a x + t
    for t_mid, a_mid in ((2.0, 3.0), (0.5, 2.0)):
        g = torch.Generator().manual_seed(4)
        z1, z2 = torch.randn(5, 2, generator=g), torch.randn(5, 2, generator=g)
        x1 = 3.0 * 80.0 * z1 + 80.0
        want = a_mid * (x1 + math.sqrt(t_mid**2 - 0.002**2) * z2) + t_mid
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = consistency_sample(tcm, (5, 2), (80.0, t_mid), generator=torch.Generator().manual_seed(4))
        torch.testing.assert_close(got, want)


def test_shallow_copied_teacher_sharing_parameters_is_rejected():
    """copy.copy(net) shares the parameter tensors: freezing the teacher used to freeze the student."""
    import copy

    net = Lin(2.0)
    with pytest.raises(ValueError, match="share 1 parameter"):
        TruncatedCM(net, copy.copy(net), 1.0)
    assert net.a.requires_grad  # the rejected call did not freeze the student
    wrapper = nn.Sequential(net)  # the student nested inside the teacher
    with pytest.raises(ValueError, match="share"):
        TruncatedCM(net, wrapper, 1.0)


def test_sampling_restores_each_submodule_mode():
    """A submodule the caller keeps in eval mode stays in eval mode after sampling mid-training."""

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body, self.frozen = Lin(1.0), nn.Dropout(0.5)

        def forward(self, x, t, **_):
            return self.body(x, t)

    f = Net().train()
    f.frozen.eval()
    consistency_sample(f, (3, 2), (80.0,))
    assert f.training and f.body.training and not f.frozen.training
    f.eval()
    consistency_sample(f, (3, 2), (80.0,))
    assert not any(m.training for m in f.modules())
    tcm, _ = _pair()
    tcm.train()
    consistency_sample(tcm, (3, 2), (80.0,))
    assert tcm.training and tcm.student.training and not tcm.teacher.training


def test_truncated_cm_names_bad_student_and_teacher():
    with pytest.raises(TypeError, match=r"student and teacher must be nn\.Modules, got function and Lin"):
        TruncatedCM(lambda x, t: x, Lin(2.0).requires_grad_(False), 1.0)
    with pytest.raises(TypeError, match=r"student and teacher must be nn\.Modules, got Lin and NoneType"):
        TruncatedCM(Lin(2.0), None, 1.0)
    net = Lin(2.0)
    with pytest.raises(ValueError, match="student and teacher must be different modules"):
        TruncatedCM(net, net, 1.0)
    assert net.a.requires_grad  # rejected before the teacher would have been frozen


def test_sampling_a_plain_function_closed_form():
    """A consistency function that is no nn.Module: float32 samples, no train/eval switching."""
    g = torch.Generator().manual_seed(6)
    z1, z2 = torch.randn(4, 3, generator=g), torch.randn(4, 3, generator=g)
    want = 0.5 * ((0.5 * 80.0 * z1 + 80.0) + math.sqrt(2.0**2 - 0.002**2) * z2) + 2.0
    got = consistency_sample(
        lambda x, t: 0.5 * x + t[:, None], (4, 3), (80.0, 2.0), generator=torch.Generator().manual_seed(6)
    )
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, want)


def test_repr_shows_t_prime():
    """t' is not in the state dict; printing the model used to show only the two submodules."""
    tcm = TruncatedCM(Lin(3.0), Lin(2.0).requires_grad_(False), t_prime=0.5)
    assert "t_prime=0.5" in repr(tcm)
    assert "(student): Lin()" in repr(tcm) and "(teacher): Lin()" in repr(tcm)
