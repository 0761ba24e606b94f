import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    # These tensors are small: intra-op threading only adds contention on a 2-core machine.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
