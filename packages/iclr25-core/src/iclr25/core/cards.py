"""Paper cards: the single source of truth for each paper's metadata and claims.

A card is a TOML file shipped as package data in ``iclr25/<domain>/cards/<slug>.toml`` (format:
``docs/card-format.md``). Distributions announce their cards with an entry point in the group
``iclr25.cards`` whose value is the domain package (``compress = "iclr25.compress"``), so cards
are found without importing torch or any paper module.

Run ``python -m iclr25.core.cards render --root .`` in a checkout to regenerate ``seeds/*.md``
and the README status table from the cards; ``--check`` exits 1 when they are stale.
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import metadata, resources
from pathlib import Path
from typing import Any

__all__ = [
    "Card",
    "CardError",
    "Claim",
    "discover_cards",
    "load_card",
    "load_cards_from_tree",
    "parse_card",
    "render_readme_table",
    "render_seed",
]

ENTRY_POINT_GROUP = "iclr25.cards"
STATUSES = ("planned", "implemented", "reproduced")
_ID_RE = re.compile(r"^[a-z][a-z0-9_]*$")
_REQUIRED = ("slug", "title", "package", "module", "status", "summary")
_OURS_META = ("command", "date")


class CardError(ValueError):
    """A card is malformed; the message names the file and the field."""


@dataclass(frozen=True)
class Claim:
    """One claim of a paper, with the paper's own figure.

    ``gated`` claims decide ``holds`` in a reproduction; the others are printed for context.
    ``quick = False`` limits the gate to full runs: a ``--quick`` run may leave such a claim
    unmeasured or report it with ``holds=None`` (its setting is too small to decide it).
    """

    id: str
    text: str
    metric: str
    paper: float | int | str
    gated: bool = True
    quick: bool = True

    def gated_in(self, quick: bool) -> bool:
        """Whether a run of this kind (quick or full) must decide ``holds`` for this claim."""
        return self.gated and (self.quick or not quick)


@dataclass(frozen=True)
class Card:
    """A paper card (see ``docs/card-format.md``)."""

    slug: str
    title: str
    arxiv: str
    official_code: str
    package: str
    module: str
    status: str
    summary: str
    claims: tuple[Claim, ...]
    ours: Mapping[str, Any] = field(default_factory=dict)
    source: str = "<memory>"

    @property
    def status_kind(self) -> str:
        """``planned``, ``implemented``, ``reproduced`` or ``partial``."""
        return "partial" if self.status.startswith("partial") else self.status

    @property
    def arxiv_url(self) -> str:
        return f"https://arxiv.org/abs/{self.arxiv}" if self.arxiv else ""

    @property
    def reproduce_command(self) -> str:
        return f"iclr25 reproduce {self.slug}"

    def claim(self, claim_id: str) -> Claim:
        for claim in self.claims:
            if claim.id == claim_id:
                return claim
        raise KeyError(f"card {self.slug!r} has no claim {claim_id!r}; claims: {[c.id for c in self.claims]}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "slug": self.slug,
            "title": self.title,
            "arxiv": self.arxiv,
            "official_code": self.official_code,
            "package": self.package,
            "module": self.module,
            "status": self.status,
            "summary": self.summary,
            "claims": [
                {"id": c.id, "text": c.text, "metric": c.metric, "paper": c.paper, "gated": c.gated, "quick": c.quick}
                for c in self.claims
            ],
            "ours": dict(self.ours),
        }


def _need_str(data: Mapping[str, Any], key: str, where: str, allow_empty: bool = False) -> str:
    value = data.get(key)
    if not isinstance(value, str) or (not allow_empty and not value.strip()):
        raise CardError(f"{where}: field {key!r} must be a non-empty string, got {value!r}")
    return value.strip()


def parse_card(data: Mapping[str, Any], source: str = "<memory>") -> Card:
    """Validate a card's decoded TOML and build a :class:`Card`.

    Raises
    ------
    CardError
        Naming ``source`` and the offending field.
    """
    if not isinstance(data, Mapping):
        raise CardError(f"{source}: a card must be a TOML table, got {type(data).__name__}")
    for key in _REQUIRED:
        _need_str(data, key, source)
    slug = data["slug"].strip()
    if not _ID_RE.match(slug):
        raise CardError(f"{source}: field 'slug' must be snake_case, got {slug!r}")
    if source.endswith(".toml") and Path(source).stem != slug:
        raise CardError(f"{source}: field 'slug' is {slug!r} but the file is named {Path(source).name!r}")
    status = data["status"].strip()
    if status not in STATUSES and not re.match(r"^partial: \S", status):
        raise CardError(
            f"{source}: field 'status' must be one of {list(STATUSES)} or 'partial: <what is missing>', got {status!r}"
        )
    for key in ("arxiv", "official_code"):
        if key in data and not isinstance(data[key], str):
            raise CardError(f'{source}: field {key!r} must be a string ("" when none), got {data[key]!r}')
    raw_claims = data.get("claims")
    if not isinstance(raw_claims, list) or not raw_claims:
        raise CardError(f"{source}: field 'claims' must list at least one [[claims]] table")
    claims: list[Claim] = []
    for i, raw in enumerate(raw_claims):
        where = f"{source}: claims[{i}]"
        if not isinstance(raw, Mapping):
            raise CardError(f"{where} must be a table")
        claim_id = _need_str(raw, "id", where)
        if not _ID_RE.match(claim_id):
            raise CardError(f"{where}: field 'id' must be snake_case, got {claim_id!r}")
        if any(c.id == claim_id for c in claims):
            raise CardError(f"{where}: field 'id' {claim_id!r} is used twice")
        paper = raw.get("paper")
        if isinstance(paper, bool) or not isinstance(paper, (int, float, str)) or paper == "":
            raise CardError(f"{where}: field 'paper' must be a number or a non-empty string, got {paper!r}")
        gated = raw.get("gated", True)
        if not isinstance(gated, bool):
            raise CardError(f"{where}: field 'gated' must be true or false, got {gated!r}")
        in_quick = raw.get("quick", True)
        if not isinstance(in_quick, bool):
            raise CardError(f"{where}: field 'quick' must be true or false, got {in_quick!r}")
        if not gated and not in_quick:
            raise CardError(f"{where}: field 'quick' = false only applies to gated claims")
        claims.append(
            Claim(
                claim_id,
                _need_str(raw, "text", where),
                _need_str(raw, "metric", where),
                paper,
                gated,
                in_quick,
            )
        )
    ours = data.get("ours", {})
    if not isinstance(ours, Mapping):
        raise CardError(f"{source}: field 'ours' must be a table, got {ours!r}")
    ids = {c.id for c in claims}
    for key in ours:
        if key not in ids and key not in _OURS_META:
            raise CardError(f"{source}: field 'ours.{key}' names no claim (claims: {sorted(ids)})")
    return Card(
        slug=slug,
        title=data["title"].strip(),
        arxiv=str(data.get("arxiv", "")).strip(),
        official_code=str(data.get("official_code", "")).strip(),
        package=data["package"].strip(),
        module=data["module"].strip(),
        status=status,
        summary=" ".join(data["summary"].split()),
        claims=tuple(claims),
        ours=dict(ours),
        source=source,
    )


def load_card(path: str | Path) -> Card:
    """Read and validate one card file."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as err:
        raise CardError(f"{path}: not valid TOML: {err}") from err
    return parse_card(data, source=str(path))


