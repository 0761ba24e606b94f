import pytest

from iclr25.core.lazy import attach


def test_attach_imports_submodules_on_first_access():
    getattr_, dir_, all_ = attach("iclr25.core", ["seed", "io", "seed"])
    assert all_ == dir_() == ["io", "seed"]
    import iclr25.core.io

    assert getattr_("io") is iclr25.core.io
    with pytest.raises(AttributeError, match=r"'iclr25\.core' has no attribute 'progress'"):
        getattr_("progress")  # a real submodule, but not one this package exposes
