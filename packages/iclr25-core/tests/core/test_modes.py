import pytest
import torch
from torch import nn

from iclr25.core.modes import eval_mode


def _net() -> nn.Sequential:
    # a trunk in train mode with a frozen (eval) block and, inside it, a head left in train mode
    net = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5), nn.Sequential(nn.BatchNorm1d(3), nn.Dropout(0.5)))
    net.train()
    net[2].eval()
    net[2][1].train()
    return net


def _flags(net: nn.Module) -> list[bool]:
    return [m.training for m in net.modules()]


def test_every_submodule_is_in_eval_inside_and_gets_its_own_flag_back():
    net = _net()
    before = _flags(net)
    assert before == [True, True, True, False, False, True]
    with eval_mode(net) as same:
        assert same is net
        assert not any(_flags(net))
        torch.manual_seed(0)
        x = torch.randn(4, 3)
        # eval mode: dropout is the identity and BatchNorm uses (and keeps) its running statistics
        assert torch.equal(net(x), net(x))
    assert _flags(net) == before
    assert int(net[2][0].num_batches_tracked) == 0
    # model.train(was) would have put the frozen block back in train mode
    reference = _net()
    reference.eval()
    reference.train(True)
    assert _flags(reference) != before


def test_flags_come_back_when_the_body_raises():
    net = _net()
    before = _flags(net)
    with pytest.raises(RuntimeError, match="boom"), eval_mode(net):
        raise RuntimeError("boom")
    assert _flags(net) == before


def test_gradient_mode_is_left_to_the_caller():
    net = nn.Linear(2, 1)
    with eval_mode(net):
        assert torch.is_grad_enabled()
        net(torch.ones(1, 2)).sum().backward()
    assert net.weight.grad is not None


def test_custom_train_override_is_not_needed_to_restore():
    class Frozen(nn.Module):
        """Keeps its teacher in eval whatever train() says, like a distillation wrapper."""

        def __init__(self):
            super().__init__()
            self.student, self.teacher = nn.Linear(1, 1), nn.Linear(1, 1)

        def train(self, mode: bool = True):
            super().train(mode)
            self.teacher.eval()
            return self

    m = Frozen().train()
    before = _flags(m)
    assert before == [True, True, False]
    with eval_mode(m):
        assert not any(_flags(m))
    assert _flags(m) == before