def _index(cards: Iterable[Card]) -> dict[str, Card]:
    found: dict[str, Card] = {}
    for card in cards:
        if card.slug in found:
            raise CardError(f"slug {card.slug!r} is defined twice: {found[card.slug].source} and {card.source}")
        found[card.slug] = card
    return dict(sorted(found.items()))


def discover_cards() -> dict[str, Card]:
    """Cards of every installed distribution, by slug (no torch, no paper module imported)."""
    cards: list[Card] = []
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        folder = resources.files(ep.value) / "cards"
        if not folder.is_dir():
            continue
        for item in sorted(folder.iterdir(), key=lambda p: p.name):
            if item.name.endswith(".toml"):
                try:
                    data = tomllib.loads(item.read_text(encoding="utf-8"))
                except tomllib.TOMLDecodeError as err:
                    raise CardError(f"{ep.value}/cards/{item.name}: not valid TOML: {err}") from err
                cards.append(parse_card(data, source=f"{ep.value}/cards/{item.name}"))
    return _index(cards)


def load_cards_from_tree(root: str | Path) -> dict[str, Card]:
    """Cards from a source checkout (``packages/*/src/iclr25/*/cards/*.toml``), by slug."""
    paths = sorted(Path(root).glob("packages/*/src/iclr25/*/cards/*.toml"))
    return _index(load_card(p) for p in paths)


# ---------------------------------------------------------------------------------------------
# Rendering seeds/*.md and the README status table


