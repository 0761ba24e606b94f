"""Shared fixtures of the TopoLoss tests."""

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    # tiny tensors: one thread avoids oversubscription on a busy 2-core machine
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
