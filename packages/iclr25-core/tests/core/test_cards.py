import copy
import io
import sys

import pytest

from iclr25.core import cards, cli
from iclr25.core.cards import (
    README_BEGIN,
    README_END,
    CardError,
    discover_cards,
    load_card,
    load_cards_from_tree,
    parse_card,
    render_readme_table,
    render_seed,
)

GOOD = {
    "slug": "toy",
    "title": "A Toy Paper",
    "arxiv": "2401.00001",
    "official_code": "",
    "package": "iclr25-core",
    "module": "iclr25.core.toy",
    "status": "planned",
    "summary": "Does  a\n thing.",
    "claims": [
        {"id": "gain", "text": "it gains", "metric": "dB, higher is better", "paper": 1.5, "gated": True},
        {"id": "context", "text": "context", "metric": "s", "paper": "about 2x", "gated": False},
    ],
    "ours": {"gain": 1.4, "command": "iclr25 reproduce toy --quick"},
}


def test_parse_good_card():
    card = parse_card(GOOD, source="toy.toml")
    assert card.slug == "toy" and card.summary == "Does a thing."
    assert [c.id for c in card.claims] == ["gain", "context"]
    assert card.claim("gain").paper == 1.5 and card.claim("context").gated is False
    assert card.arxiv_url == "https://arxiv.org/abs/2401.00001"
    assert card.status_kind == "planned"
    with pytest.raises(KeyError, match="no claim"):
        card.claim("nope")


def _mutate(path, value):
    data = copy.deepcopy(GOOD)
    target = data
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return data


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (("title",), KeyError, "'title'"),
        (("summary",), "  ", "'summary'"),
        (("slug",), "Bad-Slug", "'slug'"),
        (("status",), "done", "'status'"),
        (("status",), "partial:", "'status'"),
        (("arxiv",), 2401, "'arxiv'"),
        (("claims",), [], "'claims'"),
        (("claims", 0, "id"), "context", "'id'"),
        (("claims", 0, "id"), "Gain", "'id'"),
        (("claims", 0, "paper"), True, "'paper'"),
        (("claims", 0, "paper"), "", "'paper'"),
        (("claims", 0, "gated"), "yes", "'gated'"),
        (("claims", 1, "metric"), KeyError, "'metric'"),
        (("ours",), {"unknown": 1}, "'ours.unknown'"),
        (("ours",), 1.4, "'ours' must be a table"),
        (("claims", 0), "gain", r"claims\[0\] must be a table"),
        (("official_code",), None, "'official_code'"),
    ],
)
def test_malformed_card_names_the_field(path, value, field):
    with pytest.raises(CardError, match=field):
        parse_card(_mutate(path, value), source="toy.toml")


def test_partial_status_accepted():
    assert parse_card(_mutate(("status",), "partial: no GPU run"), "toy.toml").status_kind == "partial"


def test_a_card_must_be_a_table():
    with pytest.raises(CardError, match=r"toy\.toml: a card must be a TOML table, got list"):
        parse_card([GOOD], source="toy.toml")


TOY_TOML = """slug = "toy"
title = "A Toy Paper"
package = "iclr25-core"
module = "iclr25.core.toy"
status = "planned"
summary = "Does a thing."

[[claims]]
id = "gain"
text = "it gains"
metric = "dB"
paper = 1.5
"""


def test_file_name_must_match_slug(tmp_path):
    (tmp_path / "toy.toml").write_text(TOY_TOML)
    assert load_card(tmp_path / "toy.toml").slug == "toy"
    path = tmp_path / "other.toml"
    path.write_text(TOY_TOML)
    with pytest.raises(CardError, match=r"field 'slug' is 'toy' but the file is named 'other\.toml'"):
        load_card(path)


def test_invalid_toml_names_the_file(tmp_path):
    path = tmp_path / "toy.toml"
    path.write_text("slug = \n")
    with pytest.raises(CardError, match=r"toy\.toml: not valid TOML"):
        load_card(path)


