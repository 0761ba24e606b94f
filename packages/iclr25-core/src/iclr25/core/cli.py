"""The ``iclr25`` command: list papers, show a card, report the environment, run reproductions.

Exit codes: 0 success (every gated claim held); 1 a gated claim did not hold or an experiment
failed; 2 usage error (unknown slug, bad device, unwritable output, malformed card). Usage errors
are detected before any experiment runs, so no partial results.json is ever written.

``iclr25 list`` imports neither torch nor any paper module: it reads the cards only.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from . import __version__
from .cards import Card, CardError, discover_cards

__all__ = ["format_table", "main"]

EXIT_OK, EXIT_NOT_HELD, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """Bad command-line input; reported with exit code 2."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="iclr25",
        description="ICLR 2025 papers as library components: list, inspect, reproduce.",
    )
    parser.add_argument("--version", action="version", version=f"iclr25-core {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p_list = sub.add_parser("list", help="every paper of the installed distributions, with its status")
    p_list.add_argument("--json", action="store_true", help="print the cards as JSON")

    p_info = sub.add_parser("info", help="one paper's card: paper, arXiv id, module, claims, status")
    p_info.add_argument("slug")
    p_info.add_argument("--json", action="store_true", help="print the card as JSON")

    p_env = sub.add_parser(
        "env", help="versions and host facts that can move a reproduction's figures (paste into bug reports)"
    )
    p_env.add_argument("--json", action="store_true", help="print them as JSON")

    p_rep = sub.add_parser("reproduce", help="run small-scale reproductions and compare with the paper")
    p_rep.add_argument("slugs", nargs="*", metavar="SLUG", help="papers to reproduce")
    p_rep.add_argument("--all", action="store_true", help="every paper that has a reproduction")
    p_rep.add_argument("--quick", action="store_true", help="the <= 60 s setting of each reproduction")
    p_rep.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N (default: auto)")
    p_rep.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    p_rep.add_argument(
        "--out",
        default="iclr25-results",
        help="output directory (default: ./iclr25-results); one paper writes DIR/results.json, "
        "several write DIR/<slug>/results.json",
    )
    p_rep.add_argument("--json", action="store_true", help="print results as JSON on stdout (table on stderr)")
    return parser


# ---------------------------------------------------------------------------------------------
# formatting


def _cell(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _holds(value: bool | None) -> str:
    return "report" if value is None else ("yes" if value else "NOT HELD")


def _render(headers: Sequence[str], rows: Sequence[Sequence[str]], width: int = 56) -> str:
    clipped = [[c if len(c) <= width else c[: width - 1] + "…" for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in clipped)) if clipped else len(h) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    rule = "  ".join("-" * w for w in widths)
    body = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in clipped]
    return "\n".join([line.rstrip(), rule, *body])


def format_table(results: Sequence[dict[str, Any]], several: bool | None = None) -> str:
    """One table for one or several results documents: claim · paper · ours · baseline · holds?

    ``several`` adds a leading paper column (default: when there is more than one document).
    """
    several = len(results) > 1 if several is None else several
    headers = (["paper"] if several else []) + [
        "claim",
        "metric",
        "paper",
        "ours",
        "baseline",
        "holds?",
    ]
    rows = []
    for doc in results:
        for c in doc["claims"]:
            row = [
                c["id"],
                c["metric"],
                _cell(c["paper"]),
                _cell(c["ours"]),
                _cell(c["baseline"]),
                _holds(c["holds"]),
            ]
            rows.append(([doc["slug"]] if several else []) + row)
    return _render(headers, rows, width=36)  # full texts are in results.json


# ---------------------------------------------------------------------------------------------
# commands


def _cards() -> dict[str, Card]:
    try:
        return discover_cards()
    except CardError as err:
        raise UsageError(f"malformed card: {err}") from err


def _cmd_list(args: argparse.Namespace, out: TextIO) -> int:
    cards = _cards()
    from .experiments import registry

    registered = set(registry.slugs())
    if args.json:
        docs = [dict(c.to_dict(), reproducible=c.slug in registered) for c in cards.values()]
        print(json.dumps(docs, indent=2), file=out)
        return EXIT_OK
    rows = [
        [c.slug, c.package, c.status, "yes" if c.slug in registered else "—", c.title]
        for c in sorted(cards.values(), key=lambda c: (c.package, c.slug))
    ]
    print(_render(["slug", "package", "status", "reproduce", "title"], rows, width=70), file=out)
    print(
        f"\n{len(cards)} papers in the installed distributions; {len(registered & set(cards))} reproducible.",
        file=out,
    )
    return EXIT_OK


def _cmd_info(args: argparse.Namespace, out: TextIO) -> int:
    cards = _cards()
    if args.slug not in cards:
        raise UsageError(f"unknown slug {args.slug!r}; known slugs: {', '.join(cards) or '(none installed)'}")
    card = cards[args.slug]
    if args.json:
        print(json.dumps(card.to_dict(), indent=2), file=out)
        return EXIT_OK
    print(f"{card.title}\n", file=out)
    for key, value in [
        ("slug", card.slug),
        ("arXiv", card.arxiv_url or "none"),
        ("official code", card.official_code or "none known"),
        ("package", card.package),
        ("module", card.module),
        ("status", card.status),
        ("reproduce", f"{card.reproduce_command} [--quick]"),
    ]:
        print(f"  {key:<14}{value}", file=out)
    print(f"\n  {card.summary}\n", file=out)
    rows = [
        [
            c.id,
            c.metric,
            _cell(c.paper),
            _cell(card.ours.get(c.id)),
            "yes" if c.gated else "report-only",
        ]
        for c in card.claims
    ]
    print(_render(["claim", "metric", "paper", "ours", "gated"], rows), file=out)
    return EXIT_OK


def _cmd_env(args: argparse.Namespace, out: TextIO) -> int:
    import numpy  # noqa: F401  (loads NumPy's BLAS so that its kernel family is reported)

    from .experiments import platform_info, versions

    doc = {"versions": versions(), "platform": platform_info()}
    if args.json:
        print(json.dumps(doc, indent=2), file=out)
        return EXIT_OK
    for section, values in doc.items():
        print(f"{section}:", file=out)
        for key, value in values.items():
            if isinstance(value, dict):
                value = " ".join(f"{k}={v}" for k, v in value.items()) or "(none set)"
            elif isinstance(value, list):
                value = "; ".join(value) or "(none loaded)"
            print(f"  {key:<22}{value if value is not None else 'unknown'}", file=out)
    return EXIT_OK


def _cmd_reproduce(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from .experiments import registry

    # 1. which papers: every check here happens before any work starts
    cards = _cards()
    registered = set(registry.slugs())
    known = sorted(set(cards) | registered)
    if args.all and args.slugs:
        raise UsageError("give either SLUG... or --all, not both")
    if not args.all and not args.slugs:
        raise UsageError(f"name at least one SLUG or use --all; known slugs: {', '.join(known)}")
    if args.all:
        slugs = sorted(registered)
        skipped = sorted(set(cards) - registered)
    else:
        unknown = [s for s in args.slugs if s not in known]
        if unknown:
            raise UsageError(f"unknown slug(s) {', '.join(map(repr, unknown))}; known slugs: {', '.join(known)}")
        planned = [s for s in args.slugs if s not in registered]
        if planned:
            raise UsageError(
                f"{', '.join(planned)}: no reproduction yet (status: "
                f"{', '.join(cards[s].status if s in cards else '?' for s in planned)}); "
                f"reproducible: {', '.join(sorted(registered)) or 'none installed'}"
            )
        slugs = list(dict.fromkeys(args.slugs))
        skipped = []
    if args.seed < 0 or args.seed >= 2**32:
        raise UsageError(f"--seed must be in [0, 2**32), got {args.seed}")

    # 2. device: a clear error instead of a silent CPU fallback
    from .device import DeviceUnavailableError, parse_device, resolve_device

    try:
        parse_device(args.device)
        device = resolve_device(args.device)
    except (ValueError, DeviceUnavailableError) as exc:
        raise UsageError(f"--device: {exc}") from exc

    # 3. output directory must be writable before anything runs
    from .io import ensure_writable_dir, save_json, to_jsonable

    out_root = Path(args.out)
    try:
        ensure_writable_dir(out_root)
    except OSError as exc:
        raise UsageError(f"--out: {exc}") from exc

    # 4. run
    from .seed import seed_everything

    status = EXIT_OK
    results: list[dict[str, Any]] = []
    failures: list[str] = []
    for slug in slugs:
        target = out_root if len(slugs) == 1 and not args.all else out_root / slug
        try:
            experiment = registry.get(slug)
            target.mkdir(parents=True, exist_ok=True)
            seed_everything(args.seed)
            print(
                f"[iclr25] reproducing {slug} ({'quick' if args.quick else 'full'}, {device}, seed {args.seed})",
                file=err,
            )
            # plain JSON values (NumPy/torch numbers, NaN as "nan"), so --json prints exactly the file;
            # a value that cannot be written fails this paper here, before results.json is opened
            doc = to_jsonable(experiment.execute(quick=args.quick, device=device, seed=args.seed, out=target))
            save_json(target / "results.json", doc)
        except Exception as exc:  # one broken experiment must not hide the others' results
            failures.append(slug)
            status = EXIT_NOT_HELD
            print(f"[iclr25] {slug} failed: {type(exc).__name__}: {exc}", file=err)
            traceback.print_exc(file=err)
            continue
        results.append(doc)
        if any(c["holds"] is False for c in doc["claims"]):
            status = EXIT_NOT_HELD

    table_stream = err if args.json else out
    if results:
        print(format_table(results, several=args.all or len(slugs) > 1), file=table_stream)
    if skipped:
        print(f"\nno reproduction yet (planned): {', '.join(skipped)}", file=table_stream)
    if failures:
        print(f"\nfailed: {', '.join(failures)}", file=table_stream)
    if not slugs:
        print("no reproductions are registered in the installed distributions", file=table_stream)
    written = ", ".join(
        str((out_root if len(slugs) == 1 and not args.all else out_root / d["slug"]) / "results.json") for d in results
    )
    if written:
        print(f"\nresults: {written}", file=table_stream)
    if args.json:
        payload: Any = results[0] if (len(slugs) == 1 and not args.all and results) else results
        print(json.dumps(payload, indent=2), file=out)
    return status


def main(argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Entry point of the ``iclr25`` command; returns the exit code."""
    out = out or sys.stdout
    err = err or sys.stderr
    parser = _parser()
    try:
        args = parser.parse_args(list(argv) if argv is not None else None)
    except SystemExit as exc:  # argparse already printed the message
        return int(exc.code or 0)
    try:
        if args.command == "list":
            return _cmd_list(args, out)
        if args.command == "info":
            return _cmd_info(args, out)
        if args.command == "env":
            return _cmd_env(args, out)
        return _cmd_reproduce(args, out, err)
    except UsageError as exc:
        print(f"iclr25 {args.command}: error: {exc}", file=err)
        return EXIT_USAGE
