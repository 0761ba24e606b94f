"""Shared fixtures of the TopoLoss tests."""

import pytest

from iclr25.core.device import cpu_threads


@pytest.fixture(autouse=True)
def _one_thread():
    # tiny tensors: one thread avoids oversubscription on a busy 2-core machine
    with cpu_threads(1):
        yield
