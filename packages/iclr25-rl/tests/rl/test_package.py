"""The iclr25-rl distribution: its cards load, its import stays light, its README runs."""

import subprocess
import sys

from iclr25.core.cards import discover_cards
from iclr25.core.testing import readme_code_blocks


def test_cards_belong_to_this_distribution():
    cards = [c for c in discover_cards().values() if c.package == "iclr25-rl"]
    assert cards, "iclr25-rl ships no cards"
    for card in cards:
        assert card.module.startswith("iclr25.rl."), card.module
        assert card.claims


def test_import_is_light():
    code = "import sys, iclr25.rl; bad = {'torch', 'scipy'} & set(sys.modules); print(sorted(bad))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", f"importing iclr25.rl pulled in {out.strip()}"


def test_readme_examples_run():
    blocks = readme_code_blocks("iclr25-rl")
    assert blocks, "the README has no python example"
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})
