"""One intra-op thread for these tests: their tensors are tiny, and on a shared machine OpenMP
threads spin-waiting on each other made a 20-step training test 25x slower."""

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