def test_rendering_shows_paper_and_ours():
    card = parse_card(GOOD, source="toy.toml")
    seed = render_seed(card)
    assert "| `gain` | it gains | dB, higher is better | 1.5 | 1.4 | yes |" in seed
    assert "report-only" in seed and "iclr25 reproduce toy" in seed
    table = render_readme_table({"toy": card})
    assert "[A Toy Paper](seeds/toy.md)" in table and "1 papers: 1 planned." in table


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("slug = \n", r"bad\.toml: not valid TOML"),
        (TOY_TOML.replace('"toy"', '"bad"').replace("planned", "done"), r"bad\.toml: field 'status'"),
    ],
)
def test_malformed_installed_card_is_named_and_the_cli_exits_2(tmp_path, monkeypatch, request, text, message):
    """Cards found through the ``iclr25.cards`` entry points, as installed distributions ship them."""
    name = f"iclr25_fixture_cards_{len(text)}"
    folder = tmp_path / name / "cards"
    folder.mkdir(parents=True)
    (tmp_path / name / "__init__.py").write_text("")
    (folder / "toy.toml").write_text(TOY_TOML)
    monkeypatch.syspath_prepend(str(tmp_path))
    request.addfinalizer(lambda: sys.modules.pop(name, None))
    point = cards.metadata.EntryPoint("fixture", name, cards.ENTRY_POINT_GROUP)
    monkeypatch.setattr(cards.metadata, "entry_points", lambda group=None: [point] if group == point.group else [])
    assert list(discover_cards()) == ["toy"] and discover_cards()["toy"].source == f"{name}/cards/toy.toml"
    (folder / "bad.toml").write_text(text)
    with pytest.raises(CardError, match=message):
        discover_cards()
    err = io.StringIO()
    assert cli.main(["list"], out=io.StringIO(), err=err) == 2
    assert "malformed card" in err.getvalue() and "bad.toml" in err.getvalue()


def _tree(root, package="iclr25-core", domain="core", slug="toy"):
    folder = root / "packages" / package / "src" / "iclr25" / domain / "cards"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{slug}.toml").write_text(TOY_TOML.replace('"toy"', f'"{slug}"').replace("iclr25-core", package))
    readme = root / "packages" / package / "README.md"
    readme.write_text(f"# {package}\n\n{README_BEGIN}\nold\n{README_END}\n")


def test_render_writes_seeds_and_tables_then_check_is_clean(tmp_path, capsys):
    _tree(tmp_path)
    _tree(tmp_path, "iclr25-theory", "theory", "other")
    (tmp_path / "README.md").write_text(f"intro\n{README_BEGIN}\nstale\n{README_END}\nmore\n")
    (tmp_path / "seeds").mkdir()
    (tmp_path / "seeds" / "gone.md").write_text("a paper that no longer has a card")
    assert cards.main(["render", "--check", "--root", str(tmp_path)]) == 1
    assert cards.main(["render", "--root", str(tmp_path)]) == 0
    found = load_cards_from_tree(tmp_path)
    assert sorted(p.name for p in (tmp_path / "seeds").iterdir()) == ["other.md", "toy.md"]
    assert (tmp_path / "seeds" / "toy.md").read_text() == render_seed(found["toy"])
    readme = (tmp_path / "README.md").read_text()
    assert readme == f"intro\n{render_readme_table(found)}\nmore\n"
    core_readme = (tmp_path / "packages" / "iclr25-core" / "README.md").read_text()
    assert "../../seeds/toy.md" in core_readme and "other" not in core_readme
    capsys.readouterr()
    assert cards.main(["render", "--check", "--root", str(tmp_path)]) == 0 and capsys.readouterr().out == ""
    (tmp_path / "README.md").write_text("no markers\n")
    with pytest.raises(CardError, match="status-table markers"):
        cards.main(["render", "--check", "--root", str(tmp_path)])


def test_a_slug_defined_twice_is_an_error(tmp_path):
    _tree(tmp_path)
    _tree(tmp_path, "iclr25-theory", "theory")
    with pytest.raises(CardError, match="slug 'toy' is defined twice"):
        load_cards_from_tree(tmp_path)
