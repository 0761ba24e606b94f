import pytest

from iclr25.core.device import cpu_threads


@pytest.fixture(autouse=True)
def _one_thread():
    # These tensors are small: intra-op threading only adds contention on a 2-core machine.
    with cpu_threads(1):
        yield
