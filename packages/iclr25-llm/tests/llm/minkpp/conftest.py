import pytest

from iclr25.core.device import cpu_threads


@pytest.fixture(autouse=True)
def _one_thread():
    # pico/nano models: intra-op threading costs more than it saves on a 2-core machine.
    with cpu_threads(1):
        yield
