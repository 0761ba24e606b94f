"""Train/eval mode handling for evaluation, sampling and dry runs inside a caller's training loop."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch import nn

__all__ = ["eval_mode"]


@contextmanager
def eval_mode(module: nn.Module) -> Iterator[nn.Module]:
    """Run the body with ``module`` in eval mode, then give every submodule its own flag back.

    ``module.train(was_training)`` is not a restore: it sets one flag on every submodule, so a part
    the caller keeps in the other mode (a frozen encoder in eval inside a training model, a head in
    train mode inside an eval model) would be switched. The flags come back also when the body
    raises. Gradient tracking is left alone; combine with ``torch.no_grad()`` where wanted.

    Examples
    --------
    >>> import torch
    >>> net = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout(0.5)).train()
    >>> net[1].eval()  # doctest: +ELLIPSIS
    Dropout(...)
    >>> with eval_mode(net):
    ...     assert not net.training and not net[0].training
    >>> net.training, net[0].training, net[1].training
    (True, True, False)
    """
    modes = [(m, m.training) for m in module.modules()]
    module.eval()
    try:
        yield module
    finally:
        for m, was in modes:
            m.training = was
