import pytest


def pytest_collection_modifyitems(items):
    # everything in the top-level tests/ is cross-package by definition
    for item in items:
        item.add_marker(pytest.mark.cross)
