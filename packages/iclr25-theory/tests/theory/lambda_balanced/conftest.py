"""Single intra-op thread for these tests: every matrix is tiny, so threads only add overhead."""

import pytest

from iclr25.core.device import cpu_threads


@pytest.fixture(autouse=True)
def _one_thread():
    with cpu_threads(1):
        yield
