"""The iclr25-generative distribution: its cards load, its import stays light, its README runs."""

from iclr25.core.testing import assert_cards_belong_to, assert_import_is_light, run_readme_examples


def test_cards_belong_to_this_distribution():
    assert_cards_belong_to("generative")


def test_import_is_light():
    assert_import_is_light("iclr25.generative")


def test_readme_examples_run():
    run_readme_examples("iclr25-generative")
