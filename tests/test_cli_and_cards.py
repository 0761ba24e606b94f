"""Cross-package checks with all seven distributions installed."""

import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from iclr25.core.cards import discover_cards, load_cards_from_tree
from iclr25.core.experiments import registry

ROOT = Path(__file__).resolve().parents[1]
CLI = str(Path(sys.executable).parent / "iclr25")  # the console script of this environment
DOMAINS = ["neuro", "compress", "theory", "rl", "generative", "llm"]


def run(*args, **kw):
    return subprocess.run(list(args), capture_output=True, text=True, **kw)


def test_list_shows_every_card_without_importing_torch():
    code = (
        "import io, sys\n"
        "from iclr25.core.cli import main\n"
        "buf = io.StringIO()\n"
        "assert main(['list', '--json'], out=buf) == 0\n"
        "bad = sorted({'torch', 'numpy', 'scipy'} & set(sys.modules))\n"
        "assert not bad, bad\n"
        "import json; print(len(json.loads(buf.getvalue())))\n"
    )
    result = run(sys.executable, "-c", code)
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) == 38
    listed = run(CLI, "list")
    assert listed.returncode == 0 and "38 papers in the installed distributions" in listed.stdout


def test_installed_cards_are_the_tree_cards_and_the_seeds():
    installed = discover_cards()
    tree = load_cards_from_tree(ROOT)
    assert set(installed) == set(tree) == {p.stem for p in (ROOT / "seeds").glob("*.md")}
    assert len(installed) == 38
    for slug, card in installed.items():
        assert card.to_dict() == tree[slug].to_dict(), slug


def test_seeds_and_readme_tables_are_generated_from_the_cards():
    result = run(sys.executable, "-m", "iclr25.core.cards", "render", "--check", "--root", str(ROOT))
    assert result.returncode == 0, "stale generated files; run `python -m iclr25.core.cards render`:\n" + result.stdout


def test_cards_and_experiments_agree():
    cards = discover_cards()
    eps = {ep.name: ep for ep in metadata.entry_points(group="iclr25.experiments")}
    for slug in registry.slugs():
        assert slug in cards, f"experiment {slug!r} has no card"
        assert cards[slug].status != "planned", f"{slug} has a reproduction but its card says planned"
        assert eps[slug].value.startswith(cards[slug].module + "."), (eps[slug].value, cards[slug].module)
        experiment = registry.get(slug)
        assert experiment.card.to_dict() == cards[slug].to_dict()
    for slug, card in cards.items():
        if card.status_kind in ("reproduced", "partial") or card.status == "implemented":
            assert slug in registry.slugs(), f"{slug} is {card.status!r} but registers no experiment"


def test_each_card_lives_in_its_own_distribution():
    for card in discover_cards().values():
        domain = card.package.removeprefix("iclr25-")
        assert domain in DOMAINS and card.module.split(".")[:2] == ["iclr25", domain], card.source


def test_reproduce_unknown_slug_exits_2_naming_known_slugs(tmp_path):
    result = run(CLI, "reproduce", "nosuch", "--out", str(tmp_path))
    assert result.returncode == 2
    assert "nosuch" in result.stderr and "ltc" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_info_prints_a_card():
    result = run(CLI, "info", "ltc", "--json")
    assert result.returncode == 0
    assert json.loads(result.stdout)["arxiv"] == "2403.07320"


def test_no_distribution_owns_the_namespace():
    assert not list(ROOT.glob("packages/*/src/iclr25/__init__.py"))
    import iclr25

    assert getattr(iclr25, "__file__", None) is None  # a PEP 420 namespace package
