import pytest
import torch


@pytest.fixture(autouse=True, scope="package")
def _one_thread():
    # the core's tests use tiny tensors: on a 2-core machine intra-op threads only add overhead
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
