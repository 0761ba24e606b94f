import copy

import pytest

from iclr25.core.cards import CardError, load_card, parse_card, render_readme_table, render_seed

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
    ],
)
def test_malformed_card_names_the_field(path, value, field):
    with pytest.raises(CardError, match=field):
        parse_card(_mutate(path, value), source="toy.toml")


def test_partial_status_accepted():
    assert parse_card(_mutate(("status",), "partial: no GPU run"), "toy.toml").status_kind == "partial"


def test_file_name_must_match_slug(tmp_path):
    path = tmp_path / "other.toml"
    path.write_text('slug = "toy"\n')
    with pytest.raises(CardError, match=r"other\.toml"):
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