def _gate_label(claim: Claim) -> str:
    if not claim.gated:
        return "report-only"
    return "yes" if claim.quick else "yes (full run only)"


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def render_seed(card: Card) -> str:
    """The Markdown seed card for ``card`` (generated: edit the TOML, not this)."""
    arxiv = f"[{card.arxiv}]({card.arxiv_url})" if card.arxiv else "none"
    code = card.official_code or "none known"
    lines = [
        f"<!-- generated from the card {card.slug}.toml of {card.package} by"
        " `python -m iclr25.core.cards render`; edit the card, not this file -->",
        f"# {card.title}",
        "",
        f"- **slug:** `{card.slug}`",
        f"- **arXiv:** {arxiv}",
        f"- **official code:** {code}",
        f"- **package:** `{card.package}` · **module:** `{card.module}`",
        f"- **reproduce:** `{card.reproduce_command}` (quick: `{card.reproduce_command} --quick`)",
        f"- **status:** {card.status}",
        "",
        card.summary,
        "",
        "## Claims",
        "",
        "| id | claim | metric | paper | ours | gated |",
        "|---|---|---|---|---|---|",
    ]
    for c in card.claims:
        ours = _fmt(card.ours[c.id]) if c.id in card.ours else "—"
        lines.append(f"| `{c.id}` | {c.text} | {c.metric} | {_fmt(c.paper)} | {ours} | {_gate_label(c)} |")
    if "command" in card.ours or "date" in card.ours:
        lines += [
            "",
            f"Ours measured with `{card.ours.get('command', '?')}` on {card.ours.get('date', '?')}.",
        ]
    return "\n".join(lines) + "\n"


README_BEGIN = "<!-- status-table:begin (generated by `python -m iclr25.core.cards render`) -->"
README_END = "<!-- status-table:end -->"


def render_readme_table(cards: Mapping[str, Card], seeds_prefix: str = "seeds/") -> str:
    """The README status table, one row per paper, grouped by package (links into ``seeds/``)."""
    rows = [
        README_BEGIN,
        "",
        "| package | paper | arXiv | module | status |",
        "|---|---|---|---|---|",
    ]
    for card in sorted(cards.values(), key=lambda c: (c.package, c.slug)):
        arxiv = f"[{card.arxiv}]({card.arxiv_url})" if card.arxiv else "—"
        link = f"[{card.title}]({seeds_prefix}{card.slug}.md)"
        rows.append(f"| {card.package} | {link} | {arxiv} | `{card.module}` | {card.status} |")
    counts: dict[str, int] = {}
    for card in cards.values():
        counts[card.status_kind] = counts.get(card.status_kind, 0) + 1
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    rows += ["", f"{len(cards)} papers: {summary}.", "", README_END]
    return "\n".join(rows)


def _replace_table(path: Path, table: str) -> str:
    """``path``'s text with the block between the status-table markers replaced by ``table``."""
    text = path.read_text(encoding="utf-8")
    if README_BEGIN not in text or README_END not in text:
        raise CardError(f"{path}: missing the status-table markers {README_BEGIN!r} ... {README_END!r}")
    head, rest = text.split(README_BEGIN, 1)
    _, tail = rest.split(README_END, 1)
    return head + table + tail


def _render_all(root: Path, check: bool) -> list[str]:
    """Write (or, with ``check``, compare) seeds/*.md and README.md; return the stale paths."""
    from .io import atomic_write_text

    cards = load_cards_from_tree(root)
    wanted: dict[Path, str] = {root / "seeds" / f"{slug}.md": render_seed(c) for slug, c in cards.items()}
    readme = root / "README.md"
    wanted[readme] = _replace_table(readme, render_readme_table(cards))
    for package_readme in sorted(root.glob("packages/iclr25-*/README.md")):
        mine = {s: c for s, c in cards.items() if c.package == package_readme.parent.name}
        if mine:
            wanted[package_readme] = _replace_table(package_readme, render_readme_table(mine, "../../seeds/"))
    stale = [str(p) for p, body in wanted.items() if not p.exists() or p.read_text(encoding="utf-8") != body]
    extra = (
        sorted(str(p) for p in (root / "seeds").glob("*.md") if p.stem not in cards)
        if (root / "seeds").is_dir()
        else []
    )
    if not check:
        (root / "seeds").mkdir(exist_ok=True)
        for path, body in wanted.items():
            if str(path) in stale:
                atomic_write_text(path, body)
        for path in extra:
            Path(path).unlink()
    return stale + extra


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m iclr25.core.cards", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    render = sub.add_parser("render", help="regenerate seeds/*.md and the README status table")
    render.add_argument("--root", default=".", help="repository root (default: .)")
    render.add_argument("--check", action="store_true", help="only report stale files; exit 1 if any")
    args = parser.parse_args(argv)
    stale = _render_all(Path(args.root), check=args.check)
    for path in stale:
        print(("stale: " if args.check else "wrote: ") + path)
    return 1 if (args.check and stale) else 0


if __name__ == "__main__":
    sys.exit(main())
