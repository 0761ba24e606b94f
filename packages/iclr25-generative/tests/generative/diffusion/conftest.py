import pytest

from iclr25.core.device import cpu_threads


@pytest.fixture(autouse=True, scope="package")
def _one_thread():
    # the core's tests use tiny tensors: on a 2-core machine intra-op threads only add overhead
    with cpu_threads(1):
        yield
