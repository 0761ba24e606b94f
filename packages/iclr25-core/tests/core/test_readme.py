from iclr25.core.testing import assert_import_is_light, run_readme_examples


def test_readme_examples_run():
    run_readme_examples("iclr25-core")


def test_import_is_light():
    assert_import_is_light("iclr25.core", forbidden=("torch", "numpy", "scipy"))
