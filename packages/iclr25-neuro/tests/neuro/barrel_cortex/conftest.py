"""One intra-op thread for these tests: their tensors are tiny, and on a shared machine OpenMP
threads spin-waiting on each other made a 20-step training test 25x slower."""

import pytest

from iclr25.core.device import cpu_threads


@pytest.fixture(autouse=True)
def _one_thread():
    with cpu_threads(1):
        yield
